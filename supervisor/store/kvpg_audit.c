/* kvpg_audit: audit lines copied to the store in batches, and read back.
 *
 * States: DOWN (waiting to try again, with backoff), CONNECTING, SETUP
 * (the session's settings; the schema must be at version 3 or later,
 * which the kv connection migrates: until then this one retries), READY.
 * One query out at a time: a batch (every queued line up to BATCH_LINES
 * or BATCH_BYTES, one INSERT), a page of a read, or the hourly prune.
 * A read goes once the lines queued before it are done (written or
 * dropped), before any later batch: it sees what this node wrote before it
 * was asked, and waits for at most a queue's worth of batches.
 *
 * A line waits up to BATCH_GATHER_MS for others to join its batch (a read
 * sends what waits at once). Why: each batch is a transaction whose
 * synchronous commit flushes the server's WAL, and a busy gadget's 200
 * records a second, sent one by one, were 200 more flushes a second that
 * its own kv puts' commits queued behind.
 *
 * A batch stays at the head of the queue until its commit is reported; a
 * batch whose connection is lost is sent again after the reconnect. Each
 * line carries its node's sequence ("seq", audit.c) and the store keeps
 * one row per node and sequence (schema 13: ON CONFLICT DO NOTHING), so
 * a batch that committed before its answer was lost lands once. A batch
 * the server refuses for another reason is dropped and counted.
 *
 * The catch-up from audit.log at each connect (records the queue never
 * had or lost): kvpg_audit_catch.c. */
#include "kvpg_audit_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "kvpg_sql.h"
#include "pgconn.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/retry.h"
#include "system/timer.h"

#define CONNECT_TIMEOUT_MS 5000
#define QUERY_TIMEOUT_MS 10000
#define STATEMENT_TIMEOUT_MS 8000
#define RECONNECT_MAX_MS 5000
#define BATCH_GATHER_MS 20
#define PRUNE_EVERY_S 3600
#define PRUNE_ROWS "10000"            /* rows one prune deletes at most */
#define TRIM_ROWS "4096"              /* oldest rows one batch may delete to keep the budget (they hold
                                       * more than a batch's BATCH_BYTES unless under 256 bytes each) */
#define REPORT_EVERY_S 10             /* dropped lines: said at once, then one line at most this often */

/* The batch, and the node's oldest rows past its budget: $3 bytes of them
 * (0: none, and then the scan of the oldest is not even made) go in the
 * same statement. Answers the bytes written, and the rows and bytes
 * deleted. */
static const char sql_batch[] =
        "WITH ins AS (INSERT INTO gadgetd_audit (gadget, node, at, line, seq)"
        " SELECT l::json->>'gadget', $2, (l::json->>'time')::timestamptz, l, (l::json->>'seq')::bigint"
        " FROM unnest(string_to_array($1, E'\\n')) WITH ORDINALITY AS t(l, i) ORDER BY i"
        " ON CONFLICT (node, seq) DO NOTHING"
        " RETURNING octet_length(line) AS n),"
        " old AS (SELECT id, n, sum(n) OVER (ORDER BY id) AS run FROM"
        " (SELECT id, octet_length(line) AS n FROM gadgetd_audit WHERE $3::bigint > 0 AND node = $2"
        " ORDER BY id LIMIT " TRIM_ROWS ") o),"
        " del AS (DELETE FROM gadgetd_audit WHERE $3::bigint > 0 AND id IN (SELECT id FROM old WHERE run - n < $3::bigint)"
        " RETURNING octet_length(line) AS n)"
        " SELECT (SELECT coalesce(sum(n), 0) FROM ins), (SELECT count(*) FROM del), (SELECT coalesce(sum(n), 0) FROM del),"
        " (SELECT count(*) FROM ins)";
/* A read's order: the records' own time, then (within a millisecond)
 * their node's sequence, then id. Not id alone: a record caught up from
 * audit.log (after a SIGKILL, or dropped from a full queue) is inserted
 * after records written later, and would be listed after them. No index
 * has this order (a new one would be a schema): a page is the gadget's
 * rows (index on gadget, id) past the key, sorted for its first 256, or
 * the rows past the key's time (index on at), whichever the planner finds
 * cheaper. A key's time goes as text, in UTC to the microsecond: exact. */
#define AT_TEXT "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
/* The highest id of the gadget's rows (the read sees none written after
 * it begins), and the key of the row before its last $2 (NULL: from the
 * first: $2 NULL, or no more rows than that). */
