/* hello: the smallest gadget. greet({"name": "Ada"}) -> "Hello, Ada!" */
#include <gadget.h>

static gadget_value *greet(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *name = gadget_as_string(gadget_map_get(args, "name"));
        if (!name)
                return gadget_fail(call, GADGET_EINVAL, "greet needs {\"name\": \"...\"}");
        return gadget_stringf("Hello, %s!", name);
}

int main(void)
{
        struct gadget *g = gadget_new("hello");
        gadget_method(g, "greet", greet, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
