/* hostile: a worker that speaks the gadget protocol badly on purpose. The
 * mode (first argument) picks the offence; the adversarial tests check that
 * gadgetd ends this worker only, logs one violation, and serves the rest.
 * The floods (yes, burst, log-newlines; a count as second argument bounds
 * them) and no-hello are the hostile-load suite's attackers on gadgetd's
 * log and on a start. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gadget.h"
#include "gadget.pb-c.h"
#include "value.h"
#include "wire.h"

#define FD 3

static void raw(const void *data, size_t len)
{
        const uint8_t *p = data;
        while (len > 0) {
                ssize_t n = write(FD, p, len);
                if (n <= 0)
                        return;
                p += n;
                len -= (size_t)n;
        }
}

static void header(uint32_t len)
{
        uint8_t h[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
        raw(h, 4);
}

static void send_msg(Gadget__WorkerMsg *m)
{
        wire_send(FD, &m->base, 64u << 20);
}

/* HOSTILE_METHODS=N: a hello of N typed methods m0.., each signature of
 * about a dozen types (gadgetd bounds their sum). */
static void many_methods_hello(int n)
{
        Gadget__Hello h = GADGET__HELLO__INIT;
        char **names = calloc((size_t)n, sizeof *names), **sigs = calloc((size_t)n, sizeof *sigs);
        for (int i = 0; names && sigs && i < n; i++) {
                if (asprintf(&names[i], "m%d", i) < 0 ||
                    asprintf(&sigs[i], "m%d(a: list<{x: int, y: string, z: list<int>}>, b: map<double>) -> {k: bool}",
                             i) < 0)
                        exit(1);
        }
        h.name = getenv("GADGET_NAME");
        h.protocol_version = GADGET_PROTOCOL_VERSION;
        h.n_methods = h.n_signatures = (size_t)n;
        h.methods = names;
        h.signatures = sigs;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        m.hello = &h;
        send_msg(&m);
}

static void hello(void)
{
        if (getenv("HOSTILE_METHODS")) {
                many_methods_hello(atoi(getenv("HOSTILE_METHODS")));
                return;
        }
        Gadget__Hello h = GADGET__HELLO__INIT;
        char *methods[] = { "echo" };
        /* Untyped unless HOSTILE_SIGNATURE gives echo's signature (any text:
         * the validator is under test). */
        char *sigs[] = { getenv("HOSTILE_SIGNATURE") ? getenv("HOSTILE_SIGNATURE") : "" };
        h.name = getenv("GADGET_NAME");
        /* HOSTILE_VERSION=1: an older gadget's hello, without signatures
         * (unless HOSTILE_SIGNATURE gives one anyway). */
        h.protocol_version = getenv("HOSTILE_VERSION") ? (uint32_t)atoi(getenv("HOSTILE_VERSION"))
                                                      : GADGET_PROTOCOL_VERSION;
        h.n_methods = 1;
        h.methods = methods;
        h.n_signatures = h.protocol_version >= 2 || getenv("HOSTILE_SIGNATURE") ? 1 : 0;
        h.signatures = sigs;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        m.hello = &h;
        send_msg(&m);
}

/* When set, messages are queued here and written in big batches (many
 * frames per write, as many per read of gadgetd's). */
static struct wire_writer *batch;

static void send_batched(Gadget__WorkerMsg *m)
{
        if (wire_writer_put(batch, &m->base, WIRE_MAX_FRAME) == 0 && wire_writer_pending(batch) < (1u << 20))
                return;
        wire_writer_flush(batch, FD);
}

static void binding_call_to(uint64_t id, const char *binding, const char *op, Gadget__Value *args)
{
        Gadget__BindingCall b = GADGET__BINDING_CALL__INIT;
        b.id = id;
        b.binding = (char *)binding;
        b.op = (char *)op;
        b.args = args;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL;
        m.binding_call = &b;
        if (batch)
                send_batched(&m);
        else
                send_msg(&m);
}

static void binding_call(uint64_t id, Gadget__Value *args)
{
        binding_call_to(id, "NOPE", "get", args);
}

