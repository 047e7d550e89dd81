/* gateway_int: private to the gateway's files — gateway.c (listening,
 * token, routing, responses), gateway_api.c (the JSON API) and
 * gateway_page.c (the workshop page and the gadgets' UIs). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/http.h>
#include <jansson.h>

#include "gateway.h"
#include "system/httpconn.h"
#include "system/nametab.h"
#include "system/ratelog.h"

#define GATEWAY_SESSION_BYTES 32
#define GATEWAY_COOKIE "gadgetd_session"

struct gateway_call;
struct gateway_trace;

/* What the gateway logs at most once per window, with a count. */
enum gateway_refusal { GW_REF_TOKEN, GW_REF_FOREIGN, GW_REF_N };

struct gateway {
        struct core *core;
        struct evhttp *http;
        char *token;                 /* from TokenFile=, never logged */
        size_t token_len;
        /* The cookie's value: random per gadgetd run, so the long-lived
         * token itself never sits in a browser's cookie jar. */
        char session[2 * GATEWAY_SESSION_BYTES + 1];
        char hosts[2][80];           /* Host header values accepted: "127.0.0.1:PORT", "localhost:PORT" */
        LIST_HEAD(, gateway_call) calls; /* API calls waiting for their gadget */
        LIST_HEAD(, gateway_trace) traces; /* traces being gathered from the nodes */
        struct httpconns conns;      /* MaxConnections=, HeaderTimeout= */
        int fd;                      /* the listening socket */
        struct ratelog rl[GW_REF_N];
        struct nametab budgets;      /* each called gadget's (gateway_budget.c) */
};

/* A call through the gateway that waits for its gadget's budget: resume
 * runs once, go true when it may start (counted in flight), false when
 * gadgetd stops first. */
struct gateway_wait {
        TAILQ_ENTRY(gateway_wait) link;
        void (*resume)(struct gateway_wait *w, bool go);
};
/* A call of gadget name whose body (bytes_in of JSON) was read: 0, it may
 * start now; 1, w waits (its resume runs later); -ENOMEM. Either way the
 * body counts against the gadget's budget. */
int gateway_budget_enter(struct gateway *g, const char *name, size_t bytes_in, struct gateway_wait *w);
/* A call that started (0, or resumed with go) ended, its answer bytes_out
 * of JSON: counted, and the next call that waits may start. */
void gateway_budget_leave(struct gateway *g, const char *name, size_t bytes_out);
/* Answers every call that waits (gadgetd stops) and frees the buckets. */
void gateway_budget_free(struct gateway *g);

/* Logs a refusal of kind k now, or counts it for one line per window;
 * fmt NULL only reports a closed window's count. */
void gateway_refusal(struct gateway *g, enum gateway_refusal k, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Sends a response with the headers every response carries (nosniff,
 * no-referrer, no-store, ...) plus content_type; body may be NULL. */
void gateway_send(struct evhttp_request *req, int status, const char *content_type, struct evbuffer *body);
/* {"error": {"code": CODE, "message": MESSAGE}} with status. */
void gateway_send_error(struct evhttp_request *req, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* A fresh random nonce (base64url, NUL-terminated) into buf of 32+. 0 or -errno. */
int gateway_nonce(char *buf, size_t len);

/* GET /api/gadgets */
void gateway_api_list(struct gateway *g, struct evhttp_request *req);
/* POST /api/gadgets/NAME/call/METHOD, or with admin .../admin/METHOD
 * (a gatekeeper's AdminMethods=, for its admin UI). */
void gateway_api_call(struct gateway *g, struct evhttp_request *req, const char *name, const char *method,
                      bool admin);
/* GET /api/gadgets/NAME/activity: its counters, call log and last log lines. */
void gateway_api_activity(struct gateway *g, struct evhttp_request *req, const char *name);
/* GET /api/traces/ID: the spans of trace ID, gathered across the nodes. */
void gateway_api_trace(struct gateway *g, struct evhttp_request *req, const char *id);
/* Detaches the traces still being gathered (gateway_free). */
void gateway_activity_orphan(struct gateway *g);
/* GET /api/approvals */
void gateway_api_approvals(struct gateway *g, struct evhttp_request *req);
/* POST /api/approvals/ID/approve (body {"always": true} or {}), .../deny */
void gateway_api_decide(struct gateway *g, struct evhttp_request *req, const char *id, bool approve);
/* Whether the request's body is declared JSON (Content-Type). */
bool gateway_json_body(struct evhttp_request *req);
/* Sends text (JSON) with a newline and status. */
void gateway_send_json(struct evhttp_request *req, int status, const char *text);
/* Sends o (its reference taken) as 200, or a 500 if o is NULL or cannot be written. */
void gateway_send_object(struct evhttp_request *req, json_t *o);
/* Detaches the calls still waiting (gateway_free). */
void gateway_api_orphan(struct gateway *g);

/* GET / */
void gateway_page_workshop(struct gateway *g, struct evhttp_request *req);
/* GET /gadgets/NAME/ui, or with admin /gadgets/NAME/admin (AdminUI=) */
void gateway_page_ui(struct gateway *g, struct evhttp_request *req, const char *name, bool admin);

/* The page's assets, embedded at build time from supervisor/gateway/. */
extern const char gateway_asset_workshop_html[], gateway_asset_workshop_css[],
        gateway_asset_workshop_js[], gateway_asset_activity_js[], gateway_asset_stub_js[];
