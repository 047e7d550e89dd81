/* metrics_text: gadgetd's series in the Prometheus text format (and
 * OpenMetrics: a counter's family named without _total, "# EOF" last),
 * family by family, a bounded slice at a time. Every label value is a
 * gadget's name, a declared method, a fixed word or an error code's name;
 * all are escaped anyway. */
#include "metrics_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/unit_stats.h"
#include "system/audit.h"

const double metrics_lag_bounds[METRICS_LAG_BUCKETS - 1] = { 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1 };

enum kind { GAUGE, COUNTER, HISTOGRAM };
/* Whose lines a family holds: a gadget's each, gadgetd's own, or the
 * cluster's (written only with a shared store, Store=postgresql). */
enum scope { GADGET, SELF, CLUSTER };

struct family {
        const char *name;            /* a counter's without _total */
        enum kind kind;
        const char *help;
        /* A gadget's lines (row) or, row NULL, gadgetd's own. */
        void (*write)(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out);
        enum scope scope;
};

/* A series' line built on the stack and added to the scrape's buffer
 * whole (an evbuffer_add costs more than the bytes of a short piece): a
 * scrape of 10,000 gadgets writes 17 MiB of such lines. */
struct line {
        struct evbuffer *out;
        size_t n;
        char b[256];
};

static void put(struct line *l, const char *s, size_t n)
{
        if (n > sizeof l->b - l->n) {
                evbuffer_add(l->out, l->b, l->n);
                l->n = 0;
                if (n > sizeof l->b) {
                        evbuffer_add(l->out, s, n);
                        return;
                }
        }
        memcpy(l->b + l->n, s, n);
        l->n += n;
}

static void put_str(struct line *l, const char *s)
{
        put(l, s, strlen(s));
}

/* v in decimal, without printf's parsing. */
static void put_u64(struct line *l, uint64_t v)
{
        char buf[20];
        size_t i = sizeof buf;
        do
                buf[--i] = (char)('0' + v % 10);
        while ((v /= 10));
        put(l, buf + i, sizeof buf - i);
}

/* A label value, escaped as the format asks (\\, \", \n). */
static void put_label(struct line *l, const char *v)
{
        for (;;) {
                size_t n = strcspn(v, "\\\"\n");
                put(l, v, n);
                v += n;
                if (!*v)
                        return;
                put(l, *v == '\n' ? "\\n" : *v == '\\' ? "\\\\" : "\\\"", 2);
                v++;
        }
}

static void line_end(struct line *l)
{
        evbuffer_add(l->out, l->b, l->n);
}

static void label(struct evbuffer *out, const char *v)
{
        struct line l = { .out = out };
        put_label(&l, v);
        line_end(&l);
}

static void gadget_line(struct evbuffer *out, const char *name, const struct metrics_row *r, const char *more,
                        const char *more_v, uint64_t v)
{
        struct line l = { .out = out };
        put_str(&l, name);
        put_str(&l, "{gadget=\"");
        put_label(&l, r->name);
        if (more) {
                put_str(&l, "\",");
                put_str(&l, more);
                put_str(&l, "=\"");
                put_label(&l, more_v);
        }
        put_str(&l, "\"} ");
        put_u64(&l, v);
        put(&l, "\n", 1);
        line_end(&l);
}

static void w_state(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_state", r, "state", r->state, 1);
}

static void w_starts(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_starts_total", r, NULL, NULL, r->stats.starts);
}

static void w_restarts(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        static const char *const cause[UNIT_RESTART_N] = { [UNIT_RESTART_EXIT] = "exit",
                                                           [UNIT_RESTART_REQUEST] = "request" };
        for (int i = 0; i < UNIT_RESTART_N; i++)
                gadget_line(out, "gadgetd_gadget_restarts_total", r, "cause", cause[i], r->stats.restarts[i]);
}

