/* kvpg_releases: the releases' statements (kvpg_releases.h), on a
 * thread's own connection. Every value a row holds is another node's
 * word: each is copied bounded, and a gadget or version name that is not
 * one is the caller's to refuse (releases_name_ok, releases_version_ok). */
#include "kvpg_releases.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvpg_sql.h"
#include "pgconn.h"
#include "value.h"

static void pg_why(char *why, size_t len, const char *what, const char *msg)
{
        char line[300];
        pgconn_one_line(line, sizeof line, msg ? msg : "");
        snprintf(why, len, "%s: %s", what, line);
}

PGconn *kvpg_releases_connect(const char *conninfo, const char *node, unsigned ms, char *why, size_t len)
{
        /* A server that takes writes, as the kv session's (pgconn.c),
         * unless the conninfo says otherwise; named in pg_stat_activity. */
        char app[96];
        snprintf(app, sizeof app, "gadgetd %.63s releases", node);
        const char *const keys[] = { "dbname", "application_name", "target_session_attrs", NULL };
        const char *const vals[] = { conninfo, app, "read-write", NULL };
        PGconn *c = strstr(conninfo, "target_session_attrs") ? PQconnectStart(conninfo)
                                                            : PQconnectStartParams(keys, vals, 1);
        PostgresPollingStatusType st = PGRES_POLLING_WRITING;
        while (c && st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED) {
                struct pollfd p = { .fd = PQsocket(c), .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT };
                if (poll(&p, 1, (int)ms) <= 0)
                        break;
                st = PQconnectPoll(c);
        }
        if (!c || st != PGRES_POLLING_OK || PQstatus(c) != CONNECTION_OK) {
                pg_why(why, len, "connecting to the store", c ? PQerrorMessage(c) : "out of memory");
                if (c)
                        PQfinish(c);
                return NULL;
        }
        return c;
}

/* sql with n text parameters (binary where bin[i] is a length); results
 * binary if rbin. The result, or NULL with why. */
static PGresult *q(PGconn *c, const char *sql, int n, const char *const *v, const int *len, const int *fmt, int rbin,
                   char *why, size_t wlen)
{
        PGresult *r = NULL, *next;
        if (!PQsendQueryParams(c, sql, n, NULL, v, len, fmt, rbin)) {
                pg_why(why, wlen, "the store", PQerrorMessage(c));
                return NULL;
        }
        while ((next = PQgetResult(c))) {
                PQclear(r);
                r = next;
        }
        ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
                pg_why(why, wlen, "the store", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
                PQclear(r);
                return NULL;
        }
        return r;
}

int kvpg_releases_listen(PGconn *c, char *why, size_t len)
{
        PGresult *r = q(c, "LISTEN " KVPG_RELEASE_CHANNEL, 0, NULL, NULL, NULL, 0, why, len);
        PQclear(r);
        return r ? 0 : -EIO;
}

bool kvpg_releases_notified(PGconn *c)
{
        bool any = false;
        PGnotify *n;
        PQconsumeInput(c);
        while ((n = PQnotifies(c))) {
                any = true;
                PQfreemem(n);
        }
        return any;
}

int kvpg_releases_schema(PGconn *c, char *why, size_t len)
{
        PGresult *r = q(c, KVPG_SQL_SCHEMA, 0, NULL, NULL, NULL, 0, why, len);
        bool row = r && PQntuples(r) == 1 && PQnfields(r) == 2;
        int v = row ? atoi(PQgetvalue(r, 0, 0)) : -1;
        int compatible = row ? atoi(PQgetvalue(r, 0, 1)) : 0;
        PQclear(r);
        /* A store a newer node migrated: its releases' tables are read and
         * written as this node's version's unless it is past that floor
         * (kvpg_sql.c). */
        if (row && kvpg_sql_schema_check(v, compatible, why, len) < 0)
                return -2;
        return v;
}