static const char sql_range[] =
        "SELECT u.upto, f.k_at, f.k_seq, f.id FROM"
        " (SELECT coalesce(max(id), 0) AS upto FROM gadgetd_audit WHERE gadget = $1) u LEFT JOIN LATERAL"
        " (SELECT " AT_TEXT " AS k_at, coalesce(seq, 0) AS k_seq, id FROM gadgetd_audit"
        " WHERE gadget = $1 AND id <= u.upto AND $2::bigint > 0"
        " ORDER BY at DESC, coalesce(seq, 0) DESC, id DESC OFFSET $2::bigint LIMIT 1) f ON true";
/* A line as long as a slice of audit.log is not gadgetd's (audit_read.c
 * skips it there too): other nodes can write any row of the store, and
 * libpq holds a whole page, which is so at most 256 such slices. */
#define SLICE_TEXT "65536"
_Static_assert(AUDIT_SLICE == 65536, "SLICE_TEXT is AUDIT_SLICE");
static const char sql_page[] =
        "SELECT id, line, " AT_TEXT ", coalesce(seq, 0) FROM gadgetd_audit WHERE gadget = $1 AND id <= $2::bigint"
        " AND octet_length(line) < " SLICE_TEXT
        " AND ($3::timestamptz IS NULL OR (at >= $3::timestamptz"
        " AND (at, coalesce(seq, 0), id) > ($3::timestamptz, $4::bigint, $5::bigint)))"
        " ORDER BY at, coalesce(seq, 0), id LIMIT 256";
static const char sql_prune[] =
        "WITH d AS (DELETE FROM gadgetd_audit WHERE id IN (SELECT id FROM gadgetd_audit"
        " WHERE at < now() - $1::integer * interval '1 day' LIMIT " PRUNE_ROWS ")"
        " RETURNING CASE WHEN node = $2 THEN octet_length(line) ELSE 0 END AS mine)"
        " SELECT count(*), coalesce(sum(mine), 0) FROM d";

static bool batch_may_retry(const char *sqlstate);
static void report_soon(struct kvpg_audit *au);

/* Counts one line not copied, and why. */
static void drop(struct kvpg_audit *au, uint64_t n, const char *why)
{
        au->dropped += n;
        snprintf(au->why, sizeof au->why, "%s", why);
        report_soon(au);
}

/* A line of sequence seq left out of the queue (counted dropped): in
 * audit.log, the next catch-up copies it from there (and then it no longer
 * counts as unsent). */
static void gap_at(struct kvpg_audit *au, uint64_t seq)
{
        if (!seq)
                return; /* no sequence: no catch-up finds it */
        au->gap_drops++;
        if (!au->gap || seq < au->gap)
                au->gap = seq;
}

/* Frees the first n queued lines. */
static void unqueue(struct kvpg_audit *au, size_t n)
{
        while (n-- && au->head) {
                struct line *l = au->head;
                au->head = l->next;
                au->lines--;
                au->bytes -= l->len;
                au->done++;
                free(l);
        }
        if (!au->head)
                au->tail = &au->head;
}

void kvpg_audit_add(void *arg, const char *gadget, const char *line)
{
        struct kvpg_audit *au = arg;
        size_t len = strlen(line);
        (void)gadget; /* the line names it; the store reads it from there */
        /* Why gadgetd cannot bloat on a slow store: the queue is bounded,
         * and what does not fit is counted, never waited for. */
        if (au->lines >= KVPG_AUDIT_QUEUE_LINES || au->bytes + len > KVPG_AUDIT_QUEUE_BYTES) {
                char why[320];
                snprintf(why, sizeof why, "the queue to the store is full (%u lines or %u bytes): %s",
                         KVPG_AUDIT_QUEUE_LINES, KVPG_AUDIT_QUEUE_BYTES,
                         au->state == AU_READY ? "the store is slow" : au->reason);
                drop(au, 1, why);
                gap_at(au, audit_seq_of(line, len));
                return;
        }
        struct line *l = malloc(sizeof *l + len + 1);
        if (!l) {
                drop(au, 1, "out of memory");
                gap_at(au, audit_seq_of(line, len));
                return;
        }
        l->next = NULL;
        l->seq = audit_seq_of(line, len);
        l->len = len;
        memcpy(l->text, line, len + 1);
        *au->tail = l;
        au->tail = &l->next;
        au->lines++;
        au->bytes += len;
        au->added++;
        /* A full batch goes now; a smaller one once the first line waited
         * BATCH_GATHER_MS (or a read asks for it). */
        if (au->lines >= BATCH_LINES || au->bytes >= BATCH_BYTES)
                kvpg_audit_send_next(au);
        else if (!evtimer_pending(au->ev_gather, NULL))
                timer_arm_ms(au->ev_gather, BATCH_GATHER_MS);
}

