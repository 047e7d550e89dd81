/* cgroup_scope: a delegated transient scope per gadget (cgroup_scope.h). */
#include "cgroup_scope.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"
#include "scope.h"

#define LEAF "gadget"

static void scope_unit_name(char *buf, size_t len, const char *name, pid_t pid)
{
        snprintf(buf, len, "gadgetd-%s-%d.scope", name, (int)pid);
}

/* pid's cgroup v2 path ("0::PATH"), into buf: 0 or -errno. */
static int proc_cgroup(pid_t pid, char *buf, size_t len)
{
        char path[64], line[PATH_MAX + 8];
        int e = -ENOENT;
        snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "0::", 3) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        e = strlen(line + 3) < len ? (snprintf(buf, len, "%s", line + 3), 0) : -ENAMETOOLONG;
                }
        fclose(f);
        return e;
}

/* The scope's directory if pid is in it (at its top, or in its leaf when
 * leaf): why this is safe to write below, the path ends in exactly the
 * unit systemd made for this gadget and climbs nowhere. */
static int scope_dir(const char *mount, const char *unit, pid_t pid, bool leaf, char **dir)
{
        char cg[PATH_MAX], tail[320];
        int e = proc_cgroup(pid, cg, sizeof cg);
        if (e < 0)
                return e;
        size_t n = strlen(cg), k = (size_t)snprintf(tail, sizeof tail, "/%s%s", unit, leaf ? "/" LEAF : "");
        if (cg[0] != '/' || strstr(cg, "/..") || n <= k || strcmp(cg + n - k, tail) != 0)
                return -ESRCH;
        if (leaf)
                cg[n - strlen("/" LEAF)] = '\0';
        return asprintf(dir, "%s%s", mount, cg) < 0 ? -ENOMEM : 0;
}

int cgroup_scope_make(const char *mount, const char *name, pid_t pid, const char *ctrls, char **dir, char *err,
                      size_t errlen)
{
        char unit[128], desc[128], serr[512], *top = NULL, word[32], text[24];
        int e;
        scope_unit_name(unit, sizeof unit, name, pid);
        snprintf(desc, sizeof desc, "gadget %s (gadgetd)", name);
        if ((e = scope_start(unit, desc, &pid, 1, serr, sizeof serr)) < 0) {
                snprintf(err, errlen, "cgroup v2: no scope %s from systemd: %s", unit, serr);
                return e;
        }
        if ((e = scope_dir(mount, unit, pid, false, &top)) < 0) {
                snprintf(err, errlen, "cgroup v2: the worker (pid %d) is not at the top of %s: %s", (int)pid, unit,
                         strerror(-e));
                return e;
        }
        if (asprintf(dir, "%s/" LEAF, top) < 0) {
                *dir = NULL;
                free(top);
                snprintf(err, errlen, "cgroup: out of memory");
                return -ENOMEM;
        }
        snprintf(text, sizeof text, "%d", (int)pid);
        if ((e = cgroup_mkdir(*dir)) < 0) {
                snprintf(err, errlen, "cgroup v2: cannot create %s: %s", *dir, strerror(-e));
                free(*dir);
                *dir = NULL;
                goto out;
        }
        if ((e = cgroup_write_file(*dir, "cgroup.procs", text)) < 0) {
                snprintf(err, errlen, "cgroup v2: cannot move the worker into %s: %s", *dir, strerror(-e));
                goto out;
        }
        /* Then, the scope's top empty, its controllers go down to the leaf. */
        for (const char *p = ctrls; e == 0 && *p;) {
                size_t w = strcspn(p, " ");
                snprintf(word, sizeof word, "+%.*s", (int)w, p);
                if ((e = cgroup_write_file(top, "cgroup.subtree_control", word)) < 0)
                        snprintf(err, errlen, "cgroup v2: cannot hand %s to %s: %s", word + 1, *dir, strerror(-e));
                p += w + (p[w] == ' ');
        }
out:
        free(top);
        return e;
}

int cgroup_scope_find(const char *mount, const char *name, pid_t pid, char **dir, char *err, size_t errlen)
{
        char unit[128], *top = NULL;
        scope_unit_name(unit, sizeof unit, name, pid);
        int e = scope_dir(mount, unit, pid, true, &top);
        if (e < 0) {
                snprintf(err, errlen, "its worker (pid %d) is not in %s/" LEAF ": %s", (int)pid, unit, strerror(-e));
                return e;
        }
        e = asprintf(dir, "%s/" LEAF, top) < 0 ? -ENOMEM : 0;
        free(top);
        if (e < 0)
                snprintf(err, errlen, "cgroup: out of memory");
        return e;
}
