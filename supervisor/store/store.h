/* store: where the gadgets' durable state lives — each gadget's kv and
 * alarm bindings on its own SQLite database, or all of them on one shared
 * PostgreSQL store (Store=postgresql) — and, on a shared store, the leases
 * that say which node runs which gadget and the copy of every node's audit.
 * The one header other folders include; it has three faces:
 *   - the job API (kv.h, kv_job.h): a gadget's store, its bounded queue,
 *     the kv and alarm operations as jobs (the kv and alarm bindings,
 *     alarms/), on one of two backends (kv_backend.h): SQLite
 *     (kvdb_queue.h) or PostgreSQL (kvpg.h);
 *   - the lease API (kvpg_lease.h): which node runs a gadget, its epoch,
 *     the nodes (core/unit_lease.c, cluster/forward.c, gadgetctl nodes);
 *   - the audit-copy API (kvpg_audit.h): the audit's copy in the shared
 *     store and its reads (control/: gadgetctl audit of every node);
 *   - its queries' durations by kind (store_latency.h), for the metrics.
 * bindings.c opens the backend (kvdb_queue.h, or kvpg.h for the shared
 * store) with the types of binding kept on it (ops.c's list of their
 * struct kv_type) and frees it (kv.h). The files behind these (kvdb and its types
 * kvdb_kv, kvdb_alarm; kvpg_job and its type kvpg_alarm, kvpg_lanes,
 * kvpg_sql, kvpg_wants, pgconn) are the store's own. */
#pragma once

#include "kv.h"
#include "kvdb_queue.h"
#include "kvpg.h"
#include "kvpg_audit.h"
#include "kvpg_lease.h"
#include "store_latency.h"