static void w_calls(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        for (size_t i = 0; i < r->stats.n_methods; i++) {
                const struct unit_stats_method *m = &r->stats.methods[i];
                for (unsigned o = 0; o < UNIT_STATS_OUTCOMES; o++) {
                        if (!m->outcomes[o])
                                continue;
                        evbuffer_add_printf(out, "gadgetd_gadget_calls_total{gadget=\"");
                        label(out, r->name);
                        evbuffer_add_printf(out, "\",method=\"");
                        label(out, m->name);
                        evbuffer_add_printf(out, "\",outcome=\"%s\"} %" PRIu64 "\n", unit_stats_outcome(o),
                                            m->outcomes[o]);
                }
        }
}

static void w_bindings(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        for (size_t i = 0; i < r->n_bstats; i++) {
                const struct binding_stat *b = &r->bstats[i];
                for (unsigned o = 0; o < BINDING_STATS_OUTCOMES; o++) {
                        if (!b->outcomes[o])
                                continue;
                        evbuffer_add_printf(out, "gadgetd_gadget_binding_calls_total{gadget=\"");
                        label(out, r->name);
                        evbuffer_add_printf(out, "\",binding=\"");
                        label(out, b->binding);
                        evbuffer_add_printf(out, "\",op=\"");
                        label(out, b->op);
                        evbuffer_add_printf(out, "\",outcome=\"%s\"} %" PRIu64 "\n",
                                            audit_outcome_name((enum audit_outcome)o), b->outcomes[o]);
                }
        }
}

static void w_duration(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        uint64_t sum = 0;
        for (size_t i = 0; i < UNIT_STATS_BUCKETS; i++) {
                sum += r->stats.buckets[i];
                gadget_line(out, "gadgetd_gadget_call_duration_seconds_bucket", r, "le", unit_stats_bounds[i], sum);
        }
        gadget_line(out, "gadgetd_gadget_call_duration_seconds_bucket", r, "le", "+Inf", sum + r->stats.slower);
        evbuffer_add_printf(out, "gadgetd_gadget_call_duration_seconds_sum{gadget=\"");
        label(out, r->name);
        evbuffer_add_printf(out, "\"} %.6f\n", (double)r->stats.duration_us / 1e6);
        gadget_line(out, "gadgetd_gadget_call_duration_seconds_count", r, NULL, NULL, r->stats.calls);
}

static void w_memory(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_memory_bytes", r, NULL, NULL, r->memory_bytes);
}

static void w_peak(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_memory_peak_bytes", r, NULL, NULL, r->memory_peak);
}

static void w_hits(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        /* unit_info's order (enum limiter_hit) */
        static const char *const limit[3] = { "MemoryMax", "TasksMax", "CPUQuota" };
        for (int i = 0; i < 3; i++)
                gadget_line(out, "gadgetd_gadget_limit_hits_total", r, "limit", limit[i], r->limit_hits[i]);
}

static void w_denials(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        for (size_t i = 0; i < r->n_denials; i++) {
                struct line l = { .out = out };
                put_str(&l, "gadgetd_gadget_denials_total{gadget=\"");
                put_label(&l, r->name);
                put_str(&l, "\",call=\"");
                put_label(&l, r->denials[i].call);
                put_str(&l, "\",answer=\"");
                put_label(&l, r->denials[i].answer);
                put_str(&l, "\"} ");
                put_u64(&l, r->denials[i].count);
                put(&l, "\n", 1);
                line_end(&l);
        }
}

static void w_cpu(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_gadget_cpu_seconds_total{gadget=\"");
        label(out, r->name);
        evbuffer_add_printf(out, "\"} %.6f\n", (double)r->cpu_usec / 1e6);
}

static void w_tasks(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_tasks", r, NULL, NULL, r->tasks);
}

static void w_logdrop(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_log_lines_dropped_total", r, NULL, NULL, r->stats.log_dropped);
}

