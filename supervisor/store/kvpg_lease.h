/* kvpg_lease: which node runs each gadget (Store=postgresql). A second
 * PostgreSQL connection, non-blocking on the loop as kvpg's, keeps this
 * node's own lease: one row of gadgetd_node whose lease_until (the
 * server's clock) it renews every round in ONE statement; a gadget's
 * owner row names the node and its incarnation, and is live while that
 * node's lease is (kvpg_sql.c, version 8). Taking a gadget bumps its epoch
 * in gadgetd_owner, which every kv write of this node carries and the
 * store checks with the node's lease (fencing). A round costs O(nodes):
 * the renewal, which reads every node back; a wanted gadget not held is
 * looked at again only when its owner's node changed (died, gave leases
 * back), up to KVPG_LEASE_BATCH in one statement.
 *
 * Never two owners at once, by construction: the store lets another node
 * take this node's gadgets only once lease_until has passed by the
 * server's clock, set to now() + KVPG_LEASE_TTL_MS by a renewal whose
 * now() is after this node sent it; this node stops serving (hooks->lost
 * for every gadget) at KVPG_LEASE_VALID_MS after sending the last renewal
 * the store acknowledged, by its own monotonic clock, and checks that at
 * every use too (kvpg_lease_check, kvpg_lease_epoch), not only by a timer,
 * so that a node resumed after a pause serves nothing before it notices.
 * The assumption: the two clocks' rates differ by less than
 * KVPG_LEASE_MARGIN_MS over a TTL (bounded drift, ~8%); they need not be
 * synchronised. The server's clock must not be stepped (slewed is fine).
 *
 * A dead node's lease ends sooner than its TTL when its lease session
 * ends (schema 14): a killed process's socket is closed by its kernel, the
 * server's backend ends at once, and the store then reads the node as
 * dead (gadgetd_session_gone): the others take its gadgets at their next
 * round, not after the TTL. Why that is still never two owners: this
 * node's own session ends only when it dies, when it closed the session
 * itself (it ended every lease first in the same turn of the loop:
 * on_lost), or when the server ended it, which the session is set up
 * never to do over a silent network within twice the TTL (on_connected);
 * a server that ended it otherwise says so (a restart, an administrator's
 * termination) and this node ends every lease on reading it. The TTL is
 * left for what the store cannot see: a node paused, or cut off by the
 * network (LeaseTTL= of gadgetd.conf). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <event2/event.h>

#include "contract.h"

/* A round: the renewal, every KVPG_LEASE_POLL_MS; it also says the node
 * is alive (gadgetd_node.last_seen) and reads the other nodes; a node
 * unseen for KVPG_NODE_DOWN_MS counts as down. */
#define KVPG_LEASE_POLL_MS 250
/* LeasePoll='s floor: each round is a statement at the server per node. */
#define KVPG_LEASE_POLL_MIN_MS 50
/* A renewal's lease at the server: lease_until = now() + TTL. The default
 * of LeaseTTL= and its floor: the takes' lock wait and budget (200 ms
 * each, kvpg_sql.c) must fit in a round well within the lease. */
#define KVPG_LEASE_TTL_MS 1000
#define KVPG_LEASE_TTL_MAX_MS 600000
/* What this node takes off the default TTL for the clocks' drift (the
 * same share of a longer one). */
#define KVPG_LEASE_MARGIN_MS 80
/* How long after sending a renewal the store acknowledged the node
 * serves its gadgets (the default TTL's): a takeover after a node hangs
 * comes within the TTL + a round (+ 2 rounds per Nodes= rank); after it
 * dies, within a round. */
#define KVPG_LEASE_VALID_MS (KVPG_LEASE_TTL_MS - KVPG_LEASE_MARGIN_MS)
#define KVPG_NODE_DOWN_MS CONTROL_NODE_DOWN_MS
/* A node unseen for this long leaves the store's list of nodes (its row
 * is deleted at the next beat of any node): NodeForget= of gadgetd.conf,
 * at least KVPG_NODE_DOWN_MS, so that a node counted as live is never
 * forgotten. Its leases ended with its session long before. */
#define KVPG_NODE_FORGET_MS (24ull * 3600 * 1000)
/* The nodes remembered from the store (the rest are not listed). */
#define KVPG_NODES_MAX 256
/* How long a move's target alone may take the gadget's lease. */
#define KVPG_MOVE_MS 10000
#define KVPG_LEASE_TIMEOUT_MS 2000
/* The rank of a node that may not run the gadget: it only reads who does. */
#define KVPG_LEASE_NEVER UINT32_MAX

struct kvpg_lease;
struct store_latency;

/* A node that shares the store, as last read. */
struct kvpg_node {
        char name[64];
        char peer[128];          /* its PeerListen=, "" if none */
        uint64_t age_ms;         /* since it was last seen, when read */
        uint64_t leases;         /* how many leases it held then (its beat) */
        int64_t incarnation;     /* of its lease (this node: 0 while it waits to join) */
        int64_t changes;         /* its releases so far */
        bool live;               /* its lease unexpired, when read */
};

/* What the owner of the units is told, always on the loop. */
struct kvpg_lease_hooks {
        /* This node now owns gadget, at epoch. */
        void (*granted)(void *arg, const char *gadget, int64_t epoch);
        /* It owns it no more: its node lease ended or may have (why). */
        void (*lost)(void *arg, const char *gadget, const char *why);
        /* Another node owns it (node "" and epoch 0: no one yet). */
        void (*owner)(void *arg, const char *gadget, const char *node, int64_t epoch);
        void *arg;
};

