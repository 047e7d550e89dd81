/* cgroup_host: which cgroups gadgetd may use — its own cgroup in each
 * hierarchy, the v2 delegation, the instance directories — and the small
 * file helpers of the cgroup module. */
#include "cgroup.h"
#include "system/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scope.h"

#define INSTANCE_PREFIX "gadgetd."
#define SUPERVISOR "supervisor"

static const char *const ctrl_names[CGROUP_N_CTRL] = { "memory", "pids", "cpu", "cpuacct", "cpuset" };

/* One cgroup file system from /proc/self/mountinfo. */
struct cg_mount {
        char root[PATH_MAX];    /* the hierarchy's path mounted there */
        char point[PATH_MAX];
        char super[512];        /* super options: the v1 controllers */
};

/* Why 0755 whatever the umask (gadgetd.service has UMask=0077): a
 * sandbox's cgroup2 mount is looked up from the hierarchy's root down to
 * the gadget's cgroup with the gadget's credentials, to which host root's
 * directories are "other"; one directory without o+x on the way and the
 * mount fails (EACCES). Searchable is all they are: their files stay
 * root's, as systemd's own cgroups are. */
int cgroup_mkdir(const char *dir)
{
        if (mkdir(dir, 0755) < 0)
                return -errno;
        if (chmod(dir, 0755) < 0) {
                int e = -errno;
                rmdir(dir);
                return e;
        }
        return 0;
}

int cgroup_write_file(const char *dir, const char *file, const char *text)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
                return -ENAMETOOLONG;
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n = write(fd, text, len);
        int e = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
        close(fd);
        return e;
}

int cgroup_read_file(const char *dir, const char *file, char *buf, size_t len)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
                return -ENAMETOOLONG;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, len - 1);
        int e = n < 0 ? -errno : (int)n;
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return e;
}

bool cgroup_file_exists(const char *dir, const char *file)
{
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        return access(path, F_OK) == 0;
}

/* True if word is an item of list, items separated by sep. */
static bool has_word(const char *list, const char *word, char sep)
{
        size_t n = strlen(word);
        for (const char *p = list;;) {
                if (strncmp(p, word, n) == 0 && (p[n] == sep || p[n] == '\0' || p[n] == '\n'))
                        return true;
                p = strchr(p, sep);
                if (!p)
                        return false;
                p++;
        }
}

/* Undoes mountinfo's octal escapes (\040 for a blank) in place. */
static void unescape(char *s)
{
        char *o = s;
        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *o++ = *p;
                }
        }
        *o = '\0';
}

/* The whole of a /proc file, NUL-terminated; NULL on failure (errno set). */
static char *read_all(const char *path, size_t *len)
{
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t cap = 0, n = 0;
        if (!f)
                return NULL;
        for (;;) {
                if (cap - n < 4096) {
                        char *b = realloc(buf, cap += 16384);
                        if (!b) {
                                free(buf);
                                fclose(f);
                                errno = ENOMEM;
                                return NULL;
                        }
                        buf = b;
                }
                size_t r = fread(buf + n, 1, cap - n - 1, f);
                n += r;
                if (r == 0)
                        break;
        }
        fclose(f);
        buf[n] = '\0';
        *len = n;
        return buf;
}

/* /proc/self/mountinfo and /proc/self/cgroup, read once per open. */
struct cg_tables {
        char *mountinfo, *cgroup;
        size_t mountinfo_len, cgroup_len;
};

/* One of the tables as a stream of lines. */
static FILE *table(char *text, size_t len)
{
        return len ? fmemopen(text, len, "r") : NULL;
}

/* The first mount of a cgroup2 file system (ctrl NULL) or of the v1
 * hierarchy that has ctrl. 0 or -ENOENT. */
static int find_mount(const struct cg_tables *t, const char *ctrl, struct cg_mount *m)
{
        FILE *f = table(t->mountinfo, t->mountinfo_len);
        char *line = NULL, type[32];
        size_t cap = 0;
        int e = -ENOENT;
        if (!f)
                return -ENOENT;
        while (e < 0 && getline(&line, &cap, f) > 0) {
                /* ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER */
                char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", m->root, m->point) != 2 ||
                    sscanf(sep + 3, "%31s %*s %511s", type, m->super) != 2)
                        continue;
                if (ctrl ? strcmp(type, "cgroup") == 0 && has_word(m->super, ctrl, ',')
                         : strcmp(type, "cgroup2") == 0) {
                        unescape(m->root);
                        unescape(m->point);
                        e = 0;
                }
        }
        free(line);
        fclose(f);
        return e;
}

