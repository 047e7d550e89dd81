/* gateway_api: the JSON API — the list of gadgets, and calls of their
 * methods through unit_call (the path gadgetctl calls take), each recorded
 * in the audit log as binding "gateway", operation "call METHOD". */
#include "gateway_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>

#include "system/audit.h"
#include "core/core.h"
#include "core/denials.h"
#include "contract.h"
#include "json.h"
#include "policy.h"
#include "validate.h"
#include "value.h"
#include "system/monotime.h"
#include "system/releases.h"

#define GATEWAY_LIST_MAX 256  /* gadgets in one answer of the list */

struct gateway_call {
        struct gateway_wait wait;    /* for its gadget's budget (first: resume's argument) */
        struct gateway *g;           /* NULL once the gateway is gone */
        struct evhttp_request *req;
        char gadget[GADGET_NAME_MAX + 1];
        char method[GADGET_NAME_MAX + 1];
        bool admin;
        bool counted;                /* in its gadget's budget's calls in flight */
        char op[8 + GADGET_NAME_MAX];  /* "call METHOD" */
        struct timespec start;
        size_t bytes_in;
        struct trace_ctx trace;      /* its span (zero: none) */
        LIST_ENTRY(gateway_call) link; /* in g->calls while it waits (le_prev NULL: not) */
};

void gateway_send_json(struct evhttp_request *req, int status, const char *text)
{
        struct evbuffer *b = evbuffer_new();
        if (!b) {
                gateway_send(req, 500, NULL, NULL);
                return;
        }
        evbuffer_add(b, text, strlen(text));
        evbuffer_add(b, "\n", 1);
        gateway_send(req, status, "application/json", b);
        evbuffer_free(b);
}

void gateway_send_object(struct evhttp_request *req, json_t *o)
{
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (text)
                gateway_send_json(req, 200, text);
        else
                gateway_send_error(req, 500, "internal", "out of memory");
        free(text);
        json_decref(o);
}

static json_t *gadget_json(const struct gateway *g, struct unit *u)
{
        json_t *methods = json_array();
        json_t *sigs = json_array();
        char **names, **texts;
        size_t n = unit_methods(u, &names), n_sigs = unit_signatures(u, &texts);
        for (size_t i = 0; i < n; i++) {
                json_array_append_new(methods, json_string(names[i]));
                json_array_append_new(sigs, json_string(i < n_sigs ? texts[i] : ""));
        }
        const struct policy *p = unit_policy(u);
        json_t *admin = json_array();
        for (size_t i = 0; i < p->n_admin_methods; i++)
                json_array_append_new(admin, json_string(p->admin_methods[i]));
        struct unit_info in;
        unit_info(u, &in);
        /* A gadget a reload kept on its previous policy: its file and the
         * count of its errors, never their text (they may quote the file,
         * which the gateway's users need not read). */
        const struct unit_stats *s = unit_stats(u);
        /* Installed from a bundle: its version (system/releases.c), from
         * the policy's paths, no file read. */
        char version[80];
        releases_version_of(core_state_dir(g->core), in.name, p->path, p->exec, version, sizeof version);
        /* A staged rollout running here: its version and share. */
        struct unit_rollout_info ro;
        unit_rollout_info(u, &ro);
        return json_pack("{s:s, s:s, s:s, s:b, s:o, s:o, s:I, s:I, s:b, s:b, s:o, s:s, s:I, s:I, s:I, s:s, s:I, s:I, "
                         "s:I, s:I, s:I, s:s, s:s, s:I}",
                         "name", in.name,
                         "state",
                         in.state, "cause", unit_cause(u), "ui", p->ui != NULL, "methods", methods, "signatures",
                         sigs, "calls", (json_int_t)in.calls, "restarts", (json_int_t)in.restarts, "gatekeeper",
                         p->gatekeeper, "admin_ui", p->admin_ui != NULL, "admin_methods", admin, "start", in.start,
                         "active_ago_ms", (json_int_t)in.active_ago_ms, "next_alarm_ms", (json_int_t)in.next_alarm_ms,
                         "kept_errors", (json_int_t)in.kept_errors, "kept_file", in.kept_errors ? p->path : "",
                         "calls_total", (json_int_t)s->calls, "errors", (json_int_t)s->errors, "p99_us",
                         (json_int_t)unit_stats_quantile_us(s, 0.99), "memory_bytes", (json_int_t)in.memory_bytes,
                         "denials", (json_int_t)(in.denials ? in.denials->total : 0), "version", version,
                         "rollout_version", ro.running ? ro.version : "", "rollout_percent",
                         (json_int_t)(ro.running ? ro.percent : 0));
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(unit_name(*(struct unit *const *)a), unit_name(*(struct unit *const *)b));
}