static void w_waits(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        /* unit_stats' order (enum peer_budget) */
        static const char *const budget[2] = { "FrameValuesPerSecond", "FrameBytesPerSecond" };
        for (int i = 0; i < 2; i++)
                gadget_line(out, "gadgetd_gadget_budget_waits_total", r, "budget", budget[i], r->stats.budget_waits[i]);
}

static void w_phase(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        static const char *const phase[UNIT_PHASE_N] = { [UNIT_PHASE_IDLE] = "idle", [UNIT_PHASE_AWAKE] = "awake" };
        for (int i = UNIT_PHASE_IDLE; i < UNIT_PHASE_N; i++) {
                evbuffer_add_printf(out, "gadgetd_gadget_state_seconds_total{gadget=\"");
                label(out, r->name);
                evbuffer_add_printf(out, "\",state=\"%s\"} %.3f\n", phase[i], (double)r->stats.phase_ms[i] / 1e3);
        }
}

static void w_audit_gadget(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_audit_records_dropped_total", r, "why", "summarized",
                    r->stats.audit_dropped[AUDIT_DROP_SUMMARIZED]);
        gadget_line(out, "gadgetd_gadget_audit_records_dropped_total", r, "why", "unwritten",
                    r->stats.audit_dropped[AUDIT_DROP_UNWRITTEN]);
}

static void w_tail_drops(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        for (size_t i = 0; i < r->n_tails; i++)
                gadget_line(out, "gadgetd_gadget_tail_events_dropped_total", r, "binding", r->tails[i].binding,
                            r->tails[i].dropped);
}

static void w_approvals(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        gadget_line(out, "gadgetd_gadget_approvals_waiting", r, NULL, NULL, r->approvals);
}

static void w_gadgets(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_gadgets %zu\n", s->n_rows);
}

static void w_rss(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_resident_memory_bytes %" PRIu64 "\n", s->rss);
}

static void w_fds(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_open_fds %" PRIu64 "\n", s->fds);
}

static void w_lag(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        uint64_t sum = 0;
        for (size_t i = 0; i < METRICS_LAG_BUCKETS - 1; i++) {
                sum += s->lag.buckets[i];
                evbuffer_add_printf(out, "gadgetd_loop_lag_seconds_bucket{le=\"%g\"} %" PRIu64 "\n",
                                    metrics_lag_bounds[i], sum);
        }
        evbuffer_add_printf(out, "gadgetd_loop_lag_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", s->lag.count);
        evbuffer_add_printf(out, "gadgetd_loop_lag_seconds_sum %.6f\n", (double)s->lag.sum_us / 1e6);
        evbuffer_add_printf(out, "gadgetd_loop_lag_seconds_count %" PRIu64 "\n", s->lag.count);
}

static void w_refusals(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        static const char *const budget[METRICS_BUDGET_N] = {
                [METRICS_BUDGET_CONTROL_CONNECTIONS] = "control_connections",
                [METRICS_BUDGET_CONTROL_SLOW] = "control_slow_reader",
                [METRICS_BUDGET_GATEWAY_CONNECTIONS] = "gateway_connections",
                [METRICS_BUDGET_GATEWAY_DEADLINE] = "gateway_header_timeout",
                [METRICS_BUDGET_METRICS_CONNECTIONS] = "metrics_connections",
                [METRICS_BUDGET_METRICS_DEADLINE] = "metrics_header_timeout",
                [METRICS_BUDGET_NODE_TRACES] = "node_traces",
        };
        for (int i = 0; i < METRICS_BUDGET_N; i++)
                evbuffer_add_printf(out, "gadgetd_budget_refusals_total{budget=\"%s\"} %" PRIu64 "\n", budget[i],
                                    s->self.refused[i]);
}

static void w_audit(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_audit_records_dropped_total{why=\"summarized\"} %" PRIu64 "\n",
                            s->audit_summarized);
        evbuffer_add_printf(out, "gadgetd_audit_records_dropped_total{why=\"unwritten\"} %" PRIu64 "\n",
                            s->audit_unwritten);
}

