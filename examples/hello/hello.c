/* hello: the smallest gadget. greet({"name": "Ada"}) -> "Hello, Ada!" */
#include <gadget.h>

static gadget_value *greet(struct gadget_call *call, const gadget_value *args, void *data)
{
        /* The signature below guarantees a name of at most 100 characters. */
        return gadget_stringf("Hello, %s!", gadget_as_string(gadget_map_get(args, "name")));
}

int main(void)
{
        struct gadget *g = gadget_new(NULL); /* the policy's Name=: one program, any deployment */
        gadget_method_typed(g, "greet(name: string(..100)) -> string", greet, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