/* gadgetd's cgroup path in the v2 hierarchy (ctrl NULL) or in the v1
 * hierarchy of ctrl, from /proc/self/cgroup. 0 or -ENOENT. */
static int own_path(const struct cg_tables *t, const char *ctrl, char *path, size_t len)
{
        FILE *f = table(t->cgroup, t->cgroup_len);
        char *line = NULL;
        size_t cap = 0;
        int e = -ENOENT;
        if (!f)
                return -ENOENT;
        while (e < 0 && getline(&line, &cap, f) > 0) {
                line[strcspn(line, "\n")] = '\0';
                /* ID:CONTROLLERS:PATH; the v2 line is 0::PATH */
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c1 = *c2 = '\0';
                bool v2 = strcmp(line, "0") == 0 && c1[1] == '\0';
                if (ctrl ? !v2 && has_word(c1 + 1, ctrl, ',') : v2) {
                        snprintf(path, len, "%s", c2 + 1);
                        e = 0;
                }
        }
        free(line);
        fclose(f);
        return e;
}

/* OWN as a directory: the mount point plus gadgetd's path below the
 * mount's root. -ENOENT if the cgroup is not under that root (another
 * cgroup namespace's view) or the path climbs with "..". */
static int own_dir(const struct cg_mount *m, const char *path, char **out)
{
        size_t rl = strlen(m->root);
        const char *rest;
        if (strstr(path, "/..") || path[0] != '/')
                return -ENOENT;
        if (strcmp(m->root, "/") == 0)
                rest = path;
        else if (strncmp(path, m->root, rl) == 0 && (path[rl] == '/' || path[rl] == '\0'))
                rest = path + rl;
        else
                return -ENOENT;
        if (strcmp(rest, "/") == 0)
                rest = "";
        return asprintf(out, "%s%s", m->point, rest) < 0 ? -ENOMEM : 0;
}

/* rmdir of dir's subdirectories, then of dir (cgroupfs drops the files). */
static int remove_tree(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        char sub[PATH_MAX];
        while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
                    snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) < (int)sizeof sub)
                        rmdir(sub);
        if (d)
                closedir(d);
        return rmdir(dir) < 0 ? -errno : 0;
}

/* Removes OWN/gadgetd.PID of gadgetds that are gone (their gadgets died
 * with them: parent-death signal). Busy directories stay. */
static void remove_stale(const char *own)
{
        DIR *d = opendir(own);
        struct dirent *de;
        char dir[PATH_MAX];
        size_t plen = strlen(INSTANCE_PREFIX);
        while (d && (de = readdir(d))) {
                char *end;
                if (strncmp(de->d_name, INSTANCE_PREFIX, plen) != 0)
                        continue;
                long pid = strtol(de->d_name + plen, &end, 10);
                if (*end || pid <= 0 || pid == (long)getpid())
                        continue;
                if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
                        continue;
                if (snprintf(dir, sizeof dir, "%s/%s", own, de->d_name) < (int)sizeof dir)
                        remove_tree(dir);
        }
        if (d)
                closedir(d);
}

/* Records a hierarchy; its strings are taken over. */
static void add_hier(struct cgroup_host *h, int version, char *own, char *dir, unsigned ctrls)
{
        struct cgroup_hier *x = &h->hier[h->n_hier];
        *x = (struct cgroup_hier){ .version = version, .own = own, .dir = dir, .ctrls = ctrls, .tidy = h->one };
        for (int c = 0; c < CGROUP_N_CTRL; c++)
                if (ctrls & (1u << c))
                        h->ctrl_hier[c] = (int)h->n_hier;
        h->n_hier++;
}

/* Most processes gadgetd moves at once: itself and what it has started
 * before its cgroups are set up. */
#define OURS_MAX 64

/* gadgetd and its children among the processes of the v2 cgroup dir
 * (gadgetd first). The count. */
static size_t ours(const char *dir, pid_t *pids, size_t max)
{
        char path[PATH_MAX], line[32];
        size_t n = 0;
        pids[n++] = getpid();
        snprintf(path, sizeof path, "%s/cgroup.procs", dir);
        FILE *f = fopen(path, "re");
        while (f && n < max && fgets(line, sizeof line, f)) {
                pid_t pid = (pid_t)strtol(line, NULL, 10);
                if (pid > 0 && pid != getpid() && proc_is_child(pid))
                        pids[n++] = pid;
        }
        if (f)
                fclose(f);
        return n;
}

