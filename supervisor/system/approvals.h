/* approvals: calls that wait for a person's decision (Approve= in a
 * policy). A call that needs one is asked here; it waits, listed for
 * `gadgetctl approvals` and the workshop, until an operator approves or
 * denies it or its ApproveTimeout= passes (denied). Every decision is an
 * audit record naming who decided. "Approve always" keeps a standing rule
 * for that caller, target and method until gadgetd restarts.
 *
 * What a caller can make gadgetd keep here is bounded: the calls waiting
 * count against the caller's own budgets (a binding's CallsMax=, a control
 * client's calls, a gateway connection), APPROVALS_PER_CALLER per caller
 * (per node, for the calls another node forwards, whatever callers it names),
 * so that one caller cannot fill the list for the others, and
 * APPROVALS_MAX in all. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gadget.pb-c.h"

struct event_base;
struct audit;
struct approvals;
struct approval;

#define APPROVALS_MAX 1024        /* calls waiting at once, in all */
#define APPROVALS_PER_CALLER 64   /* of one caller (a gadget, a control user, the workshop) */
#define APPROVALS_ALWAYS_MAX 256  /* standing "always" rules */
/* A call's arguments as JSON: a person is shown all of them, so a call
 * whose arguments are longer is not asked for (GADGET_ELIMIT, saying so):
 * what is approved is never more than what was shown. */
#define APPROVAL_ARGS_MAX 4096

/* The outcome, once: approved, or denied with why (a denial, a timeout). */
typedef void approval_fn(void *arg, bool approved, const char *why);

struct approval_req {
        const char *caller;        /* who asks: a gadget's name, "gadgetctl (uid N)", "workshop" */
        const char *party;         /* whose slots it takes (APPROVALS_PER_CALLER): NULL, the caller;
                                    * "node b" for every call another node forwards */
        const char *via;           /* through what: "binding NAME", "gadgetctl", "gateway" */
        const char *target;        /* the gadget called, or the URL of an http binding's request */
        const char *method;        /* its method, or the HTTP method */
        const char *gadget;        /* whose audit records the decision (also the target's, if a gadget) */
        const Gadget__Value *args; /* shown as JSON (at most APPROVAL_ARGS_MAX), bidi controls
                                    * escaped; may be NULL */
        uint64_t timeout_ms;       /* ApproveTimeout= */
        approval_fn *decided;
        void *arg;
};

/* One waiting call, as listed. */
struct approval_info {
        uint64_t id;
        const char *caller, *via, *target, *method, *args;
        uint64_t age_ms, timeout_ms;
};

/* no_approver (may be NULL): no one can decide here (gadgetd run), and
 * every call asked for is denied at once with it as the reason. */
int approvals_new(struct event_base *base, struct audit *audit, const char *no_approver, struct approvals **out);
/* Denies every waiting call ("gadgetd is stopping") and frees a. */
void approvals_free(struct approvals *a);

/* Asks for q. 0: the call waits, *out (may be NULL) is its handle, and
 * q->decided gets the outcome once (unless cancelled). 1: a standing
 * "always" rule approves it now (decided is not called). Else a GADGET_E*
 * code with msg (too many waiting, arguments longer than a person is
 * shown). The strings are copied. */
int approvals_ask(struct approvals *a, const struct approval_req *q, struct approval **out, char *msg, size_t len);
/* The caller left: the call stops waiting (no decision is recorded) and
 * decided is called now, denied, so that its caller frees what it keeps. */
void approval_cancel(struct approval *ap);
/* An operator's decision on call id; who names them ("gadgetctl (uid 0)",
 * "the workshop"). always (with approve) keeps a standing rule. 0, or
 * GADGET_ENOTFOUND with msg when id is not waiting, or GADGET_EDENIED
 * when who asked for the call itself, unless own_ok (a control-group
 * member approves no call of its own; root, the host's owner, may). */
int approvals_decide(struct approvals *a, uint64_t id, bool approve, bool always, const char *who, bool own_ok,
                     char *msg, size_t len);
/* The waiting calls, oldest first: up to max into out (valid until the
 * loop runs again). Their number in all. */
size_t approvals_list(const struct approvals *a, struct approval_info *out, size_t max);
