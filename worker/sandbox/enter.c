/* enter: gadgetd-sandbox --enter, the probe of gadgetctl exec. gadgetd
 * starts it as root of the host, outside any new namespace, already in the
 * gadget's v2 cgroup; it joins the running sandbox's namespaces and becomes
 * what the gadget's program is — its uid and gid, no capability,
 * no_new_privs, its limits and its seccomp filter — then runs the
 * operator's command there as its child and reports its wait status. Any
 * step that fails is reported by name and the command never runs. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
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

/* The command, in the probe's child: PID N of the gadget's PID namespace.
 * Only its stdin, stdout and stderr are open at the exec. An exec failure
 * is reported (the command never ran). */
static _Noreturn void run_command(const struct sandbox_config *cfg, int probe_pidfd)
{
        const char *step = "parent-death signal";
        char what[2 * SANDBOX_REPORT_TEXT_MAX];
        /* Ends with the probe, which gadgetd kills when gadgetctl leaves;
         * a probe already gone ends it here. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
        if (poll(&(struct pollfd){ .fd = probe_pidfd, .events = POLLIN }, 1, 0) != 0)
                _exit(125);
        step = "fds";
        if (fcntl(cfg->report_fd, F_SETFD, FD_CLOEXEC) < 0 || dup2(cfg->stdin_fd, 0) < 0 ||
            dup2(cfg->stdout_fd, 1) < 0 || dup2(cfg->stderr_fd, 2) < 0)
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
        if ((e = filter_install(cfg->filter)) < 0)
                sandbox_fail(cfg->report_fd, "seccomp", -e);
        pid_t child = fork();
        if (child < 0)
                sandbox_fail(cfg->report_fd, "fork", errno);
        if (child == 0)
                run_command(cfg, self);
        close(cfg->stdin_fd);
        close(cfg->stdout_fd);
        close(cfg->stderr_fd);
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        sandbox_fail(cfg->report_fd, "wait", errno);
        sandbox_report_status(cfg->report_fd, status);
        _exit(0);
}
