/* tail_batch: a tail binding's queue delivered to its gadget's Method=,
 * one batch at a time, through the one door for calls. */
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"
#include "tail_int.h"

/* Whether f has something to send, and its gadget may take it now. Only
 * a tail gadget of this node gets this node's events; one stopped or
 * failed gets them once it is ready again (on_state kicks its feeds):
 * meanwhile its queue fills, then drops. */
static bool feed_ready(const struct tail_feed *f)
{
        const struct unit *u = f->owner->u;
        if (f->sending || f->owner->going || (!f->queued && !f->dropped))
                return false;
        return unit_state_of(u) != UNIT_REMOTE && (unit_is_ready(u) || calls_wait_for_start(u));
}

/* Whether f is past its EventsPerSecond=: then its next batch waits
 * (a timer armed for then, if none is). */
static bool feed_held(struct tail_feed *f, uint64_t now)
{
        if (now >= f->hold_until_ms)
                return false;
        if (!evtimer_pending(f->kick, NULL))
                timer_arm_ms(f->kick, f->hold_until_ms - now);
        return true;
}

void tail_feed_kick(struct tail_feed *f)
{
        if (!feed_ready(f))
                return;
        /* On the observed gadget's call path: a clock read only when a
         * whole batch waits. */
        if (f->queued < TAIL_BATCH_MAX && f->queued < f->queue_max) {
                if (!evtimer_pending(f->kick, NULL))
                        timer_arm_ms(f->kick, TAIL_LINGER_MS);
                return;
        }
        if (!feed_held(f, monotime_ms()))
                event_active(f->kick, EV_TIMEOUT, 1);
}

/* Events lost with a batch that failed: counted as dropped, told in the
 * next batch; a line in gadgetd's log once per window. */
static void batch_lost(struct tail_feed *f, size_t n, const char *why)
{
        f->dropped += n;
        f->dropped_total += n;
        ratelog_warn(&f->warn, monotime_ms(), unit_name(f->owner->u), "tail batches failed",
                     "tail binding %s: a batch of %zu events to %s failed: %.300s", f->binding, n, f->method, why);
}

static void events_free(struct tail_event **ev, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(ev[i]);
}

/* Takes the first events of f's queue into ev (*n of them), within
 * TAIL_BATCH_MAX and TAIL_BATCH_BYTES. */
static void batch_take(struct tail_feed *f, struct tail_event **ev, size_t *n)
{
        size_t bytes = 0;
        struct tail_event *e;
        *n = 0;
        while (*n < TAIL_BATCH_MAX && bytes < TAIL_BATCH_BYTES && (e = STAILQ_FIRST(&f->queue))) {
                STAILQ_REMOVE_HEAD(&f->queue, link);
                f->queued--;
                bytes += sizeof *e + strlen(e->text);
                ev[(*n)++] = e;
        }
}

/* The batch's outcome (tag: its number of events). The result itself is
 * the tail's and means nothing to gadgetd: junk is as good as null. */
static void batch_done(void *cbdata, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct tail_feed *f = cbdata;
        f->sending = false;
        if (!res)
                batch_lost(f, (size_t)tag, message ? message : "no answer");
        tail_feed_kick(f);
}

void tail_feed_send(evutil_socket_t fd, short what, void *arg)
{
        struct tail_feed *f = arg;
        struct unit *u = f->owner->u;
        (void)fd;
        (void)what;
        uint64_t now = monotime_ms();
        if (!feed_ready(f) || feed_held(f, now))
                return;
        struct tail_event *ev[TAIL_BATCH_MAX];
        size_t n;
        char msg[400];
        batch_take(f, ev, &n);
        Gadget__Value *batch = tail_batch_value(f->binding, f->dropped, ev, n);
        if (!batch) {
                events_free(ev, n);
                batch_lost(f, n, "out of memory");
                return;
        }
        /* Why untailed: a batch is no event of the tail gadget, so two tails
         * that observe each other do not feed one another. */
        const struct call_req q = { .method = f->method, .args = batch, .done = batch_done, .cbdata = f, .tag = n,
                                    .owner = &f->calls, .caller = f->caller, .via = "gadgetd", .untailed = true };
        uint64_t dropped = f->dropped;
        f->dropped = 0;
        f->sending = true;
        int code = calls_start(u, &q, msg, sizeof msg);
        free(batch); /* the call sent or copied it */
        events_free(ev, n);
        if (code) {
                f->sending = false;
                f->dropped = dropped; /* not told: told in the next batch */
                batch_lost(f, n, msg);
                return;
        }
        /* Why a budget: gadgetd encodes each event it delivers on its
         * loop, so a tail that takes batches as fast as a busy gadget
         * makes events would cost every gadget; past it, events wait
         * (then drop, counted). */
        uint64_t wait = rate_add(&f->rate, n ? n : 1, now);
        f->hold_until_ms = wait ? now + wait : 0;
}

void tail_feed_check_method(struct tail_feed *f)
{
        char **methods;
        size_t n = unit_methods(f->owner->u, &methods);
        for (size_t i = 0; i < n; i++)
                if (strcmp(methods[i], f->method) == 0)
                        return;
        log_msg(L_WARN, unit_name(f->owner->u), "tail binding %s: Method=%s is not a method the gadget declared: "
                "every batch fails, its events are dropped and counted", f->binding, f->method);
}
