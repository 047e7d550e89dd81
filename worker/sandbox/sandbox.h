/* sandbox: what runs in the worker between clone() and the gadget's exec.
 * gadgetd clones the worker into new namespaces with vfork semantics (no
 * copy of gadgetd's memory) and it execs gadgetd-sandbox (helper.c), a
 * small static program, which receives its setup from gadgetd, enters
 * every isolation layer in order and then serves as PID 1 of the gadget's
 * PID namespace. Any step that fails aborts the start and is reported to
 * gadgetd as its step and reason (the user reads "step: reason"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "filter.h"
#include "sandbox_abi.h"


/* What the sandbox is built from: the parts of the gadget's policy it
 * needs (sent by gadgetd in the setup, sandbox.proto), and the fds and
 * plans gadgetd made for it. */
struct sandbox_config {
        const char *name;                /* the gadget's Name= (hostname, passwd) */
        const char *exec;                /* Exec= as the policy says it */
        char *const *ro_paths;           /* ReadOnlyPaths= as written */
        size_t n_ro_paths;
        bool system_libraries;           /* SystemLibraries=yes */
        bool no_listener;                /* RecordDenials=no: the program under filter->direct */
        bool learn;                      /* gadgetd run --learn: the program under filter->learn */
        uint64_t tmp_size;               /* TmpSize= */
        uint64_t limit_nofile;           /* LimitNOFILE= */
        char *const *argv;               /* argv for the program, argv[0] first */
        char *const *envp;               /* the program's whole environment */
        const struct gadget_filter *filter; /* compiled when gadgetd was built */
        char *const *ro_real;            /* ReadOnlyPaths, symlinks resolved by gadgetd */
        const char *exec_real;           /* Exec, resolved likewise */
        int setup_fd;                    /* the setup socket: SANDBOX_CGROUP_MSG comes here */
        bool prewarm;                    /* then a byte on it starts the program */
        uint32_t handoff_ms;             /* FdStore= mode (sandbox.proto): no parent-death signal */
        int parent_pidfd;                /* gadgetd itself, to tell if it died */
        int report_fd;                   /* write end of the report pipe */
        int rpc_fd;                      /* the worker end of the socketpair */
        int stdout_fd, stderr_fd;        /* where the program's output goes */
        int devnull_fd;
        int stdin_fd;                    /* a probe's stdin (enter.c); a worker's is devnull_fd */
        uint64_t nproc;                  /* RLIMIT_NPROC, planned by gadgetd */
        uint64_t address_space;          /* RLIMIT_AS, UINT64_MAX for none */
        int core_fd;                     /* CoreDump=: where a crash's core goes (sealed memfd), else -1 */
};

/* The steps that need neither the setup nor the id maps, run while the
 * shell waits for its setup (a spare shell before any start asks for it):
 * the network namespace made (unless own_net is false: the shell was
 * cloned in the shared one), the mount tree made private, the device
 * nodes cloned (a mount plan begun), the bounding set emptied, the user
 * namespace's counters. 0 or -errno with step, reported once the setup
 * brought the report fd. */
struct mount_plan;
int sandbox_early(bool own_net, struct mount_plan **plan, const char **step);
/* Enters the sandbox (gadgetd has written the id maps by now) with the
 * plan sandbox_early began, and runs init; never returns. */
_Noreturn void sandbox_main(const struct sandbox_config *cfg, struct mount_plan *plan);

/* Each layer, in worker/sandbox/<layer>.c. All return 0 or -errno and describe the
 * failing step in step (a static string or one written into buf). */
/* A plan holding the device nodes, which every sandbox has. */
int mounts_early(struct mount_plan **plan, const char **step);
/* Adds the policy's paths to the plan. ro_real and exec_real: the
 * policy's ReadOnlyPaths and Exec as gadgetd resolved them
 * (supervisor/system/paths.c). */
int mounts_prepare(const struct sandbox_config *cfg, struct mount_plan *plan, const char **step);
int mounts_build(const struct mount_plan *plan, const struct sandbox_config *cfg, const char **step);
/* Sizes the root tmpfs to its own entries plus TmpSize (/tmp and
 * /dev/shm are two of its directories) and makes the root read-only
 * (mounts_build leaves it writable for cgroupfs_mount). 0 or -errno. */
