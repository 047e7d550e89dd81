/* calls: the one door for calling a gadget's method. gadgetctl's calls
 * (control/requests.c), the gateway (gateway/gateway_api.c), gadget-to-gadget
 * bindings (through struct bindings_env) and `gadgetd run --call` (run.c)
 * all come here; each turns the code it gets into its own transport's
 * answer. A call in flight is one record (struct call, with the peer's
 * link in it) and has a CallTimeout timer; a gadget that answered nothing
 * for that long is killed (cause "timeout"). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "gadget.pb-c.h"
#include "traceparent.h"

struct unit;
struct peer_chain;
struct call;
struct Control__TraceTree;

/* The outcome of a call: res NULL means it failed with code/message. tag
 * is the caller's, as given. */
typedef void (*call_fn)(void *cbdata, uint64_t tag, const Gadget__Value *res, int code, const char *message);

/* The calls in flight of a caller that may leave before they end (a
 * control client): zeroed to start, calls_owner_gone when it leaves. */
struct call_owner {
        LIST_HEAD(, call) calls;     /* zeroed: empty */
};

struct call_req {
        const char *method;
        const Gadget__Value *args;       /* borrowed */
        const struct peer_chain *chain;  /* where a gadget-to-gadget call comes from, else NULL */
        call_fn done;
        void *cbdata;
        uint64_t tag;                    /* the caller's (a request id), passed to done */
        struct call_owner *owner;        /* or NULL */
        /* Who calls, for approvals and their audit: a gadget's name,
         * "gadgetctl (uid N)", "workshop"; and through what. */
        const char *caller, *via;
        /* Whose approval slots a wait takes (APPROVALS_PER_CALLER): the
         * peer node of a forwarded call ("node b"), whatever caller it
         * names; NULL: the caller. */
        const char *party;
        /* The chain's trace: the parent of this call's span (a
         * traceparent the caller gave, a binding call's span, another
         * node's call), or NULL: a new trace starts here. */
        const struct trace_ctx *trace;
        const char *peer_node;  /* a call another node forwarded: that node's name, for its span */
        /* What is left of its caller's wait, in ms (0: none): its wait here
         * (CallTimeout) is at most that. Another node's call says it. */
        uint64_t left_ms;
        struct trace_ctx *trace_out; /* or NULL: given the call's span once it started (zero: none) */
        bool admin;     /* from the gatekeeper's admin UI: its AdminMethods= only; never for
                         * a gadget of another node (refused: GADGET_EDENIED) */
        bool approved;  /* a person of this node approved it already (a binding asked) */
        bool untailed;  /* its end is told to no listener (unit_events.h): a tail's own delivery */
        /* calls_wake only: wait for a start already asked (a load, a
         * restart) instead of starting an idle gadget. */
        bool until_ready;
        /* A local user's call (gadgetctl call): its outcome is audited when
         * it ends (or is refused), as binding `via`, op "call METHOD",
         * naming this uid. */
        bool audit_uid;
        uint32_t uid;
};

/* Calls q->method of u. 0 when the call is on its way: done gets its
 * outcome once (unless its owner left). Else a GADGET_E* code, with msg
 * saying why in words for the caller (not ready, no such method, busy,
 * too large, an admin method), and done is never called. A method in the
 * gadget's Approve= first waits for a person's approval (unless
 * q->approved or q->admin): done then says denied, or the call's own
 * outcome. */
int calls_start(struct unit *u, const struct call_req *q, char *msg, size_t len);
/* A call to a gadget that is idle (Start=on-demand, IdleStop=) starts it
 * and waits, with the calls that come meanwhile, for its hello: they are
 * sent to it then, in the order they came, each within its CallTimeout
 * (counted from when it came); CallsQueuedMax= bounds how many wait.
 *
 * gadgetctl wake: starts u if it is idle, with no call. 1 if it is ready
 * already (done is never called), 0 when done says once it is (res a
 * null value) or why it did not start, or a GADGET_E* code with msg (it
 * is not idle: stopped, failed). A gadget another node holds is woken
 * there (over the link, as a call without a method). q's method and args
 * are unused.
 * With q->until_ready (gadgetctl load and restart): waits the same way for
 * a start under way (starting, or stopping to start again), within its
 * StartTimeout plus a stop's grace; done says why if it fails (the cause
 * of its end). 1 too for a gadget that is idle, or held by another node
 * (nothing is started); a GADGET_E* code for one stopped or failed. */
int calls_wake(struct unit *u, const struct call_req *q, char *msg, size_t len);
/* Whether a call to u now waits for its start rather than being refused:
 * it is idle (or waking), starting, stopping to start again (a restart, a
 * reload's), or waiting out its Restart= delay. */
bool calls_wait_for_start(const struct unit *u);
/* How a call reaches a gadget another node runs (Store=postgresql with a
 * peer link: cluster/forward.c sets it with core_set_remote). */
struct core_remote {
        /* Sends q to gadget on node; calls_remote_end(c, ...) once, unless
         * cancel(arg, *handle) came first. 0, or a GADGET_E* code with msg. */
        int (*call)(void *arg, struct call *c, const char *node, const char *gadget, const struct call_req *q,
                    void **handle, char *msg, size_t len);
        /* timed_out: its caller's wait ran out (nodelink_abandon), else it
         * is only forgotten (an unload). */
        void (*cancel)(void *arg, void *handle, bool timed_out);
        /* Asks node to move gadget, which it runs, to node `to`; done
         * once. 0, or a GADGET_E* code with msg (done never called). */
        int (*move)(void *arg, const char *node, const char *gadget, const char *to,
                    void (*done)(void *darg, int code, const char *msg), void *darg, char *msg, size_t len);
        /* Asks node for its spans of the trace trace_id (32 hex digits):
         * done once with its answer, validated (NULL: code and msg). 0, or
         * a GADGET_E* code with msg (done never called). */
        int (*trace)(void *arg, const char *node, const char *trace_id,
                     void (*done)(void *darg, const struct Control__TraceTree *t, int code, const char *msg),
                     void *darg, char *msg, size_t len);
        void *arg;
};
/* The outcome of a forwarded call, as the owner answered (res NULL: code
 * and message). */
void calls_remote_end(struct call *c, const Gadget__Value *res, int code, const char *message);
/* A forwarded call that never reached its node (not a byte of it left:
 * the node refused the connection, the TLS handshake failed, the link
 * ended before it was written): it waits, within its CallTimeout and
 * CallsQueuedMax=, for the gadget's next owner — another node, or this
 * one — and goes there in order; past the bound it is answered busy. One
 * that was sent is ended with calls_remote_end, never sent again. */
void calls_remote_unsent(struct call *c, const char *why);
/* A forwarded call its node said it never read (that node's goodbye
 * before a re-exec): it waits as calls_remote_unsent's, and goes again at
 * once, in order, to the gadget's owner, even on the same lease. */
void calls_remote_unread(struct call *c, const char *why);
/* c's trace id (32 hex digits), for what is told of it (the audit, tail
 * gadgets' events); "" when tracing is off (TraceKeep=0). */
const char *call_trace_id(const struct call *c);
/* c's span (the parent of the next hop's), or NULL when tracing is off. */
const struct trace_ctx *call_trace(const struct call *c);
/* Whether c is a wake (no method): its answer is "ready", not a result. */
bool calls_is_wake(const struct call *c);

/* The owner left: its calls go on (their gadget answers, or times out)
 * but their outcomes go nowhere; its waits for a start (until_ready) end
 * now, through their done. */
void calls_owner_gone(struct call_owner *o);