uint64_t kvpg_audit_dropped(const struct kvpg_audit *au, const char **why)
{
        uint64_t n = au && au->dropped > au->recovered ? au->dropped - au->recovered : 0;
        *why = n ? au->why : "";
        return n;
}

/* A query was handed to libpq (sent: its return). */
void kvpg_audit_query_begin(struct kvpg_audit *au, enum out out, int sent)
{
        au->out = out;
        au->err[0] = au->sqlstate[0] = '\0';
        PQclear(au->last);
        au->last = NULL;
        pgconn_sent(au->pc, sent, STORE_OP_OTHER);
}

/* Lines (bytes with their NUL: newline-separated) as one INSERT. */
void kvpg_audit_send_text(struct kvpg_audit *au, enum out out, const char *text, size_t bytes, bool newest_only)
{
        /* Why this is safe: a batch holds at most the budget (or one
         * line), so the node's older rows hold at least the excess and the
         * DELETE's oldest rows cover it: after each batch the node's rows
         * hold at most the budget, or one record. A batch whose older
         * lines were dropped to fit (newest_only) takes every older row
         * with it: the budget's room it leaves (less than one line) would
         * otherwise keep the newest of them, records older than the ones
         * dropped, and the store would not hold the newest records. */
        char excess[24];
        uint64_t after = au->stored + bytes;
        snprintf(excess, sizeof excess, "%llu",
                 (unsigned long long)(newest_only ? INT64_MAX
                                      : au->max_bytes && after > au->max_bytes ? after - au->max_bytes : 0));
        const char *params[3] = { text, au->node, excess };
        kvpg_audit_query_begin(au, out,
                               PQsendQueryParams(pgconn_pq(au->pc), sql_batch, 3, NULL, params, NULL, NULL, 0));
}

/* The queued lines (up to a batch's bound) as one INSERT. */
static void send_batch(struct kvpg_audit *au)
{
        size_t n = 0, bytes = 0;
        for (struct line *l = au->head; l && n < BATCH_LINES && bytes + l->len < BATCH_BYTES; l = l->next) {
                bytes += l->len + 1;
                n++;
        }
        if (n == 0)
                n = 1, bytes = au->head->len + 1; /* one line larger than a batch: alone */
        /* A batch larger than the budget keeps its newest lines: the rest
         * would be the oldest rows once written, dropped by this very
         * statement if its DELETE could see them (it cannot: one snapshot). */
        while (au->max_bytes && n > 1 && bytes > au->max_bytes) {
                bytes -= au->head->len + 1;
                unqueue(au, 1);
                n--;
                au->trimmed++;
                au->newest_only = true; /* until this batch commits (it may be sent again) */
        }
        if (au->newest_only)
                report_soon(au);
        char *text = malloc(bytes);
        if (!text) {
                pgconn_fail(au->pc, "out of memory");
                return;
        }
        char *p = text;
        size_t i = 0;
        /* Lines are JSON text written with JSON_ENSURE_ASCII: never a raw
         * newline inside one, so a newline separates them. */
        for (struct line *l = au->head; i < n; l = l->next, i++) {
                memcpy(p, l->text, l->len);
                p += l->len;
                *p++ = i + 1 < n ? '\n' : '\0';
        }
        au->batch = n;
        kvpg_audit_send_text(au, OUT_BATCH, text, bytes, au->newest_only);
        free(text);
}

