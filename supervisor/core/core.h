/* core: the gadgets one gadgetd runs (the registry) and what their units
 * share — the event loop, the audit log, the HTTP client, the seccomp
 * filters, the sandbox helper and its spare shell, the host uid pool and
 * the resource limiter. Both modes own one: the daemon many gadgets,
 * gadgetd run one. This header is the core's one door: the rest of
 * gadgetd sees units only through it (with unit.h, unit_events.h, calls.h
 * and logbuf.h, which it includes). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "limits/limiter.h"
#include "logbuf.h"
#include "unit_stats.h"
#include "system/approvals.h"
#include "system/audit.h"

struct core;
struct unit;
struct unit_hooks;
struct policy;
struct event_base;
struct kvpg_audit;
struct traces;

/* What the entry point's options say of the core. */
struct core_config {
        struct event_base *base;
        const char *state_dir;      /* the gadgets' kv stores and the audit log */
        uid_t uid_base;
        unsigned uid_count;         /* 0: UIDPOOL_DEFAULT_COUNT */
        enum limiter_mode limits_want;
        bool allow_degraded_limits;
        bool require_types;         /* RequireTypes=: gadgets without signatures fail to start */
        uint64_t log_lines, log_bytes;  /* gadgetd's LogLinesPerSecond=, LogBytesPerSecond= (0: default) */
        struct audit_config audit;
        unsigned http_requests_max; /* HTTPRequestsMax=, 0: the default */
        struct traces *traces;      /* where the spans of calls and binding calls go (the owner's), or NULL */
        const char *no_approver;    /* when no one can approve calls (gadgetd run): why each is denied */
        const char *store_connection; /* Store=postgresql: StoreConnection=; NULL: SQLite files */
        const char *node;           /* Node=: this gadgetd's name in the store */
        const char *peer_listen;    /* PeerListen=: where other nodes reach this one, or NULL */
        uint64_t node_forget_ms;    /* NodeForget= (0: the default) */
        uint64_t lease_ttl_ms;      /* LeaseTTL= (0: the default) */
        uint64_t lease_poll_ms;     /* LeasePoll= (0: the default) */
        uint32_t handoff_ms;        /* FdStore=yes: FdStoreTimeout=, each sandbox's bound without gadgetd (0: off) */
        bool learn;                 /* gadgetd run --learn: programs run under the filter's learn variant */
        uint64_t quick_failure_ms;  /* QuickFailure=: a failure this soon after its start is quick (0: 10 s) */
        bool uid_lock_kept;         /* a re-exec's: the uid pool's lock file is uid_lock_fd, kept open */
        int uid_lock_fd;
        /* gadgetd test: canned answers of binding calls (bindings_env's fake). */
        bool (*fake)(void *arg, const char *binding, const char *op, const Gadget__Value **res, int *code,
                     char *msg, size_t len);
        void *fake_arg;
};

/* Opens what the units need; hooks (copied) are how every unit reports
 * its events to the owner (unit.h). Logs why it failed. 0 or -errno. */
int core_open(const struct core_config *cfg, const struct unit_hooks *hooks, struct core **out);
/* Frees every unit (killing what still runs), then the rest. */
void core_close(struct core *c);

struct unit_origin;

/* Adds a unit for policy p (taken over, freed on failure), not started.
 * NULL: out of memory. */
struct unit *core_add(struct core *c, struct policy *p, const struct unit_origin *o);
/* A gadget as gadgetctl daemon-reexec hands it to gadgetd's next image
 * (unit_adopt.c; daemon.c's state file carries it). Strings and arrays are
 * borrowed: from the unit when saved, from the state file when adopted. */
/* One line of a handed-on log ring: what it is, and its text (escaped). */
struct unit_saved_line {
        struct logbuf_meta meta;
        const char *text;
};
struct unit_saved {
        const char *name, *path;    /* its policy's, and that file's path */
        uint64_t policy_hash;       /* of the file's bytes when it was loaded */
        bool from_dir;              /* loaded from the policy directory */
        int state;                  /* enum unit_state: READY (runs), STOPPED, FAILED, IDLE or REMOTE */
        const char *cause;          /* why it last stopped or failed */
        const char *text;           /* its policy file's bytes as loaded (the policy it runs), or NULL */
        size_t text_len;
        size_t n_log;               /* its log ring's lines, oldest first (saved: an array of unit_save's, */
        struct unit_saved_line *log; /* freed with free()) */
        uint32_t restarts;
        uint32_t runs;              /* processes started so far: the running one's number */
        uint64_t calls;
        /* Another node's (REMOTE) only: who runs it as last read ("" and 0:
         * none), and what this node wants of its lease: to run it (at its
         * rank in Nodes=, found again from the policy), or to hold it idle
         * (dormant: Start=on-demand, IdleStop=). */
        const char *owner;
        int64_t owner_epoch;
        bool dormant;
        /* Running (READY) only: */
        int32_t pid;                /* PID 1 of its sandbox, a child of gadgetd (but after a handoff through the fd store) */
        int rpc_fd, report_fd, out_fd, err_fd; /* gadgetd's ends, kept open across the exec */
        int pidfd;                  /* its pidfd: how a gadgetd it is no child of knows it (fd store) */
        int core_fd;                /* CoreDump='s memfd of the run (-1: none), its next crash's core */
        uint32_t uid;               /* its host uid */
        int64_t started_ms;         /* CLOCK_MONOTONIC, the run's start */
        uint64_t start_us;          /* from its start to its hello */
        size_t n_methods;           /* from its hello */
        char *const *methods, *const *sig_texts;
};
/* Whether the core can be handed on now: no call or binding call in
 * flight, no worker's message half read, no gadget starting (a restart's
 * backoff included) or stopping; on a shared store, every lease held
 * marked for this node's next image (asked at the first call), and the
 * store's audit copy sent. 0, or -EBUSY (wait: it may come) or another
 * -errno (it cannot be) with why. */
