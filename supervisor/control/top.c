/* top: gadgetctl top's request, every gadget's counters now (the numbers
 * `list` shows any member of the control group, and the calls and errors
 * of core/unit_stats.h), sorted by name; the client makes rates of two. */
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/core.h"
#include "system/monotime.h"

static int cmp_top(const void *a, const void *b)
{
        return strcmp((*(Control__TopGadget *const *)a)->name, (*(Control__TopGadget *const *)b)->name);
}

void request_top(struct client *cl, const Control__Request *q)
{
        struct core *core = client_env(cl)->core;
        size_t n = 0;
        for (struct unit *u = core_first(core); u; u = unit_next(u))
                n++;
        struct unit_info *in = calloc(n + 1, sizeof *in);
        Control__TopGadget **gs = answer_items(&control__top_gadget__descriptor, n);
        if (!in || !gs) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                goto out;
        }
        n = 0;
        for (struct unit *u = core_first(core); u; u = unit_next(u), n++) {
                const struct unit_stats *s = unit_stats(u);
                unit_info(u, &in[n]);
                gs[n]->name = (char *)in[n].name;
                gs[n]->state = (char *)in[n].state;
                gs[n]->cpu_usec = in[n].cpu_usec;
                gs[n]->memory_bytes = in[n].memory_bytes;
                gs[n]->tasks = in[n].tasks;
                gs[n]->calls = s->calls;
                gs[n]->errors = s->errors;
                gs[n]->p99_us = unit_stats_quantile_us(s, 0.99);
        }
        qsort(gs, n, sizeof *gs, cmp_top);
        Control__TopReport t = CONTROL__TOP_REPORT__INIT;
        t.n_gadgets = n;
        t.gadgets = gs;
        t.at_ms = monotime_ms();
        client_answer(cl, q->id, &t.base);
out:
        free(in);
        free(gs);
}
