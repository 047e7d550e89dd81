/* trace_export: spans to an OTLP/HTTP collector (trace_export.h). */
#include "trace_export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "bindings/http.h"
#include "otlp_trace.pb-c.h"
#include "system/curl_dl.h"
#include "system/log.h"
#include "system/ratelog.h"
#include "system/monotime.h"
#include "system/timer.h"
#include "system/trace.h"

#define EXPORT_BATCH 512             /* spans a request carries at most */
#define EXPORT_INTERVAL_MS 500       /* how often the ring is looked at */
#define EXPORT_TIMEOUT_MS 10000      /* one request's bound */

struct trace_export {
        struct traces *t;
        char *url;
        struct http *http;           /* its own: the gadgets' HTTP budget is not the export's */
        struct event *tick;
        bool ready;                  /* libcurl loaded */
        /* The batch in flight: */
        CURL *easy;
        struct curl_slist *headers;
        uint8_t *body;
        size_t n_spans;
        bool started;                /* easy is on the multi handle */
        struct span batch[EXPORT_BATCH];
        struct ratelog fail_log;
        uint64_t dropped_told;       /* traces_dropped when last logged */
};

static void batch_free(struct trace_export *x)
{
        if (x->easy)
                curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->headers);
        free(x->body);
        x->easy = NULL;
        x->headers = NULL;
        x->body = NULL;
        x->n_spans = 0;
        x->started = false;
}

static Otlp__KeyValue *attr(Otlp__KeyValue *kv, Otlp__AnyValue *v, const char *key, const char *value)
{
        otlp__key_value__init(kv);
        otlp__any_value__init(v);
        v->value_case = OTLP__ANY_VALUE__VALUE_STRING_VALUE;
        v->string_value = (char *)value;
        kv->key = (char *)key;
        kv->value = v;
        return kv;
}

#define SPAN_ATTRS 5

/* One span's message, on storage the caller keeps until it is packed. */
struct span_msg {
        Otlp__Span m;
        Otlp__Status status;
        Otlp__KeyValue kv[SPAN_ATTRS];
        Otlp__AnyValue v[SPAN_ATTRS];
        Otlp__KeyValue *attrs[SPAN_ATTRS];
        char name[200];
};

static void span_fill(struct span_msg *o, struct span *s)
{
        Otlp__Span *m = &o->m;
        otlp__span__init(m);
        otlp__status__init(&o->status);
        m->trace_id = (ProtobufCBinaryData){ TRACE_ID_LEN, s->ctx.trace_id };
        m->span_id = (ProtobufCBinaryData){ TRACE_SPAN_ID_LEN, s->ctx.span_id };
        if (!trace_id_zero(s->parent_id, TRACE_SPAN_ID_LEN))
                m->parent_span_id = (ProtobufCBinaryData){ TRACE_SPAN_ID_LEN, s->parent_id };
        snprintf(o->name, sizeof o->name, "%s %s", s->gadget, s->name);
        m->name = o->name;
        m->kind = s->kind == SPAN_CALL ? OTLP__SPAN__SPAN_KIND__SPAN_KIND_SERVER : OTLP__SPAN__SPAN_KIND__SPAN_KIND_CLIENT;
        m->start_time_unix_nano = s->start_ns;
        m->end_time_unix_nano = s->start_ns + s->duration_ns;
        m->flags = s->ctx.flags;
        bool ok = strcmp(s->outcome, "ok") == 0;
        o->status.code = ok ? OTLP__STATUS__STATUS_CODE__STATUS_CODE_OK : OTLP__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
        o->status.message = ok ? (char *)"" : s->outcome;
        m->status = &o->status;
        size_t n = 0;
        o->attrs[n] = attr(&o->kv[n], &o->v[n], "gadget.name", s->gadget), n++;
        o->attrs[n] = attr(&o->kv[n], &o->v[n], s->kind == SPAN_CALL ? "gadget.method" : "gadget.binding_op", s->name), n++;
        o->attrs[n] = attr(&o->kv[n], &o->v[n], "gadgetd.node", s->node), n++;
        o->attrs[n] = attr(&o->kv[n], &o->v[n], "gadgetd.outcome", s->outcome), n++;
        if (s->peer[0])
                o->attrs[n] = attr(&o->kv[n], &o->v[n], "gadgetd.peer_node", s->peer), n++;
        m->attributes = o->attrs;
        m->n_attributes = n;
}

/* x->batch[0 .. n) as one ExportTraceServiceRequest in x->body: its
 * length, or 0 if out of memory. */
