/* typebench: what checking a call against its method's signature costs,
 * on the control socket's call path, as the ratio of a typed call to an
 * untyped one in the same run. Both methods of the bench gadget do
 * nothing and take the same 5-field record; the typed one declares
 *     rec_typed(a: int, b: string, c: double, d: bool, e: list<int>) -> null
 * so gadgetd checks the arguments (and libgadget again) and the result.
 * Alternating blocks, a warm-up of each first:
 *   seq   one call at a time: each round trip (ns)
 *   pipe  DEPTH calls always in flight: calls per second of each block
 *
 *   typebench SOCKET GADGET ROUNDS SEQ PIPE DEPTH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "ctlclient.h"
#include "value.h"

struct run {
        struct ctl ctl;
        const char *gadget;
        Gadget__Value *args;
};

static int take_result(struct run *r)
{
        Control__Response *resp = ctl_recv(&r->ctl);
        int ok = resp && resp->resp_case == CONTROL__RESPONSE__RESP_RESULT;
        if (resp && !ok && resp->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                fprintf(stderr, "typebench: call failed: %s\n", resp->error->message);
        if (resp)
                control__response__free_unpacked(resp, NULL);
        return ok ? 0 : -1;
}

static int seq_block(struct run *r, const char *method, int n, struct samples *s)
{
        for (int i = 0; i < n; i++) {
                int64_t t0 = bench_now_ns();
                if (ctl_put_call(&r->ctl, r->gadget, method, r->args) < 0 || ctl_flush(&r->ctl) < 0 ||
                    take_result(r) < 0)
                        return -1;
                samples_add(s, bench_now_ns() - t0);
        }
        return 0;
}

static int pipe_block(struct run *r, const char *method, int n, int depth, struct samples *s)
{
        int sent = 0, done = 0;
        int64_t t0 = bench_now_ns();
        for (; sent < depth && sent < n; sent++)
                if (ctl_put_call(&r->ctl, r->gadget, method, r->args) < 0)
                        return -1;
        if (ctl_flush(&r->ctl) < 0)
                return -1;
        while (done < n) {
                int batch = 0;
                do {
                        if (take_result(r) < 0)
                                return -1;
                        done++;
                        batch++;
                } while (ctl_buffered(&r->ctl));
                for (; batch > 0 && sent < n; batch--, sent++)
                        if (ctl_put_call(&r->ctl, r->gadget, method, r->args) < 0)
                                return -1;
                if (ctl_flush(&r->ctl) < 0)
                        return -1;
        }
        samples_add(s, (int64_t)((double)n * 1e9 / (double)(bench_now_ns() - t0)));
        return 0;
}

/* {a: 1, b: "bench", c: 2.5, d: true, e: [1, 2, 3]} */
static Gadget__Value *record(void)
{
        Gadget__Value *m = value_new_map(), *e = value_new_list();
        if (!m || !e)
                return NULL;
        for (int i = 1; i <= 3; i++)
                value_list_append(e, value_new_int(i));
        value_map_set(m, "a", value_new_int(1));
        value_map_set(m, "b", value_new_string("bench"));
        value_map_set(m, "c", value_new_double(2.5));
        value_map_set(m, "d", value_new_bool(true));
        value_map_set(m, "e", e);
        return m;
}

int main(int argc, char **argv)
{
        struct run r = { 0 };
        struct samples us = { .name = "untyped_seq_ns" }, ts = { .name = "typed_seq_ns" },
                       up = { .name = "untyped_pipe_per_s" }, tp = { .name = "typed_pipe_per_s" },
                       junk = { .name = "warmup" };
        if (argc != 7) {
                fprintf(stderr, "usage: typebench SOCKET GADGET ROUNDS SEQ PIPE DEPTH\n");
                return 2;
        }
        r.gadget = argv[2];
        int rounds = atoi(argv[3]), nseq = atoi(argv[4]), npipe = atoi(argv[5]), depth = atoi(argv[6]);
        if (!(r.args = record()) || ctl_open(&r.ctl, argv[1]) < 0) {
                fprintf(stderr, "typebench: cannot start\n");
                return 1;
        }
        int fail = seq_block(&r, "rec", 200, &junk) < 0 || seq_block(&r, "rec_typed", 200, &junk) < 0 ||
                   pipe_block(&r, "rec", npipe / 4 + 1, depth, &junk) < 0 ||
                   pipe_block(&r, "rec_typed", npipe / 4 + 1, depth, &junk) < 0;
        /* Alternating, and each round in the other order, so neither kind
         * always runs first. */
        for (int i = 0; !fail && i < rounds; i++) {
                const char *first = i % 2 ? "rec_typed" : "rec", *second = i % 2 ? "rec" : "rec_typed";
                struct samples *fs = i % 2 ? &ts : &us, *ss = i % 2 ? &us : &ts;
                struct samples *fp = i % 2 ? &tp : &up, *sp = i % 2 ? &up : &tp;
                fail = seq_block(&r, first, nseq, fs) < 0 || seq_block(&r, second, nseq, ss) < 0 ||
                       pipe_block(&r, first, npipe, depth, fp) < 0 || pipe_block(&r, second, npipe, depth, sp) < 0;
        }
        ctl_close(&r.ctl);
        value_free(r.args);
        if (fail) {
                fprintf(stderr, "typebench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &us, &ts, &up, &tp };
        samples_print(sets, 4);
        return 0;
}
