/* bindings: a gadget's binding side: budgets, dispatch by type, what its
 * bindings keep, answers, audit. */
#include "bindings.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/approvals.h"
#include "system/audit.h"
#include "system/trace.h"
#include "contract.h"
#include "system/log.h"
#include "link/peer.h"
#include "http.h"
#include "store/store.h"
#include "ops.h"
#include "policy.h"
#include "types.h"
#include "value.h"
#include "wire.h"
#include "system/monotime.h"

#define BUSY_LOG_MS 1000   /* busy answers are counted in one line per second at most */

static void unlink_req(struct binding_req *r)
{
        if (!r->g) /* orphaned: its gadget's list is gone */
                return;
        LIST_REMOVE(r, link);
        r->g->n_breqs--;
}

/* Sends the answer; if it cannot go (larger than a frame, or the gadget's
 * connection failed) the gadget gets an error in its place where it still
 * can, and why is set for the audit. Returns whether the answer went. */
static bool send_reply(struct gadget_bindings *g, const struct binding_req *r, const Gadget__Value *value, int code,
                       const char *message, char *why, size_t len)
{
        if (!r->peer) {
                snprintf(why, len, "the answer could not be sent: the gadget is gone");
                return false;
        }
        int e = peer_binding_reply(r->peer, r->id, value, code, message);
        if (e == -EMSGSIZE) {
                snprintf(why, len, "the answer (%zu bytes) is larger than one frame can carry (%u bytes)",
                         value ? gadget__value__get_packed_size(value) : strlen(message ? message : ""),
                         WIRE_MAX_FRAME);
                peer_binding_reply(r->peer, r->id, NULL, GADGET_ELIMIT, why);
                return false;
        }
        if (e < 0) {
                snprintf(why, len, "the answer could not be sent: %s", strerror(-e));
                return false;
        }
        return true;
}

/* Logs and audits how many calls were answered busy since the last such
 * line: one line per BUSY_LOG_MS at most (now = true: whatever the time). */
static void busy_flush(struct gadget_bindings *g, bool now)
{
        if (!g->busy || (!now && monotime_since_us(&g->busy_logged) < BUSY_LOG_MS * 1000u))
                return;
        char msg[160];
        snprintf(msg, sizeof msg, "%llu binding calls answered busy (in flight at most BindingCallsMax=%llu, "
                 "and CallsMax= of each binding)", (unsigned long long)g->busy,
                 (unsigned long long)g->policy->binding_calls_max);
        log_msg(L_WARN, g->policy->name, "%s", msg);
        struct audit_record rec = { .gadget = g->policy->name, .binding = "limit", .op = "BindingCallsMax",
                                    .outcome = AUDIT_DENIED, .detail = msg };
        audit_write(g->env->audit, &rec);
        g->busy = 0;
        clock_gettime(CLOCK_MONOTONIC, &g->busy_logged);
}

/* Calls in flight on binding name. Why this is safe: the walk is bounded
 * by BindingCallsMax (at most 4096), checked first. */
size_t bindings_busy(const struct gadget_bindings *g)
{
        return g->n_breqs;
}

static uint64_t binding_inflight(const struct gadget_bindings *g, const char *name)
{
        uint64_t n = 0;
        const struct binding_req *r;
        LIST_FOREACH(r, &g->breqs, link)
                n += strcmp(r->binding, name) == 0;
        return n;
}

/* Answers a call over its budget "busy" at once: no request is made, no
 * work done; the count is logged and audited in one line a second. */
static bool over_budget(struct gadget_bindings *g, struct peer *peer, const Gadget__BindingCall *bc,
                        const struct policy_binding *b)
{
        char msg[200];
        if (g->n_breqs >= g->policy->binding_calls_max)
                snprintf(msg, sizeof msg, "busy: %zu binding calls in flight (BindingCallsMax=%llu)", g->n_breqs,
                         (unsigned long long)g->policy->binding_calls_max);
        else if (b && g->n_breqs >= b->calls_max && binding_inflight(g, b->name) >= b->calls_max)
                snprintf(msg, sizeof msg, "busy: %llu calls of binding %s in flight (CallsMax=%llu)",
                         (unsigned long long)b->calls_max, b->name, (unsigned long long)b->calls_max);
        else
                return false;
        if (g->busy++ == 0 && monotime_since_us(&g->busy_logged) >= BUSY_LOG_MS * 1000u)
                log_msg(L_WARN, g->policy->name, "%s: answering busy", msg);
        peer_binding_reply(peer, bc->id, NULL, GADGET_EBUSY, msg);
        return true;
}

