/* Unit tests of supervisor/system/rate.c: a budget a second as a leaky
 * bucket — within it nothing waits, past it the wait is exactly what the
 * bucket needs to drain back, and frequent looks lose nothing. */
#include "system/rate.h"
#include "tap.h"

static void test_within_and_past(void)
{
        struct rate r;
        rate_init(&r, 1000, 5000);
        CHECK(rate_add(&r, 1000, 5000) == 0, "one budget at once is within it");
        CHECK(rate_add(&r, 100, 5000) == 100, "100 past a budget of 1000/s wait 100 ms, %llu",
              (unsigned long long)rate_add(&r, 0, 5000));
        CHECK(rate_level(&r, 5050) == 1050, "50 ms drain 50, level %llu", (unsigned long long)rate_level(&r, 5050));
        CHECK(rate_add(&r, 0, 5100) == 0, "drained back to the budget after the wait");
        CHECK(rate_level(&r, 7000) == 0, "empty once idle long enough");
}

static void test_frequent_looks_drain(void)
{
        /* 100 a second, a look every millisecond: 10 ms drain one value. */
        struct rate r;
        rate_init(&r, 100, 0);
        rate_add(&r, 100, 0);
        for (uint64_t t = 1; t <= 1000; t++)
                rate_add(&r, 0, t);
        CHECK(rate_level(&r, 1000) == 0, "a second of looks drained the budget, level %llu",
              (unsigned long long)rate_level(&r, 1000));
        /* A party that sends whenever it is not waiting: over 10 s at
         * most the budget a second, plus one budget and the one sent past it. */
        uint64_t taken = 0, until = 1000;
        for (uint64_t t = 1000; t < 11000; t++)
                if (t >= until) {
                        taken++;
                        until = t + rate_add(&r, 1, t);
                }
        CHECK(taken >= 1000 && taken <= 1101, "10 s at 100/s took %llu", (unsigned long long)taken);
}

static void test_try(void)
{
        struct rate r;
        int taken = 0;
        rate_init(&r, 16, 0);
        for (int i = 0; i < 100; i++)
                taken += rate_try(&r, 1, 0);
        CHECK(taken == 16, "16 a second: 16 taken at once of 100 asked, %d", taken);
        CHECK(!rate_try(&r, 1, 62) && rate_try(&r, 1, 63), "the next one after 1/16 s (62.5 ms), not before");
}

static void test_none(void)
{
        struct rate r;
        rate_init(&r, 0, 0);
        CHECK(rate_add(&r, UINT32_MAX, 0) == 0, "no budget: nothing waits");
}

int main(void)
{
        test_within_and_past();
        test_frequent_looks_drain();
        test_try();
        test_none();
        return tap_done();
}
