/* frames: gadgetctl trace NAME — one gadget's frames on its channel,
 * followed live by root. It listens to the core's units
 * (core/unit_events.h: framed, going); while a unit has a follower its
 * link tells each frame (unit_frames_watch), and each frame is decoded
 * once, its values cut to a preview (proto/value.h), then copied into each
 * follower's bounded queue. A follower gets its queue as FrameBatch parts,
 * one at a time, only while its connection has nothing unsent: a slow or
 * stopped reader costs the gadget and gadgetd nothing but the copy, its
 * queue full drops the frames past it and the next part says how many. */
#include "frames.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <event2/event.h>

#include "client.h"
#include "contract.h"
#include "control.h"
#include "policy.h"
#include "system/conn.h"
#include "system/monotime.h"
#include "value.h"

/* The calls and binding calls in flight whose frames one follower saw:
 * their answers' durations, and whether a binding answer may be shown. */
#define FRAMES_PAIRS 64
/* How long the first frame of a part waits for others (a person reads
 * them: 20 ms is no delay to her). */
#define FRAMES_LINGER_MS 20

enum frame_kind { F_HELLO, F_WELCOME, F_CALL, F_RESULT, F_BINDING_CALL, F_BINDING_RESULT, F_LOG, F_SHUTDOWN };

static const char *const kind_names[] = {
        [F_HELLO] = "hello", [F_WELCOME] = "welcome", [F_CALL] = "call", [F_RESULT] = "result",
        [F_BINDING_CALL] = "binding_call", [F_BINDING_RESULT] = "binding_result", [F_LOG] = "log",
        [F_SHUTDOWN] = "shutdown",
};

/* One frame as a follower keeps it: fixed size, no allocation. */
struct frame_rec {
        int64_t time_ms;
        uint64_t id, bytes, duration_us;
        uint32_t run;
        enum frame_kind kind;
        bool in, withheld;
        char name[2 * GADGET_NAME_MAX + 2];
        char outcome[16];
        char preview[CONTROL_FRAME_PREVIEW + 4];
};

struct frame_pair {
        uint64_t id, at_us;
        uint32_t run;
        bool used, binding, hidden;
};

struct frame_follower {
        struct frames *fs;
        struct client *cl;
        uint64_t id;                    /* its request's */
        struct unit *u;
        struct event *ev;               /* its next part, on a later turn of the loop */
        struct frame_rec *ring;         /* CONTROL_FRAMES_QUEUE, oldest at head */
        size_t head, n;
        uint64_t dropped;               /* since the last part */
        bool greeted;                   /* its first (empty) part went */
        struct frame_pair pairs[FRAMES_PAIRS];
        size_t next_pair;
        LIST_ENTRY(frame_follower) link;
};

struct frames {
        LIST_HEAD(, frame_follower) followers;
        size_t n;
};

static void follower_free(struct frame_follower *f)
{
        if (!f)
                return;
        if (f->link.le_prev) {
                LIST_REMOVE(f, link);
                f->fs->n--;
                unit_frames_watch(f->u, false);
        }
        if (f->ev)
                event_free(f->ev);
        free(f->ring);
        free(f);
}

/* f's next part, due in ms. */
static void kick_in(struct frame_follower *f, long ms)
{
        const struct timeval tv = { 0, ms * 1000 };
        if (f && !evtimer_pending(f->ev, NULL))
                evtimer_add(f->ev, &tv);
}

/* Why a part waits FRAMES_LINGER_MS after the frame that made it due:
 * the frames of that time go in one part, one write, instead of a part
 * per frame on the loop that serves the gadget's calls. */
static void kick(struct frame_follower *f)
{
        kick_in(f, FRAMES_LINGER_MS);
}

void frames_kick(struct frame_follower *f)
{
        kick(f);
}

