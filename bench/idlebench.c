/* idlebench: gadgets that run only while they are used (Start=on-demand).
 *
 *   idlebench first SOCKET PREFIX ROUNDS RUNNING PROGRAM
 *       ROUNDS rounds, alternating in each: the first call (nop) to the
 *       idle gadget PREFIX<round> (its start until the answer), a call to
 *       the running gadget RUNNING, and a bare fork+exec of PROGRAM until
 *       its hello. 50 ms of quiet after each round (the daemon's spare
 *       sandbox shell is made again meanwhile, as between the requests of
 *       an interactive user). Prints first_ns, running_ns, forkexec_ns.
 *   idlebench turns SOCKET PREFIX N SECONDS
 *       calls PREFIX0 .. PREFIX<N-1> in turn, one call at a time: the
 *       first pass starts each (starts_ns: the whole pass), then passes
 *       for SECONDS; prints calls_per_s (one sample per pass).
 * The gadgets are named PREFIX followed by the number. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "ctlclient.h"

static int call_one(struct ctl *c, const char *gadget, struct samples *s)
{
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        const struct ctl_call call = { .gadget = gadget, .method = "nop", .args = &null };
        return ctl_seq_block(c, &call, 1, s);
}

static int first(struct ctl *c, const char *prefix, int rounds, const char *running, const char *prog)
{
        struct samples f = { .name = "first_ns" }, r = { .name = "running_ns" }, fe = { .name = "forkexec_ns" };
        struct timespec quiet = { .tv_nsec = 50 * 1000 * 1000 };
        char name[64];
        for (int i = 0; i < rounds; i++) {
                snprintf(name, sizeof name, "%s%d", prefix, i);
                if (call_one(c, name, &f) < 0 || call_one(c, running, &r) < 0 ||
                    bench_forkexec(prog, "forkexec", &fe) < 0)
                        return 1;
                nanosleep(&quiet, NULL);
        }
        struct samples *all[] = { &f, &r, &fe };
        samples_print(all, 3);
        return 0;
}

static int turns(struct ctl *c, const char *prefix, int n, double seconds)
{
        struct samples starts = { .name = "starts_ns" }, rate = { .name = "calls_per_s" },
                       junk = { .name = "junk" };
        char name[64];
        int64_t t0 = bench_now_ns();
        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof name, "%s%d", prefix, i);
                if (call_one(c, name, &junk) < 0)
                        return 1;
        }
        samples_add(&starts, bench_now_ns() - t0);
        int64_t end = bench_now_ns() + (int64_t)(seconds * 1e9);
        while (bench_now_ns() < end) {
                int64_t p0 = bench_now_ns();
                for (int i = 0; i < n; i++) {
                        snprintf(name, sizeof name, "%s%d", prefix, i);
                        if (call_one(c, name, &junk) < 0)
                                return 1;
                }
                samples_add(&rate, (int64_t)((double)n * 1e9 / (double)(bench_now_ns() - p0)));
        }
        struct samples *all[] = { &starts, &rate };
        samples_print(all, 2);
        return 0;
}

int main(int argc, char **argv)
{
        struct ctl c;
        if (argc < 6 || (strcmp(argv[1], "first") != 0 && strcmp(argv[1], "turns") != 0) ||
            (strcmp(argv[1], "first") == 0 && argc < 7)) {
                fprintf(stderr, "usage: idlebench first SOCKET PREFIX ROUNDS RUNNING PROGRAM\n"
                                "       idlebench turns SOCKET PREFIX N SECONDS\n");
                return 2;
        }
        int e = ctl_open(&c, argv[2]);
        if (e < 0) {
                fprintf(stderr, "idlebench: %s: %s\n", argv[2], strerror(-e));
                return 1;
        }
        int st = strcmp(argv[1], "first") == 0 ? first(&c, argv[3], atoi(argv[4]), argv[5], argv[6])
                                                : turns(&c, argv[3], atoi(argv[4]), atof(argv[5]));
        ctl_close(&c);
        return st;
}
