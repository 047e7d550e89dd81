/* monotime: gadgetd's one reading of CLOCK_MONOTONIC, for timeouts,
 * budgets' windows and durations. */
#pragma once

#include <stdint.h>
#include <time.h>

uint64_t monotime_ms(void);
uint64_t monotime_us(void);
/* Time since t (a CLOCK_MONOTONIC reading), 0 if t is later. */
uint64_t monotime_since_ms(const struct timespec *t);
uint64_t monotime_since_us(const struct timespec *t);
