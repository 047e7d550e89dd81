/* Unit tests of supervisor/core/logbuf.c: line splitting across reads and
 * streams, more lines in one read than the ring holds, the per-second log
 * budget (kept, dropped, counted in bulk, the window's end, the read
 * allowance) and the ring. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/logbuf.h"
#include "tap.h"

/* What fn received: every line, in order. */
struct seen {
        char **lines;
        size_t n;
};

static void collect(void *arg, const char *line, size_t len)
{
        struct seen *s = arg;
        s->lines = realloc(s->lines, (s->n + 1) * sizeof *s->lines);
        s->lines[s->n++] = strndup(line, len);
}

static void seen_clear(struct seen *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->lines[i]);
        free(s->lines);
        *s = (struct seen){ 0 };
}

static struct logbuf_budget big(void)
{
        struct logbuf_budget g;
        logbuf_budget_init(&g, 1000000, 1u << 30);
        logbuf_budget_roll(&g, 1000, &(uint64_t){ 0 }, &(uint64_t){ 0 });
        return g;
}

static void test_split(void)
{
        struct logbuf_stream out = { 0 }, err = { 0 };
        struct logbuf_budget g = big();
        struct seen s = { 0 };

        logbuf_split(&out, &g, "one\ntw", 6, collect, &s);
        logbuf_split(&err, &g, "e1", 2, collect, &s);
        logbuf_split(&out, &g, "o\n\nthree", 8, collect, &s);
        logbuf_split(&err, &g, "\n", 1, collect, &s);
        CHECK(s.n == 4, "4 lines, got %zu", s.n);
        if (s.n == 4) {
                CHECK_STR(s.lines[0], "one", "first line");
                CHECK_STR(s.lines[1], "two", "a line across two reads");
                CHECK_STR(s.lines[2], "", "an empty line");
                CHECK_STR(s.lines[3], "e1", "stderr's line, not mixed with stdout's");
        }
        CHECK(logbuf_split_flush(&out, &g, collect, &s) == 1 && s.n == 5 && strcmp(s.lines[4], "three") == 0,
              "the unterminated last line at end of file");
        seen_clear(&s);

        char *long_line = malloc(5001);
        memset(long_line, 'x', 5000);
        long_line[5000] = '\n';
        logbuf_split(&out, &g, long_line, 5001, collect, &s);
        CHECK(s.n == 3 && strlen(s.lines[0]) == 2048 && strlen(s.lines[1]) == 2048 && strlen(s.lines[2]) == 904,
              "a 5000-byte line in pieces of 2048, 2048, 904");
        seen_clear(&s);
        memset(long_line, 'y', 4096);
        long_line[4096] = '\n';
        logbuf_split(&out, &g, long_line, 1000, collect, &s);
        logbuf_split(&out, &g, long_line + 1000, 3097, collect, &s);
        CHECK(s.n == 2 && strlen(s.lines[0]) == 2048 && strlen(s.lines[1]) == 2048,
              "a line of exactly twice the maximum is two pieces, no empty third (got %zu)", s.n);
        seen_clear(&s);
        free(long_line);
}

/* The old bug: more lines in one read than the ring holds were logged as
 * NULL and the first ones lost. Every line must reach fn, in order. */
static void test_many_lines_one_read(void)
{
        struct logbuf_stream out = { 0 };
        struct logbuf_budget g = big();
        struct seen s = { 0 };
        struct logbuf b;
        char *data = malloc(5000 * 8);
        size_t len = 0;
        for (int i = 1; i <= 5000; i++)
                len += (size_t)sprintf(data + len, "%d\n", i);
        size_t n = logbuf_split(&out, &g, data, len, collect, &s);
        int in_order = s.n == 5000;
        for (size_t i = 0; in_order && i < s.n; i++)
                in_order = atoi(s.lines[i]) == (int)i + 1;
        CHECK(n == 5000 && in_order, "5000 lines of one read, each once and in order (got %zu)", s.n);

        logbuf_init(&b);
        int grown_in_order = 1;
        size_t cap_at_20 = 0;
        for (size_t i = 0; i < s.n; i++) {
                struct logbuf_meta m = { .time_ms = (int64_t)i, .run = 1 + (i >= 4500), .source = LOGBUF_STDERR,
                                         .prio = 3 };
                logbuf_add(&b, &m, s.lines[i], strlen(s.lines[i]));
                if (i == 19)
                        cap_at_20 = b.cap;
                /* Through each growth and past it: every line kept, in order. */
                if (i < LOGBUF_LINES && (i & (i + 1)) == 0)
                        for (size_t k = 0; k <= i; k++)
                                grown_in_order &= atoi(logbuf_line(&b, i + 1, k)->text) == (int)k + 1;
        }
        CHECK(cap_at_20 == 32, "20 lines take a ring of 32 slots, not %d (%zu)", LOGBUF_LINES, cap_at_20);
        CHECK(grown_in_order, "the ring grows with its lines in order");
        CHECK(b.count == LOGBUF_LINES && b.total == 5000, "the ring keeps the last %d", LOGBUF_LINES);
        CHECK_STR(logbuf_line(&b, LOGBUF_LINES, 0)->text, "4001", "oldest kept line");
        const struct logbuf_entry *last = logbuf_line(&b, 1, 0);
        CHECK_STR(last->text, "5000", "newest line");
        CHECK(last->time_ms == 4999 && last->run == 2 && last->source == LOGBUF_STDERR && last->prio == 3,
              "a line keeps its time, run, source and priority");
        CHECK(logbuf_line(&b, 5000, 1000) == NULL, "no line past the ring");
        struct logbuf_meta loud = { .source = LOGBUF_N_SOURCES + 1, .prio = 99 };
        const struct logbuf_entry *esc = logbuf_add(&b, &loud, "a\x1b" "b", 3);
        CHECK_STR(esc->text, "a\\x1bb", "a control byte is escaped");
        CHECK(esc->prio == LOGBUF_PRIO_MAX && esc->source == LOGBUF_GADGETD, "a priority or source out of range is "
              "clamped");
        CHECK_STR(logbuf_source_name(LOGBUF_MESSAGE), "message", "a source's name");
        logbuf_free(&b);
        seen_clear(&s);
        free(data);
}

