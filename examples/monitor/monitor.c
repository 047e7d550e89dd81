/* monitor: a tail gadget. Its tail binding (EVENTS) gets the calls of
 * the gadgets it observes in batches; it keeps, per gadget and method,
 * the calls and the errors in its kv store (STATS).
 * events(binding, dropped, events) -- a batch, from gadgetd;
 * rates() -> {dropped, rows: [{gadget, method, calls, errors}]}. */
#include <gadget.h>
#include <stdio.h>
#include <string.h>

#define ROWS_MAX 256  /* a batch holds at most 256 events */

struct row {
        char key[160];  /* "m/GADGET/METHOD" */
        int64_t calls, errors;
};

/* Adds r's counts to those stored under its key. */
static int add(struct gadget *g, const struct row *r)
{
        gadget_value *old = NULL;
        int64_t calls = 0, errors = 0;
        int e = gadget_kv_get(g, "STATS", r->key, &old);
        if (e < 0 && e != -GADGET_ENOTFOUND)
                return e;
        gadget_as_int(gadget_map_get(old, "calls"), &calls);
        gadget_as_int(gadget_map_get(old, "errors"), &errors);
        gadget_value_free(old);
        gadget_value *v = gadget_map();
        gadget_map_set(v, "calls", gadget_int(calls + r->calls));
        gadget_map_set(v, "errors", gadget_int(errors + r->errors));
        return gadget_kv_put(g, "STATS", r->key, v);
}

static int add_dropped(struct gadget *g, int64_t n)
{
        gadget_value *old = NULL;
        int64_t total = 0;
        int e = gadget_kv_get(g, "STATS", "dropped", &old);
        if (e < 0 && e != -GADGET_ENOTFOUND)
                return e;
        gadget_as_int(old, &total);
        gadget_value_free(old);
        return gadget_kv_put(g, "STATS", "dropped", gadget_int(total + n));
}

/* The batch's calls summed per gadget and method, then one read and one
 * write of each sum: the store is touched once per pair, not per call. */
static gadget_value *events(struct gadget_call *call, const gadget_value *args, void *data)
{
        static struct row rows[ROWS_MAX];
        struct gadget *g = gadget_call_gadget(call);
        const gadget_value *list = gadget_map_get(args, "events"), *ev;
        size_t n = 0;
        for (size_t i = 0; (ev = gadget_list_at(list, i)); i++) {
                const char *kind = gadget_as_string(gadget_map_get(ev, "kind"));
                const char *gadget = gadget_as_string(gadget_map_get(ev, "gadget"));
                const char *method = gadget_as_string(gadget_map_get(ev, "method"));
                const char *outcome = gadget_as_string(gadget_map_get(ev, "outcome"));
                if (!kind || strcmp(kind, "call") != 0 || !gadget || !method || !outcome)
                        continue;
                char key[sizeof rows[0].key];
                snprintf(key, sizeof key, "m/%s/%s", gadget, method);
                size_t k = 0;
                while (k < n && strcmp(rows[k].key, key) != 0)
                        k++;
                if (k == n) {
                        if (n == ROWS_MAX)
                                continue;
                        rows[n] = (struct row){ .calls = 0 };
                        memcpy(rows[n++].key, key, sizeof key);
                }
                rows[k].calls++;
                rows[k].errors += strcmp(outcome, "ok") != 0;
        }
        int64_t dropped = 0;
        gadget_as_int(gadget_map_get(args, "dropped"), &dropped);
        int e = dropped > 0 ? add_dropped(g, dropped) : 0;
        for (size_t k = 0; k < n && e >= 0; k++)
                e = add(g, &rows[k]);
        if (e < 0)
                return gadget_fail(call, -e, "%s", gadget_last_error(g));
        return gadget_null();
}

/* One row of rates() from key "m/GADGET/METHOD" and its value. */
static gadget_value *row_of(const char *key, const gadget_value *v)
{
        const char *gadget = key + 2, *slash = strchr(gadget, '/');
        int64_t calls = 0, errors = 0;
        if (!slash)
                return NULL;
        gadget_as_int(gadget_map_get(v, "calls"), &calls);
        gadget_as_int(gadget_map_get(v, "errors"), &errors);
        gadget_value *r = gadget_map();
        char name[80];
        snprintf(name, sizeof name, "%.*s", (int)(slash - gadget), gadget);
        gadget_map_set(r, "gadget", gadget_string(name));
        gadget_map_set(r, "method", gadget_string(slash + 1));
        gadget_map_set(r, "calls", gadget_int(calls));
        gadget_map_set(r, "errors", gadget_int(errors));
        return r;
}

/* Every row (at most 10 pages of 100), and the events dropped so far. */
static gadget_value *rates(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        gadget_value *rows = gadget_list(), *page = NULL, *v = NULL;
        char cursor[600] = "";
        int e = 0;
        for (int p = 0; p < 10 && e >= 0; p++) {
                e = gadget_kv_list(g, "STATS", "m/", 100, cursor[0] ? cursor : NULL, &page);
                const gadget_value *keys = e < 0 ? NULL : gadget_map_get(page, "keys");
                for (size_t i = 0; e >= 0 && i < gadget_len(keys); i++) {
                        const char *key = gadget_as_string(gadget_list_at(keys, i));
                        if ((e = gadget_kv_get(g, "STATS", key, &v)) == 0) {
                                gadget_value *r = row_of(key, v);
                                if (r)
                                        gadget_list_append(rows, r);
                        }
                        gadget_value_free(v);
                        v = NULL;
                }
                const char *next = e < 0 ? NULL : gadget_as_string(gadget_map_get(page, "cursor"));
                snprintf(cursor, sizeof cursor, "%s", next ? next : "");
                gadget_value_free(page);
                page = NULL;
                if (!cursor[0])
                        break;
        }
        int64_t dropped = 0;
        if (e >= 0 && (e = gadget_kv_get(g, "STATS", "dropped", &v)) == -GADGET_ENOTFOUND)
                e = 0;
        gadget_as_int(v, &dropped);
        gadget_value_free(v);
        if (e < 0) {
                gadget_value_free(rows);
                return gadget_fail(call, -e, "%s", gadget_last_error(g));
        }
        gadget_value *res = gadget_map();
        gadget_map_set(res, "dropped", gadget_int(dropped));
        gadget_map_set(res, "rows", rows);
        return res;
}

int main(void)
{
        struct gadget *g = gadget_new("monitor");
        gadget_method_typed(g, "events(binding: string, dropped: int, events: list<any>) -> null", events, NULL);
        gadget_method_typed(g, "rates() -> {dropped: int, rows: list<{gadget: string, method: string, calls: int, "
                               "errors: int}>}", rates, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
