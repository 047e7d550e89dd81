/* kvdb's own view of a database, shared by kvdb.c (kv bindings) and
 * kvdb_alarm.c (alarm bindings) only. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>

#include "kvdb.h"

enum { ST_GET, ST_PUT, ST_DEL, ST_LIST_GE, ST_LIST_GT, ST_OLD, ST_USAGE, ST_SET_USAGE, ST_COUNT };
#define KVDB_ALARM_ST 8

struct kvdb {
        sqlite3 *db;
        sqlite3_stmt *st[ST_COUNT];
        sqlite3_stmt *alarm_st[KVDB_ALARM_ST]; /* kvdb_alarm.c's */
        int reserve_fd;   /* STATE_DIR/kv/GADGET.reserve */
        bool reserved;    /* it holds KVDB_RESERVE bytes of the disk */
};

/* An SQLite result code as -errno. */
int kvdb_sql_err(int rc);
/* Runs sql (no results). 0 or -errno. */
int kvdb_exec(struct kvdb *db, const char *sql);
/* Prepares kvdb_alarm.c's statements (at open). 0 or -errno. */
int kvdb_alarm_prepare(struct kvdb *db);
