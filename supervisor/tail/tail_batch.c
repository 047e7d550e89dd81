/* tail_batch: a tail binding's queue delivered to its gadget's Method=,
 * one batch at a time, through the one door for calls. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <event2/event.h>

#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"
#include "tail_int.h"
#include "value.h"

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

/* A call's outcome as the event says it: "ok", or its error's name. */
static const char *outcome(int code)
{
        return code ? gadget_error_name((unsigned)code) : "ok";
}

static Gadget__Value *call_value(Gadget__Value *m, const struct tail_event *e)
{
        value_map_set(m, "method", value_new_string(e->method));
        value_map_set(m, "outcome", value_new_string(outcome(e->code)));
        value_map_set(m, "duration_us", value_new_int((int64_t)e->duration_us));
        value_map_set(m, "trace", value_new_string(e->trace));
        return m;
}

static Gadget__Value *exit_value(Gadget__Value *m, const struct tail_event *e)
{
        if (WIFEXITED(e->status))
                value_map_set(m, "status", value_new_int(WEXITSTATUS(e->status)));
        else
                value_map_set(m, "status", value_new_null());
        const char *abbrev = WIFSIGNALED(e->status) ? sigabbrev_np(WTERMSIG(e->status)) : NULL;
        if (abbrev)
                value_map_set(m, "signal", value_new_string(abbrev));
        else if (WIFSIGNALED(e->status))
                value_map_set(m, "signal", value_new_int(WTERMSIG(e->status)));
        else
                value_map_set(m, "signal", value_new_null());
        value_map_set(m, "cause", value_new_string(e->text));
        return m;
}

/* One event as the tail's method gets it. NULL if out of memory. */
static Gadget__Value *event_value(const struct tail_event *e)
{
        static const char *const kinds[] = { [TAIL_CALL] = "call", [TAIL_LOG] = "log", [TAIL_EXIT] = "exit" };
        Gadget__Value *m = value_new_map();
        if (!m)
                return NULL;
        value_map_set(m, "gadget", value_new_string(e->gadget));
        value_map_set(m, "kind", value_new_string(kinds[e->kind]));
        value_map_set(m, "seq", value_new_int((int64_t)e->seq));
        value_map_set(m, "time", value_new_int(e->time_ms));
        if (e->kind == TAIL_CALL)
                return call_value(m, e);
        if (e->kind == TAIL_EXIT)
                return exit_value(m, e);
        value_map_set(m, "stream", value_new_string(e->stream));
        value_map_set(m, "line", value_new_string(e->text));
        return m;
}

/* {binding, dropped, events}: the first events of f's queue (taken out
 * of it; *n of them), within TAIL_BATCH_MAX and TAIL_BATCH_BYTES. NULL
 * if out of memory (the events taken are lost). */
static Gadget__Value *batch_take(struct tail_feed *f, size_t *n)
{
        Gadget__Value *b = value_new_map(), *list = value_new_list();
        size_t bytes = 0;
        bool ok = b && list;
        struct tail_event *e;
        *n = 0;
        while (ok && *n < TAIL_BATCH_MAX && bytes < TAIL_BATCH_BYTES && (e = STAILQ_FIRST(&f->queue))) {
                STAILQ_REMOVE_HEAD(&f->queue, link);
                f->queued--;
                (*n)++;
                bytes += sizeof *e + strlen(e->text);
                Gadget__Value *v = event_value(e);
                ok = v && value_list_append(list, v) == 0;
                free(e);
        }
        if (ok)
                ok = value_map_set(b, "binding", value_new_string(f->binding)) == 0 &&
                     value_map_set(b, "dropped", value_new_int((int64_t)f->dropped)) == 0 &&
                     value_map_set(b, "events", list) == 0;
        else
                value_free(list);
        if (!ok) {
                value_free(b);
                return NULL;
        }
        return b;
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
        size_t n;
        char msg[400];
        Gadget__Value *batch = batch_take(f, &n);
        if (!batch) {
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
        value_free(batch);
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