/* r's span begins: a child of the call its gadget serves now (found from
 * gadgetd's record of the calls in flight, nothing the gadget says), or of
 * none (a gadget working on its own: an alarm's, a timer's). */
static void span_begin(struct gadget_bindings *g, struct binding_req *r, struct peer *peer)
{
        struct traces *t = g->env->traces;
        if (!traces_on(t))
                return;
        const struct trace_ctx *parent = peer_current_trace(peer);
        trace_begin(t, parent, &r->trace);
        if (parent)
                memcpy(r->parent_id, parent->span_id, TRACE_SPAN_ID_LEN);
        /* In whole µs, as a call's span (calls.c): a call it makes
         * begins on the same reading, never before it. */
        r->start_ns = traces_wall_ns(t, monotime_ts_us(&r->start) * 1000u);
        r->traced = true;
}

/* r's span ends with code (0: ok); us is its duration. */
static void span_end(struct gadget_bindings *g, const struct binding_req *r, int code, uint64_t us)
{
        if (!r->traced)
                return;
        struct traces *t = g->env->traces;
        struct span *s = traces_next(t, &r->trace);
        size_t nb = strnlen(r->binding, 47), no = strnlen(r->op, 47);
        memcpy(s->parent_id, r->parent_id, TRACE_SPAN_ID_LEN);
        s->kind = SPAN_BINDING;
        s->start_ns = r->start_ns;
        s->duration_ns = us * 1000;
        trace_copy(s->gadget, sizeof s->gadget, g->policy->name);
        memcpy(s->name, r->binding, nb);
        s->name[nb] = '.';
        memcpy(s->name + nb + 1, r->op, no);
        s->name[nb + 1 + no] = '\0';
        trace_copy(s->node, sizeof s->node, traces_node(t));
        s->peer[0] = '\0';
        trace_copy(s->outcome, sizeof s->outcome, code ? gadget_error_name(code) : "ok");
}

/* Counts r's answer in g's rows (struct binding_stat). */
static void count(struct gadget_bindings *g, const struct binding_req *r, enum audit_outcome o)
{
        const char *binding = r->declared ? r->binding : BINDING_STATS_OTHER;
        const char *op = r->declared ? r->op : BINDING_STATS_OTHER;
        struct binding_stat *st = NULL;
        for (size_t i = 0; i < g->n_stats && !st; i++)
                if (strcmp(g->stats[i].binding, binding) == 0 && strcmp(g->stats[i].op, op) == 0)
                        st = &g->stats[i];
        if (!st && r->declared && g->n_stats >= BINDING_STATS_MAX) {
                struct binding_req other = { .declared = false };
                count(g, &other, o);
                return;
        }
        if (!st) {
                struct binding_stat *n = realloc(g->stats, (g->n_stats + 1) * sizeof *n);
                if (!n)
                        return;
                g->stats = n;
                st = &g->stats[g->n_stats++];
                *st = (struct binding_stat){ 0 };
                snprintf(st->binding, sizeof st->binding, "%s", binding);
                snprintf(st->op, sizeof st->op, "%s", op);
        }
        if ((unsigned)o < BINDING_STATS_OUTCOMES)
                st->outcomes[o]++;
}

void bindings_reply(struct binding_req *r, const Gadget__Value *value, int code, const char *message,
                    uint64_t bytes_out)
{
        struct gadget_bindings *g = r->g;
        if (g) {
                unlink_req(r);
                busy_flush(g, g->n_breqs == 0);
                char why[160], detail[1024];
                /* Why this is safe: the audit says ok only for an answer that
                 * was handed to the gadget's connection; one that could not
                 * be is an error there and, where possible, for the gadget. */
                bool sent = send_reply(g, r, value, code, message, why, sizeof why);
                enum audit_outcome outcome = value ? AUDIT_OK : audit_outcome_of(code);
                const char *said = !sent ? why : value ? NULL : message;
                if (r->audit_note)
                        snprintf(detail, sizeof detail, "%s%s%s", r->audit_note, said ? "; " : "", said ? said : "");
                uint64_t us = monotime_since_us(&r->start);
                span_end(g, r, sent ? (value ? 0 : code ? code : GADGET_EFAILED) : GADGET_EGONE, us);
                char trace[2 * TRACE_ID_LEN + 1];
                trace_hex(r->trace.trace_id, TRACE_ID_LEN, trace);
                struct audit_record rec = {
                        .gadget = g->policy->name, .binding = r->binding, .op = r->op,
                        .outcome = sent ? outcome : AUDIT_ERROR,
                        .bytes = r->bytes_in + bytes_out, .duration_us = us,
                        .detail = r->audit_note ? detail : said, .trace = r->traced ? trace : NULL,
                };
                audit_write(g->env->audit, &rec);
                count(g, r, rec.outcome);
        }
        free(r->audit_note);
        free(r);
}

