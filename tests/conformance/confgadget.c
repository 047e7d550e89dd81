/* confgadget: the conformance suite's gadget in C (libgadget). Its twin,
 * confgadget.py, is the same gadget on the Python SDK: the same methods,
 * signatures and answers, so conformance_test.py drives both through the
 * same cases. Its name is the policy's (gadget_new(NULL)). */
#include <gadget.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define G(call) gadget_call_gadget(call)

/* Answers the call with the failed binding call's code and message. */
static gadget_value *failed(struct gadget_call *call, int e)
{
        return gadget_fail(call, -e, "%s", gadget_last_error(G(call)));
}

static const char *str_arg(const gadget_value *args, const char *key)
{
        const char *s = gadget_as_string(gadget_map_get(args, key));
        return s ? s : "";
}

static gadget_value *echo(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_copy(gadget_map_get(args, "v"));
}

static gadget_value *nop(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_null();
}

static gadget_value *greet(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t times = 1;
        gadget_as_int(gadget_map_get(args, "times"), &times);
        size_t n = strlen(str_arg(args, "name"));
        char *s = calloc((size_t)times, n + 8);
        if (!s)
                return gadget_fail(call, GADGET_EFAILED, "out of memory");
        for (int64_t i = 0; i < times; i++) {
                if (i)
                        strcat(s, " ");
                strcat(s, "hello, ");
                strcat(s, str_arg(args, "name"));
        }
        gadget_value *v = gadget_string(s);
        free(s);
        return v;
}

static gadget_value *fail(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t code = 0;
        gadget_as_int(gadget_map_get(args, "code"), &code);
        return gadget_fail(call, (int)code, "%s", str_arg(args, "message"));
}

/* A method that fails without saying how: FAILED. */
static gadget_value *crash(struct gadget_call *call, const gadget_value *args, void *data)
{
        return NULL;
}

/* {"written": w, "current"?: v} of a cas. */
static gadget_value *cas(struct gadget *g, const char *key, gadget_value *expect, gadget_value *value, int *err)
{
        bool written = false;
        gadget_value *cur = NULL;
        *err = gadget_kv_cas(g, "DATA", key, expect, value, &written, &cur);
        gadget_value *r = gadget_map();
        gadget_map_set(r, "written", gadget_bool(written));
        if (cur)
                gadget_map_set(r, "current", cur);
        return r;
}

static gadget_value *kv(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = G(call);
        gadget_value *r = gadget_map(), *v = NULL, *page = NULL;
        bool existed = false;
        int e = gadget_kv_get(g, "DATA", "a/1", &v);
        gadget_map_set(r, "missing", gadget_int(-e));
        gadget_value *rich = gadget_map(), *list = gadget_list();
        gadget_list_append(list, gadget_int(1));
        gadget_list_append(list, gadget_string("two"));
        gadget_list_append(list, gadget_null());
        gadget_list_append(list, gadget_bool(true));
        gadget_list_append(list, gadget_double(1.5));
        gadget_list_append(list, gadget_bytes("\0\377", 2));
        gadget_map_set(rich, "x", list);
        if ((e = gadget_kv_put(g, "DATA", "a/1", gadget_int(1))) < 0 ||
            (e = gadget_kv_put(g, "DATA", "a/2", rich)) < 0 ||
            (e = gadget_kv_get(g, "DATA", "a/2", &v)) < 0)
                goto fail;
        gadget_map_set(r, "got", v);
        if ((e = gadget_kv_list(g, "DATA", "a/", 1, NULL, &page)) < 0)
                goto fail;
        gadget_map_set(r, "list", page);
        gadget_map_set(r, "cas_miss", cas(g, "a/1", gadget_int(2), gadget_int(3), &e));
        if (e < 0)
                goto fail;
        gadget_map_set(r, "cas_hit", cas(g, "a/1", gadget_int(1), gadget_int(5), &e));
        if (e < 0)
                goto fail;
        gadget_value *ops = gadget_list();
        gadget_kv_batch_add(ops, "put", "b/1", NULL, gadget_bool(true));
        gadget_kv_batch_add(ops, "delete", "a/2", NULL, NULL);
        gadget_kv_batch_add(ops, "cas", "a/1", gadget_int(5), gadget_int(6));
        if ((e = gadget_kv_batch(g, "DATA", ops, &v)) < 0)
                goto fail;
        gadget_map_set(r, "batch", v);
        if ((e = gadget_kv_delete(g, "DATA", "a/1", &existed)) < 0)
                goto fail;
        gadget_map_set(r, "deleted", gadget_bool(existed));
        if ((e = gadget_kv_delete(g, "DATA", "a/1", &existed)) < 0)
                goto fail;
        gadget_map_set(r, "deleted_again", gadget_bool(existed));
        if ((e = gadget_kv_list(g, "DATA", NULL, 0, NULL, &page)) < 0)
                goto fail;
        gadget_map_set(r, "keys", page);
        return r;
fail:
        gadget_value_free(r);
        return failed(call, e);
}

