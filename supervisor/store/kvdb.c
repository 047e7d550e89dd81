/* kvdb: SQLite storage for kv bindings, used by one thread at a time. */
#include "kvdb.h"
#include "kvdb_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* Durability: WAL with synchronous=FULL syncs the log at every commit, so
 * an acknowledged put survives a crash of gadgetd and of the machine
 * (NORMAL could lose the last commits on power loss).
 *
 * Full disk: a delete appends pages to the WAL, which grows unless a
 * checkpoint has copied every frame into the database; that checkpoint
 * must grow the database for pages that puts added. So on a full disk
 * both fail and nothing, not even a delete, can commit. The WAL is kept
 * small (checkpoints every 256 pages, the file cut back to 1 MiB after one)
 * and each database holds a reserve file of KVDB_RESERVE bytes, more than
 * one checkpoint plus a delete needs. A delete that finds the disk full
 * frees the reserve, checkpoints and commits; puts are refused until the
 * reserve is whole again, so they never eat it. */
static const char schema[] =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=FULL;"
        "PRAGMA wal_autocheckpoint=256;"
        "PRAGMA journal_size_limit=1048576;"
        "CREATE TABLE IF NOT EXISTS kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL,"
        " bytes INTEGER NOT NULL);"
        /* alarm bindings (kvdb_alarm.c): at is the time the gadget set,
         * due when delivery is next tried (at, or later after failures). */
        "CREATE TABLE IF NOT EXISTS alarm (binding TEXT NOT NULL, id TEXT NOT NULL, at INTEGER NOT NULL,"
        " due INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, payload BLOB NOT NULL,"
        " PRIMARY KEY (binding, id)) WITHOUT ROWID;"
        "CREATE INDEX IF NOT EXISTS alarm_due ON alarm (binding, due);";

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

/* An SQLite result code as -errno: EBADMSG for a damaged or foreign file,
 * EBUSY for a lock another process holds past the busy timeout. */
int kvdb_sql_err(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        default:
                return -EIO;
        }
}

/* Makes the reserve hold KVDB_RESERVE bytes (a no-op when it does). */
static int reserve_fill(struct kvdb *db)
{
        if (db->reserve_fd < 0)
                return -EBADF;
        int e = posix_fallocate(db->reserve_fd, 0, KVDB_RESERVE);
        db->reserved = e == 0;
        return -e;
}

static void reserve_release(struct kvdb *db)
{
        if (db->reserve_fd >= 0 && ftruncate(db->reserve_fd, 0) == 0)
                db->reserved = false;
}

static int make_dirs(const char *state_dir, char *dir, size_t len)
{
        snprintf(dir, len, "%s/kv", state_dir);
        if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* Creates path 0600 if it is missing (only gadgetd reads it), without
 * following a symbolic link. Returns the open fd or -errno. */
static int create_private(const char *path)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        return fd < 0 ? -errno : fd;
}

int kvdb_open(const char *state_dir, const char *gadget, struct kvdb **out)
{
        char dir[4096], path[4200];
        struct kvdb *db = calloc(1, sizeof *db);
        int e, fd;

        if (!db)
                return -ENOMEM;
        db->reserve_fd = -1;
        if ((e = make_dirs(state_dir, dir, sizeof dir)) < 0)
                goto out;
        snprintf(path, sizeof path, "%s/%s.reserve", dir, gadget);
        if ((e = db->reserve_fd = create_private(path)) < 0)
                goto out;
        snprintf(path, sizeof path, "%s/%s.sqlite", dir, gadget);
        if ((e = fd = create_private(path)) < 0)
                goto out;
        close(fd);
        int rc = sqlite3_open_v2(path, &db->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL);
        if (rc != SQLITE_OK) {
                e = kvdb_sql_err(rc);
                goto out;
        }
        /* Before the schema: another process holding the write lock makes
         * the open wait as long as an operation would. */
        sqlite3_busy_timeout(db->db, 5000);
        if ((rc = sqlite3_exec(db->db, schema, NULL, NULL, NULL)) != SQLITE_OK) {
                e = kvdb_sql_err(rc);
                goto out;
        }
        for (size_t i = 0; i < ST_COUNT; i++)
                if ((rc = sqlite3_prepare_v3(db->db, stmts[i], -1, SQLITE_PREPARE_PERSISTENT, &db->st[i],
                                             NULL)) != SQLITE_OK) {
                        e = kvdb_sql_err(rc);
                        goto out;
                }
        if ((e = kvdb_alarm_prepare(db)) < 0)
                goto out;
        /* On a disk already full it stays empty: puts wait until it fills. */
        reserve_fill(db);
        *out = db;
        return 0;
out:
        kvdb_close(db);
        return e;
}

void kvdb_close(struct kvdb *db)
{
        if (!db)
                return;
        for (size_t i = 0; i < ST_COUNT; i++)
                sqlite3_finalize(db->st[i]);
        for (size_t i = 0; i < KVDB_ALARM_ST; i++)
                sqlite3_finalize(db->alarm_st[i]);
        sqlite3_close(db->db);
        if (db->reserve_fd >= 0)
                close(db->reserve_fd);
        free(db);
}

static void bind_key(sqlite3_stmt *st, const char *binding, const void *key, size_t klen)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, klen ? key : "", (int)klen, SQLITE_STATIC);
}

int kvdb_get(struct kvdb *db, const char *binding, const void *key, size_t klen, void **val, size_t *vlen)
{
        sqlite3_stmt *st = db->st[ST_GET];
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

int kvdb_exec(struct kvdb *db, const char *sql)
{
        int rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : kvdb_sql_err(rc);
}

/* The binding's key count and bytes (0, 0 before its first put). */
static int usage_get(struct kvdb *db, const char *binding, int64_t *keys, int64_t *bytes)
{
        sqlite3_stmt *st = db->st[ST_USAGE];
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
        sqlite3_stmt *st = db->st[ST_SET_USAGE];
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
        bind_key(db->st[ST_OLD], binding, key, klen);
        if (sqlite3_step(db->st[ST_OLD]) == SQLITE_ROW)
                old = sqlite3_column_int64(db->st[ST_OLD], 0);
        sqlite3_reset(db->st[ST_OLD]);
        if (old < 0)
                keys++;
        bytes += (int64_t)(klen + vlen) - (old < 0 ? 0 : old);
        if ((uint64_t)keys > q->max_keys || (uint64_t)bytes > q->max_bytes) {
                e = -EDQUOT;
                goto out;
        }
        bind_key(db->st[ST_PUT], binding, key, klen);
        sqlite3_bind_blob(db->st[ST_PUT], 3, vlen ? val : "", (int)vlen, SQLITE_STATIC);
        if ((e = step_done(db->st[ST_PUT])) < 0 || (e = usage_set(db, binding, keys, bytes)) < 0)
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
        if (!db->reserved && reserve_fill(db) < 0)
                return -ENOSPC;
        return put_txn(db, binding, key, klen, val, vlen, q);
}

static int delete_txn(struct kvdb *db, const char *binding, const void *key, size_t klen, bool *existed)
{
        sqlite3_stmt *st = db->st[ST_DEL];
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
                reserve_release(db);
                kvdb_exec(db, "PRAGMA wal_checkpoint(PASSIVE)");
                e = delete_txn(db, binding, key, klen, existed);
        }
        if (e == 0 && !db->reserved)
                reserve_fill(db);
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
        sqlite3_stmt *st = db->st[from_cursor ? ST_LIST_GT : ST_LIST_GE];

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