static void w_spans(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_trace_spans_dropped_total %" PRIu64 "\n", s->self.spans_dropped);
}

static void w_kv_loop(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        const struct kvdb_nowait_counts *c = &s->kv_loop;
        evbuffer_add_printf(out, "gadgetd_kv_loop_gets_total{outcome=\"answered\"} %" PRIu64 "\n", c->answered);
        evbuffer_add_printf(out, "gadgetd_kv_loop_gets_total{outcome=\"uncached\"} %" PRIu64 "\n", c->uncached);
        evbuffer_add_printf(out, "gadgetd_kv_loop_gets_total{outcome=\"over_budget\"} %" PRIu64 "\n",
                            c->over_budget);
}

static void w_starts_flight(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        size_t n = 0;
        for (size_t i = 0; i < s->n_rows; i++)
                n += strcmp(s->rows[i].state, "starting") == 0;
        evbuffer_add_printf(out, "gadgetd_starts_in_flight %zu\n", n);
}

static void w_conns(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_connections{kind=\"control\"} %" PRIu64 "\n", s->self.control_connections);
        evbuffer_add_printf(out, "gadgetd_connections{kind=\"gateway\"} %" PRIu64 "\n", s->self.gateway_connections);
        evbuffer_add_printf(out, "gadgetd_connections{kind=\"metrics\"} %zu\n", metrics_connections(s->m));
}

static void w_leases(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        size_t n = 0;
        for (size_t i = 0; i < s->n_rows; i++)
                n += s->rows[i].leased;
        evbuffer_add_printf(out, "gadgetd_cluster_leases_held %zu\n", n);
}

static void w_nodes(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        static const char *const state[2] = { "down", "up" };
        const struct metrics_cluster *c = &s->cluster;
        for (size_t i = 0; i < c->n_nodes; i++) {
                evbuffer_add_printf(out, "gadgetd_cluster_nodes{node=\"");
                label(out, c->nodes[i].name);
                evbuffer_add_printf(out, "\",state=\"%s\"} 1\n", state[c->nodes[i].up]);
        }
        for (int up = 0; up < 2; up++)
                if (c->other[up])
                        evbuffer_add_printf(out, "gadgetd_cluster_nodes{node=\"%s\",state=\"%s\"} %" PRIu64 "\n",
                                            METRICS_NODES_OTHER, state[up], c->other[up]);
}

static void w_link(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        evbuffer_add_printf(out, "gadgetd_cluster_link_sessions{direction=\"in\"} %u\n", s->self.link_in);
        evbuffer_add_printf(out, "gadgetd_cluster_link_sessions{direction=\"out\"} %u\n", s->self.link_out);
}

static void w_forwarded(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        static const char *const direction[2] = { "in", "out" };
        for (int d = 0; d < 2; d++)
                for (unsigned o = 0; o < UNIT_STATS_OUTCOMES; o++)
                        if (o == 0 || s->cluster.forwarded.calls[d][o])
                                evbuffer_add_printf(out, "gadgetd_cluster_forwarded_calls_total{direction=\"%s\","
                                                    "outcome=\"%s\"} %" PRIu64 "\n", direction[d],
                                                    unit_stats_outcome(o), s->cluster.forwarded.calls[d][o]);
}

static void w_store(struct metrics_scrape *s, const struct metrics_row *r, struct evbuffer *out)
{
        const struct store_latency *l = &s->cluster.latency;
        for (int op = 0; op < STORE_OP_N; op++) {
                const char *name = store_op_name((enum store_op)op);
                uint64_t sum = 0;
                for (size_t i = 0; i < STORE_LATENCY_BUCKETS; i++) {
                        sum += l->buckets[op][i];
                        evbuffer_add_printf(out, "gadgetd_store_latency_seconds_bucket{op=\"%s\",le=\"%s\"} %" PRIu64 "\n",
                                            name, store_latency_bounds[i], sum);
                }
                evbuffer_add_printf(out, "gadgetd_store_latency_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
                                    sum + l->slower[op]);
                evbuffer_add_printf(out, "gadgetd_store_latency_seconds_sum{op=\"%s\"} %.6f\n", name,
                                    (double)l->sum_us[op] / 1e6);
                evbuffer_add_printf(out, "gadgetd_store_latency_seconds_count{op=\"%s\"} %" PRIu64 "\n", name,
                                    l->count[op]);
        }
}

