/* gateway_budget: what calls through the gateway to one gadget may cost
 * gadgetd's loop. A page speaks only to its gadget, and each of its calls
 * costs the loop its JSON: the body parsed and the answer written (a 1 MB
 * bytes result is about 12 ms of the loop in jansson, thirty times what
 * sending it to a gadget costs). So each gadget called through the gateway
 * has a bucket of those JSON bytes a second (GATEWAY_BYTES_PER_S) and a
 * bound on its calls in flight (GATEWAY_CALLS_PER_GADGET); past either,
 * the next call waits its turn, in order, its request unanswered (never
 * refused for it). Why this is safe: a page asking for big results as fast
 * as it can costs the loop at most the budget a second, plus the answers
 * of the calls in flight; a call that waits holds only its connection,
 * which MaxConnections= bounds. */
#include "gateway_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "contract.h"
#include "core/core.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/nametab.h"
#include "system/rate.h"
#include "system/timer.h"

struct gw_budget {
        struct nametab_link link;
        char name[GADGET_NAME_MAX + 1];
        struct gateway *g;
        struct rate rate;             /* JSON bytes in and out */
        unsigned inflight;            /* calls started and not ended */
        TAILQ_HEAD(, gateway_wait) waiting; /* in the order they came */
        struct event *timer;          /* the bucket will have drained */
        bool logged;                  /* its first wait this run was logged */
};

static const char *budget_name(const struct nametab_link *l)
{
        return NAMETAB_ENTRY(l, const struct gw_budget, link)->name;
}

static void budget_timer(evutil_socket_t fd, short what, void *arg);

/* The bucket of name (one of a gadget that is, or was, called through the
 * gateway: at most one per gadget name), made if none; NULL: no memory. */
static struct gw_budget *budget_of(struct gateway *g, const char *name)
{
        struct nametab_link *l = nametab_find(&g->budgets, name, budget_name);
        if (l)
                return NAMETAB_ENTRY(l, struct gw_budget, link);
        struct gw_budget *b = calloc(1, sizeof *b);
        if (!b)
                return NULL;
        snprintf(b->name, sizeof b->name, "%s", name);
        b->g = g;
        rate_init(&b->rate, GATEWAY_BYTES_PER_S, monotime_ms());
        TAILQ_INIT(&b->waiting);
        if (!(b->timer = evtimer_new(core_base(g->core), budget_timer, b)) ||
            nametab_insert(&g->budgets, &b->link, budget_name) < 0) {
                if (b->timer)
                        event_free(b->timer);
                free(b);
                return NULL;
        }
        return b;
}

/* The ms until a call of b may start (0: now). */
static uint64_t budget_wait(struct gw_budget *b)
{
        uint64_t wait_ms = rate_add(&b->rate, 0, monotime_ms());
        if (!wait_ms && b->inflight >= GATEWAY_CALLS_PER_GADGET)
                return UINT64_MAX; /* until one ends */
        return wait_ms;
}

/* Starts the calls that waited while the budget allows, in order. */
static void budget_go(struct gw_budget *b)
{
        struct gateway_wait *w;
        while ((w = TAILQ_FIRST(&b->waiting))) {
                uint64_t wait_ms = budget_wait(b);
                if (wait_ms == UINT64_MAX)
                        return; /* a call's end goes on */
                if (wait_ms) {
                        timer_arm_ms(b->timer, wait_ms);
                        return;
                }
                TAILQ_REMOVE(&b->waiting, w, link);
                b->inflight++;
                w->resume(w, true);
        }
}

static void budget_timer(evutil_socket_t fd, short what, void *arg)
{
        budget_go(arg);
}

int gateway_budget_enter(struct gateway *g, const char *name, size_t bytes_in, struct gateway_wait *w)
{
        struct gw_budget *b = budget_of(g, name);
        if (!b)
                return -ENOMEM;
        /* Its body was read: it counts whether the call starts now or not. */
        rate_add(&b->rate, bytes_in, monotime_ms());
        if (TAILQ_EMPTY(&b->waiting) && budget_wait(b) == 0) {
                b->inflight++;
                return 0;
        }
        if (!b->logged) {
                b->logged = true;
                log_msg(L_INFO, name, "calls to it through the gateway wait their turn: their JSON came to "
                        "%llu bytes in a second, or %u were in flight (GATEWAY_BYTES_PER_S=%u, "
                        "GATEWAY_CALLS_PER_GADGET=%u; logged once)",
                        (unsigned long long)rate_level(&b->rate, monotime_ms()), b->inflight,
                        (unsigned)GATEWAY_BYTES_PER_S, (unsigned)GATEWAY_CALLS_PER_GADGET);
        }
        TAILQ_INSERT_TAIL(&b->waiting, w, link);
        if (!event_pending(b->timer, EV_TIMEOUT, NULL))
                budget_go(b);
        return 1;
}

void gateway_budget_leave(struct gateway *g, const char *name, size_t bytes_out)
{
        struct nametab_link *l = nametab_find(&g->budgets, name, budget_name);
        if (!l)
                return;
        struct gw_budget *b = NAMETAB_ENTRY(l, struct gw_budget, link);
        rate_add(&b->rate, bytes_out, monotime_ms());
        if (b->inflight)
                b->inflight--;
        if (!event_pending(b->timer, EV_TIMEOUT, NULL))
                budget_go(b);
}

void gateway_budget_free(struct gateway *g)
{
        for (size_t i = 0; i < g->budgets.size; i++) {
                struct nametab_link *l;
                while ((l = g->budgets.slots[i])) {
                        struct gw_budget *b = NAMETAB_ENTRY(l, struct gw_budget, link);
                        struct gateway_wait *w;
                        nametab_remove(&g->budgets, l, budget_name);
                        /* Each waiting call is answered (gadgetd stops). */
                        while ((w = TAILQ_FIRST(&b->waiting))) {
                                TAILQ_REMOVE(&b->waiting, w, link);
                                w->resume(w, false);
                        }
                        event_free(b->timer);
                        free(b);
                }
        }
        nametab_free(&g->budgets);
}
