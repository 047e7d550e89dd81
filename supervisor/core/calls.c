/* calls: the one door for calling a gadget's method (calls.h). */
#include "calls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "contract.h"
#include "call_log.h"
#include "core_int.h"
#include "limits/limiter.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/ratelog.h"
#include "system/trace.h"
#include "types.h"
#include "value.h"
#include "wire.h"
#include "system/approvals.h"
#include "link/peer.h"
#include "policy.h"
#include "unit.h"

#define CALL_CLOCK_SLACK_MS 20   /* libevent's coarse clock against CLOCK_MONOTONIC */
/* A forwarded call's own deadline is the owner's plus this: the owner's
 * timeout answer (or its link's failure) comes first. */
#define CALL_REMOTE_SLACK_MS 1000
/* A forwarded call sent again goes only with at least this much of its
 * caller's wait left for the owner (else it is answered, not sent). */
#define CALL_REMOTE_MIN_MS 100
/* The arguments that calls waiting for a gadget's start may hold, all
 * together: what the worker link lets wait unsent for a running one. */
#define CALLS_PENDING_BYTES_MAX (4u * WIRE_MAX_FRAME)

/* One call in flight: the peer's link, whom to tell, its CallTimeout. */
struct call {
        struct peer_call pc;        /* first: the peer hands it back */
        struct unit *u;
        struct unit_run *run;       /* the process it was sent to (a restart may replace it meanwhile) */
        call_fn done;               /* NULL once its owner left */
        void *cbdata;
        uint64_t tag;
        const struct type_sig *sig;  /* the method's (the peer's, which outlives the call), or NULL */
        struct event *timer;
        struct call_owner *owner;
        LIST_ENTRY(call) owner_link;
        /* While it waits for a person's approval (u->waiting): */
        struct approval *ap;
        char *method;
        Gadget__Value *args;
        bool unit_gone;
        LIST_ENTRY(call) wait_link;  /* le_prev NULL: not waiting */
        /* Forwarded to the node that runs u (u->forwarded): */
        void *remote;
        LIST_ENTRY(call) fwd_link;   /* le_prev NULL: not forwarded */
        char *caller, *via;          /* what the owner is told of it (a forwarded call) */
        int64_t fwd_epoch;           /* the owner's lease epoch it was sent to */
        bool unsent;                 /* for another node, never sent there: waits for one (u->pending) */
        /* Waiting for u's start (u->pending, in order), until deadline: */
        struct peer_chain chain;
        bool has_chain;             /* a gadget's call (chain may be empty) */
        size_t pend_bytes;          /* its arguments' size, counted in u->pending_bytes */
        bool admin;
        bool wake;                  /* gadgetctl wake: no method, answered once the gadget is ready */
        uint64_t ready_ms;          /* a wait for a start under way (load, restart): its bound, else 0 */
        uint64_t deadline_ms;
        uint64_t left_ms;           /* another node's call: what was left of its caller's wait (0: none) */
        uint64_t gadget_deadline_us; /* sent to its gadget: not started after this (monotime_us) */
        TAILQ_ENTRY(call) pend_link; /* tqe_prev NULL: not waiting for a start */
        const void *party;          /* whose start slots a start for it takes (its caller's record) */
        /* Its span (the trace's context in c->pc.trace): */
        bool traced;
        uint8_t parent_id[TRACE_SPAN_ID_LEN];
        uint64_t start_ns;
        char trace_hex[2 * TRACE_ID_LEN + 1];
        char peer[64];               /* the node it came from, or was forwarded to */
        /* What its listeners are told at its end (unit_events.h's called): */
        char name[GADGET_NAME_MAX + 1]; /* its method, for its span and its listeners */
        bool untold;                /* its listeners are not told (call_req.untailed) */
        uint64_t begin_us;
        bool elsewhere;             /* its outcome came from (or was lost on) another node, which tells its own */
        bool from_node;             /* it came from another node (call_req's peer_node) */
        bool sent_out;              /* it was forwarded to another node (then maybe ended here) */
        /* A local user's call (call_req's audit_uid) is audited at its end: */
        char audit_by[32];          /* its via (cut to fit), or "": not audited; a copy, not a malloc, on the call's path */
        uint32_t audit_uid;
        int stat_row;               /* its method's row in u->stats once sent (declared), else -1 */
        /* Room for its timer (event_get_struct_event_size() bytes): timer
         * points here once set, so a call costs no malloc for it. */
        _Alignas(16) unsigned char timer_room[];
};

/* A call with room for its timer, zeroed. */
static struct call *call_alloc(void)
{
        return calloc(1, sizeof(struct call) + event_get_struct_event_size());
}

/* c's timer, set to run cb (not armed): in the call's own room. NULL on
 * failure. Why this is safe: a timer set before is taken off the loop
 * first, and the room is freed with the call, after timer_drop. */
static struct event *timer_set(struct call *c, event_callback_fn cb)
{
        struct event *ev = (struct event *)c->timer_room;
        if (c->timer)
                event_del(c->timer);
        c->timer = NULL;
        if (event_assign(ev, c->u->core->base, -1, 0, cb, c) < 0)
                return NULL;
        return c->timer = ev;
}

/* c's timer taken off the loop, if set. */
static void timer_drop(struct call *c)
{
        if (c->timer)
                event_del(c->timer);
        c->timer = NULL;
}

static void owner_unlink(struct call *c)
{
        if (!c->owner)
                return;
        LIST_REMOVE(c, owner_link);
        c->owner = NULL;
}

