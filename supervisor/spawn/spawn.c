/* spawn: clone() with vfork semantics into gadgetd-sandbox, id maps, the
 * setup (spawn_launch), and the start handshake with the child: waited for
 * here (spawn_gadget), or read from the caller's loop (spawn_started). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/close_range.h>

#include "buildtree.h"
#include "spawn_int.h"
#include "limits/cgroup.h"
#include "policy.h"
#include "sandbox_abi.h"
#include "system/monotime.h"

#define CHILD_STACK (64u * 1024u) /* the trampoline's: it only moves fds and execs */

/* Not CLONE_NEWNET: the shell makes its network namespace itself
 * (worker/sandbox/sandbox.c, sandbox_early), so that gadgetd does not wait
 * for it in the clone below (measured: ~60 us for these six, ~1.55 ms with
 * a network namespace, on the loop at each start). A clone made on a
 * thread instead would make the thread the sandbox's parent, and the
 * parent-death signal (SIGKILL, gadgetd-sandbox) follows the thread: its
 * end, or a re-exec, which ends every thread but the one calling it,
 * would kill every gadget it made. */
#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | \
                  CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static int write_file(pid_t pid, const char *name, const char *text)
{
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int e = n < 0 ? -errno : (size_t)n != strlen(text) ? -EIO : 0;
        close(fd);
        return e;
}

/* Maps the gadget's inner id to its own host id, nothing else. Why this is
 * safe: a one-line map cannot name host uid 0 (the pool never hands it
 * out), and setgroups is denied before the gid map is written. */
static int write_id_maps(pid_t pid, uid_t host)
{
        char map[64];
        int e;
        snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_INNER_ID, (unsigned)host);
        if ((e = write_file(pid, "uid_map", map)) < 0 ||
            (e = write_file(pid, "setgroups", "deny")) < 0 ||
            (e = write_file(pid, "gid_map", map)) < 0)
                return e;
        return 0;
}

/* How long a helper whose setup socket is closed is given to have
 * reported why. */
#define REPORT_AFTER_EPIPE_MS 1000

/* Reads the helper's next report for a start: 0 if it is want, -EAGAIN
 * until one came whole, else -errno; a failure's "step: reason" is in err
 * either way. */
static int read_start(struct spawn_child *c, int want, char *err, size_t errlen)
{
        char msg[2 * SANDBOX_REPORT_TEXT_MAX + 3] = "";
        int r = spawn_read_report(c, NULL, NULL, msg, sizeof msg);
        if (r == -EAGAIN)
                return r;
        if (r == SPAWN_REPORT_FAILED)
                snprintf(err, errlen, "%s", msg);
        if (r == want)
                return 0;
        if (r == SPAWN_REPORT_FAILED)
                return -ECHILD;
        if (r == -EPROTO) {
                snprintf(err, errlen, "sandbox report refused: %s", msg);
                return r;
        }
        snprintf(err, errlen, "sandbox setup ended without a report");
        return r < 0 ? r : -ECHILD;
}

/* Waits up to timeout_ms for the helper's next report (read_start). */
static int await_report(struct spawn_child *c, int want, int timeout_ms, char *err, size_t errlen)
{
        uint64_t end = monotime_ms() + (uint64_t)timeout_ms;
        int r;
        /* A report is written whole in one write, so it is read at the
         * first wake-up; one that came in part waits for its rest within
         * the same time. */
        do {
                uint64_t now = monotime_ms();
                struct pollfd pfd = { .fd = c->report_fd, .events = POLLIN };
                if (now >= end || poll(&pfd, 1, (int)(end - now)) == 0) {
                        snprintf(err, errlen, "sandbox setup timed out");
                        return -ETIMEDOUT;
                }
                r = read_start(c, want, err, errlen);
        } while (r == -EAGAIN);
        return r;
}

