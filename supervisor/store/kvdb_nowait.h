/* kvdb_nowait: a read-only connection to a gadget's database for the
 * loop, whose reads never wait for the disk (kvdb_nowait.c says why). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvdb.h"

struct kv_job;
struct kv_type;

/* Opens it, on the thread, after the thread's own kvdb_open made the
 * database: its statements are prepared and a first read made. 0 or
 * -errno. Closed with kvdb_close. */
int kvdb_nowait_open(const char *state_dir, const char *gadget, const struct kv_type *const *types, size_t n,
                     struct kvdb **out);
/* Calls run(db, job) on the loop, with db's reads refused (an error at
 * once) where they would wait for the disk or read more than a small get
 * does; returns what run returns. */
bool kvdb_nowait_run(struct kvdb *db, struct kv_job *job, bool (*run)(struct kvdb *db, struct kv_job *job));
/* The same on the thread: reads may wait, but past what the loop may read
 * they fail too (false: the thread's own connection, whose cache is
 * larger, reads it). */
bool kvdb_nowait_run_small(struct kvdb *db, struct kv_job *job, bool (*run)(struct kvdb *db, struct kv_job *job));
/* Reads refused so far, in this process (they would have waited). */
uint64_t kvdb_nowait_refused(void);

/* The loop's gets so far, in this process: answered on the loop, and
 * handed to the thread because a read would have waited (uncached) or
 * gone past the loop's budget (over_budget, kvdb_nowait.c). */
struct kvdb_nowait_counts {
        uint64_t answered, uncached, over_budget;
};
void kvdb_nowait_counts(struct kvdb_nowait_counts *c);