/* The next query of the read at the head: its range first, then a page. */
static void send_read(struct kvpg_audit *au)
{
        struct kvpg_audit_read *rd = au->reads;
        char last[24], upto[24], seq[24], id[24];
        au->reads = rd->next;
        if (!au->reads)
                au->reads_tail = &au->reads;
        au->reading = rd;
        if (rd->upto < 0) {
                snprintf(last, sizeof last, "%zu", rd->last);
                const char *params[2] = { rd->gadget, rd->last ? last : NULL };
                kvpg_audit_query_begin(au, OUT_RANGE,
                            PQsendQueryParams(pgconn_pq(au->pc), sql_range, 2, NULL, params, NULL, NULL, 0));
                return;
        }
        snprintf(upto, sizeof upto, "%lld", rd->upto);
        snprintf(seq, sizeof seq, "%lld", rd->key_seq);
        snprintf(id, sizeof id, "%lld", rd->key_id);
        const char *params[5] = { rd->gadget, upto, rd->from ? rd->at : NULL, seq, id };
        kvpg_audit_query_begin(au, OUT_PAGE,
                               PQsendQueryParams(pgconn_pq(au->pc), sql_page, 5, NULL, params, NULL, NULL, 0));
}

static void send_prune(struct kvpg_audit *au)
{
        char days[16];
        snprintf(days, sizeof days, "%u", au->keep_days);
        const char *params[2] = { days, au->node };
        au->prune_due = false;
        kvpg_audit_query_begin(au, OUT_PRUNE,
                               PQsendQueryParams(pgconn_pq(au->pc), sql_prune, 2, NULL, params, NULL, NULL, 0));
}


/* The next query, if the connection is idle: at connect, the store's
 * highest sequence first; a read whose earlier lines are done, else a
 * batch (the queue's and the catch-up's in turn); the prune when none
 * waits. Lines dropped while connected: a catch-up from the first of
 * them once the queue is empty. */
void kvpg_audit_send_next(struct kvpg_audit *au)
{
        if (au->state != AU_READY || pgconn_busy(au->pc))
                return;
        if (au->high_due) {
                kvpg_audit_catch_send_high(au);
        } else if (au->reads && au->reads->seq <= au->done) {
                send_read(au);
        } else if (au->cfull && (!au->head || !au->ctoggle)) {
                au->ctoggle = true;
                au->cbuf[au->clen - 1] = '\0';
                kvpg_audit_send_text(au, OUT_CATCH, au->cbuf, au->clen, false);
        } else if (au->head && (!au->catch || au->cfull)) {
                /* (While the catch-up reads, the queue waits: a slice a
                 * turn; its records then precede the queue's in the
                 * store, as in the files.) */
                au->ctoggle = false;
                send_batch(au);
        } else if (au->gap && !au->catch) {
                uint64_t after = au->gap - 1;
                au->gap = 0;
                kvpg_audit_catch_begin(au, after, 0, 0);
        } else if (au->prune_due) {
                send_prune(au);
        }
}

/* A batch's name (its callers': "a batch", "a batch from audit.log"), at
 * most, and the remark on a refusal by a standby. */
#define WHAT_MAX 32
#define READ_ONLY " (refused by a server that takes no writes: a standby?)"
_Static_assert(WHAT_MAX + sizeof " was not written" READ_ONLY ": " + sizeof((struct kvpg_audit *)0)->err <=
                       sizeof((struct kvpg_audit *)0)->why,
               "drop keeps a batch's why whole");

/* A batch (what, of n lines: the queue's or the catch-up's) ended: failed
 * for a while (batch_may_retry): the connection goes and it is sent again
 * after the reconnect, -1; refused for what it holds: dropped, counted,
 * 0; or committed: the rows it inserted (a line there already inserts
 * none: the key is node and seq), the budget's count kept. */
int64_t kvpg_audit_batch_ended(struct kvpg_audit *au, size_t n, const char *what)
{
        /* Room for the longest: what, the read-only remark and the error. */
        char why[WHAT_MAX + sizeof " was not written" READ_ONLY ": " + sizeof au->err];
        if (batch_may_retry(au->sqlstate)) {
                bool ro = strcmp(au->sqlstate, KVPG_SQLSTATE_READ_ONLY) == 0;
                snprintf(why, sizeof why, "%.*s was not written%s: %s", WHAT_MAX, what, ro ? READ_ONLY : "",
                         au->err);
                pgconn_fail(au->pc, why);
                return -1;
        }
        if (au->err[0]) {
                snprintf(why, sizeof why, "the store refused %.*s: %s", WHAT_MAX, what, au->err);
                drop(au, n, why);
                return 0;
        }
        if (!au->last || PQntuples(au->last) != 1 || PQnfields(au->last) != 4)
                return 0;
        uint64_t in = strtoull(PQgetvalue(au->last, 0, 0), NULL, 10);
        uint64_t rows = strtoull(PQgetvalue(au->last, 0, 1), NULL, 10);
        uint64_t out = strtoull(PQgetvalue(au->last, 0, 2), NULL, 10);
        au->stored = au->stored + in > out ? au->stored + in - out : 0;
        au->trimmed += rows;
        if (rows)
                report_soon(au);
        return (int64_t)strtoull(PQgetvalue(au->last, 0, 3), NULL, 10);
}

