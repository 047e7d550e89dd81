/* unit: one loaded gadget in the daemon and its lifecycle —
 * starting → ready (hello received) → stopping → stopped, or failed — with
 * restarts by Restart=, exponential backoff, and parking when it keeps
 * crashing. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "logbuf.h"
#include "unit_stats.h"

struct core;
struct peer;
struct peer_chain;
struct policy;
struct gadget_bindings;

enum unit_state {
        UNIT_STARTING,
        UNIT_READY,
        UNIT_STOPPING,
        UNIT_STOPPED,
        UNIT_FAILED,
        UNIT_REMOTE,    /* Store=postgresql: another node holds its lease, or none yet */
        UNIT_IDLE,      /* not running until its next call (Start=on-demand, IdleStop=) */
};

struct unit;

/* What the unit's owner does at its events, given to core_open: the
 * daemon, or gadgetd run with its one gadget. The unit calls nothing
 * of its owner but these. */
struct unit_hooks {
        void (*ready)(void *arg, struct unit *u);
        /* It ended, or could not start, and will not start again by itself. */
        void (*exited)(void *arg, struct unit *u);
        void (*stopped)(void *arg, struct unit *u);
        void (*log_added)(void *arg, struct unit *u, size_t lines);
        /* gadgetd run's: the pipes the program's output goes to (the owner
         * relays them), and the unit has one life: no restart, no hello
         * awaited, no pre-warmed sandbox. NULL: the unit reads the output
         * itself, line by line. 0 or -errno. */
        int (*output_pipes)(void *arg, int *out_w, int *err_w);
        /* With output_pipes: its hello is awaited all the same, within
         * StartTimeout= (gadgetd run --call, gadgetd test: a call needs it). */
        bool await_hello;
        void *arg;
};


/* Where a unit's policy came from, for reloads (core_add). */
struct unit_origin {
        uint64_t hash;              /* of the policy file's bytes */
        bool from_dir;              /* loaded from the policy directory */
        char *const *args;          /* replace the policy's Arguments (gadgetd run), or NULL */
        const char *why;            /* replacing a policy: the restart's cause ("policy changed by
                                     * reload"), NULL: "policy changed" */
};

/* Starts the worker. Failures leave the unit failed with the cause. */
void unit_start(struct unit *u);
/* A unit just loaded: started (Start=always), or idle until its first
 * call (Start=on-demand). */
void unit_activate(struct unit *u);
/* Starts an idle unit for a call (or gadgetctl wake): 0 when it is ready
 * or on its way there, -EINVAL when it is neither idle nor waking (then
 * calls to it are refused as not ready). */
int unit_wake(struct unit *u, const void *party);
/* u's start for calls ended (ready, failed, stopped) or will not come
 * (stopped while queued, freed): its place among the wakes in flight goes
 * to the next queued. */
void unit_wake_done(struct unit *u);
/* Whether a call to u now waits for its start (it is idle, waking, or
 * stopping for being idle) rather than being refused. */
bool unit_wakeable(const struct unit *u);
/* Builds the sandbox of the next start now (the unit must not be running;
 * the daemon does it while a restart backs off): unit_start then only
 * starts the program in it. unit_stop drops it. 0 once pre-warmed, else
 * -errno (then the start goes cold). */
int unit_prewarm(struct unit *u);
/* Asks the gadget to stop: Shutdown, then SIGKILL after a grace period. */
void unit_stop(struct unit *u, const char *why);
void unit_kill(struct unit *u, const char *why);
/* Stops the gadget if it runs, then starts it again; why is the stop's
 * cause ("gadgetctl restart by uid 0", "policy changed by reload"). */
void unit_restart(struct unit *u, const char *why);
/* gadgetctl start: a stopped or failed unit (and no other) starts again
 * as after its load, with a fresh backoff: Start=always now,
 * Start=on-demand idle (its caller wakes it). */
void unit_start_again(struct unit *u);
/* Replaces the policy (taken over) with p of origin o and restarts the
 * gadget. Why this is safe: the worker that still runs until the restart
 * stops it is judged by the new policy (as its bindings are), so nothing
 * keeps the old one. */
void unit_replace_policy(struct unit *u, struct policy *p, const struct unit_origin *o);
/* Notes that u's policy file has n errors now (errors: its lines,
 * "FILE:LINE: ...", copied): u keeps the policy it runs, and its info says
 * so until its policy is replaced or the note cleared (NULL, 0). */
void unit_keep_policy(struct unit *u, const char *errors, unsigned n);
/* Sends sig to the sandbox's PID 1, which passes it on to the program. */
void unit_signal(struct unit *u, int sig);
/* Asks the sandbox's PID 1 to stop tracing the program for the rest of
 * this run (gadgetctl debug): 0, or -errno (no process). */
int unit_debug(struct unit *u);

