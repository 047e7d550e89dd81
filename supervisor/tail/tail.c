/* tail: the listener of the units' events (tail.h): each tail binding's
 * feed, and the events of the gadgets it observes recorded in it. */
#include "tail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <event2/event.h>

#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"
#include "tail_int.h"
#include "traceparent.h"

static int64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void feed_clear(struct tail_feed *f)
{
        struct tail_event *e;
        calls_owner_gone(&f->calls); /* a batch in flight tells no one now */
        while ((e = STAILQ_FIRST(&f->queue))) {
                STAILQ_REMOVE_HEAD(&f->queue, link);
                free(e);
        }
        if (f->kick)
                event_free(f->kick);
        if (f->link.le_prev)
                LIST_REMOVE(f, link);
        free(f->binding);
        free(f->method);
        policy_strv_free(f->of);
}

/* Ends tu's own feeds (its queues are dropped). */
static void feeds_free(struct tail_unit *tu)
{
        for (size_t i = 0; i < tu->n_feeds; i++)
                feed_clear(&tu->feeds[i]);
        free(tu->feeds);
        tu->feeds = NULL;
        tu->n_feeds = 0;
        tu->t->gen++;
}

/* A copy of a NULL-terminated word list of n words; NULL if out of memory. */
static char **words_dup(char *const *w, size_t n)
{
        char **out = calloc(n + 1, sizeof *out);
        for (size_t i = 0; out && i < n; i++)
                if (!(out[i] = strdup(w[i]))) {
                        policy_strv_free(out);
                        return NULL;
                }
        return out;
}

static int feed_init(struct tail_feed *f, struct tail_unit *tu, const struct policy_binding *b)
{
        f->owner = tu;
        STAILQ_INIT(&f->queue);
        f->queue_max = b->queue_max;
        rate_init(&f->rate, b->events_per_s, monotime_ms());
        f->n_of = b->n_of;
        snprintf(f->caller, sizeof f->caller, "tail %s", b->name);
        if (!(f->binding = strdup(b->name)) || !(f->method = strdup(b->method)) || !(f->of = words_dup(b->of, b->n_of)) ||
            !(f->kick = evtimer_new(core_base(tu->t->core), tail_feed_send, f)))
                return -ENOMEM;
        LIST_INSERT_HEAD(&tu->t->feeds, f, link);
        return 0;
}

/* tu's feeds, one per tail binding of the policy it runs. 0 or -ENOMEM. */
static int feeds_new(struct tail_unit *tu)
{
        const struct policy *p = unit_policy(tu->u);
        size_t n = 0;
        for (size_t i = 0; i < p->n_bindings; i++)
                n += p->bindings[i].type == BINDING_TAIL;
        tu->t->gen++;
        if (!n)
                return 0;
        if (!(tu->feeds = calloc(n, sizeof *tu->feeds)))
                return -ENOMEM;
        for (size_t i = 0; i < p->n_bindings; i++) {
                if (p->bindings[i].type != BINDING_TAIL)
                        continue;
                int e = feed_init(&tu->feeds[tu->n_feeds++], tu, &p->bindings[i]);
                if (e < 0) {
                        feeds_free(tu);
                        return e;
                }
        }
        return 0;
}

/* The feeds that observe tu's gadget, as the tails are now. Why this is
 * cheap on a call's path: the list is made again only after a feed came
 * or went (a load, a reload, an unload), not per event. */
static bool watched(struct tail_unit *tu)
{
        struct tails *t = tu->t;
        if (tu->going)
                return false;
        if (tu->gen == t->gen)
                return tu->n_watchers > 0;
        size_t n = 0;
        struct tail_feed *f;
        LIST_FOREACH(f, &t->feeds, link)
                n += policy_listed(f->of, unit_name(tu->u));
        free(tu->watchers);
        tu->watchers = n ? calloc(n, sizeof *tu->watchers) : NULL;
        tu->n_watchers = 0;
        if (n && !tu->watchers) {
                log_msg(L_ERR, unit_name(tu->u), "tail: out of memory: its events are not recorded");
                return false; /* tried again at its next event */
        }
        LIST_FOREACH(f, &t->feeds, link)
                if (policy_listed(f->of, unit_name(tu->u)))
                        tu->watchers[tu->n_watchers++] = f;
        tu->gen = t->gen;
        return n > 0;
}

