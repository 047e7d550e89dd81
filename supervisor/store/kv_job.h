/* kv_job: one operation on a gadget's store — an operation of a type of
 * binding (struct kv_type: kv, alarm) as its caller fills it in and its
 * backend answers it — shared by the job API (kv.c) and both backends
 * (kvdb_queue.c: SQLite, kvpg*.c: PostgreSQL). Its fields are every
 * type's: a type uses those its operations need, and adds none. Pure
 * code: no I/O, no loop. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "system/mailbox.h"

/* A key's bytes at most (kv's keys, alarms' ids). */
#define KV_MAX_KEY 512

/* A put's quota: MaxKeys= and MaxBytes= (an alarm set's: MaxAlarms= in
 * max_keys). */
struct kvdb_quota {
        uint64_t max_keys;   /* UINT64_MAX = no limit */
        uint64_t max_bytes;  /* keys + values */
};

#define KV_BINDING_MAX 72

/* A row a type's list or look-up brings back: a key (id), two numbers
 * (at, due), a count (attempts) and a value (payload). As an alarm
 * (kvdb_alarm.c, kvpg_alarm.c): its id, the time the gadget set (ms
 * since the epoch), when delivery is next tried (due: at, or later after
 * failed attempts), and its payload (a packed Value). A new type's rows
 * use it as theirs. */
struct kv_row {
        const void *id;
        size_t idlen;
        int64_t at, due;
        unsigned attempts;
        const void *payload;
        size_t plen;
};

/* One operation of a type of binding on the store: its name (in
 * messages, and how each backend's half of the type finds its code for
 * it) and whether it writes (a lost connection leaves its outcome
 * unknown; on PostgreSQL it is fenced by the gadget's lease). */
struct kv_op {
        const char *name;
        bool writes;
};

/* A batch's operations at most (kv's cas and batch): its results' bits
 * fit one 64-bit word, and its statement stays small. */
#define KV_BATCH_MAX 64

/* One operation of a batch (kv's cas is a batch of one): unconditional
 * (a put: value, a delete: no value) or conditional (cas: applied only if
 * the key's stored value is expect byte for byte, or, without expect, if
 * the key does not exist; then it writes value, or deletes the key
 * without one). Values are packed Values, as stored. */
struct kv_batch_op {
        bool cas;
        const void *key;
        size_t klen;
        const void *expect;   /* NULL: the key must not exist (cas) */
        size_t elen;
        const void *value;    /* NULL: delete the key */
        size_t vlen;
};

struct kvdb_type;
struct kvpg_type;

/* A type of binding that keeps its state on the gadget's store, as the
 * kv and alarm bindings share it: its operations, and its two halves,
 * one per backend (kvdb_TYPE.c: its SQLite tables and statements,
 * kvpg_TYPE.c: its PostgreSQL queries), each of which names the
 * operations it carries out. Defined in its binding type's file
 * (bind_TYPE.c), whose table (struct binding_type_ops) names it: the
 * backends are opened with every type of that list (bindings.c), and
 * refuse to open if a half lacks one of its type's operations. A new
 * type is its three files; nothing here changes. */
struct kv_type {
        const char *name;
        const struct kv_op *ops;
        size_t n_ops;
        const struct kvdb_type *db;
        const struct kvpg_type *pg;
};

/* The types a store holds at most. */
#define KV_TYPES_MAX 8

/* Declares the two halves of type T, kvdb_T.c's kvdb_T_type and
 * kvpg_T.c's kvpg_T_type (for bind_T.c, which names them in its struct
 * kv_type, and the halves' own files). */
#define KV_TYPE_HALVES(T) \
        extern const struct kvdb_type kvdb_##T##_type; \
        extern const struct kvpg_type kvpg_##T##_type

/* The index of name among a half's n operation names, -1 if it has none. */
int kv_op_find(const char *const *names, size_t n, const char *name);
/* Whether every operation of type is among a half's n names; if not,
 * why names the first one missing (half: "SQLite", "PostgreSQL"). */
bool kv_type_covered(const struct kv_type *type, const char *half, const char *const *names, size_t n, char *why,
                     size_t len);

/* The bytes of rows one list returns at most (with its envelope, one
 * frame holds them). */
#define KV_ROWS_BYTES (1024u * 1024u)

struct kv;
struct kv_job;

/* Called on the loop with the finished job (freed after it returns).
 * job->err is -ECANCELED when the store closed first. */
