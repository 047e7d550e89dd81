/* kvdb_kv: the kv bindings' keys and values in the gadget's SQLite
 * database (tables kv and usage), on the kv thread: durable puts within
 * the binding's quota, deletes that commit on a full disk (kvdb.c's
 * reserve), bounded lists, and cas and batches: operations applied in
 * one transaction, all or none. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "kv_job.h"
#include "kvdb.h"
#include "kvdb_int.h"

enum { ST_GET, ST_PUT, ST_DEL, ST_LIST_GE, ST_LIST_GT, ST_OLD, ST_USAGE, ST_SET_USAGE, ST_COUNT };
_Static_assert(ST_COUNT <= KVDB_TYPE_ST, "room for the kv statements");

KV_TYPE_HALVES(kv);

#define ST(db, which) kvdb_st(db, &kvdb_kv_type, which)

static const char schema[] =
        "CREATE TABLE IF NOT EXISTS kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL,"
        " bytes INTEGER NOT NULL);";

/* list reads the range [lo, hi) or (lo, hi) of the primary key's index:
 * what it returns plus one row, whatever the table holds. */
static const char *const stmts[ST_COUNT] = {
        [ST_GET] = "SELECT value FROM kv WHERE binding = ?1 AND key = ?2",
        [ST_PUT] = "INSERT INTO kv (binding, key, value) VALUES (?1, ?2, ?3)"
                   " ON CONFLICT (binding, key) DO UPDATE SET value = excluded.value",
        [ST_DEL] = "DELETE FROM kv WHERE binding = ?1 AND key = ?2 RETURNING length(key) + length(value)",
        [ST_LIST_GE] = "SELECT key FROM kv WHERE binding = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4",
        [ST_LIST_GT] = "SELECT key FROM kv WHERE binding = ?1 AND key > ?2 AND key < ?3 ORDER BY key LIMIT ?4",
        [ST_OLD] = "SELECT length(key) + length(value) FROM kv WHERE binding = ?1 AND key = ?2",
        [ST_USAGE] = "SELECT keys, bytes FROM usage WHERE binding = ?1",
        [ST_SET_USAGE] = "INSERT INTO usage (binding, keys, bytes) VALUES (?1, ?2, ?3)"
                         " ON CONFLICT (binding) DO UPDATE SET keys = excluded.keys, bytes = excluded.bytes",
};

static void bind_key(sqlite3_stmt *st, const char *binding, const void *key, size_t klen)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, klen ? key : "", (int)klen, SQLITE_STATIC);
}

int kvdb_get(struct kvdb *db, const char *binding, const void *key, size_t klen, void **val, size_t *vlen)
{
        sqlite3_stmt *st = ST(db, ST_GET);
        bind_key(st, binding, key, klen);
        int r = sqlite3_step(st), e = 0;
        void *copy = NULL;
        size_t n = 0;
        if (r != SQLITE_ROW) {
                e = r == SQLITE_DONE ? -ENOENT : kvdb_sql_err(r);
                goto out;
        }
        n = (size_t)sqlite3_column_bytes(st, 0);
        if (!(copy = malloc(n ? n : 1))) {
                e = -ENOMEM;
                goto out;
        }
        if (n)
                memcpy(copy, sqlite3_column_blob(st, 0), n);
        *val = copy;
        *vlen = n;
out:
        sqlite3_reset(st);
        return e;
}

/* The binding's key count and bytes (0, 0 before its first put). */
static int usage_get(struct kvdb *db, const char *binding, int64_t *keys, int64_t *bytes)
{
        sqlite3_stmt *st = ST(db, ST_USAGE);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        int r = sqlite3_step(st);
        *keys = *bytes = 0;
        if (r == SQLITE_ROW) {
                *keys = sqlite3_column_int64(st, 0);
                *bytes = sqlite3_column_int64(st, 1);
        }
        sqlite3_reset(st);
        return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
}

static int usage_set(struct kvdb *db, const char *binding, int64_t keys, int64_t bytes)
{
        sqlite3_stmt *st = ST(db, ST_SET_USAGE);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, keys);
        sqlite3_bind_int64(st, 3, bytes);
        int r = sqlite3_step(st);
        sqlite3_reset(st);
        return r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
}