int kvpg_releases_add(PGconn *c, const struct kvpg_release_row *row, const uint8_t *bundle, size_t len, char *why,
                      size_t wlen)
{
        char ms[24], uid[24];
        snprintf(ms, sizeof ms, "%" PRId64, row->installed_ms);
        snprintf(uid, sizeof uid, "%" PRId64, row->uid);
        const char *v[7] = { row->gadget, row->version, (const char *)bundle, row->signer, ms, uid, row->node };
        const int l[7] = { 0, 0, (int)len, 0, 0, 0, 0 }, f[7] = { 0, 0, 1, 0, 0, 0, 0 };
        PGresult *r = q(c, "SELECT gadgetd_release_add($1, $2, $3, $4, $5, $6, $7)", 7, v, l, f, 0, why, wlen);
        if (!r)
                return -EIO;
        int added = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        PQclear(r);
        if (!added)
                snprintf(why, wlen, "version %s of %s is in the store already", row->version, row->gadget);
        return added ? 0 : -EEXIST;
}

int64_t kvpg_releases_set(PGconn *c, const struct kvpg_release_state *st, int64_t gen, char *why, size_t len)
{
        char g[24], pct[12], me[12], mc[24];
        snprintf(g, sizeof g, "%" PRId64, gen);
        snprintf(pct, sizeof pct, "%u", st->percent);
        snprintf(me, sizeof me, "%u", st->max_errors);
        snprintf(mc, sizeof mc, "%" PRIu64, st->min_calls);
        const char *v[10] = { st->gadget, g, st->current, st->previous, st->rollout, pct, me, mc, st->why, st->node };
        PGresult *r = q(c, "SELECT gadgetd_release_set($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", 10, v, NULL, NULL,
                        0, why, len);
        if (!r)
                return -EIO;
        int64_t out = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -EIO;
        PQclear(r);
        return out;
}

int64_t kvpg_releases_prune(PGconn *c, const char *gadget, unsigned keep, char *why, size_t len)
{
        char k[12];
        snprintf(k, sizeof k, "%u", keep);
        const char *v[2] = { gadget, k };
        /* The newest keep by seq stay, and whatever the gadget's row
         * names (current, previous, a rollout's), whoever wrote it. */
        PGresult *r = q(c, "WITH d AS (DELETE FROM gadgetd_release WHERE gadget = $1"
                        " AND seq NOT IN (SELECT seq FROM gadgetd_release WHERE gadget = $1 ORDER BY seq DESC LIMIT $2)"
                        " AND version NOT IN (SELECT x FROM gadgetd_release_state s,"
                        " LATERAL (VALUES (s.current), (s.previous), (s.rollout)) AS n(x) WHERE s.gadget = $1)"
                        " RETURNING 1) SELECT count(*) FROM d",
                        2, v, NULL, NULL, 0, why, len);
        if (!r)
                return -EIO;
        int64_t n = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -EIO;
        PQclear(r);
        return n;
}

/* A text column as the rows keep it, cut in the query: other nodes can
 * write any row of the store, and libpq holds a whole result; copy cuts
 * each to its field (200 bytes at most) anyway. */
#define CUT(col) "left(" col ", 200)"

/* A row's text into its field, printable: its names are checked where
 * they are used (a bundle's own, signed, are what is installed), but they
 * are logged and shown to gadgetctl as they came, so a control byte
 * becomes '?', and so does every byte past ASCII if the text is not UTF-8
 * (as cut to the field, or as another node wrote it). */
static void copy(char *dst, size_t len, const PGresult *r, int row, int col)
{
        snprintf(dst, len, "%s", PQgetvalue(r, row, col));
        bool utf8 = value_utf8_valid(dst, strlen(dst));
        for (char *p = dst; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f || (!utf8 && (unsigned char)*p >= 0x80))
                        *p = '?';
}

