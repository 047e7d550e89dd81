/* gateway_int: private to the gateway's files — gateway.c (listening,
 * token, routing, responses), gateway_api.c (the JSON API) and
 * gateway_page.c (the workshop page and the gadgets' UIs). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <event2/http.h>

#include "gateway.h"

#define GATEWAY_SESSION_BYTES 32
#define GATEWAY_COOKIE "gadgetd_session"

struct gateway_call;

struct gateway {
        struct daemon *d;
        struct evhttp *http;
        char *token;                 /* from TokenFile=, never logged */
        size_t token_len;
        /* The cookie's value: random per gadgetd run, so the long-lived
         * token itself never sits in a browser's cookie jar. */
        char session[2 * GATEWAY_SESSION_BYTES + 1];
        char hosts[2][80];           /* Host header values accepted: "127.0.0.1:PORT", "localhost:PORT" */
        struct gateway_call *calls;  /* API calls waiting for their gadget */
};

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
/* POST /api/gadgets/NAME/call/METHOD */
void gateway_api_call(struct gateway *g, struct evhttp_request *req, const char *name, const char *method);
/* Detaches the calls still waiting (gateway_free). */
void gateway_api_orphan(struct gateway *g);

/* GET / */
void gateway_page_workshop(struct gateway *g, struct evhttp_request *req);
/* GET /gadgets/NAME/ui */
void gateway_page_ui(struct gateway *g, struct evhttp_request *req, const char *name);

/* The page's assets, embedded at build time from supervisor/gateway/. */
extern const char gateway_asset_workshop_html[], gateway_asset_workshop_css[],
        gateway_asset_workshop_js[], gateway_asset_stub_js[];