/* binding-flood BINDING OP N [ARG]: N binding calls of BINDING.OP (args
 * {"method": ARG} for a gadget binding's call, else {"url": ARG}), pipelined as fast as gadgetd reads them while
 * the answers are read and counted; then one line on stdout:
 * "binding-flood: sent N answered N ok N error CODE N ...". A load test
 * (an attacker that asks for much more than its budget) and a benchmark. */
static int binding_flood(int argc, char **argv)
{
        if (argc < 5)
                return 2;
        long n = strtol(argv[4], NULL, 10);
        Gadget__Value *args = argc > 5 ? value_new_map() : NULL;
        if (args)
                value_map_set(args, strcmp(argv[3], "call") == 0 ? "method" : "url", value_new_string(argv[5]));
        struct wire_writer w;
        struct wire_reader r;
        wire_writer_init(&w, 1u << 20);
        wire_reader_init(&r, WIRE_MAX_FRAME);
        fcntl(FD, F_SETFL, fcntl(FD, F_GETFL) | O_NONBLOCK);
        long sent = 0, answered = 0, ok = 0, codes[16] = { 0 };
        while (answered < n) {
                while (sent < n && wire_writer_pending(&w) < (64u << 10)) {
                        Gadget__BindingCall b = GADGET__BINDING_CALL__INIT;
                        b.id = (uint64_t)++sent;
                        b.binding = argv[2];
                        b.op = argv[3];
                        b.args = args;
                        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
                        m.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL;
                        m.binding_call = &b;
                        wire_writer_put(&w, &m.base, WIRE_MAX_FRAME);
                }
                struct pollfd pfd = { FD, POLLIN | (wire_writer_pending(&w) ? POLLOUT : 0), 0 };
                if (poll(&pfd, 1, 60000) <= 0)
                        break; /* no answer for a minute: report what came */
                if (wire_writer_pending(&w) && wire_writer_flush(&w, FD) < 0)
                        break;
                ssize_t got = wire_reader_fill(&r, FD);
                if (got == 0 || (got < 0 && got != -EAGAIN))
                        break;
                const uint8_t *data;
                size_t len;
                while (wire_reader_next(&r, &data, &len) == 1) {
                        Gadget__SupervisorMsg *m = gadget__supervisor_msg__unpack(NULL, len, data);
                        if (m && m->msg_case == GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT) {
                                answered++;
                                if (m->binding_result->outcome_case == GADGET__BINDING_RESULT__OUTCOME_VALUE)
                                        ok++;
                                else
                                        codes[m->binding_result->error->code & 15]++;
                        }
                        gadget__supervisor_msg__free_unpacked(m, NULL);
                }
        }
        printf("binding-flood: sent %ld answered %ld ok %ld", sent, answered, ok);
        for (int c = 0; c < 16; c++)
                if (codes[c])
                        printf(" error %d %ld", c, codes[c]);
        printf("\n");
        fflush(stdout);
        return 0;
}

/* big-answer BINDING METHOD N: one call of METHOD with {"n": N} through
 * the gadget binding BINDING, under the largest id (so gadgetd's answer
 * to it is a few bytes larger than the callee's answer to gadgetd), then
 * one line: "big-answer: ok LEN", "big-answer: error CODE MESSAGE", or
 * "big-answer: no answer" after 10 s. */
