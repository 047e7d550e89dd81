/* kv: a gadget's store as gadgetd's loop sees it: its kv and alarm
 * operations as jobs (kv_job.h), on a queue bounded per binding, carried
 * out by the store's backend (kv_backend.h): the gadget's own SQLite
 * thread (kvdb_queue.c) or, with Store=postgresql, gadgetd's PostgreSQL
 * connection (kvpg.c), driven by the loop without ever blocking it.
 * Nothing that can wait on the disk or the network — opening the
 * database, a durable commit, a list — runs on the loop. */
#pragma once

#include <stdbool.h>
#include <event2/event.h>

#include "kv_job.h"

struct kv_backend;

/* Prepares the store of gadget on be (borrowed, it outlives the store): no
 * disk or network access here. 0 or -errno. */
int kv_open(struct event_base *base, const char *gadget, struct kv_backend *be, struct kv **out);
/* Answers what is queued or running now (each done with -ECANCELED, a
 * finished one with its outcome) and frees the store; a running
 * operation is left to end on its own, answering no one. */
void kv_close(struct kv *kv);
/* Whether max_pending operations of binding are queued or running; if so
 * the refusal is counted (and logged, at most once per few seconds). For
 * refusing a call before its value is copied. */
bool kv_full(struct kv *kv, const char *binding, unsigned max_pending);
/* Whether nothing is queued on kv or running there. */
bool kv_idle(const struct kv *kv);
/* Queues job; the store owns it from then on and calls job->done once.
 * -EBUSY (the caller keeps job) when max_pending operations of its binding
 * are already queued or running; KV_EUNAVAILABLE (the caller keeps job,
 * job->why says why) when the PostgreSQL store is down. */
int kv_submit(struct kv *kv, struct kv_job *job, unsigned max_pending);
/* Ends a backend (kvdb_backend_new's, or the PostgreSQL store's:
 * kvpg_backend); NULL is fine. */
void kv_backend_free(struct kv_backend *be);
