/* kvpg_lease: which node runs each gadget (Store=postgresql). A second
 * PostgreSQL connection, non-blocking on the loop as kvpg's, holds one
 * session advisory lock per gadget this node owns; taking one bumps the
 * gadget's epoch in gadgetd_owner (kvpg_sql.c), which every kv write of
 * this node carries and the store checks (fencing). Every poll period the
 * gadgets wanted and not held are tried, one query each; when none is to
 * be tried the session is pinged, so a lost store is noticed within
 * KVPG_LEASE_POLL_MS + KVPG_LEASE_TIMEOUT_MS. The session's end (lost,
 * ended by the server, this gadgetd dying) is every lease's end. */
#pragma once

#include <stdint.h>
#include <event2/event.h>

#define KVPG_LEASE_POLL_MS 250
#define KVPG_LEASE_TIMEOUT_MS 2000
/* The rank of a node that may not run the gadget: it only reads who does. */
#define KVPG_LEASE_NEVER UINT32_MAX

struct kvpg_lease;

/* What the owner of the units is told, always on the loop. */
struct kvpg_lease_hooks {
        /* This node now owns gadget, at epoch. */
        void (*granted)(void *arg, const char *gadget, int64_t epoch);
        /* It owns it no more: its session is gone (why). */
        void (*lost)(void *arg, const char *gadget, const char *why);
        /* Another node owns it (node "" and epoch 0: no one yet). */
        void (*owner)(void *arg, const char *gadget, const char *node, int64_t epoch);
        void *arg;
};

/* Starts connecting to conninfo as node (libpq loaded: kvpg_new first).
 * 0 or -ENOMEM. */
int kvpg_lease_new(struct event_base *base, const char *conninfo, const char *node, struct kvpg_lease **out);
/* Ends the session, and with it every lease. */
void kvpg_lease_free(struct kvpg_lease *l);
void kvpg_lease_set_hooks(struct kvpg_lease *l, const struct kvpg_lease_hooks *hooks);
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
