/* benchutil: clock and sample output of the benchmark programs. */
#include "benchutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int64_t bench_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int samples_add(struct samples *s, int64_t v)
{
        if (s->n == s->cap) {
                size_t ncap = s->cap ? 2 * s->cap : 256;
                int64_t *nv = realloc(s->v, ncap * sizeof *nv);
                if (!nv)
                        return -ENOMEM;
                s->v = nv;
                s->cap = ncap;
        }
        s->v[s->n++] = v;
        return 0;
}

void samples_free(struct samples *s)
{
        free(s->v);
        s->v = NULL;
        s->n = s->cap = 0;
}

void samples_print(struct samples *const *sets, size_t n)
{
        printf("{");
        for (size_t i = 0; i < n; i++) {
                printf("%s\"%s\": [", i ? ", " : "", sets[i]->name);
                for (size_t j = 0; j < sets[i]->n; j++)
                        printf("%s%lld", j ? ", " : "", (long long)sets[i]->v[j]);
                printf("]");
        }
        printf("}\n");
        fflush(stdout);
}