int mounts_seal(const struct sandbox_config *cfg, const char **step);
void mounts_plan_free(struct mount_plan *plan);
/* Writes the generated passwd and group into etc (the new root's /etc). */
int etcfiles_write(const char *etc, const char *name);
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
int caps_drop_bounding(void);
int caps_drop_all(void);
int limits_apply(const struct sandbox_config *cfg, const char **step);
/* In PID 2 right before exec: the limits of the program alone. */
int limits_apply_program(const struct sandbox_config *cfg, const char **step);
/* For the worker only, once it is in its own /proc: the user namespace's
 * counters, all 0 (limits.c says why). */
int limits_userns(const char **step);
/* Sends "step: reason" to gadgetd on fd and ends the process (sandbox.c). */
_Noreturn void sandbox_fail(int fd, const char *step, int err);
/* Switches to the gadget's inner uid/gid, no groups changed, keeping the
 * capabilities of the user namespace for the rest of the setup (sandbox.c). */
int sandbox_become_user(void);
/* Waits for SANDBOX_CGROUP_MSG on setup_fd and joins the v1 cgroups whose
 * "tasks" files come with it (sandbox.c). */
int sandbox_join_v1(int setup_fd, const char **step);
/* Every signal's disposition back to the default, an empty mask (init.c). */
int init_reset_signals(void);
/* gadgetd-sandbox --enter: joins the running sandbox whose PID 1 is
 * init_pidfd, becomes the gadget, runs cfg->argv there and reports its
 * wait status (enter.c); never returns. */
_Noreturn void enter_main(const struct sandbox_config *cfg, int init_pidfd);
/* Frees what only the start needed (helper.c): the setup message, and
 * with it every string and vector of the sandbox_config made of it, the
 * mount plan and what sandbox_setup_alloc gave; and gives the heap's free
 * pages back. Only cfg's fds, numbers and filter->direct (a copy of its
 * own) stay valid. Called once PID 2 is the program (or gone). */
void sandbox_setup_release(void);
/* size bytes (zeroed) that live until sandbox_setup_release, NULL if
 * there is no room: what only the start writes, such as the text of the
 * step that runs, stays off the pages PID 1 keeps. */
void *sandbox_setup_alloc(size_t size);
/* Runs the program as PID 2 and waits as PID 1; never returns. */
_Noreturn void init_run(const struct sandbox_config *cfg, const int notify_sk[2]);
/* Reports to gadgetd on fd (report.c, sandbox.proto Report): a step that
 * failed and why; the sandbox built (warm, pre-warmed) or the program
 * exec'd; the program's wait status. */
/* The listener of the program's filter (denials.c). denials_handle
 * answers one held call (from listener) with the errno direct gives and
 * counts it: 0 or -errno if the listener failed. denials_killed counts
 * the program's kill for a call of a foreign ABI. denials_due_ms: ms until
 * what was counted should be reported (0: now), -1 if nothing was;
 * denials_flush reports it on report_fd (one Denials report per
 * SANDBOX_DENIALS_MAX calls) and starts counting anew; unless wait, only
 * if the pipe has room for it (else it keeps counting). */
int denials_handle(int listener, const struct sock_fprog *direct, int report_fd);
/* A learning run's held lookup (learn.c): what of its path is missing
 * reported on report_fd (once a run), then the call goes on. 0 or -errno. */
struct seccomp_notif;
int learn_lookup(int listener, const struct seccomp_notif *n, int report_fd);
/* The start was reported: what a learning run saw before it is sent now,
 * the rest as it comes (gadgetd reads a start's reports first). */
void learn_started(int report_fd);
void denials_killed(void);
int denials_due_ms(void);
void denials_flush(int report_fd, bool wait);
/* Reads at most size - 1 bytes of process pid's memory at addr into buf,
 * NUL-ended; the bytes read, or -1 (denials.c). */
ssize_t sandbox_read_mem(pid_t pid, uint64_t addr, char *buf, size_t size);
/* CLOCK_MONOTONIC in ms (init.c). */
uint64_t init_now_ms(void);
void sandbox_report_failed(int fd, const char *step, const char *reason);
void sandbox_report_ready(int fd, bool warm);
void sandbox_report_status(int fd, int status);
/* The program is dying of a crash (crash.h), before its wait status. */
struct crash_info;
void sandbox_report_crash(int fd, const struct crash_info *c);
