/* snapshot_pg: a backup and a restore on the PostgreSQL store (kvpg_sql.c's
 * gadgetd_kv_ns, gadgetd_kv, gadgetd_alarm), on the snapshot's thread,
 * through a connection of its own (StoreConnection=), waiting on it as a
 * thread may. libpq is loaded already: a store of PostgreSQL opened it. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"
#include "snapshot.h"
#include "system/pq_dl.h"

/* Rows a backup reads per query (keyset pages of one snapshot). */
#define PAGE 1000
#define PAGE_TEXT "1000"
#define CONNECT_MS 10000

static void pg_why(struct snapshot_run *run, const char *what, const char *msg)
{
        char line[400];
        pgconn_one_line(line, sizeof line, msg ? msg : "");
        snprintf(run->why, sizeof run->why, "%s: %s", what, line);
}

static PGconn *connect_to(struct snapshot_run *run)
{
        PGconn *c = PQconnectStart(run->job->conninfo);
        PostgresPollingStatusType st = PGRES_POLLING_WRITING;
        while (c && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
                struct pollfd p = { .fd = PQsocket(c), .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT };
                if (poll(&p, 1, CONNECT_MS) <= 0)
                        break;
                st = PQconnectPoll(c);
        }
        if (!c || st != PGRES_POLLING_OK || PQstatus(c) != CONNECTION_OK) {
                pg_why(run, "connecting to the store", c ? PQerrorMessage(c) : "out of memory");
                if (c)
                        PQfinish(c);
                return NULL;
        }
        return c;
}

/* Runs sql with n parameters (binary where fmt says so; results binary if
 * bin): its last result, or NULL with run->why. */
static PGresult *q(struct snapshot_run *run, PGconn *c, const char *sql, int n, const char *const *v,
                   const int *len, const int *fmt, int bin)
{
        PGresult *r, *last = NULL;
        if (!PQsendQueryParams(c, sql, n, NULL, v, len, fmt, bin)) {
                pg_why(run, "the store", PQerrorMessage(c));
                return NULL;
        }
        while ((r = PQgetResult(c))) {
                PQclear(last);
                last = r;
        }
        ExecStatusType s = last ? PQresultStatus(last) : PGRES_FATAL_ERROR;
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
                pg_why(run, "the store", last ? PQresultErrorMessage(last) : PQerrorMessage(c));
                PQclear(last);
                return NULL;
        }
        return last;
}

static int exec(struct snapshot_run *run, PGconn *c, const char *sql)
{
        PGresult *r = q(run, c, sql, 0, NULL, NULL, NULL, 0);
        PQclear(r);
        return r ? 0 : -EIO;
}

static int64_t be64(const char *p)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | (uint8_t)p[i];
        return (int64_t)v;
}

#define BINDING_CUT "72"
#define VALUE_BOUNDED(col) "CASE WHEN octet_length(" col ") <= 2097152 THEN " col " END"
_Static_assert(BACKUP_BINDING_MAX == 71 && BACKUP_VALUE_MAX == 2097152, "the bounds' text");

