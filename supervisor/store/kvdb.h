/* kvdb: one gadget's SQLite database behind its `kv` bindings, in gadgetd's
 * state directory (never visible inside a sandbox), each binding its own
 * namespace in it. Every call may sleep on the disk: only the gadget's kv
 * thread (kvdb_queue.c) calls these, never the event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_job.h"

/* Disk space held back per database so that deletes still commit on a
 * full disk (see kvdb.c). */
#define KVDB_RESERVE (2u * 1024u * 1024u)

struct kvdb;

/* Opens (creating, mode 0600) STATE_DIR/kv/GADGET.sqlite and its reserve
 * STATE_DIR/kv/GADGET.reserve, with the tables and statements of the n
 * types (at most KV_TYPES_MAX; borrowed, they outlive db). 0 or -errno: the system's for the folder
 * and files, -EBADMSG if the file is not a sound SQLite database, -EBUSY
 * if another process holds its lock past the busy timeout. */
int kvdb_open(const char *state_dir, const char *gadget, const struct kv_type *const *types, size_t n,
              struct kvdb **out);
/* Whether the n types can be opened: at most KV_TYPES_MAX, each with
 * its SQLite half carrying out each of its operations. If not, why. */
bool kvdb_types_ok(const struct kv_type *const *types, size_t n, char *why, size_t len);
void kvdb_close(struct kvdb *db);
/* The bytes gadget's store takes in state_dir now (its database and its
 * write-ahead log; not the reserve, which is gadgetd's), 0 if it has none:
 * what its state quota (StateMax=) counts of it. */
uint64_t kvdb_disk_bytes(const char *state_dir, const char *gadget);
/* Carries out job (its op, arguments and results: kv_job.h) on db, by
 * the SQLite half of its type (-EINVAL if db was not opened with it): 0
 * or -errno. */
int kvdb_run(struct kvdb *db, struct kv_job *job);
/* The value stored under key, malloc'd. -ENOENT if there is none. */
int kvdb_get(struct kvdb *db, const char *binding, const void *key, size_t klen, void **val, size_t *vlen);
/* Stores key = val, durably committed before it returns 0. -EDQUOT when the
 * binding's quota would be exceeded, -ENOSPC when the disk is full (nothing
 * is written then). */
int kvdb_put(struct kvdb *db, const char *binding, const void *key, size_t klen, const void *val, size_t vlen,
             const struct kvdb_quota *q);
/* Deletes key, durably; succeeds on a full disk too (the reserve). */
int kvdb_delete(struct kvdb *db, const char *binding, const void *key, size_t klen, bool *existed);
/* Keys starting with prefix and greater than after (if alen > 0), in byte
 * order, at most limit; each passed to fn. *more tells if keys remain.
 * Reads only the keys it returns (a bounded range of the index). */
int kvdb_list(struct kvdb *db, const char *binding, const void *prefix, size_t plen, const void *after,
              size_t alen, unsigned limit, void (*fn)(void *arg, const void *key, size_t klen), void *arg,
              bool *more);
/* The smallest key greater than every key starting with prefix, written to
 * end (room for plen bytes): its length, or 0 when there is none (prefix
 * empty or all 0xff bytes). */
size_t kvdb_prefix_end(const void *prefix, size_t plen, uint8_t *end);
