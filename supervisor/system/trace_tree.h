/* trace_tree: spans (trace.h) as a control TraceTree and back — the one
 * conversion, for gadgetctl trace's answer (control/trace.c) and a node's
 * answer to another (cluster/forward.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"
#include "trace.h"

struct trace_tree {
        Control__TraceTree msg;      /* answer_of(&msg.base) sends it */
        Control__Span **items;
        char (*hex)[2][2 * TRACE_SPAN_ID_LEN + 1];
        char id[2 * TRACE_ID_LEN + 1];
};

/* tt as the n spans (borrowed: they outlive tt's use) of trace id, and
 * the unreached nodes (borrowed). 0 or -ENOMEM. */
int trace_tree_fill(struct trace_tree *tt, const uint8_t id[TRACE_ID_LEN], const struct span *const *spans, size_t n,
                    char **unreached, size_t n_unreached);
void trace_tree_clear(struct trace_tree *tt);
/* A validated span of a TraceTree (validate_response.c) as a span of trace
 * id. */
void trace_span_of(const Control__Span *m, const uint8_t id[TRACE_ID_LEN], struct span *out);