/* Pages of one kind, each after the last row of the one before. */
static int dump(struct snapshot_run *run, PGconn *c, enum backup_kind kind, struct backup_writer *w)
{
        /* Why the columns are bounded in the query: the store is shared
         * with other nodes, which can write any row, and libpq holds a
         * whole page; a name cut one byte past BACKUP_BINDING_MAX, a value
         * past BACKUP_VALUE_MAX as NULL and its length, refused below. */
        static const char kv_sql[] =
                "SELECT left(n.binding, " BINDING_CUT "), k.key, " VALUE_BOUNDED("k.value")
                " FROM gadgetd_kv k JOIN gadgetd_kv_ns n ON n.id = k.ns"
                " WHERE n.gadget = $1 AND (n.binding COLLATE \"C\", k.key) > ($2, $3)"
                " ORDER BY n.binding COLLATE \"C\", k.key LIMIT " PAGE_TEXT;
        static const char alarm_sql[] =
                "SELECT left(binding, " BINDING_CUT "), convert_to(id, 'UTF8'), " VALUE_BOUNDED("payload")
                ", at, due, attempts::bigint FROM gadgetd_alarm"
                " WHERE gadget = $1 AND (binding COLLATE \"C\", convert_to(id, 'UTF8')) > ($2, $3)"
                " ORDER BY binding COLLATE \"C\", convert_to(id, 'UTF8') LIMIT " PAGE_TEXT;
        char binding[BACKUP_BINDING_MAX + 1] = "";
        uint8_t key[BACKUP_KEY_MAX];
        int klen = 0;
        for (;;) {
                const char *v[3] = { run->job->gadget, binding, (const char *)key };
                int len[3] = { 0, 0, klen }, fmt[3] = { 0, 0, 1 };
                PGresult *r = q(run, c, kind == BACKUP_KV ? kv_sql : alarm_sql, 3, v, len, fmt, 1);
                if (!r)
                        return -EIO;
                int rows = PQntuples(r), e = 0;
                for (int i = 0; i < rows && e == 0; i++) {
                        struct backup_record rec = { .kind = kind };
                        snprintf(rec.binding, sizeof rec.binding, "%s", PQgetvalue(r, i, 0));
                        rec.key = (const uint8_t *)PQgetvalue(r, i, 1);
                        rec.klen = (size_t)PQgetlength(r, i, 1);
                        rec.value = (const uint8_t *)PQgetvalue(r, i, 2);
                        rec.vlen = (size_t)PQgetlength(r, i, 2);
                        if (kind == BACKUP_ALARM) {
                                rec.at = be64(PQgetvalue(r, i, 3));
                                rec.due = be64(PQgetvalue(r, i, 4));
                                rec.attempts = (uint32_t)be64(PQgetvalue(r, i, 5));
                        }
                        if (PQgetlength(r, i, 0) > BACKUP_BINDING_MAX || PQgetisnull(r, i, 2)) {
                                snprintf(run->why, sizeof run->why, "binding %s: a stored row the format cannot "
                                         "hold (a binding name or value too long)", rec.binding);
                                e = -EINVAL;
                                break;
                        }
                        if ((e = backup_write(w, &rec)) < 0) {
                                snprintf(run->why, sizeof run->why, "binding %s: a stored row the format cannot "
                                         "hold, or writing the file: %s", rec.binding, strerror(-e));
                                break;
                        }
                        snprintf(binding, sizeof binding, "%s", rec.binding);
                        klen = (int)(rec.klen < sizeof key ? rec.klen : sizeof key);
                        memcpy(key, rec.key, (size_t)klen);
                }
                PQclear(r);
                if (e < 0)
                        return e;
                if (rows < PAGE)
                        return 0;
        }
}

int snapshot_pg_backup(struct snapshot_run *run, struct backup_writer *w)
{
        PGconn *c = connect_to(run);
        if (!c)
                return -EIO;
        /* One snapshot for every page of both kinds. */
        int e = exec(run, c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        if (e == 0 && (e = dump(run, c, BACKUP_KV, w)) == 0)
                e = dump(run, c, BACKUP_ALARM, w);
        if (e == 0)
                e = exec(run, c, "COMMIT");
        PQfinish(c);
        return e;
}

static void be_put(char *p, uint64_t v)
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (char)(uint8_t)v;
}

/* A restore's kv keys sent BATCH_ROWS at a time (at most BATCH_BYTES of
 * them, a value larger alone): one statement per batch, not per key. */
#define BATCH_ROWS 200
#define BATCH_BYTES (4u << 20)

struct batch {
        char binding[BACKUP_BINDING_MAX + 1];
        int n;
        size_t off[BATCH_ROWS][2], len[BATCH_ROWS][2]; /* each key's and value's place in buf */
        uint8_t *buf;
        size_t used, cap;
};

/* Sends the batch's keys: one INSERT of n rows of binary parameters. */
static int batch_flush(struct snapshot_run *run, PGconn *c, struct batch *b)
{
        const char *v[2 + 2 * BATCH_ROWS];
        int len[2 + 2 * BATCH_ROWS], fmt[2 + 2 * BATCH_ROWS];
        /* Each row's text, "($NNN::bytea, $NNN::bytea), ", fits 40 bytes. */
        char sql[200 + 40 * BATCH_ROWS];
        size_t at;
        if (b->n == 0)
                return 0;
        v[0] = run->job->gadget;
        v[1] = b->binding;
        len[0] = len[1] = fmt[0] = fmt[1] = 0;
        at = (size_t)snprintf(sql, sizeof sql, "INSERT INTO gadgetd_kv (ns, key, value) SELECT n.id, u.k, u.v FROM"
                              " gadgetd_kv_ns n, (VALUES ");
        for (int i = 0; i < b->n; i++) {
                for (int j = 0; j < 2; j++) {
                        v[2 + 2 * i + j] = (const char *)b->buf + b->off[i][j];
                        len[2 + 2 * i + j] = (int)b->len[i][j];
                        fmt[2 + 2 * i + j] = 1;
                }
                at += (size_t)snprintf(sql + at, sizeof sql - at, "%s($%d::bytea, $%d::bytea)", i ? ", " : "",
                                       3 + 2 * i, 4 + 2 * i);
        }
        snprintf(sql + at, sizeof sql - at, ") AS u (k, v) WHERE n.gadget = $1 AND n.binding = $2");
        PGresult *r = q(run, c, sql, 2 + 2 * b->n, v, len, fmt, 0);
        PQclear(r);
        b->n = 0;
        b->used = 0;
        return r ? 0 : -EIO;
}