int core_reexec_quiet(struct core *c, char *why, size_t len);
/* Holds every worker's input (hold true), or releases it. */
void core_reexec_hold(struct core *c, bool hold);
/* The uid pool's lock file, which a re-exec keeps open (its locks are the
 * uids its gadgets hold). */
int core_uid_lock_fd(const struct core *c);
/* The spare shell is ended: it would outlive the exec as nobody's. */
void core_reexec_drop_spare(struct core *c);
/* u as a re-exec hands it on (s's strings are u's, valid while u is; free
 * s->log). */
void unit_save(struct unit *u, struct unit_saved *s);
/* FdStore= mode: tells every running sandbox that gadgetd leaves now
 * (adopted true: that this gadgetd adopted it), through its pidfd. */
void core_handoff_signal(struct core *c, bool adopted);
/* Why the gadgets cannot go through the fd store now (NULL: they can). */
const char *core_handoff_refused(const struct core *c);
/* In the next image: the unit of policy p (taken over) as s describes it;
 * a running one takes its worker over (pidfd, uid, cgroup, fds, methods).
 * 0, or -errno with err: the worker could not be adopted, and was killed
 * (its fds closed) so that no sandbox is left without a gadgetd. */
int core_adopt(struct core *c, struct policy *p, const struct unit_saved *s, char *err, size_t len);
/* Store=postgresql: the time (monotime_ms) by which the next image must
 * hold its leases again, which the marks asked by core_reexec_quiet make
 * safe (no other node may take them until then); 0: no shared store. */
uint64_t core_reexec_lease_until(const struct core *c);
/* In the next image, before core_adopt: that time, as handed on. */
void core_adopt_lease_until(struct core *c, uint64_t until_ms);

struct core_remote;
/* Calls to gadgets other nodes run go through r (copied) from now on. */
void core_set_remote(struct core *c, const struct core_remote *r);
/* How calls reach other nodes now (.call NULL: they do not). */
const struct core_remote *core_remote_of(const struct core *c);
struct kvpg_node;
/* Store=postgresql: the nodes that share the store, as last read (0 and
 * none without one); self: this node's name (NULL without a store);
 * since_ms: how long ago they were read (to add to their ages). */
size_t core_nodes(const struct core *c, const struct kvpg_node **nodes, const char **self, uint64_t *since_ms);
/* Why the shared store may lose acknowledged writes at a failover ("" if
 * nothing is known against it, or no shared store). */
const char *core_store_warning(const struct core *c);
/* This node's name (Node=), "" without a shared store. */
const char *core_node(const struct core *c);
/* Before a use of the gadgets' store leases (a call, a request): every
 * lease ends now if this node's own may have expired (kvpg_lease_check). */
void core_lease_check(struct core *c);
/* Calls that crossed between nodes, by outcome (unit_stats_outcome_of's
 * index): [0] from other nodes to the gadgets this node runs (refused at
 * the door too), [1] forwarded to gadgets other nodes run (a forward that
 * could not be sent too). */
struct core_forwarded {
        uint64_t calls[2][UNIT_STATS_OUTCOMES];
};
const struct core_forwarded *core_forwarded(const struct core *c);
/* A call from another node refused before it reached a gadget's door (no
 * such gadget here, an admin call): counted in [0] with code. */
void core_forwarded_refused(struct core *c, int code);
struct store_latency;
/* The shared store's query durations by kind; NULL without one. */
const struct store_latency *core_store_latency(const struct core *c);
/* gadgetctl nodes forget: node leaves the store's list, if it is down
 * (not seen for CONTROL_NODE_DOWN_MS, as the store's clock says). 0 and
 * done(arg, code, msg) once (a live node: GADGET_EBUSY), or a GADGET_E*
 * code with msg (done never called): no shared store, this node, another
 * forget on its way, the store out of reach. */
int core_forget_node(struct core *c, const char *node, void (*done)(void *arg, int code, const char *msg), void *arg,
                     char *msg, size_t len);
/* The unit of that gadget name, NULL if none. */
struct unit *core_find(const struct core *c, const char *name);
/* Every unit, newest first: for (u = core_first(c); u; u = unit_next(u)). */
struct unit *core_first(const struct core *c);
/* Stops u; once it stopped it is removed from the registry and freed (the
 * owner's stopped hook sees it last). */
void core_unload(struct core *c, struct unit *u, const char *why);
/* gadgetd stops: every unit is asked to stop, none restarts again. */
void core_stop_all(struct core *c, const char *why);
void core_kill_all(struct core *c, const char *why);
bool core_stopping(const struct core *c);
/* How many units still have a process. */
size_t core_running(const struct core *c);
/* Units in all, ready, failed. */
void core_count(const struct core *c, size_t *all, size_t *ready, size_t *failed);

struct event_base *core_base(const struct core *c);
/* core_config's state_dir. */
const char *core_state_dir(const struct core *c);
struct audit *core_audit(const struct core *c);
/* The spans of its calls (core_config's traces), or NULL. */
struct traces *core_traces(const struct core *c);
/* With Store=postgresql, the audit's copy in the store (reads of every
 * node's records); NULL otherwise. */
struct kvpg_audit *core_audit_store(const struct core *c);
/* The calls waiting for a person's approval (system/approvals.h). */
struct approvals *core_approvals(const struct core *c);
/* For benchmarks: ready makes the spare sandbox shell now (0 once one is
 * ready, else -errno); false drops it, and none is made until the next
 * start. */
int core_spare(struct core *c, bool ready);

#include "calls.h"
#include "logbuf.h"
#include "unit.h"
#include "unit_events.h"
