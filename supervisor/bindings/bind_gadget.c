/* bind_gadget: a gadget binding calls a method of another loaded gadget.
 * Cycles and over-long chains are refused from gadgetd's own record of the
 * calls in flight — never from anything the gadget says. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings.h"
#include "contract.h"
#include "link/peer.h"
#include "ops.h"
#include "policy.h"
#include "value.h"

#define CHAIN_MAX 8   /* gadgets one call may pass through */

/* The gadgets waiting on the caller: the caller itself and every gadget in
 * the chains of calls in flight to it. A single-threaded gadget blocked in
 * a binding call cannot serve a call, so calling any of them would
 * deadlock: that is the cycle refused. The depth is the longest of those
 * chains, not their number: many callers of one gadget make no deep chain. */
struct chain_set {
        struct peer_chain c;
        size_t cap;
        int err;
};

static void chain_add(struct chain_set *s, const char *name)
{
        for (size_t i = 0; i < s->c.n; i++)
                if (strcmp(s->c.names[i], name) == 0)
                        return;
        if (s->c.n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 16;
                char **names = realloc(s->c.names, cap * sizeof *names);
                if (!names) {
                        s->err = -ENOMEM;
                        return;
                }
                s->c.names = names;
                s->cap = cap;
        }
        s->c.names[s->c.n++] = (char *)name;
}

static void add_chain(void *arg, const struct peer_chain *chain)
{
        struct chain_set *s = arg;
        for (size_t i = 0; i < chain->n; i++)
                chain_add(s, chain->names[i]);
        if (chain->depth + 1 > s->c.depth)
                s->c.depth = chain->depth + 1;
}

/* Whether name is waiting on the caller. */
static bool chain_has(const struct chain_set *s, const char *name)
{
        for (size_t i = 0; i < s->c.n; i++)
                if (strcmp(s->c.names[i], name) == 0)
                        return true;
        return false;
}

struct relay {
        struct binding_req *r;
        char target[72];
};

static void relay_done(void *arg, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct relay *rl = arg;
        char msg[600];
        if (res) {
                bindings_reply(rl->r, res, 0, NULL, gadget__value__get_packed_size(res));
        } else {
                snprintf(msg, sizeof msg, "gadget %s: %s", rl->target, message ? message : "call failed");
                bindings_reply(rl->r, NULL, code, msg, 0);
        }
        free(rl);
}

static bool method_allowed(const struct policy_binding *b, const char *method)
{
        if (b->n_methods == 0)
                return true;
        for (size_t i = 0; i < b->n_methods; i++)
                if (strcmp(b->methods[i], method) == 0)
                        return true;
        return false;
}

/* Collects what waits on u into set: 0, or the error code (and msg) that
 * refuses a call to target — a cycle or a chain too deep. */
static int chain_check(struct gadget_bindings *g, const char *target, struct chain_set *set, char *msg, size_t len)
{
        set->c.depth = 1; /* the caller alone */
        chain_add(set, g->policy->name);
        if (g->peer)
                peer_each_chain(g->peer, add_chain, set);
        if (set->err < 0) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        if (chain_has(set, target)) {
                snprintf(msg, len, "call cycle refused: %s is already waiting in this chain of calls", target);
                return GADGET_EDENIED;
        }
        if (set->c.depth >= CHAIN_MAX) {
                snprintf(msg, len, "call chain refused: more than %d gadgets deep", CHAIN_MAX);
                return GADGET_EDENIED;
        }
        return 0;
}

/* Passes the call on to target's method; its result goes back to r. */
static void relay_call(struct binding_req *r, struct gadget_bindings *g, const char *binding, const char *target,
                       const char *method, const Gadget__Value *args, const struct peer_chain *chain)
{
        char msg[300], via[80];
        const struct bindings_env *env = g->env;
        struct relay *rl = calloc(1, sizeof *rl);
        if (!rl) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        rl->r = r;
        snprintf(rl->target, sizeof rl->target, "%s", target);
        snprintf(via, sizeof via, "binding %s", binding);
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const Gadget__Value *cargs = value_map_get(args, "args");
        const struct bindings_call bc = { .target = target, .method = method, .args = cargs ? cargs : &null,
                                          .chain = chain, .caller = g->policy->name, .via = via,
                                          .trace = r->traced ? &r->trace : NULL };
        int code = env->call(env->call_arg, &bc, relay_done, rl, msg, sizeof msg);
        if (code == 0)
                return;
        free(rl);
        bindings_reply(r, NULL, code, msg, 0);
}

/* Checks the chain of calls, then relays. */
static void chain_and_relay(struct binding_req *r, const char *binding, const char *target, const char *method,
                            const Gadget__Value *args)
{
        char msg[300];
        struct chain_set set = { 0 };
        int code = chain_check(r->g, target, &set, msg, sizeof msg);
        if (code)
                bindings_reply(r, NULL, code, msg, 0);
        else
                relay_call(r, r->g, binding, target, method, args, &set.c);
        free(set.c.names);
}

/* Approved: the call goes on to the binding's target. */
static void go(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        chain_and_relay(r, b->name, b->target, value_string(value_map_get(args, "method")), args);
}

/* Whether the call must wait for a person (the binding's or the target's
 * Approve=; one approval, the shorter timeout); if so it is asked. */
static bool ask_approval(struct binding_req *r, const struct policy_binding *b, const char *method,
                         const Gadget__Value *args)
{
        const struct bindings_env *env = r->g->env;
        uint64_t timeout_ms = b->approve_timeout_ms, target_ms;
        bool by_binding = policy_listed(b->approve, method);
        bool by_target = env->approval_wanted && env->approval_wanted(env->call_arg, b->target, method, &target_ms);
        if (!by_binding && !by_target)
                return false;
        if (by_target && (!by_binding || target_ms < timeout_ms))
                timeout_ms = target_ms;
        const struct binding_ask q = { .b = b, .target = b->target, .method = method, .args = args,
                                       .shown = value_map_get(args, "args"), .timeout_ms = timeout_ms };
        bindings_ask(r, &q, go);
        return true;
}

static int check_call(const Gadget__Value *args, char *why, size_t len)
{
        if (!value_string(value_map_get(args, "method"))) {
                snprintf(why, len, "call needs {\"method\": M, \"args\": A}");
                return -EINVAL;
        }
        return 0;
}

static void call(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        char msg[300];
        const char *method = value_string(value_map_get(args, "method"));
        if (!method_allowed(b, method)) {
                snprintf(msg, sizeof msg, "binding %s does not allow method %.64s", b->name, method);
                bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
                return;
        }
        if (!gadget_method_name_ok(method)) {
                snprintf(msg, sizeof msg, "gadget %s has no method \"%.64s\"", b->target, method);
                bindings_reply(r, NULL, GADGET_ENOMETHOD, msg, 0);
                return;
        }
        if (!ask_approval(r, b, method, args))
                chain_and_relay(r, b->name, b->target, method, args);
}

static struct binding_op ops[] = {
        BINDING_OP("call(method: string, args?: any) -> any", check_call, call),
};

const struct binding_type_ops bind_gadget_type = {
        .type = BINDING_GADGET, .ops = ops, .n_ops = sizeof ops / sizeof *ops,
};
