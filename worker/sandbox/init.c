/* init: PID 1 of the gadget's PID namespace. It starts the gadget program
 * as PID 2, reaps every orphan, forwards termination signals, and reports
 * the program's wait status to gadgetd. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crash.h"
#include "policy.h"
#include "wire.h"

/* The stack PID 2 runs on until its exec: exec_program's buffers and the
 * calls it makes. */
#define CHILD_STACK (64u * 1024u)
/* How far below the program's first stack pointer its stack is mapped at
 * least: exec maps 128 KiB below the arguments (fs/exec.c,
 * setup_arg_pages), and a stack never shrinks. */
#define STACK_MAPPED (128u * 1024u)
#define PAGE_DOWN(a) ((uintptr_t)(a) & ~(uintptr_t)4095)

/* The first stack pointer (glibc's, set at _start). */
extern void *__libc_stack_end;

static const int forwarded[] = { SANDBOX_FORWARDED_SIGNALS };

/* Every disposition back to SIG_DFL and an empty mask: the program starts
 * as a fresh process would, whatever gadgetd (SIGPIPE ignored) or the
 * caller of gadgetd run ignored or blocked. exec resets only handled
 * signals; ignored ones and the mask survive it. */
int init_reset_signals(void)
{
        sigset_t none;
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigemptyset(&dfl.sa_mask);
        for (int sig = 1; sig < NSIG; sig++) {
                /* KILL and STOP cannot change; libc keeps a few real-time
                 * signals for itself (EINVAL), and exec resets those. */
                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                if (sigaction(sig, &dfl, NULL) < 0 && errno != EINVAL)
                        return -errno;
        }
        sigemptyset(&none);
        return sigprocmask(SIG_SETMASK, &none, NULL) < 0 ? -errno : 0;
}

/* In PID 2, just before the exec: installs the program's filter and
 * hands its listener to PID 1 over sk. Why last: from here on a refused
 * call waits for PID 1, which waits for this exec (vfork), so nothing
 * after it may be refused (execve is not). */
static int install_filter(const struct sandbox_config *cfg, int sk)
{
        if (cfg->no_listener) {
                close(sk);
                return filter_install(&cfg->filter->direct, false);
        }
        int l = filter_install(cfg->learn ? &cfg->filter->learn : &cfg->filter->program, true);
        if (l < 0)
                return l;
        char byte = 0;
        ssize_t n = wire_send_fds(sk, &byte, 1, &l, 1);
        close(l);
        close(sk);
        return n == 1 ? 0 : n < 0 ? (int)n : -EIO;
}

/* In PID 2: only fds 0 (/dev/null), 1, 2 and the RPC fd survive, then the
 * program is exec'd. An exec failure is written to err_fd. */
