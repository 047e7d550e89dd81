/* unit_lease: a unit on a node that shares a PostgreSQL store runs only
 * while this node holds its lease (store/kvpg_lease.h); until then it
 * is "remote", saying which node runs it. */
#include "core_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "link/peer.h"
#include "store/store.h"
#include "contract.h"
#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"

/* A move waits for its node this long beyond the store's mark. */
#define MOVE_SLACK_MS 2000

/* gadgetctl move on its way: the store marked it, then the stop, then the
 * wait for the new owner. */
struct unit_move {
        char node[64];
        unit_move_fn done;
        void *arg;
        bool marked;              /* the store says move_to = node */
        bool stopping;            /* the move's own stop is being asked */
        struct event *timer;      /* the move's whole time */
};

/* node's rank in p's Nodes= (0: first, or no Nodes=); -1: not listed. */
static int rank_in(const struct policy *p, const char *node)
{
        if (!p->n_nodes)
                return 0;
        for (size_t i = 0; i < p->n_nodes; i++)
                if (strcmp(p->nodes[i], node) == 0)
                        return (int)i;
        return -1;
}

/* Its rank on this node. */
static int rank_of(const struct unit *u)
{
        return rank_in(u->policy, u->core->cfg.node);
}

bool unit_lease_wait(struct unit *u)
{
        struct kvpg_lease *l = u->core->bindings.lease;
        if (!l)
                return false;
        int rank = rank_of(u);
        if (u->leased && rank >= 0)
                return false;
        bool was_remote = u->state == UNIT_REMOTE;
        if (u->leased) {
                /* A new policy's Nodes= leaves this node out: given back. */
                kvpg_lease_release(l, u->policy->name);
                u->leased = false;
        }
        unit_set_state(u, UNIT_REMOTE);
        /* The store named another node while this one was still on its
         * way out (on_owner found it not remote yet, and says nothing
         * again until the owner changes): said now, or its cause would
         * stay "lost its store lease" for as long as that node runs it.
         * A gadget's end waits for its reap (a pidfd) over loop turns,
         * in which the lease session's report may come. */
        if (!was_remote && u->owner[0] && strcmp(u->owner, u->core->cfg.node) != 0)
                snprintf(u->cause, sizeof u->cause, "runs on node %s (epoch %" PRId64 ")", u->owner, u->owner_epoch);
        /* Calls that waited for its start here (its lease was lost while
         * it stopped for IdleStop=, or while it started): told at once,
         * not left to their CallTimeout; called again, they go to the
         * node that holds it then. */
        if (!was_remote && !TAILQ_EMPTY(&u->pending))
                calls_pending_fail(u, "this node lost its lease in the store (call again: it runs on another "
                                      "node then)");
        /* Why it never starts here when Nodes= does not name this node:
         * its lease is only looked at (who holds it), never taken. */
        if (rank < 0 && !u->owner[0])
                snprintf(u->cause, sizeof u->cause, "not allowed on node %s (Nodes=)", u->core->cfg.node);
        if (kvpg_lease_want_after(l, u->policy->name, u->policy->nodes,
                                  rank < 0 ? KVPG_LEASE_NEVER : (unsigned)rank) < 0) {
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
                unit_set_state(u, UNIT_STOPPED);
}

/* An adopted unit waits no more: killed (why), or ready (why NULL). */
static void adopt_end(struct unit *u, const char *why)
{
        u->lease_adopting = false;
        if (why) {
                log_msg(L_ERR, u->policy->name, "%s: killing its adopted worker", why);
                snprintf(u->cause, sizeof u->cause, "%.250s", why);
                unit_kill(u, NULL);
                return;
        }
        peer_hold(u->run->peer, false);
        unit_set_state(u, UNIT_READY);
        calls_pending_flush(u);
        /* Taken back at rank 0 (the mark kept the others off); its own
         * rank again from now. */
        if (rank_of(u) > 0)
                kvpg_lease_want_after(u->core->bindings.lease, u->policy->name, u->policy->nodes,
                                      (unsigned)rank_of(u));
        log_msg(L_INFO, u->policy->name, "its lease taken back after gadgetd's re-exec (pid %d)", (int)u->run->child.pid);
}

static void adopt_deadline(evutil_socket_t fd, short what, void *arg)
{
        struct core *c = arg;
        c->adopt_deadline_armed = false;
        for (struct unit *u = c->units; u; u = u->next)
                if (u->lease_adopting)
                        adopt_end(u, "its lease was not back in time after gadgetd's re-exec (another node may "
                                     "take it now)");
}

void unit_lease_adopted(struct unit *u)
{
        struct core *c = u->core;
        uint64_t now = monotime_ms();
        /* Why held: until the lease is back, nothing it asks is done and
         * no call reaches it (they wait, as for a start), so it cannot act
         * as the owner, whichever node the store names. */
        peer_hold(u->run->peer, true);
        unit_set_state(u, UNIT_STARTING);
        u->lease_adopting = true;
        if (!c->adopt_deadline_armed) {
                struct timeval tv = timer_tv_ms(c->adopt_lease_until > now ? c->adopt_lease_until - now : 0);
                c->adopt_deadline_armed = event_base_once(c->base, -1, EV_TIMEOUT, adopt_deadline, c, &tv) == 0;
        }
        if (!c->adopt_deadline_armed || kvpg_lease_want(c->bindings.lease, u->policy->name, 0) < 0)
                adopt_end(u, "out of memory");
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
        if (u->lease_adopting) {
                adopt_end(u, NULL);
        } else if (u->state == UNIT_REMOTE && u->want_running) {
                unit_start(u);
                /* A takeover's start: calls wait for it (those that could
                 * not reach the last owner among them), as for an
                 * on-demand start. */
                if (u->state == UNIT_STARTING)
                        u->waking = true;
        } else if (u->state == UNIT_REMOTE && u->dormant) {
                /* Start=on-demand (or idle when its lease came back): held
                 * here, started by its first call. */
                unit_set_state(u, UNIT_IDLE);
                u->cause[0] = '\0';
                if (!TAILQ_EMPTY(&u->pending))
                        unit_wake(u, NULL); /* calls waited for a node to run it */
        }
        unit_events_lease(u, true);
}

static void on_lost(void *arg, const char *gadget, const char *why)
{
        struct unit *u = core_find(arg, gadget);
        if (!u)
                return;
        u->leased = false;
        unit_events_lease(u, false);
        u->lease_adopting = false;
        bool running = u->run->child.pid > 0;
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_LEASE_LOST, .level = running ? L_ERR : L_WARN,
                                                        .run = running ? u->run->number : 0,
                                                        .pid = running ? u->run->child.pid : 0 },
                       "%s%s", why, running ? ": killing it" : "");
        if (running) {
                /* Why at once and without a grace period: another node may
                 * take the lease once this node's expires at the store
                 * (KVPG_LEASE_MARGIN_MS after its own deadline, or at once
                 * if the store ended it, or once this node's lease session
                 * ended: its next round), and two running copies must not
                 * both answer calls. */
                unit_switch_drop(u, why);
                if (u->old_run)
                        unit_run_kill(u->old_run, why);
                snprintf(u->cause, sizeof u->cause, "%.250s", why);
                unit_kill(u, NULL);
        } else if (u->state == UNIT_IDLE) {
                unit_lease_wait(u); /* remote until it holds the lease again */
        }
}

