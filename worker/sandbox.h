/* sandbox: what runs in the child between clone() and the gadget's exec.
 * The child enters every isolation layer in order and then serves as PID 1
 * of the gadget's PID namespace. Any step that fails aborts the start and
 * is reported to gadgetd as "step: reason". */
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

/* Per-uid kernel limits every gadget gets (each gadget has a host uid of
 * its own, so they apply per gadget). RLIMIT_NPROC comes from gadgetd
 * (TasksMax, see supervisor/limiter.c); message queues stay at 0 because
 * the seccomp filter refuses mq_open anyway. worker/limits.c also sets
 * the user namespace's inotify and namespace counters to 0. */
#define SANDBOX_MEMLOCK_MAX (64u * 1024u)
#define SANDBOX_SIGPENDING_MAX 1024u
#define SANDBOX_MSGQUEUE_MAX 0u

/* Records the child sends gadgetd on the report pipe: one type byte, a
 * 16-bit length, then data. */
enum sandbox_report {
        SANDBOX_REPORT_ERROR = 'E',  /* setup failed: "step: reason" */
        SANDBOX_REPORT_READY = 'R',  /* the gadget program was exec'd */
        SANDBOX_REPORT_STATUS = 'S', /* the gadget ended: int wait status */
};

struct sandbox_config {
        const struct policy *policy;
        char *const *argv;               /* argv for the program, argv[0] first */
        char *const *envp;               /* the program's whole environment */
        const struct gadget_filter *filter; /* compiled once by gadgetd */
        char *const *ro_real;            /* ReadOnlyPaths, symlinks resolved by gadgetd */
        const char *exec_real;           /* Exec, resolved likewise */
        int go_fd;                       /* read end: id maps written, cgroup joined */
        int parent_pidfd;                /* gadgetd itself, to tell if it died */
        int report_fd;                   /* write end of the report pipe */
        int rpc_fd;                      /* the worker end of the socketpair */
        int stdout_fd, stderr_fd;        /* where the program's output goes */
        int devnull_fd;
        uint64_t nproc;                  /* RLIMIT_NPROC, planned by gadgetd */
        uint64_t address_space;          /* RLIMIT_AS, UINT64_MAX for none */
};

/* The child's entry point after clone(); never returns. */
int sandbox_main(void *config);

/* Each layer, in worker/<layer>.c. All return 0 or -errno and describe the
 * failing step in step (a static string or one written into buf). */
struct mount_plan;
/* ro_real and exec_real: the policy's ReadOnlyPaths and Exec as gadgetd
 * resolved them (supervisor/paths.c). */
int mounts_prepare(const struct policy *p, char *const *ro_real, const char *exec_real,
                   struct mount_plan **plan, const char **step);
int mounts_build(const struct mount_plan *plan, const struct policy *p, const char **step);
void mounts_plan_free(struct mount_plan *plan);
int caps_lock_securebits(void);
int caps_drop_all(void);
int net_loopback_up(const char **step);
int limits_apply(const struct sandbox_config *cfg, const char **step);
/* In PID 2 right before exec: the limits of the program alone. */
int limits_apply_program(const struct sandbox_config *cfg, const char **step);
/* Runs the program as PID 2 and waits as PID 1; never returns. */
_Noreturn void init_run(const struct sandbox_config *cfg);
void sandbox_report(int fd, enum sandbox_report type, const void *data, uint16_t len);
