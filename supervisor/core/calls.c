/* calls: the one door for calling a gadget's method (calls.h). */
#include "calls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "contract.h"
#include "core_int.h"
#include "limits/limiter.h"
#include "peer.h"
#include "policy.h"
#include "unit.h"

#define CALL_CLOCK_SLACK_MS 20   /* libevent's coarse clock against CLOCK_MONOTONIC */

/* One call in flight: whom to tell, and its CallTimeout. */
struct call {
        struct unit *u;
        uint64_t id;
        call_fn cb;
        void *cbdata;
        struct event *timer;
};

static void call_free(struct call *c)
{
        event_free(c->timer);
        free(c);
}

static void call_result(void *arg, const Gadget__CallResult *res, const char *gone)
{
        struct call *c = arg;
        if (!res)
                c->cb(c->cbdata, NULL, GADGET_EGONE, gone);
        else if (res->outcome_case == GADGET__CALL_RESULT__OUTCOME_VALUE)
                c->cb(c->cbdata, res->value, 0, NULL);
        else
                c->cb(c->cbdata, NULL, res->error->code ? (int)res->error->code : GADGET_EFAILED,
                      res->error->message);
        call_free(c);
}

/* CallTimeout: the call fails with a timeout error. The gadget is
 * killed (then Restart= applies) only when it is stuck — no result for any call (even a late
 * one) for CallTimeout — not when it is merely behind: a caller that
 * queues more calls than it can answer in time must not get a healthy
 * gadget restarted. */
static void call_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct call *c = arg;
        struct unit *u = c->u;
        uint64_t limit = u->policy->call_timeout_ms;
        char msg[128];
        snprintf(msg, sizeof msg, "no answer within CallTimeout (%llu ms)", (unsigned long long)limit);
        /* Why this is safe: a gadget that answers nothing is still ended
         * after CallTimeout, since its clock starts with the first call it
         * got while it had none; only results move it on. */
        uint64_t stalled = u->peer ? peer_stalled_ms(u->peer) : limit;
        if (u->peer)
                peer_forget(u->peer, c->id);
        c->cb(c->cbdata, NULL, GADGET_ETIMEOUT, msg);
        call_free(c);
        /* The timer and the clock may disagree by a tick. */
        if (stalled + CALL_CLOCK_SLACK_MS >= limit) {
                limiter_record(u->core->audit, u->policy->name, "CallTimeout", "%s; no call answered for %llu ms: "
                               "killed", msg, (unsigned long long)stalled);
                unit_kill(u, "timeout");
        } else {
                limiter_record(u->core->audit, u->policy->name, "CallTimeout", "%s; not restarted: a call was "
                               "answered %llu ms ago", msg, (unsigned long long)stalled);
        }
}

int calls_start(struct unit *u, const char *method, const Gadget__Value *args, const struct peer_chain *chain,
                call_fn cb, void *cbdata, char *msg, size_t len)
{
        const char *name = u->policy->name;
        if (u->state != UNIT_READY || !u->peer) {
                snprintf(msg, len, "gadget \"%s\" is not ready (%s%s%.200s)", name, unit_state_name(u->state),
                         u->cause[0] ? ": " : "", u->cause);
                return GADGET_EUNAVAILABLE;
        }
        if (!peer_has_method(u->peer, method)) {
                snprintf(msg, len, "gadget \"%s\" has no method \"%.64s\"", name, method);
                return GADGET_ENOMETHOD;
        }
        struct call *c = calloc(1, sizeof *c);
        if (!c) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        *c = (struct call){ .u = u, .cb = cb, .cbdata = cbdata };
        c->timer = evtimer_new(u->core->base, call_timeout, c);
        int e = c->timer ? peer_call(u->peer, method, args, chain, call_result, c, &c->id) : -ENOMEM;
        if (e < 0) {
                if (c->timer)
                        event_free(c->timer);
                free(c);
                if (e == -ENOBUFS) {
                        snprintf(msg, len, "gadget \"%s\" is busy: too many calls queued", name);
                        return GADGET_EBUSY;
                }
                if (e == -EMSGSIZE || e == -E2BIG) {
                        snprintf(msg, len, "the arguments are too large for the gadget protocol");
                        return GADGET_ELIMIT;
                }
                snprintf(msg, len, "cannot call gadget \"%s\": %s", name, strerror(-e));
                return e == -ENOTCONN ? GADGET_EUNAVAILABLE : GADGET_EINTERNAL;
        }
        struct timeval tv = { .tv_sec = (time_t)(u->policy->call_timeout_ms / 1000),
                              .tv_usec = (suseconds_t)(u->policy->call_timeout_ms % 1000) * 1000 };
        event_add(c->timer, &tv);
        u->calls++;
        return 0;
}