/* Steps a statement that writes; 0 or -errno. */
static int step_done(sqlite3_stmt *st)
{
        int r = sqlite3_step(st);
        sqlite3_reset(st);
        return r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
}

/* The put's transaction: the quota check, the write and the usage update
 * commit together or not at all. */
static int put_txn(struct kvdb *db, const char *binding, const void *key, size_t klen, const void *val,
                   size_t vlen, const struct kvdb_quota *q)
{
        int64_t keys, bytes, old = -1;
        int e;

        if ((e = kvdb_exec(db, "BEGIN IMMEDIATE")) < 0)
                return e;
        if ((e = usage_get(db, binding, &keys, &bytes)) < 0)
                goto out;
        bind_key(ST(db, ST_OLD), binding, key, klen);
        if (sqlite3_step(ST(db, ST_OLD)) == SQLITE_ROW)
                old = sqlite3_column_int64(ST(db, ST_OLD), 0);
        sqlite3_reset(ST(db, ST_OLD));
        if (old < 0)
                keys++;
        bytes += (int64_t)(klen + vlen) - (old < 0 ? 0 : old);
        if ((uint64_t)keys > q->max_keys || (uint64_t)bytes > q->max_bytes) {
                e = -EDQUOT;
                goto out;
        }
        bind_key(ST(db, ST_PUT), binding, key, klen);
        sqlite3_bind_blob(ST(db, ST_PUT), 3, vlen ? val : "", (int)vlen, SQLITE_STATIC);
        if ((e = step_done(ST(db, ST_PUT))) < 0 || (e = usage_set(db, binding, keys, bytes)) < 0)
                goto out;
        e = kvdb_exec(db, "COMMIT");
out:
        if (e < 0)
                kvdb_exec(db, "ROLLBACK");
        return e;
}

int kvdb_put(struct kvdb *db, const char *binding, const void *key, size_t klen, const void *val, size_t vlen,
             const struct kvdb_quota *q)
{
        /* A put never takes the deletes' reserve. */
        if (!db->reserved && kvdb_reserve_fill(db) < 0)
                return -ENOSPC;
        return put_txn(db, binding, key, klen, val, vlen, q);
}

static int delete_txn(struct kvdb *db, const char *binding, const void *key, size_t klen, bool *existed)
{
        sqlite3_stmt *st = ST(db, ST_DEL);
        int64_t keys, bytes, freed;
        int e, r;

        if ((e = kvdb_exec(db, "BEGIN IMMEDIATE")) < 0)
                return e;
        bind_key(st, binding, key, klen);
        r = sqlite3_step(st);
        freed = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        while (r == SQLITE_ROW)
                r = sqlite3_step(st);
        sqlite3_reset(st);
        if (r != SQLITE_DONE) {
                e = kvdb_sql_err(r);
                goto out;
        }
        if (freed >= 0 && ((e = usage_get(db, binding, &keys, &bytes)) < 0 ||
                           (e = usage_set(db, binding, keys - 1, bytes - freed)) < 0))
                goto out;
        if ((e = kvdb_exec(db, "COMMIT")) == 0)
                *existed = freed >= 0;
out:
        if (e < 0)
                kvdb_exec(db, "ROLLBACK");
        return e;
}

int kvdb_delete(struct kvdb *db, const char *binding, const void *key, size_t klen, bool *existed)
{
        int e = delete_txn(db, binding, key, klen, existed);
        /* Also when the reserve is not whole: a refill that failed may
         * have kept part of it. */
        if (e == -ENOSPC && db->reserve_fd >= 0) {
                kvdb_reserve_release(db);
                kvdb_exec(db, "PRAGMA wal_checkpoint(PASSIVE)");
                e = delete_txn(db, binding, key, klen, existed);
        }
        if (e == 0 && !db->reserved)
                kvdb_reserve_fill(db);
        return e;
}

size_t kvdb_prefix_end(const void *prefix, size_t plen, uint8_t *end)
{
        const uint8_t *p = prefix;
        while (plen > 0 && p[plen - 1] == 0xff)
                plen--;
        if (plen == 0)
                return 0;
        memcpy(end, p, plen);
        end[plen - 1]++;
        return plen;
}

