/* trace_gather: the spans of one trace across the nodes (trace_gather.h). */
#include "trace_gather.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "contract.h"
#include "control.pb-c.h"
#include "core.h"
#include "system/trace_tree.h"
#include "validate.h"

struct gather {
        void (*done)(void *arg, const struct trace_gathered *r);
        void *arg;
        size_t max;
        const struct core *core;
        uint8_t id[TRACE_ID_LEN];
        char hex[2 * TRACE_ID_LEN + 1];
        struct span *spans;          /* grown as they come, to CONTROL_TRACE_SPANS_MAX */
        size_t n, cap;
        char nodes[CONTROL_TRACE_NODES_MAX][64];  /* asked (this one first) */
        size_t n_nodes;
        char *unreached[CONTROL_TRACE_NODES_MAX];
        size_t n_unreached;
        size_t waiting;              /* answers not come yet */
};

static bool have_span(const struct gather *g, const uint8_t *span_id)
{
        for (size_t i = 0; i < g->n; i++)
                if (memcmp(g->spans[i].ctx.span_id, span_id, TRACE_SPAN_ID_LEN) == 0)
                        return true;
        return false;
}

/* Keeps s unless it is there already or the bound is reached (or memory
 * is short: the tree is given with what it has). */
static void add_span(struct gather *g, const struct span *s)
{
        if (g->n == g->max || have_span(g, s->ctx.span_id))
                return;
        if (g->n == g->cap) {
                size_t cap = g->cap ? 2 * g->cap : 16;
                struct span *v = realloc(g->spans, cap * sizeof *v);
                if (!v)
                        return;
                g->spans = v;
                g->cap = cap;
        }
        g->spans[g->n++] = *s;
}

static void gather_free(struct gather *g)
{
        for (size_t i = 0; i < g->n_unreached; i++)
                free(g->unreached[i]);
        free(g->spans);
        free(g);
}

static int by_start(const void *a, const void *b)
{
        const struct span *x = a, *y = b;
        return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Every answer came: the spans, by start, to the one who asked. */
static void gather_answer(struct gather *g)
{
        const struct span **ptrs = calloc(g->n ? g->n : 1, sizeof *ptrs);
        if (g->n)
                qsort(g->spans, g->n, sizeof *g->spans, by_start);
        for (size_t i = 0; ptrs && i < g->n; i++)
                ptrs[i] = &g->spans[i];
        const struct trace_gathered r = { .hex = g->hex, .id = g->id, .spans = ptrs, .n = ptrs ? g->n : 0,
                                          .unreached = g->unreached, .n_unreached = g->n_unreached,
                                          .n_nodes = g->n_nodes };
        g->done(g->arg, &r);
        free(ptrs);
        gather_free(g);
}

static void ask_named(struct gather *g, const struct span *from, size_t n);

/* One node asked: where its answer goes. */
struct ask {
        struct gather *g;
        char node[64];
};

static void unreached_add(struct gather *g, const char *node)
{
        if (g->n_unreached < CONTROL_TRACE_NODES_MAX && (g->unreached[g->n_unreached] = strdup(node)))
                g->n_unreached++;
}

/* A node's answer (validated by the link), or why there is none. */
static void node_answered(void *arg, const Control__TraceTree *t, int code, const char *msg __attribute__((unused)))
{
        struct ask *a = arg;
        struct gather *g = a->g;
        size_t before = g->n;
        if (t && strcmp(t->trace_id, g->hex) == 0) {
                for (size_t k = 0; k < t->n_spans; k++) {
                        struct span s;
                        trace_span_of(t->spans[k], g->id, &s);
                        add_span(g, &s);
                }
        } else if (t || code != GADGET_ENOTFOUND) {
                unreached_add(g, a->node); /* no answer, an error, or the spans of another trace */
        }
        free(a);
        ask_named(g, g->spans + before, g->n - before);
        if (--g->waiting == 0)
                gather_answer(g);
}

static bool asked(const struct gather *g, const char *node)
{
        for (size_t i = 0; i < g->n_nodes; i++)
                if (strcmp(g->nodes[i], node) == 0)
                        return true;
        return false;
}

/* Asks each node that spans name (their node, their peer) and that was
 * not asked yet, within the bound. */
static void ask_named(struct gather *g, const struct span *from, size_t n)
{
        const struct core_remote *r = core_remote_of(g->core);
        for (size_t i = 0; i < n; i++) {
                const char *names[2] = { from[i].node, from[i].peer };
                for (size_t k = 0; k < 2; k++) {
                        const char *node = names[k];
                        char msg[300];
                        if (!node[0] || asked(g, node) || g->n_nodes == CONTROL_TRACE_NODES_MAX || !r->trace)
                                continue;
                        snprintf(g->nodes[g->n_nodes++], sizeof g->nodes[0], "%s", node);
                        struct ask *a = calloc(1, sizeof *a);
                        if (a) {
                                a->g = g;
                                snprintf(a->node, sizeof a->node, "%s", node);
                        }
                        int code = a ? r->trace(r->arg, node, g->hex, node_answered, a, msg, sizeof msg)
                                     : GADGET_EINTERNAL;
                        if (code == 0) {
                                g->waiting++;
                                continue;
                        }
                        free(a);
                        unreached_add(g, node);
                }
        }
}

int trace_gather(const struct core *core, const char *hex, bool here_only, size_t max,
                 void (*done)(void *arg, const struct trace_gathered *r), void *arg)
{
        struct gather *g = calloc(1, sizeof *g);
        const struct span **local = calloc(max ? max : 1, sizeof *local);
        if (!g || !local) {
                free(g);
                free(local);
                return -ENOMEM;
        }
        *g = (struct gather){ .done = done, .arg = arg, .max = max, .core = core };
        snprintf(g->hex, sizeof g->hex, "%s", hex);
        trace_unhex(g->hex, TRACE_ID_LEN, g->id);
        size_t n = traces_find(core_traces(core), g->id, local, max);
        for (size_t i = 0; i < n; i++)
                add_span(g, local[i]);
        free(local);
        /* This node is asked already: its own spans. */
        snprintf(g->nodes[g->n_nodes++], sizeof g->nodes[0], "%s", core_node(core) ? core_node(core) : "");
        g->waiting = 1;
        if (!here_only)
                ask_named(g, g->spans, g->n);
        if (--g->waiting == 0)
                gather_answer(g);
        return 0;
}
