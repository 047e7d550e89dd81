/* benchutil: what the benchmark programs share — a monotonic clock in
 * nanoseconds and samples printed as one JSON object on stdout, which
 * bench/run turns into medians, p99s and ratios. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct samples {
        const char *name;
        int64_t *v;
        size_t n, cap;
};

int64_t bench_now_ns(void);
/* Appends one sample. 0 or -ENOMEM. */
int samples_add(struct samples *s, int64_t v);
void samples_free(struct samples *s);
/* Prints {"name": [v, ...], ...} for every set of samples. */
void samples_print(struct samples *const *sets, size_t n);
/* A bare fork+exec of a gadget program: fork(), exec of prog (GADGET_NAME
 * name) with a socketpair on fd 3, until its hello frame is read; the ns
 * into s, then the program is killed. 0 or -1. */
int bench_forkexec(const char *prog, const char *name, struct samples *s);
