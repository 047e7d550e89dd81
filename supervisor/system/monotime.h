/* monotime: gadgetd's one reading of CLOCK_MONOTONIC, for timeouts,
 * budgets' windows and durations. */
#pragma once

#include <stdint.h>
#include <time.h>

uint64_t monotime_ms(void);
uint64_t monotime_us(void);
/* A CLOCK_MONOTONIC reading in whole µs. */
uint64_t monotime_ts_us(const struct timespec *t);
/* Time since t (a CLOCK_MONOTONIC reading), 0 if t is later. */
uint64_t monotime_since_ms(const struct timespec *t);
uint64_t monotime_since_us(const struct timespec *t);

/* A turn's one reading: between monotime_turn_begin and _end (a conn's
 * batch of frames) monotime_turn and monotime_turn_us give the clock as
 * read at the begin or at the last monotime_turn_mark (more bytes read
 * in the turn), elsewhere (or on another thread) the clock now. A nested
 * begin reads it again: the readings only move forward. Why this is safe
 * where it is used: what a turn handles was read before its reading, so
 * a span or duration from it never ends before what it waited for; the
 * loop's own timers run on a reading per turn too (libevent's cached
 * time); a turn is bounded by its conn's budget; a deadline from it is
 * earlier, never later, than one from the clock now. Never for a wait
 * that polls the clock inside a turn: it would not move. */
void monotime_turn_begin(void);
void monotime_turn_mark(void);
void monotime_turn_end(void);
struct timespec monotime_turn(void);
uint64_t monotime_turn_us(void);
