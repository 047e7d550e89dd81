/* spawn: gadgetd's side of starting a worker — clone into new namespaces
 * with vfork semantics and exec gadgetd-sandbox there (worker/sandbox/helper.c),
 * write the id maps, send the setup, and wait until the sandbox is entered
 * or has failed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "filter.h"
#include "sandbox_abi.h"
#include "wire.h"

struct cgroup;
struct policy;

/* A sandbox shell: gadgetd-sandbox exec'd in new namespaces, its id maps
 * not written yet, waiting for the setup of whichever gadget takes it. It
 * holds nothing of any gadget, so one can be made before a start is asked
 * for (spare.c), taking the namespaces' creation off that start. */
struct spawn_shell {
        pid_t pid;
        int pidfd;
        int setup_fd;   /* gadgetd's end of the setup socket */
        int mounts_fd;  /* gadgetd's mountinfo when the shell was made (see spawn_shell_fresh) */
        bool shared_net; /* in the shared network namespace (NetworkNamespace=shared), not one of its own */
};
#define SPAWN_SHELL_NONE ((struct spawn_shell){ .pid = -1, .pidfd = -1, .setup_fd = -1, .mounts_fd = -1 })

struct spawn_opts {
        const struct policy *policy;
        char *const *args;               /* replace the policy's Arguments if not NULL */
        const struct gadget_filter *filter; /* compiled when gadgetd was built */
        bool learn;                         /* gadgetd run --learn (worker/sandbox/learn.c) */
        uid_t host_uid;                  /* the gadget's host uid and gid */
        int stdout_fd, stderr_fd;        /* where the program's output goes */
        /* Makes the gadget's cgroup (*cg NULL: none) while the worker builds
         * its sandbox; the worker joins it before its limits are set and
         * the program starts. NULL: no cgroup. 0 or -errno with err. */
        int (*make_cgroup)(void *arg, struct cgroup **cg, char *err, size_t errlen);
        void *make_cgroup_arg;
        uint64_t nproc;                  /* RLIMIT_NPROC, from limiter_start */
        uint64_t address_space;          /* RLIMIT_AS, UINT64_MAX for none */
        const struct spawn_helper *helper; /* from spawn_helper_open */
        bool prewarm;                    /* build the sandbox, start the program at spawn_go */
        uint32_t handoff_ms;             /* FdStore= mode: the sandbox's bound without gadgetd (0: none) */
        struct spawn_shell *shell;       /* a shell to use (taken over), or NULL: one is made */
        bool enter;                      /* a probe's setup (spawn_enter): no paths, args the command */
        int core_fd;                     /* CoreDump=: the memfd for a crash's core (SANDBOX_FD_CORE), else -1;
                                          * 0 (a zeroed struct) also means none */
        /* Called once the setup and the cgroups are sent, before the wait
         * for the program's exec: work gadgetd would otherwise wait
         * through (NULL: none). */
        void (*waiting)(void *arg);
        void *waiting_arg;
};

/* gadgetd-sandbox, and the low fd number through which each spawn hands
 * the child its setup socket: the child then copies only the fds below it,
 * not gadgetd's whole table (thousands with a thousand gadgets). */
struct spawn_helper {
        int fd;         /* gadgetd-sandbox, O_PATH */
        int slot;       /* holds a placeholder between spawns */
};

struct spawn_child {
        pid_t pid;      /* PID 1 of the gadget's namespace, in gadgetd's view */
        int pidfd;      /* refers to pid without reuse races */
        bool foreign;   /* adopted through the fd store: not gadgetd's child, never waited for */
        int rpc_fd;     /* gadgetd's end of the socketpair, non-blocking */
        int report_fd;  /* read end of the report pipe (wait status at the end), non-blocking */
        struct wire_reader report; /* a report read in part (never more than one) */
        int go_fd;      /* pre-warmed: spawn_go starts the program; else -1 */
        int start_fd;   /* launched, not started yet: gadgetd's end of the setup socket, kept
                         * until the start's report (spawn_started); else -1 */
        int start_want; /* the report the start waits for (READY, WARM); 0 once it came */
};
#define SPAWN_CHILD_NONE ((struct spawn_child){ .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = -1, \
                                                .go_fd = -1, .start_fd = -1 })

/* Opens gadgetd-sandbox (O_PATH): the build tree's when gadgetd runs from
 * its build tree, else the installed one. Fails closed unless it is a
 * regular file of root's that no one else may write. Call it early: the
 * fds it takes should be low numbers. 0 or -errno + err. */
int spawn_helper_open(struct spawn_helper *h, char *err, size_t errlen);
void spawn_helper_close(struct spawn_helper *h);
/* Makes a shell: in a network namespace of its own, or (shared_net) in the
 * one gadgetd shares between the gadgets with NetworkNamespace=shared
 * (netns.c). 0, or -errno with err and *shell SPAWN_SHELL_NONE. */
int spawn_shell_new(const struct spawn_helper *h, bool shared_net, struct spawn_shell *shell, char *err,
                    size_t errlen);
/* True if the shell can still be used: its process is alive, and
 * gadgetd's mount table has not changed since it was made (the shell's
 * mount namespace is a copy of it then, in which it finds the paths a
 * policy lists). */
