/* kv: a gadget's kv store as gadgetd's loop sees it. Every operation goes
 * to the gadget's own SQLite thread through a queue bounded per binding;
 * the result comes back to the loop through an eventfd. Nothing that can
 * wait on the disk — opening the database, a durable commit, a list — runs
 * on the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "kvdb.h"

#define KV_BINDING_MAX 72

enum kv_op { KV_GET, KV_PUT, KV_DELETE, KV_LIST };

struct kv;
struct kv_job;

/* Called on the loop with the finished job (freed after it returns).
 * job->err is -ECANCELED when the store closed first. */
typedef void kv_done_fn(struct kv_job *job);

/* One operation: the arguments the caller fills, the results the thread
 * fills. */
struct kv_job {
        enum kv_op op;
        char binding[KV_BINDING_MAX];
        uint8_t key[KV_MAX_KEY];      /* get, put, delete: the key; list: the prefix */
        size_t klen;
        uint8_t after[KV_MAX_KEY];    /* list: the cursor */
        size_t alen;
        unsigned limit;               /* list */
        struct kvdb_quota quota;      /* put */
        void *val;                    /* put: the value (owned); get: the value found */
        size_t vlen;
        int err;                      /* 0 or -errno */
        bool open_failed;             /* err is the database's open failing */
        bool existed;                 /* delete */
        bool more;                    /* list: keys remain after these */
        uint8_t *keys;                /* list: n_keys of (2-byte length, bytes) */
        size_t keys_len, n_keys;
        kv_done_fn *done;
        void *arg;
        struct kv_job *next;
};

/* Prepares the store of gadget (no disk access: the thread opens the
 * database at its first operation). 0 or -errno. */
int kv_open(struct event_base *base, const char *state_dir, const char *gadget, struct kv **out);
/* Cancels what is queued (each done with -ECANCELED, now), leaves the
 * thread to finish the operation it runs, close the database and end. */
void kv_close(struct kv *kv);
/* A job for op on binding, zeroed otherwise. NULL if out of memory. */
struct kv_job *kv_job_new(enum kv_op op, const char *binding, kv_done_fn *done, void *arg);
void kv_job_free(struct kv_job *job);
/* Whether max_pending operations of binding are queued or running; if so
 * the refusal is counted (and logged, at most once per few seconds). For
 * refusing a call before its value is copied. */
bool kv_full(struct kv *kv, const char *binding, unsigned max_pending);
/* Queues job; the store owns it from then on and calls job->done once.
 * -EBUSY (the caller keeps job) when max_pending operations of its binding
 * are already queued or running. */
int kv_submit(struct kv *kv, struct kv_job *job, unsigned max_pending);
/* Walks the keys of a finished list job: 1 with the next key, 0 at the end. */
int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen);
