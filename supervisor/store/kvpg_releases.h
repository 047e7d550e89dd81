/* kvpg_releases: the releases' rows in the PostgreSQL store (kvpg_sql.c,
 * version 15): the statements a thread runs on a connection of its own,
 * waiting on it as a thread may (control/deploy_store.c's, and an
 * install's thread). libpq is loaded already: a store of PostgreSQL
 * opened it. Each returns 0 or -errno with why (one line). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "system/pq_dl.h"

/* A bundle's row, without its bytes. */
struct kvpg_release_row {
        int64_t seq;
        char gadget[64], version[80], signer[80], node[64];
        int64_t installed_ms, uid, size;
};

/* A gadget's release state: its current version and running rollout. */
struct kvpg_release_state {
        int64_t seq, gen;
        char gadget[64], current[80], previous[80], rollout[80], node[64];
        unsigned percent, max_errors;
        uint64_t min_calls;
        char why[200];
};

/* Connects to conninfo (a server that takes writes unless it names
 * target_session_attrs) within ms, as node (NULL: why). */
PGconn *kvpg_releases_connect(const char *conninfo, const char *node, unsigned ms, char *why, size_t len);
/* LISTENs to KVPG_RELEASE_CHANNEL: 0 or -EIO. */
int kvpg_releases_listen(PGconn *c, char *why, size_t len);
/* Drops the notifications libpq holds: whether there was one. */
bool kvpg_releases_notified(PGconn *c);
/* The store's schema version (-1: why; -2: why, a store a newer node
 * migrated that this one may not use, kvpg_sql_schema_check). */
int kvpg_releases_schema(PGconn *c, char *why, size_t len);
/* Adds a bundle (the bytes as received): 0, -EEXIST if that version is
 * in the store already, -EIO. */
int kvpg_releases_add(PGconn *c, const struct kvpg_release_row *row, const uint8_t *bundle, size_t len, char *why,
                      size_t wlen);
/* Writes st if the gadget's gen is still gen (0: no row yet): the new
 * gen, 0 if another writer came first, -EIO. */
int64_t kvpg_releases_set(PGconn *c, const struct kvpg_release_state *st, int64_t gen, char *why, size_t len);
/* Deletes gadget's bundles beyond the newest keep, never one its state
 * row names (current, previous, rollout): how many, or -EIO. */
int64_t kvpg_releases_prune(PGconn *c, const char *gadget, unsigned keep, char *why, size_t len);
/* Up to max rows of bundles with seq > after, in seq order, in *n. */
int kvpg_releases_new(PGconn *c, int64_t after, struct kvpg_release_row *rows, size_t max, size_t *n, char *why,
                      size_t len);
/* The bytes of the bundle seq (at most max: a longer one is -E2BIG,
 * never read). */
int kvpg_releases_bundle(PGconn *c, int64_t seq, size_t max, uint8_t **out, size_t *outlen, char *why, size_t len);
/* Up to max gadgets' states with seq > after, in seq order. */
int kvpg_releases_states(PGconn *c, int64_t after, struct kvpg_release_state *rows, size_t max, size_t *n,
                         char *why, size_t len);
