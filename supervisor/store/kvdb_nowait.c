/* kvdb_nowait: a gadget's database read on the loop, never waiting: a
 * read-only connection whose files go through gadgetd's own SQLite VFS,
 * "gadgetd-nowait", which wraps the default one and, while the loop runs
 * a statement, reads with preadv2(RWF_NOWAIT). A read whose pages are not
 * in the page cache fails at once (EAGAIN), the statement fails, and the
 * job goes to the gadget's thread as any other.
 *
 * Why nothing else on that connection waits for a disk or a lock:
 * - locks: the unix VFS takes them with F_SETLK (never F_SETLKW), and the
 *   busy timeout is 0, so a held lock is SQLITE_BUSY at once; a read
 *   transaction that keeps losing a race for the WAL index retries through
 *   xSleep, which here does not sleep (it fails after SQLite's 100 tries);
 * - the WAL index (-shm) is mapped, never read with read(2). The thread
 *   opens this connection and runs its first statement, which maps the
 *   index's regions in use; a region is one mapping per file in the
 *   process, shared with the thread's writer, which maps each new region
 *   before any commit can make a reader need it (the WAL is checkpointed
 *   at 256 pages, within the first region of 4,096 frames). The pages of
 *   that mapping are written by every commit and read by every
 *   transaction; like gadgetd's own heap they leave memory only under
 *   pressure that would stall the loop anyway;
 * - file sizes (fstat) and the open files' metadata are in memory.
 * The open itself and the schema's first read happen on the thread.
 *
 * Nor does a get on the loop read much: at most LOOP_READ_MAX bytes of the
 * files, and at most LOOP_CACHE_PAGES pages of the connection's own cache.
 * A get's size is not known before its row is read, nor is the cost of
 * its lookup: the kv table is WITHOUT ROWID, a b-tree of whole records,
 * and SQLite compares a key with a record that spills onto overflow pages
 * by reading all of that record (btree.c's index moveto). A get of a 1 MiB
 * value, or of any key whose search passes it, reads 1 MiB (257 pages of
 * 4 KiB), whatever the statement selects. So the loop counts what it
 * reads: a read past the budget fails (as a read the page cache cannot
 * serve does) and the thread answers. The cache is kept small so that
 * pages served from it, which no read counts, stay few too. */
#include "kvdb_nowait.h"
#include "kvdb_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define VFS_NAME "gadgetd-nowait"
#define STR_(x) #x
#define STR(x) STR_(x)

/* What one get on the loop may read of the database and its WAL: 8 pages
 * of 4 KiB. That is a cold lookup's path from the root to a leaf (depth 3
 * holds the default MaxBytes=16M of small records; upper levels usually
 * stay in the cache) with a value of a few KiB (past about 1,000 bytes a
 * record spills onto overflow pages, 4 KiB each); with the path cached, a
 * value of up to about 28 KiB. Far below the 257 pages of a 1 MiB value.
 * A deeper or colder lookup goes to the thread, as a page not in memory
 * does: slower, never wrong. */
#define LOOP_READ_MAX (32u * 1024u)
/* The connection's own page cache, in pages: holds the few pages a small
 * database's gets touch (its root, interior pages and hot leaves), not
 * the overflow pages of a large value. */
#define LOOP_CACHE_PAGES 16

/* Set around a statement of the loop (nowait: reads are RWF_NOWAIT) or of
 * the thread on this connection (budgeted: reads take from read_left, the
 * loop's too). */
static _Thread_local bool nowait, budgeted;
static _Thread_local size_t read_left;
static atomic_uint_fast64_t refused, over_budget, answered;

struct nw_file {
        sqlite3_file base;
        int fd;                /* our own read-only fd of the same file; -1: reads go to real */
        sqlite3_file *real;    /* the default VFS's file, right after this struct */
};

static sqlite3_vfs nw_vfs;
static sqlite3_vfs *real_vfs;

#define REAL(f) (((struct nw_file *)(f))->real)

