/* Unit tests of supervisor/core/backoff.c: the restart contract of docs/operating.md —
 * delays from 100 ms doubling up to 30 s, parked at the 5th quick failure
 * in a row, delays start over after a long run. */
#include "core/backoff.h"
#include "tap.h"

static void test_quick_failures_park_at_fifth(void)
{
        struct backoff b = { 0 };
        int64_t want[] = { 100, 200, 400, 800 };
        for (int i = 0; i < 4; i++) {
                int64_t d = backoff_failed(&b, 50, 0);
                CHECK(d == want[i], "quick failure %d: delay %lld, want %lld", i + 1, (long long)d,
                      (long long)want[i]);
        }
        CHECK(backoff_failed(&b, 50, 0) == -1, "the 5th quick failure in a row parks");
        CHECK(b.quick == 5, "5 counted, %u", b.quick);
}

static void test_slow_failures_double_to_cap(void)
{
        struct backoff b = { 0 };
        int64_t d = 0, last = 0;
        for (int i = 0; i < 20; i++) {
                d = backoff_failed(&b, BACKOFF_QUICK_MS + 500, 0);
                CHECK(d >= 0, "a failure after a long run never parks (failure %d)", i + 1);
                CHECK(d == BACKOFF_MAX_MS || d == 2 * last || i == 0, "failure %d: %lld after %lld", i + 1,
                      (long long)d, (long long)last);
                last = d;
        }
        CHECK(d == 30000, "the delay reaches 30 s and stays there: %lld", (long long)d);
}

static void test_slow_failure_breaks_quick_run(void)
{
        struct backoff b = { 0 };
        for (int i = 0; i < 4; i++)
                backoff_failed(&b, 10, 0);
        CHECK(backoff_failed(&b, BACKOFF_QUICK_MS, 0) == 1600, "a slow 5th failure restarts, delay doubled");
        for (int i = 0; i < 4; i++)
                CHECK(backoff_failed(&b, 10, 0) >= 0, "quick failure %d after the slow one restarts", i + 1);
        CHECK(backoff_failed(&b, 10, 0) == -1, "5 quick in a row again park");
}

static void test_long_run_and_reset_start_over(void)
{
        struct backoff b = { 0 };
        for (int i = 0; i < 12; i++)
                backoff_failed(&b, BACKOFF_QUICK_MS, 0);
        CHECK(backoff_failed(&b, BACKOFF_RESET_MS, 0) == 100, "a run of 10 min starts the delays over");
        CHECK(backoff_failed(&b, 10, 0) == 200, "then doubles again");
        backoff_reset(&b);
        CHECK(backoff_failed(&b, 10, 0) == 100, "an operator's restart starts them over");
}

/* QuickFailure=: another bound for a quick failure; 0 is the default's. */
static void test_quick_bound_set(void)
{
        struct backoff b = { 0 };
        CHECK(backoff_failed(&b, 2000, 2000) == 100 && b.quick == 0, "a run as long as the bound is not quick");
        CHECK(backoff_failed(&b, 1999, 2000) == 200 && b.quick == 1, "a run shorter than the bound is quick");
        CHECK(backoff_failed(&b, 2000, 0) == 400 && b.quick == 2, "0: the default bound, %d ms", BACKOFF_QUICK_MS);
}

/* The delays of alarm deliveries: first, doubling, capped, never parked. */
static void test_delay_ms(void)
{
        CHECK(backoff_delay_ms(0) == BACKOFF_FIRST_MS, "no failure yet: the first delay");
        CHECK(backoff_delay_ms(1) == 2 * BACKOFF_FIRST_MS && backoff_delay_ms(2) == 4 * BACKOFF_FIRST_MS,
              "it doubles");
        CHECK(backoff_delay_ms(40) == BACKOFF_MAX_MS && backoff_delay_ms(1000000) == BACKOFF_MAX_MS,
              "capped, however many failures");
}

int main(void)
{
        test_delay_ms();
        test_quick_failures_park_at_fifth();
        test_slow_failures_double_to_cap();
        test_slow_failure_breaks_quick_run();
        test_long_run_and_reset_start_over();
        test_quick_bound_set();
        return tap_done();
}
