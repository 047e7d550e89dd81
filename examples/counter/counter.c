/* counter: a durable count in a kv binding.
 * increment() -> the new count; get() -> the count. */
#include <gadget.h>

static int64_t current(struct gadget_call *call, int *err)
{
        gadget_value *v = NULL;
        int64_t n = 0;
        int e = gadget_kv_get(gadget_call_gadget(call), "COUNT", "count", &v);
        *err = e == -GADGET_ENOTFOUND ? 0 : e;
        if (e == 0)
                gadget_as_int(v, &n);
        gadget_value_free(v);
        return n;
}

static gadget_value *increment(struct gadget_call *call, const gadget_value *args, void *data)
{
        int err;
        int64_t n = current(call, &err) + 1;
        if (err < 0 || (err = gadget_kv_put(gadget_call_gadget(call), "COUNT", "count", gadget_int(n))) < 0)
                return gadget_fail(call, -err, "%s", gadget_last_error(gadget_call_gadget(call)));
        return gadget_int(n);
}

static gadget_value *get(struct gadget_call *call, const gadget_value *args, void *data)
{
        int err;
        int64_t n = current(call, &err);
        if (err < 0)
                return gadget_fail(call, -err, "%s", gadget_last_error(gadget_call_gadget(call)));
        return gadget_int(n);
}

int main(void)
{
        struct gadget *g = gadget_new("counter");
        gadget_method_typed(g, "increment() -> int", increment, NULL);
        gadget_method_typed(g, "get() -> int", get, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