static _Noreturn void exec_program(const struct sandbox_config *cfg, int err_fd, int notify_sk, bool *traced)
{
        int e;
        const char *step = "fds";

        /* dup above the target numbers first so no source is overwritten. */
        int rpc = fcntl(cfg->rpc_fd, F_DUPFD, 10);
        int out = fcntl(cfg->stdout_fd, F_DUPFD, 10);
        int err = fcntl(cfg->stderr_fd, F_DUPFD, 10);
        int nul = fcntl(cfg->devnull_fd, F_DUPFD, 10);
        int rep = fcntl(err_fd, F_DUPFD_CLOEXEC, 10);
        int sk = fcntl(notify_sk, F_DUPFD_CLOEXEC, 10);
        if (rpc < 0 || out < 0 || err < 0 || nul < 0 || rep < 0 || sk < 0 ||
            dup2(nul, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
            dup2(rpc, SANDBOX_RPC_FD) < 0)
                goto fail;
        /* Why this is safe: every fd but 0-3 is closed, whatever gadgetd
         * may have leaked; the report fd closes itself at exec, the
         * listener's socket before it. */
        int lo = rep < sk ? rep : sk, hi = rep < sk ? sk : rep;
        if (close_range(SANDBOX_RPC_FD + 1, (unsigned)lo - 1, 0) < 0 ||
            (hi > lo + 1 && close_range((unsigned)lo + 1, (unsigned)hi - 1, 0) < 0) ||
            close_range((unsigned)hi + 1, ~0U, 0) < 0)
                goto fail;
        step = "signals";
        if (init_reset_signals() < 0 || limits_apply_program(cfg, &step) < 0)
                goto fail;
        /* PID 1 traces the program from its first instruction on, to
         * explain its crashes (crash.c). traced is in PID 1's memory
         * (CLONE_VM): it reads it once this process exec'd. Not in a
         * learning run, whose PID 2 has a memory of its own. */
        *traced = !cfg->learn && ptrace(PTRACE_TRACEME, 0, 0, 0) == 0;
        step = "seccomp";
        if ((e = install_filter(cfg, sk)) < 0) {
                errno = -e;
                goto fail;
        }
        step = "exec";
        execve(cfg->exec, cfg->argv, cfg->envp);
fail:
        e = errno;
        {
                /* Room past the cut, which report.c makes on a character boundary. */
                char what[2 * SANDBOX_REPORT_TEXT_MAX], why[2 * SANDBOX_REPORT_TEXT_MAX], interp[256];
                snprintf(what, sizeof what, "%s %s", step, cfg->exec);
                snprintf(why, sizeof why, "%s", strerror(e));
                /* The program is there (it was mounted), so ENOENT means
                 * its interpreter is not: name it and the key that adds it. */
                if (e == ENOENT && strcmp(step, "exec") == 0 &&
                    policy_interpreter(cfg->exec, interp, sizeof interp) > 0 && access(interp, F_OK) < 0)
                        snprintf(why, sizeof why, "its interpreter %s is not in the sandbox (%s)", interp,
                                 cfg->system_libraries ? "list it in ReadOnlyPaths="
                                                       : "SystemLibraries=yes adds the system's");
                sandbox_report_failed(rep >= 0 ? rep : err_fd, what, why);
        }
        _exit(127);
}

/* What PID 2 is started with. */
struct program_start {
        const struct sandbox_config *cfg;
        int pipe_rd, pipe_wr;
        int notify_sk;                   /* PID 2's end of the listener's socket */
        bool traced;                     /* written by PID 2: it asked to be traced */
};

/* PID 2 on its own stack, in PID 1's memory until it execs. */
static int program_child(void *arg)
{
        struct program_start *ps = arg;
        close(ps->pipe_rd);
        close(ps->cfg->report_fd);
        exec_program(ps->cfg, ps->pipe_wr, ps->notify_sk, &ps->traced);
}

/* Starts PID 2 as vfork does: it shares PID 1's memory, so nothing of it
 * is copied, and PID 1 waits until PID 2 has exec'd the program (or
 * failed), which it would wait for anyway. Why this is safe: PID 2 gets its
 * own fd table, signal handlers and limits, as after fork; only its stack
 * and the variables it writes (errno) are PID 1's memory, and PID 1 runs
 * again only once PID 2 is the program, in memory of its own. */
static pid_t start_program(const struct sandbox_config *cfg, int pipefd[2], int notify_sk, bool *traced)
{
        struct program_start ps = { .cfg = cfg, .pipe_rd = pipefd[0], .pipe_wr = pipefd[1], .notify_sk = notify_sk };
        void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (stack == MAP_FAILED)
                return -1;
        /* A learning run's filter holds the exec itself for PID 1 (learn.c),
         * which must then run beside PID 2: a copy of its memory instead. */
        int flags = cfg->learn ? SIGCHLD : CLONE_VM | CLONE_VFORK | SIGCHLD;
        pid_t child = clone(program_child, (char *)stack + CHILD_STACK, flags, &ps);
        munmap(stack, CHILD_STACK);
        *traced = child > 0 && ps.traced;
        return child;
}

/* Waits until exec succeeded (the pipe closes) or failed (a report
 * comes), answering meanwhile what the program's filter holds (listener,
 * -1 for none: only a learning run's holds the exec and what a failed one
 * looks at). */
static int wait_exec(int rd, const struct sandbox_config *cfg, int listener)
{
        uint8_t buf[SANDBOX_REPORT_MAX + 4];
        ssize_t n;
        struct pollfd p[2] = { { .fd = rd, .events = POLLIN }, { .fd = listener, .events = POLLIN } };
        while (listener >= 0 && !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
                if (poll(p, 2, -1) < 0)
                        continue;
                if ((p[1].revents & POLLIN) && denials_handle(listener, &cfg->filter->direct, cfg->report_fd) < 0)
                        break;
                if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL))
                        p[1].fd = -1;
        }
        do
                n = read(rd, buf, sizeof buf);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return 0;
        /* Pass the exec failure on to gadgetd as the start's error, unread:
         * PID 2 wrote it as one report in one write (report.c), so this
         * one read has all of it, and gadgetd checks it like any other. */
        ssize_t w = write(cfg->report_fd, buf, (size_t)n);
        (void)w;
        return -1;
}

uint64_t init_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* FdStore= mode, the program's status reported: waits (END_ACK_MS at
 * most) until gadgetd says it read the gadget's counters
 * (SANDBOX_SIG_ADOPTED from outside) or its report pipe has no reader.
 * Why: the gadget's cgroup is then in a scope of its own, which systemd
 * removes as soon as it is empty, and with it the count of OOM kills
 * that says why the program ended. */
