/* kv: SQLite storage for kv bindings. */
#include "kv.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kv {
        sqlite3 *db;
        sqlite3_stmt *get, *put, *del, *list, *old, *usage, *set_usage;
};

/* Durability: WAL with synchronous=FULL syncs the log at every commit, so
 * an acknowledged put survives a crash of gadgetd and of the machine
 * (NORMAL could lose the last commits on power loss). */
static const char schema[] =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=FULL;"
        "CREATE TABLE IF NOT EXISTS kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL,"
        " bytes INTEGER NOT NULL);";

static const char *const stmts[] = {
        "SELECT value FROM kv WHERE binding = ?1 AND key = ?2",
        "INSERT INTO kv (binding, key, value) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (binding, key) DO UPDATE SET value = excluded.value",
        "DELETE FROM kv WHERE binding = ?1 AND key = ?2 RETURNING length(key) + length(value)",
        "SELECT key FROM kv WHERE binding = ?1 AND key >= ?2 AND substr(key, 1, length(?2)) = ?2"
        " AND key > ?3 ORDER BY key LIMIT ?4",
        "SELECT length(key) + length(value) FROM kv WHERE binding = ?1 AND key = ?2",
        "SELECT keys, bytes FROM usage WHERE binding = ?1",
        "INSERT INTO usage (binding, keys, bytes) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (binding) DO UPDATE SET keys = excluded.keys, bytes = excluded.bytes",
};

const char *kv_error(const struct kv *kv)
{
        return kv && kv->db ? sqlite3_errmsg(kv->db) : "no database";
}

int kv_open(const char *state_dir, const char *gadget, struct kv **out)
{
        char dir[4096], path[4200];
        struct kv *kv = calloc(1, sizeof *kv);
        int e = -EIO;

        if (!kv)
                return -ENOMEM;
        snprintf(dir, sizeof dir, "%s/kv", state_dir);
        if ((mkdir(state_dir, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST)) {
                free(kv);
                return -errno;
        }
        snprintf(path, sizeof path, "%s/%s.sqlite", dir, gadget);
        /* Create it 0600 before SQLite opens it: only gadgetd reads it. */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                free(kv);
                return -errno;
        }
        close(fd);
        if (sqlite3_open_v2(path, &kv->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK ||
            sqlite3_exec(kv->db, schema, NULL, NULL, NULL) != SQLITE_OK)
                goto fail;
        sqlite3_busy_timeout(kv->db, 5000);
        sqlite3_stmt **slots[] = { &kv->get, &kv->put, &kv->del, &kv->list, &kv->old, &kv->usage, &kv->set_usage };
        for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++)
                if (sqlite3_prepare_v3(kv->db, stmts[i], -1, SQLITE_PREPARE_PERSISTENT, slots[i], NULL) != SQLITE_OK)
                        goto fail;
        *out = kv;
        return 0;
fail:
        kv_close(kv);
        return e;
}

void kv_close(struct kv *kv)
{
        if (!kv)
                return;
        sqlite3_stmt *s[] = { kv->get, kv->put, kv->del, kv->list, kv->old, kv->usage, kv->set_usage };
        for (size_t i = 0; i < sizeof s / sizeof *s; i++)
                sqlite3_finalize(s[i]);
        sqlite3_close(kv->db);
        free(kv);
}

static void bind_key(sqlite3_stmt *st, const char *binding, const void *key, size_t klen)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_text(st, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_blob(st, 2, klen ? key : "", (int)klen, SQLITE_STATIC);
}

int kv_get(struct kv *kv, const char *binding, const void *key, size_t klen, void **val, size_t *vlen)
{
        bind_key(kv->get, binding, key, klen);
        int r = sqlite3_step(kv->get);
        if (r == SQLITE_DONE)
                return -ENOENT;
        if (r != SQLITE_ROW)
                return -EIO;
        size_t n = (size_t)sqlite3_column_bytes(kv->get, 0);
        void *copy = malloc(n ? n : 1);
        if (!copy)
                return -ENOMEM;
        if (n)
                memcpy(copy, sqlite3_column_blob(kv->get, 0), n);
        sqlite3_reset(kv->get);
        *val = copy;
        *vlen = n;
        return 0;
}