/* GET url: {"status": N, "body": the body as a string}. */
static gadget_value *http(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *resp = NULL;
        int e = gadget_http(G(call), "WEB", NULL, str_arg(args, "url"), NULL, NULL, 0, &resp);
        if (e < 0)
                return failed(call, e);
        size_t len = 0;
        const char *body = gadget_as_bytes(gadget_map_get(resp, "body"), &len);
        gadget_value *r = gadget_map();
        gadget_map_set(r, "status", gadget_copy(gadget_map_get(resp, "status")));
        char *s = strndup(body ? body : "", len);
        gadget_map_set(r, "body", gadget_string(s ? s : ""));
        free(s);
        gadget_value_free(resp);
        return r;
}

/* The body of GET url, a request the test holds until the gadget is asked to stop. */
static gadget_value *slow(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *r = http(call, args, data);
        gadget_value *body = r ? gadget_copy(gadget_map_get(r, "body")) : NULL;
        gadget_value_free(r);
        return body;
}

static gadget_value *peer(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *r = NULL;
        int e = gadget_call(G(call), "PEER", str_arg(args, "method"), gadget_copy(gadget_map_get(args, "args")), &r);
        return e < 0 ? failed(call, e) : r;
}

static gadget_value *alarms(struct gadget_call *call, const gadget_value *args, void *data)
{
        struct gadget *g = G(call);
        gadget_value *r = gadget_map(), *page = NULL, *payload = gadget_map();
        char *id = NULL;
        bool existed = false;
        gadget_map_set(payload, "n", gadget_int(1));
        int e = gadget_alarm_set(g, "CLOCK", -1, 3600000, payload, "later", &id);
        if (e < 0)
                goto fail;
        gadget_map_set(r, "id", gadget_string(id));
        free(id);
        if ((e = gadget_alarm_list(g, "CLOCK", 0, NULL, &page)) < 0)
                goto fail;
        /* Their ids and payloads: "at" is the clock's. */
        gadget_value *seen = gadget_list();
        const gadget_value *list = gadget_map_get(page, "alarms");
        for (size_t i = 0; i < gadget_len(list); i++) {
                gadget_value *a = gadget_map();
                gadget_map_set(a, "id", gadget_copy(gadget_map_get(gadget_list_at(list, i), "id")));
                gadget_map_set(a, "payload", gadget_copy(gadget_map_get(gadget_list_at(list, i), "payload")));
                gadget_list_append(seen, a);
        }
        gadget_value_free(page);
        gadget_map_set(r, "listed", seen);
        if ((e = gadget_alarm_cancel(g, "CLOCK", "later", &existed)) < 0)
                goto fail;
        gadget_map_set(r, "cancelled", gadget_bool(existed));
        if ((e = gadget_alarm_cancel(g, "CLOCK", "later", &existed)) < 0)
                goto fail;
        gadget_map_set(r, "cancelled_again", gadget_bool(existed));
        if ((e = gadget_alarm_set(g, "CLOCK", -1, 0, gadget_string("rang"), "now", NULL)) < 0)
                goto fail;
        return r;
fail:
        gadget_value_free(r);
        return failed(call, e);
}