#define END_ACK_MS 1000
static void wait_read(const struct sandbox_config *cfg, int sfd)
{
        uint64_t end = init_now_ms() + END_ACK_MS, now;
        while (sfd >= 0 && (now = init_now_ms()) < end) {
                struct pollfd p[2] = { { .fd = sfd, .events = POLLIN }, { .fd = cfg->report_fd, .events = 0 } };
                if (poll(p, 2, (int)(end - now)) <= 0)
                        continue;
                if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL))
                        return;
                struct signalfd_siginfo si;
                if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof si) == sizeof si &&
                    si.ssi_signo == SANDBOX_SIG_ADOPTED && si.ssi_code == SI_USER && si.ssi_pid == 0)
                        return;
        }
}

/* The program ended: reports its crash if it was one, what its filter
 * refused, its status, and ends PID 1, which ends every other process of
 * the namespace (sfd: FdStore= mode's signalfd, -1 otherwise). */
static _Noreturn void program_ended(const struct sandbox_config *cfg, int status, int sfd)
{
        crash_report_if(cfg->report_fd, status);
        /* SIGSYS is how the filter kills a call of a foreign ABI (the
         * program's own raise(SIGSYS) counts too: it harms only its own
         * record). */
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
                denials_killed();
        denials_flush(cfg->report_fd, true);
        sandbox_report_status(cfg->report_fd, status);
        wait_read(cfg, sfd);
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* Reaps what ended, and the stops of the program's threads, which the
 * init traces (crash.c). */
static void reap(const struct sandbox_config *cfg, pid_t child, int sfd)
{
        int status;
        pid_t pid;
        /* __WALL: the program's threads too. */
        while ((pid = waitpid(-1, &status, WNOHANG | __WALL)) > 0)
                if (!crash_stopped(cfg, pid, status) && pid == child)
                        program_ended(cfg, status, sfd);
}

/* Gives back the pages of the stack the start dirtied below the caller's
 * frame (the setup ran deep: paths, mount steps, PID 2's start): PID 1
 * waits on a few hundred bytes of it for the gadget's life, and what it
 * runs later (a crash's core, a denial) dirties them again only then.
 * Why this is safe: nothing below the stack pointer is live (the signals
 * PID 1 takes come by signalfd, no handler runs on this stack), the
 * madvise call's own frame lies within the margin left below this frame,
 * and a page given back reads as zeros when touched again. Only within
 * the stack's mapping: the range is within the 128 KiB exec mapped below
 * the first stack pointer, and mincore says all of it is mapped (else
 * nothing is given back: a stack limit below that). Never inlined: its
 * frame is then below every frame of its callers, whose locals (the
 * signal set init_loop takes) stay live. */
static __attribute__((noinline)) void release_stack(void)
{
        uintptr_t hi = PAGE_DOWN((char *)__builtin_frame_address(0) - 1024);
        uintptr_t lo = PAGE_DOWN((char *)__libc_stack_end - STACK_MAPPED) + 4096;
        unsigned char vec[STACK_MAPPED / 4096];
        if (hi <= lo || (hi - lo) / 4096 > sizeof vec || mincore((void *)lo, hi - lo, vec) < 0)
                return;
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* PID 1's loop: its signals (SIGCHLD: reap; the forwarded ones: on to the
 * program), the program's refused calls (listener, denials.c) and, in
 * FdStore= mode (no parent-death signal), the end of the sandbox: when no
 * process holds its report pipe's read end any more (gadgetd crashed, or
 * systemd closed its fd store at a stop: the write end polls POLLERR),
 * and when gadgetd said it left (SANDBOX_SIG_HANDOFF) and no next gadgetd
 * said it adopted it (SANDBOX_SIG_ADOPTED) within handoff_ms. Why only
 * from outside: those two are taken only with si_pid 0 and SI_USER, which
 * no process of the sandbox can send (the kernel refuses a forged SI_USER). */