/* Moves gadgetd and its children from the v2 cgroup from into to (a
 * cgroup that hands controllers down may hold no process). 0 or the first
 * -errno; gadgetd itself moves last, so that a child's failure leaves it
 * where it was. */
static int move_ours(const char *from, const char *to)
{
        pid_t pids[OURS_MAX];
        char text[24];
        int e = 0;
        size_t n = ours(from, pids, OURS_MAX);
        for (size_t i = n; i-- > 0 && e == 0;) {
                snprintf(text, sizeof text, "%d", (int)pids[i]);
                int r = cgroup_write_file(to, "cgroup.procs", text);
                /* A child that has just ended is not an error. */
                if (r < 0 && !(r == -ESRCH && i > 0))
                        e = r;
        }
        return e;
}

/* Turns on ctrl for the children of own and of dir. */
static int enable_v2(const char *own, const char *dir, const char *ctrl)
{
        char enabled[256], plus[32];
        int e;
        snprintf(plus, sizeof plus, "+%s", ctrl);
        if (cgroup_read_file(own, "cgroup.subtree_control", enabled, sizeof enabled) < 0 ||
            !has_word(enabled, ctrl, ' '))
                if ((e = cgroup_write_file(own, "cgroup.subtree_control", plus)) < 0)
                        return e;
        return cgroup_write_file(dir, "cgroup.subtree_control", plus);
}

/* cgroup v2: controllers are handed to gadget cgroups only through
 * cgroups that hold no process, so gadgetd first moves itself and the
 * processes it has started into OWN/gadgetd.PID/supervisor. Why this is
 * safe: gadgetd moves only its own processes and writes only to OWN and
 * below it, as systemd's Delegate=yes allows; nothing above OWN is
 * touched. *refused is set when OWN has controllers for gadgetd but cannot
 * be taken over (it is not delegated to gadgetd alone). */
/* On a systemd host a unit's cgroup (NAME.service, NAME.scope) is
 * gadgetd's to take over only if systemd delegated it (Delegate=yes): the
 * others systemd manages itself, whatever root may write there. True, with
 * why_v2 saying so, when systemd says it did not; where systemd cannot be
 * asked (or the cgroup is no unit's), the takeover is tried as on any
 * host. */
static bool not_delegated(struct cgroup_host *h, const char *path)
{
        const char *unit = strrchr(path, '/');
        char err[256];
        unit = unit ? unit + 1 : path;
        if (!scope_systemd_running() || scope_delegated(unit, err, sizeof err) != 0)
                return false;
        snprintf(h->why_v2, sizeof h->why_v2, "gadgetd's cgroup %.200s is systemd's %.100s, which is not "
                 "delegated (no Delegate=yes)", path, unit);
        return true;
}

/* A gadgetd re-executed in place (gadgetctl daemon-reexec) is already in
 * OWN/gadgetd.PID/supervisor: OWN is what is above that. */
static void strip_own_instance(char *path, const char *pid)
{
        char tail[64];
        size_t n = strlen(path), k = (size_t)snprintf(tail, sizeof tail, "/" INSTANCE_PREFIX "%s/" SUPERVISOR, pid);
        if (n > k && strcmp(path + n - k, tail) == 0)
                path[n - k] = '\0';
}

