/* metrics: gadgetd's metrics endpoint ([Daemon] MetricsListen=): GET
 * /metrics in the Prometheus text format, or OpenMetrics when the Accept
 * header asks for it, on a loopback address or a Unix socket, with an
 * optional bearer token (MetricsToken=). Its clients (any local user who
 * reaches it) cost gadgetd a few connections with deadlines
 * (system/httpconn.h); a scrape of many gadgets is written in parts, a
 * bounded slice per loop turn. The counters live where the events happen
 * (core/unit_stats.h, the daemon's parts); this only reads them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct core;
struct metrics;

#define METRICS_MAX_CONNECTIONS 16     /* scrapers connected at once */
#define METRICS_HEADER_TIMEOUT_MS 10000 /* from connect or the last answer to the next request */

/* Budgets whose refusals gadgetd counts ("busy" by budget). */
enum metrics_budget {
        METRICS_BUDGET_CONTROL_CONNECTIONS,  /* ControlMaxConnections=, ...PerUser=, the group */
        METRICS_BUDGET_CONTROL_SLOW,         /* control clients that did not read their answers */
        METRICS_BUDGET_GATEWAY_CONNECTIONS,  /* [Gateway] MaxConnections= */
        METRICS_BUDGET_GATEWAY_DEADLINE,     /* [Gateway] HeaderTimeout= */
        METRICS_BUDGET_METRICS_CONNECTIONS,  /* the endpoint's own seats */
        METRICS_BUDGET_METRICS_DEADLINE,
        METRICS_BUDGET_NODE_TRACES,          /* another node's asks for spans (NODELINK_TRACES_PER_S) */
        METRICS_BUDGET_N
};

/* What gadgetd tells of itself at each scrape (daemon.c fills it). */
struct metrics_self {
        uint64_t control_connections, gateway_connections;
        uint64_t refused[METRICS_BUDGET_N];
        uint64_t spans_dropped;     /* spans not exported (TraceExport=): overwritten first, or refused */
        unsigned link_in, link_out; /* node-link sessions past their handshake: from other nodes, to them */
};

struct metrics_env {
        struct core *core;
        /* Fills out (zeroed) with the daemon's numbers; the endpoint's
         * own are added after. */
        void (*self)(void *arg, struct metrics_self *out);
        void *arg;
};

/* Checks a MetricsListen= value: a Unix socket's absolute path, or
 * "127.0.0.1:PORT" / "[::1]:PORT" (a loopback address: the endpoint
 * speaks plain HTTP). 0, or -EINVAL with the reason in why. */
int metrics_parse_listen(const char *s, char *why, size_t whylen);
/* Listens on listen, with the token from token_file (NULL: none), on
 * adopt_fd if it is >= 0 (the previous image's socket, checked to be one
 * on listen: taken over, closed on failure). Errors are logged. 0 or
 * -errno. */
int metrics_open(const struct metrics_env *env, const char *listen, const char *token_file, int adopt_fd,
                 struct metrics **out);
/* gadgetctl daemon-reexec: no new connection is accepted (they wait in
 * the listener's backlog for the next image, which takes the listening
 * socket over: metrics_listen_fd) and every answer closes its connection
 * (false undoes it); quiet once no scrape is under way or half read (0,
 * or -EBUSY with why). */
void metrics_reexec_hold(struct metrics *m, bool hold);
int metrics_reexec_quiet(const struct metrics *m, char *why, size_t len);
/* The listening socket, handed on at a re-exec (-1: none). */
int metrics_listen_fd(const struct metrics *m);
/* Its connections, for its own series. */
size_t metrics_connections(const struct metrics *m);
void metrics_free(struct metrics *m);