bool spawn_shell_fresh(const struct spawn_shell *shell);
/* Ends the shell's process (if any) and closes its fds. */
void spawn_shell_drop(struct spawn_shell *shell);
/* Starts the gadget. Returns 0 once the program was exec'd inside its
 * sandbox (pre-warmed: once the sandbox is built), or -errno with err
 * saying which step failed and why (the child is gone by then). It waits
 * (up to SPAWN_START_TIMEOUT_MS) while the sandbox builds: for a caller
 * with nothing else to do (gadgetd run); the daemon launches instead. */
int spawn_gadget(const struct spawn_opts *opts, struct spawn_child *child, char *err, size_t errlen);
/* The first half of spawn_gadget: the shell taken or made, its id maps,
 * the setup and the cgroups sent; returns 0 without waiting for the
 * sandbox, which builds meanwhile (child->start_want says which report
 * ends the start; child->rpc_fd is non-blocking already), or -errno with
 * err (the child is gone by then). Its report fd then tells when to call
 * spawn_started; the caller bounds the wait (SPAWN_START_TIMEOUT_MS) and
 * ends a start that failed or took too long with spawn_abort. */
int spawn_launch(const struct spawn_opts *opts, struct spawn_child *child, char *err, size_t errlen);
/* Reads a launched child's start report: 0 once it came (the child is
 * started as spawn_gadget's), -EAGAIN until it has come whole, or -errno
 * with err saying why the start failed (the caller ends it). */
int spawn_started(struct spawn_child *child, char *err, size_t errlen);
/* Ends a child whose start failed: killed, waited for, its fds closed. */
void spawn_abort(struct spawn_child *child);
/* How long a sandbox may take to build (and a pre-warmed one to exec). */
#define SPAWN_START_TIMEOUT_MS 10000
/* Starts the program in a pre-warmed sandbox; 0 once it was exec'd, or
 * -errno with err (the caller ends the worker). */
int spawn_go(struct spawn_child *child, char *err, size_t errlen);
/* gadgetctl exec's probe (enter.c): gadgetd-sandbox --enter joins the
 * running sandbox whose PID 1 is init_pidfd, as the gadget of opts
 * (policy, filter, nproc, address_space, helper; args: the command), and
 * runs the command there with stdio (3 fds: stdin, stdout, stderr); cg
 * (NULL: none) is the gadget's cgroup, which it joins first. On success
 * *probe is the helper (pid, pidfd, report_fd: a failure, or the
 * command's wait status, through spawn_read_report); -errno with err. */
int spawn_enter(const struct spawn_opts *opts, int init_pidfd, struct cgroup *cg, const int *stdio,
                struct spawn_child *probe, char *err, size_t errlen);
/* The setup message for gadgetd-sandbox as one frame in w (spawn_setup.c).
 * 0, or -errno with err. */
int spawn_setup_pack(const struct spawn_opts *opts, struct wire_writer *w, char *err, size_t errlen);
/* The kinds of the sandbox's reports (sandbox.proto Report). */
enum spawn_report {
        SPAWN_REPORT_FAILED = 1, /* a setup step failed: "step: reason" */
        SPAWN_REPORT_WARM,       /* pre-warmed: built, waiting for spawn_go */
        SPAWN_REPORT_READY,      /* the program was exec'd */
        SPAWN_REPORT_STATUS,     /* the program ended: its wait status */
        SPAWN_REPORT_DENIALS,    /* calls its filter refused (out->denials) */
        SPAWN_REPORT_LEARNED,    /* a learning run: a path it could not find (out->learned) */
        SPAWN_REPORT_CRASH,      /* the program is dying of a crash, before its status (out->crash) */
};
/* A Denials report, checked: each (nr, error) once, path printable. */
struct spawn_denial {
        uint32_t nr, error;         /* error 0: a kill for a call of a foreign ABI */
        uint64_t count, first_ms, last_ms;
        char path[SANDBOX_DENIAL_PATH_MAX + 1];
};
struct spawn_denials {
        size_t n;
        struct spawn_denial calls[SANDBOX_DENIALS_MAX];
};
/* A Learned report, checked: printable texts. */
struct spawn_learned {
        uint32_t nr;                                        /* the call that looked */
        char path[SANDBOX_REPORT_TEXT_MAX + 1];
        char interpreter_of[SANDBOX_REPORT_TEXT_MAX + 1];   /* "" or the program whose interpreter path is */
};
/* A crash as the sandbox reported it, checked (sandbox.proto Crash). */
struct spawn_crash {
        int signal;
        char cause[200];         /* "killed by SIGSEGV (SEGV_MAPERR at 0x0) in f" */
        uint64_t core_size;      /* CoreDump=: the core's bytes in the run's memfd (0: none) */
        size_t n_frames;
        char frames[SANDBOX_CRASH_FRAMES_MAX][SANDBOX_CRASH_FRAME_MAX + 1];
};
/* What the reports with more than a kind carry. */
struct spawn_report_out {
        struct spawn_denials denials;
        struct spawn_learned learned;
        struct spawn_crash crash;
};
/* Reads the child's next report, checked (proto/validate.c): returns its
 * kind (a failure's "step: reason" in msg, a wait status in *status if
 * status is not NULL, denials, learned paths and a crash in *out if out
 * is not NULL), 0 at end of file, -EAGAIN until a whole report has come, -EPROTO
 * with the reason in msg for one refused, or -errno. */
int spawn_read_report(struct spawn_child *child, int *status, struct spawn_report_out *out, char *msg,
                      size_t msglen);
void spawn_child_close(struct spawn_child *child);
