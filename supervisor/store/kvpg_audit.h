/* kvpg_audit: with Store=postgresql, a copy of every audit line in the
 * store (gadgetd_audit), so that `gadgetctl audit` on any node shows a
 * gadget's records from every node; and reading them back. Its own
 * connection, non-blocking on the loop: audit.log stays the record of
 * truth, and the store's copy is sent in batches from a bounded queue —
 * a store down or slow costs gadgetd at most that queue, the lines beyond
 * it are dropped and counted. This node's rows in the store hold at most
 * a budget of bytes (the local log's: [Audit] MaxFileSize= × KeepFiles=),
 * kept as rows are written: the batch that would pass it deletes this
 * node's oldest rows in the same statement, and they are counted and
 * logged (besides the rows older than StoreKeepDays=, pruned hourly). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "system/pq_dl.h"

#define KVPG_AUDIT_QUEUE_LINES 4096
#define KVPG_AUDIT_QUEUE_BYTES (4u << 20)
#define KVPG_AUDIT_PAGE 256             /* rows of one read */
#define KVPG_AUDIT_DEFAULT_KEEP_DAYS 90

struct kvpg_audit;
struct store_latency;

/* A read of one gadget's lines, a page at a time, in the records' order
 * (their own time, then sequence: see kvpg_audit.c): the last `last` of
 * them (0: all) as they are when the read begins. */
struct kvpg_audit_read {
        char gadget[72];                /* a checked name: at most GADGET_NAME_MAX bytes */
        size_t last;
        long long upto;                 /* the rows it reads: id at most upto (-1: unknown yet) */
        /* Past the row (at, seq, id) of key (the last one given), or from
         * the first if !from; kept by kvpg_audit. */
        bool from;
        char at[40];
        long long key_seq, key_id;
        /* Called once per page asked (kvpg_audit_read_next): rows (id,
         * line, ...) in res, or err < 0 with why. The callee PQclears res. */
        void (*done)(struct kvpg_audit_read *rd, PGresult *res, int err, const char *why);
        void *arg;
        struct kvpg_audit_read *next;   /* the queue of reads */
        uint64_t seq;                   /* the lines queued before it (kvpg_audit's) */
};

/* Starts connecting to conninfo as node (libpq loaded already: kvpg_new
 * first); at each connect it catches the store's copy up from dir's
 * audit.log and its keep rotated files (dir NULL: no catch-up); rows older than keep_days days are deleted hourly; this node's
 * rows hold at most max_bytes (0: no bound); its queries' durations
 * counted in latency (borrowed; NULL: not counted). 0 or -errno. */
int kvpg_audit_new(struct event_base *base, const char *conninfo, const char *node, const char *dir,
                   uint32_t keep, unsigned keep_days, uint64_t max_bytes, struct store_latency *latency,
                   struct kvpg_audit **out);
/* This node's rows dropped from the store to keep its budget since
 * gadgetd started, and the bytes its rows hold now as last counted. */
uint64_t kvpg_audit_trimmed(const struct kvpg_audit *au, uint64_t *stored);
/* Closes the connection; lines not sent yet are only in audit.log; reads
 * waiting are answered cancelled. */
void kvpg_audit_free(struct kvpg_audit *au);
/* The store is at server ("HOST:PORT", the lease session's): a session to
 * another one (the old primary after a failover, maybe silent) ends now,
 * its batch kept and sent again, rather than after the query timeout. */
void kvpg_audit_follow(struct kvpg_audit *au, const char *server);
/* Lines queued or being sent (gadgetd's re-exec waits for none). */
size_t kvpg_audit_queued(const struct kvpg_audit *au);
/* Queues gadget's line (JSON, no newline) for the store. Never waits:
 * beyond the queue's bound the line is dropped and counted. For
 * audit_set_store. */
void kvpg_audit_add(void *au, const char *gadget, const char *line);
/* Lines copied from audit.log by catch-ups since gadgetd started, and
 * (skipped) lines of it skipped, never sent (0 for au NULL). */
uint64_t kvpg_audit_caught_up(const struct kvpg_audit *au, uint64_t *skipped);
/* Lines not copied to the store since gadgetd started, less the dropped
 * ones a catch-up copied from audit.log since (read to its end), and why
 * the last one was not ("" if none). */
uint64_t kvpg_audit_dropped(const struct kvpg_audit *au, const char **why);
/* Asks rd's next page: 0, after which rd->done is called once on the
 * loop; or -EAGAIN with why when the store is unreachable now. */
int kvpg_audit_read_next(struct kvpg_audit *au, struct kvpg_audit_read *rd, char *why, size_t len);
/* rd is going away: its pending page is never given. */
void kvpg_audit_read_cancel(struct kvpg_audit *au, struct kvpg_audit_read *rd);