static void big_answer(int argc, char **argv)
{
        if (argc < 5)
                return;
        Gadget__Value *inner = value_new_map(), *args = value_new_map();
        value_map_set(inner, "n", value_new_int(strtol(argv[4], NULL, 10)));
        value_map_set(args, "method", value_new_string(argv[3]));
        value_map_set(args, "args", inner);
        Gadget__BindingCall b = GADGET__BINDING_CALL__INIT;
        b.id = UINT64_MAX;
        b.binding = argv[2];
        b.op = "call";
        b.args = args;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL;
        m.binding_call = &b;
        send_msg(&m);
        struct wire_reader r;
        wire_reader_init(&r, 64u << 20);
        const uint8_t *data;
        size_t len;
        struct pollfd pfd = { FD, POLLIN, 0 };
        while (poll(&pfd, 1, 10000) == 1) {
                ssize_t got = wire_reader_fill(&r, FD);
                if (got <= 0)
                        break;
                while (wire_reader_next(&r, &data, &len) == 1) {
                        Gadget__SupervisorMsg *sm = gadget__supervisor_msg__unpack(NULL, len, data);
                        const Gadget__BindingResult *br =
                                sm && sm->msg_case == GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT ? sm->binding_result : NULL;
                        if (br && br->outcome_case == GADGET__BINDING_RESULT__OUTCOME_VALUE)
                                printf("big-answer: ok %zu\n", br->value->bytes_value.len);
                        else if (br)
                                printf("big-answer: error %u %s\n", br->error->code, br->error->message);
                        gadget__supervisor_msg__free_unpacked(sm, NULL);
                        if (br) {
                                fflush(stdout);
                                return;
                        }
                }
        }
        printf("big-answer: no answer\n");
        fflush(stdout);
}

/* A list nested n deep. */
static Gadget__Value *nested(int n)
{
        Gadget__Value *v = value_new_int(1);
        for (int i = 0; i < n; i++) {
                Gadget__Value *l = value_new_list();
                value_list_append(l, v);
                v = l;
        }
        return v;
}

/* Writes len bytes to fd, whatever it takes. */
static void write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n <= 0)
                        return;
                p += n;
                len -= (size_t)n;
        }
}

/* Output floods (modes yes, burst, log-newlines). count: how many writes
 * or frames, 0 for no end. */
static void output_flood(const char *mode, unsigned long count)
{
        static char buf[8192];
        if (strcmp(mode, "yes") == 0) {
                /* What yes(1) does: 8 KiB of "y\n" per write, for ever. */
                for (size_t i = 0; i < sizeof buf; i += 2)
                        memcpy(buf + i, "y\n", 2);
                for (unsigned long i = 0; !count || i < count; i++)
                        write_all(1, buf, sizeof buf);
        } else if (strcmp(mode, "burst") == 0) {
                /* count numbered lines ("1", "2", ...) in one write: one
                 * read of gadgetd sees more than a thousand of them. */
                size_t len = 0, cap = (count ? count : 5000) * 24;
                char *all = malloc(cap);
                for (unsigned long i = 1; all && i <= (count ? count : 5000); i++)
                        len += (size_t)snprintf(all + len, cap - len, "%lu\n", i);
                if (all)
                        write_all(1, all, len);
                free(all);
        } else {
                /* Log messages of 4,096 newlines each over the RPC. */
                memset(buf, '\n', 4096);
                buf[4096] = '\0';
                Gadget__Log log = GADGET__LOG__INIT;
                log.level = 6;
                log.text = buf;
                Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
                m.msg_case = GADGET__WORKER_MSG__MSG_LOG;
                m.log = &log;
                for (unsigned long i = 0; !count || i < count; i++)
                        send_msg(&m);
        }
}

/* kv-flood: what to send, and the answers counted by outcome. A
 * well-formed but greedy gadget: the kv hostile-load tests and benchmarks
 * use it against the kv binding. */
struct flood {
        const char *binding, *op, *prefix;
        unsigned long count, window, size, keys;
        unsigned long sent, answered, ok, by_code[16];
};

/* The arguments of kv-flood's i-th call. */
static Gadget__Value *flood_args(const struct flood *f, unsigned long i, uint8_t *value)
{
        char key[64];
        Gadget__Value *a = value_new_map();
        if (strcmp(f->op, "list") == 0) {
                value_map_set(a, "prefix", value_new_string(f->prefix));
                return a;
        }
        snprintf(key, sizeof key, "%sk%08lu", f->prefix, f->keys ? (i - 1) % f->keys + 1 : i);
        value_map_set(a, "key", value_new_string(key));
        if (strcmp(f->op, "put") == 0)
                value_map_set(a, "value", value_new_bytes(value, f->size));
        return a;
}