/* The ?after=NAME of a list's next page: 0 (none: *after NULL), or -1 if
 * it is no gadget name. */
static int list_after(struct evhttp_request *req, struct evkeyvalq *q, const char **after)
{
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
        *after = NULL;
        if (!query || evhttp_parse_query_str(query, q) < 0)
                return 0;
        *after = evhttp_find_header(q, "after");
        return !*after || gadget_name_ok(*after) ? 0 : -1;
}

void gateway_api_list(struct gateway *g, struct evhttp_request *req)
{
        struct evkeyvalq q = { 0 };
        const char *after;
        size_t n = 0, first = 0;
        if (list_after(req, &q, &after) < 0) {
                evhttp_clear_headers(&q);
                gateway_send_error(req, 400, "invalid", "after= takes a gadget's name");
                return;
        }
        for (struct unit *u = core_first(g->core); u; u = unit_next(u))
                n++;
        struct unit **v = calloc(n + 1, sizeof *v);
        json_t *list = json_array();
        n = 0;
        for (struct unit *u = core_first(g->core); v && u; u = unit_next(u))
                v[n++] = u;
        if (v)
                qsort(v, n, sizeof *v, cmp_name);
        while (v && after && first < n && strcmp(unit_name(v[first]), after) <= 0)
                first++;
        /* Why a page: the answer is made in one turn of the loop, whatever
         * the number of gadgets; the page asks for the next. */
        size_t end = n - first > GATEWAY_LIST_MAX ? first + GATEWAY_LIST_MAX : n;
        for (size_t i = first; v && i < end; i++)
                json_array_append_new(list, gadget_json(g, v[i]));
        /* at_ms: when the counters were read (gadgetd's monotonic clock),
         * for rates between two readings, as gadgetctl top makes them. */
        json_t *o = json_pack("{s:o, s:I, s:b, s:I}", "gadgets", list, "total", (json_int_t)n, "more", end < n,
                              "at_ms", (json_int_t)monotime_ms());
        if (!v) {
                json_decref(o);
                o = NULL;
        }
        evhttp_clear_headers(&q);
        gateway_send_object(req, o);
        free(v);
}

/* One audit record per call a UI (or any gateway client) made. */
static void record(struct gateway *g, struct gateway_call *c, enum audit_outcome outcome,
                   size_t bytes_out, const char *detail)
{
        if (!g)
                return;
        char trace[2 * TRACE_ID_LEN + 1];
        bool traced = !trace_id_zero(c->trace.trace_id, TRACE_ID_LEN);
        trace_hex(c->trace.trace_id, TRACE_ID_LEN, trace);
        struct audit_record rec = {
                .gadget = c->gadget, .binding = "gateway", .op = c->op, .outcome = outcome,
                .bytes = c->bytes_in + bytes_out, .duration_us = monotime_since_us(&c->start), .detail = detail,
                .trace = traced ? trace : NULL,
        };
        audit_write(core_audit(g->core), &rec);
}

