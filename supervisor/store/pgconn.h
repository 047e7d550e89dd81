/* pgconn: one non-blocking libpq connection on gadgetd's event loop, the
 * mechanics kvpg (the store) and kvpg_lease (the lease session) share:
 * connecting (PQconnectPoll on the socket's readiness, within a connect
 * timeout), one query out at a time (sent by the owner with PQsend*,
 * flushed while libpq has output, answered within a query timeout), its
 * results and its end handed to the owner, and a lost connection reported
 * once with a one-line reason (the server's own last word, if it said
 * one). What is done with results, retries and backoff is the owner's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <event2/event.h>

#include "store_latency.h"
#include "system/pq_dl.h"

struct pgconn;

/* What the owner is told, always on the loop. */
struct pgconn_ops {
        /* Connected (non-blocking, events on): the owner sends a query. */
        void (*connected)(void *arg);
        /* One result of the query out; the owner PQclears it. */
        void (*result)(void *arg, PGresult *r);
        /* The query out ended (libpq's NULL result). */
        void (*end)(void *arg);
        /* The connection is gone (closed already): why, on one line. */
        void (*lost)(void *arg, const char *why);
        void *arg;
        unsigned connect_timeout_ms, query_timeout_ms;
        /* A read that fails during a query: the server's last notice as the
         * reason if it sent one (else libpq's message). */
        bool notice_in_query;
        /* Where each answered query's duration is counted (NULL: nowhere). */
        struct store_latency *latency;
};

/* Holds ops; does not connect yet. 0 or -ENOMEM. */
int pgconn_new(struct event_base *base, const char *conninfo, const struct pgconn_ops *ops, struct pgconn **out);
/* Closes the connection, telling no one. */
void pgconn_free(struct pgconn *pc);
/* Starts a connection attempt: ops->connected, or ops->lost (maybe at
 * once). */
void pgconn_connect(struct pgconn *pc);
/* libpq's connection, to send on; NULL while there is none. */
PGconn *pgconn_pq(const struct pgconn *pc);
/* The server connected to, "HOST:PORT" as libpq names it (a host of
 * the conninfo's list), in dst; "" while not connected. */
void pgconn_server(const struct pgconn *pc, char *dst, size_t len);
/* Whether a query is out. */
bool pgconn_busy(const struct pgconn *pc);
/* A query of kind op was handed to libpq (sent: PQsend*'s return): it must
 * end within the query timeout (its duration then counted in
 * ops->latency). Not sent: the connection is lost with libpq's reason. 0,
 * or -EIO once ops->lost was called. */
int pgconn_sent(struct pgconn *pc, int sent, enum store_op op);
/* The same, this query's timeout timeout_ms instead of the session's. */
int pgconn_sent_within(struct pgconn *pc, int sent, enum store_op op, unsigned timeout_ms);
/* Closes the connection and tells ops->lost why (NULL: libpq's message). */
void pgconn_fail(struct pgconn *pc, const char *why);
/* libpq's messages end in a newline and indent their hints with tabs;
 * logs and errors are one line: each run of white space becomes a space. */
void pgconn_one_line(char *dst, size_t len, const char *msg);
