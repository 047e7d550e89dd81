/* sandbox_abi: the contract between gadgetd and gadgetd-sandbox, the
 * program every worker starts as (worker/sandbox/): the fd numbers it
 * starts with, the messages on its setup socket besides the setup itself
 * (sandbox.proto), the size of the reports on its report pipe (also
 * sandbox.proto), and the limits and signals both sides agree on. */
#pragma once

#include <signal.h>

/* Uid and gid the gadget has inside its user namespace. */
#define SANDBOX_INNER_ID 1000
/* The RPC fd number inside the gadget (also in GADGET_FD). */
#define SANDBOX_RPC_FD 3
/* The helper's file name (next to gadgetd in a build tree, else in
 * LIBEXECDIR/gadgetd). */
#define SANDBOX_HELPER "gadgetd-sandbox"

/* The fds of gadgetd-sandbox (0-2 are /dev/null). The setup socket is the
 * one it starts with; the others come with the setup (SCM_RIGHTS, in this
 * order) and it puts them at these numbers. The "tasks" files of the v1
 * cgroups to join come later on the same socket (SANDBOX_CGROUP_MSG). */
enum sandbox_fd {
        SANDBOX_FD_SETUP = 3,    /* the setup socket (proto/sandbox.proto) */
        SANDBOX_FD_REPORT = 4,   /* write end of the report pipe (sandbox.proto Report) */
        SANDBOX_FD_RPC = 5,      /* the worker end of the RPC socketpair */
        SANDBOX_FD_STDOUT = 6,   /* where the program's output goes */
        SANDBOX_FD_STDERR = 7,
        SANDBOX_FD_DEVNULL = 8,
        SANDBOX_FD_PARENT = 9,   /* pidfd of gadgetd, to tell if it died */
        SANDBOX_FD_CORE = 10,    /* CoreDump= only: a memfd gadgetd sealed at that size, for a crash's core */
};
/* The fds that come with the setup (one more with CoreDump=: SANDBOX_FD_CORE). */
#define SANDBOX_FDS_SENT (SANDBOX_FD_PARENT - SANDBOX_FD_REPORT + 1)
/* gadgetctl exec's probe: gadgetd-sandbox started with SANDBOX_ENTER_ARG
 * as its one argument, outside any new namespace, joins a running
 * sandbox's (worker/sandbox/enter.c). Its setup is a Setup whose argv is
 * the gadget's Exec then the command; its fds come with it in this order
 * from SANDBOX_FD_REPORT on; then SANDBOX_CGROUP_MSG as for a worker. Its
 * report pipe carries a failure, or the command's wait status. */
#define SANDBOX_ENTER_ARG "--enter"
/* A worker's shell started with SANDBOX_SHARED_NET_ARG as its one
 * argument was cloned in the network namespace the gadgets of
 * NetworkNamespace=shared share, and stays in it; without it, the shell
 * makes a network namespace of its own (worker/sandbox/sandbox.c). */
#define SANDBOX_SHARED_NET_ARG "--shared-net"
enum sandbox_enter_fd {
        SANDBOX_ENTER_REPORT = SANDBOX_FD_REPORT,
        SANDBOX_ENTER_STDIN,     /* the operator's stdin, stdout, stderr */
        SANDBOX_ENTER_STDOUT,
        SANDBOX_ENTER_STDERR,
        SANDBOX_ENTER_INIT,      /* pidfd of the sandbox's PID 1 */
};
#define SANDBOX_ENTER_FDS_SENT (SANDBOX_ENTER_INIT - SANDBOX_ENTER_REPORT + 1)
/* After the setup, gadgetd makes the gadget's cgroups while the sandbox is
 * being built, puts the worker in its v2 cgroup, and then sends this one
 * byte with the "tasks" files of its v1 cgroups (SCM_RIGHTS, possibly
 * none): the worker joins those before it sets limits and starts the
 * program. */
#define SANDBOX_CGROUP_MSG 'c'
/* At most this many v1 cgroups to join (one per controller hierarchy). */
#define SANDBOX_CGROUP_FDS_MAX 8

/* The signals PID 1 passes on to the program, and gadgetd run to PID 1:
 * every one whose default action ends a process, but those the kernel
 * raises for a fault (SEGV, BUS, ILL, FPE, TRAP, SYS, ABRT), KILL, and
 * PIPE (gadgetd ignores it). The real-time signals SIGRTMIN..SIGRTMAX go
 * the same way. */
/* gadgetd -> the sandbox's PID 1 in FdStore= mode (sandbox.proto
 * handoff_ms), never forwarded to the program and taken only from outside
 * the sandbox's PID namespace (si_pid 0, SI_USER): "gadgetd left, its next
 * process must adopt you within the bound" and "adopted". */
#define SANDBOX_SIG_HANDOFF SIGURG
#define SANDBOX_SIG_ADOPTED SIGWINCH
/* gadgetd -> the sandbox's PID 1 (gadgetctl debug), taken only from
 * outside likewise and never forwarded: "stop tracing the program" (its
 * crashes are no longer explained), so that a debugger may attach. */
#define SANDBOX_SIG_DETACH SIGTTIN

#define SANDBOX_FORWARDED_SIGNALS \
        SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, \
        SIGPWR, SIGXCPU, SIGXFSZ, SIGSTKFLT

/* Per-uid kernel limits every gadget gets (each gadget has a host uid of
 * its own, so they apply per gadget). RLIMIT_NPROC comes from gadgetd
 * (TasksMax, see supervisor/limits/limiter.c); message queues stay at 0 because
 * the seccomp filter refuses mq_open anyway. worker/limits.c also sets
 * the user namespace's inotify and namespace counters to 0. */
#define SANDBOX_MEMLOCK_MAX (64u * 1024u)
#define SANDBOX_SIGPENDING_MAX 1024u
#define SANDBOX_MSGQUEUE_MAX 0u

/* The report pipe carries sandbox.proto Reports (how the start went, how
 * the program ended), framed by wire.c like every other message. Each is
 * written whole in one write of at most SANDBOX_REPORT_MAX bytes
 * (wire_send_atomic): a pipe write of at most PIPE_BUF bytes is atomic, so
 * PID 1 can pass on the failure PID 2 reported without reading it, and
 * gadgetd never sees reports interleaved. The two texts of a failure are
 * cut to SANDBOX_REPORT_TEXT_MAX bytes each (whole UTF-8 characters);
 * gadgetd refuses longer ones. */
#define SANDBOX_REPORT_TEXT_MAX 512u
#define SANDBOX_REPORT_MAX 2048u
/* A Denials report: at most this many calls, each path at most this long
 * (whole UTF-8 characters, no control bytes): 16 * (96 + 40) fits a report. */
#define SANDBOX_DENIALS_MAX 12u
#define SANDBOX_DENIAL_PATH_MAX 96u
/* A crash report's backtrace (sandbox.proto Crash): at most this many
 * frames of at most this many bytes each, so that it fits one report. */
#define SANDBOX_CRASH_FRAMES_MAX 16u
#define SANDBOX_CRASH_FRAME_MAX 96u
/* The largest core a crash reports (CoreDump='s bound). */
#define SANDBOX_CORE_MAX (256ull << 20)
/* The signals a crash is made of, with their default disposition. */
#define SANDBOX_CRASH_SIGNALS SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP
