/* rate: a budget a second as a leaky bucket (see rate.h). */
#include "rate.h"

void rate_init(struct rate *r, uint64_t per_s, uint64_t now_ms)
{
        *r = (struct rate){ .per_s = per_s, .at_ms = now_ms };
}

/* Why thousandths: the bucket drains per_s thousandths a millisecond, so
 * frequent looks lose no fraction of a value (at 100 a second, one look
 * a millisecond would otherwise drain nothing, ever). */
static void drain(struct rate *r, uint64_t now_ms)
{
        if (now_ms <= r->at_ms)
                return;
        uint64_t ms = now_ms - r->at_ms;
        r->at_ms = now_ms;
        if (r->per_s && ms >= r->level_m / r->per_s + 1)
                r->level_m = 0;
        else
                r->level_m -= r->level_m < ms * r->per_s ? r->level_m : ms * r->per_s;
}

uint64_t rate_level(struct rate *r, uint64_t now_ms)
{
        drain(r, now_ms);
        return (r->level_m + 999) / 1000;
}

uint64_t rate_add(struct rate *r, uint64_t n, uint64_t now_ms)
{
        if (!r->per_s)
                return 0;
        drain(r, now_ms);
        r->level_m += n * 1000;
        uint64_t budget_m = r->per_s * 1000;
        if (r->level_m <= budget_m)
                return 0;
        return (r->level_m - budget_m + r->per_s - 1) / r->per_s;
}

bool rate_try(struct rate *r, uint64_t n, uint64_t now_ms)
{
        if (!r->per_s)
                return true;
        drain(r, now_ms);
        if (r->level_m + n * 1000 > r->per_s * 1000)
                return false;
        r->level_m += n * 1000;
        return true;
}
