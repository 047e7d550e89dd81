/* store_latency: the shared store's query durations (store_latency.h). */
#include "store_latency.h"

#include <stddef.h>

const char *const store_latency_bounds[STORE_LATENCY_BUCKETS] = {
        "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.1", "0.5", "2.5",
};
static const uint64_t bounds_us[STORE_LATENCY_BUCKETS] = {
        250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 500000, 2500000,
};

const char *store_op_name(enum store_op op)
{
        static const char *const names[STORE_OP_N] = { [STORE_OP_KV_GET] = "kv_get", [STORE_OP_KV_PUT] = "kv_put",
                                                       [STORE_OP_LEASE] = "lease", [STORE_OP_OTHER] = "other" };
        return op < STORE_OP_N ? names[op] : names[STORE_OP_OTHER];
}

void store_latency_add(struct store_latency *l, enum store_op op, uint64_t us)
{
        if (!l)
                return;
        if (op >= STORE_OP_N)
                op = STORE_OP_OTHER;
        l->count[op]++;
        l->sum_us[op] += us;
        for (size_t i = 0; i < STORE_LATENCY_BUCKETS; i++)
                if (us <= bounds_us[i]) {
                        l->buckets[op][i]++;
                        return;
                }
        l->slower[op]++;
}
