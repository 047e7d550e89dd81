/* tickets: the gatekeeper of the tickets example, in front of tickets-api.
 * It reaches the API through its http binding API, to which gadgetd adds
 * the bearer token (the policy's Credential=): this gadget never holds the
 * token, so it can neither log nor return it. Other gadgets bind to it for
 *   create({"title": T, "body": B}) -> {"id": N}   (with its label added)
 *   list() -> [{"id", "title", "label"}]
 * and only its admin UI calls (AdminMethods=)
 *   overview() -> {"label", "created", "recent": [...]}
 *   set_label({"label": L})
 * Its setting and what it created recently live in the kv binding STATE.
 * Usage (Arguments=): tickets URL, URL the API's tickets resource. */
#include <gadget.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICKET_T "{id: int, title: string, label: string}"
#define RECENT_MAX 10
#define LABEL_DEFAULT "from-gadgets"

/* Fails the call with the last binding error's code and message. */
static gadget_value *fail_from(struct gadget_call *call, int e)
{
        return gadget_fail(call, -e, "%s", gadget_last_error(gadget_call_gadget(call)));
}

/* The value under key in STATE, or NULL if there is none. 0 or -GADGET_E*. */
static int state_get(struct gadget *g, const char *key, gadget_value **out)
{
        int e = gadget_kv_get(g, "STATE", key, out);

        if (e == -GADGET_ENOTFOUND) {
                *out = NULL;
                return 0;
        }
        return e;
}

/* The label this gatekeeper puts on the tickets it creates (malloc'd). */
static int label_get(struct gadget *g, char **out)
{
        gadget_value *v = NULL;
        int e = state_get(g, "label", &v);
        const char *s = gadget_as_string(v);

        if (e < 0)
                return e;
        *out = strdup(s ? s : LABEL_DEFAULT);
        gadget_value_free(v);
        return *out ? 0 : -GADGET_EINTERNAL;
}

/* One request to the API; *out gets the answer's JSON when its status is
 * want. Any other answer fails the call, with the API's own message. */
static gadget_value *api_call(struct gadget_call *call, const char *url, const char *method, const char *body,
                              int want, json_t **out)
{
        struct gadget *g = gadget_call_gadget(call);
        gadget_value *headers = NULL, *resp = NULL, *failed = NULL;
        const char *data, *msg;
        int64_t status = 0;
        size_t len = 0;
        json_t *j;
        int e;

        if (body) {
                headers = gadget_map();
                gadget_map_set(headers, "Content-Type", gadget_string("application/json"));
        }
        e = gadget_http(g, "API", method, url, headers, body, body ? strlen(body) : 0, &resp);
        if (e < 0)
                return fail_from(call, e);
        gadget_as_int(gadget_map_get(resp, "status"), &status);
        data = gadget_as_bytes(gadget_map_get(resp, "body"), &len);
        j = data ? json_loadb(data, len, 0, NULL) : NULL;
        if (status != want) {
                msg = json_string_value(json_object_get(j, "error"));
                failed = gadget_fail(call, GADGET_EFAILED, "the tickets API answered %d: %.200s", (int)status,
                                     msg ? msg : "(no message)");
        } else if (!j) {
                failed = gadget_fail(call, GADGET_EFAILED, "the tickets API answered %d without JSON", (int)status);
        } else {
                *out = json_incref(j);
        }
        json_decref(j);
        gadget_value_free(resp);
        return failed;
}

/* {id, title, label} of a ticket of the API, or NULL if it is not one. */
static gadget_value *ticket_value(json_t *t)
{
        json_t *id = json_object_get(t, "id");
        const char *title = json_string_value(json_object_get(t, "title"));
        const char *label = json_string_value(json_object_get(t, "label"));
        gadget_value *v;

        if (!json_is_integer(id) || !title || !label)
                return NULL;
        v = gadget_map();
        gadget_map_set(v, "id", gadget_int(json_integer_value(id)));
        gadget_map_set(v, "title", gadget_string(title));
        gadget_map_set(v, "label", gadget_string(label));
        return v;
}