static int batch_add(struct snapshot_run *run, PGconn *c, struct batch *b, const struct backup_record *rec)
{
        int e;
        if ((b->n && (strcmp(b->binding, rec->binding) != 0 || b->n == BATCH_ROWS ||
                      b->used + rec->klen + rec->vlen > BATCH_BYTES)) && (e = batch_flush(run, c, b)) < 0)
                return e;
        /* Why bounded: a batch holds at most BATCH_BYTES, or one record
         * (a key of 512 bytes and a value of BACKUP_VALUE_MAX). */
        if (b->used + rec->klen + rec->vlen > b->cap) {
                size_t cap = b->used + rec->klen + rec->vlen;
                uint8_t *p = realloc(b->buf, cap < BATCH_BYTES ? BATCH_BYTES : cap);
                if (!p)
                        return -ENOMEM;
                b->buf = p;
                b->cap = cap < BATCH_BYTES ? BATCH_BYTES : cap;
        }
        snprintf(b->binding, sizeof b->binding, "%s", rec->binding);
        memcpy(b->buf + b->used, rec->key, rec->klen);
        b->off[b->n][0] = b->used;
        b->len[b->n][0] = rec->klen;
        b->used += rec->klen;
        if (rec->vlen)
                memcpy(b->buf + b->used, rec->value, rec->vlen);
        b->off[b->n][1] = b->used;
        b->len[b->n][1] = rec->vlen;
        b->used += rec->vlen;
        b->n++;
        return 0;
}

static int insert(struct snapshot_run *run, PGconn *c, struct batch *b, const struct backup_record *rec)
{
        int e = snapshot_check(run, rec);
        if (e < 0)
                return e;
        if (rec->kind == BACKUP_KV)
                return batch_add(run, c, b, rec);
        /* The kv keys come first: the last of them go before any alarm. */
        if ((e = batch_flush(run, c, b)) < 0)
                return e;
        char at[8], due[8], att[8];
        be_put(at, (uint64_t)rec->at);
        be_put(due, (uint64_t)rec->due);
        be_put(att, rec->attempts);
        char id[BACKUP_KEY_MAX + 1];
        memcpy(id, rec->key, rec->klen);
        id[rec->klen] = '\0';
        const char *v[7] = { run->job->gadget, rec->binding, id, at, due, att, (const char *)rec->value };
        int len[7] = { 0, 0, 0, 8, 8, 8, (int)rec->vlen }, fmt[7] = { 0, 0, 0, 1, 1, 1, 1 };
        PGresult *r = q(run, c, "INSERT INTO gadgetd_alarm (gadget, binding, id, at, due, attempts, payload)"
                        " VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6::bigint::int, $7)", 7, v, len, fmt, 0);
        PQclear(r);
        return r ? 0 : -EIO;
}

/* The namespace of every kv binding the policy declares (the inserts'
 * ns), emptied. */
static int namespaces(struct snapshot_run *run, PGconn *c)
{
        for (size_t i = 0; i < run->job->n_bindings; i++) {
                const struct snapshot_binding *b = &run->job->bindings[i];
                if (b->kind != BACKUP_KV)
                        continue;
                const char *v[3] = { run->job->gadget, b->name, run->job->node ? run->job->node : "" };
                PGresult *r = q(run, c, "INSERT INTO gadgetd_kv_ns (gadget, binding, created_by) VALUES ($1, $2, $3)"
                                " ON CONFLICT (gadget, binding) DO NOTHING", 3, v, NULL, NULL, 0);
                PQclear(r);
                if (!r)
                        return -EIO;
        }
        return 0;
}