void bindings_orphan(struct gadget_bindings *g, const struct peer *peer)
{
        if (!peer || g->peer == peer)
                busy_flush(g, true);
        for (struct binding_req *r = LIST_FIRST(&g->breqs), *next; r; r = next) {
                next = LIST_NEXT(r, link);
                if (peer && r->peer != peer)
                        continue;
                unlink_req(r);
                r->g = NULL;
                r->peer = NULL;
                /* A call waiting for approval is asked no more; its
                 * handler frees r. */
                if (r->approval) {
                        struct approval *ap = r->approval;
                        r->approval = NULL;
                        approval_cancel(ap);
                }
        }
        if (!peer || g->peer == peer)
                g->peer = NULL;
}

void bindings_handle(struct gadget_bindings *g, struct peer *peer, const Gadget__BindingCall *bc)
{
        bindings_handle_or_refuse(g, peer, bc, NULL);
}

void bindings_handle_or_refuse(struct gadget_bindings *g, struct peer *peer, const Gadget__BindingCall *bc,
                               const char *refused)
{
        const struct policy_binding *b = policy_binding_find(g->policy, bc->binding);
        if (over_budget(g, peer, bc, b))
                return;
        struct binding_req *r = calloc(1, sizeof *r);
        if (!r) {
                peer_binding_reply(peer, bc->id, NULL, GADGET_EINTERNAL, "out of memory");
                return;
        }
        r->g = g;
        r->peer = peer;
        r->id = bc->id;
        r->start = monotime_turn(); /* the clock its call's span begins on (calls_start's) */
        snprintf(r->binding, sizeof r->binding, "%s", bc->binding);
        snprintf(r->op, sizeof r->op, "%s", bc->op);
        r->bytes_in = bc->args ? gadget__value__get_packed_size(bc->args) : 0;
        span_begin(g, r, peer);
        LIST_INSERT_HEAD(&g->breqs, r, link);
        g->n_breqs++;

        char msg[256];
        if (refused) {
                /* Answered, audited and counted as any refusal, before
                 * anything of its binding's type is looked at or done. */
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, refused, 0);
                return;
        }
        if (!b) {
                snprintf(msg, sizeof msg, "no binding named %s in the policy", bc->binding);
                bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
                return;
        }
        const struct binding_op *op = binding_op_find(b->type, bc->op);
        if (!op) {
                char names[128];
                binding_op_names(b->type, names, sizeof names);
                /* A tail binding has none: gadgetd calls the gadget. */
                snprintf(msg, sizeof msg, "binding %s is of type %s: %s%s", b->name, policy_binding_type_name(b->type),
                         names[0] ? "its operations are " : "it has no operations", names);
                bindings_reply(r, NULL, GADGET_EINVAL, msg, 0);
                return;
        }
        r->declared = true; /* b is declared, op one of its type's */
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const Gadget__Value *args = bc->args ? bc->args : &null;
        char why[200];
        if (types_check_args(op->sig, args, why, sizeof why) < 0) {
                snprintf(msg, sizeof msg, "%s.%s: %s", b->name, op->name, why);
                bindings_reply(r, NULL, GADGET_EINVAL, msg, 0);
                return;
        }
        if (op->check && op->check(args, msg, sizeof msg) < 0) {
                bindings_reply(r, NULL, GADGET_EINVAL, msg, 0);
                return;
        }
        const Gadget__Value *canned = NULL;
        int code = 0;
        if (g->env->fake && g->env->fake(g->env->fake_arg, b->name, op->name, &canned, &code, msg, sizeof msg)) {
                bindings_reply(r, canned, canned ? 0 : code, msg, canned ? gadget__value__get_packed_size(canned) : 0);
                return;
        }
        op->handle(r, b, args);
}

/* What one binding's type kept for it (bindings_load). */
struct binding_state {
        const struct binding_type_ops *type;
        void *data;
};

