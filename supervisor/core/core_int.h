/* The core's own view of itself (core.h): for the files of core/ only. */
#pragma once

#include <event2/event.h>

#include "bindings/bindings.h"
#include "calls.h"
#include "core.h"
#include "denials.h"
#include "filter.h"
#include "spawn/spare.h"
#include "spawn/spawn.h"
#include "spawn/uidpool.h"
#include "backoff.h"
#include "limits/limiter.h"
#include "system/nametab.h"
#include "system/timer.h"
#include "system/ratelog.h"
#include "unit.h"
#include "unit_events.h"

/* Starts of idle gadgets (Start=on-demand, IdleStop=) in flight at once:
 * a call to 1,000 idle gadgets starts 16 at a time, the rest queued in the
 * order they were woken (their calls wait, each within its CallTimeout);
 * one caller's at most half of them, so that another caller's wake never
 * waits behind a flood. */
/* How long a stopping gadget has between Shutdown and SIGKILL. */
#define UNIT_STOP_GRACE_MS 3000
/* How long the end of a worker waits for the results it wrote before it
 * ended to be read from its link (its end of file), at most. */
#define UNIT_END_READ_MS 1000
#define CORE_WAKES_MAX 16
#define CORE_WAKES_PER_PARTY (CORE_WAKES_MAX / 2)

struct core {
        struct event_base *base;
        struct core_forwarded forwarded; /* calls.c counts, the metrics read */
        struct core_config cfg;
        struct unit_hooks hooks;      /* the owner's */
        struct limiter limiter;
        struct gadget_filter filter;
        struct spawn_helper helper;   /* gadgetd-sandbox, every worker starts as it */
        struct spare spare;           /* a sandbox shell ready for the next start */
        struct uidpool uids;
        struct audit *audit;          /* STATE_DIR/audit.log */
        struct approvals *approvals;  /* calls waiting for a person's decision */
        struct bindings_env bindings; /* what the units' bindings may use */
        struct unit *units;           /* every loaded gadget */
        struct nametab by_name;       /* the same by name (system/nametab.h); .n: how many */
        size_t n_ready, n_failed;     /* the units in either state (core_count, counted as they change) */
        size_t n_running;             /* the units whose run has a process (core_running, counted so too) */
        struct core_remote remote;    /* how calls reach other nodes (none: .call NULL) */
        struct unit_listener listeners[CORE_LISTENERS_MAX]; /* the parts above that listen (unit_events.h) */
        size_t n_listeners;
        /* unit_idle.c: starts of idle gadgets in flight (at most
         * CORE_WAKES_MAX: a wake flood queues), the ones queued (oldest
         * first) and the event that starts them. */
        struct unit *waking[CORE_WAKES_MAX]; /* the starts in flight (NULL: a free slot) */
        struct unit *wake_head, **wake_tail;
        struct event *ev_wakes;
        /* unit_starts.c: sandboxes building at once (started with
         * spawn_launch, their start's report not come yet; at most
         * builds_max), the units whose start waits for room (oldest first)
         * and the event that starts them. */
        unsigned builds, builds_max;
        struct unit *start_head, **start_tail;
        struct event *ev_starts;
        bool stopping;
        /* gadgetctl daemon-reexec on a shared store (unit_adopt.c): the
         * leases marked for the next image (marks asked, not answered; the
         * first failure; when they were asked, monotime_ms), and in the
         * next image the time its adopted gadgets' leases must be back by. */
        bool reexec_marking;
        size_t reexec_marks_out;
        char reexec_mark_err[200];
        uint64_t reexec_mark_ms;
        uint64_t adopt_lease_until;
        bool adopt_deadline_armed;
};


/* registry.c: u added to c's list and name table (0 or -ENOMEM), and
 * taken out of them. */
int core_index(struct core *c, struct unit *u);
void core_unlink(struct core *c, struct unit *u);

/* One process of a unit (one run of its program) and what it holds while
 * it lives. A unit has one, u->run, which serves its calls; during a
 * restart without a gap (unit_switch.c) also u->next_run, the new process
 * starting beside it, and after the switch u->old_run, the previous one
 * draining its calls in flight. */
