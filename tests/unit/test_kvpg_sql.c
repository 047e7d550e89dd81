/* Unit tests of supervisor/store/kvpg_sql.c: a connection string's
 * passwords never reach a log line; the migrations are all there; array
 * literals quote every element. */
#include <stdio.h>
#include <string.h>

#include "store/kvpg_sql.h"
#include "tap.h"

static void redacts(const char *in, const char *want)
{
        char out[256];
        kvpg_redact(in, out, sizeof out);
        CHECK(strcmp(out, want) == 0, "\"%s\" -> \"%s\" (want \"%s\")", in, out, want);
}

static void test_redact(void)
{
        redacts("host=/run/pg dbname=g user=gadgetd", "host=/run/pg dbname=g user=gadgetd");
        redacts("host=db password=hunter2 user=u", "host=db password=*** user=u");
        redacts("password = hunter2", "password=***");
        redacts("PassWord='a b\\' c' sslmode=require", "PassWord=*** sslmode=require");
        redacts("passfile=/etc/pass service=gadgetd", "passfile=/etc/pass service=gadgetd");
        redacts("postgresql://u:hunter2@db:5432/g?sslmode=require", "postgresql://u:***@db:5432/g?sslmode=require");
        redacts("postgres://db/g?user=u&password=hunter2&sslmode=require",
                "postgres://db/g?user=u&password=***&sslmode=require");
        redacts("postgresql://u@db/g", "postgresql://u@db/g");
        redacts("postgresql:///g?host=/run/pg", "postgresql:///g?host=/run/pg");
        char small[12];
        kvpg_redact("password=hunter2 host=x", small, sizeof small);
        CHECK(strstr(small, "hunter") == NULL, "cut short, still redacted: \"%s\"", small);
}

static void test_migrations(void)
{
        int version = kvpg_sql_version();
        CHECK(version >= KVPG_SCHEMA_LEASE_FULL, "the version (%d) counts every migration", version);
        for (int v = 1; v <= version; v++)
                CHECK(kvpg_sql_migration(v) != NULL, "migration %d", v);
        CHECK(kvpg_sql_migration(0) == NULL && kvpg_sql_migration(version + 1) == NULL,
              "no migration outside 1..%d", version);
        /* The versions the other connections wait for are those that made
         * what they use. */
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_AUDIT), "CREATE TABLE gadgetd_audit") != NULL,
              "migration %d makes gadgetd_audit", KVPG_SCHEMA_AUDIT);
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_AUDIT_SEQ), "UNIQUE INDEX gadgetd_audit_node_seq") != NULL,
              "migration %d keys gadgetd_audit by node and seq", KVPG_SCHEMA_AUDIT_SEQ);
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_LEASE_BATCH), "CREATE FUNCTION gadgetd_lease_take_many") != NULL,
              "migration %d makes gadgetd_lease_take_many", KVPG_SCHEMA_LEASE_BATCH);
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_LEASE_FULL), "EXCEPTION WHEN out_of_memory") != NULL,
              "migration %d says a full lock table", KVPG_SCHEMA_LEASE_FULL);
        CHECK(strstr(kvpg_sql_migrate_begin, "pg_advisory_xact_lock") != NULL, "migrations take the lock");
        /* The node leases: made by the version the lease session waits
         * for, and no session lock of the server's per gadget from then. */
        CHECK(version >= KVPG_SCHEMA_NODE_LEASES, "the node leases are made (%d)", version);
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_NODE_LEASES), "CREATE FUNCTION gadgetd_lease_take_nodes") != NULL,
              "migration %d makes gadgetd_lease_take_nodes", KVPG_SCHEMA_NODE_LEASES);
        const char *renew = NULL, *fence = NULL;
        for (int v = KVPG_SCHEMA_LEASE_FULL + 1; v <= version; v++) {
                const char *m = kvpg_sql_migration(v);
                CHECK(strstr(m, "pg_advisory_lock") == NULL && strstr(m, "pg_try_advisory_lock") == NULL,
                      "migration %d takes no session lock", v);
                if (strstr(m, "CREATE FUNCTION gadgetd_lease_renew"))
                        renew = m;
                if (strstr(m, "CREATE OR REPLACE FUNCTION gadgetd_fence"))
                        fence = m;
        }
        /* A renewal renews only the incarnation it names, unexpired; a
         * join only once the last lease expired. */
        CHECK(renew && strstr(renew, "WHERE n.name = p_node AND n.incarnation = p_inc AND n.lease_until > now()"),
              "a renewal is of the node's incarnation, unexpired");
        CHECK(renew && strstr(renew, "WHERE n.name = p_node AND (n.lease_until <= now() OR (p_fresh AND gadgetd_session_gone("),
              "a join waits for the last lease to expire, or its session to be gone");
        /* The fence: the epoch and the owner node's lease, by the server's
         * clock at the check. */
        CHECK(fence && strstr(fence, "n.incarnation = o.node_inc AND n.lease_until > clock_timestamp()"),
              "the fence checks the owner node's lease");
        /* A take ends an expired node's incarnation only. */
        CHECK(strstr(kvpg_sql_migration(KVPG_SCHEMA_NODE_LEASES), "SET incarnation = n.incarnation + 1\n"
                     "            WHERE n.name = o.node AND n.incarnation = o.node_inc AND n.lease_until <= now()"),
              "a take bumps only an expired node's incarnation");
}