static void states_free(struct gadget_bindings *g)
{
        for (size_t i = 0; i < g->n_states; i++)
                if (g->states[i].type && g->states[i].type->unload)
                        g->states[i].type->unload(g->states[i].data);
        free(g->states);
        g->states = NULL;
        g->n_states = 0;
}

int bindings_load(struct gadget_bindings *g, char *why, size_t len)
{
        const struct policy *p = g->policy;
        states_free(g);
        g->states = calloc(p->n_bindings + 1, sizeof *g->states);
        if (!g->states)
                return -ENOMEM;
        g->n_states = p->n_bindings;
        for (size_t i = 0; i < p->n_bindings; i++) {
                const struct binding_type_ops *t = binding_type_find(p->bindings[i].type);
                if (!t || !t->load)
                        continue;
                int e = t->load(&p->bindings[i], &g->states[i].data, why, len);
                if (e < 0)
                        return e;
                g->states[i].type = t;
        }
        return 0;
}

void bindings_swap_states(struct gadget_bindings *a, struct gadget_bindings *b)
{
        struct binding_state *s = a->states;
        size_t n = a->n_states;
        a->states = b->states;
        a->n_states = b->n_states;
        b->states = s;
        b->n_states = n;
}

void *bindings_state(const struct gadget_bindings *g, const struct policy_binding *b)
{
        size_t i = (size_t)(b - g->policy->bindings);
        if (i >= g->n_states || !g->states[i].type || g->states[i].type->type != b->type)
                return NULL;
        return g->states[i].data;
}

struct gadget_bindings *bindings_new(const struct bindings_env *env, const struct policy *p)
{
        struct gadget_bindings *g = calloc(1, sizeof *g);
        if (!g)
                return NULL;
        *g = (struct gadget_bindings){ .env = env, .policy = p };
        LIST_INIT(&g->breqs);
        return g;
}

struct kv *bindings_kv(struct gadget_bindings *g)
{
        const struct bindings_env *env = g->env;
        if (!g->kv && kv_open(env->base, g->policy->name, env->kv_backend, &g->kv) < 0)
                return NULL;
        return g->kv;
}

void bindings_kv_release(struct gadget_bindings *g)
{
        if (g->kv && !g->peer && LIST_EMPTY(&g->breqs) && kv_idle(g->kv)) {
                kv_close(g->kv);
                g->kv = NULL;
        }
}

void bindings_free(struct gadget_bindings *g)
{
        if (!g)
                return;
        bindings_orphan(g, NULL);
        states_free(g);
        kv_close(g->kv);
        free(g->stats);
        free(g);
}

void bindings_set_policy(struct gadget_bindings *g, const struct policy *p)
{
        g->policy = p;
}

void bindings_attach(struct gadget_bindings *g, struct peer *peer)
{
        g->peer = peer;
}

/* Opens where the gadgets' stores live: SQLite files under state_dir, or
 * the shared PostgreSQL store with the leases and the audit's copy. */
static int store_open(struct bindings_env *env, const char *state_dir, struct audit *audit,
                      const struct bindings_store *store)
{
        char err[300];
        struct kvpg *pg;
        int e;
        /* Static: the tables the types' files define. */
        static const struct kv_type *types[KV_TYPES_MAX];
        size_t n = binding_store_types(types, KV_TYPES_MAX);
        if (!store || !store->connection) {
                if ((e = kvdb_backend_new(env->base, state_dir, types, n, &env->kv_backend, err, sizeof err)) < 0)
                        log_msg(L_ERR, NULL, "store: %s", err);
                return e;
        }
        if (!(env->store_latency = calloc(1, sizeof *env->store_latency)))
                return -ENOMEM;
        if ((e = kvpg_new(env->base, store->connection, store->node, types, n, env->store_latency, &pg, err,
                          sizeof err)) < 0) {
                log_msg(L_ERR, NULL, "store: PostgreSQL: %s", err);
                return e;
        }
        env->kv_backend = kvpg_backend(pg);
        if ((e = kvpg_lease_new(env->base, store->connection, store->node, store->peer ? store->peer : "",
                                env->store_latency, &env->lease)) < 0) {
                log_msg(L_ERR, NULL, "store: PostgreSQL: %s", strerror(-e));
                return e;
        }
        kvpg_set_lease(pg, env->lease);
        if (store->node_forget_ms)
                kvpg_lease_set_forget(env->lease, store->node_forget_ms);
        if (store->lease_ttl_ms)
                kvpg_lease_set_ttl(env->lease, (unsigned)store->lease_ttl_ms);
        if (store->lease_poll_ms)
                kvpg_lease_set_poll(env->lease, (unsigned)store->lease_poll_ms);
        if ((e = kvpg_audit_new(env->base, store->connection, store->node, audit ? audit_dir(audit) : NULL,
                                audit ? audit_keep(audit) : 0, store->audit_keep_days,
                                store->audit_max_bytes, env->store_latency, &env->audit_store)) < 0) {
                log_msg(L_ERR, NULL, "audit: PostgreSQL: %s", strerror(-e));
                return e;
        }
        /* Every audit line, also in the store, naming this node. */
        audit_set_store(audit, store->node, kvpg_audit_add, env->audit_store);
        /* Why safe: bindings_env_close frees the kv backend (pg) before
         * the audit's copy. */
        kvpg_set_audit(pg, env->audit_store);
        return 0;
}