static size_t encode(struct trace_export *x, size_t n)
{
        struct span_msg *msgs = calloc(n, sizeof *msgs);
        Otlp__Span **spans = calloc(n, sizeof *spans);
        size_t len = 0;
        if (!msgs || !spans)
                goto out;
        for (size_t i = 0; i < n; i++) {
                span_fill(&msgs[i], &x->batch[i]);
                spans[i] = &msgs[i].m;
        }
        Otlp__KeyValue rkv[2], *rattrs[2];
        Otlp__AnyValue rv[2];
        rattrs[0] = attr(&rkv[0], &rv[0], "service.name", "gadgetd");
        rattrs[1] = attr(&rkv[1], &rv[1], "service.instance.id", traces_node(x->t));
        Otlp__Resource res = OTLP__RESOURCE__INIT;
        res.attributes = rattrs;
        res.n_attributes = 2;
        Otlp__InstrumentationScope scope = OTLP__INSTRUMENTATION_SCOPE__INIT;
        scope.name = (char *)"gadgetd";
        Otlp__ScopeSpans ss = OTLP__SCOPE_SPANS__INIT, *ssp = &ss;
        ss.scope = &scope;
        ss.spans = spans;
        ss.n_spans = n;
        Otlp__ResourceSpans rs = OTLP__RESOURCE_SPANS__INIT, *rsp = &rs;
        rs.resource = &res;
        rs.scope_spans = &ssp;
        rs.n_scope_spans = 1;
        Otlp__ExportTraceServiceRequest req = OTLP__EXPORT_TRACE_SERVICE_REQUEST__INIT;
        req.resource_spans = &rsp;
        req.n_resource_spans = 1;
        size_t size = otlp__export_trace_service_request__get_packed_size(&req);
        if ((x->body = malloc(size ? size : 1)))
                len = otlp__export_trace_service_request__pack(&req, x->body);
out:
        free(msgs);
        free(spans);
        return len;
}

static void sent(void *arg, CURL *easy, CURLcode result)
{
        struct trace_export *x = arg;
        long status = 0;
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (result != CURLE_OK || status < 200 || status > 299) {
                traces_count_dropped(x->t, x->n_spans);
                ratelog_warn(&x->fail_log, monotime_ms(), NULL, "trace batches not taken by the collector",
                             "TraceExport: %zu spans dropped: %s (HTTP %ld)", x->n_spans,
                             result != CURLE_OK ? curl_easy_strerror(result) : "refused", status);
        }
        batch_free(x);
        /* The next batch from the tick, now: this one's slot is given
         * back only once this returns. */
        event_active(x->tick, EV_TIMEOUT, 0);
}

/* Sends the next batch if none is in flight and spans wait. */
static void send_next(struct trace_export *x)
{
        char err[300];
        if (x->easy)
                return;
        if (!x->ready) {
                if (http_ready(x->http, err, sizeof err) < 0) {
                        ratelog_warn(&x->fail_log, monotime_ms(), NULL, "trace batches not sent",
                                     "TraceExport: %s", err);
                        traces_count_dropped(x->t, traces_take(x->t, x->batch, EXPORT_BATCH));
                        return;
                }
                x->ready = true;
        }
        size_t n = traces_take(x->t, x->batch, EXPORT_BATCH);
        if (!n)
                return;
        x->n_spans = n;
        struct http_slot *slot = NULL;
        size_t len = encode(x, n);
        struct curl_slist *h = len ? curl_slist_append(NULL, "Content-Type: application/x-protobuf") : NULL;
        x->headers = h;
        if (!h || !(x->easy = curl_easy_init()) || http_slot_take(x->http, "gadgetd", "TraceExport", 1, &slot) < 0) {
                traces_count_dropped(x->t, n);
                batch_free(x);
                return;
        }
        CURL *e = x->easy;
        curl_easy_setopt(e, CURLOPT_URL, x->url);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, (char *)x->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)EXPORT_TIMEOUT_MS);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_USERAGENT, "gadgetd");
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)65536);
        if (http_start(x->http, slot, e, sent, x) < 0) {
                http_slot_put(x->http, slot);
                traces_count_dropped(x->t, n);
                batch_free(x);
                return;
        }
        x->started = true;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
        struct trace_export *x = arg;
        send_next(x);
        uint64_t dropped = traces_dropped(x->t);
        if (dropped != x->dropped_told) {
                ratelog_warn(&x->fail_log, monotime_ms(), NULL, "trace batches not taken by the collector",
                             "TraceExport: %llu spans dropped since gadgetd started (the collector is slower "
                             "than the calls, or refuses them)", (unsigned long long)dropped);
                x->dropped_told = dropped;
        }
        timer_arm_ms(x->tick, EXPORT_INTERVAL_MS);
}

int trace_export_new(struct event_base *base, struct traces *t, const char *url, struct trace_export **out)
{
        struct trace_export *x = calloc(1, sizeof *x);
        if (!x || !(x->url = strdup(url)) || !(x->tick = evtimer_new(base, tick, x))) {
                trace_export_free(x);
                return -ENOMEM;
        }
        x->t = t;
        int e = http_new(base, 4, &x->http);
        if (e < 0) {
                trace_export_free(x);
                return e;
        }
        traces_export_start(t);
        timer_arm_ms(x->tick, EXPORT_INTERVAL_MS);
        *out = x;
        return 0;
}

void trace_export_free(struct trace_export *x)
{
        if (!x)
                return;
        if (x->tick)
                event_free(x->tick);
        if (x->easy && x->started)
                http_abandon(x->http, x->easy);
        batch_free(x);
        http_free(x->http);
        free(x->url);
        free(x);
}
