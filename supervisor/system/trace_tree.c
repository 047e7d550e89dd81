/* trace_tree: spans as a control TraceTree and back (trace_tree.h). */
#include "trace_tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"

int trace_tree_fill(struct trace_tree *tt, const uint8_t id[TRACE_ID_LEN], const struct span *const *spans, size_t n,
                    char **unreached, size_t n_unreached)
{
        *tt = (struct trace_tree){ .msg = CONTROL__TRACE_TREE__INIT };
        tt->items = answer_items(&control__span__descriptor, n);
        tt->hex = calloc(n ? n : 1, sizeof *tt->hex);
        if (!tt->items || !tt->hex) {
                trace_tree_clear(tt);
                return -ENOMEM;
        }
        trace_hex(id, TRACE_ID_LEN, tt->id);
        for (size_t i = 0; i < n; i++) {
                const struct span *s = spans[i];
                Control__Span *m = tt->items[i];
                trace_hex(s->ctx.span_id, TRACE_SPAN_ID_LEN, tt->hex[i][0]);
                if (!trace_id_zero(s->parent_id, TRACE_SPAN_ID_LEN))
                        trace_hex(s->parent_id, TRACE_SPAN_ID_LEN, tt->hex[i][1]);
                m->span_id = tt->hex[i][0];
                m->parent_id = tt->hex[i][1];
                m->gadget = (char *)s->gadget;
                m->name = (char *)s->name;
                m->kind = (char *)(s->kind == SPAN_CALL ? "call" : "binding");
                m->node = (char *)s->node;
                m->peer = (char *)s->peer;
                m->outcome = (char *)s->outcome;
                m->start_us = s->start_ns / 1000;
                m->duration_us = s->duration_ns / 1000;
        }
        tt->msg.trace_id = tt->id;
        tt->msg.spans = tt->items;
        tt->msg.n_spans = n;
        tt->msg.unreached = unreached;
        tt->msg.n_unreached = n_unreached;
        return 0;
}

void trace_tree_clear(struct trace_tree *tt)
{
        free(tt->items);
        free(tt->hex);
        tt->items = NULL;
        tt->hex = NULL;
}

void trace_span_of(const Control__Span *m, const uint8_t id[TRACE_ID_LEN], struct span *out)
{
        *out = (struct span){ .kind = strcmp(m->kind, "call") == 0 ? SPAN_CALL : SPAN_BINDING,
                              .start_ns = m->start_us * 1000, .duration_ns = m->duration_us * 1000 };
        memcpy(out->ctx.trace_id, id, TRACE_ID_LEN);
        trace_unhex(m->span_id, TRACE_SPAN_ID_LEN, out->ctx.span_id);
        if (m->parent_id[0])
                trace_unhex(m->parent_id, TRACE_SPAN_ID_LEN, out->parent_id);
        snprintf(out->gadget, sizeof out->gadget, "%s", m->gadget);
        snprintf(out->name, sizeof out->name, "%s", m->name);
        snprintf(out->node, sizeof out->node, "%s", m->node);
        snprintf(out->peer, sizeof out->peer, "%s", m->peer);
        snprintf(out->outcome, sizeof out->outcome, "%s", m->outcome);
}