static int setup_v2(struct cgroup_host *h, const struct cg_tables *t, bool *refused)
{
        struct cg_mount m;
        char path[PATH_MAX], avail[256], pid[24], *own = NULL, *dir = NULL, *sup = NULL;
        unsigned want = 0, got = 0;
        int e = 0, last = 0;

        snprintf(pid, sizeof pid, "%d", (int)getpid());
        if (find_mount(t, NULL, &m) < 0 || own_path(t, NULL, path, sizeof path) < 0) {
                snprintf(h->why_v2, sizeof h->why_v2, "no cgroup v2 hierarchy is mounted");
                return 0;
        }
        strip_own_instance(path, pid);
        if ((e = own_dir(&m, path, &own)) < 0) {
                snprintf(h->why_v2, sizeof h->why_v2, "gadgetd's cgroup %.100s is not below the cgroup2 mount %.100s",
                         path, m.point);
                return e == -ENOMEM ? e : 0;
        }
        if (cgroup_read_file(own, "cgroup.controllers", avail, sizeof avail) < 0)
                avail[0] = '\0';
        for (int c = CGROUP_MEMORY; c <= CGROUP_CPU; c++)
                if (has_word(avail, ctrl_names[c], ' '))
                        want |= 1u << c;
        if (!want) {
                snprintf(h->why_v2, sizeof h->why_v2,
                         "cgroup v2 offers none of memory, pids, cpu to gadgetd's cgroup %s", own);
                goto out;
        }
        if (not_delegated(h, path)) {
                *refused = true;
                goto out;
        }
        if (!h->one)
                remove_stale(own);
        if (asprintf(&dir, "%s/" INSTANCE_PREFIX "%s", own, pid) < 0 ||
            asprintf(&sup, "%s/" SUPERVISOR, dir) < 0) {
                e = -ENOMEM;
                goto out;
        }
        if (((last = cgroup_mkdir(dir)) < 0 && last != -EEXIST) ||
            ((last = cgroup_mkdir(sup)) < 0 && last != -EEXIST) ||
            (last = move_ours(own, sup)) < 0) {
                snprintf(h->why_v2, sizeof h->why_v2, "cannot set up %s: %s", sup, strerror(-last));
                move_ours(sup, own);
                rmdir(sup);
                rmdir(dir);
                *refused = true;
                goto out;
        }
        for (int c = CGROUP_MEMORY; c <= CGROUP_CPU; c++) {
                int r = (want & (1u << c)) ? enable_v2(own, dir, ctrl_names[c]) : 0;
                if (r < 0)
                        last = r;
                else if (want & (1u << c))
                        got |= 1u << c;
        }
        if (!got) {
                /* Back where it was: nothing is delegated here. */
                move_ours(sup, own);
                rmdir(sup);
                rmdir(dir);
                snprintf(h->why_v2, sizeof h->why_v2,
                         "cannot hand controllers to children of %s: %s (it must hold gadgetd alone, "
                         "as with systemd's Delegate=yes)", own, strerror(-last));
                *refused = true;
                goto out;
        }
        h->swap_limit = (got & (1u << CGROUP_MEMORY)) && cgroup_file_exists(dir, "memory.swap.max");
        /* v2 counts CPU use in every cgroup (cpu.stat usage_usec). */
        add_hier(h, 2, own, dir, got | (1u << CGROUP_CPUACCT));
        own = dir = NULL;
out:
        free(own);
        free(dir);
        free(sup);
        return e;
}

/* CGROUP_HOST_SCOPES (cgroup_scope.h): on a systemd host with a unified
 * hierarchy, where gadgetd's own unit is delegated and its cgroup offers
 * controllers, each gadget gets a delegated scope of its own; gadgetd stays where it is and hands nothing
 * down. Why this is safe: nothing is written here; each scope is made by
 * systemd and written below only (cgroup_scope.c). 1 when set up, 0 if
 * not (the usual layout is tried), -ENOMEM. */
static int setup_scopes(struct cgroup_host *h, const struct cg_tables *t)
{
        struct cg_mount m;
        char path[PATH_MAX], avail[256], *own = NULL, *mount = NULL;
        unsigned want = 0;
        char why[256];
        if (!scope_systemd_running() || find_mount(t, NULL, &m) < 0 || strcmp(m.root, "/") != 0 ||
            own_path(t, NULL, path, sizeof path) < 0)
                return 0;
        /* Only where systemd answers on the bus (each gadget's start asks
         * it for a scope) and delegated gadgetd's own unit. */
        const char *unit = strrchr(path, '/');
        if (scope_delegated(unit ? unit + 1 : path, why, sizeof why) != 1 || own_dir(&m, path, &own) < 0)
                return 0;
        if (cgroup_read_file(own, "cgroup.controllers", avail, sizeof avail) < 0)
                avail[0] = '\0';
        for (int c = CGROUP_MEMORY; c <= CGROUP_CPU; c++)
                if (has_word(avail, ctrl_names[c], ' '))
                        want |= 1u << c;
        if (!want || !(mount = strdup(m.point))) {
                free(own);
                return want ? -ENOMEM : 0;
        }
        h->scopes = true;
        h->swap_limit = (want & (1u << CGROUP_MEMORY)) && cgroup_file_exists(own, "memory.swap.max");
        add_hier(h, 2, own, mount, want | (1u << CGROUP_CPUACCT));
        return 1;
}

