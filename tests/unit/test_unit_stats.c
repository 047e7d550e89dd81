/* Unit tests of supervisor/core/unit_stats.c's quantile (the p99 of
 * gadgetctl top and the workshop, as Prometheus's histogram_quantile reads
 * the same histogram) and of call_log.c, a gadget's last calls. */
#include <stdlib.h>
#include <string.h>

#include "core/call_log.h"
#include "core/unit_stats.h"
#include "tap.h"

static void test_quantile(void)
{
        struct unit_stats s = { 0 };
        CHECK(unit_stats_quantile_us(&s, 0.99) == 0, "no call: 0");
        /* 100 calls of 300 us (bucket 0..500 us): the p99 lies within it. */
        for (int i = 0; i < 100; i++)
                unit_stats_call(&s, -1, 0, 300);
        CHECK(unit_stats_quantile_us(&s, 0.99) == 495, "p99 of one bucket: %llu, want 495",
              (unsigned long long)unit_stats_quantile_us(&s, 0.99));
        CHECK(unit_stats_quantile_us(&s, 0.5) == 250, "p50: %llu", (unsigned long long)unit_stats_quantile_us(&s, 0.5));
        /* 2 slow calls of 30 ms (bucket 25..50 ms) among 102: the 99th
         * percentile falls in it, (100.98 - 100) / 2 of the way. */
        unit_stats_call(&s, -1, GADGET_ETIMEOUT, 30000);
        unit_stats_call(&s, -1, 0, 30000);
        CHECK(unit_stats_quantile_us(&s, 0.99) == 25000 + 12250, "p99 with two slow calls: %llu",
              (unsigned long long)unit_stats_quantile_us(&s, 0.99));
        CHECK(s.calls == 102 && s.errors == 1, "counted: %llu calls, %llu errors", (unsigned long long)s.calls,
              (unsigned long long)s.errors);
        /* Beyond the last bound: the last finite bound, as Prometheus says. */
        struct unit_stats t = { 0 };
        unit_stats_call(&t, -1, 0, 9000000);
        CHECK(unit_stats_quantile_us(&t, 0.99) == 5000000, "beyond the buckets: %llu",
              (unsigned long long)unit_stats_quantile_us(&t, 0.99));
}

static void test_call_log_ring(void)
{
        struct call_log *log = NULL;
        uint8_t trace[TRACE_ID_LEN];
        memset(trace, 0xab, sizeof trace);
        CHECK(call_log_get(log, 0) == NULL, "empty before the first call");
        char long_name[200];
        memset(long_name, 'm', sizeof long_name - 1);
        long_name[sizeof long_name - 1] = '\0';
        call_log_add(&log, long_name, 0, 5, 1, NULL);
        const struct call_log_entry *e = call_log_get(log, 0);
        CHECK(e && strlen(e->method) == GADGET_NAME_MAX, "a method cut to the bound");
        for (int i = 0; i < CALL_LOG_MAX + 8; i++)
                call_log_add(&log, i % 2 ? "get" : "put", i % 3 ? 0 : GADGET_EDENIED, (uint64_t)i, 100 + (uint64_t)i,
                             i == CALL_LOG_MAX + 7 ? trace : NULL);
        CHECK(log->n == CALL_LOG_MAX, "at most %d kept: %zu", CALL_LOG_MAX, log->n);
        e = call_log_get(log, 0);
        CHECK(e && e->duration_us == CALL_LOG_MAX + 7 && strcmp(e->method, "get") == 0 &&
              memcmp(e->trace_id, trace, TRACE_ID_LEN) == 0, "the newest first, with its trace");
        e = call_log_get(log, CALL_LOG_MAX - 1);
        CHECK(e && e->duration_us == 8 && e->trace_id[0] == 0, "the oldest kept: the 9th (%llu)",
              e ? (unsigned long long)e->duration_us : 0ULL);
        CHECK(call_log_get(log, CALL_LOG_MAX) == NULL, "nothing past the ring");
        call_log_add(&log, "x", 999, 0, 0, NULL);
        CHECK(call_log_get(log, 0)->code == GADGET_EFAILED, "a code past the known ones reads as failed");
        free(log);
}

int main(void)
{
        test_quantile();
        test_call_log_ring();
        return tap_done();
}
