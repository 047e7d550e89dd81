/* sandbox: the order in which a worker enters its sandbox. Runs in
 * gadgetd-sandbox, exec'd in the child gadgetd cloned with new user, mount,
 * PID, IPC, UTS and cgroup namespaces (the network namespace it makes
 * itself, sandbox_early); every step either succeeds or the gadget never
 * starts. */
#include "sandbox.h"
#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/prctl.h>
#include <unistd.h>


_Noreturn void sandbox_fail(int fd, const char *step, int err)
{
        sandbox_report_failed(fd, step, strerror(err));
        _exit(125);
}

/* Switches to the gadget's inner uid/gid while keeping the capabilities of
 * the new user namespace for the rest of the setup. Why this is safe: the
 * securebits are locked first, so no later exec can regain privileges. */
int sandbox_become_user(void)
{
        int e = caps_lock_securebits();
        if (e < 0)
                return e;
        if (setresgid(SANDBOX_INNER_ID, SANDBOX_INNER_ID, SANDBOX_INNER_ID) < 0)
                return -errno;
        if (setresuid(SANDBOX_INNER_ID, SANDBOX_INNER_ID, SANDBOX_INNER_ID) < 0)
                return -errno;
        return 0;
}

int sandbox_join_v1(int setup_fd, const char **step)
{
        char byte = 0;
        int fds[SANDBOX_CGROUP_FDS_MAX], e = 0;
        size_t n = 0;
        *step = "cgroup v1: join";
        ssize_t r = wire_recv_fds(setup_fd, &byte, 1, fds, SANDBOX_CGROUP_FDS_MAX, &n);
        if (r == 0)
                _exit(125); /* gadgetd gave up on this start */
        if (r < 0)
                e = (int)r;
        else if (byte != SANDBOX_CGROUP_MSG)
                e = -EPROTO;
        /* Joining a v1 cpuset resets the CPU affinity to all of its CPUs:
         * the program keeps the CPUs gadgetd gave it. */
        cpu_set_t cpus;
        bool keep = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
        for (size_t i = 0; i < n; i++) {
                if (e == 0 && write(fds[i], "0", 1) != 1)
                        e = -errno;
                close(fds[i]);
        }
        if (e == 0 && keep && n > 0 && sched_setaffinity(0, sizeof cpus, &cpus) < 0)
                e = -errno;
        return e;
}

/* Waits for SANDBOX_CGROUP_MSG (gadgetd makes the gadget's cgroups while
 * the sandbox is built, and has put this process in its v2 cgroup by the
 * time the message comes) and joins the v1 cgroups whose "tasks" files
 * come with it; then makes the cgroup namespace, rooted there, so the
 * gadget sees "/" and nothing of the host's cgroup paths, and mounts its
 * cgroups at /sys/fs/cgroup (worker/sandbox/cgroupfs.c). Before the
 * limits and the program: everything the program does counts against
 * them. Why this is safe: the fds were opened by gadgetd and name only
 * this gadget's cgroups; they are closed at once. */
static int join_cgroups(const struct sandbox_config *cfg, const char **step)
{
        int e = sandbox_join_v1(cfg->setup_fd, step);
        if (!cfg->prewarm)
                close(cfg->setup_fd);
        if (e < 0)
                return e;
        struct cgroupfs_view view;
        *step = "cgroup mount: read /proc/self/cgroup";
        if ((e = cgroupfs_scan(&view)) < 0)
                return e;
        *step = "cgroup namespace";
        if (unshare(CLONE_NEWCGROUP) < 0)
                return -errno;
        return cgroupfs_mount(&view, step);
}

int sandbox_early(bool own_net, struct mount_plan **plan, const char **step)
{
        /* The network namespace is made here, not by gadgetd's clone: it
         * is ~1.5 ms of kernel work (its sysctl tables, loopback, per-net
         * state), nearly all of the clone's, that gadgetd would wait for
         * on its loop at each start; here the shell pays it on its own
         * time, while it waits for its setup. Why this is safe: nothing of
         * the gadget's runs before this returns, and if it fails the
         * start fails (the caller reports it once the setup came); the
         * init, which gadgetctl exec enters (setns on its pidfd), is this
         * process. Needs only CAP_SYS_ADMIN over the new user namespace. */
        *step = "network namespace";
        if (own_net && unshare(CLONE_NEWNET) < 0)
                return -errno;
        /* Nothing done in this namespace may propagate back to the host.
         * Why this may run before the id maps: it needs only
         * CAP_SYS_ADMIN over the worker's own mount namespace. */
        *step = "make mounts private";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        /* The identity mounts_prepare clones with too (the id maps do
         * not change the worker's own ids): the host's, which may
         * traverse /dev. */
        int e = mounts_early(plan, step);
        if (e < 0)
                return e;
        *step = "capabilities";
        return caps_drop_bounding();
}

_Noreturn void sandbox_main(const struct sandbox_config *cfg, struct mount_plan *plan)
{
        const char *step = NULL;
        int e;

        /* Mount sources are cloned while still holding the host identity
         * that may traverse them; see worker/sandbox/mounts.c. */
        e = mounts_prepare(cfg, plan, &step);
        if (e < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        e = sandbox_become_user();
        if (e < 0)
                sandbox_fail(cfg->report_fd, "user ids", -e);
        /* A change of credentials clears the parent-death signal: set it
         * again, then make sure gadgetd did not die in between. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                sandbox_fail(cfg->report_fd, "parent-death signal", errno);
        if (poll(&(struct pollfd){ .fd = cfg->parent_pidfd, .events = POLLIN }, 1, 0) != 0)
                _exit(125);
        close(cfg->parent_pidfd);
        e = mounts_build(plan, cfg, &step);
        if (e < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        mounts_plan_free(plan);
        if (sethostname(cfg->name, strlen(cfg->name)) < 0)
                sandbox_fail(cfg->report_fd, "hostname", errno);
        e = join_cgroups(cfg, &step);
        if (e == 0)
                e = mounts_seal(cfg, &step);
        if (e < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        e = limits_apply(cfg, &step);
        if (e == 0)
                e = limits_userns(&step);
        if (e < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        e = caps_drop_all();
        if (e < 0)
                sandbox_fail(cfg->report_fd, "capabilities", -e);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                sandbox_fail(cfg->report_fd, "no_new_privs", errno);
        /* No controlling terminal: TIOCSTI has no target even before the
         * seccomp filter refuses it. */
        if (setsid() < 0)
                sandbox_fail(cfg->report_fd, "session", errno);
        /* FdStore= mode: the sandbox outlives gadgetd's exit, watched by
         * init_run instead (its report pipe, the bound of the handoff). */
        if (cfg->handoff_ms && prctl(PR_SET_PDEATHSIG, 0) < 0)
                sandbox_fail(cfg->report_fd, "parent-death signal", errno);
        /* The socket PID 2 sends its filter's listener on: made before
         * the init's own filter, which refuses sockets. */
        int notify_sk[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, notify_sk) < 0)
                sandbox_fail(cfg->report_fd, "seccomp: listener socket", errno);
        e = filter_install(&cfg->filter->init, false);
        if (e < 0)
                sandbox_fail(cfg->report_fd, "seccomp", -e);
        init_run(cfg, notify_sk);
}
