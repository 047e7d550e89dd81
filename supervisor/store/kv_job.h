/* kv_job: one operation on a gadget's store — a kv or alarm operation as
 * its caller fills it in and its backend answers it — shared by the job
 * API (kv.c) and both backends (kvdb_queue.c: SQLite, kvpg*.c:
 * PostgreSQL). Pure code: no I/O, no loop. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvdb.h"

#define KV_BINDING_MAX 72

/* One alarm of an alarm binding (kvdb_alarm.c, kvpg_alarm.c): its id,
 * the time the gadget set (ms since the epoch), when delivery is next
 * tried (due: at, or later after failed attempts), and its payload (a
 * packed Value). */
struct kvdb_alarm {
        const void *id;
        size_t idlen;
        int64_t at, due;
        unsigned attempts;
        const void *payload;
        size_t plen;
};
/* An id: 1 to this many characters (of UTF-8: at most KV_MAX_KEY bytes). */
#define KVDB_ALARM_ID_MAX 128

/* The alarm operations (kvdb_alarm.c, kvpg_alarm.c) share the queue: an
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

/* Called on the loop with the finished job (freed after it returns).
 * job->err is -ECANCELED when the store closed first. */
typedef void kv_done_fn(struct kv_job *job);

/* One operation: the arguments the caller fills, the results the backend
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
        struct kv_job *next;          /* the backend's queue */
        /* Filled by kv_submit. */
        struct kv *kv;                /* the store it was queued to */
        const char *gadget;           /* the store's gadget (PostgreSQL: until the query is sent) */
        kv_done_fn *user_done;        /* done as the caller set it */
        int64_t epoch;                /* PostgreSQL, a write: its gadget's lease when it was queued */
};

/* The errors of the PostgreSQL store besides the operations' own:
 * KV_EUNAVAILABLE: nothing was done (the store is unreachable, or the
 * connection was lost before the operation could start or before a read
 * was answered); KV_EUNKNOWN: the connection was lost while a put or a
 * delete was being committed, so whether it took effect is unknown. job->why
 * says more. */
#define KV_EUNAVAILABLE (-ENOTCONN)
#define KV_EUNKNOWN (-ECONNRESET)

/* A job for op on binding, zeroed otherwise. NULL if out of memory. */
struct kv_job *kv_job_new(enum kv_op op, const char *binding, kv_done_fn *done, void *arg);
void kv_job_free(struct kv_job *job);
/* What answers the caller of a running job when its store closes first:
 * a copy of its op, binding, caller and store, with err -ECANCELED. The
 * backend sets the job's own done to NULL, so that it answers no one. */
struct kv_job kv_job_stand_in(const struct kv_job *running);
/* Appends one listed key to a list job's keys (sets job->err to -ENOMEM
 * if it cannot); a callback of kvdb_list. */
void kv_job_add_key(void *job, const void *key, size_t klen);
/* Walks the keys of a finished list job: 1 with the next key, 0 at the end. */
int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen);
/* Appends alarm a to a list job's rows (sets job->more instead once
 * KV_ALARM_LIST_BYTES would be passed). */
void kv_job_add_alarm(void *job, const struct kvdb_alarm *a);
/* Walks the rows of a finished alarm list: 1 with the next, 0 at the end. */
int kv_job_next_alarm(const struct kv_job *job, size_t *pos, struct kvdb_alarm *a);
/* Fills a next job's id, times and payload from a (a copy); both are
 * callbacks of kvdb_alarm.c's list and next. */
void kv_job_take_alarm(void *job, const struct kvdb_alarm *a);
