/* timer: arming a libevent timer in milliseconds, the one conversion to a
 * timeval (every timer of gadgetd's files). */
#pragma once

#include <stdint.h>
#include <sys/time.h>
#include <event2/event.h>

/* ms as a timeval (for libevent calls that take one, event_base_once). */
static inline struct timeval timer_tv_ms(uint64_t ms)
{
        return (struct timeval){ .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
}

/* Arms ev to fire in ms (again: replaces the time it was armed for). */
static inline int timer_arm_ms(struct event *ev, uint64_t ms)
{
        struct timeval tv = timer_tv_ms(ms);
        return event_add(ev, &tv);
}

/* Disarms ev if it was made: a timer made at its first use (a unit's, at
 * its first start) may not be yet. */
static inline void timer_stop(struct event *ev)
{
        if (ev)
                event_del(ev);
}
