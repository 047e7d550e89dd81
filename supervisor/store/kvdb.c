/* kvdb: a gadget's SQLite database, used by one thread at a time: its
 * durability, its full-disk reserve, and the types of binding it holds. */
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
        "PRAGMA journal_size_limit=1048576;";

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

int kvdb_reserve_fill(struct kvdb *db)
{
        if (db->reserve_fd < 0)
                return -EBADF;
        int e = posix_fallocate(db->reserve_fd, 0, KVDB_RESERVE);
        db->reserved = e == 0;
        return -e;
}

void kvdb_reserve_release(struct kvdb *db)
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

bool kvdb_types_ok(const struct kv_type *const *types, size_t n, char *why, size_t len)
{
        if (n > KV_TYPES_MAX) {
                snprintf(why, len, "%zu types of binding on the store, more than %d", n, KV_TYPES_MAX);
                return false;
        }
        for (size_t t = 0; t < n; t++)
                if (!kv_type_covered(types[t], "SQLite", types[t]->db->ops, types[t]->db->n_ops, why, len))
                        return false;
        return true;
}

int kvdb_prepare(struct kvdb *db)
{
        for (size_t t = 0; t < db->n_types; t++) {
                const struct kvdb_type *type = db->types[t]->db;
                for (size_t i = 0; i < type->n_stmts; i++) {
                        int rc = sqlite3_prepare_v3(db->db, type->stmts[i], -1, SQLITE_PREPARE_PERSISTENT,
                                                    &db->st[t][i], NULL);
                        if (rc != SQLITE_OK)
                                return kvdb_sql_err(rc);
                }
        }
        return 0;
}

/* Makes each type's tables, then prepares its statements. 0 or -errno. */
static int open_types(struct kvdb *db)
{
        for (size_t t = 0; t < db->n_types; t++) {
                int e = kvdb_exec(db, db->types[t]->db->schema);
                if (e < 0)
                        return e;
        }
        return kvdb_prepare(db);
}

int kvdb_open(const char *state_dir, const char *gadget, const struct kv_type *const *types, size_t n,
              struct kvdb **out)
{
        char dir[4096], path[4200];
        struct kvdb *db = n <= KV_TYPES_MAX ? calloc(1, sizeof *db) : NULL;
        int e, fd;

        if (!db)
                return n <= KV_TYPES_MAX ? -ENOMEM : -EINVAL;
        db->types = types;
        db->n_types = n;
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
        if ((e = kvdb_exec(db, schema)) < 0 || (e = open_types(db)) < 0)
                goto out;
        /* On a disk already full it stays empty: puts wait until it fills. */
        kvdb_reserve_fill(db);
        *out = db;
        return 0;
out:
        kvdb_close(db);
        return e;
}

uint64_t kvdb_disk_bytes(const char *state_dir, const char *gadget)
{
        static const char *const ext[] = { "sqlite", "sqlite-wal" };
        char path[4200];
        uint64_t n = 0;
        for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
                struct stat st;
                snprintf(path, sizeof path, "%s/kv/%s.%s", state_dir, gadget, ext[i]);
                if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
                        n += (uint64_t)st.st_size;
        }
        return n;
}

void kvdb_close(struct kvdb *db)
{
        if (!db)
                return;
        for (size_t t = 0; t < KV_TYPES_MAX; t++)
                for (size_t i = 0; i < KVDB_TYPE_ST; i++)
                        sqlite3_finalize(db->st[t][i]);
        sqlite3_close(db->db);
        if (db->reserve_fd >= 0)
                close(db->reserve_fd);
        free(db);
}

int kvdb_exec(struct kvdb *db, const char *sql)
{
        int rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : kvdb_sql_err(rc);
}

/* The place of type t in db->types, n_types if it is not there. */
static size_t type_index(const struct kvdb *db, const struct kvdb_type *t)
{
        size_t i = 0;
        while (i < db->n_types && db->types[i]->db != t)
                i++;
        return i;
}

sqlite3_stmt *kvdb_st(struct kvdb *db, const struct kvdb_type *t, int which)
{
        size_t i = type_index(db, t);
        return i < db->n_types ? db->st[i][which] : NULL;
}

int kvdb_run(struct kvdb *db, struct kv_job *job)
{
        const struct kvdb_type *t = job->type->db;
        int op = kv_op_find(t->ops, t->n_ops, job->op->name);
        if (type_index(db, t) == db->n_types || op < 0)
                return -EINVAL;
        return t->run(db, job, op);
}
