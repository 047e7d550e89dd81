/* hostile: a worker that speaks the gadget protocol badly on purpose. The
 * mode (first argument) picks the offence; the adversarial tests check that
 * gadgetd ends this worker only, logs one violation, and serves the rest. */
#include <errno.h>
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

static void hello(void)
{
        Gadget__Hello h = GADGET__HELLO__INIT;
        char *methods[] = { "echo" };
        h.name = getenv("GADGET_NAME");
        h.protocol_version = GADGET_PROTOCOL_VERSION;
        h.n_methods = 1;
        h.methods = methods;
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

        if (strcmp(mode, "oversize") == 0) {
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
        } else if (strcmp(mode, "binding-flood") == 0) {
                /* hostile binding-flood N BINDING OP [JSON-less args: a
                 * method name for a gadget binding]: N binding calls at
                 * once, then the count of answers by code. */
                long n = argc > 2 ? atol(argv[2]) : 1000;
                const char *binding = argc > 3 ? argv[3] : "SLOW", *op = argc > 4 ? argv[4] : "call";
                Gadget__Value *args = value_new_map();
                value_map_set(args, "method", value_new_string(argc > 5 ? argv[5] : "hang"));
                hello();
                for (long id = 1; id <= n; id++)
                        binding_call_to((uint64_t)id, binding, op, args);
                fprintf(stderr, "binding-flood: sent %ld\n", n);
                count_answers(mode, n, 1500);
        } else {
                fprintf(stderr, "hostile: unknown mode %s\n", mode);
                return 2;
        }
        for (;;)
                pause();
}