static int nw_close(sqlite3_file *f)
{
        struct nw_file *p = (struct nw_file *)f;
        if (p->fd >= 0)
                close(p->fd);
        return p->real->pMethods ? p->real->pMethods->xClose(p->real) : SQLITE_OK;
}

/* Reads amt bytes at off; on the loop, only what the page cache holds.
 * A short read at the end of the file is filled with zeros, as the unix
 * VFS does. */
static int nw_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
        struct nw_file *p = (struct nw_file *)f;
        if (p->fd < 0 || !budgeted)
                return p->real->pMethods->xRead(p->real, buf, amt, off);
        if ((size_t)amt > read_left) {
                /* More than a small get reads: the thread's to read, on
                 * its own connection. */
                if (nowait)
                        atomic_fetch_add(&over_budget, 1);
                return SQLITE_IOERR_READ;
        }
        read_left -= (size_t)amt;
        if (!nowait)
                return p->real->pMethods->xRead(p->real, buf, amt, off);
        struct iovec iov = { .iov_base = buf, .iov_len = (size_t)amt };
        ssize_t n = preadv2(p->fd, &iov, 1, off, RWF_NOWAIT);
        if (n == amt)
                return SQLITE_OK;
        struct stat st;
        if (n >= 0 && fstat(p->fd, &st) == 0 && off + n >= st.st_size) {
                memset((char *)buf + n, 0, (size_t)(amt - n));
                return SQLITE_IOERR_SHORT_READ;
        }
        /* EAGAIN, or part of the range not cached: the thread reads it. */
        atomic_fetch_add(&refused, 1);
        return SQLITE_IOERR_READ;
}

static int nw_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
        return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int nw_truncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int nw_sync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int nw_size(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int nw_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int nw_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int nw_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int nw_fcntl(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int nw_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int nw_dev(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int nw_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **pp)
{
        return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, pp);
}
static int nw_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
        return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void nw_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int nw_shm_unmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }

/* Version 2: no xFetch (no memory-mapped database reads: each would be a
 * page fault the loop could not refuse). */
static const sqlite3_io_methods nw_methods = {
        .iVersion = 2, .xClose = nw_close, .xRead = nw_read, .xWrite = nw_write, .xTruncate = nw_truncate,
        .xSync = nw_sync, .xFileSize = nw_size, .xLock = nw_lock, .xUnlock = nw_unlock,
        .xCheckReservedLock = nw_reserved, .xFileControl = nw_fcntl, .xSectorSize = nw_sector,
        .xDeviceCharacteristics = nw_dev, .xShmMap = nw_shm_map, .xShmLock = nw_shm_lock,
        .xShmBarrier = nw_shm_barrier, .xShmUnmap = nw_shm_unmap,
};

