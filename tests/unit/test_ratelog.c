/* Unit tests of supervisor/system/ratelog.c: one line per window, the rest
 * counted and reported once the window has closed. */
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

int main(void)
{
        test_first_logs_rest_counted();
        test_new_window();
        return tap_done();
}