static int exec(struct kv *kv, const char *sql)
{
        return sqlite3_exec(kv->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* The binding's key count and bytes (0, 0 before its first put). */
static int usage_get(struct kv *kv, const char *binding, int64_t *keys, int64_t *bytes)
{
        sqlite3_reset(kv->usage);
        sqlite3_bind_text(kv->usage, 1, binding, -1, SQLITE_STATIC);
        int r = sqlite3_step(kv->usage);
        *keys = *bytes = 0;
        if (r == SQLITE_ROW) {
                *keys = sqlite3_column_int64(kv->usage, 0);
                *bytes = sqlite3_column_int64(kv->usage, 1);
        }
        sqlite3_reset(kv->usage);
        return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : -EIO;
}

static int usage_set(struct kv *kv, const char *binding, int64_t keys, int64_t bytes)
{
        sqlite3_reset(kv->set_usage);
        sqlite3_bind_text(kv->set_usage, 1, binding, -1, SQLITE_STATIC);
        sqlite3_bind_int64(kv->set_usage, 2, keys);
        sqlite3_bind_int64(kv->set_usage, 3, bytes);
        int r = sqlite3_step(kv->set_usage);
        sqlite3_reset(kv->set_usage);
        return r == SQLITE_DONE ? 0 : -EIO;
}

int kv_put(struct kv *kv, const char *binding, const void *key, size_t klen, const void *val, size_t vlen,
           const struct kv_quota *q)
{
        int64_t keys, bytes, old = -1;
        int e;

        /* One transaction: the quota check, the write and the usage update
         * commit together or not at all. */
        if ((e = exec(kv, "BEGIN IMMEDIATE")) < 0)
                return e;
        if ((e = usage_get(kv, binding, &keys, &bytes)) < 0)
                goto rollback;
        bind_key(kv->old, binding, key, klen);
        if (sqlite3_step(kv->old) == SQLITE_ROW)
                old = sqlite3_column_int64(kv->old, 0);
        sqlite3_reset(kv->old);
        if (old < 0)
                keys++;
        bytes += (int64_t)(klen + vlen) - (old < 0 ? 0 : old);
        if ((uint64_t)keys > q->max_keys || (uint64_t)bytes > q->max_bytes) {
                e = -EDQUOT;
                goto rollback;
        }
        bind_key(kv->put, binding, key, klen);
        sqlite3_bind_blob(kv->put, 3, vlen ? val : "", (int)vlen, SQLITE_STATIC);
        if (sqlite3_step(kv->put) != SQLITE_DONE) {
                e = -EIO;
                goto rollback;
        }
        sqlite3_reset(kv->put);
        if ((e = usage_set(kv, binding, keys, bytes)) < 0)
                goto rollback;
        return exec(kv, "COMMIT");
rollback:
        sqlite3_reset(kv->put);
        exec(kv, "ROLLBACK");
        return e;
}

int kv_delete(struct kv *kv, const char *binding, const void *key, size_t klen, bool *existed)
{
        int64_t keys, bytes;
        int e;
        if ((e = exec(kv, "BEGIN IMMEDIATE")) < 0)
                return e;
        bind_key(kv->del, binding, key, klen);
        int r = sqlite3_step(kv->del);
        int64_t freed = r == SQLITE_ROW ? sqlite3_column_int64(kv->del, 0) : -1;
        while (r == SQLITE_ROW)
                r = sqlite3_step(kv->del);
        sqlite3_reset(kv->del);
        if (r != SQLITE_DONE) {
                exec(kv, "ROLLBACK");
                return -EIO;
        }
        *existed = freed >= 0;
        if (freed >= 0 && ((e = usage_get(kv, binding, &keys, &bytes)) < 0 ||
                           (e = usage_set(kv, binding, keys - 1, bytes - freed)) < 0)) {
                exec(kv, "ROLLBACK");
                return e;
        }
        return exec(kv, "COMMIT");
}

int kv_list(struct kv *kv, const char *binding, const void *prefix, size_t plen, const void *after,
            size_t alen, unsigned limit, void (*fn)(void *arg, const void *key, size_t klen), void *arg,
            bool *more)
{
        sqlite3_stmt *st = kv->list;
        bind_key(st, binding, prefix, plen);
        sqlite3_bind_blob(st, 3, alen ? after : "", (int)alen, SQLITE_STATIC);
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
        return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : -EIO;
}
