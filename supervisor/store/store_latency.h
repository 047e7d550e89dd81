/* store_latency: how long the shared store (Store=postgresql) took to
 * answer each query, from its send to its last result, by a fixed small
 * set of kinds: a histogram for the metrics endpoint. pgconn.c records
 * every query that ends with an answer (a lost connection or a timeout is
 * told as such, not as a latency). Pure counters, on the loop. */
#pragma once

#include <stdint.h>

/* What a query does: a kv binding's get or put, the lease session's
 * (takes, pings, beats, moves), anything else (migrations, other binding
 * operations, the audit's copy). */
enum store_op { STORE_OP_KV_GET, STORE_OP_KV_PUT, STORE_OP_LEASE, STORE_OP_OTHER, STORE_OP_N };

#define STORE_LATENCY_BUCKETS 10

struct store_latency {
        uint64_t buckets[STORE_OP_N][STORE_LATENCY_BUCKETS]; /* at most store_latency_bounds[i] s (not cumulative) */
        uint64_t slower[STORE_OP_N];                        /* beyond the last bound */
        uint64_t count[STORE_OP_N], sum_us[STORE_OP_N];
};

/* The buckets' upper bounds, as text in seconds. */
extern const char *const store_latency_bounds[STORE_LATENCY_BUCKETS];
/* The label of op: "kv_get", "kv_put", "lease", "other". */
const char *store_op_name(enum store_op op);
/* A query of kind op took us microseconds (l NULL: not counted). */
void store_latency_add(struct store_latency *l, enum store_op op, uint64_t us);
