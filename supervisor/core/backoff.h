/* backoff: when a failed gadget is started again, and when it is parked
 * instead. Pure code: the caller measures how long each run lasted. */
#pragma once

#include <stdint.h>

#define BACKOFF_FIRST_MS 100          /* the first restart's delay */
#define BACKOFF_MAX_MS 30000          /* the delay doubles up to this */
#define BACKOFF_QUICK_MS 10000        /* a failure this soon after start is quick (QuickFailure=) */
#define BACKOFF_QUICK_MAX 5           /* this many quick failures in a row park */
#define BACKOFF_RESET_MS 600000       /* a run this long starts the delays over */

struct backoff {
        unsigned failures;   /* failures in a row that were restarted */
        unsigned quick;      /* quick failures in a row */
};

/* Counts a failure of a run that lasted ran_ms, quick if shorter than
 * quick_ms (gadgetd's QuickFailure=; 0: BACKOFF_QUICK_MS): returns the
 * delay in ms before the next start, or -1 when the gadget is to be parked. */
int64_t backoff_failed(struct backoff *b, uint64_t ran_ms, uint64_t quick_ms);

/* The delay before the try after `failures` failures in a row:
 * BACKOFF_FIRST_MS doubling up to BACKOFF_MAX_MS (also what delivering a
 * durable alarm again waits, alarms/alarms_deliver.c). */
int64_t backoff_delay_ms(unsigned failures);

/* Forgets the failures (an operator's restart or reload). */
void backoff_reset(struct backoff *b);