int spawn_helper_open(struct spawn_helper *h, char *err, size_t errlen)
{
        char built[PATH_MAX];
        struct stat st;
        /* bench/startbench links the core as gadgetd does: from its build
         * tree it uses that tree's helper too. */
        const char *path = buildtree_path(GADGETD_SELF_BUILT, GADGETD_SANDBOX_BUILT, built, sizeof built) ||
                                           buildtree_path(GADGETD_BENCH_BUILT, GADGETD_SANDBOX_BUILT, built, sizeof built)
                                   ? built : GADGETD_SANDBOX_INSTALLED;
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                int e = -errno;
                snprintf(err, errlen, "sandbox helper %s: %s", path, strerror(-e));
                if (fd >= 0)
                        close(fd);
                return e;
        }
        /* Why this is safe: every worker starts as this program, with
         * gadgetd's privileges; it must be root's and writable by no one
         * else, like gadgetd itself. */
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
                snprintf(err, errlen, "sandbox helper %s: not a regular file of root's that only root may write",
                         path);
                close(fd);
                return -EPERM;
        }
        int slot = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (slot < 0) {
                int e = -errno;
                snprintf(err, errlen, "sandbox helper: %s", strerror(-e));
                close(fd);
                return e;
        }
        *h = (struct spawn_helper){ .fd = fd, .slot = slot };
        return 0;
}

void spawn_helper_close(struct spawn_helper *h)
{
        if (h->fd >= 0)
                close(h->fd);
        if (h->slot >= 0)
                close(h->slot);
        h->fd = h->slot = -1;
}

/* What the cloned child needs, and where it says why it failed. */
struct tramp {
        int helper_fd;  /* gadgetd-sandbox (O_PATH) */
        int slot;       /* holds the child's end of the setup socket */
        int keep;       /* the fds below it are copied: both of the above */
        const char *mode; /* the helper's one argument, or NULL */
        bool keep_caps; /* the child is in a new user namespace */
        int err;        /* set by the child if it fails */
        const char *step;
};

#define TRAMP_HIGH 32 /* above SANDBOX_FD_SETUP */

/* Keeps the capabilities the child has in its new user namespace across
 * the exec: there its uid is not mapped yet (gadgetd writes the maps once
 * the child has exec'd), so exec would clear them. Why this is safe: they
 * are capabilities over the gadget's own namespaces only, which hold
 * nothing of the host's; gadgetd-sandbox needs them to build the sandbox
 * and drops every one of them (ambient included) before the program runs. */
static int keep_caps(void)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -1;
        for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
                data[i].inheritable = data[i].permitted;
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -1;
        for (unsigned long c = 0; c < 64; c++)
                if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                        return errno == EINVAL ? 0 : -1; /* past the last capability */
        return 0;
}

/* The cloned child. It shares gadgetd's memory (CLONE_VM) and fd table
 * (CLONE_FILES) while gadgetd waits for its exec (CLONE_VFORK), so neither
 * is copied; it first takes a private fd table holding only the fds below
 * t->keep, then puts the setup socket at SANDBOX_FD_SETUP and execs the
 * helper, which gets every other fd with its setup. Nothing here
 * allocates, locks or changes gadgetd's state but t->err, t->step and
 * errno (gadgetd is suspended meanwhile). */
__attribute__((no_sanitize_address)) static int trampoline(void *arg)
{
        struct tramp *t = arg;
        char *argv[] = { (char *)SANDBOX_HELPER, (char *)t->mode, NULL }, *envp[] = { NULL };
        int helper;
        t->step = "fd table";
        if (syscall(SYS_close_range, (unsigned)t->keep, ~0U, CLOSE_RANGE_UNSHARE) < 0)
                goto fail;
        t->step = "fds";
        if ((helper = fcntl(t->helper_fd, F_DUPFD_CLOEXEC, TRAMP_HIGH)) < 0 ||
            (t->slot == SANDBOX_FD_SETUP ? fcntl(t->slot, F_SETFD, 0) : dup2(t->slot, SANDBOX_FD_SETUP)) < 0)
                goto fail;
        t->step = "keep capabilities";
        if (t->keep_caps && keep_caps() < 0)
                goto fail;
        t->step = "exec " SANDBOX_HELPER;
        execveat(helper, "", argv, envp, AT_EMPTY_PATH);
fail:
        t->err = errno;
        _exit(127);
}

/* Sends the setup frame with the fds gadgetd-sandbox needs (in the order
 * of enum sandbox_fd from SANDBOX_FD_REPORT on). 0 or -errno. */
static int send_setup(int sock, struct wire_writer *msg, const int *fds, size_t n)
{
        int e = wire_writer_flush_fds(msg, sock, fds, n);
        return e > 0 ? -EAGAIN : e;
}

