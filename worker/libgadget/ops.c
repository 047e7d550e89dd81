/* ops: libgadget's one function per binding operation. */
#include "gadget.h"

#include <stdlib.h>
#include <string.h>

/* A map of the given string fields (NULL values skipped) plus extra. */
static gadget_value *args_map(const char *k1, const char *v1, const char *k2, const char *v2)
{
        gadget_value *m = gadget_map();
        if (!m)
                return NULL;
        if ((v1 && gadget_map_set(m, k1, gadget_string(v1)) < 0) ||
            (v2 && gadget_map_set(m, k2, gadget_string(v2)) < 0)) {
                gadget_value_free(m);
                return NULL;
        }
        return m;
}

int gadget_kv_get(struct gadget *g, const char *binding, const char *key, gadget_value **value)
{
        gadget_value *a = args_map("key", key, NULL, NULL);
        return a ? gadget_binding_call(g, binding, GADGET_OP_KV_GET, a, value) : -GADGET_EINTERNAL;
}

int gadget_kv_put(struct gadget *g, const char *binding, const char *key, gadget_value *value)
{
        gadget_value *a = args_map("key", key, NULL, NULL);
        if (!a || gadget_map_set(a, "value", value) < 0) {
                gadget_value_free(a);
                return -GADGET_EINTERNAL;
        }
        return gadget_binding_call(g, binding, GADGET_OP_KV_PUT, a, NULL);
}

/* Calls op with a (taken over, NULL: out of memory) for a bool result. */
static int bool_call(struct gadget *g, const char *binding, const char *op, gadget_value *a, bool *result)
{
        gadget_value *r = NULL;
        int e = a ? gadget_binding_call(g, binding, op, a, &r) : -GADGET_EINTERNAL;
        if (e == 0 && result && !gadget_as_bool(r, result))
                *result = false;
        gadget_value_free(r);
        return e;
}

/* a with "limit" set if limit > 0; NULL (a freed) if out of memory. */
static gadget_value *with_limit(gadget_value *a, int limit)
{
        if (a && limit > 0 && gadget_map_set(a, "limit", gadget_int(limit)) < 0) {
                gadget_value_free(a);
                return NULL;
        }
        return a;
}

int gadget_kv_delete(struct gadget *g, const char *binding, const char *key, bool *existed)
{
        return bool_call(g, binding, GADGET_OP_KV_DELETE, args_map("key", key, NULL, NULL), existed);
}

int gadget_kv_list(struct gadget *g, const char *binding, const char *prefix, int limit, const char *cursor,
                   gadget_value **result)
{
        gadget_value *a = with_limit(args_map("prefix", prefix, "cursor", cursor), limit);
        return a ? gadget_binding_call(g, binding, GADGET_OP_KV_LIST, a, result) : -GADGET_EINTERNAL;
}

/* a (taken over) with field set to v (taken over) unless v is NULL; NULL
 * (both freed) if out of memory. */
static gadget_value *with(gadget_value *a, const char *field, gadget_value *v)
{
        if (!v)
                return a;
        if (!a) {
                gadget_value_free(v);
                return NULL;
        }
        if (gadget_map_set(a, field, v) < 0) { /* it freed v */
                gadget_value_free(a);
                return NULL;
        }
        return a;
}

int gadget_kv_cas(struct gadget *g, const char *binding, const char *key, gadget_value *expect,
                  gadget_value *value, bool *written, gadget_value **current)
{
        gadget_value *r = NULL;
        gadget_value *a = with(with(args_map("key", key, NULL, NULL), "expect", expect), "value", value);
        int e = a ? gadget_binding_call(g, binding, GADGET_OP_KV_CAS, a, &r) : -GADGET_EINTERNAL;
        bool w = false;
        if (e == 0 && !gadget_as_bool(gadget_map_get(r, "written"), &w))
                e = -GADGET_EPROTO;
        const gadget_value *cur = e == 0 && !w ? gadget_map_get(r, "current") : NULL;
        if (e == 0 && current && !(*current = cur ? gadget_copy(cur) : NULL) && cur)
                e = -GADGET_EINTERNAL;
        if (e == 0 && written)
                *written = w;
        gadget_value_free(r);
        return e;
}