static int nw_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags)
{
        struct nw_file *p = (struct nw_file *)f;
        (void)vfs;
        p->fd = -1;
        p->real = (sqlite3_file *)(p + 1);
        p->base.pMethods = NULL;
        int rc = real_vfs->xOpen(real_vfs, name, p->real, flags, out_flags);
        if (rc != SQLITE_OK)
                return rc;
        /* The same file, for our reads only: the default VFS's fd keeps
         * its locks. O_NOFOLLOW: as the database was opened. */
        if (name && (p->fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
                p->real->pMethods->xClose(p->real);
                return SQLITE_CANTOPEN;
        }
        p->base.pMethods = &nw_methods;
        return SQLITE_OK;
}

/* SQLite retries a read transaction's start through xSleep: on the loop
 * it does not sleep, and the retries end in an error (the thread). */
static int nw_sleep(sqlite3_vfs *vfs, int us)
{
        (void)vfs;
        return nowait ? us : real_vfs->xSleep(real_vfs, us);
}

static int nw_delete(sqlite3_vfs *v, const char *n, int d) { (void)v; return real_vfs->xDelete(real_vfs, n, d); }
static int nw_access(sqlite3_vfs *v, const char *n, int fl, int *r)
{
        (void)v;
        return real_vfs->xAccess(real_vfs, n, fl, r);
}
static int nw_full(sqlite3_vfs *v, const char *n, int len, char *out)
{
        (void)v;
        return real_vfs->xFullPathname(real_vfs, n, len, out);
}
static int nw_random(sqlite3_vfs *v, int n, char *out) { (void)v; return real_vfs->xRandomness(real_vfs, n, out); }
static int nw_time(sqlite3_vfs *v, double *t) { (void)v; return real_vfs->xCurrentTime(real_vfs, t); }
static int nw_last_error(sqlite3_vfs *v, int n, char *s) { (void)v; return real_vfs->xGetLastError(real_vfs, n, s); }
static int nw_time64(sqlite3_vfs *v, sqlite3_int64 *t)
{
        (void)v;
        return real_vfs->xCurrentTimeInt64(real_vfs, t);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int registered = SQLITE_ERROR;

static void register_vfs(void)
{
        if (!(real_vfs = sqlite3_vfs_find(NULL)) || real_vfs->iVersion < 2)
                return;
        nw_vfs = (sqlite3_vfs){ .iVersion = 2, .szOsFile = (int)sizeof(struct nw_file) + real_vfs->szOsFile,
                                .mxPathname = real_vfs->mxPathname, .zName = VFS_NAME, .xOpen = nw_open,
                                .xDelete = nw_delete, .xAccess = nw_access, .xFullPathname = nw_full,
                                .xRandomness = nw_random, .xSleep = nw_sleep, .xCurrentTime = nw_time,
                                .xGetLastError = nw_last_error, .xCurrentTimeInt64 = nw_time64 };
        registered = sqlite3_vfs_register(&nw_vfs, 0);
}

int kvdb_nowait_open(const char *state_dir, const char *gadget, const struct kv_type *const *types, size_t n,
                     struct kvdb **out)
{
        char path[4200];
        struct kvdb *db = n <= KV_TYPES_MAX ? calloc(1, sizeof *db) : NULL;
        if (!db)
                return -ENOMEM;
        db->types = types;
        db->n_types = n;
        db->reserve_fd = -1;
        /* Called after the thread's kvdb_open: SQLite is loaded. */
        pthread_once(&once, register_vfs);
        int e = -ENOSYS;
        if (registered != SQLITE_OK)
                goto out;
        snprintf(path, sizeof path, "%s/kv/%s.sqlite", state_dir, gadget);
        int rc = sqlite3_open_v2(path, &db->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, VFS_NAME);
        if (rc != SQLITE_OK) {
                e = kvdb_sql_err(rc);
                goto out;
        }
        sqlite3_busy_timeout(db->db, 0);
        if ((e = kvdb_exec(db, "PRAGMA cache_size = " STR(LOOP_CACHE_PAGES))) < 0)
                goto out;
        /* The statements, and a first read (the schema, the WAL index's
         * mapping), here on the thread. */
        void *v = NULL;
        size_t vlen;
        if ((e = kvdb_prepare(db)) < 0 || ((e = kvdb_get(db, "", "", 0, &v, &vlen)) < 0 && e != -ENOENT))
                goto out;
        free(v);
        *out = db;
        return 0;
out:
        kvdb_close(db);
        return e;
}

bool kvdb_nowait_run(struct kvdb *db, struct kv_job *job, bool (*run)(struct kvdb *db, struct kv_job *job))
{
        nowait = budgeted = true;
        read_left = LOOP_READ_MAX;
        bool r = run(db, job);
        nowait = budgeted = false;
        if (r)
                atomic_fetch_add(&answered, 1);
        return r;
}

bool kvdb_nowait_run_small(struct kvdb *db, struct kv_job *job, bool (*run)(struct kvdb *db, struct kv_job *job))
{
        budgeted = true;
        read_left = LOOP_READ_MAX;
        bool r = run(db, job);
        budgeted = false;
        return r;
}

uint64_t kvdb_nowait_refused(void)
{
        return atomic_load(&refused);
}

void kvdb_nowait_counts(struct kvdb_nowait_counts *c)
{
        c->answered = atomic_load(&answered);
        c->uncached = atomic_load(&refused);
        c->over_budget = atomic_load(&over_budget);
}