/* Starts connecting to conninfo as node, reachable by other nodes at peer
 * ("" if not; libpq loaded: kvpg_new first), its queries' durations
 * counted in latency (borrowed; NULL: not counted). 0 or -ENOMEM. */
int kvpg_lease_new(struct event_base *base, const char *conninfo, const char *node, const char *peer,
                   struct store_latency *latency, struct kvpg_lease **out);
/* LeaseTTL= (KVPG_LEASE_TTL_MS to KVPG_LEASE_TTL_MAX_MS; default the
 * first): before the session connects. */
void kvpg_lease_set_ttl(struct kvpg_lease *l, unsigned ms);
/* LeasePoll= (KVPG_LEASE_POLL_MIN_MS to a quarter of the TTL; default
 * KVPG_LEASE_POLL_MS): after kvpg_lease_set_ttl. */
void kvpg_lease_set_poll(struct kvpg_lease *l, unsigned ms);
/* NodeForget= (at least KVPG_NODE_DOWN_MS; default KVPG_NODE_FORGET_MS). */
void kvpg_lease_set_forget(struct kvpg_lease *l, uint64_t ms);
/* gadgetctl nodes forget: deletes node's row from the store if it was not
 * seen for KVPG_NODE_DOWN_MS (the store's clock decides, not this node's
 * last read). done(arg, 0, msg) once it is gone, or done(arg, code, why):
 * GADGET_EBUSY it was seen lately (live), GADGET_ENOTFOUND no such node,
 * GADGET_EUNAVAILABLE the store could not be asked. 0, or -EBUSY (a
 * forget is on its way: one at a time), -EINVAL (this node), -ENOTCONN
 * (the store is out of reach now). */
int kvpg_lease_forget(struct kvpg_lease *l, const char *node, void (*done)(void *arg, int code, const char *msg),
                      void *arg);
/* Ends the session; the node's lease expires at the store after the TTL. */
void kvpg_lease_free(struct kvpg_lease *l);
void kvpg_lease_set_hooks(struct kvpg_lease *l, const struct kvpg_lease_hooks *hooks);
/* fn(arg, server) each time the lease session connects, server its
 * "HOST:PORT" (kvpg_set_lease's: the store is reachable again, so the kv
 * connection need not wait out its backoff; and it is that server, so a
 * kv connection to another one, after a failover, goes). */
void kvpg_lease_on_connect(struct kvpg_lease *l, void (*fn)(void *arg, const char *server), void *arg);
/* The longest warning kept (with its NUL): kvpg.c's longest fits, a
 * static assertion there says so. */
#define KVPG_WARNING_MAX 256
/* What the kv session found wrong with the store's replication at its
 * last connect (kvpg.c; "" if nothing), kept here for gadgetctl nodes
 * beside the nodes the lease session reads. */
void kvpg_lease_set_warning(struct kvpg_lease *l, const char *warning);
const char *kvpg_lease_warning(const struct kvpg_lease *l);
/* This node wants to run gadget: rank 0 takes a free lease at once, rank r
 * after seeing it free at 2 r polls in a row (Nodes= order), so that a
 * node earlier in the list that is up takes it first; for 3 s after losing
 * its own lease, 4 polls more, so that a node whose store link is healthy
 * takes it first. Again: the
 * rank changes. 0 or -ENOMEM. */
int kvpg_lease_want(struct kvpg_lease *l, const char *gadget, unsigned rank);
/* The same at rank r, ahead the r nodes before this one in Nodes=: a free
 * lease is taken at once (not after 2 r polls) when every one of them had
 * a lease and is read as not live at this round's renewal (dead, or hung
 * past its TTL): none of them could take it. A node not listed, or never
 * joined (starting), may come: it is waited for. ahead is copied. */
int kvpg_lease_want_after(struct kvpg_lease *l, const char *gadget, char *const *ahead, unsigned rank);
/* It wants it no more: a held lease is given back. */
void kvpg_lease_release(struct kvpg_lease *l, const char *gadget);
/* The epoch of the lease held on gadget, 0 if none is (nor any, once
 * the node's lease may have expired: kvpg_lease_check). */
int64_t kvpg_lease_epoch(struct kvpg_lease *l, const char *gadget);
/* Whether this node's lease is valid by its clock (less than
 * KVPG_LEASE_VALID_MS since the last acknowledged renewal was sent): at
 * every use of a lease (a call, a kv write). If not, every lease ends at
 * the loop's next turn (hooks->lost), not inside the caller. */
bool kvpg_lease_valid(struct kvpg_lease *l);
/* The same, but every lease ends now, before it returns (hooks->lost):
 * only where no gadget's request is being handled (a control request). */
bool kvpg_lease_check(struct kvpg_lease *l);
/* The nodes that share the store, sorted by name, as read at the last
 * beat (ages then); this node is among them once its first beat is in. */
size_t kvpg_lease_nodes(const struct kvpg_lease *l, const struct kvpg_node **nodes);
/* How long ago those were read, to add to each age_ms: the beat stops while
 * the store is out of reach, and a node must not look alive meanwhile (nor
 * this one, which the store has not seen either). */
uint64_t kvpg_lease_nodes_age(const struct kvpg_lease *l);
/* node as last read, or NULL. */
const struct kvpg_node *kvpg_lease_node(const struct kvpg_lease *l, const char *name);
/* Marks the gadget held here as moving to node for KVPG_MOVE_MS (only node
 * may take its lease then). done(arg, NULL) once the store says so, or
 * done(arg, why) if it could not: not held, the session lost. 0, or
 * -ENOENT (not held here), -EBUSY (a move of it is on its way), -ENOMEM. */
int kvpg_lease_move(struct kvpg_lease *l, const char *gadget, const char *node,
                    void (*done)(void *arg, const char *why), void *arg);
