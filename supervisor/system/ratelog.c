/* ratelog: one log line per window for events a party can repeat at will. */
#include "ratelog.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "log.h"

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

void ratelog_vwarn(struct ratelog *r, uint64_t now_ms, const char *gadget, const char *what, const char *fmt,
                   va_list ap)
{
        char msg[512];
        uint64_t n = ratelog_flush(r, now_ms);

        if (n)
                log_msg(L_WARN, gadget, "%llu more %s in the last %d s", (unsigned long long)n, what,
                        RATELOG_WINDOW_MS / 1000);
        if (!fmt || !ratelog_allow(r, now_ms))
                return;
        vsnprintf(msg, sizeof msg, fmt, ap);
        log_msg(L_WARN, gadget, "%s (more like it: one line per %d s)", msg, RATELOG_WINDOW_MS / 1000);
}

void ratelog_warn(struct ratelog *r, uint64_t now_ms, const char *gadget, const char *what, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        ratelog_vwarn(r, now_ms, gadget, what, fmt, ap);
        va_end(ap);
}