int gadget_kv_batch_add(gadget_value *ops, const char *op, const char *key, gadget_value *expect,
                        gadget_value *value)
{
        gadget_value *a = with(with(args_map("op", op, "key", key), "expect", expect), "value", value);
        return a ? gadget_list_append(ops, a) : -GADGET_EINTERNAL; /* a taken whatever happens */
}

int gadget_kv_batch(struct gadget *g, const char *binding, gadget_value *ops, gadget_value **result)
{
        gadget_value *a = with(gadget_map(), "ops", ops);
        return a ? gadget_binding_call(g, binding, GADGET_OP_KV_BATCH, a, result) : -GADGET_EINTERNAL;
}

int gadget_alarm_set(struct gadget *g, const char *binding, int64_t at_ms, int64_t delay_ms, gadget_value *payload,
                     const char *id, char **id_out)
{
        gadget_value *r = NULL;
        gadget_value *a = args_map("id", id, NULL, NULL);
        /* payload is owned whatever happens: gadget_map_set takes it. */
        if (!a || gadget_map_set(a, at_ms >= 0 ? "at" : "delay", gadget_int(at_ms >= 0 ? at_ms : delay_ms)) < 0) {
                gadget_value_free(a);
                gadget_value_free(payload);
                return -GADGET_EINTERNAL;
        }
        if (payload && gadget_map_set(a, "payload", payload) < 0) {
                gadget_value_free(a);
                return -GADGET_EINTERNAL;
        }
        int e = gadget_binding_call(g, binding, GADGET_OP_ALARM_SET, a, &r);
        const char *s = gadget_as_string(r);
        if (e == 0 && id_out && !(*id_out = strdup(s ? s : "")))
                e = -GADGET_EINTERNAL;
        gadget_value_free(r);
        return e;
}

int gadget_alarm_list(struct gadget *g, const char *binding, int limit, const char *cursor, gadget_value **result)
{
        gadget_value *a = with_limit(args_map("cursor", cursor, NULL, NULL), limit);
        return a ? gadget_binding_call(g, binding, GADGET_OP_ALARM_LIST, a, result) : -GADGET_EINTERNAL;
}

int gadget_alarm_cancel(struct gadget *g, const char *binding, const char *id, bool *existed)
{
        return bool_call(g, binding, GADGET_OP_ALARM_CANCEL, args_map("id", id, NULL, NULL), existed);
}

int gadget_call(struct gadget *g, const char *binding, const char *method, gadget_value *args,
                gadget_value **result)
{
        gadget_value *a = args_map("method", method, NULL, NULL);
        if (!a || gadget_map_set(a, "args", args ? args : gadget_null()) < 0) {
                gadget_value_free(a);
                return -GADGET_EINTERNAL;
        }
        return gadget_binding_call(g, binding, GADGET_OP_GADGET_CALL, a, result);
}

int gadget_http(struct gadget *g, const char *binding, const char *method, const char *url,
                gadget_value *headers, const void *body, size_t body_len, gadget_value **response)
{
        gadget_value *a = args_map("url", url, "method", method ? method : "GET");
        if (!a || (headers && gadget_map_set(a, "headers", headers) < 0) ||
            (body && gadget_map_set(a, "body", gadget_bytes(body, body_len)) < 0)) {
                gadget_value_free(a);
                return -GADGET_EINTERNAL;
        }
        return gadget_binding_call(g, binding, GADGET_OP_HTTP_REQUEST, a, response);
}

int gadget_text(struct gadget *g, const char *binding, char **value)
{
        gadget_value *r = NULL;
        int e = gadget_binding_call(g, binding, GADGET_OP_VALUE_GET, NULL, &r);
        const char *s = e == 0 ? gadget_as_string(r) : NULL;
        if (e == 0 && !(s && (*value = strdup(s))))
                e = -GADGET_EINTERNAL;
        gadget_value_free(r);
        return e;
}