/* Counts one answer from gadgetd (other messages are ignored). */
static void flood_answer(struct flood *f, const uint8_t *data, size_t len)
{
        Gadget__SupervisorMsg *m = gadget__supervisor_msg__unpack(NULL, len, data);
        if (!m)
                exit(3);
        if (m->msg_case == GADGET__SUPERVISOR_MSG__MSG_SHUTDOWN)
                exit(0);
        if (m->msg_case == GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT) {
                const Gadget__BindingResult *r = m->binding_result;
                f->answered++;
                if (r->outcome_case == GADGET__BINDING_RESULT__OUTCOME_ERROR)
                        f->by_code[r->error->code < 16 ? r->error->code : 0]++;
                else
                        f->ok++;
        }
        gadget__supervisor_msg__free_unpacked(m, NULL);
}

/* Sends f's calls, window of them unanswered at a time, until each is
 * answered. */
static void flood_run(struct flood *f, struct wire_reader *rd, struct wire_writer *wr, uint8_t *value)
{
        const uint8_t *data;
        size_t len;
        while (f->answered < f->count) {
                while (f->sent < f->count && f->sent - f->answered < f->window) {
                        Gadget__BindingCall b = GADGET__BINDING_CALL__INIT;
                        b.id = ++f->sent;
                        b.binding = (char *)f->binding;
                        b.op = (char *)f->op;
                        b.args = flood_args(f, f->sent, value);
                        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
                        m.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL;
                        m.binding_call = &b;
                        wire_writer_put(wr, &m.base, WIRE_MAX_FRAME);
                        value_free(b.args);
                }
                struct pollfd p = { .fd = FD, .events = POLLIN | (wire_writer_pending(wr) ? POLLOUT : 0) };
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        exit(3);
                if (p.revents & POLLOUT)
                        wire_writer_flush(wr, FD);
                if (p.revents & (POLLIN | POLLHUP)) {
                        ssize_t n = wire_reader_fill(rd, FD);
                        if (n == 0 || (n < 0 && n != -EAGAIN))
                                exit(3);
                        while (wire_reader_next(rd, &data, &len) == 1)
                                flood_answer(f, data, len);
                }
        }
}

/* kv-flood BINDING OP COUNT WINDOW SIZE [PREFIX [KEYS]]: COUNT calls of OP
 * (put, get, delete or list) on BINDING, WINDOW of them unanswered at a
 * time, keys PREFIXk00000001..., put values of SIZE bytes, list of
 * PREFIX. With KEYS, the calls take the first KEYS keys over and over,
 * and a get flood first puts each of them, SIZE bytes (one at a time;
 * exit 3 if one fails). Then one line on stderr: "kv-flood: sent N ok N
 * busy N limit N failed N other N", and an exit at gadgetd's shutdown. */
static void kv_flood(int argc, char **argv)
{
        struct flood f = { .binding = argv[2], .op = argv[3], .prefix = argc > 7 ? argv[7] : "",
                           .keys = argc > 8 ? strtoul(argv[8], NULL, 10) : 0 };
        struct wire_reader rd;
        struct wire_writer wr;
        f.count = strtoul(argv[4], NULL, 10);
        f.window = strtoul(argv[5], NULL, 10);
        f.size = strtoul(argv[6], NULL, 10);
        uint8_t *value = calloc(1, f.size + 1);
        wire_reader_init(&rd, WIRE_MAX_FRAME);
        wire_writer_init(&wr, 64u << 20);
        fcntl(FD, F_SETFL, fcntl(FD, F_GETFL) | O_NONBLOCK);
        if (f.keys && strcmp(f.op, "get") == 0) {
                struct flood put = { .binding = f.binding, .op = "put", .prefix = f.prefix, .keys = f.keys,
                                     .count = f.keys, .window = 1, .size = f.size };
                flood_run(&put, &rd, &wr, value);
                if (put.ok != put.count) {
                        fprintf(stderr, "kv-flood: %lu of %lu puts failed\n", put.count - put.ok, put.count);
                        exit(3);
                }
        }
        flood_run(&f, &rd, &wr, value);
        fprintf(stderr, "kv-flood: sent %lu ok %lu busy %lu limit %lu failed %lu other %lu\n", f.sent, f.ok,
                f.by_code[GADGET_EBUSY], f.by_code[GADGET_ELIMIT], f.by_code[GADGET_EFAILED],
                f.answered - f.ok - f.by_code[GADGET_EBUSY] - f.by_code[GADGET_ELIMIT] -
                        f.by_code[GADGET_EFAILED]);
        fflush(stderr);
        free(value);
        /* Then it reads on until gadgetd's shutdown message, at which it
         * exits (flood_answer): an unload does not wait out the stop's
         * grace period. */
        for (;;) {
                const uint8_t *data;
                size_t len;
                struct pollfd p = { .fd = FD, .events = POLLIN };
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        exit(3);
                ssize_t n = wire_reader_fill(&rd, FD);
                if (n == 0 || (n < 0 && n != -EAGAIN))
                        exit(0);
                while (wire_reader_next(&rd, &data, &len) == 1)
                        flood_answer(&f, data, len);
        }
}

