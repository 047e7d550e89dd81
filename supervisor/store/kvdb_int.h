/* kvdb's own view of a database, shared by kvdb.c (the database) and each
 * type's file (kvdb_kv.c, kvdb_alarm.c) only. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>

#include "kvdb.h"

struct kv_job;

/* A type of binding's half on a gadget's SQLite database (kvdb_TYPE.c,
 * struct kv_type's db): its tables, its statements and the jobs of its
 * operations. kvdb.c opens and closes those of the types it is given and
 * knows none of their tables. */
struct kvdb_type {
        const char *schema;            /* its CREATE ... IF NOT EXISTS, run at every open */
        const char *const *stmts;      /* prepared at open, finalized at close */
        size_t n_stmts;                /* at most KVDB_TYPE_ST */
        const char *const *ops;        /* the names of the operations it carries out */
        size_t n_ops;
        /* Carries out job, its operation ops[op], on the thread: 0 or -errno. */
        int (*run)(struct kvdb *db, struct kv_job *job, int op);
};

#define KVDB_TYPE_ST 8

struct kvdb {
        sqlite3 *db;
        const struct kv_type *const *types; /* kvdb_open's, borrowed */
        size_t n_types;
        sqlite3_stmt *st[KV_TYPES_MAX][KVDB_TYPE_ST]; /* each type's, in the order of types */
        int reserve_fd;   /* STATE_DIR/kv/GADGET.reserve */
        bool reserved;    /* it holds KVDB_RESERVE bytes of the disk */
};

/* Statement which of type t, prepared at open. */
sqlite3_stmt *kvdb_st(struct kvdb *db, const struct kvdb_type *t, int which);
/* Prepares each type's statements, in the order of db->types (its
 * tables exist). 0 or -errno. */
int kvdb_prepare(struct kvdb *db);
/* An SQLite result code as -errno. */
int kvdb_sql_err(int rc);
/* Runs sql (no results). 0 or -errno. */
int kvdb_exec(struct kvdb *db, const char *sql);
/* Makes the reserve hold KVDB_RESERVE bytes (a no-op when it does). */
int kvdb_reserve_fill(struct kvdb *db);
/* Gives the reserve's space back to the disk (a delete on a full disk). */
void kvdb_reserve_release(struct kvdb *db);
