/* kvpg_lease: which node runs each gadget (Store=postgresql). A second
 * PostgreSQL connection, non-blocking on the loop as kvpg's, holds one
 * session advisory lock per gadget this node owns; taking one bumps the
 * gadget's epoch in gadgetd_owner (kvpg_sql.c), which every kv write of
 * this node carries and the store checks (fencing). Every poll period the
 * gadgets wanted and not held are tried, up to KVPG_LEASE_BATCH of them in
 * one statement (gadgetd_lease_take_many), so that a round costs a few
 * statements however many gadgets are declared; when none is to be tried
 * the session is pinged, so a lost store is noticed within
 * KVPG_LEASE_POLL_MS + KVPG_LEASE_TIMEOUT_MS. The session's end (lost,
 * ended by the server, this gadgetd dying) is every lease's end. */
#pragma once

#include <stdint.h>
#include <event2/event.h>

#include "contract.h"

#define KVPG_LEASE_POLL_MS 250
/* How often the node says it is alive (gadgetd_node.last_seen) and reads
 * the other nodes; a node unseen for KVPG_NODE_DOWN_MS counts as down. */
#define KVPG_LEASE_BEAT_MS 1000
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
};

/* What the owner of the units is told, always on the loop. */
struct kvpg_lease_hooks {
        /* This node now owns gadget, at epoch. */
        void (*granted)(void *arg, const char *gadget, int64_t epoch);
        /* It owns it no more: its session is gone (why). */
        void (*lost)(void *arg, const char *gadget, const char *why);
        /* Another node owns it (node "" and epoch 0: no one yet). */
        void (*owner)(void *arg, const char *gadget, const char *node, int64_t epoch);
        /* Then, if it cannot be taken for a reason of the store (why):
         * PostgreSQL's lock table is full, or the lease is free but this
         * node holds its share of that table; node is the owner as last
         * recorded ("" if none). */
        void (*full)(void *arg, const char *gadget, const char *node, const char *why);
        void *arg;
};

/* Starts connecting to conninfo as node, reachable by other nodes at peer
 * ("" if not; libpq loaded: kvpg_new first), its queries' durations
 * counted in latency (borrowed; NULL: not counted). 0 or -ENOMEM. */
int kvpg_lease_new(struct event_base *base, const char *conninfo, const char *node, const char *peer,
                   struct store_latency *latency, struct kvpg_lease **out);
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
/* Ends the session, and with it every lease. */
void kvpg_lease_free(struct kvpg_lease *l);
void kvpg_lease_set_hooks(struct kvpg_lease *l, const struct kvpg_lease_hooks *hooks);
/* fn(arg) each time the lease session connects (kvpg_set_lease's: the
 * store is reachable again, so the kv connection need not wait out its
 * backoff). */
void kvpg_lease_on_connect(struct kvpg_lease *l, void (*fn)(void *arg), void *arg);
/* This node wants to run gadget: rank 0 takes a free lease at once, rank r
 * after seeing it free at 2 r polls in a row (Nodes= order), so that a
 * node earlier in the list that is up takes it first; for 3 s after losing
 * its session, 4 polls more, so that a node whose store link is healthy
 * takes it first. Again: the
 * rank changes. 0 or -ENOMEM. */
int kvpg_lease_want(struct kvpg_lease *l, const char *gadget, unsigned rank);
/* It wants it no more: a held lease is given back. */
void kvpg_lease_release(struct kvpg_lease *l, const char *gadget);
/* The epoch of the lease held on gadget, 0 if none is. */
int64_t kvpg_lease_epoch(const struct kvpg_lease *l, const char *gadget);
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