/* Answers the read being made (its page or an error), unless it left. */
static void read_answer(struct kvpg_audit *au, PGresult *res, int err, const char *why)
{
        struct kvpg_audit_read *rd = au->reading;
        au->reading = NULL;
        if (rd)
                rd->done(rd, res, err, why);
        else
                PQclear(res);
}

/* rd goes on past the key in res's row (its time, seq and id in columns
 * at, at + 1 and id), if there is one; else from the first row. */
static void key_keep(struct kvpg_audit_read *rd, const PGresult *res, int row, int at, int id)
{
        rd->from = !PQgetisnull(res, row, at);
        if (!rd->from)
                return;
        snprintf(rd->at, sizeof rd->at, "%s", PQgetvalue(res, row, at));
        rd->key_seq = atoll(PQgetvalue(res, row, at + 1));
        rd->key_id = atoll(PQgetvalue(res, row, id));
}

/* The range of a read is known: its first page is asked at once. */
static void range_known(struct kvpg_audit *au)
{
        struct kvpg_audit_read *rd = au->reading;
        if (!rd)
                return;
        if (!au->last || PQntuples(au->last) != 1 || PQnfields(au->last) != 4) {
                read_answer(au, NULL, -EIO, "the store answered no range");
                return;
        }
        rd->upto = atoll(PQgetvalue(au->last, 0, 0));
        key_keep(rd, au->last, 0, 1, 3);
        au->reading = NULL;
        rd->next = au->reads;
        au->reads = rd;
        if (!rd->next)
                au->reads_tail = &rd->next;
}

/* The setup query ended: the schema must have gadgetd_audit. */
static void setup_done(struct kvpg_audit *au)
{
        bool row = au->last && PQntuples(au->last) == 1 && PQnfields(au->last) == 3;
        int version = row ? atoi(PQgetvalue(au->last, 0, 0)) : 0;
        int compatible = row ? atoi(PQgetvalue(au->last, 0, 1)) : 0;
        if (version >= KVPG_SCHEMA_AUDIT_SEQ)
                au->stored = strtoull(PQgetvalue(au->last, 0, 2), NULL, 10);
        char why[300];
        /* A store a newer node migrated: its batches are this node's
         * version's (the columns it names are still there, the floor's
         * promise: kvpg_sql.c), unless the store is past that floor. */
        if (kvpg_sql_schema_check(version, compatible, why, sizeof why) < 0) {
                pgconn_fail(au->pc, why);
                return;
        }
        /* Its batches name the column seq and its conflict key: the
         * schema that made them first. */
        if (version < KVPG_SCHEMA_AUDIT_SEQ) {
                snprintf(why, sizeof why, "the store's schema is version %d, not yet %d (the kv connection "
                         "migrates it)", version, KVPG_SCHEMA_AUDIT_SEQ);
                au->schema_wait = true;
                pgconn_fail(au->pc, why);
                return;
        }
        au->state = AU_READY;
        au->backoff_ms = 0;
        au->prune_due = true; /* at each connect, then hourly */
        au->high_due = true;  /* the catch-up, before any batch */
        if (au->down_logged)
                log_msg(L_INFO, NULL, "audit: copying records to the store%s (%s)", au->schema_wait ? "" : " again",
                        au->where);
        au->down_logged = au->schema_wait = false;
}

/* The setup query failed: a store whose schema is not made yet (a first
 * start: the kv connection is making it) is waited for, not an outage. */
static void setup_failed(struct kvpg_audit *au)
{
        if (strcmp(au->sqlstate, "42P01") == 0)
                au->schema_wait = true;
        pgconn_fail(au->pc, au->err);
}

/* Whether a batch that failed with sqlstate failed for a while only, the
 * lines themselves fine: not done in time (the server's statement_timeout,
 * a lock), refused by a server that takes no writes (a standby, 25006:
 * sent again to the one that takes them), its session ended by the server (a shutdown or restart, a
 * terminated backend: 57P01-57P03, the connection's class 08 but a
 * protocol violation, which is the batch's own; seen here before libpq
 * sees the socket close), a serialization failure or deadlock (class 40),
 * the server short of resources (class 53). Why sending such a batch
 * again is safe: each of these errors aborted its transaction, so none of
 * it committed (40003, completion unknown, may have: a duplicate at
 * worst, as for a lost answer). */
