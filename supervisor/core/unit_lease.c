/* unit_lease: a unit on a node that shares a PostgreSQL store runs only
 * while this node holds its lease (bindings/kvpg_lease.h); until then it
 * is "remote", saying which node runs it. */
#include "core_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bindings/kvpg_lease.h"
#include "policy.h"
#include "system/log.h"

/* Its rank in Nodes= on this node (0: first, or no Nodes=); -1: this node
 * is not listed. */
static int rank_of(const struct unit *u)
{
        const struct policy *p = u->policy;
        if (!p->n_nodes)
                return 0;
        for (size_t i = 0; i < p->n_nodes; i++)
                if (strcmp(p->nodes[i], u->core->cfg.node) == 0)
                        return (int)i;
        return -1;
}

bool unit_lease_wait(struct unit *u)
{
        struct kvpg_lease *l = u->core->bindings.lease;
        if (!l)
                return false;
        int rank = rank_of(u);
        if (u->leased && rank >= 0)
                return false;
        if (u->leased) {
                /* A new policy's Nodes= leaves this node out: given back. */
                kvpg_lease_release(l, u->policy->name);
                u->leased = false;
        }
        u->state = UNIT_REMOTE;
        /* Why it never starts here when Nodes= does not name this node:
         * its lease is only looked at (who holds it), never taken. */
        if (rank < 0 && !u->owner[0])
                snprintf(u->cause, sizeof u->cause, "not allowed on node %s (Nodes=)", u->core->cfg.node);
        if (kvpg_lease_want(l, u->policy->name, rank < 0 ? KVPG_LEASE_NEVER : (unsigned)rank) < 0) {
                snprintf(u->cause, sizeof u->cause, "waits for its lease in the store: out of memory");
                return true;
        }
        if (rank < 0)
                return true;
        if (!u->owner[0])
                snprintf(u->cause, sizeof u->cause, "waits for its lease in the store");
        return true;
}

void unit_lease_release(struct unit *u)
{
        struct kvpg_lease *l = u->core->bindings.lease;
        if (!l)
                return;
        kvpg_lease_release(l, u->policy->name);
        u->leased = false;
        if (u->state == UNIT_REMOTE)
                u->state = UNIT_STOPPED;
}

static void on_granted(void *arg, const char *gadget, int64_t epoch)
{
        struct unit *u = core_find(arg, gadget);
        if (!u) {
                kvpg_lease_release(((struct core *)arg)->bindings.lease, gadget);
                return;
        }
        u->leased = true;
        u->owner[0] = '\0';
        if (u->state == UNIT_REMOTE && u->want_running)
                unit_start(u);
}

static void on_lost(void *arg, const char *gadget, const char *why)
{
        struct unit *u = core_find(arg, gadget);
        if (!u)
                return;
        u->leased = false;
        if (u->child.pid > 0) {
                /* Why at once and without a grace period: another node may
                 * take the lease as soon as the session is gone, and two
                 * running copies must not both answer calls. */
                log_msg(L_ERR, gadget, "%s: killing it", why);
                snprintf(u->cause, sizeof u->cause, "%.250s", why);
                unit_kill(u, NULL);
        }
}

static void on_owner(void *arg, const char *gadget, const char *node, int64_t epoch)
{
        struct unit *u = core_find(arg, gadget);
        if (!u)
                return;
        snprintf(u->owner, sizeof u->owner, "%s", node);
        u->owner_epoch = epoch;
        if (u->state != UNIT_REMOTE)
                return;
        if (node[0])
                snprintf(u->cause, sizeof u->cause, "runs on node %s (epoch %" PRId64 ")", node, epoch);
        else if (rank_of(u) < 0)
                snprintf(u->cause, sizeof u->cause, "not allowed on node %s (Nodes=)", u->core->cfg.node);
        else
                snprintf(u->cause, sizeof u->cause, "waits for its lease in the store");
}

void core_lease_hooks(struct core *c)
{
        if (!c->bindings.lease)
                return;
        const struct kvpg_lease_hooks hooks = { .granted = on_granted, .lost = on_lost, .owner = on_owner, .arg = c };
        kvpg_lease_set_hooks(c->bindings.lease, &hooks);
}
