/* peer: gadgetd's connection to one worker over its RPC socket, on the
 * libevent loop. Over a conn (system/conn.h, the framing), it validates and
 * dispatches every message from the worker (a table per message kind and
 * state) and matches call results to the calls gadgetd made. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/event.h>

#include "gadget.pb-c.h"
#include "traceparent.h"

struct policy;
struct type_sig;
struct peer;

enum peer_state {
        PEER_AWAIT_HELLO = 1,
        PEER_READY = 2,
        PEER_CLOSED = 4,   /* ended by EOF or by a protocol violation */
};

struct peer_handlers {
        void (*hello)(struct peer *p, void *data);
        /* A validated binding call; answer it with peer_binding_reply. */
        void (*binding_call)(struct peer *p, const Gadget__BindingCall *bc, void *data);
        void (*log)(struct peer *p, const Gadget__Log *l, void *data);
        /* A frame on the link, while it is watched (peer_watch): in, one
         * of the worker's (w: validated, before its handler), else one
         * gadgetd sent (s); bytes, its encoded size. Nothing of w or s
         * outlives the call. On every frame's path: it must not wait. */
        void (*frame)(struct peer *p, bool in, const Gadget__WorkerMsg *w, const Gadget__SupervisorMsg *s,
                      size_t bytes, void *data);
        /* The connection ended: why is NULL at a clean end of file, else the
         * protocol violation (already logged). Nothing is read after this. */
        void (*closed)(struct peer *p, const char *why, void *data);
        /* Optional: its input began to wait for a budget a second, which
         * (enum peer_budget). */
        void (*waited)(struct peer *p, int which, void *data);
};

/* The budgets a second a worker's input waits for. */
enum peer_budget { PEER_BUDGET_VALUES, PEER_BUDGET_BYTES, PEER_BUDGETS_N };


struct peer *peer_new(struct event_base *base, int fd, const struct policy *policy,
                      const struct peer_handlers *h, void *data);
/* Fails every call still pending with gone, closes the fd, frees. */
void peer_free(struct peer *p, const char *gone);
enum peer_state peer_state(const struct peer *p);
/* Whether the gadget has method; *sig is its signature (NULL: untyped). */
bool peer_method(const struct peer *p, const char *method, const struct type_sig **sig);
/* How many of its methods it declared without a signature. */
size_t peer_untyped(const struct peer *p);
size_t peer_pending(const struct peer *p);
/* Whether its link holds input not handled yet (conn_unread). */
bool peer_unread(const struct peer *p);
/* Milliseconds since the gadget last made progress on its calls: since
 * the last result that came (for any call, even one timed out), or since
 * a call was sent while it had none — whichever is later. */
uint64_t peer_stalled_ms(const struct peer *p);
/* The methods the gadget announced; returns their number. */
size_t peer_methods(const struct peer *p, char ***methods);
/* Their signatures' canonical texts, in the same order ("" for untyped). */
size_t peer_signatures(const struct peer *p, char ***texts);
/* Bytes of the worker read and not handled yet (0: at a frame boundary). */
size_t peer_buffered(const struct peer *p);
/* The RPC socket's fd, which a re-exec hands on (gadgetctl daemon-reexec). */
int peer_fd(const struct peer *p);
/* A worker that said hello to the gadgetd image before a re-exec
 * (gadgetctl daemon-reexec): its n methods and their signatures' texts
 * ("" for untyped), as that image kept them; the peer is ready at once,
 * without a new hello (none comes). 0, or -EPROTO with why for a
 * signature that does not parse, -ENOMEM. */
int peer_adopt(struct peer *p, char *const *methods, char *const *sig_texts, size_t n, char *why, size_t len);

/* Where a gadget-to-gadget call comes from: the gadgets waiting on it (the
 * caller and all that wait on the caller: what a call must not reach again)
 * and its depth (the gadgets on its longest path, the caller included). */
struct peer_chain {
        char **names;
        size_t n;
        unsigned depth;
};
/* Copies from (NULL: an empty chain) into to, its names duplicated: 0,
 * or -ENOMEM with to left empty. */
int peer_chain_copy(struct peer_chain *to, const struct peer_chain *from);
/* Frees a chain's names; it is empty after (an empty one stays so). */
void peer_chain_clear(struct peer_chain *chain);

/* One call in flight to the gadget. It lives in the caller's record of the
 * call (core/calls.c): the peer links it while the result is awaited, and
 * calls done once — res NULL when the gadget went away first, gone saying
 * why — after unlinking it. */
struct peer_call {
        uint64_t id;
        struct peer_chain chain;    /* where it came from (names copied, the peer's) */
        struct trace_ctx trace;     /* its span (the caller's to set; zero: none) */
        void (*done)(struct peer_call *pc, const Gadget__CallResult *res, const char *gone);
        TAILQ_ENTRY(peer_call) link;    /* in the peer's calls in flight */
        struct peer *on;                /* the peer it is linked on; NULL when not (pc starts zeroed) */
};

/* Sends a call; chain may be NULL (a call from outside). args and chain are
 * borrowed; pc->done must be set. deadline_us (CLOCK_MONOTONIC; 0: none):
 * from then on its caller may have been answered, and the gadget does not
 * start it after that (Call.deadline_us). 0 with pc->id set and pc linked,
 * or -ENOBUFS when the gadget's queue is full, -ENOTCONN if it is not
 * ready, -errno (pc not linked). */
int peer_call(struct peer *p, struct peer_call *pc, const char *method, const Gadget__Value *args,
              const struct peer_chain *chain, uint64_t deadline_us);
/* Calls fn with the chain of every call in flight to the gadget. */
void peer_each_chain(const struct peer *p, void (*fn)(void *arg, const struct peer_chain *chain), void *arg);
/* The span of the call the gadget serves now: the oldest in flight
 * (libgadget serves calls one at a time, in order), or NULL (none, or it
 * has no span). Its binding calls are that span's children. */
const struct trace_ctx *peer_current_trace(const struct peer *p);
/* Unlinks a pending call (its timeout fired) without calling done; a late
 * result is dropped. */
void peer_forget(struct peer *p, struct peer_call *pc);
/* Answers a binding call: value (borrowed) or code and message. */
int peer_binding_reply(struct peer *p, uint64_t id, const Gadget__Value *value, int code,
                       const char *message);
int peer_shutdown(struct peer *p);
/* Holds the worker's input (hold true): nothing more of it is read or
 * handled until it is released, so its writes wait; the budget of its log
 * holds it this way. Released, the frames already read come first. */
void peer_hold(struct peer *p, bool hold);
/* Whether each frame is told to handlers->frame (gadgetctl trace NAME).
 * Unwatched, a frame costs one test of a flag. */
void peer_watch(struct peer *p, bool on);
/* The gadget's policy was replaced (a reload) while this worker still
 * runs: its messages are judged by policy from now on. */
void peer_set_policy(struct peer *p, const struct policy *policy);