int kvpg_releases_new(PGconn *c, int64_t after, struct kvpg_release_row *rows, size_t max, size_t *n, char *why,
                      size_t len)
{
        char a[24], m[24];
        snprintf(a, sizeof a, "%" PRId64, after);
        snprintf(m, sizeof m, "%zu", max);
        const char *v[2] = { a, m };
        PGresult *r = q(c, "SELECT seq, " CUT("gadget") ", " CUT("version") ", " CUT("signer") ", installed_ms, uid, "
                        CUT("node") ", length(bundle)"
                        " FROM gadgetd_release WHERE seq > $1 ORDER BY seq LIMIT $2", 2, v, NULL, NULL, 0, why, len);
        if (!r)
                return -EIO;
        *n = 0;
        for (int i = 0; i < PQntuples(r) && *n < max; i++) {
                struct kvpg_release_row *w = &rows[(*n)++];
                w->seq = strtoll(PQgetvalue(r, i, 0), NULL, 10);
                copy(w->gadget, sizeof w->gadget, r, i, 1);
                copy(w->version, sizeof w->version, r, i, 2);
                copy(w->signer, sizeof w->signer, r, i, 3);
                w->installed_ms = strtoll(PQgetvalue(r, i, 4), NULL, 10);
                w->uid = strtoll(PQgetvalue(r, i, 5), NULL, 10);
                copy(w->node, sizeof w->node, r, i, 6);
                w->size = strtoll(PQgetvalue(r, i, 7), NULL, 10);
        }
        PQclear(r);
        return 0;
}

int kvpg_releases_bundle(PGconn *c, int64_t seq, size_t max, uint8_t **out, size_t *outlen, char *why, size_t len)
{
        char s[24], m[24];
        snprintf(s, sizeof s, "%" PRId64, seq);
        snprintf(m, sizeof m, "%zu", max);
        const char *v[2] = { s, m };
        /* The length is checked by the server before a byte is sent: a
         * row bigger than any bundle never reaches this node's memory. */
        PGresult *r = q(c, "SELECT bundle FROM gadgetd_release WHERE seq = $1 AND length(bundle) <= $2", 2, v, NULL,
                        NULL, 1, why, len);
        if (!r)
                return -EIO;
        if (PQntuples(r) != 1) {
                PQclear(r);
                snprintf(why, len, "the store's bundle is gone, or bigger than a bundle may be");
                return -E2BIG;
        }
        size_t n = (size_t)PQgetlength(r, 0, 0);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf) {
                PQclear(r);
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        memcpy(buf, PQgetvalue(r, 0, 0), n);
        PQclear(r);
        *out = buf;
        *outlen = n;
        return 0;
}

int kvpg_releases_states(PGconn *c, int64_t after, struct kvpg_release_state *rows, size_t max, size_t *n,
                         char *why, size_t len)
{
        char a[24], m[24];
        snprintf(a, sizeof a, "%" PRId64, after);
        snprintf(m, sizeof m, "%zu", max);
        const char *v[2] = { a, m };
        PGresult *r = q(c, "SELECT seq, gen, " CUT("gadget") ", " CUT("current") ", " CUT("previous") ", "
                        CUT("rollout") ", percent, max_errors, min_calls, " CUT("why") ", " CUT("node")
                        " FROM gadgetd_release_state WHERE seq > $1 ORDER BY seq LIMIT $2", 2, v, NULL, NULL, 0, why,
                        len);
        if (!r)
                return -EIO;
        *n = 0;
        for (int i = 0; i < PQntuples(r) && *n < max; i++) {
                struct kvpg_release_state *w = &rows[(*n)++];
                w->seq = strtoll(PQgetvalue(r, i, 0), NULL, 10);
                w->gen = strtoll(PQgetvalue(r, i, 1), NULL, 10);
                copy(w->gadget, sizeof w->gadget, r, i, 2);
                copy(w->current, sizeof w->current, r, i, 3);
                copy(w->previous, sizeof w->previous, r, i, 4);
                copy(w->rollout, sizeof w->rollout, r, i, 5);
                long p = strtol(PQgetvalue(r, i, 6), NULL, 10), me = strtol(PQgetvalue(r, i, 7), NULL, 10);
                w->percent = p >= 0 && p <= 100 ? (unsigned)p : 0;
                w->max_errors = me >= 0 && me <= 100 ? (unsigned)me : 5;
                long long mc = strtoll(PQgetvalue(r, i, 8), NULL, 10);
                w->min_calls = mc > 0 ? (uint64_t)mc : 100;
                copy(w->why, sizeof w->why, r, i, 9);
                copy(w->node, sizeof w->node, r, i, 10);
        }
        PQclear(r);
        return 0;
}