typedef void kv_done_fn(struct kv_job *job);

/* One operation: the arguments the caller fills, the results the backend
 * fills. Which each operation uses is said as kv's and alarm's do. */
struct kv_job {
        const struct kv_type *type;
        const struct kv_op *op;       /* one of type's */
        char binding[KV_BINDING_MAX];
        uint8_t key[KV_MAX_KEY];      /* get, put, delete: the key; list: the prefix */
        size_t klen;
        uint8_t after[KV_MAX_KEY];    /* list: the cursor */
        size_t alen;
        unsigned limit;               /* list */
        /* alarms: key is the id; val the payload (set, settle; next
         * fills it); list fills keys with kv_job_add_row's rows. Any
         * type: a row's numbers and count, as these. */
        int64_t at, due;              /* set: at; next fills both; settle: the delivered one's */
        unsigned attempts;            /* next */
        int64_t retry_due;            /* settle: -1 deletes, else the next try's time */
        struct kvdb_quota quota;      /* put, cas, batch */
        /* put: the value (owned); get: the value found; cas, batch: the
         * operations (kv_job_add_op), then, if a cas did not match, its
         * key's stored value (existed: whether there is one). */
        void *val;
        size_t vlen;
        int err;                      /* 0 or -errno */
        bool open_failed;             /* err is the database's open failing */
        bool existed;                 /* delete; cas, batch: see val */
        int failed;                   /* cas, batch: the operation not applied (its cas did not match,
                                       * or its put passed the quota), -1: all were */
        uint64_t existed_ops;         /* cas, batch, all applied: bit i, whether op i's key existed */
        bool more;                    /* list: keys remain after these */
        uint8_t *keys;                /* list: n_keys of (2-byte length, bytes) */
        size_t keys_len, n_keys;
        char why[256];                /* PostgreSQL: what failed, with libpq's or the server's reason */
        kv_done_fn *done;
        void *arg;
        struct kv_job *next;          /* the backend's queue */
        struct mailbox_item finished; /* SQLite: handed back to the loop (kvdb_queue.c) */
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

/* A job for type's operation op (its name) on binding, zeroed otherwise.
 * NULL if out of memory, or if type has no operation op (its caller's
 * mistake: fail closed). */
struct kv_job *kv_job_new(const struct kv_type *type, const char *op, const char *binding, kv_done_fn *done,
                          void *arg);
/* Whether job is the operation named op. */
bool kv_job_is(const struct kv_job *job, const char *op);
void kv_job_free(struct kv_job *job);
/* What answers the caller of a running job when its store closes first:
 * a copy of its type, op, binding, caller and store, with err -ECANCELED. The
 * backend sets the job's own done to NULL, so that it answers no one. */
struct kv_job kv_job_stand_in(const struct kv_job *running);
/* Appends op to a cas or batch job's operations (job->val): 0, or
 * -ENOMEM (the job unchanged). */
int kv_job_add_op(struct kv_job *job, const struct kv_batch_op *op);
/* Walks a cas or batch job's operations: 1 with the next (pointing into
 * job->val), 0 at the end, -EIO if they are not well formed. Their form
 * (each backend reads it: the PostgreSQL function gadgetd_kv_batch too):
 * flags (1 byte: 1 cas, 2 expect, 4 value), the key's length (2 bytes,
 * big-endian), the key, the expect's length (4), expect, the value's
 * length (4), the value. */
int kv_job_next_op(const struct kv_job *job, size_t *pos, struct kv_batch_op *op);

/* Appends one listed key to a list job's keys (sets job->err to -ENOMEM
 * if it cannot); a callback of kvdb_list. */
void kv_job_add_key(void *job, const void *key, size_t klen);
/* Walks the keys of a finished list job: 1 with the next key, 0 at the end. */
int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen);
/* Appends row a (its id, at and payload) to a list job's rows (sets
 * job->more instead once KV_ROWS_BYTES would be passed). */
void kv_job_add_row(void *job, const struct kv_row *a);
/* Walks the rows of a finished list: 1 with the next, 0 at the end. */
int kv_job_next_row(const struct kv_job *job, size_t *pos, struct kv_row *a);
/* Fills a look-up job's key, numbers, count and value from a (a copy);
 * both are callbacks of a type's list and look-up (kvdb_alarm.c). */
void kv_job_take_row(void *job, const struct kv_row *a);
