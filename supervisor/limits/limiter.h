/* limiter: how gadgetd enforces a policy's resource limits, and what it
 * tells about them. The mode is chosen once per gadgetd: cgroup v2 where
 * gadgetd has a delegated subtree, else the cgroup v1 controllers, else
 * rlimits alone — never silently (limiter_log). For each run of a gadget it
 * makes the gadget's cgroup, refuses a limit the mode cannot enforce (fail
 * closed, unless the operator allowed degraded limits), turns new limit hits
 * into audit records, and tells when a limit ended the gadget. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"

struct audit;
struct policy;

/* Tasks a gadget may have without TasksMax (or with TasksMax=infinity). */
#define LIMITER_DEFAULT_TASKS 1024

enum limiter_mode { LIMITER_AUTO, LIMITER_CGROUP_V2, LIMITER_CGROUP_V1, LIMITER_RLIMITS };

struct limiter {
        struct cgroup_host cg;
        enum limiter_mode want;
        bool allow_degraded;
        char mode[128];            /* "cgroup v2", "cgroup v1", "rlimits" or "mixed (...)" */
};

/* The limits of one run of one gadget. */
/* The limits whose hits are counted: a process killed at MemoryMax, a
 * fork refused at TasksMax (an episode), throttling at CPUQuota (an
 * episode). */
enum limiter_hit { LIMITER_HIT_MEMORY, LIMITER_HIT_TASKS, LIMITER_HIT_CPU, LIMITER_HITS_N };

struct limiter_run {
        struct cgroup *cg;         /* NULL when no cgroup controller is in use */
        struct cgroup_limits cgroup_limits; /* planned by limiter_start, for limiter_cgroup */
        uint64_t nproc;            /* RLIMIT_NPROC of the gadget's uid */
        uint64_t address_space;    /* RLIMIT_AS per process (degraded MemoryMax), UINT64_MAX for none */
        /* The mode, and any limit it degrades: made by limiter_start
         * (NULL before; freed by limiter_run_free), so that a gadget
         * declared and never started holds no room for it. */
        char *mode;
        struct cgroup_stats seen;  /* the counters at the last check */
        uint64_t oom_kills;        /* during this run */
        uint64_t pids_refused;
        bool refusing, throttling; /* a TasksMax or CPUQuota episode is under way */
        uint64_t hits[LIMITER_HITS_N]; /* limit hits of this run, as audited (enum limiter_hit) */
        bool second;               /* its cgroup is gadget-NAME.2: a restart's new process runs beside
                                    * the old (gadget-NAME), or replaced it; set after limiter_start */
};

/* "auto", "cgroup-v2", "cgroup-v1", "rlimits". 0 or -EINVAL. */
int limiter_parse_mode(const char *s, enum limiter_mode *out);
/* Finds the mode: want restricts it (a cgroup version asked for that is
 * not available is an error in err). flags: CGROUP_HOST_ONE (gadgetd run,
 * which starts one gadget once), CGROUP_HOST_SCOPES (cgroup.h). 0 or -errno. */
int limiter_open(struct limiter *l, enum limiter_mode want, bool allow_degraded, unsigned flags, char *err,
                 size_t errlen);
void limiter_close(struct limiter *l);
/* Whether limiter_open in mode want may move gadgetd and its children
 * into another cgroup (the v2 delegation): false in rlimits and cgroup-v1
 * mode, and in auto mode where v2 serves no controller of ours
 * (cgroup_v2_may_serve). */
bool limiter_may_move(enum limiter_mode want);
/* gadgetd run's tidying of what gadgetds gone left (cgroup_host_tidy). */
void limiter_tidy(struct limiter *l);
/* Logs the mode, why a better one is not used, and each limit's mechanism. */
void limiter_log(const struct limiter *l);

void limiter_run_init(struct limiter_run *r);
/* Frees what r holds past its run (its mode). */
void limiter_run_free(struct limiter_run *r);
/* Plans a run of p: the limits of its cgroup, and the rlimits for the
 * worker. Fails closed: -EPERM with err naming the limit and why when the
 * mode cannot enforce it and degraded limits are not allowed; other -errno
 * with err. */
int limiter_start(struct limiter *l, const struct policy *p, struct limiter_run *r, char *err, size_t errlen);
/* Makes the run's cgroup (if any controller is in use) with the planned
 * limits written. 0 or -errno with err. */
int limiter_cgroup(struct limiter *l, const struct policy *p, struct limiter_run *r, char *err, size_t errlen);
/* A re-executed gadgetd's run of p, whose worker (PID 1 of its sandbox:
 * pid) is already running (gadgetctl daemon-reexec, the fd store): planned
 * as limiter_start, with the cgroup limiter_cgroup made then. 0 or -errno
 * with err. */
int limiter_adopt(struct limiter *l, const struct policy *p, struct limiter_run *r, pid_t pid, char *err,
                  size_t errlen);
/* Reads the counters: each new limit hit is an audit record (a may be
 * NULL: the record is only logged). A continuing hit (a fork bomb held at
 * TasksMax, a spinner held at CPUQuota) is one record until it stops. */
void limiter_check(struct limiter_run *r, const struct policy *p, struct audit *a);
/* After the end of a run with wait status status (described as how): the
 * cause a limit gave it ("out of memory (how)", "tasks limit (how)") in out, and
 * true; false if no limit was involved. */
bool limiter_cause(const struct limiter_run *r, int status, const char *how, char *out, size_t len);
/* Usage now (0 where unknown). tasks does not count the sandbox's init. */
void limiter_usage(const struct limiter_run *r, uint64_t *memory, uint64_t *tasks, uint64_t *cpu_usec,
                   uint64_t *memory_peak);
/* Kills the run's whole cgroup where the kernel can (v2). */
void limiter_kill(const struct limiter_run *r);
/* Removes the run's cgroup once its processes are gone. */
void limiter_end(struct limiter_run *r);
/* The audit record of a limit gadgetd enforces itself (RuntimeMax, CallTimeout). */
void limiter_record(struct audit *a, const char *gadget, const char *limit, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