int kvdb_list(struct kvdb *db, const char *binding, const void *prefix, size_t plen, const void *after,
              size_t alen, unsigned limit, void (*fn)(void *arg, const void *key, size_t klen), void *arg,
              bool *more)
{
        /* A prefix without successor ends past every key: KV_MAX_KEY + 1
         * bytes of 0xff. */
        uint8_t end[KV_MAX_KEY + 1];
        size_t elen = kvdb_prefix_end(prefix, plen, end);
        if (elen == 0)
                memset(end, 0xff, elen = sizeof end);
        /* Start after the cursor when it lies within the range, else at the
         * prefix itself. */
        size_t n_cmp = alen < plen ? alen : plen;
        int c = memcmp(after, prefix, n_cmp);
        bool from_cursor = alen > 0 && (c > 0 || (c == 0 && alen >= plen));
        sqlite3_stmt *st = ST(db, from_cursor ? ST_LIST_GT : ST_LIST_GE);

        bind_key(st, binding, from_cursor ? after : prefix, from_cursor ? alen : plen);
        sqlite3_bind_blob(st, 3, end, (int)elen, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)limit + 1);
        unsigned n = 0;
        int r;
        *more = false;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
                if (n == limit) {
                        *more = true;
                        break;
                }
                fn(arg, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
                n++;
        }
        sqlite3_reset(st);
        return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
}

/* Carries out one operation of a batch inside its transaction, keys and
 * bytes being the binding's usage so far: 1 if a cas did not match (its
 * key's stored value left in job->val, existed saying whether there is
 * one), 0 done (*existed: whether the key was there), or -errno (-EDQUOT:
 * a write past the quota). */
static int batch_op(struct kvdb *db, struct kv_job *job, const struct kv_batch_op *op, int64_t *keys,
                    int64_t *bytes, bool *existed)
{
        sqlite3_stmt *get = ST(db, ST_GET);
        int64_t old = -1;
        int r, e = 0;
        bind_key(get, job->binding, op->key, op->klen);
        r = sqlite3_step(get);
        if (r != SQLITE_ROW && r != SQLITE_DONE) {
                e = kvdb_sql_err(r);
                goto out;
        }
        const void *cur = r == SQLITE_ROW ? sqlite3_column_blob(get, 0) : NULL;
        size_t clen = r == SQLITE_ROW ? (size_t)sqlite3_column_bytes(get, 0) : 0;
        *existed = r == SQLITE_ROW;
        if (*existed)
                old = (int64_t)(op->klen + clen);
        /* A cas matches the stored bytes exactly, or no key for no expect. */
        if (op->cas && (*existed != (op->expect != NULL) ||
                        (*existed && (clen != op->elen || (clen && memcmp(cur, op->expect, clen) != 0))))) {
                void *copy = malloc(clen ? clen : 1);
                if (!copy) {
                        e = -ENOMEM;
                        goto out;
                }
                if (clen)
                        memcpy(copy, cur, clen);
                free(job->val);
                job->val = copy;
                job->vlen = clen;
                job->existed = *existed;
                e = 1;
                goto out;
        }
        sqlite3_reset(get);
        if (!op->value) {
                if (!*existed)
                        goto out;
                bind_key(ST(db, ST_DEL), job->binding, op->key, op->klen);
                r = sqlite3_step(ST(db, ST_DEL));
                while (r == SQLITE_ROW)
                        r = sqlite3_step(ST(db, ST_DEL));
                sqlite3_reset(ST(db, ST_DEL));
                e = r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
                (*keys)--;
                *bytes -= old;
                goto out;
        }
        /* Each write is checked as a put alone would be, counting the
         * batch's earlier operations. */
        if (old < 0)
                (*keys)++;
        *bytes += (int64_t)(op->klen + op->vlen) - (old < 0 ? 0 : old);
        if ((uint64_t)*keys > job->quota.max_keys || (uint64_t)*bytes > job->quota.max_bytes) {
                e = -EDQUOT;
                goto out;
        }
        bind_key(ST(db, ST_PUT), job->binding, op->key, op->klen);
        sqlite3_bind_blob(ST(db, ST_PUT), 3, op->vlen ? op->value : "", (int)op->vlen, SQLITE_STATIC);
        e = step_done(ST(db, ST_PUT));
out:
        sqlite3_reset(get);
        return e;
}

