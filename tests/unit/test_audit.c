/* Unit tests of supervisor/system/audit_read.c and audit_budget.c: which lines are
 * a gadget's, the last n records found backwards across rotated files and
 * slices, a receiver with no room, lines that are not gadgetd's; records
 * per second with the excess summarized by kind, failures counted; the
 * sequence of a line and the files' last one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "system/audit.h"
#include "system/audit_budget.h"
#include "tap.h"

static char dir[] = "/tmp/test-audit-XXXXXX";

/* A record line as audit.c writes it, numbered by "bytes". */
static void put(FILE *f, const char *gadget, int seq, size_t pad)
{
        fprintf(f, "{\"time\":\"2026-01-01T00:00:00.000Z\",\"gadget\":\"%s\",\"binding\":\"KV\",\"op\":\"get\","
                   "\"outcome\":\"ok\",\"bytes\":%d,\"duration_us\":1,\"detail\":\"", gadget, seq);
        for (size_t i = 0; i < pad; i++)
                fputc('x', f);
        fputs("\"}\n", f);
}

static FILE *open_file(uint32_t k)
{
        char path[256];
        audit_file_path(dir, k, path, sizeof path);
        return fopen(path, "w");
}

static void test_line_of(void)
{
        const char *a = "{\"time\":\"2026-01-01T00:00:00.000Z\",\"gadget\":\"big\",\"binding\":\"B\"}";
        CHECK(audit_line_of(a, strlen(a), "big"), "a record of big");
        CHECK(!audit_line_of(a, strlen(a), "bi"), "not of a prefix of its name");
        CHECK(!audit_line_of(a, strlen(a), "bigger"), "not of a longer name");
        CHECK(!audit_line_of(a, 40, "big"), "not when cut before the name");
        const char *fake = "{\"time\":\"x\",\"gadget\":\"other\",\"detail\":\"\\\",\\\"gadget\\\":\\\"big\\\",\"}";
        CHECK(!audit_line_of(fake, strlen(fake), "big") && audit_line_of(fake, strlen(fake), "other"),
              "an escaped name inside a string is not the gadget field");
        const char *two = "{\"time\":\"t\",\"gadget\":\"a\",\n{\"time\":\"t\",\"gadget\":\"b\",";
        CHECK(audit_line_of(two, strlen(two), "a") && !audit_line_of(two, strlen(two), "b"),
              "only the first line is read");
        CHECK(!audit_line_of("garbage", 7, "a") && !audit_line_of("", 0, "a"), "garbage is no one's");
}

/* A receiver collecting "bytes" numbers, with room for at most room lines
 * per step (0: unlimited). */
struct got {
        int seq[20000];
        size_t n, room, this_step;
};

static int emit(void *arg, const char *line, size_t len)
{
        struct got *g = arg;
        if (g->room && g->this_step == g->room)
                return 0;
        const char *b = strstr(line, "\"bytes\":");
        if (!b || b > line + len || g->n == sizeof g->seq / sizeof *g->seq)
                return -EINVAL;
        g->seq[g->n++] = atoi(b + 8);
        g->this_step++;
        return 1;
}

/* Reads gadget's last n records; the count of steps, or -1. */
static int read_all(const char *gadget, size_t n, struct got *g, size_t room)
{
        struct audit_reader *r;
        int e, steps = 0;
        memset(g, 0, sizeof *g);
        g->room = room;
        if (audit_reader_new(dir, 2, gadget, n, &r) < 0)
                return -1;
        do {
                g->this_step = 0;
                e = audit_reader_step(r, emit, g);
                steps++;
        } while (e == 1 && steps < 100000);
        audit_reader_free(r);
        return e == 0 ? steps : -1;
}

/* Whether g holds exactly from..to-1. */
static int seq_is(const struct got *g, int from, int to)
{
        if (g->n != (size_t)(to - from))
                return 0;
        for (size_t i = 0; i < g->n; i++)
                if (g->seq[i] != from + (int)i)
                        return 0;
        return 1;
}