/* Sends f's queue as one part (more false: the last, with note). */
static int send_part(struct frame_follower *f, bool more, const char *note)
{
        /* Static: one part is made at a time, on the loop alone. */
        static Control__Frame msgs[CONTROL_FRAMES_QUEUE];
        static Control__Frame *ptrs[CONTROL_FRAMES_QUEUE];
        Control__FrameBatch b = CONTROL__FRAME_BATCH__INIT;
        for (size_t i = 0; i < f->n; i++) {
                const struct frame_rec *r = &f->ring[(f->head + i) % CONTROL_FRAMES_QUEUE];
                Control__Frame *m = &msgs[i];
                control__frame__init(m);
                m->time_ms = r->time_ms;
                m->in = r->in;
                m->kind = (char *)kind_names[r->kind];
                m->id = r->id;
                m->name = (char *)r->name;
                m->bytes = r->bytes;
                m->outcome = (char *)r->outcome;
                m->duration_us = r->duration_us;
                m->preview = (char *)r->preview;
                m->withheld = r->withheld;
                m->run = r->run;
                ptrs[i] = m;
        }
        b.n_frames = f->n;
        b.frames = ptrs;
        b.dropped = f->dropped;
        b.more = more;
        b.note = (char *)(note ? note : "");
        f->head = f->n = 0;
        f->dropped = 0;
        return client_answer(f->cl, f->id, &b.base);
}

/* The next part, once the client has read the last. Why a stopped reader
 * costs nothing: nothing is sent while its connection holds unsent bytes
 * (control.c's on_drained kicks again once it read them), so at most one
 * part waits for it, and its queue is bounded. */
static void send_cb(evutil_socket_t fd, short what, void *arg)
{
        struct frame_follower *f = arg;
        bool first = !f->greeted;
        if (conn_pending(f->cl->conn) > 0 || (!first && f->n == 0 && f->dropped == 0))
                return;
        f->greeted = true;
        char note[GADGET_NAME_MAX + 48];
        snprintf(note, sizeof note, "following %s's channel", unit_name(f->u));
        send_part(f, true, first ? note : NULL);
}

/* The pair slot of a call or binding call in flight, recorded at its
 * frame (the oldest slot is reused: a lost pair only loses a duration). */
static void pair_put(struct frame_follower *f, uint32_t run, uint64_t id, bool binding, bool hidden)
{
        struct frame_pair *p = &f->pairs[f->next_pair++ % FRAMES_PAIRS];
        *p = (struct frame_pair){ .id = id, .at_us = monotime_us(), .run = run, .used = true, .binding = binding,
                                  .hidden = hidden };
}

static struct frame_pair *pair_take(struct frame_follower *f, uint32_t run, uint64_t id, bool binding)
{
        for (size_t i = 0; i < FRAMES_PAIRS; i++) {
                struct frame_pair *p = &f->pairs[i];
                if (p->used && p->id == id && p->run == run && p->binding == binding) {
                        p->used = false;
                        return p;
                }
        }
        return NULL;
}

/* An answer's outcome and preview: its value, or its error's name and message. */
static void outcome_of(struct frame_rec *r, const Gadget__Value *value, const Gadget__Error *err)
{
        if (err) {
                snprintf(r->outcome, sizeof r->outcome, "%s", gadget_error_name(err->code));
                value_preview_text(err->message ? err->message : "", r->preview, sizeof r->preview);
        } else {
                snprintf(r->outcome, sizeof r->outcome, "ok");
                value_preview(value, r->preview, sizeof r->preview);
        }
}