/* A staged rollout (unit_rollout.c, docs/releases.md): a restart without
 * a gap whose new process, once it said hello, serves a share of the
 * call trees beside the old one instead of taking over, each process on
 * its own policy. Which one a call goes to: the hash of its trace id
 * below the percent, the new one; every call of one tree (a gadget's
 * calls while serving one, through its bindings) carries the trace id of
 * its root, so one tree never mixes versions. The bound on the new
 * process's errors: over min_calls calls answered by it since the
 * percent was set, more than max_error_pct percent of them errors. */
struct unit_rollout_bound {
        unsigned max_error_pct;     /* 0 to 100 */
        uint64_t min_calls;         /* at least 1 */
};
/* The end of a rollout that served (its hello came): completed (the new
 * process serves every call), or not (the old one serves on: rolled back
 * by request, by its bound, the new process's end, a restart, a stop, the
 * unit's unload), with why. Called once, then forgotten. */
typedef void (*unit_rollout_fn)(void *arg, struct unit *u, bool completed, const char *why);
/* The next switch of u (its policy replaced next, as a load does) is a
 * rollout at percent (1 to 99) under bound, labelled version (for
 * status). 0, or -EBUSY (a rollout, a restart's new process starting, or
 * u not ready here: unit_switch_can; a restart's old process draining
 * only delays its start). A switch that fails before its hello ends it
 * without fn; unit_rollout_disarm drops one that did not begin. */
int unit_rollout_arm(struct unit *u, unsigned percent, const struct unit_rollout_bound *bound, const char *version,
                     unit_rollout_fn fn, void *arg);
void unit_rollout_disarm(struct unit *u);
/* A running rollout's percent changed (1 to 99: its counts start over;
 * 100: completed, the old process drains as a restart's does). 0 or
 * -ENOENT (none runs). */
int unit_rollout_set(struct unit *u, unsigned percent);
/* Back at once: the new process gets no more calls and drains those it
 * has. 0 or -ENOENT. */
int unit_rollout_back(struct unit *u, const char *why);
struct unit_rollout_info {
        bool armed;                 /* the next switch is a rollout */
        bool running;               /* its new process serves its share */
        unsigned percent;
        const char *version;        /* its label */
        uint64_t calls, errors;     /* answered by the new process since the percent was set */
        const char *last_back;      /* why the last rollout was rolled back ("" if none) */
        void *arg;                  /* its fn's arg (NULL: none armed) */
};
void unit_rollout_info(const struct unit *u, struct unit_rollout_info *out);

/* A hold (unit_hold.c): u stopped as an idle stop is (its process
 * finishes its calls; calls that come meanwhile wait, as for an idle
 * gadget's start) and then held idle, with no process of it left (nor a
 * restart's old one draining), its calls waiting without starting it,
 * until unit_release. For a change of its state that needs it stopped
 * (gadgetctl rollback --with-state's restore). fn is called once, from
 * the loop: err 0 once held, or -ECANCELED (another stop or restart came
 * first), -ESHUTDOWN (u is being freed): no hold then. A stop, restart or
 * unload of a held unit ends its hold too (unit_held false). 0, or
 * -EBUSY (u neither ready nor idle here, a restart's new process or a
 * rollout under way, or held already), -ENOMEM. */
typedef void (*unit_hold_fn)(void *arg, struct unit *u, int err);
int unit_hold(struct unit *u, unit_hold_fn fn, void *arg, const char *why);
bool unit_held(const struct unit *u);
/* The hold ends: u's waiting calls start it, and a Start=always gadget
 * starts, as an idle gadget woken does. */
void unit_release(struct unit *u);

/* What is known of a unit (unit_info.c). */
struct unit *unit_next(const struct unit *u);
const struct policy *unit_policy(const struct unit *u);
const char *unit_name(const struct unit *u);
enum unit_state unit_state_of(const struct unit *u);
/* True while its worker said hello and is still connected. */
bool unit_is_ready(const struct unit *u);
/* Why it last stopped or failed ("" if it runs as it should). */
const char *unit_cause(const struct unit *u);
bool unit_from_dir(const struct unit *u);
uint64_t unit_policy_hash(const struct unit *u);
/* The program's wait status from the sandbox's report, once it ended. */
int unit_program_status(const struct unit *u);
/* Its log ring (gadgetctl logs). */
const struct logbuf *unit_log(const struct unit *u);
/* Its binding side (bindings/bindings.h): its store, for its alarms. */
struct gadget_bindings *unit_bindings(const struct unit *u);
/* Whether this node may run u now: no shared store, or it holds u's lease. */
bool unit_runs_here(const struct unit *u);
/* It holds its lease, but this node's own may have expired (a pause, a
 * stalled store): it serves nothing now, and loses the lease at the
 * loop's next turn (kvpg_lease_valid). */