static void test_reader(void)
{
        static struct got g;
        /* 3 files, oldest audit.log.2: "a" 0..2999 interleaved with "b", each
         * line ~300 bytes, so each file spans several slices. */
        int seq = 0;
        for (uint32_t k = 3; k-- > 0;) {
                FILE *f = open_file(k);
                for (int i = 0; i < 1000; i++, seq++) {
                        put(f, "a", seq, 200);
                        put(f, "b", seq, 200);
                }
                if (k == 1) { /* a line no slice holds whole: not gadgetd's, skipped */
                        for (int i = 0; i < 70000; i++)
                                fputc('{', f);
                        fputc('\n', f);
                }
                fclose(f);
        }
        CHECK(read_all("a", 0, &g, 0) > 0 && seq_is(&g, 0, 3000), "every record, oldest first (%zu)", g.n);
        CHECK(read_all("a", 5, &g, 0) > 0 && seq_is(&g, 2995, 3000), "the last 5");
        CHECK(read_all("a", 1500, &g, 0) > 0 && seq_is(&g, 1500, 3000), "the last 1500, across files");
        CHECK(read_all("a", 9999, &g, 0) > 0 && seq_is(&g, 0, 3000), "more than there are: all");
        CHECK(read_all("a", 0, &g, 7) > 0 && seq_is(&g, 0, 3000), "a receiver with room for 7 per step");
        CHECK(read_all("c", 10, &g, 0) > 0 && g.n == 0, "no record of c");

        /* Bounded work: a step reads at most one slice, so reading the whole
         * ~1.8 MB takes many steps. */
        int steps = read_all("b", 0, &g, 0);
        CHECK(steps > 25 && seq_is(&g, 0, 3000), "%d steps of at most %u bytes", steps, AUDIT_SLICE);

        /* An unfinished last line (no newline) is not given. */
        FILE *f = open_file(0);
        put(f, "a", 0, 10);
        fputs("{\"time\":\"t\",\"gadget\":\"a\",\"bytes\":1", f);
        fclose(f);
        char path[256];
        audit_file_path(dir, 1, path, sizeof path);
        unlink(path);
        audit_file_path(dir, 2, path, sizeof path);
        unlink(path);
        CHECK(read_all("a", 0, &g, 0) > 0 && seq_is(&g, 0, 1), "a last line without newline is left out");
        audit_file_path(dir, 0, path, sizeof path);
        unlink(path);
        CHECK(read_all("a", 3, &g, 0) > 0 && g.n == 0, "no file: no record");
}

/* The sequence of a line: its first ,"seq": (a quote inside a value is
 * escaped, so a value cannot fake it); the highest of the files' whole
 * last lines (a torn one is no record). */
#define SEQ_OF(text) audit_seq_of(text, strlen(text))
static void test_seq(void)
{
        static const char line[] = "{\"time\":\"t\",\"gadget\":\"a\",\"node\":\"n\",\"seq\":1796587063740132,"
                                   "\"detail\":\"x\\\",\\\"seq\\\":9\"}";
        CHECK(audit_seq_of(line, sizeof line - 1) == 1796587063740132ull, "the seq after node");
        CHECK(SEQ_OF("{\"detail\":\"x\\\",\\\"seq\\\":9\"}") == 0, "not in a value");
        CHECK(SEQ_OF("{\"node\":\"n\",\"seq\":}") == 0, "no digits: none");
        CHECK(SEQ_OF("{\"node\":\"n\",\"seq\":99999999999999999999999}") == 0, "too big: none");
        CHECK(SEQ_OF("{\"node\":\"n\"}\n,\"seq\":5") == 0, "the line ends at its newline");
        FILE *f = open_file(1);
        for (int i = 1; i <= 50; i++)
                fprintf(f, "{\"time\":\"t\",\"gadget\":\"a\",\"node\":\"n\",\"seq\":%d}\n", i);
        fclose(f);
        f = open_file(0);
        for (int i = 30; i <= 40; i++)
                fprintf(f, "{\"time\":\"t\",\"gadget\":\"a\",\"node\":\"n\",\"seq\":%d}\n", i);
        fputs("{\"time\":\"t\",\"gadget\":\"a\",\"node\":\"n\",\"seq\":99", f);
        fclose(f);
        CHECK(audit_last_seq(dir, 0) == 40, "audit.log's last whole line: %llu",
              (unsigned long long)audit_last_seq(dir, 0));
        CHECK(audit_last_seq(dir, 3) == 50, "the highest of the files: %llu", (unsigned long long)audit_last_seq(dir, 3));
        char path[256];
        for (uint32_t k = 0; k < 2; k++) {
                audit_file_path(dir, k, path, sizeof path);
                unlink(path);
        }
        CHECK(audit_last_seq(dir, 3) == 0, "no file: 0");
}

static struct audit_record rec(const char *gadget, const char *binding, const char *op, enum audit_outcome o)
{
        return (struct audit_record){ .gadget = gadget, .binding = binding, .op = op, .outcome = o, .bytes = 2,
                                      .duration_us = 3 };
}

struct ended {
        int calls;
        uint64_t total, unwritten, other;
        size_t kinds;
};

