/* gateway_activity: what the workshop shows of a gadget's work — its
 * recent events (the last lines of its log ring, lifecycle events among
 * them) and its call log (core/call_log.h), and the spans of one trace
 * across the nodes (core/trace_gather.h). Every answer is bounded: GATEWAY_EVENTS_MAX lines,
 * CALL_LOG_MAX calls, GATEWAY_TRACE_SPANS_MAX spans. Served to the
 * workshop page only: gateway.c's checks (the token or the session
 * cookie, no foreign Origin, which a UI's sandboxed frame always has)
 * come first, as for every route. */
#include "gateway_int.h"

#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "core/call_log.h"
#include "core/core.h"
#include "core/trace_gather.h"
#include "system/monotime.h"
#include "system/trace.h"

#define GATEWAY_EVENTS_MAX 50        /* log lines of a gadget's activity */
#define GATEWAY_TRACE_SPANS_MAX 256  /* spans of a trace */

/* An id of n bytes as text ("" if all zero: none) into out of 2n + 1. */
static const char *id_text(const uint8_t *id, size_t n, char *out)
{
        if (trace_id_zero(id, n))
                out[0] = '\0';
        else
                trace_hex(id, n, out);
        return out;
}

static json_t *call_log_json(const struct call_log *log)
{
        json_t *a = json_array();
        uint64_t now = monotime_ms();
        const struct call_log_entry *e;
        char trace[2 * TRACE_ID_LEN + 1];
        for (size_t i = 0; a && (e = call_log_get(log, i)); i++)
                json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I, s:s}", "method", e->method, "outcome",
                                                   unit_stats_outcome(e->code), "duration_us",
                                                   (json_int_t)e->duration_us, "ago_ms",
                                                   (json_int_t)(now > e->end_ms ? now - e->end_ms : 0), "trace",
                                                   id_text(e->trace_id, TRACE_ID_LEN, trace)));
        return a;
}

static json_t *events_json(const struct logbuf *b)
{
        json_t *a = json_array();
        size_t n = b->count < GATEWAY_EVENTS_MAX ? b->count : GATEWAY_EVENTS_MAX;
        for (size_t i = 0; a && i < n; i++) {
                const struct logbuf_entry *e = logbuf_line(b, n, i);
                const char *stream = e ? logbuf_source_name(e->source) : NULL;
                if (e)
                        json_array_append_new(a, json_pack("{s:I, s:s, s:i, s:I, s:s}", "time_ms",
                                                           (json_int_t)e->time_ms, "stream", stream ? stream : "",
                                                           "priority", (int)e->prio, "run", (json_int_t)e->run,
                                                           "text", e->text));
        }
        return a;
}

void gateway_api_activity(struct gateway *g, struct evhttp_request *req, const char *name)
{
        struct unit *u = gadget_name_ok(name) ? core_find(g->core, name) : NULL;
        if (!u) {
                gateway_send_error(req, 404, "not_found", "no gadget named \"%.64s\"", name);
                return;
        }
        const struct unit_stats *s = unit_stats(u);
        struct unit_info in;
        unit_info(u, &in);
        gateway_send_object(req, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "name", in.name, "state",
                                           in.state, "calls", (json_int_t)s->calls, "errors",
                                           (json_int_t)s->errors, "p99_us",
                                           (json_int_t)unit_stats_quantile_us(s, 0.99), "memory_bytes",
                                           (json_int_t)in.memory_bytes, "call_log",
                                           call_log_json(unit_recent_calls(u)), "events",
                                           events_json(unit_log(u))));
}

static json_t *span_json(const struct span *s)
{
        char id[2 * TRACE_SPAN_ID_LEN + 1], parent[2 * TRACE_SPAN_ID_LEN + 1];
        trace_hex(s->ctx.span_id, TRACE_SPAN_ID_LEN, id);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "span_id", id, "parent_id",
                         id_text(s->parent_id, TRACE_SPAN_ID_LEN, parent), "kind",
                         s->kind == SPAN_CALL ? "call" : "binding", "gadget", s->gadget, "name", s->name, "node",
                         s->node, "peer", s->peer, "outcome", s->outcome, "start_us",
                         (json_int_t)(s->start_ns / 1000), "duration_us", (json_int_t)(s->duration_ns / 1000));
}

/* A trace the workshop asked for, while its spans are gathered. */
struct gateway_trace {
        struct gateway *g;           /* NULL once the gateway is gone */
        struct evhttp_request *req;
        LIST_ENTRY(gateway_trace) link; /* in g->traces while it is gathered */
};

static void gathered(void *arg, const struct trace_gathered *r)
{
        struct gateway_trace *t = arg;
        struct gateway *g = t->g;
        if (g)
                LIST_REMOVE(t, link);
        if (g && !r->n) {
                gateway_send_error(t->req, 404, "not_found", "no span of trace %s is kept on %s%s", r->hex,
                                   r->n_nodes > 1 ? "the nodes asked" : "this node",
                                   r->n_unreached ? " (some did not answer)" : "");
        } else if (g) {
                json_t *a = json_array(), *u = json_array();
                for (size_t i = 0; a && i < r->n; i++)
                        json_array_append_new(a, span_json(r->spans[i]));
                for (size_t i = 0; u && i < r->n_unreached; i++)
                        json_array_append_new(u, json_string(r->unreached[i]));
                gateway_send_object(t->req, json_pack("{s:s, s:s, s:o, s:o}", "trace_id", r->hex, "node",
                                                      core_node(g->core) ? core_node(g->core) : "", "spans", a,
                                                      "unreached", u));
        }
        free(t);
}

void gateway_api_trace(struct gateway *g, struct evhttp_request *req, const char *hex)
{
        uint8_t id[TRACE_ID_LEN];
        if (strlen(hex) != 2 * TRACE_ID_LEN || trace_unhex(hex, TRACE_ID_LEN, id) < 0 ||
            trace_id_zero(id, TRACE_ID_LEN)) {
                gateway_send_error(req, 400, "invalid", "a trace id is 32 lower-case hex digits, not all zero");
                return;
        }
        if (!traces_on(core_traces(g->core))) {
                gateway_send_error(req, 503, "unavailable", "tracing is off on this node (TraceKeep=0)");
                return;
        }
        struct gateway_trace *t = calloc(1, sizeof *t);
        if (!t) {
                gateway_send_error(req, 500, "internal", "out of memory");
                return;
        }
        *t = (struct gateway_trace){ .g = g, .req = req };
        LIST_INSERT_HEAD(&g->traces, t, link);
        if (trace_gather(g->core, hex, false, GATEWAY_TRACE_SPANS_MAX, gathered, t) < 0) {
                LIST_REMOVE(t, link);
                free(t);
                gateway_send_error(req, 500, "internal", "out of memory");
        }
}

void gateway_activity_orphan(struct gateway *g)
{
        /* Their answers still come to gathered, which then only frees
         * them: the requests went with the HTTP server. */
        struct gateway_trace *t;
        while ((t = LIST_FIRST(&g->traces))) {
                LIST_REMOVE(t, link);
                t->g = NULL;
        }
}
