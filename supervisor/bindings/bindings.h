/* bindings: gadgetd's side of binding calls. Every call is checked against
 * the calling gadget's policy (the gadget's own claims count for nothing),
 * carried out by the type's module, answered, and audited. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "gadget.pb-c.h"
#include "policy.h"
#include "traceparent.h"

struct peer;
struct peer_chain;
struct policy;
struct policy_binding;
struct kv;
struct kv_backend;
struct kvpg_lease;
struct store_latency;
struct event_base;
struct audit;
struct http;
struct approvals;
struct traces;
struct backup_info;

/* A gadget binding's call of another gadget's method. */
struct bindings_call {
        const char *target, *method;
        const Gadget__Value *args;
        const struct peer_chain *chain;
        const char *caller;          /* the calling gadget */
        const char *via;             /* "binding NAME" */
        const struct trace_ctx *trace; /* the binding call's span: the call's parent, or NULL */
};

/* What binding calls may use of gadgetd, given by the unit's owner
 * (struct unit_hooks): no module here reaches through a unit into the
 * daemon. */
struct bindings_env {
        struct event_base *base;
        const char *state_dir;      /* the gadgets' kv stores are below it */
        struct audit *audit;
        struct http *http;
        struct traces *traces;      /* where binding calls' spans go, or NULL */
        /* Calls bc's method of the loaded gadget bc->target (gadget
         * bindings), by gadgetd's one door for calls (core/calls.h),
         * approved already (approval_wanted was asked first): 0 when the
         * call is on its way (done gets its outcome once, res NULL on
         * failure), or a GADGET_E* code with msg saying why. */
        int (*call)(void *arg, const struct bindings_call *bc,
                    void (*done)(void *cbdata, uint64_t tag, const Gadget__Value *res, int code,
                                 const char *message),
                    void *cbdata, char *msg, size_t len);
        /* Whether target's own policy wants a person's approval of each
         * call of method (its Approve=), and for how long one may wait. */
        bool (*approval_wanted)(void *arg, const char *target, const char *method, uint64_t *timeout_ms);
        void *call_arg;
        struct approvals *approvals;  /* where calls wait for approval */
        struct kv_backend *kv_backend; /* where every gadget's store opens: SQLite files, or
                                        * (Store=postgresql) the shared store */
        struct kvpg_lease *lease;   /* Store=postgresql: which gadgets this node runs; NULL: all */
        struct kvpg_audit *audit_store; /* Store=postgresql: the audit's copy in the store; NULL: none */
        struct store_latency *store_latency; /* Store=postgresql: its queries' durations; NULL: none */
        /* gadgetd test's canned answers (a test file's "fake" lines), or
         * NULL. Asked for each call of a declared binding's operation
         * whose arguments passed the checks: true if it answers in place
         * of the binding (*res: the hook's, or NULL with code and msg). */
        bool (*fake)(void *arg, const char *binding, const char *op, const Gadget__Value **res, int *code,
                     char *msg, size_t len);
        void *fake_arg;
        const char *store_connection; /* Store=postgresql: StoreConnection= (a backup's own
                                       * connection); NULL: SQLite files */
        const char *node;           /* Store=postgresql: Node= */
};

/* Where kv bindings live: store_connection NULL for SQLite files in the
 * state directory, else a libpq connection string (Store=postgresql)
 * used as node. */
struct bindings_store {
        const char *connection, *node;
        const char *peer;           /* PeerListen=, "" if none: where other nodes reach this one */
        unsigned audit_keep_days;   /* rows of gadgetd_audit kept (0: the default) */
        uint64_t audit_max_bytes;   /* this node's rows of gadgetd_audit: at most these bytes (0: no bound) */
        uint64_t node_forget_ms;    /* NodeForget= (0: the default) */
        uint64_t lease_ttl_ms;      /* LeaseTTL= (0: the default) */
        uint64_t lease_poll_ms;     /* LeasePoll= (0: the default) */
};

/* Fills env for base, state_dir and audit, with a new HTTP client of at
 * most http_requests_max requests at once (0: the default) and the kv
 * store (starting to connect to PostgreSQL if store says so; logs why
 * not); the caller sets call. 0 or -errno. */
