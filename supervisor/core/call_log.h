/* call_log: a gadget's recent calls, for the workshop's call log — a
 * fixed ring of the last CALL_LOG_MAX, each its method (the bounded label
 * of unit_stats.h: a declared method's name, or UNIT_STATS_OTHER), its
 * outcome, duration and trace id. Filled where a call ends (calls.c),
 * next to its counters: a copy, no allocation but the ring's first. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "contract.h"
#include "traceparent.h"

#define CALL_LOG_MAX 32

struct call_log_entry {
        uint64_t end_ms;                   /* monotonic (monotime.h) when it ended */
        uint64_t duration_us;
        uint8_t trace_id[TRACE_ID_LEN];    /* all zero: none (tracing off, or refused at the door) */
        uint8_t code;                      /* 0: a result; else a GADGET_E* code */
        char method[GADGET_NAME_MAX + 1];
};

struct call_log {
        struct call_log_entry e[CALL_LOG_MAX];
        size_t next, n;                    /* where the next goes; how many are kept */
};

/* Adds a call to *log (made at the first; without memory the call is not
 * logged): method cut to GADGET_NAME_MAX, trace NULL for none. */
void call_log_add(struct call_log **log, const char *method, int code, uint64_t duration_us, uint64_t end_ms,
                  const uint8_t *trace);
/* The i-th newest kept call (0: the last), or NULL. */
const struct call_log_entry *call_log_get(const struct call_log *log, size_t i);
