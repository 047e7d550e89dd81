/* kvdb_alarm: the alarms of alarm bindings in the gadget's SQLite
 * database (its table alarm), on the kv thread. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_job.h"
#include "kvdb.h"
#include "kvdb_int.h"

KV_TYPE_HALVES(alarm);

/* at is the time the gadget set, due when delivery is next tried (at, or
 * later after failures). */
static const char schema[] =
        "CREATE TABLE IF NOT EXISTS alarm (binding TEXT NOT NULL, id TEXT NOT NULL, at INTEGER NOT NULL,"
        " due INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, payload BLOB NOT NULL,"
        " PRIMARY KEY (binding, id)) WITHOUT ROWID;"
        "CREATE INDEX IF NOT EXISTS alarm_due ON alarm (binding, due);";

enum { A_COUNT, A_SET, A_CANCEL, A_LIST, A_NEXT, A_DONE, A_RETRY, A_N };

static const char *const stmts[A_N] = {
        [A_COUNT] = "SELECT count(*) FROM alarm WHERE binding = ?1 AND id <> ?2",
        [A_SET] = "INSERT INTO alarm (binding, id, at, due, attempts, payload) VALUES (?1, ?2, ?3, ?3, 0, ?4)"
                  " ON CONFLICT (binding, id) DO UPDATE SET at = excluded.at, due = excluded.due,"
                  " attempts = 0, payload = excluded.payload",
        [A_CANCEL] = "DELETE FROM alarm WHERE binding = ?1 AND id = ?2 RETURNING 1",
        [A_LIST] = "SELECT id, at, due, attempts, payload FROM alarm WHERE binding = ?1 AND id > ?2"
                   " ORDER BY id LIMIT ?3",
        [A_NEXT] = "SELECT id, at, due, attempts, payload FROM alarm WHERE binding = ?1 ORDER BY due, id LIMIT 1",
        [A_DONE] = "DELETE FROM alarm WHERE binding = ?1 AND id = ?2 AND at = ?3 AND due = ?4 AND payload = ?5",
        [A_RETRY] = "UPDATE alarm SET due = ?6, attempts = attempts + 1 WHERE binding = ?1 AND id = ?2"
                    " AND at = ?3 AND due = ?4 AND payload = ?5",
};

_Static_assert(A_N <= KVDB_TYPE_ST, "room for the alarm statements");

/* Resets st and binds binding and id (?1, ?2). */
static sqlite3_stmt *start(struct kvdb *db, int which, const char *binding, const void *id, size_t idlen)
{
        sqlite3_stmt *st = kvdb_st(db, &kvdb_alarm_type, which);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, idlen ? id : "", (int)idlen, SQLITE_STATIC);
        return st;
}

/* Steps a statement to its end; 0 or -errno. */
static int finish(sqlite3_stmt *st)
{
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW)
                ;
        sqlite3_reset(st);
        return r == SQLITE_DONE ? 0 : kvdb_sql_err(r);
}

static int set_txn(struct kvdb *db, const char *binding, const struct kv_row *a, uint64_t max)
{
        sqlite3_stmt *st = start(db, A_COUNT, binding, a->id, a->idlen);
        int r = sqlite3_step(st), e;
        int64_t others = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        sqlite3_reset(st);
        if (others < 0)
                return kvdb_sql_err(r);
        if ((uint64_t)others + 1 > max)
                return -EDQUOT;
        st = start(db, A_SET, binding, a->id, a->idlen);
        sqlite3_bind_int64(st, 3, a->at);
        sqlite3_bind_blob(st, 4, a->plen ? a->payload : "", (int)a->plen, SQLITE_STATIC);
        if ((e = finish(st)) < 0)
                return e;
        return kvdb_exec(db, "COMMIT");
}

/* Sets alarm a of binding (replacing one of its id: attempts start over),
 * durably. -EDQUOT when the binding would hold more than max alarms. */
static int alarm_set(struct kvdb *db, const char *binding, const struct kv_row *a, uint64_t max)
{
        /* The count and the write commit together: two sets cannot both
         * take the last place. */
        int e = kvdb_exec(db, "BEGIN IMMEDIATE");
        if (e < 0)
                return e;
        if ((e = set_txn(db, binding, a, max)) < 0)
                kvdb_exec(db, "ROLLBACK");
        return e;
}

/* Deletes alarm id, durably; *existed says whether there was one. */
static int alarm_cancel(struct kvdb *db, const char *binding, const void *id, size_t idlen, bool *existed)
{
        sqlite3_stmt *st = start(db, A_CANCEL, binding, id, idlen);
        int r = sqlite3_step(st);
        bool found = r == SQLITE_ROW;
        int e = finish(st);
        if (e == 0)
                *existed = found;
        return e;
}