static bool batch_may_retry(const char *sqlstate)
{
        return strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "55P03") == 0 ||
               strcmp(sqlstate, KVPG_SQLSTATE_READ_ONLY) == 0 ||
               strncmp(sqlstate, "57P0", 4) == 0 || (strncmp(sqlstate, "08", 2) == 0 && strcmp(sqlstate, "08P01")) ||
               strncmp(sqlstate, "40", 2) == 0 || strncmp(sqlstate, "53", 2) == 0;
}

/* A batch ended: committed (its lines go), refused for what it holds
 * (dropped, counted), or failed for a while (batch_may_retry): kept, and
 * sent again after a reconnect's backoff. Before, a batch whose session
 * the server ended (a store restarted) was dropped: its records were in
 * the nodes' audit.log only. */
static void batch_done(struct kvpg_audit *au)
{
        size_t n = au->batch;
        au->batch = 0;
        if (kvpg_audit_batch_ended(au, n, "a batch") >= 0) {
                unqueue(au, n);
                au->newest_only = false;
        }
}

static void on_end(void *arg)
{
        struct kvpg_audit *au = arg;
        enum out out = au->out;
        au->out = OUT_NONE;
        if (PQstatus(pgconn_pq(au->pc)) == CONNECTION_BAD) {
                pgconn_fail(au->pc, au->err[0] ? au->err : NULL);
                return;
        }
        if (out == OUT_SETUP) {
                if (au->err[0])
                        setup_failed(au);
                else
                        setup_done(au);
        } else if (out == OUT_BATCH) {
                batch_done(au);
        } else if (out == OUT_CATCH) {
                kvpg_audit_catch_done(au);
        } else if (out == OUT_HIGH && au->err[0]) {
                char why[260];
                snprintf(why, sizeof why, "cannot read this node's last record in the store: %s", au->err);
                pgconn_fail(au->pc, why);
                return;
        } else if (out == OUT_HIGH) {
                kvpg_audit_catch_high_known(au);
        } else if ((out == OUT_RANGE || out == OUT_PAGE) && au->err[0]) {
                read_answer(au, NULL, -EIO, au->err);
        } else if (out == OUT_RANGE) {
                range_known(au);
        } else if (out == OUT_PAGE) {
                PGresult *res = au->last;
                au->last = NULL;
                /* The next page goes on past this one's last row. */
                if (au->reading && res && PQntuples(res) > 0 && PQnfields(res) == 4)
                        key_keep(au->reading, res, PQntuples(res) - 1, 2, 0);
                read_answer(au, res, 0, NULL);
        } else if (out == OUT_PRUNE && !au->err[0]) {
                /* A full prune may have left more: the next one now. */
                if (au->last && PQntuples(au->last) == 1 && atoll(PQgetvalue(au->last, 0, 0)) >= atoll(PRUNE_ROWS))
                        au->prune_due = true;
                uint64_t mine = au->last && PQntuples(au->last) == 1 ? strtoull(PQgetvalue(au->last, 0, 1), NULL, 10) : 0;
                au->stored = au->stored > mine ? au->stored - mine : 0;
        }
        kvpg_audit_send_next(au);
}

/* Keeps the last result (rows, or a DELETE's count) and the first error. */
static void on_result(void *arg, PGresult *r)
{
        struct kvpg_audit *au = arg;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
                PQclear(au->last);
                au->last = r;
                return;
        }
        if (!au->err[0]) {
                const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
                pgconn_one_line(au->err, sizeof au->err, msg ? msg : PQresultErrorMessage(r));
                snprintf(au->sqlstate, sizeof au->sqlstate, "%s", state ? state : "");
        }
        PQclear(r);
}