/* A restore by a node that holds no lease of the gadget (it is stopped
 * here): only while no node holds one live, as the store says, and its
 * owner row held FOR SHARE until the commit (made, given back, if there
 * is none), so that a node that takes the lease meanwhile waits for the
 * restore (its take gives up after its lock wait, and tries again at its
 * next round) and starts the gadget on the restored state. 0, or -EAGAIN
 * with why: a node runs it. */
static int unowned(struct snapshot_run *run, PGconn *c)
{
        const char *g[1] = { run->job->gadget };
        PGresult *r = q(run, c, "INSERT INTO gadgetd_owner (gadget, node, epoch, node_inc) VALUES ($1, '', 0, 0)"
                        " ON CONFLICT (gadget) DO NOTHING", 1, g, NULL, NULL, 0);
        PQclear(r);
        if (!r)
                return -EIO;
        r = q(run, c, "SELECT o.node, o.node_inc = 0 OR n.name IS NULL OR n.incarnation <> o.node_inc"
              " OR n.lease_until <= clock_timestamp() FROM gadgetd_owner o LEFT JOIN gadgetd_node n"
              " ON n.name = o.node WHERE o.gadget = $1 FOR SHARE OF o", 1, g, NULL, NULL, 0);
        if (!r)
                return -EIO;
        int e = 0;
        if (PQntuples(r) != 1 || strcmp(PQgetvalue(r, 0, 1), "t") != 0) {
                snprintf(run->why, sizeof run->why, "node %s runs %s (it holds its lease): restore it there, "
                         "stopped or idle", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "?", run->job->gadget);
                e = -EAGAIN;
        }
        PQclear(r);
        return e;
}

int snapshot_pg_restore(struct snapshot_run *run, struct backup_reader *r)
{
        PGconn *c = connect_to(run);
        if (!c)
                return -EIO;
        char epoch[24];
        snprintf(epoch, sizeof epoch, "%" PRId64, run->job->epoch);
        const char *fence[2] = { run->job->gadget, epoch };
        const char *g[1] = { run->job->gadget };
        struct backup_record rec;
        int e = exec(run, c, "BEGIN");
        PGresult *res = NULL;
        if (e == 0 && run->job->epoch) {
                /* Fenced as every write: the owner row held FOR SHARE
                 * until the commit, so a takeover waits for it, or it is
                 * refused. */
                if (!(res = q(run, c, "SELECT gadgetd_fence($1, $2::bigint)", 2, fence, NULL, NULL, 0)))
                        e = -EIO;
                PQclear(res);
        } else if (e == 0) {
                e = unowned(run, c);
        }
        if (e == 0 && (res = q(run, c, "DELETE FROM gadgetd_kv WHERE ns IN (SELECT id FROM gadgetd_kv_ns"
                               " WHERE gadget = $1)", 1, g, NULL, NULL, 0)))
                PQclear(res);
        if (e == 0 && !res)
                e = -EIO;
        if (e == 0 && (res = q(run, c, "DELETE FROM gadgetd_alarm WHERE gadget = $1", 1, g, NULL, NULL, 0)))
                PQclear(res);
        if (e == 0 && !res)
                e = -EIO;
        if (e == 0)
                e = namespaces(run, c);
        struct batch *b = calloc(1, sizeof *b);
        if (e == 0 && !b)
                e = -ENOMEM;
        while (e == 0 && (e = backup_read(r, &rec, &run->info, run->why, sizeof run->why)) == 1)
                e = insert(run, c, b, &rec);
        if (e == 0)
                e = batch_flush(run, c, b);
        if (b)
                free(b->buf);
        free(b);
        if (e == 0 && (res = q(run, c, "UPDATE gadgetd_kv_ns n SET keys = coalesce(s.k, 0), bytes = coalesce(s.b, 0)"
                               " FROM gadgetd_kv_ns m LEFT JOIN (SELECT ns, count(*) AS k,"
                               " sum(length(key) + length(value)) AS b FROM gadgetd_kv GROUP BY ns) s ON s.ns = m.id"
                               " WHERE m.gadget = $1 AND n.id = m.id", 1, g, NULL, NULL, 0)))
                PQclear(res);
        if (e == 0 && !res)
                e = -EIO;
        if (e == 0)
                e = exec(run, c, "COMMIT");
        /* Closing without a commit rolls the transaction back: all or
         * nothing. */
        PQfinish(c);
        return e;
}