static const struct family families[] = {
        { "gadgetd_gadget_state", GAUGE, "The gadget's state (one series, value 1, for the state it is in).", w_state, GADGET },
        { "gadgetd_gadget_starts", COUNTER, "Processes of the gadget started.", w_starts, GADGET },
        { "gadgetd_gadget_restarts", COUNTER, "Restarts of the gadget by cause: exit (Restart=), request (restart, reload).", w_restarts, GADGET },
        { "gadgetd_gadget_calls", COUNTER, "Calls of the gadget's methods by declared method (_other: any other) and outcome.", w_calls, GADGET },
        { "gadgetd_gadget_call_duration_seconds", HISTOGRAM, "How long the gadget's calls took, from gadgetd's door to their answer.", w_duration, GADGET },
        { "gadgetd_gadget_binding_calls", COUNTER, "Binding calls of the gadget by declared binding, operation (_other: any other) and outcome.", w_bindings, GADGET },
        { "gadgetd_gadget_memory_bytes", GAUGE, "Memory the gadget uses now (its cgroup's, else its processes' resident memory).", w_memory, GADGET },
        { "gadgetd_gadget_memory_peak_bytes", GAUGE, "The most memory the gadget's current run used (its cgroup's; 0 if unknown).", w_peak, GADGET },
        { "gadgetd_gadget_denials", COUNTER, "System calls of the gadget its seccomp filter refused, by call and the errno answered (\"killed\": a call of a foreign ABI), since it was loaded.", w_denials, GADGET },
        { "gadgetd_gadget_budget_waits", COUNTER, "Times the gadget's messages waited for a budget a second: FrameValuesPerSecond= (values decoded), FrameBytesPerSecond= (bytes of its messages and of the answers to its binding calls).", w_waits, GADGET },
        { "gadgetd_gadget_limit_hits", COUNTER, "Limit hits of the gadget, as audited: processes killed at MemoryMax, forks refused at TasksMax, throttling at CPUQuota (each episode once).", w_hits, GADGET },
        { "gadgetd_gadget_cpu_seconds", COUNTER, "CPU time of the gadget's current run (its cgroup's).", w_cpu, GADGET },
        { "gadgetd_gadget_tasks", GAUGE, "Tasks in the gadget's cgroup.", w_tasks, GADGET },
        { "gadgetd_gadget_log_lines_dropped", COUNTER, "Output lines dropped over the gadget's log budget.", w_logdrop, GADGET },
        { "gadgetd_gadget_state_seconds", COUNTER, "Seconds the gadget spent parked idle (state idle) and awake (a process of its own: starting, ready, stopping).", w_phase, GADGET },
        { "gadgetd_gadget_audit_records_dropped", COUNTER, "The gadget's audit records not written one by one: summarized over its RecordsPerSecond=, or refused by the file.", w_audit_gadget, GADGET },
        { "gadgetd_gadget_tail_events_dropped", COUNTER, "Events a tail binding of the gadget (a tail gadget) dropped: its queue full, or a batch that failed (told to it in its next batch).", w_tail_drops, GADGET },
        { "gadgetd_gadget_approvals_waiting", GAUGE, "Calls of the gadget waiting for a person's approval.", w_approvals, GADGET },
        { "gadgetd_gadgets", GAUGE, "Gadgets loaded.", w_gadgets, SELF },
        { "gadgetd_resident_memory_bytes", GAUGE, "gadgetd's resident memory.", w_rss, SELF },
        { "gadgetd_open_fds", GAUGE, "gadgetd's open file descriptors.", w_fds, SELF },
        { "gadgetd_loop_lag_seconds", HISTOGRAM, "How late gadgetd's event loop ran a timer due every 100 ms (the length of the turns in its way).", w_lag, SELF },
        { "gadgetd_budget_refusals", COUNTER, "Connections and clients refused or closed by a budget.", w_refusals, SELF },
        { "gadgetd_audit_records_dropped", COUNTER, "Audit records not written one by one: summarized over a gadget's RecordsPerSecond=, or refused by the file.", w_audit, SELF },
        { "gadgetd_trace_spans_dropped", COUNTER, "Spans not exported to TraceExport=: overwritten in the ring before they were sent, or refused by the collector.", w_spans, SELF },
        { "gadgetd_kv_loop_gets", COUNTER, "kv gets of the SQLite store tried on gadgetd's event loop, by outcome: answered there, or handed to the gadget's store thread because a page was not in memory (uncached) or the get read more than 32 KiB (over_budget).", w_kv_loop, SELF },
        { "gadgetd_starts_in_flight", GAUGE, "Gadgets starting now.", w_starts_flight, SELF },
        { "gadgetd_connections", GAUGE, "Open connections of gadgetd's clients by kind.", w_conns, SELF },
        { "gadgetd_cluster_leases_held", GAUGE, "Leases this node holds: the gadgets it runs of the shared store.", w_leases, CLUSTER },
        { "gadgetd_cluster_nodes", GAUGE, "The store's nodes as this node last read them, by state (up: seen within 10 s); the first 64 by name, the rest under _other.", w_nodes, CLUSTER },
        { "gadgetd_cluster_link_sessions", GAUGE, "Node-link sessions past their handshake: from other nodes (in), to them (out).", w_link, CLUSTER },
        { "gadgetd_cluster_forwarded_calls", COUNTER, "Calls between nodes by outcome: from other nodes to the gadgets here (in), forwarded to the nodes that run theirs (out).", w_forwarded, CLUSTER },
        { "gadgetd_store_latency_seconds", HISTOGRAM, "How long the shared store took to answer a query, by kind: kv_get, kv_put, lease (the lease session's), other.", w_store, CLUSTER },
};
#define N_FAMILIES (sizeof families / sizeof *families)