struct unit_run {
        struct unit *u;
        struct policy *policy;    /* u->next_run's own until the switch (a changed policy), else NULL */
        struct gadget_bindings *bind; /* u->next_run's binding states, handed to u at the switch */
        uint64_t policy_hash;     /* policy's origin (unit_origin) */
        bool from_dir;
        struct spawn_child child;
        uid_t uid;
        bool have_uid;
        struct peer *peer;
        struct event *ev_report, *ev_out, *ev_err;
        struct event *ev_end;     /* a stop's grace, or the bound on reading its link after its end */
        struct limiter_run limits;  /* this run's cgroup and limit hits */
        struct event *ev_limits;    /* looks at the limit counters while it runs */
        struct event *ev_runtime;   /* RuntimeMax */
        struct event *ev_start;     /* StartTimeout */
        int out_fd, err_fd;       /* read ends of the program's stdout/stderr */
        struct logbuf_stream *lines; /* their unfinished lines (stdout, stderr), while it runs */
        struct timespec started;
        uint32_t number;          /* which start of its unit this is: 1, 2 ... (u->runs then) */
        struct timespec start_begin; /* when this run's start began (load, restart) */
        uint64_t start_us;        /* from start_begin to the hello, 0 until it came */
        pid_t program_pid;        /* the program's host pid, once looked up (unit_info.c) */
        pid_t program_of;         /* the child.pid it was looked up for */
        int program_status;       /* from the sandbox's report */
        bool have_program_status;
        bool ending;              /* its worker ended; its link is read to the end first (report_cb) */
        bool building;            /* its sandbox builds (child.start_want): one of core's builds */
        bool hello_early;         /* its hello came before its sandbox's start report: handled then */
        bool stop_killed;         /* its stop's grace ran out with calls in flight */
        bool spawn_deferred;      /* u->next_run not started yet: the last switch's old process
                                   * still drains, and holds the cgroup name it would take */
        char cause[256];          /* u->next_run's and u->old_run's: why it was killed */
        struct spawn_crash *crash; /* the crash the sandbox reported, until its end (NULL: none) */
        int core_fd;              /* CoreDump=: the sealed memfd its sandbox writes a crash's core into, else -1 */
};

/* A staged rollout of a unit (unit.h, unit_rollout.c). */
struct unit_rollout {
        bool running;             /* u->next_run said hello and serves its share */
        unsigned percent;
        struct unit_rollout_bound bound;
        uint64_t calls, errors;   /* answered by u->next_run since the percent was set */
        uint64_t seq;             /* calls of no trace (traces off): split in turn */
        char version[80];
        unit_rollout_fn fn;
        void *arg;
        struct event *ev_back;    /* its bound was passed: rolled back from the loop, not inside a call's end */
        char back_why[200];
};