/* A valid value of n values in all: a list of lists of nulls (each list
 * within the 65,536 items one list may hold). */
static Gadget__Value *many_values(long n)
{
        Gadget__Value *top = value_new_list();
        for (long left = n - 1; left > 0;) {
                Gadget__Value *l = value_new_list();
                left--;
                for (long i = 0; i < 60000 && left > 0; i++, left--)
                        value_list_append(l, value_new_null());
                value_list_append(top, l);
        }
        return top;
}

/* Reads the answers to binding calls for up to ms of silence or until want
 * came, and prints how many came with which error code: the tests read
 * these lines in gadgetd's log of this gadget. */
static void count_answers(const char *mode, long want, int ms)
{
        struct wire_reader r;
        long codes[32] = { 0 }, got = 0, ok = 0;
        wire_reader_init(&r, WIRE_MAX_FRAME);
        struct pollfd pfd = { .fd = FD, .events = POLLIN };
        while (got < want) {
                const uint8_t *data;
                size_t len;
                int e = wire_reader_next(&r, &data, &len);
                if (e < 0)
                        break;
                if (e == 0) {
                        if (poll(&pfd, 1, ms) <= 0 || wire_reader_fill(&r, FD) <= 0)
                                break;
                        continue;
                }
                Gadget__SupervisorMsg *m = gadget__supervisor_msg__unpack(NULL, len, data);
                if (m && m->msg_case == GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT) {
                        got++;
                        if (m->binding_result->outcome_case == GADGET__BINDING_RESULT__OUTCOME_VALUE)
                                ok++;
                        else
                                codes[m->binding_result->error->code & 31]++;
                }
                gadget__supervisor_msg__free_unpacked(m, NULL);
        }
        fprintf(stderr, "%s: answers %ld ok %ld busy %ld denied %ld timeout %ld other %ld\n", mode, got, ok,
                codes[GADGET_EBUSY], codes[GADGET_EDENIED], codes[GADGET_ETIMEOUT],
                got - ok - codes[GADGET_EBUSY] - codes[GADGET_EDENIED] - codes[GADGET_ETIMEOUT]);
        wire_reader_free(&r);
}

