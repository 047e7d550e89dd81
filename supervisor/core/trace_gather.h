/* trace_gather: the spans of one trace across the nodes, for gadgetctl
 * trace (control/trace.c) and the workshop (gateway_activity.c). This
 * node's spans first; then each node its spans name (where a call came
 * from or was forwarded to) is asked over the link for its own, and the
 * nodes their spans name in turn, at most CONTROL_TRACE_NODES_MAX nodes
 * and the caller's bound of spans in all. Every answer is a node's
 * (validated by the link, validate_response.c); a node that does not
 * answer is named as unreached, and the spans come without it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "system/trace.h"

struct core;

/* What was gathered: valid during the done callback only. */
struct trace_gathered {
        const char *hex;                  /* the trace id, 32 hex digits */
        const uint8_t *id;
        const struct span *const *spans;  /* by start */
        size_t n;
        char **unreached;                 /* the nodes asked that did not answer */
        size_t n_unreached;
        size_t n_nodes;                   /* the nodes asked, this one included */
};

/* Gathers the spans of trace hex (valid: 32 lower-case hex digits, not
 * all zero), at most max (<= CONTROL_TRACE_SPANS_MAX); here_only: this
 * node's only. done is called once with them — before this returns if no
 * node is asked; it must not free what arg names until then. 0, or
 * -ENOMEM (done is not called). */
int trace_gather(const struct core *core, const char *hex, bool here_only, size_t max,
                 void (*done)(void *arg, const struct trace_gathered *r), void *arg);