/* A gadget's name is an element of a text[] literal whatever it spells:
 * "null" stays the name, quotes and backslashes are escaped. */
/* A newer store: used as ours while its compatible is not above ours,
 * refused (both numbers named) once it is; the floors of 13 to 16 are 12. */
static void test_compatible(void)
{
        int ours = kvpg_sql_version();
        char why[300] = "";
        CHECK(ours >= KVPG_SCHEMA_COMPATIBLE, "the version (%d) makes compatible", ours);
        CHECK(kvpg_sql_compatible(KVPG_SCHEMA_COMPATIBLE) == 12, "compatible at %d: %d", KVPG_SCHEMA_COMPATIBLE,
              kvpg_sql_compatible(KVPG_SCHEMA_COMPATIBLE));
        CHECK(kvpg_sql_compatible(ours) <= ours, "a store of ours is ours to use");
        CHECK(kvpg_sql_schema_check(ours - 1, ours - 1, why, sizeof why) == 0, "an older store is migrated");
        CHECK(kvpg_sql_schema_check(ours, ours, why, sizeof why) == 0, "ours");
        CHECK(kvpg_sql_schema_check(ours + 3, ours, why, sizeof why) == 1, "newer, compatible with ours");
        CHECK(kvpg_sql_schema_check(ours + 1, 12, why, sizeof why) == 1, "newer, compatible with 12");
        CHECK(kvpg_sql_schema_check(ours + 1, ours + 1, why, sizeof why) == -1, "newer, past ours");
        char want[300];
        snprintf(want, sizeof want, "version %d, which only nodes of schema %d or later may use; this gadgetd's is %d",
                 ours + 1, ours + 1, ours);
        CHECK(strstr(why, want) != NULL, "the refusal: \"%s\"", why);
}

static void test_array(void)
{
        struct kvpg_array a = { 0 };
        CHECK(kvpg_array_add(&a, "counter") == 0 && strcmp(a.text, "{\"counter\"}") == 0, "one: %s", a.text);
        CHECK(kvpg_array_add(&a, "null") == 0 && kvpg_array_add(&a, "a\"b\\c") == 0 &&
              strcmp(a.text, "{\"counter\",\"null\",\"a\\\"b\\\\c\"}") == 0 && a.n == 3, "three: %s", a.text);
        kvpg_array_reset(&a);
        CHECK(a.n == 0 && kvpg_array_add(&a, "t") == 0 && strcmp(a.text, "{\"t\"}") == 0, "after reset: %s", a.text);
        kvpg_array_reset(&a);
        char name[64];
        for (int i = 0; i < 2000; i++) {
                snprintf(name, sizeof name, "g%05d", i);
                CHECK(kvpg_array_add(&a, name) == 0, "add %d", i);
        }
        CHECK(a.n == 2000 && a.len == strlen(a.text) && a.len == 2 + 2000 * 9 - 1 &&
              strncmp(a.text + a.len - 9, "\"g01999\"}", 9) == 0, "2000 names: %zu bytes", a.len);
        kvpg_array_free(&a);
        CHECK(a.text == NULL, "freed");
}

int main(void)
{
        test_redact();
        test_migrations();
        test_compatible();
        test_array();
        return tap_done();
}
