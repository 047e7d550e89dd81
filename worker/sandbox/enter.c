/* enter: gadgetd-sandbox --enter, the probe of gadgetctl exec. gadgetd
 * starts it as root of the host, outside any new namespace, already in the
 * gadget's v2 cgroup; it joins the running sandbox's namespaces and becomes
 * what the gadget's program is — its uid and gid, no capability,
 * no_new_privs, its limits and its seccomp filter — then runs the
 * operator's command there, under a reaper of its own, and reports its
 * wait status. Any step that fails is reported by name and the command
 * never runs. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

extern char **environ;

/* Every namespace the sandbox has. */
#define ENTER_NS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
                  CLONE_NEWCGROUP)

/* The command, in the reaper's child. Only its stdin, stdout and stderr
 * are open at the exec; an exec failure is reported (it never ran). */
static _Noreturn void run_command(const struct sandbox_config *cfg)
{
        const char *step = "parent-death signal";
        char what[2 * SANDBOX_REPORT_TEXT_MAX];
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        step = "fds";
        if (fcntl(cfg->report_fd, F_SETFD, FD_CLOEXEC) < 0 || dup2(cfg->stdin_fd, 0) < 0 || dup2(cfg->stdout_fd, 1) < 0 || dup2(cfg->stderr_fd, 2) < 0)
                goto fail;
        /* Why this is safe: nothing but 0-2 reaches the command; the report
         * fd closes itself at the exec. */
        if (close_range(3, (unsigned)cfg->report_fd - 1, 0) < 0 ||
            close_range((unsigned)cfg->report_fd + 1, ~0U, 0) < 0)
                goto fail;
        step = "signals";
        if (init_reset_signals() < 0 || limits_apply_program(cfg, &step) < 0)
                goto fail;
        /* No controlling terminal, as the gadget has none: TIOCSTI has no
         * target even before the filter refuses it. */
        step = "session";
        if (setsid() < 0)
                goto fail;
        step = "exec";
        environ = (char **)cfg->envp;
        execvp(cfg->argv[0], cfg->argv);
fail:
        snprintf(what, sizeof what, "%s %s", step, cfg->argv[0]);
        sandbox_report_failed(cfg->report_fd, what, strerror(errno));
        _exit(127);
}

static volatile sig_atomic_t left;

static void on_term(int sig)
{
        left = 1;
}

/* SIGKILL to each child of this process that /proc lists now. */
static void kill_children(void)
{
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
                kill((pid_t)strtol(t, NULL, 10), SIGKILL);
}

/* The exec's reaper, in the gadget's PID namespace: a child subreaper,
 * so what the command starts and leaves comes to it, not to the gadget's
 * init. Once the command ended, or the probe above it did (the operator
 * left: SIGTERM), it kills whatever the command left, until it has no
 * child: an exec leaves nothing running in the gadget (its tasks would
 * count against the gadget's TasksMax). Then it reports the command's
 * wait status. */
static _Noreturn void reaper(const struct sandbox_config *cfg, int probe_pidfd)
{
        struct sigaction term = { .sa_handler = on_term }; /* no SA_RESTART: waitpid returns */
        int status = 0, st;
        bool ended = false;
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0 ||
            sigaction(SIGTERM, &term, NULL) < 0)
                sandbox_fail(cfg->report_fd, "exec reaper", errno);
        /* A probe already gone: end here. */
        if (poll(&(struct pollfd){ .fd = probe_pidfd, .events = POLLIN }, 1, 0) != 0)
                _exit(125);
        close(probe_pidfd);
        pid_t cmd = fork();
        if (cmd < 0)
                sandbox_fail(cfg->report_fd, "fork", errno);
        if (cmd == 0)
                run_command(cfg);
        close(cfg->stdin_fd);
        close(cfg->stdout_fd);
        close(cfg->stderr_fd);
        /* Only an end is the command's end (a stop is no end). */
        for (pid_t p; !ended && !left;) {
                if ((p = waitpid(-1, &st, 0)) == cmd && (WIFEXITED(st) || WIFSIGNALED(st)))
                        status = st, ended = true;
                else if (p < 0 && errno == ECHILD)
                        break;
        }
        /* Bounded: each turn reaps one process, and one killed forks no
         * more; its children come here and are killed the next turn. */
        for (pid_t p;;) {
                kill_children();
                if ((p = waitpid(-1, &st, 0)) == cmd && !ended && (WIFEXITED(st) || WIFSIGNALED(st)))
                        status = st, ended = true;
                else if (p < 0 && errno == ECHILD)
                        break;
        }
        if (ended)
                sandbox_report_status(cfg->report_fd, status);
        _exit(0);
}

/* The gadget's credentials, limits and filter, in the sandbox's namespaces. */
static void become_gadget(const struct sandbox_config *cfg, int init_pidfd)
{
        const char *step = NULL;
        int e;
        /* v1 cgroups (gadgetd put this process in the v2 one): before the
         * namespaces, as the host's root that opened their files. */
        if ((e = sandbox_join_v1(cfg->setup_fd, &step)) < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        close(cfg->setup_fd);
        /* Why: host root's groups would follow into the namespace; the
         * probe keeps none. */
        if (setgroups(0, NULL) < 0)
                sandbox_fail(cfg->report_fd, "groups", errno);
        /* Every namespace of the sandbox at once through its PID 1's pidfd
         * (the kernel joins the user namespace first). Why this is safe:
         * the pidfd names that process for good, never a reused pid; one
         * that ended fails here. Joining the mount namespace puts root and
         * working directory at its root: the gadget's (pivot_root). */
        if (setns(init_pidfd, ENTER_NS) < 0)
                sandbox_fail(cfg->report_fd, "enter the sandbox's namespaces", errno);
        close(init_pidfd);
        if (chdir("/") < 0)
                sandbox_fail(cfg->report_fd, "root", errno);
        if ((e = sandbox_become_user()) < 0)
                sandbox_fail(cfg->report_fd, "user ids", -e);
        /* A change of credentials clears the parent-death signal. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                sandbox_fail(cfg->report_fd, "parent-death signal", errno);
        if ((e = limits_apply(cfg, &step)) < 0)
                sandbox_fail(cfg->report_fd, step, -e);
        if ((e = caps_drop_bounding()) < 0 || (e = caps_drop_all()) < 0)
                sandbox_fail(cfg->report_fd, "capabilities", -e);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                sandbox_fail(cfg->report_fd, "no_new_privs", errno);
}

_Noreturn void enter_main(const struct sandbox_config *cfg, int init_pidfd)
{
        int status, e;
        become_gadget(cfg, init_pidfd);
        int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
        if (self < 0)
                sandbox_fail(cfg->report_fd, "pidfd", errno);
        /* The same filter as the gadget's program, on the probe and so on
         * everything it starts. */
        if ((e = filter_install(&cfg->filter->direct, false)) < 0)
                sandbox_fail(cfg->report_fd, "seccomp", -e);
        /* Its child is the first of the exec in the gadget's PID namespace. */
        pid_t child = fork();
        if (child < 0)
                sandbox_fail(cfg->report_fd, "fork", errno);
        if (child == 0)
                reaper(cfg, self);
        close(self);
        close(cfg->stdin_fd);
        close(cfg->stdout_fd);
        close(cfg->stderr_fd);
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        sandbox_fail(cfg->report_fd, "wait", errno);
        _exit(0);
}
