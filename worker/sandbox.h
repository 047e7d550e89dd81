/* sandbox: what runs in the worker between clone() and the gadget's exec.
 * gadgetd clones the worker into new namespaces with vfork semantics (no
 * copy of gadgetd's memory) and it execs gadgetd-sandbox (helper.c), a
 * small static program, which receives its setup from gadgetd, enters
 * every isolation layer in order and then serves as PID 1 of the gadget's
 * PID namespace. Any step that fails aborts the start and is reported to
 * gadgetd as "step: reason". */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "filter.h"

struct policy;

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
        SANDBOX_FD_REPORT = 4,   /* write end of the report pipe */
        SANDBOX_FD_RPC = 5,      /* the worker end of the RPC socketpair */
        SANDBOX_FD_STDOUT = 6,   /* where the program's output goes */
        SANDBOX_FD_STDERR = 7,
        SANDBOX_FD_DEVNULL = 8,
        SANDBOX_FD_PARENT = 9,   /* pidfd of gadgetd, to tell if it died */
};
/* The fds that come with the setup. */
#define SANDBOX_FDS_SENT (SANDBOX_FD_PARENT - SANDBOX_FD_REPORT + 1)
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

/* Records the child sends gadgetd on the report pipe: one type byte, a
 * 16-bit length, then data. */
enum sandbox_report {
        SANDBOX_REPORT_ERROR = 'E',  /* setup failed: "step: reason" */
        SANDBOX_REPORT_WARM = 'W',   /* pre-warmed: built, waiting for the go byte */
        SANDBOX_REPORT_READY = 'R',  /* the gadget program was exec'd */
        SANDBOX_REPORT_STATUS = 'S', /* the gadget ended: int wait status */
};

struct sandbox_config {
        const struct policy *policy;
        char *const *argv;               /* argv for the program, argv[0] first */
        char *const *envp;               /* the program's whole environment */
        const struct gadget_filter *filter; /* compiled when gadgetd was built */
        char *const *ro_real;            /* ReadOnlyPaths, symlinks resolved by gadgetd */
        const char *exec_real;           /* Exec, resolved likewise */
        int setup_fd;                    /* the setup socket: SANDBOX_CGROUP_MSG comes here */
        bool prewarm;                    /* then a byte on it starts the program */
        int parent_pidfd;                /* gadgetd itself, to tell if it died */
        int report_fd;                   /* write end of the report pipe */
        int rpc_fd;                      /* the worker end of the socketpair */
        int stdout_fd, stderr_fd;        /* where the program's output goes */
        int devnull_fd;
        uint64_t nproc;                  /* RLIMIT_NPROC, planned by gadgetd */
        uint64_t address_space;          /* RLIMIT_AS, UINT64_MAX for none */
};

/* Enters the sandbox (gadgetd has written the id maps by now) and runs
 * init; never returns. */
_Noreturn void sandbox_main(const struct sandbox_config *cfg);

/* Each layer, in worker/<layer>.c. All return 0 or -errno and describe the
 * failing step in step (a static string or one written into buf). */
struct mount_plan;
/* ro_real and exec_real: the policy's ReadOnlyPaths and Exec as gadgetd
 * resolved them (supervisor/system/paths.c). */
int mounts_prepare(const struct policy *p, char *const *ro_real, const char *exec_real,
                   struct mount_plan **plan, const char **step);
int mounts_build(const struct mount_plan *plan, const struct policy *p, const char **step);
void mounts_plan_free(struct mount_plan *plan);
/* Writes the generated passwd and group into etc (the new root's /etc). */
int etcfiles_write(const char *etc, const struct policy *p);
/* The hierarchies gadgetd moved the worker into, read before the cgroup
 * namespace is made, and mounted read-only at /sys/fs/cgroup after. */
#define CGROUPFS_NAME_MAX 64
struct cgroupfs_view {
        char v1[SANDBOX_CGROUP_FDS_MAX][CGROUPFS_NAME_MAX]; /* controller lists */
        size_t n_v1;
        bool v2;
};
int cgroupfs_scan(struct cgroupfs_view *v);
int cgroupfs_mount(const struct cgroupfs_view *v, const char **step);
int caps_lock_securebits(void);
int caps_drop_all(void);
int limits_apply(const struct sandbox_config *cfg, const char **step);
/* In PID 2 right before exec: the limits of the program alone. */
int limits_apply_program(const struct sandbox_config *cfg, const char **step);
/* Runs the program as PID 2 and waits as PID 1; never returns. */
_Noreturn void init_run(const struct sandbox_config *cfg);
void sandbox_report(int fd, enum sandbox_report type, const void *data, uint16_t len);
