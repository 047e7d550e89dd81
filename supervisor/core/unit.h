/* unit: one loaded gadget in the daemon and its lifecycle —
 * starting → ready (hello received) → stopping → stopped, or failed — with
 * restarts by Restart=, exponential backoff, and parking when it keeps
 * crashing. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <event2/event.h>

#include "backoff.h"
#include "gadget.pb-c.h"
#include "limits/limiter.h"
#include "logbuf.h"
#include "spawn/spawn.h"

struct daemon;
struct peer;
struct peer_chain;
struct policy;

enum unit_state {
        UNIT_STARTING,
        UNIT_READY,
        UNIT_STOPPING,
        UNIT_STOPPED,
        UNIT_FAILED,
};

struct unit;
struct bindings_env;

/* What the unit's owner does at its events, installed at unit_new: the
 * daemon's registry, or gadgetd run's one gadget. The unit calls nothing
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
        void *arg;
        /* What the unit's binding calls may use of gadgetd. */
        const struct bindings_env *bindings;
};

struct unit {
        struct daemon *d;
        const struct unit_hooks *hooks;
        struct policy *policy;
        enum unit_state state;
        char cause[256];          /* why it last stopped or failed */
        char last_cause[256];     /* kept while it runs again: why its last run ended */
        struct spawn_child child;
        uid_t uid;
        bool have_uid;
        struct peer *peer;
        struct event *ev_report, *ev_out, *ev_err, *ev_timer;
        struct limiter_run limits;  /* this run's cgroup and limit hits */
        struct event *ev_limits;    /* looks at the limit counters while it runs */
        struct event *ev_runtime;   /* RuntimeMax */
        int out_fd, err_fd;       /* read ends of the program's stdout/stderr */
        struct logbuf log;
        struct logbuf_stream out_line, err_line; /* their unfinished lines */
        struct logbuf_budget log_budget; /* LogLinesPerSecond, LogBytesPerSecond */
        struct event *ev_logwin;  /* the budget's window ends: report drops, read again */
        struct event *ev_start;   /* StartTimeout */
        struct timespec started;
        struct timespec start_begin; /* when this run's start began (load, restart) */
        uint64_t start_us;        /* from start_begin to the hello, 0 until it came */
        unsigned restarts;        /* restarts so far */
        struct backoff backoff;   /* failures in a row: restart delay, parking */
        uint64_t calls;
        struct binding_req *breqs;  /* binding calls being carried out */
        size_t n_breqs;             /* their number (BindingCallsMax=) */
        uint64_t busy;              /* binding calls answered busy, not yet logged */
        struct timespec busy_logged; /* when the last count of them was logged */
        char **secrets;             /* per binding index, secret bindings only */
        size_t n_secrets;
        struct kv *kv;              /* opened at the first kv call */
        char *const *args;          /* replace the policy's Arguments (gadgetd run) */
        int program_status;       /* from the sandbox's report */
        bool have_program_status;
        bool want_running;        /* false once stopped on purpose */
        bool restart_pending;     /* start again once stopped */
        bool remove_when_stopped;
        bool from_dir;            /* loaded from the policy directory */
        uint64_t policy_hash;     /* of the policy file's bytes, for reload */
        struct unit *next;
};

struct unit *unit_new(struct daemon *d, struct policy *policy, const struct unit_hooks *hooks);
void unit_free(struct unit *u);
/* Starts the worker. Failures leave the unit failed with the cause. */
void unit_start(struct unit *u);
/* Builds the sandbox of the next start now (the unit must not be running;
 * the daemon does it while a restart backs off): unit_start then only
 * starts the program in it. unit_stop drops it. */
void unit_prewarm(struct unit *u);
/* Asks the gadget to stop: Shutdown, then SIGKILL after a grace period. */
void unit_stop(struct unit *u, const char *why);
void unit_kill(struct unit *u, const char *why);
/* Stops the gadget if it runs, then starts it again. */
void unit_restart(struct unit *u);
/* Resident memory of the gadget's processes from /proc, 0 if unknown. */
uint64_t unit_memory_bytes(const struct unit *u);
/* Memory, tasks (without the sandbox's init) and CPU use now, from the
 * gadget's cgroup where there is one; 0 where unknown. */
void unit_usage(const struct unit *u, uint64_t *memory, uint64_t *tasks, uint64_t *cpu_usec);
/* How the limits of its last run were enforced (the mode, any degraded
 * limit); the daemon's mode if it never ran. */
const char *unit_limits_mode(const struct unit *u);
const char *unit_state_name(enum unit_state s);
uint64_t unit_uptime_ms(const struct unit *u);