/* One loaded gadget (unit.h). */
struct unit {
        struct core *core;
        const struct unit_hooks *hooks;
        struct policy *policy;
        enum unit_state state;
        char cause[256];          /* why it last stopped or failed */
        char last_cause[256];     /* kept while it runs again: why its last run ended */
        struct spawn_crash *last_crash; /* its last crash: cause and backtrace (NULL: none yet) */
        struct unit_run *run;     /* its process (never NULL; its child's pid -1 when none runs) */
        struct unit_run *next_run; /* a restart's new process, starting beside run (unit_switch.c) */
        struct unit_run *old_run;  /* the process run replaced, draining its calls in flight */
        char *switch_why;         /* next's restart's cause (made with next_run; NULL before the first) */
        struct unit_rollout *ro;  /* a staged rollout armed or running (unit_rollout.c), or NULL */
        char *ro_last_back;       /* why the last rollout was rolled back (NULL: none was) */
        struct event *ev_timer;   /* a restart's delay (Restart=, backoff) */
        struct logbuf log;
        struct logbuf_budget log_budget; /* LogLinesPerSecond, LogBytesPerSecond */
        struct event *ev_logwin;  /* the budget's window ends: report drops, read again */
        unsigned restarts;        /* restarts so far */
        uint32_t runs;            /* processes started so far (its log lines' run numbers) */
        struct backoff backoff;   /* failures in a row: restart delay, parking */
        uint64_t calls;
        struct unit_stats stats;  /* its metrics' counters (unit_stats.h) */
        struct call_log *recent;  /* its last calls (call_log.h), NULL until its first */
        struct ratelog broken_log;  /* results that broke their signature, logged once per window */
        struct gadget_bindings *bind; /* its binding calls, what its bindings keep, kv store */
        void *slots[CORE_LISTENERS_MAX]; /* what each listener keeps of it (unit_set_slot) */
        unsigned frame_watchers;  /* gadgetctl trace NAME followers (unit_frames_watch) */
        LIST_HEAD(, call) waiting;   /* calls to it waiting for approval (calls.c) */
        LIST_HEAD(, call) forwarded; /* calls to it forwarded to the node that runs it */
        char *const *args;          /* replace the policy's Arguments (gadgetd run) */
        bool want_running;        /* false once stopped on purpose */
        bool restart_pending;     /* start again once stopped */
        bool remove_when_stopped;
        bool from_dir;            /* loaded from the policy directory */
        char *kept_errors;        /* its file's errors ("FILE:LINE: ..." lines) at the last reload that
                                   * kept it on its policy, or NULL (unit_keep_policy) */
        unsigned n_kept_errors;
        struct denials *denials;  /* its refused system calls, NULL until the first (unit_denials.c) */
        struct denials *denial_window; /* those of this second, for the audit and the log */
        struct event *ev_denials; /* the end of that second */
        struct learned learned;   /* gadgetd run --learn: what its program could not find */
        bool leased;              /* Store=postgresql: this node holds its lease */
        bool lease_adopting;      /* adopted after gadgetd's re-exec, its lease not back yet:
                                   * its worker held, calls wait (unit_lease.c) */
        char owner[64];           /* not leased: the node that holds it, as last read */
        int64_t owner_epoch;
        struct unit_move *move;   /* gadgetctl move on its way (unit_lease.c) */
        /* Start=on-demand and IdleStop= (unit_idle.c; the calls that
         * wait for a start: calls.c) */
        bool dormant;             /* idle: its next call (or gadgetctl wake) starts it */
        bool waking;              /* starting for calls: they wait in pending */
        bool wake_counted;        /* its start is one of core's wakes in flight */
        bool wake_queued;         /* idle, its start waits in core's wake queue */
        const void *wake_party;   /* the caller whose call woke it (its control connection, its
                                   * node's session; NULL: gadgets, the gateway, alarms) */
        struct unit *wake_next;
        bool start_queued;        /* its start waits for room among core's builds (unit_starts.c) */
        struct unit *start_next;
        bool idling;              /* its stop is an idle stop: it ends idle */
        struct unit_hold *hold;   /* held idle for a change of its state (unit_hold.c), or NULL */
        TAILQ_HEAD(, call) pending;      /* calls waiting for its hello, in order (unit_new inits it) */
        size_t n_pending, pending_bytes; /* their number, their arguments' packed bytes */
        uint64_t last_active_ms;  /* monotime of its last call or binding call (0: none) */
        struct event *ev_idle;    /* IdleStop= (made at its first ready) */
        uint64_t policy_hash;     /* of the policy file's bytes, for reload */
        struct unit *next, **pprev; /* core's list */
        bool indexed;               /* in that list, its state counted (core_index to core_unlink) */
        bool counted_running;       /* counted in the core's n_running (core_count_running) */
        struct nametab_link name_link; /* in core's by_name */
};

/* unit_run.c: a run of u (its child's pid -1, none running yet), or NULL;
 * freed (dropped first: unit_run_drop), with its policy and bindings. */
