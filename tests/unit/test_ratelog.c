/* Unit tests of supervisor/system/ratelog.c: one line per window, the rest
 * counted and reported once the window has closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "system/ratelog.h"
#include "tap.h"

static void test_first_logs_rest_counted(void)
{
        struct ratelog r = { 0 };
        CHECK(ratelog_allow(&r, 1000), "the first event is logged");
        int logged = 0;
        for (int i = 0; i < 4999; i++)
                logged += ratelog_allow(&r, 1000 + (uint64_t)i);
        CHECK(logged == 0, "events in the window are not logged (%d were)", logged);
        CHECK(r.suppressed == 4999, "4999 counted, %llu", (unsigned long long)r.suppressed);
        CHECK(ratelog_flush(&r, 1000 + RATELOG_WINDOW_MS - 1) == 0, "no report while the window is open");
        CHECK(ratelog_flush(&r, 1000 + RATELOG_WINDOW_MS) == 4999, "the count once it closed");
        CHECK(ratelog_flush(&r, 1000 + 2 * RATELOG_WINDOW_MS) == 0, "reported once");
}

static void test_new_window(void)
{
        struct ratelog r = { 0 };
        CHECK(ratelog_allow(&r, 0), "an event at time 0 opens a window");
        CHECK(!ratelog_allow(&r, RATELOG_WINDOW_MS - 1), "inside the window");
        CHECK(ratelog_flush(&r, RATELOG_WINDOW_MS) == 1, "one counted");
        CHECK(ratelog_allow(&r, RATELOG_WINDOW_MS), "the next window logs again");
        CHECK(ratelog_flush(&r, 5 * RATELOG_WINDOW_MS) == 0, "nothing counted in it");
}

/* What ratelog_warn writes to stderr (gadgetd's log without a journal). */
static char *warned(void (*fn)(struct ratelog *), struct ratelog *r)
{
        static char buf[4096];
        FILE *f = tmpfile();
        int saved = dup(2);
        fflush(stderr);
        dup2(fileno(f), 2);
        fn(r);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        rewind(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static void three_events(struct ratelog *r)
{
        for (int i = 0; i < 3; i++)
                ratelog_warn(r, 1000 + (uint64_t)i, "g", "things refused", "thing %d refused", i);
}

static void one_later(struct ratelog *r)
{
        ratelog_warn(r, 1000 + RATELOG_WINDOW_MS, NULL, "things refused", "thing %d refused", 9);
}

static void flush_only(struct ratelog *r)
{
        ratelog_warn(r, 1000 + 3 * RATELOG_WINDOW_MS, NULL, "things refused", NULL);
}

static void test_warn(void)
{
        struct ratelog r = { 0 };
        const char *out = warned(three_events, &r);
        CHECK(strstr(out, "thing 0 refused (more like it: one line per 10 s)") && !strstr(out, "thing 1") &&
                      !strstr(out, "thing 2"),
              "the first event's line, the others counted: %s", out);
        out = warned(one_later, &r);
        CHECK(strstr(out, "2 more things refused in the last 10 s") && strstr(out, "thing 9 refused"),
              "the closed window's count, then the new window's line: %s", out);
        out = warned(flush_only, &r);
        CHECK(!*out, "a flush with nothing counted writes nothing: %s", out);
}

int main(void)
{
        test_first_logs_rest_counted();
        test_new_window();
        test_warn();
        return tap_done();
}
