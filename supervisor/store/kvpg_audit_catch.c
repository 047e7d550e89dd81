/* kvpg_audit_catch: the catch-up of the store's copy from audit.log.
 *
 * What audit.log holds and the queue does not (the records of the last
 * moments before a SIGKILL, lines dropped from a full queue, lines of a
 * queue lost with the process) is sent from the files. At each
 * connect, before any batch of this session, the store is asked this
 * node's highest sequence (H); then the files are read forwards, one
 * slice (AUDIT_SLICE) a loop turn, as they were when the catch-up began,
 * and each record past H and before the queue's first line goes in
 * batches of the same bounds, every other query the connection's while
 * the queue has lines too. H is read first because a batch of the queue
 * committed before it would raise it past the records still missing.
 * After lines were dropped from a full queue, another catch-up runs once
 * the queue is empty, from the first line dropped. What does not parse
 * (a torn line), names another node, or is older than StoreKeepDays= is
 * skipped and counted, never sent. */
#include "kvpg_audit_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <time.h>

#include "pgconn.h"
#include "system/audit.h"
#include "system/log.h"

/* This node's highest sequence in the store (the index's last entry). */
static const char sql_high[] = "SELECT coalesce(max(seq), 0) FROM gadgetd_audit WHERE node = $1";

uint64_t kvpg_audit_caught_up(const struct kvpg_audit *au, uint64_t *skipped)
{
        *skipped = au ? au->skipped_all + au->cskipped : 0;
        return au ? au->caught_all : 0;
}

/* The catch-up's batch being filled is emptied; with drop, its lines
 * are also given up (the reader stops). */
void kvpg_audit_catch_stop(struct kvpg_audit *au)
{
        audit_reader_free(au->catch);
        au->catch = NULL;
        au->clen = au->clines = 0;
        au->cfull = false;
}

void kvpg_audit_catch_lost(struct kvpg_audit *au)
{
        /* The lines dropped that it was to copy: the next one (from the
         * store's highest then, which may be past them) begins at the
         * first of them at most. */
        if ((au->catch || au->clines) && au->cdrops && (!au->gap || au->after + 1 < au->gap))
                au->gap = au->after + 1;
        kvpg_audit_catch_stop(au);
}

/* A catch-up ended: said once if it copied or skipped anything. */
static void catch_ended(struct kvpg_audit *au)
{
        if (au->cskipped)
                log_msg(L_WARN, NULL, "audit: %llu records copied to the store from audit.log (not sent before: "
                        "a restart, a lost connection or a full queue); %llu lines of it skipped (damaged, not "
                        "this node's, or older than StoreKeepDays=)", (unsigned long long)au->caught,
                        (unsigned long long)au->cskipped);
        else if (au->caught)
                log_msg(L_INFO, NULL, "audit: %llu records copied to the store from audit.log (not sent before: "
                        "a restart, a lost connection or a full queue)", (unsigned long long)au->caught);
        au->skipped_all += au->cskipped;
        au->caught = au->cskipped = 0;
        /* Read to the end: every line dropped before it began (past
         * after, their sequences) is in the store now, or was refused by
         * it (counted again then). */
        if (!au->cfailed)
                au->recovered += au->cdrops;
        au->cdrops = 0;
}

/* Whether a line's time is older than the store keeps (the prune would
 * delete it: not sent, or every connect would send it again). */
static bool too_old(struct kvpg_audit *au, const char *when)
{
        struct tm tm = { 0 };
        const char *rest = strptime(when, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!rest)
                return true;
        return timegm(&tm) < time(NULL) - (time_t)au->keep_days * 86400;
}

/* audit_emit_fn: one line of audit.log. Sent if it is this node's record
 * of a sequence past after, not the queue's: a JSON object naming this node with
 * that "seq" and a "gadget" and "time" of text (the INSERT reads them;
 * garbage would make it refuse the whole batch). */