static void header(const struct metrics_scrape *s, const struct family *f, struct evbuffer *out)
{
        static const char *const kinds[] = { [GAUGE] = "gauge", [COUNTER] = "counter", [HISTOGRAM] = "histogram" };
        const char *suffix = f->kind == COUNTER && !s->openmetrics ? "_total" : "";
        evbuffer_add_printf(out, "# HELP %s%s %s\n# TYPE %s%s %s\n", f->name, suffix, f->help, f->name, suffix,
                            kinds[f->kind]);
}

bool metrics_text_slice(struct metrics_scrape *s, struct evbuffer *out, size_t rows, size_t bytes)
{
        while (s->family < N_FAMILIES && rows && evbuffer_get_length(out) < bytes) {
                const struct family *f = &families[s->family];
                if (f->scope == CLUSTER && !s->cluster.on) {
                        s->family++; /* absent without a shared store */
                        continue;
                }
                if (s->row == 0)
                        header(s, f, out);
                if (f->scope != GADGET) {
                        f->write(s, NULL, out);
                        rows--;
                } else {
                        /* At least one row after where it was: a header is never
                         * written twice. */
                        size_t first = s->row;
                        for (; s->row < s->n_rows && rows && (s->row == first || evbuffer_get_length(out) < bytes);
                             s->row++, rows--)
                                f->write(s, &s->rows[s->row], out);
                        if (s->row < s->n_rows)
                                return false;
                }
                s->family++;
                s->row = 0;
        }
        if (s->family < N_FAMILIES)
                return false;
        if (s->openmetrics)
                evbuffer_add_printf(out, "# EOF\n");
        return true;
}
