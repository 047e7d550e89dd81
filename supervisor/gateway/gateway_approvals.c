/* gateway_approvals: the calls waiting for a person's approval, for the
 * workshop page — the list, and a decision on one (recorded in the audit
 * as made by the workshop, with the address it came from). */
#include "gateway_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/buffer.h>

#include "contract.h"
#include "core/core.h"

#define SHOWN 256  /* waiting calls listed at most */

void gateway_api_approvals(struct gateway *g, struct evhttp_request *req)
{
        struct approval_info *in = calloc(SHOWN, sizeof *in);
        json_t *list = json_array();
        size_t total = in ? approvals_list(core_approvals(g->core), in, SHOWN) : 0;
        for (size_t i = 0; in && list && i < total && i < SHOWN; i++)
                json_array_append_new(list, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "id",
                                                      (json_int_t)in[i].id, "caller", in[i].caller, "via",
                                                      in[i].via, "target", in[i].target, "method", in[i].method,
                                                      "args", in[i].args, "age_ms", (json_int_t)in[i].age_ms,
                                                      "timeout_ms", (json_int_t)in[i].timeout_ms));
        json_t *o = in && list ? json_pack("{s:O, s:I}", "approvals", list, "total", (json_int_t)total) : NULL;
        gateway_send_object(req, o);
        json_decref(list);
        free(in);
}

/* The body: {} or {"always": true|false}; false if it is anything else. */
static bool read_always(struct evhttp_request *req, bool *always)
{
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        *always = false;
        if (len > 256)
                return false;
        const char *body = (const char *)evbuffer_pullup(in, -1);
        json_t *o = body ? json_loadb(body, len, 0, NULL) : NULL;
        bool ok = json_is_object(o);
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                if (strcmp(key, "always") != 0 || !json_is_boolean(v))
                        ok = false;
                else
                        *always = json_is_true(v);
        }
        json_decref(o);
        return ok;
}

/* Why the body must be JSON even when it says nothing: a page of another
 * origin cannot send application/json without a preflight the gateway
 * never grants, a second guard beside the Origin check. */
void gateway_api_decide(struct gateway *g, struct evhttp_request *req, const char *id_text, bool approve)
{
        char *end, who[120], msg[300];
        bool always;
        errno = 0;
        unsigned long long id = strtoull(id_text, &end, 10);
        if (!*id_text || *end || errno || id_text[0] == '-' || id == 0) {
                gateway_send_error(req, 404, "not_found", "not an approval ID");
                return;
        }
        if (!gateway_json_body(req) || !read_always(req, &always)) {
                gateway_send_error(req, 400, "bad_json", "the body must be JSON, {} or {\"always\": true}, sent with "
                                   "\"Content-Type: application/json\"");
                return;
        }
        if (always && !approve) {
                gateway_send_error(req, 400, "bad_json", "\"always\" goes with approve only");
                return;
        }
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        char *addr = NULL;
        ev_uint16_t port = 0;
        if (evcon)
                evhttp_connection_get_peer(evcon, &addr, &port);
        snprintf(who, sizeof who, "the workshop (gateway, from %.64s)", addr ? addr : "?");
        int code = approvals_decide(core_approvals(g->core), id, approve, always, who, false, msg, sizeof msg);
        if (code) {
                gateway_send_error(req, 404, "not_found", "%s", msg);
                return;
        }
        char text[400];
        snprintf(text, sizeof text, "{\"id\":%llu,\"decision\":\"%s\"}", id, approve ? "approved" : "denied");
        gateway_send_json(req, 200, text);
}
