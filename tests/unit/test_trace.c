/* Unit tests of supervisor/system/trace.c: the ring of spans and its
 * index by trace id — a trace's spans found oldest first, the newest max
 * of them, none once overwritten, and nothing of another trace. */
#include <stdio.h>
#include <string.h>

#include "system/trace.h"
#include "tap.h"

/* A span of trace number tr (its id made from the number) named k. */
static void add(struct traces *t, unsigned tr, unsigned k)
{
        struct trace_ctx c = { .flags = TRACE_FLAG_SAMPLED };
        memcpy(c.trace_id, &tr, sizeof tr);
        c.trace_id[15] = 1;
        c.span_id[0] = 1;
        struct span *s = traces_next(t, &c);
        snprintf(s->name, sizeof s->name, "%u", k);
}

static size_t find(struct traces *t, unsigned tr, const struct span **out, size_t max)
{
        uint8_t id[TRACE_ID_LEN] = { 0 };
        memcpy(id, &tr, sizeof tr);
        id[15] = 1;
        return traces_find(t, id, out, max);
}

int main(void)
{
        struct traces *t;
        const struct span *out[64];
        CHECK(traces_new("a", 100, 1, &t) == 0, "a ring of 100 spans");
        /* Spans of 7 traces interleaved, 3 rounds: span k of trace k % 7. */
        for (unsigned k = 0; k < 21; k++)
                add(t, k % 7, k);
        size_t n = find(t, 3, out, 64);
        CHECK(n == 3 && strcmp(out[0]->name, "3") == 0 && strcmp(out[1]->name, "10") == 0 &&
              strcmp(out[2]->name, "17") == 0, "trace 3's spans, oldest first (%zu)", n);
        n = find(t, 3, out, 2);
        CHECK(n == 2 && strcmp(out[0]->name, "10") == 0 && strcmp(out[1]->name, "17") == 0,
              "at most max: the newest, oldest first");
        CHECK(find(t, 99, out, 64) == 0, "a trace with no span: none");
        CHECK(find(t, 3, out, 0) == 0, "max 0: none");
        /* 150 spans of trace 8: the ring wraps; trace 3's are overwritten. */
        for (unsigned k = 0; k < 150; k++)
                add(t, 8, 1000 + k);
        CHECK(find(t, 3, out, 64) == 0, "overwritten spans are not found");
        n = find(t, 8, out, 64);
        CHECK(n == 64 && strcmp(out[0]->name, "1086") == 0 && strcmp(out[63]->name, "1149") == 0,
              "the newest 64 of trace 8's kept 100");
        /* Many traces at once: each finds its own, whatever shares its chain. */
        for (unsigned k = 0; k < 100; k++)
                add(t, 2000 + k, k);
        size_t bad = 0;
        for (unsigned k = 0; k < 100; k++) {
                char want[16];
                snprintf(want, sizeof want, "%u", k);
                bad += find(t, 2000 + k, out, 64) != 1 || strcmp(out[0]->name, want) != 0;
        }
        CHECK(bad == 0, "each of 100 traces finds its one span (%zu wrong)", bad);
        traces_free(t);
        CHECK(traces_new("a", 0, 1, &t) == 0 && !traces_on(t) && find(t, 8, out, 64) == 0,
              "tracing off: nothing is found");
        traces_free(t);
        return tap_done();
}