bool unit_lease_expired(const struct unit *u);
/* The methods its worker announced; their number (0 when not running). */
size_t unit_methods(const struct unit *u, char ***methods);
/* Their signatures, in the same order ("" for an untyped one). */
size_t unit_signatures(const struct unit *u, char ***texts);
/* CoreDump=: the cores kept of its crashes (STATE_DIR/cores/NAME), the
 * last UNIT_CORES_KEPT, oldest first; *files malloc'd (free), their number. */
#define UNIT_CORES_KEPT 3
struct unit_core_file {
        int64_t time_ms;        /* when it was kept, ms since the epoch */
        uint32_t run;           /* which run of the gadget crashed */
        char signal[16];        /* "SEGV" */
        uint64_t size;          /* bytes */
        char path[700];
};
size_t unit_cores(const struct unit *u, struct unit_core_file **files);
/* Its last crash since gadgetd started: its cause, and its backtrace's
 * frames in frames (room for SANDBOX_CRASH_FRAMES_MAX, sandbox_abi.h),
 * their number in *n; NULL if it never crashed. Valid until it crashes
 * again or is unloaded. */
const char *unit_last_crash(const struct unit *u, char **frames, size_t *n);

/* What gadgetctl status and list show of a unit. */
#define UNIT_INFO_TAILS 8  /* tail bindings told by name; from the 8th on, together as UNIT_STATS_OTHER */

/* The events a tail binding of the gadget dropped since it was loaded. */
struct unit_tail_drops {
        const char *binding;        /* the listener's copy: valid until u's policy changes */
        uint64_t dropped;
};

struct unit_info {
        const char *name, *state;
        const char *cause;          /* or why its last run ended */
        pid_t pid;                  /* 0 when not running */
        pid_t program_pid;          /* the program's (PID 2 of the sandbox) host pid, 0 if none */
        uint64_t uptime_ms, restarts, calls, start_us;
        uint64_t in_flight;         /* calls taken, not answered yet: waiting for its start or sent to it */
        uint64_t memory_bytes, tasks, cpu_usec;
        uint64_t memory_peak;       /* its cgroup's most since this run began, 0 if unknown */
        uint64_t limit_hits[3];     /* since its load, by enum limiter_hit (MemoryMax, TasksMax, CPUQuota) */
        const char *limits_mode;
        uint64_t log_lines_max, log_bytes_max;  /* the log budget in force */
        const char *node;           /* Store=postgresql: the node that runs it ("" none yet), else NULL */
        int64_t epoch;              /* its lease's epoch there (0: unknown) */
        const char *start;          /* Start=: "always" or "on-demand" */
        uint64_t active_ago_ms;     /* since its last call or binding call; 0 if none yet */
        int64_t next_alarm_ms;      /* its next alarm or scheduled call, ms since the epoch; 0 if none known */
        size_t tails;               /* its tail bindings: their events waiting, and dropped since it was loaded */
        uint64_t tail_queued, tail_dropped;
        struct unit_tail_drops tail_drops[UNIT_INFO_TAILS]; /* by binding, n_tail_drops of them (metrics) */
        size_t n_tail_drops;
        unsigned kept_errors;       /* its file's errors when a reload kept it on its policy; 0: none */
        const char *kept_lines;     /* those errors, "FILE:LINE: ..." lines ("" if none) */
        const struct denials *denials; /* its refused system calls (core/denials.h), NULL if none yet */
};
void unit_info(const struct unit *u, struct unit_info *out);
/* Its metrics' counters (unit_stats.h), and the approvals its calls wait for. */
const struct unit_stats *unit_stats(const struct unit *u);
/* gadgetd run --learn: the paths its program could not find (core/denials.h). */
const struct learned *unit_learned_paths(const struct unit *u);
/* Its last calls (call_log.h), NULL before its first. */
struct call_log;
const struct call_log *unit_recent_calls(const struct unit *u);
size_t unit_approvals_waiting(const struct unit *u);

/* The outcome of a move: code 0 (msg says where it runs now) or a GADGET_E*
 * code and why. */
typedef void (*unit_move_fn)(void *arg, int code, const char *msg);
/* Hands u over to node (gadgetctl move). On the node that runs it: marks
 * the move in the store, stops u gracefully, gives its lease back, and
 * done says so once node owns it (or it did not take it within the move's
 * time). On another node: asked of the node that runs it, over the link.
 * 0 on its way, or a GADGET_E* code with msg (done never called). */
int unit_move(struct unit *u, const char *node, unit_move_fn done, void *arg, char *msg, size_t len);
/* Whether this node holds u's lease (Store=postgresql). */
bool unit_leased(const struct unit *u);
/* Whether u's worker was adopted after a re-exec and waits for this node
 * to take its lease back (its calls wait meanwhile). */
bool unit_lease_adopting(const struct unit *u);
/* The node that runs u, as last read ("" if none yet): the one a call
 * or a move is forwarded to. */
const char *unit_owner(const struct unit *u);