static void on_connected(void *arg)
{
        struct kvpg_audit *au = arg;
        char sql[512];
        au->state = AU_SETUP;
        /* The node is a checked name (config.c): safe to quote as it is. */
        /* statement_timeout below the query timeout: a statement given up
         * on is cancelled by the server too, so a batch sent again cannot
         * also commit later (after a lock on the table is let go). */
        /* The bytes this node's rows hold are counted once here (a scan of
         * its rows), then kept by each batch and prune. */
        snprintf(sql, sizeof sql, "SET client_min_messages = warning; SET application_name = 'gadgetd %s audit';"
                 " SET statement_timeout = '%ums'; SELECT *, (SELECT coalesce(sum(octet_length(line)), 0)"
                 " FROM gadgetd_audit WHERE node = '%s') FROM (" KVPG_SQL_SCHEMA ") v", au->node,
                 STATEMENT_TIMEOUT_MS, au->node);
        kvpg_audit_query_begin(au, OUT_SETUP, PQsendQuery(pgconn_pq(au->pc), sql));
}

/* Every read waiting is answered: the caller falls back to audit.log. */
static void fail_reads(struct kvpg_audit *au, const char *why)
{
        if (au->reading)
                read_answer(au, NULL, -EAGAIN, why);
        while (au->reads) {
                struct kvpg_audit_read *rd = au->reads;
                au->reads = rd->next;
                rd->done(rd, NULL, -EAGAIN, why);
        }
        au->reads_tail = &au->reads;
}

/* Lost or refused: the lines stay queued (the batch out is sent again),
 * reads fail, the next attempt after a backoff. Logged once per outage. */
static void on_lost(void *arg, const char *why)
{
        struct kvpg_audit *au = arg;
        snprintf(au->reason, sizeof au->reason, "%s", why);
        if (!au->down_logged && au->schema_wait)
                log_msg(L_INFO, NULL, "audit: waiting for the store's schema (%s): %s", au->where, au->reason);
        else if (!au->down_logged)
                log_msg(L_WARN, NULL, "audit: cannot copy records to the store (%s): %s; retrying, meanwhile up "
                        "to %u records wait", au->where, au->reason, KVPG_AUDIT_QUEUE_LINES);
        au->down_logged = true;
        au->state = AU_DOWN;
        au->out = OUT_NONE;
        au->batch = 0;
        kvpg_audit_catch_lost(au); /* begun again at the next connect, from the store's highest */
        au->high_due = false;
        PQclear(au->last);
        au->last = NULL;
        fail_reads(au, au->reason);
        au->backoff_ms = retry_next_ms(au->backoff_ms, RECONNECT_MAX_MS);
        timer_arm_ms(au->ev_retry, au->backoff_ms);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_audit *au = arg;
        (void)fd;
        (void)what;
        au->state = AU_CONNECTING;
        pgconn_connect(au->pc);
}

static void on_prune(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_audit *au = arg;
        (void)fd;
        (void)what;
        au->prune_due = true;
        kvpg_audit_send_next(au);
}

static void on_gather(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        kvpg_audit_send_next(arg);
}

/* Dropped lines and rows said in gadgetd's log, with a count: whether
 * anything was said. */
static bool report(struct kvpg_audit *au)
{
        bool said = false;
        if (au->trimmed != au->trim_reported) {
                log_msg(L_WARN, NULL, "audit: the store holds at most %llu bytes of this node's records ([Audit] "
                        "MaxFileSize= x KeepFiles=): its %llu oldest rows were dropped (%llu since gadgetd started)",
                        (unsigned long long)au->max_bytes, (unsigned long long)(au->trimmed - au->trim_reported),
                        (unsigned long long)au->trimmed);
                au->trim_reported = au->trimmed;
                said = true;
        }
        if (au->dropped == au->reported)
                return said;
        log_msg(L_ERR, NULL, "audit: %llu records were not copied to the store (%llu since gadgetd started): %s; "
                "they are in this node's audit.log only", (unsigned long long)(au->dropped - au->reported),
                (unsigned long long)au->dropped, au->why);
        au->reported = au->dropped;
        return true;
}

/* The end of a window after a report: what was dropped in it is said,
 * and a window opens again if anything was. */
static void on_report(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_audit *au = arg;
        (void)fd;
        (void)what;
        if (report(au))
                timer_arm_ms(au->ev_report, REPORT_EVERY_S * 1000);
}

/* A drop is said at once unless a window is open (a store down drops
 * every line: one line per window then, with the count). */
static void report_soon(struct kvpg_audit *au)
{
        if (!evtimer_pending(au->ev_report, NULL) && report(au))
                timer_arm_ms(au->ev_report, REPORT_EVERY_S * 1000);
}

uint64_t kvpg_audit_trimmed(const struct kvpg_audit *au, uint64_t *stored)
{
        *stored = au->stored;
        return au->trimmed;
}

