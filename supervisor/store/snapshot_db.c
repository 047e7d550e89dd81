/* snapshot_db: a backup and a restore on a gadget's SQLite database
 * (kvdb_kv.c's tables kv and usage, kvdb_alarm.c's alarm), on the
 * snapshot's thread, through a connection of its own. Why a second
 * connection is safe: the database is in WAL mode, so the backup's read
 * transaction sees one instant while the gadget's thread goes on
 * committing; a restore's write transaction takes the write lock as any
 * put does (waiting the busy timeout for one in flight). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "kvdb.h"
#include "kvdb_int.h"
#include "snapshot.h"

static int prepare(struct kvdb *db, const char *sql, sqlite3_stmt **st)
{
        int rc = sqlite3_prepare_v3(db->db, sql, -1, 0, st, NULL);
        return rc == SQLITE_OK ? 0 : kvdb_sql_err(rc);
}

static int open_db(struct snapshot_run *run, struct kvdb **db)
{
        const struct snapshot_job *job = run->job;
        int e = kvdb_open(job->state_dir, job->gadget, job->types, job->n_types, db);
        if (e < 0)
                snprintf(run->why, sizeof run->why, "opening %s's database: %s", job->gadget, strerror(-e));
        return e;
}

/* The rows of one SELECT (binding, key[, at, due, attempts], value) as
 * records of kind. */
static int dump(struct snapshot_run *run, struct kvdb *db, const char *sql, enum backup_kind kind,
                struct backup_writer *w)
{
        sqlite3_stmt *st = NULL;
        int e = prepare(db, sql, &st), rc = SQLITE_DONE;
        while (e == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct backup_record rec = { .kind = kind };
                int vcol = kind == BACKUP_KV ? 2 : 5;
                size_t bl = (size_t)sqlite3_column_bytes(st, 0);
                if (bl > BACKUP_BINDING_MAX) {
                        e = -EINVAL;
                        break;
                }
                memcpy(rec.binding, sqlite3_column_blob(st, 0), bl);
                rec.key = sqlite3_column_blob(st, 1);
                rec.klen = (size_t)sqlite3_column_bytes(st, 1);
                if (kind == BACKUP_ALARM) {
                        rec.at = sqlite3_column_int64(st, 2);
                        rec.due = sqlite3_column_int64(st, 3);
                        rec.attempts = (uint32_t)sqlite3_column_int64(st, 4);
                }
                rec.value = sqlite3_column_blob(st, vcol);
                rec.vlen = (size_t)sqlite3_column_bytes(st, vcol);
                if ((e = backup_write(w, &rec)) < 0)
                        snprintf(run->why, sizeof run->why, "binding %s: a stored row the format cannot hold, "
                                 "or writing the file: %s", rec.binding, strerror(-e));
        }
        if (e == 0 && rc != SQLITE_DONE)
                e = kvdb_sql_err(rc);
        sqlite3_finalize(st);
        return e;
}

int snapshot_db_backup(struct snapshot_run *run, struct backup_writer *w)
{
        struct kvdb *db = NULL;
        char path[4200];
        struct stat st;
        /* A gadget that never stored anything has no database: its backup
         * is empty, and makes none. */
        snprintf(path, sizeof path, "%s/kv/%s.sqlite", run->job->state_dir, run->job->gadget);
        if (lstat(path, &st) < 0 && errno == ENOENT)
                return 0;
        int e = open_db(run, &db);
        if (e < 0)
                return e;
        /* One read transaction: the first SELECT fixes the WAL snapshot
         * both read. */
        if ((e = kvdb_exec(db, "BEGIN")) == 0) {
                e = dump(run, db, "SELECT binding, key, value FROM kv ORDER BY binding, key", BACKUP_KV, w);
                if (e == 0)
                        e = dump(run, db, "SELECT binding, id, at, due, attempts, payload FROM alarm"
                                 " ORDER BY binding, id", BACKUP_ALARM, w);
                kvdb_exec(db, "COMMIT");
        }
        if (e < 0 && !run->why[0])
                snprintf(run->why, sizeof run->why, "reading %s's database: %s", run->job->gadget, strerror(-e));
        kvdb_close(db);
        return e;
}

static int insert(struct snapshot_run *run, sqlite3_stmt *kv, sqlite3_stmt *alarm, const struct backup_record *rec)
{
        int e = snapshot_check(run, rec);
        if (e < 0)
                return e;
        sqlite3_stmt *st = rec->kind == BACKUP_KV ? kv : alarm;
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, rec->binding, -1, SQLITE_STATIC);
        if (rec->kind == BACKUP_KV) {
                sqlite3_bind_blob(st, 2, rec->key, (int)rec->klen, SQLITE_STATIC);
                sqlite3_bind_blob(st, 3, rec->vlen ? (const void *)rec->value : "", (int)rec->vlen, SQLITE_STATIC);
        } else {
                sqlite3_bind_text(st, 2, (const char *)rec->key, (int)rec->klen, SQLITE_STATIC);
                sqlite3_bind_int64(st, 3, rec->at);
                sqlite3_bind_int64(st, 4, rec->due);
                sqlite3_bind_int64(st, 5, rec->attempts);
                sqlite3_bind_blob(st, 6, rec->vlen ? (const void *)rec->value : "", (int)rec->vlen, SQLITE_STATIC);
        }
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0 : kvdb_sql_err(rc);
}

/* The file's records into the emptied tables, within the transaction. */
static int fill(struct snapshot_run *run, struct kvdb *db, struct backup_reader *r)
{
        sqlite3_stmt *kv = NULL, *alarm = NULL;
        struct backup_record rec;
        int e;
        if ((e = prepare(db, "INSERT INTO kv (binding, key, value) VALUES (?1, ?2, ?3)", &kv)) < 0 ||
            (e = prepare(db, "INSERT INTO alarm (binding, id, at, due, attempts, payload)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &alarm)) < 0)
                goto out;
        while ((e = backup_read(r, &rec, &run->info, run->why, sizeof run->why)) == 1)
                if ((e = insert(run, kv, alarm, &rec)) < 0)
                        break;
        if (e == 0)
                e = kvdb_exec(db, "INSERT INTO usage (binding, keys, bytes) SELECT binding, count(*),"
                              " sum(length(key) + length(value)) FROM kv GROUP BY binding");
out:
        sqlite3_finalize(kv);
        sqlite3_finalize(alarm);
        return e;
}

int snapshot_db_restore(struct snapshot_run *run, struct backup_reader *r)
{
        struct kvdb *db = NULL;
        int e = open_db(run, &db);
        if (e < 0)
                return e;
        if ((e = kvdb_exec(db, "BEGIN IMMEDIATE")) < 0)
                goto out;
        if ((e = kvdb_exec(db, "DELETE FROM kv; DELETE FROM usage; DELETE FROM alarm")) == 0 &&
            (e = fill(run, db, r)) == 0)
                e = kvdb_exec(db, "COMMIT");
        /* All or nothing: any refusal or failure leaves the state as it was. */
        if (e < 0)
                kvdb_exec(db, "ROLLBACK");
out:
        if (e < 0 && !run->why[0])
                snprintf(run->why, sizeof run->why, "writing %s's database: %s", run->job->gadget, strerror(-e));
        kvdb_close(db);
        return e;
}
