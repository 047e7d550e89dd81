/* fetch: HTTP through an allow-listed http binding.
 * get({"url": U}) -> {"status": N, "body": "..."} */
#include <gadget.h>
#include <stdlib.h>
#include <string.h>

static gadget_value *get(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *url = gadget_as_string(gadget_map_get(args, "url"));
        gadget_value *resp = NULL;
        int e = gadget_http(gadget_call_gadget(call), "WEB", "GET", url, NULL, NULL, 0, &resp);
        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
        int64_t status = 0;
        size_t len = 0;
        gadget_as_int(gadget_map_get(resp, "status"), &status);
        const char *body = gadget_as_bytes(gadget_map_get(resp, "body"), &len);
        char *text = malloc(len + 1);
        if (text) {
                memcpy(text, body ? body : "", len);
                text[len] = '\0';
        }
        gadget_value *out = gadget_map();
        gadget_map_set(out, "status", gadget_int(status));
        gadget_map_set(out, "body", gadget_string(text ? text : ""));
        free(text);
        gadget_value_free(resp);
        return out;
}

int main(void)
{
        struct gadget *g = gadget_new("fetch");
        gadget_method_typed(g, "get(url: string(1..2048)) -> {status: int, body: string}", get, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