int kvpg_audit_new(struct event_base *base, const char *conninfo, const char *node, const char *dir,
                   uint32_t keep, unsigned keep_days, uint64_t max_bytes, struct store_latency *latency,
                   struct kvpg_audit **out)
{
        struct kvpg_audit *au = calloc(1, sizeof *au);
        struct pgconn_ops ops = { .connected = on_connected, .result = on_result, .end = on_end, .lost = on_lost,
                                  .arg = au, .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                                  .query_timeout_ms = QUERY_TIMEOUT_MS, .latency = latency };
        static const struct timeval prune_every = { PRUNE_EVERY_S, 0 };
        if (!au)
                return -ENOMEM;
        au->tail = &au->head;
        au->reads_tail = &au->reads;
        au->keep_days = keep_days ? keep_days : KVPG_AUDIT_DEFAULT_KEEP_DAYS;
        au->max_bytes = max_bytes;
        au->keep = keep;
        if (!(au->node = strdup(node)) || (dir && !(au->dir = strdup(dir))) ||
            !(au->ev_catch = event_new(base, -1, 0, kvpg_audit_catch_step, au)) ||
            !(au->ev_retry = evtimer_new(base, on_retry, au)) ||
            !(au->ev_prune = event_new(base, -1, EV_PERSIST, on_prune, au)) ||
            !(au->ev_report = evtimer_new(base, on_report, au)) ||
            !(au->ev_gather = evtimer_new(base, on_gather, au)) ||
            pgconn_new(base, conninfo, &ops, &au->pc) < 0) {
                kvpg_audit_free(au);
                return -ENOMEM;
        }
        kvpg_redact(conninfo, au->where, sizeof au->where);
        evtimer_add(au->ev_prune, &prune_every);
        au->state = AU_CONNECTING;
        pgconn_connect(au->pc);
        *out = au;
        return 0;
}

void kvpg_audit_follow(struct kvpg_audit *au, const char *server)
{
        char mine[300];
        if (au->state != AU_READY && au->state != AU_SETUP)
                return;
        pgconn_server(au->pc, mine, sizeof mine);
        if (server[0] && mine[0] && strcmp(server, mine) != 0) {
                char why[700];
                snprintf(why, sizeof why, "the lease session found the store at %s, not at %s (a failover)", server,
                         mine);
                pgconn_fail(au->pc, why);
        }
}

void kvpg_audit_free(struct kvpg_audit *au)
{
        if (!au)
                return;
        pgconn_free(au->pc);
        fail_reads(au, "gadgetd is stopping");
        unqueue(au, au->lines);
        PQclear(au->last);
        if (au->ev_retry)
                event_free(au->ev_retry);
        if (au->ev_prune)
                event_free(au->ev_prune);
        if (au->ev_report)
                event_free(au->ev_report);
        if (au->ev_gather)
                event_free(au->ev_gather);
        kvpg_audit_catch_stop(au);
        if (au->ev_catch)
                event_free(au->ev_catch);
        free(au->cbuf);
        free(au->dir);
        free(au->node);
        free(au);
}

int kvpg_audit_read_next(struct kvpg_audit *au, struct kvpg_audit_read *rd, char *why, size_t len)
{
        /* Why a reader never waits on a store that is down: between
         * attempts it is told at once and reads audit.log instead. */
        if (au->state == AU_DOWN || au->state == AU_CONNECTING || au->state == AU_SETUP) {
                snprintf(why, len, "%s", au->state == AU_DOWN ? au->reason : "connecting to the store");
                return -EAGAIN;
        }
        rd->next = NULL;
        /* Its first page waits for the lines queued before it; the next
         * ones read a range fixed already. */
        rd->seq = rd->upto < 0 ? au->added : 0;
        *au->reads_tail = rd;
        au->reads_tail = &rd->next;
        kvpg_audit_send_next(au);
        return 0;
}

void kvpg_audit_read_cancel(struct kvpg_audit *au, struct kvpg_audit_read *rd)
{
        if (au->reading == rd) {
                au->reading = NULL; /* its query's result is dropped */
                return;
        }
        for (struct kvpg_audit_read **p = &au->reads; *p; p = &(*p)->next) {
                if (*p == rd) {
                        *p = rd->next;
                        if (!*p)
                                au->reads_tail = p;
                        return;
                }
        }
}

size_t kvpg_audit_queued(const struct kvpg_audit *au)
{
        return au->lines;
}