int main(int argc, char **argv)
{
        const char *mode = argc > 1 ? argv[1] : "";
        uint8_t junk[64];
        memset(junk, 0xff, sizeof junk);

        if (strcmp(mode, "kv-flood") == 0 && argc >= 7) {
                hello();
                kv_flood(argc, argv);
        } else if (strcmp(mode, "oversize") == 0) {
                hello();
                header(WIRE_MAX_FRAME + 1);
                raw(junk, sizeof junk);
        } else if (strcmp(mode, "huge-length") == 0) {
                header(0xfffffff0u);
        } else if (strcmp(mode, "truncated") == 0) {
                hello();
                header(100);
                raw(junk, 10);
                return 0; /* end of file inside the frame */
        } else if (strcmp(mode, "garbage") == 0) {
                header(sizeof junk);
                raw(junk, sizeof junk);
        } else if (strcmp(mode, "unknown-kind") == 0) {
                static const uint8_t unknown[] = { 0x7a, 0x01, 0x00 }; /* field 15, 1 byte */
                header(sizeof unknown);
                raw(unknown, sizeof unknown);
        } else if (strcmp(mode, "deep") == 0) {
                hello();
                binding_call(1, nested(2000));
        } else if (strcmp(mode, "too-deep-value") == 0) {
                hello();
                binding_call(1, nested(40));
        } else if (strcmp(mode, "huge-list") == 0) {
                hello();
                Gadget__Value *l = value_new_list();
                for (int i = 0; i < 70000; i++)
                        value_list_append(l, value_new_null());
                binding_call(1, l);
        } else if (strcmp(mode, "bad-utf8") == 0) {
                hello();
                Gadget__Log log = GADGET__LOG__INIT;
                log.level = 6;
                log.text = "\xc3\x28 not UTF-8";
                Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
                m.msg_case = GADGET__WORKER_MSG__MSG_LOG;
                m.log = &log;
                send_msg(&m);
        } else if (strcmp(mode, "stray-result") == 0) {
                hello();
                Gadget__CallResult r = GADGET__CALL_RESULT__INIT;
                r.id = 999;
                r.outcome_case = GADGET__CALL_RESULT__OUTCOME_VALUE;
                r.value = value_new_null();
                Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
                m.msg_case = GADGET__WORKER_MSG__MSG_RESULT;
                m.result = &r;
                send_msg(&m);
        } else if (strcmp(mode, "duplicate-hello") == 0) {
                hello();
                hello();
        } else if (strcmp(mode, "before-hello") == 0) {
                binding_call(1, NULL);
        } else if (strcmp(mode, "flood") == 0) {
                hello();
                /* Binding calls without ever reading the answers. */
                for (uint64_t id = 1; id < 10000000; id++)
                        binding_call(id, NULL);
        } else if (strcmp(mode, "never-read") == 0) {
                hello();
        } else if (strcmp(mode, "big-answer") == 0) {
                hello();
                big_answer(argc, argv);
        } else if (strcmp(mode, "binding-flood") == 0) {
                hello();
                if (binding_flood(argc, argv) != 0)
                        return 2;
        } else if (strcmp(mode, "no-hello") == 0) {
                /* Alive, but never says hello: StartTimeout ends it. */
        } else if (strcmp(mode, "yes") == 0 || strcmp(mode, "burst") == 0 || strcmp(mode, "log-newlines") == 0) {
                hello();
                output_flood(mode, argc > 2 ? strtoul(argv[2], NULL, 10) : 0);
        } else if (strcmp(mode, "big-frames") == 0) {
                /* hostile big-frames N VALUES [FIRST]: N valid binding calls
                 * (to an undeclared binding) of VALUES values each (the first
                 * of FIRST), written 1 MiB at a time: the worst valid frames
                 * to decode, or the most frames per read. */
                long n = argc > 2 ? atol(argv[2]) : 100, values = argc > 3 ? atol(argv[3]) : 65536;
                long first = argc > 4 ? atol(argv[4]) : values;
                Gadget__Value *v = many_values(values), *f = many_values(first);
                hello();
                fprintf(stderr, "big-frames: sending %ld frames of %ld values\n", n, values);
                /* A big first frame makes gadgetd's read buffer big, so that
                 * one read then takes many small frames. */
                struct wire_writer w;
                wire_writer_init(&w, 8u << 20);
                batch = &w;
                for (long id = 1; id <= n; id++)
                        binding_call(id, id == 1 ? f : v);
                wire_writer_flush(&w, FD);
                batch = NULL;
                fprintf(stderr, "big-frames: sent %ld\n", n);
                count_answers(mode, n, 5000);
        } else {
                fprintf(stderr, "hostile: unknown mode %s\n", mode);
                return 2;
        }
        for (;;)
                pause();
}