struct unit_run *unit_run_new(struct unit *u);
/* Makes r's timers (ev_limits, ev_runtime, ev_start, ev_end) if not made
 * yet: at its worker's spawn or adoption, so that a declared gadget that
 * never starts holds none (they are NULL until then; timer_stop takes
 * NULL). 0 or -ENOMEM. */
int unit_run_timers(struct unit_run *r);
void unit_run_free(struct unit_run *r);
/* The policy r runs: its own (a restart's new process on a changed
 * policy), else its unit's. */
const struct policy *unit_run_policy(const struct unit_run *r);
/* Releases everything of r's worker (it is dead or being killed): its
 * link (its calls in flight fail with gone), binding calls, pipes, timers,
 * cgroup, host uid. */
void unit_run_drop(struct unit_run *r, const char *gone);
/* SIGKILL to r's worker (and its cgroup); why, if its cause is not set. */
void unit_run_kill(struct unit_run *r, const char *why);
/* Kills r's worker, waits for it, and drops it. */
void unit_run_reap(struct unit_run *r, const char *gone);
/* Waits for its end (its pid stays its own until then), but for one
 * adopted through the fd store, which is not gadgetd's child. */
void unit_run_wait(struct unit_run *r);
/* unit.c: r's worker is gone and its link read to the end: what follows
 * (for u->next_run and u->old_run, unit_switch.c's). */
void unit_run_ended(struct unit_run *r);
/* unit.c: starts r's worker (warm: the one pre-warmed in r): spawned,
 * linked, watched, its StartTimeout armed. 0, or -errno with err (r
 * holds what was taken: the caller drops it). */
int unit_run_go(struct unit_run *r, bool warm, char *err, size_t errlen);

/* unit.c: r's sandbox did not start (err: why; its start's report said
 * so, or did not come in time): the start fails as one that failed at
 * once, or, if r is being stopped, its end follows as any end's. */
void unit_run_start_failed(struct unit_run *r, const char *err);

/* unit_starts.c: the bound on sandboxes building at once. Whether a
 * start may launch now; u's start queued until one may (unit_start again
 * then; false: it could not be, out of memory), or taken out of the queue; r's build counted, or ended (it
 * started, failed or was dropped: the next queued start goes). */
bool unit_starts_room(struct core *c);
bool unit_starts_queue(struct unit *u);
void unit_starts_unqueue(struct unit *u);
void unit_starts_begin(struct unit_run *r);
void unit_starts_end(struct unit_run *r);

/* unit_switch.c: a restart without a gap. Whether u's restart can start
 * its new process beside the one that serves (it is ready here); then
 * begins it on policy p (taken over, with its origin o), or u's own
 * (p NULL). */
bool unit_switch_can(const struct unit *u);
void unit_switch_begin(struct unit *u, struct policy *p, const struct unit_origin *o, const char *why);
/* u->next_run said hello: new calls go to it, the old one drains. */
void unit_switch_hello(struct unit_run *r);
/* u->next_run ended (or could not start) before its switch: u serves on with
 * its process and policy, and the restart's waits are told why. */
void unit_switch_failed(struct unit *u, const char *why);
/* u->next_run's start failed (err: why): it is released, and the switch
 * fails from the loop as one whose process ended. */
void unit_switch_start_failed(struct unit *u, const char *err);
/* u->old_run ended: released; a new process waiting for it switches now. */
void unit_switch_old_ended(struct unit *u);
/* A switch under way is called off (a stop, its lease lost, u freed):
 * the new process is killed and released; waits are told why. */
void unit_switch_drop(struct unit *u, const char *why);
/* u->run ended during a switch: u->next_run becomes its process (0), or
 * -ENOENT when there was none to take over. */
int unit_switch_promote(struct unit *u);

/* unit_switch.c: new calls go to u->next_run from now on; the old one
 * drains (the end of a switch, or a rollout completed). */
void unit_switch_now(struct unit *u);

/* unit_rollout.c: the switch's new process said hello: whether it
 * serves a rollout's share now (then the switch waits). */
bool unit_rollout_hello(struct unit *u);
/* The run a call of trace t goes to: u->next_run while a rollout runs
 * and t's hash falls in its share, else u->run. */