/* A batch's transaction: every operation applied and committed, or none
 * (a cas that did not match, a write past the quota, an error: rolled
 * back, job->failed naming the operation). */
static int batch_txn(struct kvdb *db, struct kv_job *job)
{
        struct kv_batch_op op;
        int64_t keys, bytes;
        size_t pos = 0;
        int e, i = 0, more;
        bool existed = false;

        job->failed = -1;
        job->existed_ops = 0;
        if ((e = kvdb_exec(db, "BEGIN IMMEDIATE")) < 0)
                return e;
        if ((e = usage_get(db, job->binding, &keys, &bytes)) < 0)
                goto out;
        while ((more = kv_job_next_op(job, &pos, &op)) > 0) {
                if (i >= KV_BATCH_MAX) {
                        e = -E2BIG;
                        goto out;
                }
                if ((e = batch_op(db, job, &op, &keys, &bytes, &existed)) != 0) {
                        job->failed = i;
                        goto out;
                }
                job->existed_ops |= (uint64_t)existed << i++;
        }
        if ((e = more) < 0 || (e = usage_set(db, job->binding, keys, bytes)) < 0)
                goto out;
        e = kvdb_exec(db, "COMMIT");
out:
        if (e != 0)
                kvdb_exec(db, "ROLLBACK");
        if (e < 0 && e != -EDQUOT)
                job->failed = -1;
        return e > 0 ? 0 : e;
}

/* Whether a batch only deletes (then it may take the deletes' reserve). */
static bool batch_only_deletes(const struct kv_job *job)
{
        struct kv_batch_op op;
        size_t pos = 0;
        int more;
        while ((more = kv_job_next_op(job, &pos, &op)) > 0)
                if (op.value)
                        return false;
        return more == 0;
}

/* A cas or a batch, durably committed (or nothing written) before it
 * returns: on a full disk one that only deletes commits as a delete does,
 * any other fails as a put does. */
static int kvdb_batch(struct kvdb *db, struct kv_job *job)
{
        bool deletes = batch_only_deletes(job);
        if (!deletes && !db->reserved && kvdb_reserve_fill(db) < 0)
                return -ENOSPC;
        int e = batch_txn(db, job);
        if (e == -ENOSPC && deletes && db->reserve_fd >= 0) {
                kvdb_reserve_release(db);
                kvdb_exec(db, "PRAGMA wal_checkpoint(PASSIVE)");
                e = batch_txn(db, job);
        }
        if (e == 0 && deletes && !db->reserved)
                kvdb_reserve_fill(db);
        return e;
}

/* The operations it carries out, by their names (bind_kv.c's kv_type). */
enum { OP_GET, OP_PUT, OP_DELETE, OP_LIST, OP_CAS, OP_BATCH, OP_COUNT };
static const char *const ops[OP_COUNT] = {
        [OP_GET] = "get", [OP_PUT] = "put", [OP_DELETE] = "delete", [OP_LIST] = "list",
        [OP_CAS] = "cas", [OP_BATCH] = "batch",
};

/* Carries out a kv job (on the thread). */
static int run(struct kvdb *db, struct kv_job *job, int op)
{
        switch (op) {
        case OP_GET: return kvdb_get(db, job->binding, job->key, job->klen, &job->val, &job->vlen);
        case OP_PUT: return kvdb_put(db, job->binding, job->key, job->klen, job->val, job->vlen, &job->quota);
        case OP_DELETE: return kvdb_delete(db, job->binding, job->key, job->klen, &job->existed);
        case OP_LIST:
                return kvdb_list(db, job->binding, job->key, job->klen, job->after, job->alen, job->limit,
                                 kv_job_add_key, job, &job->more);
        case OP_CAS:
        case OP_BATCH: return kvdb_batch(db, job);
        default: return -EINVAL;
        }
}

const struct kvdb_type kvdb_kv_type = { .schema = schema, .stmts = stmts, .n_stmts = ST_COUNT, .ops = ops,
                                        .n_ops = OP_COUNT, .run = run };
