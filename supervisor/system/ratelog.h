/* ratelog: "once per window, with a count" for log lines a party can
 * cause at will (refused connections, requests without a token, accept
 * failures, results that break a signature, failed alarm deliveries).
 * The caller passes the time. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#define RATELOG_WINDOW_MS 10000

struct ratelog {
        uint64_t window_end_ms;  /* 0: no window open */
        uint64_t suppressed;     /* events counted, not logged, in the window */
};

/* One event at now_ms. True if it opens a window and may be logged now;
 * false if it falls in the open window and was only counted. Call
 * ratelog_flush first, so a closed window's count is reported. */
bool ratelog_allow(struct ratelog *r, uint64_t now_ms);
/* The events counted in a window that has closed by now_ms (0 if none or
 * still open); the count starts again at 0. */
uint64_t ratelog_flush(struct ratelog *r, uint64_t now_ms);
/* The one way gadgetd logs such an event: reports a closed window's count
 * ("N more WHAT in the last 10 s"), then logs this event's line (fmt) at
 * L_WARN if it opens a window, with "(more like it: one line per 10 s)",
 * else only counts it. fmt NULL: only the report (a timer's flush).
 * gadget: the lines' gadget, NULL for gadgetd's own. */
void ratelog_warn(struct ratelog *r, uint64_t now_ms, const char *gadget, const char *what, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
void ratelog_vwarn(struct ratelog *r, uint64_t now_ms, const char *gadget, const char *what, const char *fmt,
                   va_list ap) __attribute__((format(printf, 5, 0)));
