/* cgroupfs: the gadget's own cgroups, read-only at /sys/fs/cgroup, as
 * container runtimes show them, so that language runtimes (a JVM's heap,
 * Node's constrainedMemory(), Go's GOMEMLIMIT helpers, .NET) size
 * themselves by the gadget's limits instead of the host's memory. v2: the
 * unified hierarchy at /sys/fs/cgroup. v1: one directory there, on the
 * root tmpfs (read-only once the sandbox is built, mounts_seal), per
 * hierarchy the gadget is in (named by its
 * controllers, "cpu,cpuacct", with a link per controller when several
 * share one), and the unified hierarchy at unified/ if gadgetd put the
 * gadget in a v2 cgroup too. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROOT "/sys/fs/cgroup"

/* Only gadgetd's limits live in these cgroups: read-only, no devices, no
 * programs, no set-uid. */
static const unsigned long ro_flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;

/* The text of the step that runs, on the setup's mapping (helper.c). */
#define STEP_MAX 128

/* A v1 controller list as /proc/self/cgroup gives it ("memory",
 * "cpu,cpuacct"); named hierarchies (name=...) are never gadgetd's. */
static bool controllers_valid(const char *s, size_t n)
{
        if (n == 0 || n >= CGROUPFS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_' || s[i] == ','))
                        return false;
        return true;
}

/* Why only hierarchies whose path is not "/": the cgroup namespace this
 * process was cloned into is rooted at gadgetd's own cgroups, so "/" is a
 * hierarchy gadgetd did not move the gadget in (cpuset, devices, or v2 in
 * a v1 mode): mounted, it would show gadgetd's cgroup, and where gadgetd
 * sits in a root cgroup, the host's whole tree. */
int cgroupfs_scan(struct cgroupfs_view *v)
{
        char buf[4096];
        int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        ssize_t n;
        int e = 0;

        *v = (struct cgroupfs_view){ 0 };
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof buf - 1);
        if (n < 0)
                e = -errno;
        close(fd);
        if (e < 0)
                return e;
        buf[n] = '\0';
        for (char *line = buf, *next; *line; line = next) {
                next = strchr(line, '\n');
                next = next ? (*next = '\0', next + 1) : line + strlen(line);
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2 || strcmp(c2 + 1, "/") == 0)
                        continue;
                size_t len = (size_t)(c2 - c1 - 1);
                if (len == 0 && strncmp(line, "0:", 2) == 0)
                        v->v2 = true;
                else if (controllers_valid(c1 + 1, len) && v->n_v1 < SANDBOX_CGROUP_FDS_MAX) {
                        memcpy(v->v1[v->n_v1], c1 + 1, len);
                        v->v1[v->n_v1++][len] = '\0';
                }
        }
        return 0;
}

/* A link per controller of a shared hierarchy: cpu -> cpu,cpuacct. */
static int link_controllers(const char *ctrls)
{
        char name[CGROUPFS_NAME_MAX], path[sizeof ROOT + CGROUPFS_NAME_MAX + 1];
        if (!strchr(ctrls, ','))
                return 0;
        for (const char *s = ctrls; *s;) {
                size_t n = strcspn(s, ",");
                snprintf(name, sizeof name, "%.*s", (int)n, s);
                snprintf(path, sizeof path, ROOT "/%s", name);
                if (symlink(ctrls, path) < 0 && errno != EEXIST)
                        return -errno;
                s += n + (s[n] == ',');
        }
        return 0;
}

/* Why this is safe: the cgroup namespace was made at the gadget's own
 * cgroup just before, so each mount's root is that cgroup and nothing
 * above or beside it shows; the files belong to host root (unmapped here)
 * and every mount is read-only, so a gadget reads its limits and usage and
 * can change nothing. */
int cgroupfs_mount(const struct cgroupfs_view *v, const char **step)
{
        char path[sizeof ROOT + CGROUPFS_NAME_MAX + 1];
        char *step_buf = sandbox_setup_alloc(STEP_MAX);

        *step = "cgroup mount";
        if (!step_buf)
                return -ENOMEM;
        *step = step_buf;
        if (v->n_v1 == 0) {
                snprintf(step_buf, STEP_MAX, "cgroup mount %s", ROOT);
                if (v->v2 && mount("cgroup2", ROOT, "cgroup2", ro_flags, NULL) < 0)
                        return -errno;
                return 0;
        }
        /* Their mount points are made on the root tmpfs, still writable
         * here: a tmpfs of their own was one more superblock per gadget,
         * and a superblock's shrinker slot is paid by every memory cgroup
         * made after it (bench/notes.md). */
        for (size_t i = 0; i <= v->n_v1; i++) {
                const char *ctrls = i < v->n_v1 ? v->v1[i] : "unified";
                if (i == v->n_v1 && !v->v2)
                        break;
                snprintf(path, sizeof path, ROOT "/%s", ctrls);
                snprintf(step_buf, STEP_MAX, "cgroup mount %s", path);
                if (mkdir(path, 0555) < 0)
                        return -errno;
                if (i < v->n_v1 ? mount("cgroup", path, "cgroup", ro_flags, ctrls) < 0
                                : mount("cgroup2", path, "cgroup2", ro_flags, NULL) < 0)
                        return -errno;
                int e = i < v->n_v1 ? link_controllers(ctrls) : 0;
                if (e < 0)
                        return e;
        }
        return 0;
}
