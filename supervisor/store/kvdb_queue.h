/* kvdb_queue: the SQLite backend of the gadgets' stores (kv_backend.h):
 * each gadget's database, STATE_DIR/kv/GADGET.sqlite (kvdb.c), on a thread
 * of its own that opens it at its first job, runs the jobs in order, and
 * hands each back to the loop through an eventfd. */
#pragma once

#include <event2/event.h>

struct kv_backend;

/* The backend for the stores under state_dir, answered on base. 0 or
 * -ENOMEM. */
int kvdb_backend_new(struct event_base *base, const char *state_dir, struct kv_backend **out);