static void move_end(struct unit *u, int code, const char *msg);

static void on_owner(void *arg, const char *gadget, const char *node, int64_t epoch)
{
        struct unit *u = core_find(arg, gadget);
        if (!u)
                return;
        snprintf(u->owner, sizeof u->owner, "%s", node);
        u->owner_epoch = epoch;
        /* The store names this node until the next image takes the lease
         * again (the row of its previous session); another node: never
         * two owners. */
        if (u->lease_adopting && node[0] && strcmp(node, u->core->cfg.node) != 0) {
                char why[200];
                snprintf(why, sizeof why, "node %.64s holds its lease after gadgetd's re-exec", node);
                adopt_end(u, why);
        }
        if (u->move && u->move->marked && strcmp(node, u->move->node) == 0) {
                char msg[200];
                snprintf(msg, sizeof msg, "gadget %s runs on node %s now (epoch %" PRId64 ")", gadget, node, epoch);
                move_end(u, 0, msg);
        }
        if (u->state != UNIT_REMOTE)
                return;
        calls_pending_forward(u);
        if (node[0])
                snprintf(u->cause, sizeof u->cause, "runs on node %s (epoch %" PRId64 ")", node, epoch);
        else if (rank_of(u) < 0)
                snprintf(u->cause, sizeof u->cause, "not allowed on node %s (Nodes=)", u->core->cfg.node);
        else
                snprintf(u->cause, sizeof u->cause, "waits for its lease in the store");
}

