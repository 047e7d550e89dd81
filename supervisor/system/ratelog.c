/* ratelog: one log line per window for events a party can repeat at will. */
#include "ratelog.h"

#include <time.h>

bool ratelog_allow(struct ratelog *r, uint64_t now_ms)
{
        if (r->window_end_ms && now_ms < r->window_end_ms) {
                r->suppressed++;
                return false;
        }
        r->window_end_ms = now_ms + RATELOG_WINDOW_MS;
        return true;
}

uint64_t ratelog_flush(struct ratelog *r, uint64_t now_ms)
{
        uint64_t n = r->suppressed;
        if (!n || now_ms < r->window_end_ms)
                return 0;
        r->suppressed = 0;
        return n;
}