static void wait_unlink(struct call *c)
{
        if (!c->wait_link.le_prev)
                return;
        LIST_REMOVE(c, wait_link);
        c->wait_link.le_prev = NULL;
}

static void fwd_unlink(struct call *c)
{
        if (!c->fwd_link.le_prev)
                return;
        LIST_REMOVE(c, fwd_link);
        c->fwd_link.le_prev = NULL;
}

static void pend_unlink(struct call *c)
{
        if (!c->pend_link.tqe_prev)
                return;
        struct unit *u = c->u;
        TAILQ_REMOVE(&u->pending, c, pend_link);
        c->pend_link.tqe_prev = NULL;
        if (!c->ready_ms)
                u->n_pending--;
        u->pending_bytes -= c->pend_bytes;
}

/* Frees a call that is linked nowhere. */
static void call_free(struct call *c)
{
        timer_drop(c);
        free(c->method);
        free(c->caller);
        free(c->via);
        value_free(c->args);
        peer_chain_clear(&c->chain);
        free(c);
}

/* c's span begins: under q->trace, or a new trace. */
static void span_begin(struct call *c, const struct call_req *q)
{
        struct traces *t = c->u->core->cfg.traces;
        if (!traces_on(t) || c->wake)
                return;
        trace_begin(t, q->trace, &c->pc.trace);
        if (q->trace)
                memcpy(c->parent_id, q->trace->span_id, TRACE_SPAN_ID_LEN);
        if (q->peer_node)
                trace_copy(c->peer, sizeof c->peer, q->peer_node);
        c->start_ns = traces_wall_ns(t, c->begin_us * 1000);
        c->traced = true;
}

/* c's span ends with code (0: ok), us after it began. */
static void span_end(struct call *c, int code, uint64_t us)
{
        if (!c->traced)
                return;
        struct traces *t = c->u->core->cfg.traces;
        struct span *s = traces_next(t, &c->pc.trace);
        memcpy(s->parent_id, c->parent_id, TRACE_SPAN_ID_LEN);
        s->kind = SPAN_CALL;
        s->start_ns = c->start_ns;
        s->duration_ns = us * 1000;
        trace_copy(s->gadget, sizeof s->gadget, c->u->policy->name);
        trace_copy(s->name, sizeof c->name, c->name);  /* the smaller: name holds it */
        trace_copy(s->node, sizeof s->node, traces_node(t));
        trace_copy(s->peer, sizeof s->peer, c->peer);
        trace_copy(s->outcome, sizeof s->outcome, code ? gadget_error_name(code) : "ok");
}

const char *call_trace_id(const struct call *c)
{
        /* Written at the first asking: most calls are never asked. */
        struct call *w = (struct call *)c;
        if (c->traced && !c->trace_hex[0])
                trace_hex(c->pc.trace.trace_id, TRACE_ID_LEN, w->trace_hex);
        return c->trace_hex;
}

const struct trace_ctx *call_trace(const struct call *c)
{
        return c->traced ? &c->pc.trace : NULL;
}

/* Tells the unit's listeners (a tail) that c ended with code, us after it began. */
static void call_told(const struct call *c, int code, uint64_t us)
{
        if (c->untold || !c->name[0] || c->elsewhere)
                return;
        const struct unit_call_event e = {
                .method = c->name, .code = code, .duration_us = us,
                .trace = call_trace(c),
        };
        unit_events_called(c->u, &e);
}

/* The audit record of a local user's call (call_req's audit_uid): its
 * outcome, naming the caller's uid; now_ms: the clock as the call ended,
 * or 0 (read by audit_write). */
static void audit_local(struct unit *u, const char *by, const char *method, uint32_t uid, uint64_t us,
                        uint64_t now_ms, const char *trace, int code, const char *message)
{
        char op[GADGET_NAME_MAX + 8] = "call ";  /* a copy, not a printf: on every audited call's path */
        size_t n = strnlen(method, GADGET_NAME_MAX);
        memcpy(op + 5, method, n);
        op[5 + n] = '\0';
        struct audit_record rec = { .gadget = u->policy->name, .binding = by, .op = op,
                                    .outcome = audit_outcome_of(code), .duration_us = us,
                                    .detail = code ? message : NULL, .has_uid = true, .uid = uid,
                                    .trace = trace && *trace ? trace : NULL, .now_ms = now_ms };
        audit_write(u->core->audit, &rec);
}

/* Its line of u's call log (call_log.h), under its counters' label. */
static void log_call(struct unit *u, int row, int code, uint64_t us, uint64_t end_ms, const uint8_t *trace)
{
        const char *label = row >= 0 && (size_t)row < u->stats.n_methods ? u->stats.methods[row].name
                                                                           : UNIT_STATS_OTHER;
        call_log_add(&u->recent, label, code, us, end_ms, trace);
}