/* The HTTP status and error code (gadget_error_name) for a GADGET_E* code. */
static int status_of(int code, const char **name)
{
        static const int status[] = {
                [GADGET_EINVAL] = 400, [GADGET_ENOMETHOD] = 404, [GADGET_EFAILED] = 502,
                [GADGET_EDENIED] = 403, [GADGET_EUNAVAILABLE] = 503, [GADGET_ETIMEOUT] = 504,
                [GADGET_EBUSY] = 429, [GADGET_EPROTO] = 502, [GADGET_ELIMIT] = 413,
                [GADGET_ENOTFOUND] = 404, [GADGET_EGONE] = 502, [GADGET_EINTERNAL] = 500,
        };
        bool known = code > 0 && (size_t)code < sizeof status / sizeof *status && status[code];
        *name = gadget_error_name(known ? (unsigned)code : GADGET_EFAILED);
        return known ? status[code] : 502;
}

static void unlink_call(struct gateway_call *c)
{
        if (!c->link.le_prev)
                return;
        LIST_REMOVE(c, link);
        c->link.le_prev = NULL;
}

/* gadgetd is stopping: its loop may end before the reply would be
 * written, so it is written now (a short non-blocking write). */
static void flush_now(struct evhttp_connection *evcon)
{
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        if (bev)
                evbuffer_write(bufferevent_get_output(bev), bufferevent_getfd(bev));
}

/* The gadget answered (or the call failed, timed out, or the gadget died). */
static void call_done(void *arg, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct gateway_call *c = arg;
        struct gateway *g = c->g;
        struct evhttp_connection *evcon = g ? evhttp_request_get_connection(c->req) : NULL;
        const char *name = "internal";
        char *text = res ? json_from_value(res) : NULL;

        unlink_call(c);
        if (g && c->counted)
                gateway_budget_leave(g, c->gadget, text ? strlen(text) : 0);
        if (text) {
                record(g, c, AUDIT_OK, strlen(text), NULL);
                if (g)
                        gateway_send_json(c->req, 200, text);
        } else {
                if (res)
                        message = "the result cannot be written as JSON";
                int status = res ? 500 : status_of(code, &name);
                record(g, c, AUDIT_ERROR, 0, message ? message : "the call failed");
                if (g)
                        gateway_send_error(c->req, status, res ? "internal" : name, "%s",
                                           message ? message : "the call failed");
        }
        if (g && core_stopping(g->core))
                flush_now(evcon);
        free(text);
        free(c);
}

/* A refused call: answered at once and recorded. */
static void refuse(struct gateway *g, struct gateway_call *c, int status, const char *code,
                   const char *msg)
{
        if (c->counted)
                gateway_budget_leave(g, c->gadget, 0);
        record(g, c, AUDIT_ERROR, 0, msg);
        struct evhttp_connection *evcon = evhttp_request_get_connection(c->req);
        gateway_send_error(c->req, status, code, "%s", msg);
        /* A call that waited for its budget may be refused as gadgetd
         * stops (its gadget stopping): written now, as call_done does. */
        if (core_stopping(g->core))
                flush_now(evcon);
        free(c);
}

/* Why a body must say it is JSON: a page of another origin cannot send
 * application/json without a CORS preflight, which the gateway never
 * grants (a second guard beside the Origin check). */
bool gateway_json_body(struct evhttp_request *req)
{
        const char *t = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
        size_t n = strlen("application/json");
        return t && strncasecmp(t, "application/json", n) == 0 && (t[n] == '\0' || t[n] == ';');
}

static void start_call(struct gateway_wait *w, bool go);

