/* metrics_int: private to the metrics endpoint's files — metrics.c (the
 * listener, the token, requests, the scrape's turns) and metrics_text.c
 * (the series, written in slices). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/buffer.h>
#include <event2/http.h>

#include "bindings/bindings.h"
#include "contract.h"
#include "core/core.h"
#include "metrics.h"
#include "store/kvdb_nowait.h"
#include "store/store.h"

#define METRICS_LAG_BUCKETS 8
/* Nodes of the shared store named in the series; the rest (and any whose
 * name is not a valid node name: the store's rows are other nodes'
 * words) together as METRICS_NODES_OTHER. */
#define METRICS_NODES_MAX 64
#define METRICS_NODES_OTHER "_other"

/* The cluster as a scrape saw it (Store=postgresql). */
struct metrics_cluster {
        bool on;                     /* a shared store: the cluster's series are written */
        struct { char name[GADGET_NAME_MAX + 1]; bool up; } nodes[METRICS_NODES_MAX];
        size_t n_nodes;
        uint64_t other[2];           /* the other nodes: down [0], up [1] */
        struct core_forwarded forwarded;
        struct store_latency latency;
};

/* A tail binding's events dropped, copied. */
struct metrics_tail {
        char binding[GADGET_NAME_MAX + 1];
        uint64_t dropped;
};

/* One gadget as a scrape saw it (copied: the unit may go meanwhile). */
/* A refused system call of a gadget: names from gadgetd's static tables. */
struct metrics_denial {
        const char *call, *answer;
        uint64_t count;
};

struct metrics_row {
        char name[64];
        const char *state;           /* unit_state_name's, static */
        uint64_t memory_bytes, tasks, cpu_usec, approvals;
        uint64_t memory_peak, limit_hits[3];
        bool leased;                 /* this node holds its lease (Store=postgresql) */
        struct unit_stats stats;     /* a deep copy */
        struct binding_stat *bstats; /* a copy of its binding calls' counters */
        size_t n_bstats;
        struct metrics_tail *tails;  /* its tail bindings' drops (NULL: it has none) */
        size_t n_tails;
        struct metrics_denial *denials; /* its refused system calls (NULL: none yet) */
        size_t n_denials;
};

/* The event loop's lag: how late the probe timer fires. */
struct metrics_lag {
        uint64_t buckets[METRICS_LAG_BUCKETS]; /* not cumulative; the last is +Inf */
        uint64_t count, sum_us;
};

/* One scrape under way: first the gadgets are read into rows (a slice per
 * turn), then the series are written (a slice per chunk, the next once
 * the last is written out). */
struct metrics_scrape {
        struct metrics *m;
        struct evhttp_request *req;
        struct evhttp_connection *evcon;
        bool openmetrics;
        char *names;                 /* the gadgets' names when it began, each ended by a NUL */
        size_t n_names, next;        /* next name to read, */
        size_t names_at;             /* which starts here */
        struct metrics_row *rows;
        size_t n_rows;
        size_t family, row;          /* where writing is */
        struct metrics_self self;
        struct metrics_lag lag;
        uint64_t fds, rss;
        uint64_t audit_summarized, audit_unwritten;
        struct kvdb_nowait_counts kv_loop;
        struct metrics_cluster cluster;
        struct event *ev_turn;       /* the next turn of reading, or of writing */
        bool writing;                /* the rows are read: ev_turn writes */
        LIST_ENTRY(metrics_scrape) link;
};

/* metrics_text.c: appends to out s's series from where it is, the lines
 * of at most rows gadgets (or families of gadgetd's own), stopping once
 * out holds bytes or more; true when all is written. */
bool metrics_text_slice(struct metrics_scrape *s, struct evbuffer *out, size_t rows, size_t bytes);
extern const double metrics_lag_bounds[METRICS_LAG_BUCKETS - 1];
