/* kvpg_sql: the PostgreSQL store's schema and its migrations (pure text,
 * no libpq; each type's queries are its own file's, kvpg_job.h), and the
 * redaction of a connection string for logs. The schema is described in
 * docs/operating.md "The PostgreSQL store" and in kvpg_sql.c. */
#pragma once

#include <stddef.h>

/* The migration that made gadgetd_audit (kvpg_audit.c waits for it). */
#define KVPG_SCHEMA_AUDIT 4
/* The one that keyed it by (node, seq): kvpg_audit.c waits for that one. */
#define KVPG_SCHEMA_AUDIT_SEQ 13
/* The one that made gadgetd_lease_take_many (kvpg_lease.c uses it once
 * the kv connection migrated the store; until then its rounds fail and
 * are tried again). */
#define KVPG_SCHEMA_LEASE_BATCH 6
/* The one that made it say a full lock table (free NULL) instead of
 * failing. */
#define KVPG_SCHEMA_LEASE_FULL 7
/* The one that made the node leases (gadgetd_lease_renew,
 * gadgetd_lease_take_nodes): no lock of the server's per gadget. */
#define KVPG_SCHEMA_NODE_LEASES 10

/* The one that made the releases' tables (control/deploy_store.c waits
 * for it: until then each node keeps its own store of versions). */
#define KVPG_SCHEMA_RELEASES 15
/* The transaction lock every write of them takes ("rels" in hex). */
#define KVPG_RELEASE_LOCK "1919249523"
/* What they notify at their commit (the nodes LISTEN). */
#define KVPG_RELEASE_CHANNEL "gadgetd_releases"

/* The one that made gadgetd_schema.compatible: from it on, each
 * migration's update of the version sets compatible too. */
#define KVPG_SCHEMA_COMPATIBLE 16
/* Reads the store's schema: one row, (version, compatible), compatible
 * as version where there is no such column yet (a store before 16:
 * to_jsonb names the columns the row has, so the query runs on either). */
#define KVPG_SQL_SCHEMA \
        "SELECT version, coalesce((to_jsonb(s) ->> 'compatible')::integer, version) FROM gadgetd_schema s"

/* The first key of every gadget's lease lock (the second is hashtext of
 * its name): "gadg" in hex, apart from the migration lock's key. */
#define KVPG_LEASE_SPACE "1734435943"
/* How many gadgets a node names in one statement of
 * gadgetd_lease_take_many (a bounded statement and answer). */
#define KVPG_LEASE_BATCH 1000
/* The SQLSTATE of a write refused because its epoch is not the owner's. */
#define KVPG_SQLSTATE_FENCED "GDF01"
/* The SQLSTATE of a write on a server that takes none (a standby, a
 * read-only default): nothing was written, and the session goes (another
 * host of the conninfo, or this one promoted, at the next attempt). */
#define KVPG_SQLSTATE_READ_ONLY "25006"

/* The server's replication, read at connect: synchronous_standby_names
 * and how many standbys stream from it (one row, two columns; the rows
 * of pg_stat_replication are every user's to count). */
extern const char kvpg_sql_replication[];
/* Opens the migration transaction: takes the advisory lock every gadgetd
 * migrating this store takes, makes the version table if there is none,
 * and reads the version (the last result's one row). */
extern const char kvpg_sql_migrate_begin[];
/* The schema version this gadgetd creates and understands: how many
 * migrations it has (kvpg_sql.c's list). */
int kvpg_sql_version(void);
/* The statements that take the schema from version - 1 to version (1 to
 * kvpg_sql_version()), run inside that transaction. NULL otherwise. */
const char *kvpg_sql_migration(int version);
/* The compatible a store this gadgetd migrated to version holds: the
 * greatest floor of migrations 1 to version (kvpg_sql.c's list). */
int kvpg_sql_compatible(int version);
/* Whether this gadgetd may use a store of version and compatible (as
 * KVPG_SQL_SCHEMA reads them): 0, it is not newer (migrated up to ours
 * if older); 1, newer but compatible with ours (used as ours, never
 * migrated); -1, newer and not (why: both numbers and what to do). */
int kvpg_sql_schema_check(int version, int compatible, char *why, size_t len);

/* An array literal ({"a","b"}) being built for a text[] or boolean[]
 * parameter; text is a whole literal after each add (none before one). */
struct kvpg_array {
        char *text;
        size_t len, cap, n;
};

/* Appends elem, quoted (so that a gadget named "null" stays a name):
 * 0 or -ENOMEM. */
int kvpg_array_add(struct kvpg_array *a, const char *elem);
/* Empties a for the next statement (its memory kept). */
void kvpg_array_reset(struct kvpg_array *a);
void kvpg_array_free(struct kvpg_array *a);

/* conninfo with every password replaced by "***" (key=value form:
 * password=...; URI form: user:PASSWORD@ and ?password=), cut to fit
 * out. For logs: a password never reaches one. */
void kvpg_redact(const char *conninfo, char *out, size_t len);
