/* ops: the table of binding operations (ops.h). */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "types.h"

#define KEY "string | bytes"
/* An alarm's id: 1 to KVDB_ALARM_ID_MAX characters. */
#define ALARM_ID "string(1..128)"

/* The signature of each operation is checked first (as a gadget's method
 * signatures are), then the row's check for what a type cannot say (a key's
 * length in bytes, a URL's form). Each signature's name is the row's. */
static struct binding_op ops[] = {
        { BINDING_KV, GADGET_OP_KV_GET, "get(key: " KEY ") -> any", NULL, bind_kv_check_key, bind_kv_get },
        { BINDING_KV, GADGET_OP_KV_PUT, "put(key: " KEY ", value: any) -> null", NULL, bind_kv_check_put,
          bind_kv_put },
        { BINDING_KV, GADGET_OP_KV_DELETE, "delete(key: " KEY ") -> bool", NULL, bind_kv_check_key, bind_kv_delete },
        { BINDING_KV, GADGET_OP_KV_LIST,
          "list(prefix?: " KEY ", cursor?: " KEY ", limit?: int(1..1000)) -> {keys: list<" KEY ">, cursor: (" KEY
          ")?}", NULL, bind_kv_check_list, bind_kv_list },
        { BINDING_GADGET, GADGET_OP_GADGET_CALL, "call(method: string, args?: any) -> any", NULL,
          bind_gadget_check_call, bind_gadget_call },
        { BINDING_HTTP, GADGET_OP_HTTP_REQUEST,
          "request(url: string, method?: string, headers?: map<string>, body?: string | bytes) -> {status: int, "
          "headers: map<string>, body: bytes}", NULL, bind_http_check_request, bind_http_request },
        { BINDING_TEXT, GADGET_OP_VALUE_GET, "get() -> string", NULL, NULL, bind_text_get },
        { BINDING_SECRET, GADGET_OP_VALUE_GET, "get() -> string", NULL, NULL, bind_secret_get },
        { BINDING_ALARM, GADGET_OP_ALARM_SET,
          "set(at?: int(0..253402300799999), delay?: int(0..315360000000), payload?: any, id?: " ALARM_ID
          ") -> string", NULL, bind_alarm_check_set, bind_alarm_set },
        { BINDING_ALARM, GADGET_OP_ALARM_LIST,
          "list(cursor?: " ALARM_ID ", limit?: int(1..1000)) -> {alarms: list<{id: string, at: int, payload: any}>, "
          "cursor: string?}", NULL, bind_alarm_check_list, bind_alarm_list },
        { BINDING_ALARM, GADGET_OP_ALARM_CANCEL, "cancel(id: " ALARM_ID ") -> bool", NULL, bind_alarm_check_id,
          bind_alarm_cancel },
};

int binding_ops_open(char *err, size_t len)
{
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
                if (ops[i].sig)
                        continue;
                char why[160];
                int e = types_sig_parse(ops[i].signature, &ops[i].sig, why, sizeof why);
                if (e < 0 || strcmp(types_sig_name(ops[i].sig), ops[i].name) != 0) {
                        snprintf(err, len, "binding operation %s: %s", ops[i].signature, e < 0 ? why : "misnamed");
                        return e < 0 ? e : -EINVAL;
                }
        }
        return 0;
}

size_t binding_op_signatures(enum binding_type type, const char **out, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; i < sizeof ops / sizeof *ops && n < max; i++)
                if (ops[i].type == type)
                        out[n++] = ops[i].signature;
        return n;
}

const struct binding_op *binding_op_find(enum binding_type type, const char *name)
{
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
                if (ops[i].type == type && strcmp(ops[i].name, name) == 0)
                        return &ops[i];
        return NULL;
}

void binding_op_names(enum binding_type type, char *buf, size_t len)
{
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < sizeof ops / sizeof *ops && o < len; i++)
                if (ops[i].type == type)
                        o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", ops[i].name);
}
