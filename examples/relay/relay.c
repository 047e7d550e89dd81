/* relay: calls another gadget through a gadget binding.
 * bump() -> counter.increment(); count() -> counter.get(). */
#include <gadget.h>

static gadget_value *forward(struct gadget_call *call, const char *method)
{
        gadget_value *r = NULL;
        int e = gadget_call(gadget_call_gadget(call), "COUNTER", method, NULL, &r);
        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
        return r;
}

static gadget_value *bump(struct gadget_call *call, const gadget_value *args, void *data)
{
        return forward(call, "increment");
}

static gadget_value *count(struct gadget_call *call, const gadget_value *args, void *data)
{
        return forward(call, "get");
}

int main(void)
{
        struct gadget *g = gadget_new("relay");
        gadget_method_typed(g, "bump() -> int", bump, NULL);
        gadget_method_typed(g, "count() -> int", count, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
