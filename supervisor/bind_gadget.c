/* bind_gadget: a gadget binding calls a method of another loaded gadget.
 * Cycles and over-long chains are refused from gadgetd's own record of the
 * calls in flight — never from anything the gadget says. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings.h"
#include "daemon.h"
#include "gadget.h"
#include "peer.h"
#include "policy.h"
#include "unit.h"
#include "value.h"

#define CHAIN_MAX 8   /* gadgets one call may pass through */

/* The set of gadgets waiting on the caller: the caller itself and every
 * gadget in the chains of calls in flight to it. A single-threaded gadget
 * blocked in a binding call cannot serve a call, so calling any of them
 * would deadlock: that is the cycle refused. */
struct chain_set {
        char *names[CHAIN_MAX + 1];
        size_t n;
        bool overflow;
};

static void chain_add(struct chain_set *s, const char *name)
{
        for (size_t i = 0; i < s->n; i++)
                if (strcmp(s->names[i], name) == 0)
                        return;
        if (s->n == CHAIN_MAX) {
                s->overflow = true;
                return;
        }
        s->names[s->n++] = (char *)name;
}

static void add_chain(void *arg, char **chain, size_t n)
{
        for (size_t i = 0; i < n; i++)
                chain_add(arg, chain[i]);
}

struct relay {
        struct binding_req *r;
        char target[72];
};

static void relay_done(void *arg, const Gadget__Value *res, int code, const char *message)
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

void bind_gadget(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        struct unit *u = r->u;
        char msg[300];
        if (strcmp(r->op, "call") != 0) {
                bindings_bad_op(r, b);
                return;
        }
        const char *method = value_string(value_map_get(args, "method"));
        if (!method) {
                bindings_reply(r, NULL, GADGET_EINVAL, "call needs {\"method\": M, \"args\": A}", 0);
                return;
        }
        if (!method_allowed(b, method)) {
                snprintf(msg, sizeof msg, "binding %s does not allow method %.64s", b->name, method);
                bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
                return;
        }
        struct chain_set set = { 0 };
        chain_add(&set, u->policy->name);
        if (u->peer)
                peer_each_chain(u->peer, add_chain, &set);
        for (size_t i = 0; i < set.n; i++)
                if (strcmp(set.names[i], b->target) == 0) {
                        snprintf(msg, sizeof msg, "call cycle refused: %s is already waiting in this chain of calls",
                                 b->target);
                        bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
                        return;
                }
        if (set.overflow || set.n >= CHAIN_MAX) {
                snprintf(msg, sizeof msg, "call chain refused: more than %d gadgets deep", CHAIN_MAX);
                bindings_reply(r, NULL, GADGET_EDENIED, msg, 0);
                return;
        }
        struct unit *t = daemon_find(u->d, b->target);
        if (!t || t->state != UNIT_READY) {
                snprintf(msg, sizeof msg, "gadget %s is unavailable (%s)", b->target,
                         t ? unit_state_name(t->state) : "not loaded");
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, msg, 0);
                return;
        }
        struct relay *rl = calloc(1, sizeof *rl);
        if (!rl) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        rl->r = r;
        snprintf(rl->target, sizeof rl->target, "%s", b->target);
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const Gadget__Value *cargs = value_map_get(args, "args");
        int e = unit_call(t, method, cargs ? cargs : &null, set.names, set.n, relay_done, rl);
        if (e == 0)
                return;
        free(rl);
        if (e == -ENOENT)
                snprintf(msg, sizeof msg, "gadget %s has no method %.64s", b->target, method);
        else if (e == -ENOBUFS)
                snprintf(msg, sizeof msg, "gadget %s is busy", b->target);
        else
                snprintf(msg, sizeof msg, "gadget %s is unavailable", b->target);
        bindings_reply(r, NULL, e == -ENOENT ? GADGET_ENOMETHOD : e == -ENOBUFS ? GADGET_EBUSY
                                                                            : GADGET_EUNAVAILABLE, msg, 0);
}