int bindings_env_open(struct bindings_env *env, struct event_base *base, const char *state_dir,
                      struct audit *audit, unsigned http_requests_max, const struct bindings_store *store);
void bindings_env_close(struct bindings_env *env);
/* The signatures of a binding type's operations (up to max, static
 * texts), for gadgetctl status. Their number. */
size_t binding_op_signatures(enum binding_type type, const char **out, size_t max);

/* The binding side of one gadget, for as long as it is loaded: its calls
 * in flight, what its bindings keep (its secrets), its kv store. */
#define BINDING_STATS_OUTCOMES 4  /* room for every enum audit_outcome */
#define BINDING_STATS_MAX 256      /* rows by name; the rest under BINDING_STATS_OTHER */
#define BINDING_STATS_OTHER "_other" /* an undeclared binding, or an operation its type lacks */

/* A gadget's binding operations by binding, operation and outcome (its
 * metrics). Why bounded: a row is named only by a binding its policy
 * declares and an operation of that binding's type; any other call
 * counts under BINDING_STATS_OTHER for both. */
struct binding_stat {
        char binding[72], op[72];
        uint64_t outcomes[BINDING_STATS_OUTCOMES]; /* by enum audit_outcome */
};

struct gadget_bindings {
        const struct bindings_env *env;
        const struct policy *policy;  /* its policy now (bindings_set_policy) */
        struct peer *peer;          /* its worker's link while it runs, else NULL */
        LIST_HEAD(, binding_req) breqs; /* binding calls being carried out */
        size_t n_breqs;             /* their number (BindingCallsMax=) */
        uint64_t busy;              /* binding calls answered busy, not yet logged */
        struct timespec busy_logged; /* when the last count of them was logged */
        struct binding_state *states; /* per binding index: what its type's load kept (ops.h) */
        size_t n_states;
        struct kv *kv;              /* opened at the first kv or alarm call (bindings_kv) */
        /* Told when a set or cancel of an alarm binding took effect, so
         * that the delivery of alarms (alarms/alarms.c) looks again. */
        void (*alarms_changed)(void *arg);
        void *alarms_arg;
        struct binding_stat *stats;  /* its binding calls answered, counted */
        size_t n_stats;
};

/* One binding call being carried out. Async operations keep it until they
 * answer; if the calling gadget's worker ends first, g is set to NULL and
 * the answer goes nowhere. */
struct binding_req {
        struct gadget_bindings *g;
        struct peer *peer;          /* the worker that asked, where the answer goes */
        uint64_t id;
        char binding[72], op[72];
        struct timespec start;
        uint64_t bytes_in;
        struct approval *approval;  /* while it waits for a person's approval */
        bool declared;              /* a declared binding's own operation (counted by name) */
        char *audit_note;           /* what the audit names besides the outcome (an http
                                     * request's credential file), or NULL; never a secret */
        struct trace_ctx trace;     /* its span, a child of the call the gadget serves (traced) */
        uint8_t parent_id[TRACE_SPAN_ID_LEN];
        uint64_t start_ns;
        bool traced;
        LIST_ENTRY(binding_req) link; /* in the unit's list of pending calls */
};

/* The binding side of a gadget of policy p (borrowed). NULL: out of memory. */
struct gadget_bindings *bindings_new(const struct bindings_env *env, const struct policy *p);
/* What its bindings keep freed (its secrets wiped), its store closed. */
void bindings_free(struct gadget_bindings *g);
/* The gadget's policy was replaced (a reload). */
void bindings_set_policy(struct gadget_bindings *g, const struct policy *p);
/* Its worker runs, linked by peer (the one serving its calls). */
void bindings_attach(struct gadget_bindings *g, struct peer *peer);
/* Entry point from a worker's peer: the answer goes back to that peer (two
 * workers of a gadget may run at once while a restart drains the old). */
void bindings_handle(struct gadget_bindings *g, struct peer *peer, const Gadget__BindingCall *bc);
/* The same, but refused (unavailable: not run, with the message refused)
 * when refused is not NULL: nothing of it is done. */
void bindings_handle_or_refuse(struct gadget_bindings *g, struct peer *peer, const Gadget__BindingCall *bc,
                               const char *refused);
