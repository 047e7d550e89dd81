/* storebench: kv put and get from a gadget on the PostgreSQL store, beside
 * the same from a gadget on the SQLite store and beside raw libpq, in
 * alternating blocks of one run:
 *   pgput / pgget      N kv puts (durable) / gets through a gadgetd whose
 *                      Store=postgresql
 *   sqlput / sqlget    the same through a gadgetd on SQLite
 *   rawput / rawget    the same rows written by this process with libpq
 *                      (blocking PQexecParams, one autocommit INSERT ... ON
 *                      CONFLICT per put, synchronous_commit=on): what the
 *                      server and its disk allow for a bare upsert
 *   sameput            the same transaction gadgetd's put runs, made by this
 *                      process with libpq (the prepared gadgetd_kv_put of
 *                      the store's schema: fence, quota, write, usage, one
 *                      synchronous commit), for a gadget of its own: what
 *                      the store's guarantees cost the server, so that the
 *                      gadget's put beside it shows gadgetd's own share
 *
 *   storebench PG_SOCKET SQLITE_SOCKET GADGET ROUNDS N CONNINFO
 *
 * Prints each operation's duration in ns. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "ctlclient.h"

static int ok(PGresult *r)
{
        int st = PQresultStatus(r);
        PQclear(r);
        return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : -1;
}

/* The node named in the owner row of the prepared put's gadget. */
static char *same_node;

static PGconn *raw_open(const char *conninfo)
{
        PGconn *c = PQconnectdb(conninfo);
        if (PQstatus(c) != CONNECTION_OK ||
            ok(PQexec(c, "SET synchronous_commit = on; SET client_min_messages = warning;"
                         "DROP TABLE IF EXISTS storebench_raw;"
                         "CREATE TABLE storebench_raw (key bytea PRIMARY KEY, value bytea NOT NULL)")) < 0) {
                fprintf(stderr, "storebench: libpq: %s", PQerrorMessage(c));
                PQfinish(c);
                return NULL;
        }
        return c;
}

/* The store's put function, prepared once, for the gadget "storebench-raw"
 * whose owner row this process makes (no gadgetd runs it). The fence
 * (schema 9 on) passes only for an owner row naming a node incarnation
 * whose lease is live: the row names the bench's running node and its
 * incarnation, read here, so each put runs the whole fence as gadgetd's
 * does (that node never takes or gives back a gadget it does not run). */
static int same_open(PGconn *c)
{
        PGresult *r = PQexec(c, "SELECT name, incarnation FROM gadgetd_node WHERE lease_until > now()"
                                " ORDER BY name LIMIT 1");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
                fprintf(stderr, "storebench: no live node in gadgetd_node: %s", PQerrorMessage(c));
                PQclear(r);
                return -1;
        }
        const char *v[2] = { PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1) };
        PGresult *o = PQexecParams(c, "INSERT INTO gadgetd_owner (gadget, node, epoch, node_inc)"
                                      " VALUES ('storebench-raw', $1, 1, $2::bigint) ON CONFLICT (gadget) DO UPDATE"
                                      " SET node = excluded.node, epoch = 1, node_inc = excluded.node_inc",
                                   2, NULL, v, NULL, NULL, 0);
        char node[128];
        snprintf(node, sizeof node, "%s", v[0]);
        PQclear(r);
        if (ok(o) < 0 || ok(PQprepare(c, "same", "SELECT gadgetd_kv_put('storebench-raw', 'KV', $1, $2, 1000000,"
                                                 " 1073741824, $3, 1)", 3, NULL)) < 0) {
                fprintf(stderr, "storebench: libpq: %s", PQerrorMessage(c));
                return -1;
        }
        same_node = strdup(node);
        return same_node ? 0 : -1;
}

enum raw_op { RAW_GET, RAW_PUT, RAW_SAME };

/* n operations of op one at a time, each timed into s. */
static int raw_loop(PGconn *c, enum raw_op op, int n, struct samples *s)
{
        char key[32], val[8] = { 0 };
        for (int i = 0; i < n; i++) {
                snprintf(key, sizeof key, "k%d", i % 1000);
                memcpy(val, &i, sizeof i);
                const char *v[3] = { key, val, same_node };
                int l[3] = { (int)strlen(key), sizeof val, 0 }, f[3] = { 1, 1, 0 };
                int64_t t0 = bench_now_ns();
                PGresult *r = op == RAW_SAME ? PQexecPrepared(c, "same", 3, v, l, f, 1)
                            : op == RAW_PUT ? PQexecParams(c, "INSERT INTO storebench_raw VALUES ($1, $2) ON CONFLICT (key)"
                                                              " DO UPDATE SET value = excluded.value", 2, NULL, v, l, f, 1)
                                            : PQexecParams(c, "SELECT value FROM storebench_raw WHERE key = $1", 1, NULL,
                                                           v, l, f, 1);
                if (ok(r) < 0) {
                        fprintf(stderr, "storebench: libpq: %s", PQerrorMessage(c));
                        return -1;
                }
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct samples pput = { .name = "pgput_ns" }, pget = { .name = "pgget_ns" }, sput = { .name = "sqlput_ns" },
                       sget = { .name = "sqlget_ns" }, rput = { .name = "rawput_ns" }, rget = { .name = "rawget_ns" },
                       same = { .name = "sameput_ns" },
                       junk = { .name = "warmup" };
        struct ctl pg, sq;
        if (argc != 7) {
                fprintf(stderr, "usage: storebench PG_SOCKET SQLITE_SOCKET GADGET ROUNDS N CONNINFO\n");
                return 2;
        }
        const char *g = argv[3];
        int rounds = atoi(argv[4]), n = atoi(argv[5]);
        PGconn *raw = raw_open(argv[6]);
        if (!raw || same_open(raw) < 0 || ctl_open(&pg, argv[1]) < 0 || ctl_open(&sq, argv[2]) < 0) {
                fprintf(stderr, "storebench: cannot set up\n");
                return 1;
        }
        int fail = ctl_gadget_loop(&pg, g, "kv_put", 50, &junk) < 0 || ctl_gadget_loop(&sq, g, "kv_put", 50, &junk) < 0 ||
                   raw_loop(raw, RAW_PUT, 50, &junk) < 0 || raw_loop(raw, RAW_SAME, 50, &junk) < 0;
        for (int r = 0; !fail && r < rounds; r++)
                fail = ctl_gadget_loop(&pg, g, "kv_put", n, &pput) < 0 || raw_loop(raw, RAW_SAME, n, &same) < 0 ||
                       raw_loop(raw, RAW_PUT, n, &rput) < 0 ||
                       ctl_gadget_loop(&sq, g, "kv_put", n, &sput) < 0 || ctl_gadget_loop(&pg, g, "kv_get", n, &pget) < 0 ||
                       raw_loop(raw, RAW_GET, n, &rget) < 0 || ctl_gadget_loop(&sq, g, "kv_get", n, &sget) < 0;
        ctl_close(&pg);
        ctl_close(&sq);
        PQfinish(raw);
        if (fail) {
                fprintf(stderr, "storebench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &pput, &rput, &sput, &pget, &rget, &sget, &same };
        samples_print(sets, 7);
        return 0;
}