void core_lease_check(struct core *c)
{
        /* Why at every use and not only by the lease's timer: a node
         * resumed after a pause (SIGSTOP, a VM's migration) runs whatever
         * its loop has ready in any order, and must serve nothing of a
         * lease that may have expired before it notices. */
        if (c->bindings.lease)
                kvpg_lease_check(c->bindings.lease);
}

void core_lease_hooks(struct core *c)
{
        if (!c->bindings.lease)
                return;
        const struct kvpg_lease_hooks hooks = { .granted = on_granted, .lost = on_lost, .owner = on_owner,
                                                .arg = c };
        kvpg_lease_set_hooks(c->bindings.lease, &hooks);
}

/* Ends u's move: done told once, the move freed. */
static void move_end(struct unit *u, int code, const char *msg)
{
        struct unit_move *m = u->move;
        u->move = NULL;
        event_free(m->timer);
        m->done(m->arg, code, msg);
        free(m);
}

static void move_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        char msg[300];
        snprintf(msg, sizeof msg, "node %s did not take gadget %s within %d s; any node may take it now",
                 u->move->node, u->policy->name, (KVPG_MOVE_MS + MOVE_SLACK_MS) / 1000);
        move_end(u, GADGET_ETIMEOUT, msg);
}

/* The store marked the move (why NULL): the gadget stops here. */
static void move_marked(void *arg, const char *why)
{
        struct unit *u = arg;
        if (!u->move)
                return;
        if (why) {
                move_end(u, GADGET_EUNAVAILABLE, why);
                return;
        }
        struct unit_move *m = u->move;
        m->marked = true;
        char stop[120];
        snprintf(stop, sizeof stop, "moving to node %s", m->node);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_MOVED, .level = L_INFO, .run = u->run->number,
                                                        .node = m->node }, "%s (gadgetctl move)", stop);
        m->stopping = true;
        unit_stop(u, stop);
        if (u->move == m)
                m->stopping = false;
}