/* Its binding calls in flight. */
size_t bindings_busy(const struct gadget_bindings *g);
/* Answers (value, or code and message), audits, frees r. */
void bindings_reply(struct binding_req *r, const Gadget__Value *value, int code, const char *message,
                    uint64_t bytes_out);
/* The worker linked by peer ended (NULL: every worker): its pending
 * requests lose their caller. */
void bindings_orphan(struct gadget_bindings *g, const struct peer *peer);
/* Reads what the gadget's bindings keep while it runs (its secret files),
 * at each start. 0 or -errno with why. */
int bindings_load(struct gadget_bindings *g, char *why, size_t len);
/* a and b trade what their bindings keep (bindings_load): a new process's,
 * loaded beside the running one, becomes the gadget's at its switch. */
void bindings_swap_states(struct gadget_bindings *a, struct gadget_bindings *b);

struct snapshot;
/* gadgetctl backup (restore false) or restore of the gadget's whole store
 * to or from fd (taken: a regular file), by store/snapshot.h, with the
 * policy's kv and alarm bindings and their bounds (a restore is refused
 * past them): 0 with done called later on the loop, or a GADGET_E* code
 * with why (nothing started). A restore on a shared store is fenced by
 * this node's lease of the gadget if it holds one, else it is refused
 * (EUNAVAILABLE, from done) while another node holds one. Why the
 * caller checks the gadget's state and not this: a restore while it runs
 * is the caller's policy (control/backup.c). */
int bindings_snapshot(struct gadget_bindings *g, bool restore, int fd,
                      void (*done)(void *arg, int err, const char *why, const struct backup_info *info),
                      void *arg, char *why, size_t len);

/* A backup of the gadget's store into the new file path (mode 0600; an
 * existing one is refused: EINVAL), as bindings_snapshot: for gadgetd's
 * own callers, such as a deploy keeping the state of the version it
 * replaces. done gets -errno if the backup failed (the file is then
 * removed). 0, or a GADGET_E* code with why. */
int bindings_backup_file(struct gadget_bindings *g, const char *path,
                         void (*done)(void *arg, int err, const char *why, const struct backup_info *info),
                         void *arg, char *why, size_t len);

/* The gadget's store, prepared at its first use (the database itself is
 * opened by the store's thread); NULL if out of memory. */
struct kv *bindings_kv(struct gadget_bindings *g);
/* Closes the store of a gadget that does not run if nothing is queued on
 * it: what reading its alarms opened (its thread, its database's files)
 * is not kept for an idle gadget. */
void bindings_kv_release(struct gadget_bindings *g);

/* An operation's handler: carries out r's operation on b and answers r
 * itself (now or later); args passed the row's check. */
typedef void binding_fn(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
/* The check of an operation's arguments, before anything is done (the
 * policy's own limits are the handler's): 0, or -EINVAL with why. */
typedef int binding_check_fn(const Gadget__Value *args, char *why, size_t len);

/* Carries out a binding call once a person approved it: b is the
 * binding as the gadget's policy has it now, args the call's. */
typedef void binding_go_fn(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
/* A binding call to hold for approval (a binding's Approve=). */
struct binding_ask {
        const struct policy_binding *b;
        const char *target, *method;  /* what is called: a gadget and method, a URL and HTTP method */
        const Gadget__Value *args;    /* the operation's arguments, kept for go (copied) */
        const Gadget__Value *shown;   /* what the person sees of them, or NULL: all */
        uint64_t timeout_ms;
};
/* Asks a person to approve r (system/approvals.h): go runs once they do
 * (at once under a standing approval); a denial, the timeout or an error
 * answers r; if the caller leaves first, r is freed unanswered. */
void bindings_ask(struct binding_req *r, const struct binding_ask *q, binding_go_fn *go);

/* The time now in ms since the epoch (the clock alarms are set in). */
int64_t bind_alarm_now_ms(void);
/* A kv store failure's answer (bind_kv.c; bind_kv.h has the rest the
 * store's users share). */
struct kv_job;
void bind_kv_failed(struct binding_req *r, const struct kv_job *job);