/* Tells the caller (if it is still there) and frees the call. */
static void call_end(struct call *c, const Gadget__Value *res, int code, const char *message)
{
        uint64_t now_us = monotime_turn_us(), us = now_us - c->begin_us;
        span_end(c, code, us);
        call_told(c, code, us);
        if (c->audit_by[0])
                audit_local(c->u, c->audit_by, c->name, c->audit_uid, us, now_us / 1000, call_trace_id(c),
                            res ? 0 : code, message ? message : "the call failed");
        owner_unlink(c);
        wait_unlink(c);
        fwd_unlink(c);
        pend_unlink(c);
        unit_active(c->u, now_us / 1000);  /* one clock reading a call's end */
        if (c->from_node || c->sent_out)
                c->u->core->forwarded.calls[c->sent_out][unit_stats_outcome_of(res ? 0 : code)]++;
        if (c->run)
                unit_rollout_answered(c->u, c->run, res ? 0 : code);
        if (!c->wake) {
                /* Never sent (it waited and timed out, or failed): its
                 * method counts as an undeclared one. */
                if (c->stat_row < 0)
                        c->stat_row = unit_stats_row(&c->u->stats, NULL, false);
                unit_stats_call(&c->u->stats, c->stat_row, res ? 0 : code, us);
                log_call(c->u, c->stat_row, res ? 0 : code, us, (c->begin_us + us) / 1000,
                         c->traced ? c->pc.trace.trace_id : NULL);
        }
        if (c->done)
                c->done(c->cbdata, c->tag, res, code, message);
        call_free(c);
}

/* A result that breaks the method's declared type: an error to the
 * caller, a warning in gadgetd's log (one line per window, with a count)
 * and an audit record for the gadget. */
static void broken_result(struct call *c, const char *why)
{
        struct unit *u = c->u;
        char msg[600];
        snprintf(msg, sizeof msg, "%s: %s (the result breaks the method's declared signature)",
                 types_sig_name(c->sig), why);
        ratelog_warn(&u->broken_log, monotime_ms(), u->policy->name, "results broke their signatures", "%s", msg);
        struct audit_record rec = { .gadget = u->policy->name, .binding = "signature",
                                    .op = types_sig_name(c->sig), .outcome = AUDIT_ERROR, .detail = msg };
        audit_write(u->core->audit, &rec);
        call_end(c, NULL, GADGET_EFAILED, msg);
}

static void call_result(struct peer_call *pc, const Gadget__CallResult *res, const char *gone)
{
        struct call *c = (struct call *)pc;
        char why[400];
        if (!res)
                call_end(c, NULL, GADGET_EGONE, gone);
        else if (res->outcome_case == GADGET__CALL_RESULT__OUTCOME_VALUE && c->sig &&
                 types_check_result(c->sig, res->value, why, sizeof why) < 0)
                broken_result(c, why);
        else if (res->outcome_case == GADGET__CALL_RESULT__OUTCOME_VALUE)
                call_end(c, res->value, 0, NULL);
        else
                call_end(c, NULL, res->error->code ? (int)res->error->code : GADGET_EFAILED, res->error->message);
}

void calls_owner_gone(struct call_owner *o)
{
        struct call *c;
        while ((c = LIST_FIRST(&o->calls))) {
                /* A wait for a start (gadgetctl load, start, restart) is
                 * no call: it ends with its caller, now. */
                if (c->ready_ms) {
                        call_end(c, NULL, GADGET_EGONE, "the caller is gone");
                        continue;
                }
                LIST_REMOVE(c, owner_link);
                c->done = NULL;
                c->owner = NULL;
                /* A call still waiting for approval is asked no more (and freed). */
                if (c->ap)
                        approval_cancel(c->ap);
        }
}

void calls_unit_gone(struct unit *u)
{
        struct call *c;
        while ((c = LIST_FIRST(&u->waiting))) {
                c->unit_gone = true;
                approval_cancel(c->ap);
        }
        char msg[200];
        snprintf(msg, sizeof msg, "gadget \"%s\" was unloaded on this node", u->policy->name);
        while ((c = TAILQ_FIRST(&u->pending)))
                call_end(c, NULL, GADGET_EGONE, msg);
        while ((c = LIST_FIRST(&u->forwarded))) {
                const struct core_remote *r = &u->core->remote;
                r->cancel(r->arg, c->remote, false);
                call_end(c, NULL, GADGET_EGONE, msg);
        }
}

void calls_remote_end(struct call *c, const Gadget__Value *res, int code, const char *message)
{
        c->remote = NULL;
        c->elsewhere = true;
        call_end(c, res, code, message);
}

bool calls_is_wake(const struct call *c)
{
        return c->wake;
}

/* The bound of c's wait here: CallTimeout, or less if its caller (on
 * another node) has less left. */
static uint64_t call_limit_ms(const struct call *c)
{
        uint64_t ms = c->u->policy->call_timeout_ms;
        return c->left_ms && c->left_ms < ms ? c->left_ms : ms;
}

/* A forwarded call unanswered for its CallTimeout (plus ApproveTimeout if
 * its method waits for approval there) fails here; the owner ends its own
 * part, and a late answer is dropped. It was sent, so it may have run
 * there: the caller is told so (docs/cluster.md's consistency model). */
static void remote_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct call *c = arg;
        const struct core_remote *r = &c->u->core->remote;
        char msg[200];
        snprintf(msg, sizeof msg, "no answer from node %.64s within CallTimeout (%llu ms); it may have run there",
                 c->u->owner, (unsigned long long)c->u->policy->call_timeout_ms);
        r->cancel(r->arg, c->remote, true);
        c->elsewhere = true;
        call_end(c, NULL, GADGET_ETIMEOUT, msg);
}

/* Keeps what the owner is told of c (who calls, through what), to send
 * it later: 0, or -ENOMEM with msg. */