static int catch_line(void *arg, const char *line, size_t len)
{
        struct kvpg_audit *au = arg;
        uint64_t seq = audit_seq_of(line, len);
        if (!seq) {
                if (len == 0 || line[len - 1] != '}')
                        au->cskipped++; /* torn, or not a record at all */
                return 1;
        }
        if (seq <= au->after || (seq >= au->qfrom && seq < au->qto))
                return 1;
        /* A batch holds at most the budget too (or one line): the rows
         * it would keep beyond it, the next batch's DELETE takes, but the
         * last batch of a catch-up has no next one. */
        size_t bound = au->max_bytes && au->max_bytes < BATCH_BYTES ? (size_t)au->max_bytes : BATCH_BYTES;
        if (au->clines && (au->clines >= BATCH_LINES || au->clen + len + 1 > bound)) {
                au->cfull = true;
                return 0; /* given again at the next step, after this batch */
        }
        json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        const char *node = json_string_value(json_object_get(o, "node"));
        const char *when = json_string_value(json_object_get(o, "time"));
        json_t *s = json_object_get(o, "seq");
        bool ok = o && json_is_object(o) && node && strcmp(node, au->node) == 0 && when &&
                  json_is_string(json_object_get(o, "gadget")) && json_is_integer(s) &&
                  (uint64_t)json_integer_value(s) == seq && !memchr(line, '\n', len);
        bool old = ok && too_old(au, when);
        json_decref(o);
        if (!ok || old) {
                au->cskipped++;
                return 1;
        }
        char *buf = au->cbuf ? au->cbuf : malloc(BATCH_BYTES + 1);
        if (!buf)
                return -ENOMEM;
        au->cbuf = buf;
        memcpy(buf + au->clen, line, len);
        au->clen += len;
        buf[au->clen++] = '\n';
        au->clines++;
        return 1;
}

/* One slice of the catch-up's files, on its own loop turn. */
void kvpg_audit_catch_step(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_audit *au = arg;
        (void)fd;
        (void)what;
        if (!au->catch || au->cfull)
                return;
        int e = audit_reader_step(au->catch, catch_line, au);
        if (e < 0) {
                log_msg(L_WARN, NULL, "audit: cannot read %s/audit.log to copy it to the store: %s", au->dir,
                        strerror(-e));
                au->cfailed = true;
        }
        if (e <= 0) {
                audit_reader_free(au->catch);
                au->catch = NULL;
        }
        if (au->clines && (au->cfull || !au->catch)) {
                au->cfull = true;
                kvpg_audit_send_next(au);
        } else if (au->catch) {
                event_active(au->ev_catch, 0, 0);
        } else {
                catch_ended(au);
                kvpg_audit_send_next(au);
        }
}

/* A catch-up of the sequences past after but [qfrom, qto) begins: the
 * files as they are now (later lines are in the queue; one written
 * meanwhile may be sent both ways: it lands once). */
void kvpg_audit_catch_begin(struct kvpg_audit *au, uint64_t after, uint64_t qfrom, uint64_t qto)
{
        kvpg_audit_catch_stop(au);
        int e = au->dir ? audit_reader_new(au->dir, au->keep, NULL, 0, &au->catch) : -ENOENT;
        if (e < 0) {
                if (au->dir)
                        log_msg(L_WARN, NULL, "audit: cannot read %s/audit.log to copy it to the store: %s",
                                au->dir, strerror(-e));
                au->cdrops = au->gap_drops = 0; /* never copied: they stay counted */
                return;
        }
        au->cdrops += au->gap_drops;
        au->gap_drops = 0;
        au->cfailed = false;
        au->after = after;
        au->qfrom = qfrom;
        au->qto = qto;
        event_active(au->ev_catch, 0, 0);
}

/* The store's highest sequence of this node is known: what audit.log holds
 * past it (or past the first line dropped, if lower) is caught up, but
 * the queue's lines from its head up to the first dropped one (the queue
 * sends them; lines it took after a drop may go both ways: once in the
 * store). */
void kvpg_audit_catch_high_known(struct kvpg_audit *au)
{
        uint64_t high = au->last && PQntuples(au->last) == 1 ? strtoull(PQgetvalue(au->last, 0, 0), NULL, 10) : 0;
        uint64_t after = high, qfrom = au->head && au->head->seq ? au->head->seq : UINT64_MAX;
        uint64_t qto = UINT64_MAX;
        if (au->gap) {
                after = au->gap - 1 < high ? au->gap - 1 : high;
                qto = au->gap;
                au->gap = 0;
        }
        kvpg_audit_catch_begin(au, after, qfrom, qto);
}

void kvpg_audit_catch_send_high(struct kvpg_audit *au)
{
        const char *params[1] = { au->node };
        au->high_due = false;
        kvpg_audit_query_begin(au, OUT_HIGH,
                               PQsendQueryParams(pgconn_pq(au->pc), sql_high, 1, NULL, params, NULL, NULL, 0));
}
/* The catch-up's batch ended: like a batch of the queue's; then the
 * next slice of the files. */
void kvpg_audit_catch_done(struct kvpg_audit *au)
{
        int64_t n = kvpg_audit_batch_ended(au, au->clines, "a batch from audit.log");
        if (n < 0)
                return; /* the next connect begins the catch-up again */
        au->caught += (uint64_t)n;
        au->caught_all += (uint64_t)n;
        au->clen = au->clines = 0;
        au->cfull = false;
        if (au->catch)
                event_active(au->ev_catch, 0, 0);
        else
                catch_ended(au);
}

