/* unit_stats: a gadget's counters (unit_stats.h). */
#include "unit_stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"

const char *const unit_stats_bounds[UNIT_STATS_BUCKETS] = {
        "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "5",
};
static const uint64_t bounds_us[UNIT_STATS_BUCKETS] = {
        500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000,
};

const char *unit_stats_outcome(unsigned i)
{
        return i == 0 ? "ok" : gadget_error_name(i);
}

int unit_stats_row(struct unit_stats *s, const char *method, bool declared)
{
        const char *name = declared && method ? method : UNIT_STATS_OTHER;
        size_t named = 0;
        for (size_t i = 0; i < s->n_methods; i++) {
                if (strcmp(s->methods[i].name, name) == 0)
                        return (int)i;
                named += strcmp(s->methods[i].name, UNIT_STATS_OTHER) != 0;
        }
        /* Why this is bounded: a name is added only if the gadget declared
         * it, and at most UNIT_STATS_METHODS of them; the rest share one. */
        if (strcmp(name, UNIT_STATS_OTHER) != 0 && named >= UNIT_STATS_METHODS)
                return unit_stats_row(s, NULL, false);
        struct unit_stats_method *m = realloc(s->methods, (s->n_methods + 1) * sizeof *m);
        if (!m)
                return -1;
        s->methods = m;
        m = &s->methods[s->n_methods];
        *m = (struct unit_stats_method){ .name = strdup(name) };
        if (!m->name)
                return -1;
        return (int)s->n_methods++;
}

unsigned unit_stats_outcome_of(int code)
{
        return code > 0 && code < UNIT_STATS_OUTCOMES ? (unsigned)code : code ? GADGET_EFAILED : 0;
}

void unit_stats_call(struct unit_stats *s, int row, int code, uint64_t us)
{
        unsigned o = unit_stats_outcome_of(code);
        if (row >= 0 && (size_t)row < s->n_methods)
                s->methods[row].outcomes[o]++;
        s->calls++;
        s->errors += o != 0;
        s->duration_us += us;
        for (size_t i = 0; i < UNIT_STATS_BUCKETS; i++)
                if (us <= bounds_us[i]) {
                        s->buckets[i]++;
                        return;
                }
        s->slower++;
}

uint64_t unit_stats_quantile_us(const struct unit_stats *s, double q)
{
        uint64_t total = s->slower, below = 0;
        for (size_t i = 0; i < UNIT_STATS_BUCKETS; i++)
                total += s->buckets[i];
        if (!total)
                return 0;
        double rank = q * (double)total;
        for (size_t i = 0; i < UNIT_STATS_BUCKETS; i++) {
                if (s->buckets[i] && (double)(below + s->buckets[i]) >= rank) {
                        uint64_t lo = i ? bounds_us[i - 1] : 0;
                        double share = (rank - (double)below) / (double)s->buckets[i];
                        return lo + (uint64_t)((double)(bounds_us[i] - lo) * share + 0.5);
                }
                below += s->buckets[i];
        }
        return bounds_us[UNIT_STATS_BUCKETS - 1];
}

void unit_stats_phase(struct unit_stats *s, enum unit_phase p, uint64_t now_ms)
{
        if (s->phase_since_ms && now_ms > s->phase_since_ms)
                s->phase_ms[s->phase] += now_ms - s->phase_since_ms;
        s->phase = p;
        s->phase_since_ms = now_ms;
}

void unit_stats_clear(struct unit_stats *s)
{
        for (size_t i = 0; i < s->n_methods; i++)
                free(s->methods[i].name);
        free(s->methods);
        *s = (struct unit_stats){ 0 };
}

int unit_stats_copy(const struct unit_stats *s, struct unit_stats *out)
{
        *out = *s;
        out->methods = NULL;
        out->n_methods = 0;
        if (!s->n_methods)
                return 0;
        out->methods = calloc(s->n_methods, sizeof *out->methods);
        if (!out->methods)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_methods; i++) {
                out->methods[i] = s->methods[i];
                if (!(out->methods[i].name = strdup(s->methods[i].name))) {
                        out->n_methods = i;
                        unit_stats_clear(out);
                        return -ENOMEM;
                }
        }
        out->n_methods = s->n_methods;
        return 0;
}