/* Copies src into dst (size bytes), cut to fit: a name, an id. */
static void copy_cut(char *dst, size_t size, const char *src)
{
        size_t n = strnlen(src, size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

/* Cuts text to at most TAIL_TEXT_MAX bytes, on a character's start. */
static size_t text_len(const char *text)
{
        size_t n = text ? strlen(text) : 0;
        if (n <= TAIL_TEXT_MAX)
                return n;
        n = TAIL_TEXT_MAX;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
                n--;
        return n;
}

/* Puts a copy of ev (with text) at the end of f's queue, or counts it
 * dropped when the queue is full. */
static void feed_push(struct tail_feed *f, const struct tail_event *ev, const char *text)
{
        f->seq++;
        size_t n = text_len(text);
        struct tail_event *e = f->queued < f->queue_max ? malloc(sizeof *e + n + 1) : NULL;
        if (!e) {
                f->dropped++;
                f->dropped_total++;
                tail_feed_kick(f);
                return;
        }
        memcpy(e, ev, sizeof *e);
        memcpy(e->text, text ? text : "", n);
        e->text[n] = '\0';
        e->seq = f->seq;
        STAILQ_INSERT_TAIL(&f->queue, e, link);
        f->queued++;
        tail_feed_kick(f);
}

/* Records ev of u in every feed that observes it. */
static void record(struct tails *t, struct unit *u, struct tail_event *ev, const char *text)
{
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu || !watched(tu))
                return;
        ev->time_ms = wall_ms();
        copy_cut(ev->gadget, sizeof ev->gadget, unit_name(u));
        for (size_t i = 0; i < tu->n_watchers; i++)
                feed_push(tu->watchers[i], ev, text);
}

static void on_called(void *arg, struct unit *u, const struct unit_call_event *c)
{
        struct tails *t = arg;
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu || !watched(tu))
                return; /* the call's path: nothing copied or written for a gadget no tail observes */
        struct tail_event ev = { .kind = TAIL_CALL, .code = c->code, .duration_us = c->duration_us };
        copy_cut(ev.method, sizeof ev.method, c->method);
        if (c->trace)
                trace_hex(c->trace->trace_id, TRACE_ID_LEN, ev.trace);
        record(t, u, &ev, NULL);
}

static void on_logged(void *arg, struct unit *u, const char *stream, const char *line)
{
        struct tail_event ev = { .kind = TAIL_LOG, .stream = stream };
        record(arg, u, &ev, line);
}

static void on_exited(void *arg, struct unit *u, int status, const char *cause)
{
        struct tail_event ev = { .kind = TAIL_EXIT, .status = status };
        record(arg, u, &ev, cause);
}

static int on_created(void *arg, struct unit *u)
{
        struct tails *t = arg;
        struct tail_unit *tu = calloc(1, sizeof *tu);
        if (!tu)
                return -ENOMEM;
        *tu = (struct tail_unit){ .t = t, .u = u, .gen = t->gen - 1 };
        int e = feeds_new(tu);
        if (e < 0) {
                free(tu);
                return e;
        }
        unit_set_slot(u, t->id, tu);
        return 0;
}

/* A tail gadget that became ready: is Method= declared? And what waited
 * for it is sent. */
static void on_state(void *arg, struct unit *u, enum unit_state was)
{
        struct tails *t = arg;
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu || unit_state_of(u) != UNIT_READY || was == UNIT_READY)
                return;
        for (size_t i = 0; i < tu->n_feeds; i++) {
                tail_feed_check_method(&tu->feeds[i]);
                tail_feed_kick(&tu->feeds[i]);
        }
}

/* A reload: the feeds are made anew from its new policy. */
static void on_policy(void *arg, struct unit *u)
{
        struct tails *t = arg;
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu)
                return;
        feeds_free(tu);
        if (feeds_new(tu) < 0)
                log_msg(L_ERR, unit_name(u), "tail: out of memory: its tail bindings get no events");
}

static void on_going(void *arg, struct unit *u)
{
        struct tails *t = arg;
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu)
                return;
        tu->going = true;
        feeds_free(tu);
}

static void on_freed(void *arg, struct unit *u)
{
        struct tails *t = arg;
        struct tail_unit *tu = unit_slot(u, t->id);
        if (!tu)
                return;
        free(tu->watchers);
        free(tu);
        unit_set_slot(u, t->id, NULL);
}

static void on_info(void *arg, const struct unit *u, struct unit_info *out)
{
        struct tails *t = arg;
        const struct tail_unit *tu = unit_slot(u, t->id);
        for (size_t i = 0; tu && i < tu->n_feeds; i++) {
                out->tail_queued += tu->feeds[i].queued;
                out->tail_dropped += tu->feeds[i].dropped_total;
                /* Why bounded: a label value each; past the last slot, one more. */
                bool own = i < UNIT_INFO_TAILS - 1 || tu->n_feeds <= UNIT_INFO_TAILS;
                struct unit_tail_drops *d = &out->tail_drops[own ? i : UNIT_INFO_TAILS - 1];
                d->binding = own ? tu->feeds[i].binding : UNIT_STATS_OTHER;
                d->dropped += tu->feeds[i].dropped_total;
                out->n_tail_drops = (size_t)(d - out->tail_drops) + 1;
        }
        out->tails = tu ? tu->n_feeds : 0;
}

int tail_listen(struct core *c)
{
        struct tails *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->core = c;
        t->gen = 1;
        LIST_INIT(&t->feeds);
        const struct unit_listener l = { .created = on_created, .state = on_state, .policy = on_policy,
                                         .going = on_going, .freed = on_freed, .called = on_called,
                                         .logged = on_logged, .exited = on_exited, .info = on_info,
                                         .closed = free, .arg = t };
        if ((t->id = core_listen(c, &l)) < 0) {
                int e = t->id;
                free(t);
                return e;
        }
        return 0;
}
