/* notes: titled notes in a kv binding.
 * add({"title": T, "text": X}), get({"title": T}) -> X,
 * list({"prefix": P}) -> [titles], delete({"title": T}) -> existed. */
#include <gadget.h>
#include <stdlib.h>
#include <string.h>

static gadget_value *fail_from(struct gadget_call *call, int e)
{
        return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
}

static const char *title_of(const gadget_value *args)
{
        return gadget_as_string(gadget_map_get(args, "title"));
}

static gadget_value *add(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *title = title_of(args), *text = gadget_as_string(gadget_map_get(args, "text"));
        int e = gadget_kv_put(gadget_call_gadget(call), "NOTES", title, gadget_string(text));
        return e < 0 ? fail_from(call, e) : gadget_null();
}

static gadget_value *get(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *v = NULL;
        int e = gadget_kv_get(gadget_call_gadget(call), "NOTES", title_of(args), &v);
        return e < 0 ? fail_from(call, e) : v;
}

static gadget_value *list(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *prefix = gadget_as_string(gadget_map_get(args, "prefix"));
        gadget_value *all = gadget_list(), *page = NULL;
        char *cursor = NULL;
        /* Page through every key with the cursor. */
        for (;;) {
                int e = gadget_kv_list(gadget_call_gadget(call), "NOTES", prefix, 100, cursor, &page);
                free(cursor);
                cursor = NULL;
                if (e < 0) {
                        gadget_value_free(all);
                        return fail_from(call, e);
                }
                const gadget_value *keys = gadget_map_get(page, "keys");
                for (size_t i = 0; i < gadget_len(keys); i++)
                        gadget_list_append(all, gadget_string(gadget_as_string(gadget_list_at(keys, i))));
                const char *next = gadget_as_string(gadget_map_get(page, "cursor"));
                if (next)
                        cursor = strdup(next);
                gadget_value_free(page);
                if (!cursor)
                        return all;
        }
}

static gadget_value *del(struct gadget_call *call, const gadget_value *args, void *data)
{
        bool existed = false;
        int e = gadget_kv_delete(gadget_call_gadget(call), "NOTES", title_of(args), &existed);
        return e < 0 ? fail_from(call, e) : gadget_bool(existed);
}

int main(void)
{
        struct gadget *g = gadget_new("notes");
        /* The signatures are the argument checks: a method runs only with
         * what its signature allows. */
        gadget_method_typed(g, "add(title: string(1..200), text: string) -> null", add, NULL);
        gadget_method_typed(g, "get(title: string(1..200)) -> string", get, NULL);
        gadget_method_typed(g, "list(prefix?: string) -> list<string>", list, NULL);
        gadget_method_typed(g, "delete(title: string(1..200)) -> bool", del, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
