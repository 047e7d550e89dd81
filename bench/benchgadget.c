/* benchgadget: the gadget the benchmarks drive. Its name comes from
 * GADGET_NAME, so one program serves any number of policies. Methods:
 *   nop                       returns null (the trivial call)
 *   echo N                    returns its int argument (callflood --paced)
 *   kv_put {"n": N}           N durable puts through the KV binding
 *   kv_get {"n": N}           N gets of keys kv_put wrote
 *   call {"n": N}             N calls of "nop" through the PEER binding
 *   exit                      ends the program at once with status 1 (a
 *                             crash, for restarts)
 *   signals {"n": N}          N signals to itself (SIGUSR1, handled), each
 *                             timed: what the sandbox's tracing costs one
 * The loops answer {"ns": [each operation's duration in ns]}, timed inside
 * the sandbox, so the caller's own round trip is not part of them. */
#include <gadget.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_OPS 60000 /* below VALUE_MAX_ITEMS: the answer lists them all */

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static gadget_value *nop(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_null();
}

/* The paced caller's method (callflood --paced): its int argument back. */
static gadget_value *echo(struct gadget_call *call, const gadget_value *args, void *data)
{
        int64_t i;
        return gadget_as_int(args, &i) ? gadget_int(i) : gadget_fail(call, GADGET_EINVAL, "needs an int");
}

enum op { OP_PUT, OP_GET, OP_CALL };

/* Runs one binding operation on item i. 0 or a negative GADGET_E* code. */
static int run_op(struct gadget *g, enum op op, int64_t i)
{
        char key[32];
        gadget_value *v = NULL;
        int e;
        snprintf(key, sizeof key, "k%lld", (long long)(i % 1000));
        switch (op) {
        case OP_PUT:
                return gadget_kv_put(g, "KV", key, gadget_int(i));
        case OP_GET:
                e = gadget_kv_get(g, "KV", key, &v);
                break;
        default:
                e = gadget_call(g, "PEER", "nop", NULL, &v);
                break;
        }
        gadget_value_free(v);
        return e;
}

static gadget_value *loop(struct gadget_call *call, const gadget_value *args, enum op op)
{
        struct gadget *g = gadget_call_gadget(call);
        int64_t n = 0;
        if (!gadget_as_int(gadget_map_get(args, "n"), &n) || n <= 0 || n > MAX_OPS)
                return gadget_fail(call, GADGET_EINVAL, "needs {\"n\": 1..%d}", MAX_OPS);
        gadget_value *ns = gadget_list();
        for (int64_t i = 0; ns && i < n; i++) {
                int64_t t0 = now_ns();
                int e = run_op(g, op, i);
                if (e < 0) {
                        gadget_value_free(ns);
                        return gadget_fail(call, -e, "operation %lld: %s", (long long)i, gadget_last_error(g));
                }
                gadget_list_append(ns, gadget_int(now_ns() - t0));
        }
        gadget_value *res = gadget_map();
        if (!ns || !res || gadget_map_set(res, "ns", ns) < 0) {
                gadget_value_free(res);
                return gadget_fail(call, GADGET_EINTERNAL, "out of memory");
        }
        return res;
}

static gadget_value *kv_put(struct gadget_call *call, const gadget_value *args, void *data)
{
        return loop(call, args, OP_PUT);
}

static gadget_value *kv_get(struct gadget_call *call, const gadget_value *args, void *data)
{
        return loop(call, args, OP_GET);
}

static gadget_value *peer_call(struct gadget_call *call, const gadget_value *args, void *data)
{
        return loop(call, args, OP_CALL);
}

static volatile sig_atomic_t signals_seen;

static void on_usr1(int sig)
{
        signals_seen++;
}

static gadget_value *signals(struct gadget_call *call, const gadget_value *args, void *data)
{
        static int64_t ns[MAX_OPS];
        int64_t n = 0;
        if (!gadget_as_int(gadget_map_get(args, "n"), &n) || n < 1 || n > MAX_OPS)
                return gadget_fail(call, GADGET_EINVAL, "signals needs {\"n\": 1..%d}", MAX_OPS);
        struct sigaction sa = { .sa_handler = on_usr1 };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        for (int64_t i = 0; i < n; i++) {
                int64_t t0 = now_ns();
                kill(getpid(), SIGUSR1);
                ns[i] = now_ns() - t0;
        }
        gadget_value *list = gadget_list();
        for (int64_t i = 0; i < n; i++)
                gadget_list_append(list, gadget_int(ns[i]));
        gadget_value *r = gadget_map();
        gadget_map_set(r, "ns", list);
        return r;
}

static gadget_value *exit_now(struct gadget_call *call, const gadget_value *args, void *data)
{
        _exit(1);
}

int main(void)
{
        struct gadget *g = gadget_new(getenv("GADGET_NAME"));
        if (!g)
                return 1;
        gadget_method(g, "nop", nop, NULL);
        gadget_method(g, "echo", echo, NULL);
        gadget_method(g, "kv_put", kv_put, NULL);
        gadget_method(g, "kv_get", kv_get, NULL);
        gadget_method(g, "call", peer_call, NULL);
        gadget_method(g, "exit", exit_now, NULL);
        gadget_method(g, "signals", signals, NULL);
        /* typebench: the same method, untyped and typed (a 5-field record). */
        gadget_method(g, "rec", nop, NULL);
        gadget_method_typed(g, "rec_typed(a: int, b: string, c: double, d: bool, e: list<int>) -> null", nop, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
