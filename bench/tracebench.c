/* tracebench: the same call through two gadgetd, one with tracing off
 * (TraceKeep=0) and one with tracing on and its spans exported
 * (TraceExport=), in paired blocks of one run (off, on, then on, off, ...,
 * so that the machine's drift falls on both):
 *   off_seq_ns, on_seq_ns     one call at a time (ns)
 *   off_pipe_per_s, on_pipe_per_s   DEPTH calls in flight (calls/s)
 *   seq_ratio, pipe_ratio     per pair of adjacent blocks: on's time per
 *                             call over off's, × 10000
 *
 *   tracebench OFF_SOCKET ON_SOCKET GADGET METHOD ROUNDS SEQ PIPE DEPTH
 *
 * Prints them as JSON (benchutil.h). */
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"
#include "ctlclient.h"

static int cmp64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? -1 : x > y;
}

/* The median of the samples of s from index from on. */
static int64_t median_from(const struct samples *s, size_t from)
{
        size_t n = s->n - from;
        int64_t *v = malloc(n * sizeof *v);
        if (!v || !n) {
                free(v);
                return 1;
        }
        for (size_t i = 0; i < n; i++)
                v[i] = s->v[from + i];
        qsort(v, n, sizeof *v, cmp64);
        int64_t m = v[n / 2];
        free(v);
        return m ? m : 1;
}

int main(int argc, char **argv)
{
        struct samples off_seq = { .name = "off_seq_ns" }, on_seq = { .name = "on_seq_ns" },
                       off_pipe = { .name = "off_pipe_per_s" }, on_pipe = { .name = "on_pipe_per_s" },
                       seq_ratio = { .name = "seq_ratio" }, pipe_ratio = { .name = "pipe_ratio" },
                       junk = { .name = "warmup" };
        struct ctl off, on;
        if (argc != 9) {
                fprintf(stderr, "usage: tracebench OFF_SOCKET ON_SOCKET GADGET METHOD ROUNDS SEQ PIPE DEPTH\n");
                return 2;
        }
        int rounds = atoi(argv[5]), nseq = atoi(argv[6]), npipe = atoi(argv[7]), depth = atoi(argv[8]);
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const struct ctl_call call = { argv[3], argv[4], &null };
        if (ctl_open(&off, argv[1]) < 0 || ctl_open(&on, argv[2]) < 0) {
                fprintf(stderr, "tracebench: cannot connect\n");
                return 1;
        }
        int fail = ctl_seq_block(&off, &call, 200, &junk) < 0 || ctl_seq_block(&on, &call, 200, &junk) < 0 ||
                   ctl_pipe_block(&off, &call, npipe / 4 + 1, depth, &junk) < 0 ||
                   ctl_pipe_block(&on, &call, npipe / 4 + 1, depth, &junk) < 0;
        for (int r = 0; !fail && r < rounds; r++) {
                struct ctl *first = r % 2 ? &on : &off, *second = r % 2 ? &off : &on;
                struct samples *s1 = r % 2 ? &on_seq : &off_seq, *s2 = r % 2 ? &off_seq : &on_seq;
                struct samples *p1 = r % 2 ? &on_pipe : &off_pipe, *p2 = r % 2 ? &off_pipe : &on_pipe;
                size_t off_at = off_seq.n, on_at = on_seq.n;
                fail = ctl_seq_block(first, &call, nseq, s1) < 0 || ctl_seq_block(second, &call, nseq, s2) < 0 ||
                       ctl_pipe_block(first, &call, npipe, depth, p1) < 0 ||
                       ctl_pipe_block(second, &call, npipe, depth, p2) < 0;
                if (fail)
                        break;
                samples_add(&seq_ratio, median_from(&on_seq, on_at) * 10000 / median_from(&off_seq, off_at));
                samples_add(&pipe_ratio, off_pipe.v[off_pipe.n - 1] * 10000 / (on_pipe.v[on_pipe.n - 1] ?
                                                                                  on_pipe.v[on_pipe.n - 1] : 1));
        }
        ctl_close(&off);
        ctl_close(&on);
        if (fail) {
                fprintf(stderr, "tracebench: a block failed\n");
                return 1;
        }
        struct samples *sets[] = { &off_seq, &on_seq, &off_pipe, &on_pipe, &seq_ratio, &pipe_ratio };
        samples_print(sets, 6);
        return 0;
}