/* Counts a created ticket and puts it first among the recent ones. */
static int remember(struct gadget *g, gadget_value *ticket)
{
        gadget_value *created = NULL, *recent = NULL, *next = gadget_list();
        int64_t n = 0;
        int e = state_get(g, "created", &created);

        if (e == 0)
                e = state_get(g, "recent", &recent);
        gadget_as_int(created, &n);
        gadget_list_append(next, ticket);
        for (size_t i = 0; i < gadget_len(recent) && i + 1 < RECENT_MAX; i++)
                gadget_list_append(next, gadget_copy(gadget_list_at(recent, i)));
        if (e == 0)
                e = gadget_kv_put(g, "STATE", "created", gadget_int(n + 1));
        if (e == 0)
                e = gadget_kv_put(g, "STATE", "recent", next);
        else
                gadget_value_free(next);
        gadget_value_free(created);
        gadget_value_free(recent);
        return e;
}

/* create: posts the ticket with this gatekeeper's label; answers its id. */
static gadget_value *create(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        const char *title = gadget_as_string(gadget_map_get(args, "title"));
        const char *body = gadget_as_string(gadget_map_get(args, "body"));
        gadget_value *failed, *ticket, *out;
        json_t *req, *made = NULL;
        char *label = NULL, *text;
        int e = label_get(g, &label);

        if (e < 0)
                return fail_from(call, e);
        req = json_pack("{s:s,s:s,s:s}", "title", title, "body", body ? body : "", "label", label);
        text = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        free(label);
        if (!text)
                return gadget_fail(call, GADGET_EINTERNAL, "out of memory");
        failed = api_call(call, data, "POST", text, 201, &made);
        free(text);
        if (failed || !made)
                return failed;
        ticket = ticket_value(made);
        json_decref(made);
        if (!ticket)
                return gadget_fail(call, GADGET_EFAILED, "the tickets API answered 201 without a ticket");
        out = gadget_map();
        gadget_map_set(out, "id", gadget_copy(gadget_map_get(ticket, "id")));
        /* The ticket exists now: a failure to remember it is logged, and
         * the caller still gets its id (it must not file it again). */
        e = remember(g, ticket);
        if (e < 0)
                gadget_log(g, 4, "ticket created but not remembered: %s", gadget_last_error(g));
        return out;
}

/* list: the API's tickets, without their bodies. */
static gadget_value *list(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *failed, *all;
        json_t *got = NULL, *t;
        size_t i;

        failed = api_call(call, data, "GET", NULL, 200, &got);
        if (failed || !got)
                return failed;
        all = json_is_array(got) ? gadget_list() : NULL;
        json_array_foreach(got, i, t) {
                gadget_value *v = ticket_value(t);
                if (!v) {
                        gadget_value_free(all);
                        all = NULL;
                        break;
                }
                gadget_list_append(all, v);
        }
        json_decref(got);
        return all ? all : gadget_fail(call, GADGET_EFAILED, "the tickets API answered something else than tickets");
}

/* Admin: the setting, how many tickets this gatekeeper created and the
 * latest of them. */
static gadget_value *overview(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = gadget_call_gadget(call);
        gadget_value *created = NULL, *recent = NULL, *out;
        char *label = NULL;
        int64_t n = 0;
        int e = label_get(g, &label);

        if (e == 0)
                e = state_get(g, "created", &created);
        if (e == 0)
                e = state_get(g, "recent", &recent);
        if (e < 0) {
                free(label);
                gadget_value_free(created);
                return fail_from(call, e);
        }
        gadget_as_int(created, &n);
        gadget_value_free(created);
        out = gadget_map();
        gadget_map_set(out, "label", gadget_string(label));
        gadget_map_set(out, "created", gadget_int(n));
        gadget_map_set(out, "recent", recent ? recent : gadget_list());
        free(label);
        return out;
}

/* Admin: the label put on every ticket from now on. */
static gadget_value *set_label(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *label = gadget_as_string(gadget_map_get(args, "label"));
        int e = gadget_kv_put(gadget_call_gadget(call), "STATE", "label", gadget_string(label));

        return e < 0 ? fail_from(call, e) : gadget_null();
}

int main(int argc, char **argv)
{
        struct gadget *g;
        int e;

        if (argc != 2 || strncmp(argv[1], "http", 4) != 0) {
                fprintf(stderr, "usage: tickets URL (the tickets API's /api/tickets, from Arguments=)\n");
                return 2;
        }
        g = gadget_new("tickets");
        gadget_method_typed(g, "create(title: string(1..120), body?: string(..2000)) -> {id: int}", create, argv[1]);
        gadget_method_typed(g, "list() -> list<" TICKET_T ">(..1000)", list, argv[1]);
        gadget_method_typed(g, "overview() -> {label: string, created: int, recent: list<" TICKET_T ">}",
                            overview, NULL);
        gadget_method_typed(g, "set_label(label: string(..32)) -> null", set_label, NULL);
        e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
