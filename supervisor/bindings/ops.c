/* ops: the table of binding operations (ops.h). */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#include "contract.h"

static const struct binding_op ops[] = {
        { BINDING_KV, GADGET_OP_KV_GET, bind_kv_check_key, bind_kv_get },
        { BINDING_KV, GADGET_OP_KV_PUT, bind_kv_check_put, bind_kv_put },
        { BINDING_KV, GADGET_OP_KV_DELETE, bind_kv_check_key, bind_kv_delete },
        { BINDING_KV, GADGET_OP_KV_LIST, bind_kv_check_list, bind_kv_list },
        { BINDING_GADGET, GADGET_OP_GADGET_CALL, bind_gadget_check_call, bind_gadget_call },
        { BINDING_HTTP, GADGET_OP_HTTP_REQUEST, bind_http_check_request, bind_http_request },
        { BINDING_TEXT, GADGET_OP_VALUE_GET, NULL, bind_text_get },
        { BINDING_SECRET, GADGET_OP_VALUE_GET, NULL, bind_secret_get },
};

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
