/* Unit tests of supervisor/bindings/kvpg_sql.c: a connection string's
 * passwords never reach a log line; the migrations are all there. */
#include <string.h>

#include "bindings/kvpg_sql.h"
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
        for (int v = 1; v <= KVPG_SCHEMA_VERSION; v++)
                CHECK(kvpg_sql_migration(v) != NULL, "migration %d", v);
        CHECK(kvpg_sql_migration(0) == NULL && kvpg_sql_migration(KVPG_SCHEMA_VERSION + 1) == NULL,
              "no migration outside 1..%d", KVPG_SCHEMA_VERSION);
        CHECK(strstr(kvpg_sql_migrate_begin, "pg_advisory_xact_lock") != NULL, "migrations take the lock");
}

int main(void)
{
        test_redact();
        test_migrations();
        return tap_done();
}