/* cgroup v1: one hierarchy per controller (or co-mounted ones, like
 * cpu,cpuacct). Why this is safe: only OWN/gadgetd.PID is created, below
 * gadgetd's own cgroup of that hierarchy. With CGROUP_HOST_ONE it is made
 * later, as the gadget's own cgroup (cgroup_new). */
static int setup_v1(struct cgroup_host *h, const struct cg_tables *t)
{
        int pid = (int)getpid(); /* once, not once per controller */
        for (int c = 0; c < CGROUP_N_CTRL; c++) {
                struct cg_mount m;
                char path[PATH_MAX], *own = NULL, *dir = NULL;
                bool shared = false;
                if (h->ctrl_hier[c] >= 0 || find_mount(t, ctrl_names[c], &m) < 0 ||
                    own_path(t, ctrl_names[c], path, sizeof path) < 0)
                        continue;
                int e = own_dir(&m, path, &own);
                if (e == -ENOMEM)
                        return e;
                if (e < 0)
                        continue;
                for (size_t i = 0; i < h->n_hier && !shared; i++)
                        if (h->hier[i].version == 1 && strcmp(h->hier[i].own, own) == 0) {
                                h->hier[i].ctrls |= 1u << c;
                                h->ctrl_hier[c] = (int)i;
                                shared = true;
                        }
                if (shared) {
                        free(own);
                        continue;
                }
                if (!h->one)
                        remove_stale(own);
                if (asprintf(&dir, "%s/" INSTANCE_PREFIX "%d", own, pid) < 0) {
                        free(own);
                        return -ENOMEM;
                }
                int made = h->one ? 0 : cgroup_mkdir(dir);
                if (made < 0 && made != -EEXIST) {
                        snprintf(h->why_v1, sizeof h->why_v1, "cannot create %s: %s", dir, strerror(-made));
                        free(own);
                        free(dir);
                        continue;
                }
                add_hier(h, 1, own, dir, 1u << c);
        }
        int set = h->ctrl_hier[CGROUP_CPUSET];
        if (set >= 0 && !h->one && cgroup_cpuset_inherit(h->hier[set].own, h->hier[set].dir) < 0) {
                /* Without CPUs no task could join it: leave cpuset out. */
                if (h->hier[set].ctrls == 1u << CGROUP_CPUSET)
                        remove_tree(h->hier[set].dir);
                h->hier[set].ctrls &= ~(1u << CGROUP_CPUSET);
                h->ctrl_hier[CGROUP_CPUSET] = -1;
        }
        int mem = h->ctrl_hier[CGROUP_MEMORY];
        if (mem >= 0 && h->hier[mem].version == 1)
                h->swap_limit = cgroup_file_exists(h->hier[mem].own, "memory.memsw.limit_in_bytes");
        bool any = false;
        for (size_t i = 0; i < h->n_hier; i++)
                any = any || h->hier[i].version == 1;
        if (!any && !h->why_v1[0])
                snprintf(h->why_v1, sizeof h->why_v1, "no cgroup v1 hierarchy of memory, pids or cpu is mounted");
        return 0;
}

/* Appends text to why_v2. */
static void why_v2_add(struct cgroup_host *h, const char *text)
{
        size_t o = strlen(h->why_v2);
        snprintf(h->why_v2 + o, sizeof h->why_v2 - o, "%s", text);
}

/* gadgetd's v2 cgroup was not delegated: asks systemd for a scope of its
 * own with Delegate=yes, with gadgetd and its children in it, and reads
 * /proc/self/cgroup anew. 0 when gadgetd is in the scope; else why_v2 says
 * why not and what to run instead, and the tables are unchanged. Why this
 * is safe: the scope is systemd's own way to hand a cgroup to a process
 * (what systemd-run --scope -p Delegate=yes does); gadgetd moves only its
 * own processes, and never out of a service's cgroup (systemd would lose
 * track of the service's processes). */