static int call_keep(struct call *c, const struct call_req *q, char *msg, size_t len)
{
        if ((q->caller && !c->caller && !(c->caller = strdup(q->caller))) || (q->via && !c->via && !(c->via = strdup(q->via)))) {
                snprintf(msg, len, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

/* Sends c to the node that runs u: 0, or a GADGET_E* code with msg. It
 * keeps a copy of the call until it ends: one that never reached its
 * node is sent again to the next (calls_remote_unsent). */
static int call_forward(struct call *c, const struct call_req *q, char *msg, size_t len)
{
        struct unit *u = c->u;
        const struct core_remote *r = &u->core->remote;
        uint64_t ms = u->policy->call_timeout_ms + CALL_REMOTE_SLACK_MS;
        /* The owner asks its own person, whatever was approved here. */
        if (q->method && policy_listed(u->policy->approve, q->method))
                ms += u->policy->approve_timeout_ms;
        uint64_t now = monotime_ms();
        bool again = c->deadline_ms != 0;
        if (!again)
                c->deadline_ms = now + (c->left_ms && c->left_ms < ms ? c->left_ms : ms);
        ms = c->deadline_ms > now ? c->deadline_ms - now : 1; /* sent again: what is left of it */
        /* Sent again with too little left for the owner to run it in: not
         * sent at all, so that it cannot start there as its caller's wait
         * ends (and run just after the caller was answered). */
        if (again && ms < CALL_REMOTE_SLACK_MS + CALL_REMOTE_MIN_MS) {
                snprintf(msg, len, "no answer within CallTimeout (%llu ms): too little of it was left to send the call "
                         "to node %.64s, which did not run it", (unsigned long long)u->policy->call_timeout_ms,
                         u->owner);
                return GADGET_ETIMEOUT;
        }
        /* The caller's deadline travels with the call: the owner's wait is
         * what is left of it, less the slack its answer needs to come
         * back, so that a call sent again late never runs there for a
         * whole CallTimeout after its caller gave up. */
        struct call_req fq = *q;
        fq.left_ms = ms > CALL_REMOTE_SLACK_MS ? ms - CALL_REMOTE_SLACK_MS : 1;
        q = &fq;
        if ((q->method && !c->method && !(c->method = strdup(q->method))) ||
            (q->args && !c->args && !(c->args = value_dup(q->args))) ||
            (q->chain && !c->has_chain && peer_chain_copy(&c->chain, q->chain) < 0) || call_keep(c, q, msg, len) < 0 ||
            (!c->timer && !timer_set(c, remote_timeout))) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        c->has_chain = q->chain != NULL;
        c->fwd_epoch = u->owner_epoch;
        if (c->traced)
                trace_copy(c->peer, sizeof c->peer, u->owner);
        int code = r->call(r->arg, c, u->owner, u->policy->name, q, &c->remote, msg, len);
        if (code)
                return code;
        timer_arm_ms(c->timer, ms);
        c->sent_out = true;
        LIST_INSERT_HEAD(&u->forwarded, c, fwd_link);
        u->calls++;
        return 0;
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
        char msg[160];
        uint64_t now_us = monotime_us();
        if (now_us < c->gadget_deadline_us) { /* early: the gadget may still start it */
                timer_arm_ms(c->timer, (c->gadget_deadline_us - now_us + 999) / 1000);
                return;
        }
        /* The gadget had the call: it may have run, and the caller is told
         * so (docs/cluster.md, what a caller may see). */
        if (call_limit_ms(c) < limit)
                snprintf(msg, sizeof msg, "no answer within what was left of its caller's wait (%llu ms); it may "
                         "have run", (unsigned long long)call_limit_ms(c));
        else
                snprintf(msg, sizeof msg, "no answer within CallTimeout (%llu ms); it may have run",
                         (unsigned long long)limit);
        /* Why this is safe: a gadget that answers nothing is still ended
         * after CallTimeout, since its clock starts with the first call it
         * got while it had none; only results move it on. */
        /* Its process: the one that serves, or the old one a restart
         * drains (which still has it: its end would have ended c). */
        struct unit_run *r = c->run == u->run || c->run == u->old_run || (c->run && c->run == u->next_run) ? c->run
                                                                                                       : u->run;
        uint64_t stalled = r->peer ? peer_stalled_ms(r->peer) : limit;
        if (r->peer)
                peer_forget(r->peer, &c->pc);
        call_end(c, NULL, GADGET_ETIMEOUT, msg);
        /* The timer and the clock may disagree by a tick. */
        if (stalled + CALL_CLOCK_SLACK_MS >= limit) {
                limiter_record(u->core->audit, u->policy->name, "CallTimeout", "%s; no call answered for %llu ms: "
                               "killed", msg, (unsigned long long)stalled);
                unit_run_kill(r, "timeout");
        } else {
                limiter_record(u->core->audit, u->policy->name, "CallTimeout", "%s; not restarted: a call was "
                               "answered %llu ms ago", msg, (unsigned long long)stalled);
        }
}

/* Whether u is on its way to ready by a start already asked (a load, a
 * restart, a reload's restart, Restart= and its delay): calls to it wait
 * for its hello, as a wait with until_ready joins it. */
static bool start_under_way(const struct unit *u)
{
        return (u->state == UNIT_STARTING && !u->waking) || (u->state == UNIT_STOPPING && u->restart_pending);
}

bool calls_wait_for_start(const struct unit *u)
{
        return unit_wakeable(u) || start_under_way(u);
}

/* What refuses a call before it is made: an admin method called from
 * elsewhere than the admin UI (or the other way round), a gadget not
 * ready, no such method, arguments that break its signature. */
static int call_check(struct unit *u, const char *method, const Gadget__Value *args, bool admin,
                      const struct type_sig **sig, char *msg, size_t len)
{
        const char *name = u->policy->name;
        bool admin_method = policy_admin_method(u->policy, method);
        if (admin_method != admin) {
                if (admin_method)
                        snprintf(msg, len, "%s is an admin method of gatekeeper \"%s\": only its admin UI may call it",
                                 method, name);
                else
                        snprintf(msg, len, "the admin UI of \"%s\" may call only its admin methods (AdminMethods=), "
                                 "not %.64s", name, method);
                return GADGET_EDENIED;
        }
        if (u->state == UNIT_REMOTE) {
                if (u->core->remote.call)
                        return 0; /* forwarded (its node checks the rest), or waits for a node */
                if (u->owner[0])
                        snprintf(msg, len, "gadget %s runs on node %s, and this node has no link to other nodes "
                                 "(PeerCertificate=)", name, u->owner);
                else
                        snprintf(msg, len, "gadget %s does not run on this node (%.200s)", name, u->cause);
                return GADGET_EUNAVAILABLE;
        }
        if ((u->state == UNIT_READY && !unit_runs_here(u)) || unit_lease_expired(u)) {
                /* Its store lease is gone (its process killed, not reaped
                 * yet, still "ready"), or this node's may have expired
                 * (ended at the loop's next turn): nothing more reaches it
                 * here, not even a call that would find it dead, and no
                 * start for one. */
                snprintf(msg, len, "gadget \"%s\" lost its lease in the store (call again: it runs on another node "
                         "then)", name);
                return GADGET_EUNAVAILABLE;
        }
        if (u->state != UNIT_READY || !u->run->peer) {
                /* Why this is safe: a call that waits is bounded as an idle
                 * gadget's first calls are (CallsQueuedMax=, the pending
                 * bytes, its CallTimeout); one to a gadget stopped or failed
                 * for good is refused now, with the cause. */
                if (calls_wait_for_start(u))
                        return 0; /* it waits for the start: the rest is checked then */
                snprintf(msg, len, "gadget \"%s\" is not ready (%s%s%.200s)", name, unit_state_name(u->state),
                         u->cause[0] ? ": " : "", u->cause);
                return GADGET_EUNAVAILABLE;
        }
        if (!peer_method(u->run->peer, method, sig)) {
                snprintf(msg, len, "gadget \"%s\" has no method \"%.64s\"", name, method);
                return GADGET_ENOMETHOD;
        }
        /* A call that breaks the signature never reaches the gadget. */
        char why[400];
        if (*sig && types_check_args(*sig, args, why, sizeof why) < 0) {
                snprintf(msg, len, "%.64s: %s", method, why);
                return GADGET_EINVAL;
        }
        return 0;
}

/* Sends c to its gadget with its CallTimeout: 0, or a GADGET_E* code with
 * msg (c is the caller's to free). */
static int call_send(struct call *c, const char *method, const Gadget__Value *args, const struct peer_chain *chain,
                     uint64_t timeout_ms, char *msg, size_t len)
{
        struct unit *u = c->u;
        const char *name = u->policy->name;
        /* A staged rollout: the call tree's share decides the process. */
        struct unit_run *r = unit_rollout_route(u, c->traced ? &c->pc.trace : NULL);
        if (r != u->run && method) {
                /* Checked again against the new version's own methods. */
                const struct type_sig *sig = NULL;
                char why[400];
                if (!peer_method(r->peer, method, &sig)) {
                        snprintf(msg, len, "gadget \"%s\" has no method \"%.64s\" in the version its rollout "
                                 "gave this call", name, method);
                        return GADGET_ENOMETHOD;
                }
                if (sig && types_check_args(sig, args, why, sizeof why) < 0) {
                        snprintf(msg, len, "%.64s: %s", method, why);
                        return GADGET_EINVAL;
                }
                c->sig = sig;
        }
        timer_set(c, call_timeout);
        c->run = r;
        /* The gadget does not start the call after this; call_timeout
         * answers its caller "it may have run" only from then on (the
         * loop's timers may fire early by what its turn took so far). */
        c->gadget_deadline_us = monotime_turn_us() + timeout_ms * 1000;
        int e = c->timer ? peer_call(r->peer, &c->pc, method, args, chain, c->gadget_deadline_us) : -ENOMEM;
        if (e < 0) {
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
        timer_arm_ms(c->timer, timeout_ms);
        u->calls++;
        c->stat_row = unit_stats_row(&u->stats, method, true); /* call_check found it declared */
        return 0;
}

/* A call that waited for its gadget's start (an idle one's, or a
 * restart's) got no hello in time. */
static void pending_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct call *c = arg;
        char msg[300];
        if (c->ready_ms)
                snprintf(msg, sizeof msg, "gadget \"%s\" was not ready within %llu ms (its StartTimeout and a "
                         "stop's grace)", c->u->policy->name, (unsigned long long)c->ready_ms);
        else if (c->u->state == UNIT_REMOTE)
                snprintf(msg, sizeof msg, "no answer within CallTimeout (%llu ms): no node could be reached to run "
                         "gadget \"%s\" (%.200s)", (unsigned long long)c->u->policy->call_timeout_ms,
                         c->u->policy->name, c->u->cause);
        else
                snprintf(msg, sizeof msg, "no answer within CallTimeout (%llu ms): gadget \"%s\" was still starting",
                         (unsigned long long)c->u->policy->call_timeout_ms, c->u->policy->name);
        call_end(c, NULL, GADGET_ETIMEOUT, msg);
}

/* Whether one more call with args may wait in u->pending
 * (CallsQueuedMax=, and CALLS_PENDING_BYTES_MAX): 0 and its size, or
 * GADGET_EBUSY with msg saying what it waits for. */
static int pend_room(const struct call *c, const Gadget__Value *args, const char *what, size_t *bytes, char *msg,
                     size_t len)
{
        struct unit *u = c->u;
        /* A wait for a start already asked (gadgetctl load, start,
         * restart: c->ready_ms) is not a call: it holds no arguments and
         * is bounded by its control connection (CONTROL_WAITING_MAX), so
         * it takes none of the callers' CallsQueuedMax. */
        if (!c->ready_ms && u->n_pending >= u->policy->calls_queued_max) {
                snprintf(msg, len, "gadget \"%s\" is busy: %zu calls wait for %s (CallsQueuedMax=)",
                         u->policy->name, u->n_pending, what);
                return GADGET_EBUSY;
        }
        /* Why a bound in bytes too: a waiting call holds a copy of its
         * arguments, where a call to a running gadget holds none (its
         * frame waits in the worker link, bounded there). */
        *bytes = args ? gadget__value__get_packed_size(args) : 0;
        if (u->pending_bytes + *bytes > CALLS_PENDING_BYTES_MAX) {
                snprintf(msg, len, "gadget \"%s\" is busy: %zu bytes of arguments wait for %s already",
                         u->policy->name, u->pending_bytes, what);
                return GADGET_EBUSY;
        }
        return 0;
}

/* c waits at the end of u->pending (its timer armed, its room checked). */
static void pend_add(struct call *c, size_t bytes)
{
        struct unit *u = c->u;
        TAILQ_INSERT_TAIL(&u->pending, c, pend_link);
        if (!c->ready_ms)
                u->n_pending++;
        c->pend_bytes = bytes;
        u->pending_bytes += bytes;
}

/* Queues c until its gadget's hello (it is idle, starting, or stopping to
 * start again; or another node's, out of reach), and starts an idle one:
 * c is sent then, within what is left of its CallTimeout.
 * method NULL: a wake, answered once the gadget is ready. 0, or a
 * GADGET_E* code with msg. */
static int call_pend(struct call *c, const char *method, const Gadget__Value *args, const struct peer_chain *chain,
                     char *msg, size_t len)
{
        struct unit *u = c->u;
        size_t bytes;
        int code = pend_room(c, args, u->state == UNIT_REMOTE ? "a node to run it" : "its start", &bytes, msg, len);
        if (code)
                return code;
        c->has_chain = chain != NULL;
        if ((method && !c->method && !(c->method = strdup(method))) || (args && !c->args && !(c->args = value_dup(args))) ||
            (chain && peer_chain_copy(&c->chain, chain) < 0) || !timer_set(c, pending_timeout)) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        uint64_t ms = c->ready_ms ? c->ready_ms : call_limit_ms(c);
        c->deadline_ms = monotime_ms() + ms;
        timer_arm_ms(c->timer, ms);
        pend_add(c, bytes);
        if (u->state != UNIT_REMOTE)
                unit_wake(u, c->party);
        return 0;
}

static bool remote_unsent(struct call *c, const char *why);

void calls_remote_unsent(struct call *c, const char *why)
{
        remote_unsent(c, why);
}

void calls_remote_unread(struct call *c, const char *why)
{
        struct unit *u = c->u;
        if (!remote_unsent(c, why))
                return;
        /* Why this is safe to send again, to the same lease: its node said
         * it never read it (a goodbye on the session it was sent on, which
         * only that node's certificate speaks on). */
        c->fwd_epoch = 0;
        calls_pending_forward(u);
}

/* c waits for a node, or has ended (false). */
static bool remote_unsent(struct call *c, const char *why)
{
        struct unit *u = c->u;
        char msg[600];
        size_t bytes;
        c->remote = NULL;
        fwd_unlink(c);
        timer_drop(c);
        /* Why this is safe to send again: not a byte of it reached the
         * node, so it cannot have run there. It waits, bounded as calls
         * waiting for a start are, for the lease to move (on_owner, or
         * this node's start of it), then goes there, in order. */
        int code = c->done ? pend_room(c, c->args, "a node to run it", &bytes, msg, sizeof msg) : GADGET_EGONE;
        if (!code && !timer_set(c, pending_timeout)) {
                snprintf(msg, sizeof msg, "out of memory");
                code = GADGET_EINTERNAL;
        }
        if (code) {
                call_end(c, NULL, code, code == GADGET_EGONE ? "the caller is gone" : msg);
                return false;
        }
        uint64_t now = monotime_ms();
        /* Said where the operator looks (list, status) and in the
         * answer of a call that waits in vain (pending_timeout). */
        if (u->state == UNIT_REMOTE && u->owner[0])
                snprintf(u->cause, sizeof u->cause, "runs on node %.63s, out of reach: %.160s", u->owner, why);
        c->unsent = true;
        timer_arm_ms(c->timer, c->deadline_ms > now ? c->deadline_ms - now : 1);
        pend_add(c, bytes);
        return true;
}

/* The calls that waited for a node: sent to u's owner now, in order,
 * but not again to the lease they could not reach (the same epoch). */
void calls_pending_forward(struct unit *u)
{
        struct call *c, *next;
        if (u->state != UNIT_REMOTE || !u->owner[0] || !u->core->remote.call)
                return;
        for (c = TAILQ_FIRST(&u->pending); c; c = next) {
                next = TAILQ_NEXT(c, pend_link);
                if (c->unsent && c->fwd_epoch == u->owner_epoch && u->owner_epoch)
                        continue;
                char msg[600];
                pend_unlink(c);
                timer_drop(c);
                c->unsent = false;
                const struct call_req q = { .method = c->name, .args = c->args,
                                            .chain = c->has_chain ? &c->chain : NULL, .caller = c->caller,
                                            .via = c->via, .tag = c->tag };
                int code = c->done ? call_forward(c, &q, msg, sizeof msg) : GADGET_EGONE;
                if (code)
                        call_end(c, NULL, code, code == GADGET_EGONE ? "the caller is gone" : msg);
        }
}

/* Sends c now if its gadget is ready, else after its start. */
static int call_go(struct call *c, const char *method, const Gadget__Value *args, const struct peer_chain *chain,
                   char *msg, size_t len)
{
        struct unit *u = c->u;
        if (unit_is_ready(u))
                return call_send(c, method, args, chain, call_limit_ms(c), msg, len);
        return call_pend(c, method, args, chain, msg, len);
}

void calls_pending_flush(struct unit *u)
{
        uint64_t now = monotime_ms();
        struct call *c;
        while ((c = TAILQ_FIRST(&u->pending))) {
                char msg[600];
                pend_unlink(c);
                timer_drop(c);
                if (!c->done) {
                        call_end(c, NULL, GADGET_EGONE, "the caller is gone");
                        continue;
                }
                if (c->wake) {
                        Gadget__Value ready = GADGET__VALUE__INIT;
                        call_end(c, &ready, 0, NULL);
                        continue;
                }
                uint64_t left = c->deadline_ms > now ? c->deadline_ms - now : 1;
                int code = call_check(u, c->method, c->args, c->admin, &c->sig, msg, sizeof msg);
                if (!code && !unit_is_ready(u)) {
                        snprintf(msg, sizeof msg, "gadget \"%s\" stopped as it started", u->policy->name);
                        code = GADGET_EUNAVAILABLE;
                }
                /* Why this is safe: a call that waited for a node was
                 * never asked of a person here; fail closed. */
                if (!code && c->unsent && policy_listed(u->policy->approve, c->method)) {
                        snprintf(msg, sizeof msg, "gadget \"%s\" came to this node while the call waited; %.64s "
                                 "needs a person's approval here: call again", u->policy->name, c->method);
                        code = GADGET_EUNAVAILABLE;
                }
                if (!code)
                        code = call_send(c, c->method, c->args, c->has_chain ? &c->chain : NULL, left, msg, sizeof msg);
                if (code)
                        call_end(c, NULL, code, msg);
        }
}

void calls_pending_fail(struct unit *u, const char *why)
{
        char msg[400];
        snprintf(msg, sizeof msg, "gadget \"%s\" did not start: %.300s", u->policy->name, why);
        struct call *c;
        while ((c = TAILQ_FIRST(&u->pending)))
                call_end(c, NULL, GADGET_EUNAVAILABLE, msg);
}

/* A person decided on a call that waited (its gadget's Approve=). */
static void call_decided(void *arg, bool approved, const char *why)
{
        struct call *c = arg;
        struct unit *u = c->u;
        char msg[400];
        c->ap = NULL;
        wait_unlink(c);
        if (c->unit_gone) {
                snprintf(msg, sizeof msg, "gadget \"%s\" was unloaded", u->policy->name);
                call_end(c, NULL, GADGET_EGONE, msg);
                return;
        }
        if (!approved) {
                snprintf(msg, sizeof msg, "%s: %s", c->method, why);
                call_end(c, NULL, GADGET_EDENIED, msg);
                return;
        }
        int code = c->done ? call_check(u, c->method, c->args, false, &c->sig, msg, sizeof msg) : GADGET_EGONE;
        if (!code)
                code = call_go(c, c->method, c->args, NULL, msg, sizeof msg);
        if (code)
                call_end(c, NULL, code, code == GADGET_EGONE ? "the caller is gone" : msg);
}

/* Asks for a person's approval of c: 0 when it waits (or a standing
 * approval sent it), else a GADGET_E* code with msg. */
static int call_wait(struct call *c, const struct call_req *q, char *msg, size_t len)
{
        struct unit *u = c->u;
        if (!(c->method = strdup(q->method)) || !(c->args = value_dup(q->args))) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        const struct approval_req aq = { .caller = q->caller ? q->caller : "gadgetd", .party = q->party,
                                         .via = q->via ? q->via : "gadgetd",
                                         .target = u->policy->name, .method = q->method, .gadget = u->policy->name,
                                         .args = q->args, .timeout_ms = u->policy->approve_timeout_ms,
                                         .decided = call_decided, .arg = c };
        int code = approvals_ask(u->core->approvals, &aq, &c->ap, msg, len);
        if (code == 1)
                return call_go(c, q->method, q->args, q->chain, msg, len);
        if (code)
                return code;
        LIST_INSERT_HEAD(&u->waiting, c, wait_link);
        return 0;
}

size_t unit_approvals_waiting(const struct unit *u)
{
        size_t n = 0;
        const struct call *c;
        LIST_FOREACH(c, &u->waiting, wait_link)
                n++;
        return n;
}

/* A call refused before it was made, in u's counters (its method's row
 * if the gadget declared it), and the core's if it came from another node. */
static void count_refusal(struct unit *u, const char *method, int code, bool from_node)
{
        const struct type_sig *sig;
        bool declared = u->run->peer && method && peer_method(u->run->peer, method, &sig);
        int row = unit_stats_row(&u->stats, method, declared);
        unit_stats_call(&u->stats, row, code, 0);
        log_call(u, row, code, 0, monotime_ms(), NULL);
        if (from_node)
                u->core->forwarded.calls[0][unit_stats_outcome_of(code)]++;
}

/* Links c to its caller's record, which may leave before it ends. */
static void call_own(struct call *c, struct call_owner *o)
{
        if (!(c->owner = o))
                return;
        LIST_INSERT_HEAD(&o->calls, c, owner_link);
}

int calls_start(struct unit *u, const struct call_req *q, char *msg, size_t len)
{
        const struct type_sig *sig = NULL;
        uint64_t begin_us = monotime_turn_us();
        int code = call_check(u, q->method, q->args, q->admin, &sig, msg, len);
        if (code) {
                if (q->audit_uid)
                        audit_local(u, q->via, q->method, q->uid, monotime_us() - begin_us, 0, NULL, code, msg);
                count_refusal(u, q->method, code, q->peer_node != NULL);
                return code;
        }
        struct call *c = call_alloc();
        if (!c) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        *c = (struct call){ .pc = { .done = call_result }, .u = u, .done = q->done, .cbdata = q->cbdata,
                            .tag = q->tag, .sig = sig, .admin = q->admin, .party = q->owner,
                            .begin_us = begin_us, .audit_uid = q->uid, .stat_row = -1,
                            .from_node = q->peer_node != NULL, .left_ms = q->left_ms };
        if (q->method) { /* on every call's path: a copy, not a printf */
                size_t n = strnlen(q->method, sizeof c->name - 1);
                memcpy(c->name, q->method, n);
                c->name[n] = '\0';
        }
        c->untold = q->untailed;
        span_begin(c, q);
        if (q->audit_uid) {
                const char *via = q->via && *q->via ? q->via : "gadgetd";
                size_t n = strnlen(via, sizeof c->audit_by - 1);
                memcpy(c->audit_by, via, n);
                c->audit_by[n] = '\0';
        }
        unit_active(u, begin_us / 1000);
        bool ask = !q->admin && !q->approved && policy_listed(u->policy->approve, q->method);
        if (u->state == UNIT_REMOTE && q->admin) {
                snprintf(msg, len, "admin methods of %s are called on the node that runs it (%.64s): an admin call "
                         "never crosses the link", u->policy->name, u->owner);
                code = GADGET_EDENIED;
        } else if (u->state == UNIT_REMOTE && u->owner[0])
                code = call_forward(c, q, msg, len);
        else if (u->state == UNIT_REMOTE) { /* no node holds it now (a failover): it waits for one */
                c->unsent = true;
                code = call_keep(c, q, msg, len) ? GADGET_EINTERNAL : call_pend(c, q->method, q->args, q->chain, msg, len);
        }
        else
                code = ask ? call_wait(c, q, msg, len) : call_go(c, q->method, q->args, q->chain, msg, len);
        if (code) {
                if (c->audit_by[0])
                        audit_local(u, c->audit_by, c->name, c->audit_uid, monotime_us() - c->begin_us, 0,
                                    call_trace_id(c), code, msg);
                /* A forward that could not be sent (the link busy, down) is
                 * a forwarded call too: its outcome is this refusal. */
                bool forwarding = u->state == UNIT_REMOTE && u->owner[0] && !q->admin;
                call_free(c);
                count_refusal(u, q->method, code, q->peer_node != NULL);
                if (forwarding)
                        u->core->forwarded.calls[1][unit_stats_outcome_of(code)]++;
                return code;
        }
        call_own(c, q->owner);
        if (q->trace_out)
                *q->trace_out = c->pc.trace;
        return 0;
}

int calls_wake(struct unit *u, const struct call_req *q, char *msg, size_t len)
{
        /* A restart without a gap under way: a wait until ready (its
         * gadgetctl restart) waits for its switch, or its failure. A
         * rollout's new process serves already: nothing to wait for. */
        bool switching = q->until_ready && u->next_run && !unit_rollout_running(u);
        if (unit_is_ready(u) && !switching)
                return 1;
        if (q->until_ready && !switching && !start_under_way(u)) {
                if (u->state != UNIT_STOPPED && u->state != UNIT_FAILED && u->state != UNIT_STOPPING)
                        return 1; /* idle (not started for this), or another node's */
                snprintf(msg, len, "gadget \"%s\" is %s%s%.200s", u->policy->name, unit_state_name(u->state),
                         u->cause[0] ? ": " : "", u->cause);
                return GADGET_EUNAVAILABLE;
        }
        bool remote = !q->until_ready && u->state == UNIT_REMOTE && u->owner[0] && u->core->remote.call;
        if (!remote && !q->until_ready && !unit_wakeable(u)) {
                snprintf(msg, len, "gadget \"%s\" is %s, not idle%s%.200s", u->policy->name, unit_state_name(u->state),
                         u->cause[0] ? ": " : "", u->cause);
                return GADGET_EUNAVAILABLE;
        }
        struct call *c = call_alloc();
        if (!c) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        *c = (struct call){ .u = u, .done = q->done, .cbdata = q->cbdata, .tag = q->tag, .wake = true,
                            .party = q->owner };
        /* Bounded by its start's own bound, and a stop's before it. */
        if (q->until_ready)
                c->ready_ms = u->policy->start_timeout_ms + UNIT_STOP_GRACE_MS;
        /* Another node holds it: that node wakes it (a wake is a call
         * without a method, on the link as a control wake). */
        const struct call_req fq = { .tag = q->tag };
        int code = remote ? call_forward(c, &fq, msg, len) : call_pend(c, NULL, NULL, NULL, msg, len);
        if (code) {
                call_free(c);
                return code;
        }
        call_own(c, q->owner);
        return 0;
}

