/* kvpg: the PostgreSQL store (Store=postgresql): one connection per
 * gadgetd, driven by libpq's non-blocking API on gadgetd's event loop. The
 * gadgets' kv operations queue on it, each gadget's in order, the gadgets
 * taking turns, one query at a time; each is one statement in its own
 * transaction, answered only once
 * the server reported its commit done (synchronous_commit=on). The
 * connection is made and the schema created or migrated (kvpg_sql.c) at
 * start and again after each loss, with backoff. */
#pragma once

#include <stddef.h>
#include <event2/event.h>

struct kvpg;
struct kv_backend;
struct kvpg_lease;
struct kvpg_audit;
struct kv_type;
struct store_latency;

/* Loads libpq and starts connecting to conninfo (a libpq connection string
 * or URI, e.g. "service=NAME") as node, for the n types of binding
 * (kv_job.h; ops.c's list, borrowed: static), each query's duration
 * counted in latency (borrowed; NULL: not counted). Never blocks: the
 * connection is made on base. 0, or -errno with err saying why (libpq
 * missing; a type's PostgreSQL half lacks one of its operations). */
int kvpg_new(struct event_base *base, const char *conninfo, const char *node, const struct kv_type *const *types,
             size_t n, struct store_latency *latency, struct kvpg **out, char *err, size_t errlen);
/* The gadgets' stores on pg (kv_backend.h): kv_open's backend. Its
 * free (kv_backend_free) closes the connection; what is queued or running
 * is answered cancelled. */
struct kv_backend *kvpg_backend(struct kvpg *pg);
/* Every write then carries the epoch of its gadget's lease in lease, and
 * a write of a gadget whose lease this node does not hold is refused
 * ("fenced: …") without being sent. */
void kvpg_set_lease(struct kvpg *pg, struct kvpg_lease *lease);
/* The audit's copy follows the store to another server with the kv
 * session (after a failover: kvpg_audit_follow). au must outlive pg (the
 * bindings free pg first). */
void kvpg_set_audit(struct kvpg *pg, struct kvpg_audit *au);