static int move_to_scope(struct cgroup_host *h, struct cg_tables *t)
{
        pid_t pids[OURS_MAX];
        char path[PATH_MAX], name[sizeof h->scope], desc[64], err[512], *own = NULL;
        struct cg_mount m;
        const char *how = h->one ? "gadgetd run" : "gadgetd";

        if (find_mount(t, NULL, &m) < 0 || own_path(t, NULL, path, sizeof path) < 0 ||
            own_dir(&m, path, &own) < 0)
                return 0;
        size_t pl = strlen(path);
        if (pl > 8 && strcmp(path + pl - 8, ".service") == 0) {
                snprintf(err, sizeof err, "; %.300s is a service without Delegate=yes: add Delegate=yes to that "
                         "unit (as gadgetd.service has)", path);
                why_v2_add(h, err);
                free(own);
                return 0;
        }
        size_t n = ours(own, pids, OURS_MAX);
        free(own);
        if (!scope_systemd_running()) {
                snprintf(err, sizeof err, "; systemd is not the init system here, so no delegated scope can be "
                         "had: start %s as the only process of a cgroup of its own", how);
                why_v2_add(h, err);
                return 0;
        }
        snprintf(name, sizeof name, "%s-%d.scope", h->one ? "gadgetd-run" : "gadgetd", (int)getpid());
        snprintf(desc, sizeof desc, "%s (pid %d)", how, (int)getpid());
        if (scope_start(name, desc, pids, n, err, sizeof err) < 0) {
                char more[768];
                snprintf(more, sizeof more, "; no delegated scope from systemd either: %s; run it in one: "
                         "systemd-run --scope -p Delegate=yes %s ...", err, how);
                why_v2_add(h, more);
                return 0;
        }
        char *cg = read_all("/proc/self/cgroup", &pl);
        if (!cg)
                return errno == ENOMEM ? -ENOMEM : 0;
        free(t->cgroup);
        t->cgroup = cg;
        t->cgroup_len = pl;
        snprintf(h->scope, sizeof h->scope, "%s", name);
        snprintf(h->started_in, sizeof h->started_in, "%s", path);
        h->why_v2[0] = '\0';
        return 0;
}

/* Where gadgetd uses cgroup v2 and may have a cpuset, its instance cgroup
 * (OWN/gadgetd.PID, and so every gadget below it) gets a cpuset of the CPUs
 * gadgetd was started with (taskset, CPUAffinity=). The affinity a process
 * inherits is not enough: on kernel 6.1 any move between cpusets, as when
 * systemd turns cpuset on or off above gadgetd's cgroup, resets it to every
 * CPU of the new cpuset, and a gadget may widen its own. Best effort: where
 * cpuset is not offered, the inherited affinity is all there is. */
static void pin_cpus_v2(const struct cgroup_host *h, const cpu_set_t *cpus)
{
        char avail[256], enabled[256];
        for (size_t i = 0; i < h->n_hier; i++) {
                const struct cgroup_hier *v2 = &h->hier[i];
                if (v2->version != 2 || cgroup_read_file(v2->own, "cgroup.controllers", avail, sizeof avail) < 0 ||
                    !has_word(avail, "cpuset", ' '))
                        continue;
                if ((cgroup_read_file(v2->own, "cgroup.subtree_control", enabled, sizeof enabled) < 0 ||
                     !has_word(enabled, "cpuset", ' ')) &&
                    cgroup_write_file(v2->own, "cgroup.subtree_control", "+cpuset") < 0)
                        continue;
                cgroup_cpus_write(v2->dir, cpus);
        }
}

/* Where gadgetd has a v1 cpuset, each gadget's is made with the CPUs and
 * memory nodes of OWN/gadgetd.PID by the kernel at its mkdir
 * (cgroup.clone_children), those CPUs gadgetd's own: a gadget's cpuset
 * then needs no writes. Each write of a cpuset's CPUs or nodes checks
 * every sibling (the kernel's validate_change): three writes per gadget,
 * each walking all the gadgets (measured: 1.3% of a 1,000 gadgets' start's
 * samples, most of them that walk). Where this cannot be set up, each
 * gadget's cpuset is written as before (cgroup_new). */
static void clone_cpus_v1(struct cgroup_host *h, const cpu_set_t *cpus)
{
        int set = h->ctrl_hier[CGROUP_CPUSET];
        if (set < 0 || h->one || h->hier[set].version != 1 || !cpus)
                return;
        struct cgroup_hier *x = &h->hier[set];
        if (cgroup_cpus_write(x->dir, cpus) == 0 && cgroup_write_file(x->dir, "cgroup.clone_children", "1") == 0) {
                x->cpus_cloned = true;
                x->cpus = *cpus;
        }
}