/* Passes each row of st (id, at, due, attempts, payload) to fn, at most
 * limit; *more if another followed. */
static int rows(sqlite3_stmt *st, unsigned limit, void (*fn)(void *arg, const struct kv_row *a), void *arg,
                bool *more)
{
        unsigned n = 0;
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
                if (n == limit) {
                        *more = true;
                        break;
                }
                struct kv_row a = {
                        .id = sqlite3_column_blob(st, 0),
                        .idlen = (size_t)sqlite3_column_bytes(st, 0),
                        .at = sqlite3_column_int64(st, 1),
                        .due = sqlite3_column_int64(st, 2),
                        .attempts = (unsigned)sqlite3_column_int64(st, 3),
                        .payload = sqlite3_column_blob(st, 4),
                        .plen = (size_t)sqlite3_column_bytes(st, 4),
                };
                fn(arg, &a);
                n++;
        }
        sqlite3_reset(st);
        if (r != SQLITE_ROW && r != SQLITE_DONE)
                return kvdb_sql_err(r);
        return n ? 0 : -ENOENT;
}

/* The alarms of binding with ids greater than after (alen 0: from the
 * first), in id order, at most limit, each passed to fn; *more tells if
 * some remain. */
static int alarm_list(struct kvdb *db, const char *binding, const void *after, size_t alen, unsigned limit,
                    void (*fn)(void *arg, const struct kv_row *a), void *arg, bool *more)
{
        sqlite3_stmt *st = start(db, A_LIST, binding, after, alen);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)limit + 1);
        *more = false;
        int e = rows(st, limit, fn, arg, more);
        return e == -ENOENT ? 0 : e;
}

/* The binding's alarm due first, passed to fn; -ENOENT if it has none. */
static int alarm_next(struct kvdb *db, const char *binding, void (*fn)(void *arg, const struct kv_row *a),
                    void *arg)
{
        bool more = false;
        return rows(start(db, A_NEXT, binding, NULL, 0), 1, fn, arg, &more);
}

/* A delivery of alarm a ended: delivered (retry_due < 0) deletes it, else
 * it is next tried at retry_due with one more attempt counted; either
 * only if the alarm is still the one delivered (same at and due: the
 * gadget did not set it again meanwhile). Durable. */
static int alarm_settle(struct kvdb *db, const char *binding, const struct kv_row *a, int64_t retry_due)
{
        sqlite3_stmt *st = start(db, retry_due < 0 ? A_DONE : A_RETRY, binding, a->id, a->idlen);
        sqlite3_bind_int64(st, 3, a->at);
        sqlite3_bind_int64(st, 4, a->due);
        sqlite3_bind_blob(st, 5, a->plen ? a->payload : "", (int)a->plen, SQLITE_STATIC);
        if (retry_due >= 0)
                sqlite3_bind_int64(st, 6, retry_due);
        return finish(st);
}

/* The operations it carries out, by their names (bind_alarm.c's kv_type). */
enum { OP_SET, OP_CANCEL, OP_LIST, OP_NEXT, OP_SETTLE, OP_COUNT };
static const char *const ops[OP_COUNT] = {
        [OP_SET] = "alarm set", [OP_CANCEL] = "alarm cancel", [OP_LIST] = "alarm list",
        [OP_NEXT] = "alarm look-up", [OP_SETTLE] = "alarm delivery's record",
};

/* Carries out an alarm job (on the thread). */
static int run(struct kvdb *db, struct kv_job *job, int op)
{
        struct kv_row a = { .id = job->key, .idlen = job->klen, .at = job->at, .due = job->due,
                                .payload = job->val, .plen = job->vlen };
        switch (op) {
        case OP_SET: return alarm_set(db, job->binding, &a, job->quota.max_keys);
        case OP_CANCEL: return alarm_cancel(db, job->binding, job->key, job->klen, &job->existed);
        case OP_LIST:
                return alarm_list(db, job->binding, job->after, job->alen, job->limit, kv_job_add_row,
                                       job, &job->more);
        case OP_NEXT: return alarm_next(db, job->binding, kv_job_take_row, job);
        case OP_SETTLE: return alarm_settle(db, job->binding, &a, job->retry_due);
        default: return -EINVAL;
        }
}

const struct kvdb_type kvdb_alarm_type = { .schema = schema, .stmts = stmts, .n_stmts = A_N, .ops = ops,
                                           .n_ops = OP_COUNT, .run = run };
