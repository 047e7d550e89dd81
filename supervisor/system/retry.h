/* retry: the delay before trying again after failures in a row (a lost
 * connection reconnecting): RETRY_FIRST_MS, doubling up to the caller's
 * most; the caller starts over from 0 after a success. Pure code. */
#pragma once

#define RETRY_FIRST_MS 100

/* The next delay after one of cur_ms (0: the first failure). */
static inline unsigned retry_next_ms(unsigned cur_ms, unsigned max_ms)
{
        unsigned next = cur_ms ? cur_ms * 2 : RETRY_FIRST_MS;
        return next > max_ms ? max_ms : next;
}
