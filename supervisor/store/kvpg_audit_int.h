/* kvpg_audit_int: what kvpg_audit.c (the queue, its batches, reads and
 * the connection) and kvpg_audit_catch.c (the catch-up from audit.log)
 * share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "system/pq_dl.h"

#include "kvpg_audit.h"

#define BATCH_LINES 512
#define BATCH_BYTES (1u << 20)

struct audit_reader;
struct pgconn;

enum state { AU_DOWN, AU_CONNECTING, AU_SETUP, AU_READY };
enum out { OUT_NONE, OUT_SETUP, OUT_BATCH, OUT_RANGE, OUT_PAGE, OUT_PRUNE, OUT_HIGH, OUT_CATCH };

struct line {
        struct line *next;
        uint64_t seq;                   /* its sequence (0: none) */
        size_t len;
        char text[];
};

struct kvpg_audit {
        char *node;
        char where[256];                /* conninfo without passwords, for logs */
        struct pgconn *pc;
        enum state state;
        enum out out;                   /* the query out */
        struct event *ev_retry, *ev_prune, *ev_report;
        struct event *ev_gather;        /* the first line queued waits for others */
        unsigned backoff_ms, keep_days;
        struct line *head, **tail;      /* the lines to send, oldest first */
        size_t lines, bytes;            /* queued, sent ones included */
        size_t batch;                   /* lines at the head sent in the batch out */
        struct kvpg_audit_read *reads, **reads_tail, *reading;
        uint64_t added, done;           /* lines queued, and done with, since the start */
        bool prune_due, prune_more;
        PGresult *last;                 /* the query's last rows */
        char err[200], sqlstate[6];     /* its first error */
        uint64_t dropped, reported;
        uint64_t max_bytes;             /* this node's rows: at most this many bytes (0: no bound) */
        uint64_t stored;                /* the bytes they hold, counted at setup, then kept */
        uint64_t trimmed, trim_reported; /* rows dropped to keep max_bytes */
        bool newest_only;               /* the queue's older lines were dropped to fit the batch at its
                                         * head in the budget: every older row goes with it */
        char why[320];                  /* why the last line was dropped */
        bool down_logged;
        bool schema_wait;               /* down because the schema is not migrated yet */
        char reason[200];               /* why the store is unreachable */
        /* The catch-up from audit.log (kvpg_audit_catch.c). */
        char *dir;                      /* audit.log's, and KeepFiles= */
        uint32_t keep;
        bool high_due;                  /* at connect: H is asked before any batch */
        uint64_t gap;                   /* the first line dropped since the last catch-up (0: none) */
        uint64_t gap_drops;             /* the lines dropped since: the next catch-up copies them */
        struct audit_reader *catch;     /* the files being read, or NULL */
        uint64_t after;                 /* it sends the sequences past after */
        uint64_t qfrom, qto;            /* but those in [qfrom, qto): the queue's */
        struct event *ev_catch;         /* its next slice, on a later turn */
        char *cbuf;                     /* its batch being filled: lines, each ended by a newline */
        size_t clen, clines;
        bool cfull;                     /* the batch is full, or the files read: it goes */
        bool ctoggle;                   /* the last batch sent was the catch-up's */
        uint64_t caught, cskipped;      /* lines this catch-up copied, and skipped */
        uint64_t caught_all, skipped_all; /* since gadgetd started */
        uint64_t cdrops;                /* the dropped lines this catch-up copies (gap_drops when it began) */
        bool cfailed;                   /* it could not read the files to their end */
        uint64_t recovered;             /* dropped lines that catch-ups copied since (dropped less these:
                                         * the lines not in the store) */
};

/* kvpg_audit.c's. */
/* The next query, if the connection is idle (see there). */
void kvpg_audit_send_next(struct kvpg_audit *au);
/* A query was handed to libpq (sent: its return). */
void kvpg_audit_query_begin(struct kvpg_audit *au, enum out out, int sent);
/* Lines (bytes with their NUL: newline-separated) as one INSERT; with
 * newest_only, every older row of this node is deleted in it (its
 * TRIM_ROWS oldest), else those past the budget. */
void kvpg_audit_send_text(struct kvpg_audit *au, enum out out, const char *text, size_t bytes, bool newest_only);
/* A batch of n lines ended: -1 to be sent again after a reconnect, or
 * the rows it inserted (see there). */
int64_t kvpg_audit_batch_ended(struct kvpg_audit *au, size_t n, const char *what);

/* kvpg_audit_catch.c's. */
/* The event of au->ev_catch: one slice of the files, on its own turn. */
void kvpg_audit_catch_step(evutil_socket_t fd, short what, void *arg);
/* A catch-up of the sequences past after but [qfrom, qto) begins. */
void kvpg_audit_catch_begin(struct kvpg_audit *au, uint64_t after, uint64_t qfrom, uint64_t qto);
/* The catch-up's files and batch being filled are given up. */
void kvpg_audit_catch_stop(struct kvpg_audit *au);
/* The connection was lost: a catch-up under way stops, to begin again at
 * the next connect, from where this one began at most. */
void kvpg_audit_catch_lost(struct kvpg_audit *au);
/* At connect: asks the store this node's highest sequence. */
void kvpg_audit_catch_send_high(struct kvpg_audit *au);
/* Its answer (au->last) is in: the catch-up begins. */
void kvpg_audit_catch_high_known(struct kvpg_audit *au);
/* The catch-up's batch ended. */
void kvpg_audit_catch_done(struct kvpg_audit *au);
