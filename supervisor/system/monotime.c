/* monotime: CLOCK_MONOTONIC readings (monotime.h). */
#include "monotime.h"

static struct timespec now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts;
}

uint64_t monotime_ms(void)
{
        struct timespec ts = now();
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t monotime_ts_us(const struct timespec *t)
{
        return (uint64_t)t->tv_sec * 1000000u + (uint64_t)t->tv_nsec / 1000u;
}

uint64_t monotime_us(void)
{
        struct timespec ts = now();
        return monotime_ts_us(&ts);
}

uint64_t monotime_since_us(const struct timespec *t)
{
        struct timespec ts = now();
        int64_t us = (int64_t)(ts.tv_sec - t->tv_sec) * 1000000 + (ts.tv_nsec - t->tv_nsec) / 1000;
        return us > 0 ? (uint64_t)us : 0;
}

uint64_t monotime_since_ms(const struct timespec *t)
{
        return monotime_since_us(t) / 1000u;
}

static _Thread_local struct {
        unsigned depth;
        struct timespec at;
} turn;

void monotime_turn_begin(void)
{
        turn.depth++;
        turn.at = now();
}

void monotime_turn_mark(void)
{
        turn.at = now();
}

void monotime_turn_end(void)
{
        turn.depth--;
}

struct timespec monotime_turn(void)
{
        return turn.depth ? turn.at : now();
}

uint64_t monotime_turn_us(void)
{
        struct timespec ts = monotime_turn();
        return monotime_ts_us(&ts);
}
