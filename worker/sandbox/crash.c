/* crash: the sandbox's init as the program's tracer, to explain a crash.
 * The init traces the program from its first instruction (crash_trace)
 * and follows its threads (not the processes it forks);
 * every stop is resumed at once with its own signal, except a fault
 * signal with its default disposition (the program dies of it): then the
 * init writes a bounded ELF core of the program (core.c) to a memfd,
 * has it symbolised by a child under the gadget's whole filter
 * (symbolise.c), and lets the signal go on, so the program dies exactly
 * as it would have. The crash is reported to gadgetd before the wait
 * status (sandbox.proto Crash).
 * Cost: one stop of the signalled thread per signal delivered to the
 * program (docs/security.md). */
#include "sandbox.h"
#include "crash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static const int crash_signals[] = { SANDBOX_CRASH_SIGNALS };

/* The crash seen, until the program's end is reported. */
static struct crash_info seen;
static bool have_seen;
/* The program, while the init traces it. */
static pid_t traced;
/* gadgetctl debug: every thread is let go at its next stop. */
static bool detaching;

#define SEIZE_OPTIONS (PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL)

bool crash_trace(pid_t program, int *status)
{
        /* It asked to be traced (PTRACE_TRACEME) before its exec, so it
         * stops at its exec's SIGTRAP before its first instruction. Then
         * it is handed from that old-style trace to a seized one (which
         * has PTRACE_EVENT_STOP and PTRACE_LISTEN, so its own stops stay
         * stops): detached into a SIGSTOP, seized while stopped, and
         * continued. Why nothing of the program runs untraced: a SIGSTOP
         * stops it before it returns to its code, and it runs again only
         * at the SIGCONT, seized by then. */
        pid_t pid;
        while ((pid = waitpid(program, status, __WALL)) < 0 && errno == EINTR)
                ;
        if (pid != program || !WIFSTOPPED(*status))
                return pid == program; /* killed before its first instruction */
        if (ptrace(PTRACE_DETACH, program, 0, SIGSTOP) < 0)
                return false;
        if (ptrace(PTRACE_SEIZE, program, 0, SEIZE_OPTIONS) == 0)
                traced = program;
        kill(program, SIGCONT);
        return false;
}

static bool is_crash_signal(int sig)
{
        for (size_t i = 0; i < sizeof crash_signals / sizeof *crash_signals; i++)
                if (crash_signals[i] == sig)
                        return true;
        return false;
}

/* Whether the process of thread tid has sig at its default disposition
 * (neither caught nor ignored). A synchronous fault that is blocked or
 * ignored was set back to the default by the kernel before this stop. */
static bool default_disposition(pid_t tid, int sig)
{
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        unsigned long long mask = 0;
        static const char *const keys[] = { "\nSigIgn:", "\nSigCgt:" };
        for (size_t k = 0; k < 2; k++) {
                const char *p = strstr(buf, keys[k]);
                if (!p)
                        return false;
                mask |= strtoull(p + strlen(keys[k]), NULL, 16);
        }
        return !(mask & (1ull << (sig - 1)));
}

/* The crash at tid's signal-delivery stop: what the signal says, then the
 * core and its backtrace. */
static void capture(const struct sandbox_config *cfg, pid_t tid)
{
        siginfo_t si;
        if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) < 0)
                return;
        memset(&seen, 0, sizeof seen);
        seen.signal = si.si_signo;
        seen.code = si.si_code;
        seen.thread = tid;
        /* si_addr means an address only for the kernel's own faults. */
        if (si.si_code > 0 && (si.si_signo == SIGSEGV || si.si_signo == SIGBUS || si.si_signo == SIGILL ||
                               si.si_signo == SIGFPE || si.si_signo == SIGTRAP))
                seen.address = (uint64_t)(uintptr_t)si.si_addr;
        have_seen = true;
        /* CoreDump=: into the memfd gadgetd sealed at its size, which
         * bounds it; else a memfd of the init's own, for the backtrace. */
        int core = -1, seals = cfg->core_fd >= 0 ? fcntl(cfg->core_fd, F_GET_SEALS) : -1;
        uint64_t max = CRASH_CORE_MAX, size = 0;
        struct stat st;
        if (seals >= 0 && (seals & F_SEAL_GROW) && fstat(cfg->core_fd, &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_size > 0) {
                core = cfg->core_fd;
                max = (uint64_t)st.st_size;
        }
        /* The init's file size limit (TmpSize=) bounds every write. */
        struct rlimit fs;
        if (getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < max)
                max = fs.rlim_cur;
        if (core < 0 && (core = memfd_create("gadget-core", MFD_CLOEXEC)) < 0)
                return;
        if (core_write(core, traced, tid, &si, max, core == cfg->core_fd, &size) == 0) {
                crash_symbolise(cfg, core, tid, &seen);
                seen.core_size = core == cfg->core_fd ? size : 0;
        }
        if (core != cfg->core_fd)
                close(core);
}

void crash_detach(void)
{
        char path[64];
        if (!traced || detaching)
                return;
        detaching = true;
        /* Each thread stops (PTRACE_INTERRUPT) and is let go there
         * (crash_stopped); a thread made meanwhile is let go at its first
         * stop. */
        snprintf(path, sizeof path, "/proc/%d/task", (int)traced);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (atoi(de->d_name) > 0)
                        (void)ptrace(PTRACE_INTERRUPT, atoi(de->d_name), 0, 0);
        if (d)
                closedir(d);
}

bool crash_stopped(const struct sandbox_config *cfg, pid_t pid, int status)
{
        if (!WIFSTOPPED(status))
                return false;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (detaching) {
                /* A signal it was stopped for goes on with it; a group
                 * stop stays one. */
                (void)ptrace(PTRACE_DETACH, pid, 0, event == 0 ? sig : 0);
                return true;
        }
        if (event == PTRACE_EVENT_STOP) {
                /* A new thread's first stop (SIGTRAP) goes on; a group
                 * stop (SIGSTOP, SIGTSTP...) stays a stop until SIGCONT. */
                if (sig == SIGTRAP)
                        (void)ptrace(PTRACE_CONT, pid, 0, 0);
                else
                        (void)ptrace(PTRACE_LISTEN, pid, 0, 0);
                return true;
        }
        if (event != 0) { /* PTRACE_EVENT_CLONE */
                (void)ptrace(PTRACE_CONT, pid, 0, 0);
                return true;
        }
        if (is_crash_signal(sig) && default_disposition(pid, sig))
                capture(cfg, pid);
        /* The signal goes on as if no one had looked. */
        (void)ptrace(PTRACE_CONT, pid, 0, sig);
        return true;
}

void crash_report_if(int fd, int status)
{
        /* Only a death by the signal seen: a program that lived on (the
         * signal was sent again, blocked...) did not crash by it. */
        if (have_seen && WIFSIGNALED(status) && WTERMSIG(status) == seen.signal)
                sandbox_report_crash(fd, &seen);
        have_seen = false;
}