struct unit_run *unit_rollout_route(struct unit *u, const struct trace_ctx *t);
/* A call r answered with code (0: a value): counted against the bound. */
void unit_rollout_answered(struct unit *u, const struct unit_run *r, int code);
/* The switch ended or was called off with u->ro armed or running:
 * completed (u->next_run took over) or not, with why. */
void unit_rollout_over(struct unit *u, bool completed, const char *why);
/* A rollout runs: u->next_run serves its share. */
static inline bool unit_rollout_running(const struct unit *u)
{
        return u->ro && u->ro->running;
}

/* unit_events.c: the one writer of u->state; the listeners are told. */
void unit_set_state(struct unit *u, enum unit_state s);
/* Counts a unit in state s into its core's n_ready or n_failed (d: 1 or -1). */
void core_count_state(struct core *c, enum unit_state s, int d);
/* Counts u into its core's n_running while it is in the core (indexed)
 * and its run has a process, out when not: called after each change of
 * u->run, of its pid and of indexed. */
void core_count_running(struct unit *u);
/* The events the core tells its listeners (struct unit_listener). */
int unit_events_created(struct unit *u);
void unit_events_lease(struct unit *u, bool held);
void unit_events_policy(struct unit *u);
void unit_events_going(struct unit *u);
void unit_events_freed(struct unit *u);
void unit_events_called(struct unit *u, const struct unit_call_event *e);
void unit_events_logged(struct unit *u, const char *stream, const char *line);
void unit_events_framed(struct unit *u, const struct unit_frame_event *e);
void unit_events_exited(struct unit *u, int status, const char *cause);
void unit_events_info(const struct unit *u, struct unit_info *out);
void core_events_closed(struct core *c);

/* unit_lease.c: on a shared store, whether u must wait for its lease
 * (then it is remote, its lease wanted); giving it back; the lease's
 * hooks, set once the core's parts are open. */
bool unit_lease_wait(struct unit *u);
void unit_lease_release(struct unit *u);
/* Who runs u and at which epoch (node NULL: no shared store). */
void unit_lease_info(const struct unit *u, const char **node, int64_t *epoch);
/* u stopped on this node (unit.c's end of a stop, after its lease went back):
 * a move goes on (it waits for the lease again). */
void unit_lease_stopped(struct unit *u);
/* u is asked to stop: a move on its way fails unless the stop is its own. */
void unit_lease_stop(struct unit *u);
/* u is being freed: a move on its way fails. */
void unit_lease_gone(struct unit *u);
void core_lease_hooks(struct core *c);
/* gadgetctl daemon-reexec, in the next image: u's worker is adopted and
 * its lease was this node's; it waits (its worker held, calls queued)
 * until the lease is back, and is killed if another node takes it or it
 * is not back by c->adopt_lease_until. */
void unit_lease_adopted(struct unit *u);

/* Calls to u that wait for approval end: u is being freed (calls.c). */
void calls_unit_gone(struct unit *u);
/* u said hello: the calls that waited for its start go to it, in the
 * order they came (calls.c). */
void calls_pending_flush(struct unit *u);
/* u's start failed or was called off: the calls that waited for it fail
 * with why. */
void calls_pending_fail(struct unit *u, const char *why);
/* u's owner changed (unit_lease.c): the calls that wait for a node to run
 * it (calls_remote_unsent, or none held it) go there, in order. */
void calls_pending_forward(struct unit *u);

/* unit_idle.c: IdleStop= while u is ready; noting activity. */
void unit_idle_arm(struct unit *u);
/* after_exit's end of an idle stop: idle now (enter, before the core
 * hears of the stop, which keeps an idle unit's lease); then started
 * again at once if calls (or a wake) came meanwhile (stopped). */
void unit_idle_enter(struct unit *u);
void unit_idle_stopped(struct unit *u);
static inline void unit_active(struct unit *u, uint64_t now_ms) { u->last_active_ms = now_ms; }
/* unit_hold.c: u may have become quiet (idle, no process left): a hold
 * waiting for that is told, from the loop. */