static void test_budget(void)
{
        struct logbuf_stream out = { 0 };
        struct logbuf_budget g;
        struct seen s = { 0 };
        uint64_t dropped, bytes;

        logbuf_budget_init(&g, 3, 1000);
        CHECK(!logbuf_budget_roll(&g, 5000, &dropped, &bytes), "the first window begins, none ended");
        logbuf_split(&out, &g, "a\nb\nc\nd\ne\n", 10, collect, &s);
        CHECK(s.n == 3 && g.dropped == 2 && g.dropped_bytes == 4, "3 kept, 2 dropped (%zu, %llu)", s.n,
              (unsigned long long)g.dropped);
        CHECK(!logbuf_budget_roll(&g, 5999, &dropped, &bytes), "the window lasts a second");
        CHECK(logbuf_budget_roll(&g, 6000, &dropped, &bytes) && dropped == 2 && bytes == 4,
              "its end reports 2 lines, 4 bytes dropped");
        CHECK(g.dropped == 0 && g.lines == 0, "the new window starts empty");
        seen_clear(&s);

        /* Dropped in bulk once full: 4,096 newlines at a time, counted exactly. */
        char nl[4096 + 5];
        memset(nl, '\n', 4096);
        memcpy(nl + 4096, "tail", 4);
        logbuf_split(&out, &g, nl, 4096 + 4, collect, &s);
        CHECK(s.n == 3 && g.dropped == 4093, "3 kept, 4093 dropped (%zu, %llu)", s.n,
              (unsigned long long)g.dropped);
        CHECK(out.len == 4 && memcmp(out.partial, "tail", 4) == 0, "the unfinished tail waits");
        logbuf_split(&out, &g, "!\n", 2, collect, &s);
        CHECK(g.dropped == 4094 && g.dropped_bytes == 4093 + 6, "the tail's line is dropped with its bytes");
        seen_clear(&s);

        /* Mixed data over the budget: the bulk count equals the newlines. */
        char mixed[10007];
        size_t want = 0;
        srand(7);
        for (size_t i = 0; i < sizeof mixed; i++) {
                mixed[i] = rand() % 5 == 0 ? '\n' : (char)(rand() % 256);
                want += mixed[i] == '\n';
        }
        logbuf_budget_roll(&g, 7000, &dropped, &bytes);
        g.lines = g.lines_max;
        logbuf_split(&out, &g, mixed, sizeof mixed, collect, &s);
        CHECK(s.n == 0 && g.dropped == want, "bulk count %llu of %zu newlines", (unsigned long long)g.dropped,
              want);
        seen_clear(&s);

        /* The byte budget: a line that does not fit is dropped. */
        logbuf_budget_init(&g, 100, 10);
        logbuf_budget_roll(&g, 1000, &dropped, &bytes);
        logbuf_split(&out, &g, "12345678\nab\nc\n", 14, collect, &s);
        CHECK(s.n == 1 && g.dropped == 2, "10 bytes: one line of 8 (+1), the rest dropped");
        seen_clear(&s);
}

static void test_read_allowance(void)
{
        struct logbuf_budget g;
        uint64_t dropped, bytes;
        logbuf_budget_init(&g, 10, 64 * 1024);
        logbuf_budget_roll(&g, 1000, &dropped, &bytes);
        CHECK(g.read_max == LOGBUF_READ_FACTOR * 64 * 1024, "read allowance %d x the byte budget",
              LOGBUF_READ_FACTOR);
        logbuf_budget_read(&g, g.read_max - 1);
        CHECK(logbuf_budget_room(&g) == 1 && !g.paused, "one byte left");
        logbuf_budget_read(&g, 1);
        CHECK(logbuf_budget_room(&g) == 0 && g.paused, "then reading pauses");
        CHECK(logbuf_budget_left_ms(&g, 1400) == 600, "until the window ends");
        logbuf_budget_roll(&g, 2000, &dropped, &bytes);
        CHECK(!g.paused && logbuf_budget_room(&g) == g.read_max, "the next window reads again");
        logbuf_budget_init(&g, 10, 100);
        CHECK(g.read_max == LOGBUF_READ_MIN, "at least %d bytes are read a second", LOGBUF_READ_MIN);
}

int main(void)
{
        test_split();
        test_many_lines_one_read();
        test_budget();
        test_read_allowance();
        return tap_done();
}