int spawn_helper_start(const struct spawn_helper *h, int flags, const char *mode, pid_t *pid, int *pidfd,
                       int *setup_fd, char *err, size_t errlen)
{
        int setup[2] = { -1, -1 }, e = 0;
        void *stack = MAP_FAILED;
        pid_t child = -1;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, setup) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
                goto out;
        }
        stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (stack == MAP_FAILED || dup3(setup[1], h->slot, O_CLOEXEC) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
                goto out;
        }
        struct tramp t = { .helper_fd = h->fd, .slot = h->slot, .mode = mode,
                           .keep_caps = (flags & CLONE_NEWUSER) != 0,
                           .keep = (h->fd > h->slot ? h->fd : h->slot) + 1 };
        /* Returns once the child exec'd gadgetd-sandbox (or died). */
        child = clone(trampoline, (char *)stack + CHILD_STACK,
                      CLONE_VM | CLONE_VFORK | CLONE_FILES | flags | CLONE_PIDFD | SIGCHLD, &t, pidfd);
        e = child < 0 ? -errno : 0;
        /* The slot gets its placeholder back: gadgetd holds no end of the
         * child's setup socket but setup[1], closed below. */
        dup3(h->fd, h->slot, O_CLOEXEC);
        if (e < 0 || t.err) {
                snprintf(err, errlen, "%s: %s", e < 0 ? "namespaces" : t.step, strerror(e < 0 ? -e : t.err));
                e = e < 0 ? e : -t.err;
                if (child > 0) {
                        close(*pidfd);
                        while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
                                ;
                }
                goto out;
        }
        *pid = child;
        *setup_fd = setup[0];
        setup[0] = -1;
out:
        for (int i = 0; i < 2; i++)
                if (setup[i] >= 0)
                        close(setup[i]);
        if (stack != MAP_FAILED)
                munmap(stack, CHILD_STACK);
        return e;
}

