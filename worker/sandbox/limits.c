/* limits: per-process resource limits set before the gadget starts. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>


#define PAGE 4096u

static int set_limit(int resource, rlim_t value)
{
        struct rlimit rl = { .rlim_cur = value, .rlim_max = value };
        if (setrlimit(resource, &rl) < 0)
                return -errno;
        return 0;
}

/* Sets resource to value, or to the hard limit gadgetd has if that is
 * lower: raising it would need CAP_SYS_RESOURCE in the host. */
static int lower_limit(int resource, uint64_t value)
{
        struct rlimit cur;
        rlim_t v = value >= (uint64_t)RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)value;
        if (getrlimit(resource, &cur) < 0)
                return -errno;
        if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max)
                v = cur.rlim_max;
        return set_limit(resource, v);
}

/* One page above the size of /tmp: filling /tmp ends in ENOSPC, and only a
 * sparse file reaching past it meets the limit (EFBIG, SIGXFSZ). */
static uint64_t file_size_max(uint64_t tmp_size)
{
        if (tmp_size > UINT64_MAX - 2 * PAGE)
                return UINT64_MAX;
        return ((tmp_size + PAGE - 1) / PAGE + 1) * PAGE;
}

/* The counters of the gadget's user namespace (/proc/sys/user), all 0:
 * inotify, fanotify and every kind of namespace. Why: that user namespace
 * belongs to root (gadgetd made it), so whatever a gadget takes of these
 * also counts against root's own per-user limits in the host — 128 inotify
 * instances by default, shared with systemd and gadgetd. A gadget has no
 * use for them (seccomp refuses fanotify and new namespaces anyway); a
 * file this kernel lacks is skipped. Set once the worker is done with
 * mount and cgroup namespaces (each detached mount tree it clones with
 * open_tree counts as a mount namespace on newer kernels, and it makes its
 * own cgroup namespace), after pivot_root: through the sandbox's own
 * /proc, never the host's. In one procfs instance every user namespace's
 * copy of these files is a dentry of the same name under the same parent,
 * told apart by the sysctl set it shows, so a lookup walks those of every
 * user namespace that instance looked up and that still lives: written
 * through the host's /proc (as most were while the shell waited for its
 * setup), the 1,000th start walked 1,000 of them for each file
 * (bench/notes.md, issue 36). */
static const char *const userns_counters[] = {
        "max_inotify_instances", "max_inotify_watches", "max_fanotify_groups",
        "max_fanotify_marks", "max_user_namespaces", "max_pid_namespaces",
        "max_net_namespaces", "max_ipc_namespaces", "max_uts_namespaces",
        "max_time_namespaces", "max_mnt_namespaces", "max_cgroup_namespaces",
};

/* The directory once, then each file in it by name. */
static int userns_zero(const char *const *names, size_t n, const char **step)
{
        enum { STEP_MAX = 80 };
        char *buf = sandbox_setup_alloc(STEP_MAX);
        *step = "limit user namespace counters: /proc/sys/user";
        if (!buf)
                return -ENOMEM;
        int dir = open("/proc/sys/user", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return errno == ENOENT ? 0 : -errno;
        int e = 0;
        for (size_t i = 0; i < n && e == 0; i++) {
                snprintf(buf, STEP_MAX, "limit user.%s", names[i]);
                *step = buf;
                int fd = openat(dir, names[i], O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        e = errno == ENOENT ? 0 : -errno;
                        continue;
                }
                ssize_t w = write(fd, "0", 1);
                e = w == 1 ? 0 : w < 0 ? -errno : -EIO;
                close(fd);
        }
        close(dir);
        return e;
}

/* Core dumps off, LimitNOFILE, the file-size limit, and the per-uid
 * limits. Soft and hard limits are equal, and the gadget lacks
 * CAP_SYS_RESOURCE to raise them. */
int limits_apply(const struct sandbox_config *cfg, const char **step)
{
        static const struct {
                const char *step;
                int resource;
                uint64_t value;
        } fixed[] = {
                { "limit locked memory", RLIMIT_MEMLOCK, SANDBOX_MEMLOCK_MAX },
                { "limit pending signals", RLIMIT_SIGPENDING, SANDBOX_SIGPENDING_MAX },
                { "limit message queues", RLIMIT_MSGQUEUE, SANDBOX_MSGQUEUE_MAX },
        };
        int e;

        /* 1, not 0: the kernel writes no core file under a page, and it
         * takes RLIMIT_CORE 1 as "no core for a pipe handler" either (its
         * guard against a crashing handler), where 0 still pipes every
         * crash to systemd-coredump. A gadget's cores are CoreDump='s only:
         * the filter keeps the program from changing it (filter.c). */
        *step = "limit core dumps";
        if ((e = set_limit(RLIMIT_CORE, 1)) < 0)
                return e;
        *step = "limit open files";
        if ((e = set_limit(RLIMIT_NOFILE, (rlim_t)cfg->limit_nofile)) < 0)
                return e;
        *step = "limit file size";
        if ((e = lower_limit(RLIMIT_FSIZE, file_size_max(cfg->tmp_size))) < 0)
                return e;
        *step = "limit tasks";
        if ((e = lower_limit(RLIMIT_NPROC, cfg->nproc)) < 0)
                return e;
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
                *step = fixed[i].step;
                if ((e = lower_limit(fixed[i].resource, fixed[i].value)) < 0)
                        return e;
        }
        return 0;
}

/* Why the worker may still write these: they belong to its own user
 * namespace, in which it holds CAP_SYS_RESOURCE until caps_drop_all. */
int limits_userns(const char **step)
{
        return userns_zero(userns_counters, sizeof userns_counters / sizeof *userns_counters, step);
}

/* The degraded MemoryMax bounds each process of the program, not the
 * sandbox's init (gadgetd-sandbox), which must stay able to report. */
int limits_apply_program(const struct sandbox_config *cfg, const char **step)
{
        if (cfg->address_space == UINT64_MAX)
                return 0;
        *step = "limit address space";
        return lower_limit(RLIMIT_AS, cfg->address_space);
}