int unit_move(struct unit *u, const char *node, unit_move_fn done, void *arg, char *msg, size_t len)
{
        struct core *c = u->core;
        struct kvpg_lease *l = c->bindings.lease;
        const struct kvpg_node *n = l ? kvpg_lease_node(l, node) : NULL;
        const char *name = u->policy->name;
        if (l && !u->leased && u->owner[0] && c->remote.move)
                return c->remote.move(c->remote.arg, u->owner, name, node, done, arg, msg, len);
        if (!l || !u->leased) {
                if (!l)
                        snprintf(msg, len, "gadgetd does not share a store with other nodes (Store=postgresql)");
                else if (u->owner[0])
                        snprintf(msg, len, "gadget %s runs on node %s, and this node has no link to other nodes "
                                 "(PeerCertificate=)", name, u->owner);
                else
                        snprintf(msg, len, "gadget %s runs on no node now (%.200s)", name, u->cause);
                return GADGET_EUNAVAILABLE;
        }
        if (strcmp(node, c->cfg.node) == 0) {
                snprintf(msg, len, "gadget %s runs on node %s already", name, node);
                return GADGET_EINVAL;
        }
        if (!n || n->age_ms + kvpg_lease_nodes_age(l) > KVPG_NODE_DOWN_MS) {
                snprintf(msg, len, "node %.64s is %s (gadgetctl nodes)", node,
                         n ? "down: not seen in the store lately" : "not known in the store");
                return GADGET_EUNAVAILABLE;
        }
        if (rank_in(u->policy, node) < 0) {
                /* EINVAL, not EDENIED: on the control socket a denial means
                 * the caller may not use gadgetd at all (gadgetctl's exit
                 * status 4); this is a node the policy rules out. */
                snprintf(msg, len, "gadget %s may not run on node %s (its Nodes=)", name, node);
                return GADGET_EINVAL;
        }
        if (u->move || u->state != UNIT_READY) {
                snprintf(msg, len, "gadget %s is %s", name, u->move ? "being moved already" : unit_state_name(u->state));
                return GADGET_EBUSY;
        }
        struct unit_move *m = calloc(1, sizeof *m);
        if (!m || !(m->timer = evtimer_new(c->base, move_timeout, u))) {
                free(m);
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        snprintf(m->node, sizeof m->node, "%s", node);
        m->done = done;
        m->arg = arg;
        u->move = m;
        if (kvpg_lease_move(l, name, node, move_marked, u) < 0) {
                u->move = NULL;
                event_free(m->timer);
                free(m);
                snprintf(msg, len, "gadget %s does not run on this node", name);
                return GADGET_EUNAVAILABLE;
        }
        timer_arm_ms(m->timer, KVPG_MOVE_MS + MOVE_SLACK_MS);
        return 0;
}

void unit_lease_stopped(struct unit *u)
{
        /* Its lease went back: it waits for it again, and the store lets
         * only the move's node take it for now. */
        if (u->move && u->move->marked)
                unit_start(u);
}

void unit_lease_stop(struct unit *u)
{
        /* Another stop (gadgetctl stop, a reload) than the move's own: the
         * move ends, and the gadget stays stopped here. */
        if (u->move && !u->move->stopping) {
                char msg[160];
                snprintf(msg, sizeof msg, "gadget %s was stopped during its move", u->policy->name);
                move_end(u, GADGET_EFAILED, msg);
        }
}

void unit_lease_gone(struct unit *u)
{
        if (u->move) {
                char msg[120];
                snprintf(msg, sizeof msg, "gadget %s was unloaded during its move", u->policy->name);
                move_end(u, GADGET_EGONE, msg);
        }
}

size_t core_nodes(const struct core *c, const struct kvpg_node **nodes, const char **self, uint64_t *since_ms)
{
        *nodes = NULL;
        *self = c->bindings.lease ? c->cfg.node : NULL;
        *since_ms = c->bindings.lease ? kvpg_lease_nodes_age(c->bindings.lease) : 0;
        return c->bindings.lease ? kvpg_lease_nodes(c->bindings.lease, nodes) : 0;
}

const char *core_store_warning(const struct core *c)
{
        return c->bindings.lease ? kvpg_lease_warning(c->bindings.lease) : "";
}

const struct core_forwarded *core_forwarded(const struct core *c)
{
        return &c->forwarded;
}

void core_forwarded_refused(struct core *c, int code)
{
        c->forwarded.calls[0][unit_stats_outcome_of(code)]++;
}

const struct store_latency *core_store_latency(const struct core *c)
{
        return c->bindings.store_latency;
}

int core_forget_node(struct core *c, const char *node, void (*done)(void *arg, int code, const char *msg), void *arg,
                     char *msg, size_t len)
{
        struct kvpg_lease *l = c->bindings.lease;
        if (!l) {
                snprintf(msg, len, "gadgetd does not share a store with other nodes (Store=postgresql)");
                return GADGET_EUNAVAILABLE;
        }
        /* Whether it is live is the store's to say (kvpg_lease_forget): its
         * clock, not this node's last read, a beat old. */
        int e = kvpg_lease_forget(l, node, done, arg);
        if (e == -EINVAL)
                snprintf(msg, len, "node %s is this node", node);
        else if (e == -EBUSY)
                snprintf(msg, len, "another gadgetctl nodes forget is on its way: try again when it ends");
        else if (e < 0)
                snprintf(msg, len, "the store is out of reach now: try again");
        return e == -EINVAL ? GADGET_EINVAL : e == -EBUSY ? GADGET_EBUSY : e < 0 ? GADGET_EUNAVAILABLE : 0;
}

const char *core_node(const struct core *c)
{
        return c->bindings.lease ? c->cfg.node : "";
}