int spawn_shell_new(const struct spawn_helper *h, bool shared_net, struct spawn_shell *out, char *err,
                    size_t errlen)
{
        struct spawn_shell sh = SPAWN_SHELL_NONE;
        int e = 0;

        *out = SPAWN_SHELL_NONE;
        sh.shared_net = shared_net;
        /* Opened before the clone: it polls POLLPRI once the mount table
         * changes after this point, of which the shell's copy knows nothing. */
        if ((sh.mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
        } else if (!shared_net || (e = spawn_netns_enter_shared(err, errlen)) == 0) {
                /* Shared: cloned in the shared network namespace, which it
                 * then is in, told by its argument not to make one of its
                 * own (netns.c); private: it makes its own (sandbox_early). */
                e = spawn_helper_start(h, NS_FLAGS, shared_net ? SANDBOX_SHARED_NET_ARG : NULL, &sh.pid,
                                       &sh.pidfd, &sh.setup_fd, err, errlen);
                if (shared_net)
                        spawn_netns_leave();
                if (e == 0) {
                        *out = sh;
                        sh = SPAWN_SHELL_NONE;
                }
        }
        spawn_shell_drop(&sh);
        return e;
}

bool spawn_shell_fresh(const struct spawn_shell *sh)
{
        struct pollfd p[2] = { { .fd = sh->pidfd, .events = POLLIN }, { .fd = sh->mounts_fd, .events = POLLPRI } };
        return sh->pid > 0 && poll(p, 2, 0) == 0;
}

void spawn_shell_drop(struct spawn_shell *sh)
{
        if (sh->pid > 0) {
                kill(sh->pid, SIGKILL);
                while (waitpid(sh->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        int *fds[] = { &sh->pidfd, &sh->setup_fd, &sh->mounts_fd };
        for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
                if (*fds[i] >= 0)
                        close(*fds[i]);
        *sh = SPAWN_SHELL_NONE;
}

/* Lets the worker build its sandbox on another CPU than the one gadgetd
 * runs on, so that the two work side by side while gadgetd makes the
 * cgroups: the scheduler would queue a woken worker behind gadgetd on
 * gadgetd's own CPU. cpus is gadgetd's own set, which give_cgroups gives
 * the worker back before gadgetd waits for it (then an idle CPU may take
 * it over, whichever). */
static void build_elsewhere(pid_t pid, const cpu_set_t *cpus)
{
        cpu_set_t other;
        int me = sched_getcpu();
        if (me < 0 || CPU_COUNT(cpus) < 2)
                return;
        other = *cpus;
        CPU_CLR(me, &other);
        sched_setaffinity(pid, sizeof other, &other);
}

int spawn_send_cgroups(int sock, const int *fds, size_t n)
{
        char byte = SANDBOX_CGROUP_MSG;
        ssize_t w = wire_send_fds(sock, &byte, 1, fds, n);
        return w == 1 ? 0 : w < 0 ? (int)w : -EIO;
}

/* Makes the gadget's cgroup while the worker builds its sandbox, puts the
 * worker in it (v2) or sends it the v1 "tasks" files to join. cpus, if not
 * NULL, are gadgetd's CPUs, given to the worker after the move and before
 * the message (it starts the program only after it): they undo
 * build_elsewhere, and joining a cgroup with a cpuset (kernel 6.1 resets
 * the affinity to the cpuset's CPUs on the move) would otherwise give the
 * program every CPU of the cpuset, not gadgetd's (taskset, CPUAffinity=). */
static int give_cgroups(const struct spawn_opts *o, pid_t pid, int sock, const cpu_set_t *cpus, char *err,
                        size_t errlen)
{
        struct cgroup *cg = NULL;
        int fds[SANDBOX_CGROUP_FDS_MAX], e;
        size_t n = 0;
        if (o->make_cgroup && (e = o->make_cgroup(o->make_cgroup_arg, &cg, err, errlen)) < 0)
                return e;
        if (cg && ((e = cgroup_attach(cg, pid, err, errlen)) < 0 ||
                   (e = cgroup_join_fds(cg, fds, SANDBOX_CGROUP_FDS_MAX, &n, err, errlen)) < 0))
                return e;
        if (cpus && sched_setaffinity(pid, sizeof *cpus, cpus) < 0 && errno != ESRCH) {
                e = -errno;
                snprintf(err, errlen, "CPU affinity: %s", strerror(errno));
        } else if ((e = spawn_send_cgroups(sock, fds, n)) < 0) {
                snprintf(err, errlen, "sandbox setup: %s", strerror(-e));
        }
        while (n > 0)
                close(fds[--n]);
        return e;
}

int spawn_launch(const struct spawn_opts *o, struct spawn_child *out, char *err, size_t errlen)
{
        struct spawn_child c = SPAWN_CHILD_NONE;
        struct spawn_shell sh = SPAWN_SHELL_NONE;
        int sv[2] = { -1, -1 }, setup[2] = { -1, -1 }, rep[2] = { -1, -1 };
        int devnull = -1, self = -1, e;
        struct wire_writer msg = { 0 };

        if ((e = spawn_setup_pack(o, &msg, err, errlen)) < 0)
                goto out;
        /* Only gadgetd's end of the report pipe is non-blocking: what comes
         * from the sandbox never makes gadgetd wait (spawn_report.c). */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
            fcntl(rep[0], F_SETFL, O_NONBLOCK) < 0 ||
            (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
            (self = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
                goto out;
        }
        /* A shell made beforehand in the network namespace the policy
         * asks for, else one now. */
        bool shared_net = !o->enter && o->policy->netns == POLICY_NETNS_SHARED;
        if (o->shell && o->shell->pid > 0 && o->shell->shared_net == shared_net) {
                sh = *o->shell;
                *o->shell = SPAWN_SHELL_NONE;
        } else if ((e = spawn_shell_new(o->helper, shared_net, &sh, err, errlen)) < 0) {
                goto out;
        }
        c.pid = sh.pid;
        c.pidfd = sh.pidfd;
        setup[0] = sh.setup_fd;
        close(sh.mounts_fd);
        sh = SPAWN_SHELL_NONE;
        c.report_fd = rep[0];
        rep[0] = -1;
        wire_reader_init(&c.report, SANDBOX_REPORT_MAX);
        c.rpc_fd = sv[0];
        sv[0] = -1;
        e = write_id_maps(c.pid, o->host_uid);
        if (e < 0) {
                snprintf(err, errlen, "user namespace id map: %s", strerror(-e));
                goto out;
        }
        /* The setup is the start signal. */
        cpu_set_t cpus;
        bool have_cpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
        if (have_cpus)
                build_elsewhere(c.pid, &cpus);
        int fds[SANDBOX_FDS_SENT + 1] = { rep[1], sv[1], o->stdout_fd, o->stderr_fd, devnull, self, o->core_fd };
        if ((e = send_setup(setup[0], &msg, fds, SANDBOX_FDS_SENT + (o->core_fd > 0))) < 0) {
                snprintf(err, errlen, "sandbox setup: %s", strerror(-e));
                goto out;
        }
        int *ends[] = { &rep[1], &sv[1], &devnull, &self };
        for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
                close(*ends[i]);
                *ends[i] = -1;
        }
        if ((e = give_cgroups(o, c.pid, setup[0], have_cpus ? &cpus : NULL, err, errlen)) < 0) {
                /* The helper ended before it read the cgroup message (a step
                 * of its setup failed first): its report says which. Why
                 * this does not block: the wait for it is bounded. */
                char why[512];
                if ((e == -EPIPE || e == -ECONNRESET) &&
                    await_report(&c, SPAWN_REPORT_FAILED, REPORT_AFTER_EPIPE_MS, why, sizeof why) == 0)
                        snprintf(err, errlen, "%s", why);
                goto out;
        }
        if (o->waiting)
                o->waiting(o->waiting_arg);
        /* Non-blocking before the program runs: the caller may watch it
         * while the sandbox builds. */
        if (fcntl(c.rpc_fd, F_SETFL, O_NONBLOCK) < 0) {
                e = -errno;
                snprintf(err, errlen, "rpc socket: %s", strerror(errno));
                goto out;
        }
        /* The setup socket is kept until the start's report: a
         * pre-warmed sandbox's go comes through it. */
        c.start_fd = setup[0];
        setup[0] = -1;
        c.start_want = o->prewarm ? SPAWN_REPORT_WARM : SPAWN_REPORT_READY;
        *out = c;
        c = SPAWN_CHILD_NONE;
        e = 0;
out:
        spawn_abort(&c); /* a failed start's child must not outlive it */
        for (int i = 0; i < 2; i++) {
                if (sv[i] >= 0) close(sv[i]);
                if (setup[i] >= 0) close(setup[i]);
                if (rep[i] >= 0) close(rep[i]);
        }
        if (devnull >= 0)
                close(devnull);
        if (self >= 0)
                close(self);
        wire_writer_free(&msg);
        return e;
}

/* The start's report came: a pre-warmed sandbox keeps its setup socket
 * for the go, another's is closed. */
static void start_done(struct spawn_child *c)
{
        if (c->start_want == SPAWN_REPORT_WARM)
                c->go_fd = c->start_fd;
        else
                close(c->start_fd);
        c->start_fd = -1;
        c->start_want = 0;
}

int spawn_started(struct spawn_child *c, char *err, size_t errlen)
{
        if (c->start_want == 0)
                return 0;
        int e = read_start(c, c->start_want, err, errlen);
        if (e == 0)
                start_done(c);
        return e;
}

void spawn_abort(struct spawn_child *c)
{
        if (c->pid > 0) {
                kill(c->pid, SIGKILL);
                while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        spawn_child_close(c);
        c->pid = -1;
}

int spawn_gadget(const struct spawn_opts *o, struct spawn_child *out, char *err, size_t errlen)
{
        int e = spawn_launch(o, out, err, errlen);
        if (e < 0)
                return e;
        if ((e = await_report(out, out->start_want, SPAWN_START_TIMEOUT_MS, err, errlen)) < 0) {
                spawn_abort(out);
                return e;
        }
        start_done(out);
        return 0;
}

int spawn_go(struct spawn_child *c, char *err, size_t errlen)
{
        if (c->go_fd < 0) {
                snprintf(err, errlen, "not a pre-warmed sandbox");
                return -EINVAL;
        }
        ssize_t n = write(c->go_fd, "g", 1);
        int e = n == 1 ? 0 : -errno;
        close(c->go_fd);
        c->go_fd = -1;
        if (e < 0) {
                snprintf(err, errlen, "start signal: %s", strerror(-e));
                return e;
        }
        return await_report(c, SPAWN_REPORT_READY, SPAWN_START_TIMEOUT_MS, err, errlen);
}

void spawn_child_close(struct spawn_child *c)
{
        if (c->go_fd >= 0)
                close(c->go_fd);
        if (c->start_fd >= 0)
                close(c->start_fd);
        c->go_fd = c->start_fd = -1;
        c->start_want = 0;
        if (c->pidfd >= 0)
                close(c->pidfd);
        if (c->rpc_fd >= 0)
                close(c->rpc_fd);
        if (c->report_fd >= 0)
                close(c->report_fd);
        wire_reader_free(&c->report);
        c->pidfd = c->rpc_fd = c->report_fd = -1;
        c->foreign = false;
}