/* A frame the gadget sent, decoded (validated by the link already). */
static void decode_in(struct frame_rec *r, const Gadget__WorkerMsg *w, const struct unit *u, bool *private)
{
        static const char *const prio[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };
        switch (w->msg_case) {
        case GADGET__WORKER_MSG__MSG_HELLO:
                r->kind = F_HELLO;
                snprintf(r->preview, sizeof r->preview, "%zu methods", w->hello->n_methods);
                break;
        case GADGET__WORKER_MSG__MSG_RESULT:
                r->kind = F_RESULT;
                r->id = w->result->id;
                outcome_of(r, w->result->outcome_case == GADGET__CALL_RESULT__OUTCOME_VALUE ? w->result->value : NULL,
                           w->result->outcome_case == GADGET__CALL_RESULT__OUTCOME_ERROR ? w->result->error : NULL);
                break;
        case GADGET__WORKER_MSG__MSG_BINDING_CALL:
                r->kind = F_BINDING_CALL;
                r->id = w->binding_call->id;
                snprintf(r->name, sizeof r->name, "%s.%s", w->binding_call->binding, w->binding_call->op);
                /* The one rule on which binding values are never shown. */
                *private = policy_binding_private(unit_policy(u), w->binding_call->binding);
                if (!*private)
                        value_preview(w->binding_call->args, r->preview, sizeof r->preview);
                break;
        case GADGET__WORKER_MSG__MSG_LOG:
        default:
                r->kind = F_LOG;
                snprintf(r->name, sizeof r->name, "%s", prio[w->log->level & 7]);
                value_preview_text(w->log->text, r->preview, sizeof r->preview);
                break;
        }
}

/* A frame gadgetd sent the gadget. */
static void decode_out(struct frame_rec *r, const Gadget__SupervisorMsg *s)
{
        switch (s->msg_case) {
        case GADGET__SUPERVISOR_MSG__MSG_WELCOME:
                r->kind = F_WELCOME;
                break;
        case GADGET__SUPERVISOR_MSG__MSG_CALL:
                r->kind = F_CALL;
                r->id = s->call->id;
                snprintf(r->name, sizeof r->name, "%s", s->call->method);
                value_preview(s->call->args, r->preview, sizeof r->preview);
                break;
        case GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT:
                r->kind = F_BINDING_RESULT;
                r->id = s->binding_result->id;
                outcome_of(r,
                           s->binding_result->outcome_case == GADGET__BINDING_RESULT__OUTCOME_VALUE ?
                                   s->binding_result->value : NULL,
                           s->binding_result->outcome_case == GADGET__BINDING_RESULT__OUTCOME_ERROR ?
                                   s->binding_result->error : NULL);
                break;
        case GADGET__SUPERVISOR_MSG__MSG_SHUTDOWN:
        default:
                r->kind = F_SHUTDOWN;
                break;
        }
}

/* The pairing of r for follower f: a call's or binding call's frame is
 * remembered, an answer's gets its duration; a binding answer is shown
 * only if f saw its call and that call's binding is not private. */
static void pair(struct frame_follower *f, struct frame_rec *r, bool private)
{
        struct frame_pair *p;
        switch (r->kind) {
        case F_CALL:
                pair_put(f, r->run, r->id, false, false);
                break;
        case F_BINDING_CALL:
                pair_put(f, r->run, r->id, true, private);
                break;
        case F_RESULT:
                if ((p = pair_take(f, r->run, r->id, false)))
                        r->duration_us = monotime_us() - p->at_us;
                break;
        case F_BINDING_RESULT:
                p = pair_take(f, r->run, r->id, true);
                if (p)
                        r->duration_us = monotime_us() - p->at_us;
                if (!p || p->hidden) {
                        r->withheld = true;
                        r->preview[0] = '\0';
                }
                break;
        default:
                break;
        }
}

static void on_framed(void *arg, struct unit *u, const struct unit_frame_event *e)
{
        struct frames *fs = arg;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct frame_rec base = { .time_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000, .in = e->in,
                                  .bytes = e->bytes, .run = e->run };
        bool private = false;
        if (e->in)
                decode_in(&base, e->w, u, &private);
        else
                decode_out(&base, e->s);
        if (private)
                base.withheld = true;
        /* An error's message gadgetd wrote is not checked as the gadget's
         * frames are: a preview gadgetctl would refuse is not sent. */
        if (!value_utf8_valid(base.preview, strlen(base.preview)))
                snprintf(base.preview, sizeof base.preview, "(not UTF-8)");
        struct frame_follower *f;
        LIST_FOREACH(f, &fs->followers, link) {
                if (f->u != u)
                        continue;
                struct frame_rec r = base;
                pair(f, &r, private);
                /* Past its queue a frame is counted, never waited for. */
                if (f->n == CONTROL_FRAMES_QUEUE) {
                        f->dropped++;
                        continue;
                }
                f->ring[(f->head + f->n++) % CONTROL_FRAMES_QUEUE] = r;
                kick(f);
        }
}

