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

#include "gadget.pb-c.h"

struct unit;
struct peer_chain;
struct call;

/* The outcome of a call: res NULL means it failed with code/message. tag
 * is the caller's, as given. */
typedef void (*call_fn)(void *cbdata, uint64_t tag, const Gadget__Value *res, int code, const char *message);

/* The calls in flight of a caller that may leave before they end (a
 * control client): zeroed to start, calls_owner_gone when it leaves. */
struct call_owner {
        struct call *calls;
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
        bool admin;     /* from the gatekeeper's admin UI: its AdminMethods= only */
        bool approved;  /* a person approved it already (a binding asked) */
};

/* Calls q->method of u. 0 when the call is on its way: done gets its
 * outcome once (unless its owner left). Else a GADGET_E* code, with msg
 * saying why in words for the caller (not ready, no such method, busy,
 * too large, an admin method), and done is never called. A method in the
 * gadget's Approve= first waits for a person's approval (unless
 * q->approved or q->admin): done then says denied, or the call's own
 * outcome. */
int calls_start(struct unit *u, const struct call_req *q, char *msg, size_t len);
/* The owner left: its calls go on (their gadget answers, or times out)
 * but their outcomes go nowhere. */
void calls_owner_gone(struct call_owner *o);
