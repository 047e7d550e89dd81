/* sqlite_dl: SQLite, loaded when gadgetd opens its first kv store instead
 * of at every start (a quarter of a millisecond of each `gadgetd run`,
 * whose gadget may have no kv binding at all).
 *
 * The functions below carry SQLite's names and forward to the loaded
 * library; they are hidden, so nothing but gadgetd's own code binds to
 * them. sqlite3_open_v2 loads the library; if that fails it answers
 * SQLITE_CANTOPEN and the kv store is unavailable. Every other function
 * is reached only through a handle sqlite3_open_v2 made. The table is
 * this process's one copy of SQLite's entry points, as the dynamic
 * linker's would be. Each gadget's kv thread opens its own database, so
 * the first opens may race: loading is serialised by one mutex, and the
 * table is complete before any handle exists to reach it. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "dl.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define SONAME "libsqlite3.so.0"

static struct {
        void *lib;
        int (*open_v2)(const char *, sqlite3 **, int, const char *);
        int (*close)(sqlite3 *);
        int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
        int (*busy_timeout)(sqlite3 *, int);
        const char *(*errmsg)(sqlite3 *);
        int (*prepare_v3)(sqlite3 *, const char *, int, unsigned int, sqlite3_stmt **, const char **);
        int (*finalize)(sqlite3_stmt *);
        int (*reset)(sqlite3_stmt *);
        int (*clear_bindings)(sqlite3_stmt *);
        int (*step)(sqlite3_stmt *);
        int (*bind_blob)(sqlite3_stmt *, int, const void *, int, void (*)(void *));
        int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
        int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
        const void *(*column_blob)(sqlite3_stmt *, int);
        int (*column_bytes)(sqlite3_stmt *, int);
        sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
        sqlite3_vfs *(*vfs_find)(const char *);
        int (*vfs_register)(sqlite3_vfs *, int);
} fn;

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* 0 once loaded, -1 if it cannot be. */
static int load_locked(void)
{
        static const struct dl_sym syms[] = {
                { (void **)&fn.open_v2, "sqlite3_open_v2" }, { (void **)&fn.close, "sqlite3_close" },
                { (void **)&fn.exec, "sqlite3_exec" }, { (void **)&fn.busy_timeout, "sqlite3_busy_timeout" },
                { (void **)&fn.errmsg, "sqlite3_errmsg" }, { (void **)&fn.prepare_v3, "sqlite3_prepare_v3" },
                { (void **)&fn.finalize, "sqlite3_finalize" }, { (void **)&fn.reset, "sqlite3_reset" },
                { (void **)&fn.clear_bindings, "sqlite3_clear_bindings" }, { (void **)&fn.step, "sqlite3_step" },
                { (void **)&fn.bind_blob, "sqlite3_bind_blob" }, { (void **)&fn.bind_text, "sqlite3_bind_text" },
                { (void **)&fn.bind_int64, "sqlite3_bind_int64" },
                { (void **)&fn.column_blob, "sqlite3_column_blob" },
                { (void **)&fn.column_bytes, "sqlite3_column_bytes" },
                { (void **)&fn.column_int64, "sqlite3_column_int64" },
                { (void **)&fn.vfs_find, "sqlite3_vfs_find" },
                { (void **)&fn.vfs_register, "sqlite3_vfs_register" },
        };
        if (fn.lib)
                return 0;
        char err[256];
        void *lib = dl_load(SONAME, syms, sizeof syms / sizeof *syms, err, sizeof err);
        if (!lib)
                return -1;
        fn.lib = lib;
        return 0;
}

static int load(void)
{
        pthread_mutex_lock(&load_mu);
        int r = load_locked();
        pthread_mutex_unlock(&load_mu);
        return r;
}

HIDDEN int sqlite3_open_v2(const char *name, sqlite3 **db, int flags, const char *vfs)
{
        *db = NULL;
        return load() < 0 ? SQLITE_CANTOPEN : fn.open_v2(name, db, flags, vfs);
}

/* A NULL handle is a no-op in SQLite; so it is here, without looking at
 * the table (another thread may be loading it). */
HIDDEN int sqlite3_close(sqlite3 *db) { return db ? fn.close(db) : SQLITE_OK; }
HIDDEN int sqlite3_finalize(sqlite3_stmt *st) { return st ? fn.finalize(st) : SQLITE_OK; }
HIDDEN const char *sqlite3_errmsg(sqlite3 *db) { return fn.lib ? fn.errmsg(db) : "SQLite is not loaded"; }

HIDDEN int sqlite3_exec(sqlite3 *db, const char *sql, int (*cb)(void *, int, char **, char **), void *arg,
                        char **errmsg)
{
        return fn.exec(db, sql, cb, arg, errmsg);
}

HIDDEN int sqlite3_busy_timeout(sqlite3 *db, int ms) { return fn.busy_timeout(db, ms); }

HIDDEN int sqlite3_prepare_v3(sqlite3 *db, const char *sql, int n, unsigned int flags, sqlite3_stmt **st,
                              const char **tail)
{
        return fn.prepare_v3(db, sql, n, flags, st, tail);
}

HIDDEN int sqlite3_reset(sqlite3_stmt *st) { return fn.reset(st); }
HIDDEN int sqlite3_clear_bindings(sqlite3_stmt *st) { return fn.clear_bindings(st); }
HIDDEN int sqlite3_step(sqlite3_stmt *st) { return fn.step(st); }

HIDDEN int sqlite3_bind_blob(sqlite3_stmt *st, int i, const void *v, int n, void (*d)(void *))
{
        return fn.bind_blob(st, i, v, n, d);
}

HIDDEN int sqlite3_bind_text(sqlite3_stmt *st, int i, const char *v, int n, void (*d)(void *))
{
        return fn.bind_text(st, i, v, n, d);
}

HIDDEN int sqlite3_bind_int64(sqlite3_stmt *st, int i, sqlite3_int64 v) { return fn.bind_int64(st, i, v); }
HIDDEN const void *sqlite3_column_blob(sqlite3_stmt *st, int i) { return fn.column_blob(st, i); }
HIDDEN int sqlite3_column_bytes(sqlite3_stmt *st, int i) { return fn.column_bytes(st, i); }
HIDDEN sqlite3_int64 sqlite3_column_int64(sqlite3_stmt *st, int i) { return fn.column_int64(st, i); }

/* kvdb_nowait.c's VFS, which wraps the default one: they load the
 * library as an open does. */
HIDDEN sqlite3_vfs *sqlite3_vfs_find(const char *name) { return load() < 0 ? NULL : fn.vfs_find(name); }
HIDDEN int sqlite3_vfs_register(sqlite3_vfs *vfs, int dflt)
{
        return load() < 0 ? SQLITE_ERROR : fn.vfs_register(vfs, dflt);
}
