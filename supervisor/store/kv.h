/* kv: a gadget's kv store as gadgetd's loop sees it. Every operation goes
 * through a queue bounded per binding either to the gadget's own SQLite
 * thread, the result coming back to the loop through an eventfd, or
 * (Store=postgresql) to gadgetd's PostgreSQL connection (kvpg.c), driven
 * by the loop without ever blocking it. Nothing that can wait on the disk
 * or the network — opening the database, a durable commit, a list — runs
 * on the loop. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "kvdb.h"

#define KV_BINDING_MAX 72

/* The alarm operations (kvdb_alarm.c, kvpg_job.c) share the queue: an
 * alarm binding lives in the gadget's store beside its kv bindings. */
enum kv_op { KV_GET, KV_PUT, KV_DELETE, KV_LIST, KV_ALARM_SET, KV_ALARM_CANCEL, KV_ALARM_LIST, KV_ALARM_NEXT,
             KV_ALARM_SETTLE };

/* Whether op writes (a lost connection leaves its outcome unknown; on
 * PostgreSQL it is fenced by the gadget's lease), and its name. */
bool kv_op_writes(enum kv_op op);
const char *kv_op_name(enum kv_op op);

/* The bytes of alarms one list returns at most (with its envelope, one
 * frame holds them). */
#define KV_ALARM_LIST_BYTES (1024u * 1024u)

struct kv;
struct kv_job;
struct kvpg;

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
        /* alarms: key is the id; val the payload (set, settle; next
         * fills it); list fills keys with kv_job_add_alarm's rows */
        int64_t at, due;              /* set: at; next fills both; settle: the delivered one's */
        unsigned attempts;            /* next */
        int64_t retry_due;            /* settle: -1 deletes, else the next try's time */
        struct kvdb_quota quota;      /* put */
        void *val;                    /* put: the value (owned); get: the value found */
        size_t vlen;
        int err;                      /* 0 or -errno */
        bool open_failed;             /* err is the database's open failing */
        bool existed;                 /* delete */
        bool more;                    /* list: keys remain after these */
        uint8_t *keys;                /* list: n_keys of (2-byte length, bytes) */
        size_t keys_len, n_keys;
        char why[256];                /* PostgreSQL: what failed, with libpq's or the server's reason */
        kv_done_fn *done;
        void *arg;
        struct kv_job *next;
        /* Filled by kv_submit for the PostgreSQL store. */
        struct kv *kv;                /* the store it was queued to */
        const char *gadget;           /* the store's gadget (until the query is sent) */
        int64_t epoch;                /* a write: its gadget's lease when it was queued (kvpg_submit) */
        kv_done_fn *user_done;        /* done as the caller set it */
};

/* The errors of the PostgreSQL store besides the operations' own:
 * KV_EUNAVAILABLE: nothing was done (the store is unreachable, or the
 * connection was lost before the operation could start or before a read
 * was answered); KV_EUNKNOWN: the connection was lost while a put or a
 * delete was being committed, so whether it took effect is unknown. job->why
 * says more. */
#define KV_EUNAVAILABLE (-ENOTCONN)
#define KV_EUNKNOWN (-ECONNRESET)

/* Prepares the store of gadget: with pg (borrowed, it outlives the store)
 * its operations go to PostgreSQL; else to its SQLite database, which a
 * thread opens at its first operation (no disk access here). 0 or
 * -errno. */
int kv_open(struct event_base *base, const char *state_dir, const char *gadget, struct kvpg *pg,
            struct kv **out);
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
/* Whether nothing is queued on kv or running there. */
bool kv_idle(const struct kv *kv);
/* Queues job; the store owns it from then on and calls job->done once.
 * -EBUSY (the caller keeps job) when max_pending operations of its binding
 * are already queued or running; KV_EUNAVAILABLE (the caller keeps job,
 * job->why says why) when the PostgreSQL store is down. */
int kv_submit(struct kv *kv, struct kv_job *job, unsigned max_pending);
/* Appends alarm a to a list job's rows (sets job->more instead once
 * KV_ALARM_LIST_BYTES would be passed). */
void kv_job_add_alarm(void *job, const struct kvdb_alarm *a);
/* Walks the rows of a finished alarm list: 1 with the next, 0 at the end. */
int kv_job_next_alarm(const struct kv_job *job, size_t *pos, struct kvdb_alarm *a);
/* Fills a next job's id, times and payload from a (a copy); both are
 * callbacks of kvdb_alarm_list and kvdb_alarm_next. */
void kv_job_take_alarm(void *job, const struct kvdb_alarm *a);
/* Carries out an alarm job on db (on the SQLite thread): 0 or -errno. */
int kv_alarm_run(struct kvdb *db, struct kv_job *job);
/* Walks the keys of a finished list job: 1 with the next key, 0 at the end. */
int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen);