/* The alarm binding's Method=: keeps what came. */
static gadget_value *ring(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *v = gadget_map();
        gadget_map_set(v, "id", gadget_copy(gadget_map_get(args, "id")));
        gadget_map_set(v, "payload", gadget_copy(gadget_map_get(args, "payload")));
        gadget_map_set(v, "attempt", gadget_copy(gadget_map_get(args, "attempt")));
        int e = gadget_kv_put(G(call), "DATA", "rung", v);
        return e < 0 ? failed(call, e) : gadget_null();
}

static gadget_value *rung(struct gadget_call *call, const gadget_value *args, void *data)
{
        gadget_value *v = NULL;
        int e = gadget_kv_get(G(call), "DATA", "rung", &v);
        if (e == -GADGET_ENOTFOUND)
                return gadget_null();
        return e < 0 ? failed(call, e) : v;
}

static gadget_value *texts(struct gadget_call *call, const gadget_value *args, void *data)
{
        char *text = NULL, *secret = NULL;
        int e = gadget_text(G(call), "GREETING", &text);
        if (e == 0)
                e = gadget_text(G(call), "TOKEN", &secret);
        gadget_value *r = e < 0 ? failed(call, e) : gadget_map();
        if (r) {
                gadget_map_set(r, "text", gadget_string(text));
                gadget_map_set(r, "secret", gadget_string(secret));
        }
        free(text);
        free(secret);
        return r;
}

static gadget_value *logline(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t level = 6;
        gadget_as_int(gadget_map_get(args, "level"), &level);
        gadget_log(G(call), (int)level, "%s", str_arg(args, "text"));
        return gadget_null();
}

/* Breaks the protocol: a frame header announcing 4 GiB. */
static gadget_value *violate(struct gadget_call *call, const gadget_value *args, void *data)
{
        const char *fd = getenv("GADGET_FD");
        static const unsigned char bad[4] = { 0xff, 0xff, 0xff, 0xff };
        if (write(fd ? atoi(fd) : 3, bad, sizeof bad) != sizeof bad)
                return gadget_fail(call, GADGET_EFAILED, "write failed");
        return gadget_null();
}

/* Sleeps ms, blocking the gadget; the naps started so far, this one included. */
static gadget_value *nap(struct gadget_call *call, const gadget_value *args, void *data)
{
        static int64_t naps;
        int64_t ms = 0;
        gadget_as_int(gadget_map_get(args, "ms"), &ms);
        naps++;
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
        return gadget_int(naps);
}

static const struct {
        const char *sig;
        gadget_method_fn fn;
} methods[] = {
        { "echo(v: any) -> any", echo },
        { "nop()", nop },
        { "greet(name: string(..100), times?: int(1..10)) -> string", greet },
        { "fail(code: int, message: string)", fail },
        { "crash()", crash },
        { "kv() -> any", kv },
        { "http(url: string) -> {status: int, body: string}", http },
        { "slow(url: string) -> string", slow },
        { "peer(method: string, args: any) -> any", peer },
        { "alarms() -> any", alarms },
        { "ring(binding: string, id: string, at: int, payload: any, attempt: int)", ring },
        { "rung() -> any", rung },
        { "texts() -> {text: string, secret: string}", texts },
        { "log(text: string, level: int(0..7))", logline },
        { "violate()", violate },
        { "nap(ms: int(0..2000)) -> int", nap },
};

int main(void)
{
        struct gadget *g = gadget_new(NULL);
        if (!g)
                return 1;
        for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
                gadget_method_typed(g, methods[i].sig, methods[i].fn, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