void gateway_api_call(struct gateway *g, struct evhttp_request *req, const char *name, const char *method,
                      bool admin)
{
        struct unit *u = gadget_name_ok(name) ? core_find(g->core, name) : NULL;
        size_t len = evbuffer_get_length(evhttp_request_get_input_buffer(req));

        if (!u) {
                gateway_send_error(req, 404, "not_found", "no gadget named \"%.64s\"", name);
                return;
        }
        /* Why: only names a gadget could declare reach it, and the audit. */
        if (!gadget_method_name_ok(method)) {
                gateway_send_error(req, 404, "no_method", "gadget \"%s\" has no such method", name);
                return;
        }
        struct gateway_call *c = calloc(1, sizeof *c);
        if (!c) {
                gateway_send_error(req, 500, "internal", "out of memory");
                return;
        }
        *c = (struct gateway_call){ .g = g, .req = req, .bytes_in = len, .admin = admin };
        c->wait.resume = start_call;
        snprintf(c->gadget, sizeof c->gadget, "%s", name);
        snprintf(c->method, sizeof c->method, "%s", method);
        snprintf(c->op, sizeof c->op, "%s %s", admin ? "admin" : "call", method);
        clock_gettime(CLOCK_MONOTONIC, &c->start);
        int e = gateway_budget_enter(g, c->gadget, len, &c->wait);
        if (e < 0)
                refuse(g, c, 500, "internal", "out of memory");
        else if (e == 0)
                start_call(&c->wait, true);
}

/* The call may start (go), its gadget's budget allowing; or gadgetd stops
 * while it waits (!go). */
static void start_call(struct gateway_wait *w, bool go)
{
        struct gateway_call *c = (struct gateway_call *)w;
        struct gateway *g = c->g;
        struct evhttp_request *req = c->req;
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = c->bytes_in;
        char msg[600];
        Gadget__Value *args = NULL;

        c->counted = go;
        if (!go) {
                refuse(g, c, 503, "unavailable", "gadgetd is stopping");
                return;
        }
        /* It may have gone while the call waited. */
        struct unit *u = core_find(g->core, c->gadget);
        if (!u) {
                snprintf(msg, sizeof msg, "no gadget named \"%s\"", c->gadget);
                refuse(g, c, 404, "not_found", msg);
                return;
        }
        const char *method = c->method;
        bool admin = c->admin;
        if (len && !gateway_json_body(req)) {
                refuse(g, c, 415, "unsupported_media_type",
                       "the body must be JSON, sent with \"Content-Type: application/json\"");
                return;
        }
        const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "null";
        char err[400];
        if (!body || json_to_value(body, len ? len : 4, &args, err, sizeof err) < 0) {
                snprintf(msg, sizeof msg, "the body is not valid JSON: %s", body ? err : "out of memory");
                refuse(g, c, 400, "bad_json", msg);
                return;
        }
        /* Why this is safe: the traceparent header (any local user's with
         * the token) is read strictly and only names the parent of the
         * call's span; an invalid one is ignored. */
        const char *tp = evhttp_find_header(evhttp_request_get_input_headers(req), "traceparent");
        struct trace_ctx parent;
        bool traced = tp && traceparent_parse(tp, strnlen(tp, TRACEPARENT_MAX + 1), &parent) == 0;
        const struct call_req q = { .method = method, .args = args, .done = call_done, .cbdata = c,
                                    .caller = "workshop", .via = admin ? "gateway (admin UI)" : "gateway",
                                    .admin = admin, .trace = traced ? &parent : NULL, .trace_out = &c->trace };
        int code = calls_start(u, &q, msg, sizeof msg);
        value_free(args);
        /* The call's own span, as W3C's traceresponse header names it. */
        if (code == 0 && !trace_id_zero(c->trace.trace_id, TRACE_ID_LEN)) {
                char line[TRACEPARENT_LEN + 1];
                traceparent_format(&c->trace, line);
                evhttp_add_header(evhttp_request_get_output_headers(req), "traceresponse", line);
        }
        if (code == 0) {
                LIST_INSERT_HEAD(&g->calls, c, link);
                return;
        }
        const char *cname;
        int status = status_of(code, &cname);
        refuse(g, c, status, cname, msg);
}

void gateway_api_orphan(struct gateway *g)
{
        /* Their gadgets' answers still come to call_done, which then only
         * frees them: the requests went with the HTTP server. */
        struct gateway_call *c;
        while ((c = LIST_FIRST(&g->calls))) {
                unlink_call(c);
                c->g = NULL;
        }
}
