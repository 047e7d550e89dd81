/* trace: gadgetctl trace ID — the spans of one trace across the nodes
 * (core/trace_gather.h), at most CONTROL_TRACE_SPANS_MAX, as a tree. */
#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/core.h"
#include "core/trace_gather.h"
#include "system/trace.h"
#include "system/trace_tree.h"
#include "validate.h"

/* Every answer came: the tree to the client, if it is still there. */
static void gathered(void *arg, const struct trace_gathered *r)
{
        struct client_load *load = arg;
        uint64_t id = load->id;
        struct client *cl = client_load_end(load);
        struct trace_tree tt;
        if (!cl)
                return;
        if (!r->n)
                client_error(cl, id, GADGET_ENOTFOUND, "no span of trace %s is kept on %s%s", r->hex,
                             r->n_nodes > 1 ? "the nodes asked" : "this node",
                             r->n_unreached ? " (some did not answer)" : "");
        else if (trace_tree_fill(&tt, r->id, r->spans, r->n, r->unreached,
                                 r->n_unreached) < 0)
                client_error(cl, id, GADGET_EINTERNAL, "out of memory");
        else {
                client_answer(cl, id, &tt.msg.base);
                trace_tree_clear(&tt);
        }
}

void request_trace(struct client *cl, const Control__Request *q)
{
        const struct core *core = client_env(cl)->core;
        if (!traces_on(core_traces(core))) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "tracing is off on this node (TraceKeep=0)");
                return;
        }
        struct client_load *load = client_load_begin(cl, q->id);
        if (!load)
                return;
        if (trace_gather(core, q->trace->trace_id, q->trace->here, CONTROL_TRACE_SPANS_MAX, gathered, load) < 0)
                client_error(client_load_end(load), q->id, GADGET_EINTERNAL, "out of memory");
}