void unit_hold_check(struct unit *u);
/* A hold is called off (another stop, u freed): its fn told err if it
 * was not told yet; u is no longer held. */
void unit_hold_ended(struct unit *u, int err);

/* unit_output.c: a pipe of the program's output (its read end rd, watched
 * by *ev; 0 or -errno), a log message over the RPC, the log budget's
 * window (u->ev_logwin), and the drops not told yet (at its end). */
int unit_output_pipe(struct unit_run *r, int *rd, int *wr, struct event **ev);
void unit_output_log(struct unit_run *r, const Gadget__Log *l);
void unit_output_window_cb(evutil_socket_t fd, short what, void *arg);
void unit_output_end(struct unit *u);
/* The read end rd of an output pipe kept across gadgetd's re-exec, watched
 * by *ev as unit_output_pipe's (0 or -ENOMEM). */
int unit_output_adopt(struct unit_run *r, int rd, struct event **ev);

/* unit.c: u (a new unit) takes over the running worker s describes, whose
 * pidfd, fds, uid and cgroup unit_adopt.c has put in u: its link (no new
 * hello), its report and output, its timers; ready. 0, or -errno with err
 * (then unit_adopt_failed). */
int unit_adopt_worker(struct unit *u, const struct unit_saved *s, char *err, size_t errlen);
/* The worker u took could not be adopted: it is killed and reaped, what
 * u held of it released, and u failed with why. */
void unit_adopt_failed(struct unit *u, const char *why);

/* unit_lifecycle.c: a lifecycle event of u, told to gadgetd's log (the
 * journal: its MESSAGE_ID and fields), the audit and u's log ring. */
enum unit_lifecycle_event {
        LC_STARTED, LC_READY, LC_EXITED, LC_RESTARTED, LC_PARKED, LC_IDLE, LC_WOKEN, LC_MOVED, LC_LEASE_LOST, LC_N
};
struct unit_lifecycle_info {
        enum unit_lifecycle_event event;
        enum log_level level;
        uint32_t run;             /* the process it is about (0: none) */
        pid_t pid;                /* its pid (0: none) */
        bool has_status;          /* exited: its wait status */
        int status;
        int64_t delay_ms;         /* restarted after a delay: the delay (-1: none) */
        const char *node;         /* moved: the node it goes to */
        bool failed;              /* its audit outcome is error (an exit not clean, a park) */
        const struct spawn_crash *crash; /* exited of a crash: its backtrace (BACKTRACE) */
};
/* The line's text is fmt's (gadgetd's own words). */
void unit_lifecycle(struct unit *u, const struct unit_lifecycle_info *in, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* unit_denials.c: a Denials report of one of u's runs (r): summed in
 * u->denials, an audit record per call, one note in u's log. */
struct spawn_denials;
void unit_denied(struct unit_run *r, const struct spawn_denials *den);
/* Writes what unit_denied holds for the second under way (unit_free). */
void unit_denials_flush(struct unit *u);
/* A learning run's report of a path r's program could not find: kept in
 * u->learned (LEARNED_MAX at most). */
struct spawn_learned;
void unit_learned(struct unit_run *r, const struct spawn_learned *l);
/* CoreDump= (unit_core.c): a run's memfd for its core, sealed at the
 * policy's size (-1: none, or it could not be made); a crash's core
 * copied from it (size bytes, as the sandbox reported) into the state
 * directory, the oldest beyond UNIT_CORES_KEPT or the state quota
 * (StateMax=, beside the kv store) removed first. */
int unit_core_fd(const struct policy *p);
void unit_core_save(struct unit *u, const struct unit_run *r, uint64_t size, int sig);

/* Made and freed by the registry (core_add, core_unload, core_close). */
struct unit *unit_new(struct core *c, struct policy *policy);
void unit_free(struct unit *u);

/* unit_info.c's, for the core's own messages and restarts. */
const char *unit_state_name(enum unit_state s);
uint64_t unit_uptime_ms(const struct unit *u);
