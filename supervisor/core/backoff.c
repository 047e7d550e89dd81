/* backoff: the restart delays and parking of a gadget that keeps failing. */
#include "backoff.h"

int64_t backoff_failed(struct backoff *b, uint64_t ran_ms, uint64_t quick_ms)
{
        if (ran_ms >= BACKOFF_RESET_MS)
                b->failures = 0;
        b->quick = ran_ms < (quick_ms ? quick_ms : BACKOFF_QUICK_MS) ? b->quick + 1 : 0;
        if (b->quick >= BACKOFF_QUICK_MAX)
                return -1;
        return backoff_delay_ms(b->failures++);
}

int64_t backoff_delay_ms(unsigned failures)
{
        int64_t delay = BACKOFF_FIRST_MS;
        for (unsigned i = 0; i < failures && delay < BACKOFF_MAX_MS; i++)
                delay *= 2;
        return delay < BACKOFF_MAX_MS ? delay : BACKOFF_MAX_MS;
}

void backoff_reset(struct backoff *b)
{
        b->failures = 0;
        b->quick = 0;
}