static _Noreturn void init_loop(const struct sandbox_config *cfg, const sigset_t *set, pid_t child, int listener)
{
        uint64_t deadline = 0;
        int sfd = signalfd(-1, set, SFD_CLOEXEC);
        if (sfd < 0)
                _exit(125);
        for (;;) {
                struct pollfd p[3] = { { .fd = sfd, .events = POLLIN },
                                       { .fd = cfg->handoff_ms ? cfg->report_fd : -1, .events = 0 },
                                       { .fd = listener, .events = POLLIN } };
                uint64_t now = init_now_ms();
                int timeout = deadline == 0 ? -1 : deadline <= now ? 0 : (int)(deadline - now);
                int due = denials_due_ms();
                if (due >= 0 && (timeout < 0 || due < timeout))
                        timeout = due;
                if (poll(p, 3, timeout) < 0)
                        continue;
                if (denials_due_ms() == 0)
                        denials_flush(cfg->report_fd, false);
                if ((deadline && init_now_ms() >= deadline) || (p[1].revents & (POLLERR | POLLHUP | POLLNVAL))) {
                        reap(cfg, child, sfd);
                        kill(-1, SIGKILL);
                        _exit(125); /* no gadgetd: no sandbox lives on unwatched */
                }
                /* POLLHUP: no process runs under the filter any more. */
                if ((p[2].revents & POLLIN) && denials_handle(listener, &cfg->filter->direct, cfg->report_fd) < 0)
                        p[2].revents |= POLLERR;
                if (p[2].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                        close(listener);
                        listener = -1;
                }
                struct signalfd_siginfo si;
                if (!(p[0].revents & POLLIN) || read(sfd, &si, sizeof si) != sizeof si)
                        continue;
                bool outside = si.ssi_code == SI_USER && si.ssi_pid == 0;
                if (si.ssi_signo == SIGCHLD)
                        reap(cfg, child, cfg->handoff_ms ? sfd : -1);
                else if (cfg->handoff_ms && si.ssi_signo == SANDBOX_SIG_HANDOFF)
                        deadline = outside && !deadline ? init_now_ms() + cfg->handoff_ms : deadline;
                else if (cfg->handoff_ms && si.ssi_signo == SANDBOX_SIG_ADOPTED)
                        deadline = outside ? 0 : deadline;
                else if (si.ssi_signo == SANDBOX_SIG_DETACH) {
                        if (outside) /* gadgetctl debug */
                                crash_detach();
                }
                else
                        kill(child, (int)si.ssi_signo);
        }
}

/* The program's listener, which PID 2 sent before its exec (install_filter). */
static int take_listener(int sk)
{
        char byte;
        int fd = -1;
        size_t n = 0;
        ssize_t r = wire_recv_fds(sk, &byte, 1, &fd, 1, &n);
        close(sk);
        return r == 1 && n == 1 ? fd : -1;
}

_Noreturn void init_run(const struct sandbox_config *cfg, const int notify_sk[2])
{
        sigset_t set;
        int pipefd[2], listener;
        pid_t child;

        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
                sigaddset(&set, forwarded[i]);
        for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
                sigaddset(&set, sig);
        sigaddset(&set, SANDBOX_SIG_DETACH);
        if (cfg->handoff_ms) {
                sigaddset(&set, SANDBOX_SIG_HANDOFF);
                sigaddset(&set, SANDBOX_SIG_ADOPTED);
        }
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
                sandbox_report_failed(cfg->report_fd, "init", "setup failed");
                _exit(125);
        }
        /* Pre-warmed: every layer is in place; the program starts when
         * gadgetd sends the go byte (end of file: it dropped this one). */
        if (cfg->prewarm) {
                char go;
                ssize_t n;
                sandbox_report_ready(cfg->report_fd, true);
                do
                        n = read(cfg->setup_fd, &go, 1);
                while (n < 0 && errno == EINTR);
                if (n != 1)
                        _exit(125);
                close(cfg->setup_fd);
        }
        bool traced;
        child = start_program(cfg, pipefd, notify_sk[1], &traced);
        if (child < 0) {
                sandbox_report_failed(cfg->report_fd, "init", "fork failed");
                _exit(125);
        }
        close(pipefd[1]);
        close(cfg->rpc_fd);
        close(notify_sk[1]);
        listener = -1;
        /* A learning run's listener first: its filter holds the exec. */
        if (cfg->learn)
                listener = take_listener(notify_sk[0]);
        if (wait_exec(pipefd[0], cfg, listener) == 0) {
                /* Fail closed: a program whose refusals no one answers
                 * does not run. */
                if (cfg->no_listener)
                        close(notify_sk[0]);
                else if (listener < 0 && (listener = take_listener(notify_sk[0])) < 0) {
                        kill(child, SIGKILL);
                        sandbox_report_failed(cfg->report_fd, "seccomp", "the filter's listener did not come");
                        _exit(125);
                }
                /* Its tracer from its first instruction on, to explain its
                 * crashes; it may have been killed before that. */
                int status;
                bool ended = traced && crash_trace(child, &status);
                sandbox_report_ready(cfg->report_fd, false);
                if (cfg->learn)
                        learn_started(cfg->report_fd);
                if (ended)
                        program_ended(cfg, status, -1);
        } else if (!cfg->learn) {
                close(notify_sk[0]);
        }
        close(pipefd[0]);
        /* PID 2 is the program now (or gone), in memory of its own: what
         * only the start needed goes, for the gadget's life. */
        sandbox_setup_release();
        release_stack();
        init_loop(cfg, &set, child, listener);
}
