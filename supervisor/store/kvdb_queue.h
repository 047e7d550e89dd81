/* kvdb_queue: the SQLite backend of the gadgets' stores (kv_backend.h):
 * each gadget's database, STATE_DIR/kv/GADGET.sqlite (kvdb.c), on a thread
 * of its own that opens it at its first job, runs the jobs in order, and
 * hands each back to the loop through a mailbox (system/mailbox.h). */
#pragma once

#include <stddef.h>
#include <event2/event.h>

struct kv_backend;
struct kv_type;

/* The backend for the stores under state_dir, answered on base, each
 * database holding the n types of binding (kv_job.h; ops.c's list). 0,
 * or -errno with why: -ENOMEM, -EINVAL when a type's SQLite half lacks
 * one of its operations or there are too many types. */
int kvdb_backend_new(struct event_base *base, const char *state_dir, const struct kv_type *const *types,
                     size_t n, struct kv_backend **out, char *why, size_t len);
