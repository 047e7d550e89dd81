/* unit_stats: what a gadget's metrics count, kept where the events happen
 * (its starts in unit.c, its calls in calls.c, its log drops in
 * unit_output.c) and read by the metrics endpoint and gadgetctl top. Every
 * label is bounded: a method is one the gadget declared (its hello), at
 * most UNIT_STATS_METHODS of them, the rest and every undeclared name
 * under one fixed label; an outcome is "ok" or an error code's name. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UNIT_STATS_METHODS 64          /* methods counted by name; the rest under UNIT_STATS_OTHER */
#define UNIT_STATS_OTHER "_other"      /* an undeclared method, or one past UNIT_STATS_METHODS */
#define UNIT_STATS_OUTCOMES 13         /* "ok" and the GADGET_E* codes 1..12 */
#define UNIT_STATS_BUCKETS 12          /* the call-duration histogram's finite buckets */

/* Where a gadget's time goes: parked idle (state idle), or awake (a
 * process of its own: starting, ready, stopping); the other states count
 * in neither. */
enum unit_phase { UNIT_PHASE_NONE, UNIT_PHASE_IDLE, UNIT_PHASE_AWAKE, UNIT_PHASE_N };

/* Why a gadget's process started again. */
enum unit_restart_cause { UNIT_RESTART_EXIT, UNIT_RESTART_REQUEST, UNIT_RESTART_N };

/* The calls of one method, by outcome. */
struct unit_stats_method {
        char *name;
        uint64_t outcomes[UNIT_STATS_OUTCOMES];
};

struct unit_stats {
        uint64_t starts;                       /* its processes started (first starts and restarts) */
        uint64_t restarts[UNIT_RESTART_N];
        struct unit_stats_method *methods;     /* the last is UNIT_STATS_OTHER once used */
        size_t n_methods;
        uint64_t calls, errors;                /* every call ended, and those not "ok" */
        uint64_t buckets[UNIT_STATS_BUCKETS];  /* calls that took at most unit_stats_bounds[i] s (not cumulative) */
        uint64_t slower;                       /* and beyond the last bound */
        uint64_t duration_us;                  /* their sum */
        uint64_t log_dropped;                  /* output lines dropped over its log budget */
        uint64_t limit_hits[3];                /* of its ended runs, by enum limiter_hit */
        uint64_t budget_waits[2];              /* its input's waits for FrameValuesPerSecond=, FrameBytesPerSecond= */
        uint64_t audit_dropped[2];             /* its audit records not written one by one, by enum audit_drop */
        uint64_t phase_ms[UNIT_PHASE_N];       /* time spent in each phase, up to phase_since_ms */
        uint64_t phase_since_ms;               /* monotime_ms when phase began */
        enum unit_phase phase;
};

/* The buckets' upper bounds, in seconds and in microseconds. */
extern const char *const unit_stats_bounds[UNIT_STATS_BUCKETS];
/* An outcome's label: "ok" (0) or the code's name. */
const char *unit_stats_outcome(unsigned i);
/* The outcome (an index below UNIT_STATS_OUTCOMES) of an answer with code
 * (0: a result; an unknown code counts as GADGET_EFAILED). */
unsigned unit_stats_outcome_of(int code);
/* The row of method's calls (declared: the gadget announced it; an
 * undeclared one counts under UNIT_STATS_OTHER): its index, or -1 without
 * memory. */
int unit_stats_row(struct unit_stats *s, const char *method, bool declared);
/* A call of row (-1: counted in no method's row) ended with code (0: a
 * result) after us microseconds. */
void unit_stats_call(struct unit_stats *s, int row, int code, uint64_t us);
/* The gadget is in phase p from now_ms on (the time of the one before
 * counted); with p its current phase, its time so far is counted. */
void unit_stats_phase(struct unit_stats *s, enum unit_phase p, uint64_t now_ms);
void unit_stats_clear(struct unit_stats *s);
/* The q-quantile (0 < q <= 1) of its calls' durations in microseconds,
 * as Prometheus's histogram_quantile reads the histogram: linear within
 * the bucket it falls in, the last finite bound if beyond it; 0 without
 * calls. gadgetctl top's and the workshop's p99. */
uint64_t unit_stats_quantile_us(const struct unit_stats *s, double q);
/* A deep copy of s into out (for a scrape in parts): 0 or -ENOMEM. */
int unit_stats_copy(const struct unit_stats *s, struct unit_stats *out);