int bindings_env_open(struct bindings_env *env, struct event_base *base, const char *state_dir,
                      struct audit *audit, unsigned http_requests_max, const struct bindings_store *store)
{
        char err[300];
        *env = (struct bindings_env){ .base = base, .state_dir = state_dir, .audit = audit,
                                      .store_connection = store ? store->connection : NULL,
                                      .node = store ? store->node : NULL };
        int e = binding_ops_open(err, sizeof err);
        if (e < 0) {
                log_msg(L_ERR, NULL, "%s", err);
                return e;
        }
        if ((e = store_open(env, state_dir, audit, store)) < 0)
                return e;
        if ((e = http_new(base, http_requests_max, &env->http)) < 0)
                log_msg(L_ERR, NULL, "HTTP client: %s", strerror(-e));
        return e;
}

void bindings_env_close(struct bindings_env *env)
{
        http_free(env->http);
        env->http = NULL;
        kv_backend_free(env->kv_backend);
        env->kv_backend = NULL;
        kvpg_lease_free(env->lease);
        env->lease = NULL;
        /* After audit_close (core.c): no line comes any more. */
        kvpg_audit_free(env->audit_store);
        env->audit_store = NULL;
        free(env->store_latency); /* last: the connections above counted in it */
        env->store_latency = NULL;
}

/* A binding call waiting for a person's approval: what it needs to go on. */
struct asked {
        struct binding_req *r;
        char binding[72];
        enum binding_type type;
        Gadget__Value *args;
        binding_go_fn *go;
};

static void asked_free(struct asked *a)
{
        value_free(a->args);
        free(a);
}

static void on_decision(void *arg, bool ok, const char *why)
{
        struct asked *a = arg;
        struct binding_req *r = a->r;
        char msg[400];
        r->approval = NULL;
        /* Why the binding is looked up again: the policy may have been
         * replaced while the call waited. */
        const struct policy_binding *b = r->g ? policy_binding_find(r->g->policy, a->binding) : NULL;
        if (!r->g) {
                bindings_reply(r, NULL, GADGET_EGONE, why, 0); /* the caller is gone: frees r */
        } else if (!ok) {
                snprintf(msg, sizeof msg, "binding %s: %s", a->binding, why);
                bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
        } else if (!b || b->type != a->type) {
                snprintf(msg, sizeof msg, "binding %s is no longer in the gadget's policy", a->binding);
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, msg, 0);
        } else {
                a->go(r, b, a->args);
        }
        asked_free(a);
}

void bindings_ask(struct binding_req *r, const struct binding_ask *q, binding_go_fn *go)
{
        char msg[300], via[80];
        struct asked *a = calloc(1, sizeof *a);
        Gadget__Value *args = a ? value_dup(q->args) : NULL;
        if (!args) {
                free(a);
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        *a = (struct asked){ .r = r, .type = q->b->type, .args = args, .go = go };
        snprintf(a->binding, sizeof a->binding, "%s", q->b->name);
        snprintf(via, sizeof via, "binding %s", q->b->name);
        const struct approval_req aq = { .caller = r->g->policy->name, .via = via, .target = q->target,
                                         .method = q->method, .gadget = r->g->policy->name,
                                         .args = q->shown ? q->shown : q->args, .timeout_ms = q->timeout_ms,
                                         .decided = on_decision, .arg = a };
        int code = approvals_ask(r->g->env->approvals, &aq, &r->approval, msg, sizeof msg);
        if (code == 0)
                return;
        r->approval = NULL;
        if (code == 1) /* a standing approval */
                go(r, q->b, a->args);
        else
                bindings_reply(r, NULL, code, msg, 0);
        asked_free(a);
}