static void on_ended(void *arg, const struct audit_window *w)
{
        struct ended *e = arg;
        e->calls++;
        e->kinds = w->n_sums;
        e->unwritten += w->unwritten;
        for (size_t i = 0; w->sums && i < AUDIT_SUMMARY_SLOTS; i++) {
                e->total += w->sums[i].count;
                if (i >= AUDIT_SUMMARIES_MAX)
                        e->other += w->sums[i].count;
        }
}

static void test_budget(void)
{
        struct audit_budget b = { .rate = 3 };
        struct audit_record r = rec("g", "KV", "get", AUDIT_DENIED);
        int took = 0;
        for (int i = 0; i < 10; i++)
                took += audit_budget_take(&b, &r, 1000) == 1;
        CHECK(took == 3, "3 records within the budget of 3 per second (%d)", took);
        struct audit_record other = rec("h", "KV", "get", AUDIT_OK);
        CHECK(audit_budget_take(&b, &other, 1000) == 1, "another gadget has its own budget");
        struct ended e = { 0 };
        CHECK(audit_budget_flush(&b, 1500, false, on_ended, &e) && e.calls == 0, "nothing ends within the second");
        CHECK(!audit_budget_flush(&b, 2000, false, on_ended, &e) && e.calls == 1 && e.total == 7 && e.kinds == 1,
              "at its end: one summary of the 7 others");
        CHECK(audit_budget_take(&b, &r, 2000) == 1, "a new second, a new budget");

        /* More kinds than summaries: the rest in "other", nothing lost. */
        char op[16];
        for (int i = 0; i < 3; i++)
                audit_budget_take(&b, &r, 2001);
        for (int i = 0; i < 40; i++) {
                snprintf(op, sizeof op, "op%d", i);
                struct audit_record k = rec("g", "KV", op, AUDIT_OK);
                audit_budget_take(&b, &k, 2002);
        }
        e = (struct ended){ 0 };
        audit_budget_flush(&b, 3001, false, on_ended, &e);
        /* 1 KV.get over the budget, then 40 kinds: 15 get a summary of their own. */
        CHECK(e.total == 41 && e.kinds == AUDIT_SUMMARIES_MAX && e.other == 40 - (AUDIT_SUMMARIES_MAX - 1),
              "%d kinds summarized, the rest as other (total %llu, other %llu)", AUDIT_SUMMARIES_MAX,
              (unsigned long long)e.total, (unsigned long long)e.other);

        /* Failures: counted per gadget, reported at the end of the second. */
        audit_budget_failed(&b, "g", -ENOSPC, 4000);
        audit_budget_failed(&b, "g", -ENOSPC, 4001);
        e = (struct ended){ 0 };
        audit_budget_flush(&b, 5000, false, on_ended, &e);
        CHECK(e.calls == 1 && e.unwritten == 2, "2 failures reported once");
        audit_budget_take(&b, &r, 6000);
        e = (struct ended){ 0 };
        CHECK(!audit_budget_flush(&b, 6001, true, on_ended, &e) && LIST_EMPTY(&b.windows) && e.calls == 0,
              "forced: every window gone, nothing to report");

        /* 1,000 gadgets at once (the index grows under them): each its
         * own budget, each found again, each window reported once. */
        char name[16];
        for (int round = 0; round < 2; round++)
                for (int i = 0; i < 1000; i++) {
                        snprintf(name, sizeof name, "g%d", i);
                        struct audit_record m = rec(name, "KV", "get", AUDIT_OK);
                        audit_budget_take(&b, &m, 7000);
                        audit_budget_take(&b, &m, 7000);
                }
        e = (struct ended){ 0 };
        CHECK(!audit_budget_flush(&b, 8000, false, on_ended, &e) && LIST_EMPTY(&b.windows) && e.calls == 1000 &&
                      e.total == 1000 && b.by_name.n == 0,
              "1000 gadgets: 1000 windows of one summarized record each (%d windows, %llu records)", e.calls,
              (unsigned long long)e.total);
        CHECK(audit_budget_take(&b, &r, 8000) == 1 && b.by_name.n == 1, "a gadget's window after all were gone");

        struct audit_budget none = { .rate = 0 };
        took = 0;
        for (int i = 0; i < 1000; i++)
                took += audit_budget_take(&none, &r, 1) == 1;
        CHECK(took == 1000 && LIST_EMPTY(&none.windows), "rate 0: no budget");
        audit_budget_free(&b);
}

int main(void)
{
        if (!mkdtemp(dir)) {
                printf("Bail out! mkdtemp: %s\n", strerror(errno));
                return 1;
        }
        test_line_of();
        test_reader();
        test_seq();
        test_budget();
        rmdir(dir);
        return tap_done();
}