/* u is going: its followers get what they have, and the end. */
static void on_going(void *arg, struct unit *u)
{
        struct frames *fs = arg;
        struct frame_follower *f, *next;
        char note[GADGET_NAME_MAX + 48];
        snprintf(note, sizeof note, "%s was unloaded", unit_name(u));
        for (f = LIST_FIRST(&fs->followers); f; f = next) {
                next = LIST_NEXT(f, link);
                if (f->u != u)
                        continue;
                f->cl->frames = NULL;
                send_part(f, false, note);
                follower_free(f);
        }
}

int frames_open(struct core *core, struct frames **out)
{
        struct frames *fs = calloc(1, sizeof *fs);
        if (!fs)
                return -ENOMEM;
        LIST_INIT(&fs->followers);
        const struct unit_listener l = { .framed = on_framed, .going = on_going, .arg = fs };
        int e = core_listen(core, &l);
        if (e < 0) {
                free(fs);
                return e;
        }
        *out = fs;
        return 0;
}

void frames_free(struct frames *fs)
{
        if (!fs)
                return;
        while (!LIST_EMPTY(&fs->followers)) {
                struct frame_follower *f = LIST_FIRST(&fs->followers);
                f->cl->frames = NULL;
                follower_free(f);
        }
        free(fs);
}

void frames_client_gone(struct client *cl)
{
        follower_free(cl->frames);
        cl->frames = NULL;
}

/* How many followers u has. */
static size_t followers_of(const struct frames *fs, const struct unit *u)
{
        size_t n = 0;
        const struct frame_follower *f;
        LIST_FOREACH(f, &fs->followers, link)
                n += f->u == u;
        return n;
}

void request_frames(struct client *cl, const Control__Request *q)
{
        struct frames *fs = client_frames(cl);
        const char *name = q->frames->name;
        /* Why root only: a frame carries what a gadget is called with and
         * answers, which only root may read (as exec and cat). */
        if (cl->cred.uid != 0) {
                client_error(cl, q->id, GADGET_EDENIED, "trace NAME shows what a gadget's channel carries: root only");
                return;
        }
        if (!fs) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "this gadgetd cannot follow frames");
                return;
        }
        if (cl->stream || cl->frames) {
                client_error(cl, q->id, GADGET_EBUSY, "this connection streams an answer already");
                return;
        }
        struct unit *u = core_find(client_env(cl)->core, name);
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", name);
                return;
        }
        if (followers_of(fs, u) >= CONTROL_FRAMES_PER_GADGET) {
                client_error(cl, q->id, GADGET_ELIMIT, "%s has %d followers of its frames already, as many as "
                             "it may have", name, CONTROL_FRAMES_PER_GADGET);
                return;
        }
        if (fs->n >= CONTROL_FRAMES_FOLLOWERS) {
                client_error(cl, q->id, GADGET_ELIMIT, "%d followers of frames already, as many as gadgetd "
                             "takes", CONTROL_FRAMES_FOLLOWERS);
                return;
        }
        struct frame_follower *f = calloc(1, sizeof *f);
        if (!f || !(f->ring = calloc(CONTROL_FRAMES_QUEUE, sizeof *f->ring)) ||
            !(f->ev = evtimer_new(client_env(cl)->base, send_cb, f))) {
                follower_free(f);
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        *f = (struct frame_follower){ .fs = fs, .cl = cl, .id = q->id, .u = u, .ev = f->ev, .ring = f->ring };
        LIST_INSERT_HEAD(&fs->followers, f, link);
        fs->n++;
        unit_frames_watch(u, true);
        cl->frames = f;
        kick_in(f, 0); /* the first part, empty: the client knows it follows */
}
