/* snapshot: a gadget's whole state — its kv keys and its alarms — written
 * to a backup file (gadgetctl backup) or replaced by one (restore), in
 * the file format of proto/backup.h, on either backend: one thread per
 * snapshot with a connection of its own (SQLite: the gadget's database
 * opened again; PostgreSQL: StoreConnection=), so that neither the loop
 * nor the gadget's own queue waits on it. A backup is one read
 * transaction (SQLite's WAL snapshot, PostgreSQL's REPEATABLE READ): the
 * state at one instant, while the gadget runs and writes. A restore
 * reads the whole file in one write transaction and commits only if
 * every record passed the format's and the policy's checks (all or
 * nothing); on PostgreSQL it is fenced by the gadget's lease like any
 * write. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "backup.h"

struct kv_type;
struct snapshot;

/* A binding a restore may fill, with its policy's bounds: kv (max_keys
 * MaxKeys=, max_bytes MaxBytes=, max_value MaxValueSize=) or alarm
 * (max_keys MaxAlarms=, max_value MaxPayloadSize=). */
struct snapshot_binding {
        char name[BACKUP_BINDING_MAX + 1];
        enum backup_kind kind;
        uint64_t max_keys, max_bytes, max_value;
};

struct snapshot_job {
        bool restore;               /* else a backup */
        int fd;                     /* the file (a regular file): taken, closed at the end */
        const char *gadget;
        const char *state_dir;      /* SQLite: the databases are under it */
        const struct kv_type *const *types; /* SQLite: the store's types (the database's tables) */
        size_t n_types;
        const char *conninfo;       /* PostgreSQL: StoreConnection=; NULL: SQLite */
        const char *node;           /* PostgreSQL: Node= */
        int64_t epoch;              /* PostgreSQL restore: the gadget's lease here (the fence) */
        /* restore: the bindings its policy declares, and StateMax= (the
         * keys' and values' bytes of all of them at most) */
        const struct snapshot_binding *bindings;
        size_t n_bindings;
        uint64_t state_max;
};

/* The end, on the loop: err 0 with info (the file's counts, checksum),
 * or -errno with why. */
typedef void snapshot_done_fn(void *arg, int err, const char *why, const struct backup_info *info);

/* Starts job (copied; job->fd taken even on failure): done is called
 * once, later, on base, and the snapshot freed; it runs to its end
 * whoever waits for it. 0, or -errno (nothing started, done not called). */
int snapshot_start(struct event_base *base, const struct snapshot_job *job, snapshot_done_fn *done, void *arg,
                   struct snapshot **out);

/* The backends' halves (snapshot_db.c, snapshot_pg.c), on the thread. */
struct snapshot_run {
        const struct snapshot_job *job;
        struct backup_info info;
        char why[512];
        /* restore: the current binding's totals, and all bindings' bytes */
        int cur;                    /* index in job->bindings, -1 none yet */
        enum backup_kind cur_kind;
        uint64_t keys, bytes, total_bytes;
};

/* Writes the file from the store's snapshot (run->info's header set). */
int snapshot_db_backup(struct snapshot_run *run, struct backup_writer *w);
int snapshot_pg_backup(struct snapshot_run *run, struct backup_writer *w);
/* Replaces the gadget's state with the file's, in one transaction. */
int snapshot_db_restore(struct snapshot_run *run, struct backup_reader *r);
int snapshot_pg_restore(struct snapshot_run *run, struct backup_reader *r);
/* A restore's record against the policy's bindings and bounds (the
 * backends call it before writing rec): 0, or -EDQUOT / -EINVAL with
 * run->why. */
int snapshot_check(struct snapshot_run *run, const struct backup_record *rec);