int cgroup_host_open(struct cgroup_host *h, enum cgroup_use use, unsigned flags)
{
        struct cg_tables t = { 0 };
        int e = 0;
        cpu_set_t cpus;
        bool pinned = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
        memset(h, 0, sizeof *h);
        h->one = flags & CGROUP_HOST_ONE;
        for (int c = 0; c < CGROUP_N_CTRL; c++)
                h->ctrl_hier[c] = -1;
        if (use != CGROUP_USE_NONE) {
                t.mountinfo = read_all("/proc/self/mountinfo", &t.mountinfo_len);
                t.cgroup = read_all("/proc/self/cgroup", &t.cgroup_len);
                if ((!t.mountinfo || !t.cgroup) && errno == ENOMEM)
                        e = -ENOMEM;
        }
        if (e == 0 && (use == CGROUP_USE_ANY || use == CGROUP_USE_V2)) {
                bool refused = false;
                int scopes = (flags & CGROUP_HOST_SCOPES) ? setup_scopes(h, &t) : 0;
                e = scopes < 0 ? scopes : scopes ? 0 : setup_v2(h, &t, &refused);
                if (e == 0 && refused && (e = move_to_scope(h, &t)) == 0 && h->scope[0])
                        e = setup_v2(h, &t, &refused);
        } else
                snprintf(h->why_v2, sizeof h->why_v2, "not used in this limits mode");
        if (e == 0 && (use == CGROUP_USE_ANY || use == CGROUP_USE_V1))
                e = setup_v1(h, &t);
        else if (e == 0)
                snprintf(h->why_v1, sizeof h->why_v1, "not used in this limits mode");
        free(t.mountinfo);
        free(t.cgroup);
        /* Joining a cgroup with a cpuset (systemd's scope, where cpuset is
         * on; a v1 cpuset) gives a process all of that cpuset's CPUs:
         * gadgetd keeps the CPUs it was started with (taskset,
         * CPUAffinity=), which its gadgets inherit. Where the cpuset
         * excludes them, the cpuset's CPUs stay. */
        if (pinned && e == 0 && !h->scopes)
                pin_cpus_v2(h, &cpus);
        if (pinned && e == 0)
                clone_cpus_v1(h, &cpus);
        if (pinned)
                sched_setaffinity(0, sizeof cpus, &cpus);
        if (e < 0)
                cgroup_host_close(h);
        return e;
}

bool cgroup_v2_may_serve(void)
{
        char text[4096];
        FILE *f = fopen("/proc/cgroups", "re");
        if (!f)
                return true;
        size_t n = fread(text, 1, sizeof text - 1, f);
        bool full = n == sizeof text - 1 && fgetc(f) != EOF;
        fclose(f);
        text[n] = '\0';
        return full || cgroup_v2_may_serve_in(text); /* a table cut short: say it may */
}

void cgroup_host_tidy(struct cgroup_host *h)
{
        /* Why later is safe: only directories of gadgetds that are gone
         * are removed (remove_stale), never this one's, and a stale one
         * harms nothing meanwhile but its memory; a run that ends before
         * its start's wait does it at its close. */
        for (size_t i = 0; i < h->n_hier; i++)
                if (h->hier[i].tidy) {
                        h->hier[i].tidy = false;
                        remove_stale(h->hier[i].own);
                }
}

void cgroup_host_close(struct cgroup_host *h)
{
        cgroup_host_tidy(h);
        for (size_t i = 0; i < h->n_hier; i++) {
                /* In v2 gadgetd itself stays in DIR/supervisor until it exits;
                 * the next gadgetd removes the directory. With
                 * CGROUP_HOST_ONE, DIR is the gadget's cgroup, made for it
                 * only where the gadget has a limit and removed at its end
                 * (cgroup_free): tried again here only if it is left. */
                if (h->hier[i].version == 1 && (!h->one || h->hier[i].made))
                        remove_tree(h->hier[i].dir);
                free(h->hier[i].own);
                free(h->hier[i].dir);
        }
        h->n_hier = 0;
        for (int c = 0; c < CGROUP_N_CTRL; c++)
                h->ctrl_hier[c] = -1;
}

int cgroup_host_version(const struct cgroup_host *h, enum cgroup_ctrl c)
{
        return h->ctrl_hier[c] < 0 ? 0 : h->hier[h->ctrl_hier[c]].version;
}

const char *cgroup_host_dir(const struct cgroup_host *h, enum cgroup_ctrl c)
{
        return h->ctrl_hier[c] < 0 ? NULL : h->hier[h->ctrl_hier[c]].dir;
}

