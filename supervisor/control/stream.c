/* stream: long list answers in parts, made as the client reads. */
#include "stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <event2/event.h>

#include "client.h"
#include "control.h"
#include "contract.h"
#include "system/log.h"
#include "system/conn.h"
#include "core/logbuf.h"

/* A line waiting to be sent: an audit record (text), or a log line
 * (entry set: gadget points into text's buffer, after the text). */
struct live_line {
        STAILQ_ENTRY(live_line) link;
        bool entry;
        struct stream_entry e;
        size_t size;                    /* counted in live_bytes */
        char text[];
};

struct stream {
        struct client *cl;
        uint64_t id;
        struct event *ev;               /* the next part, at a later loop turn */
        struct stream_source src;       /* .step NULL once done */
        enum stream_follow follow;
        char *gadget;
        char **lines;                   /* the part being made: audit records */
        size_t n, cap, bytes;
        Control__LogEntry **entries;    /* or log lines (each one block, freed with free) */
        size_t n_entries, cap_entries;
        STAILQ_HEAD(, live_line) live;  /* oldest first */
        size_t live_bytes;
        char *note;                     /* for the next part */
};

static void part_clear(struct stream *st)
{
        for (size_t i = 0; i < st->n; i++)
                free(st->lines[i]);
        for (size_t i = 0; i < st->n_entries; i++)
                free(st->entries[i]);
        st->n = st->n_entries = st->bytes = 0;
}

static void source_end(struct stream *st)
{
        if (st->src.free)
                st->src.free(st->src.arg);
        st->src = (struct stream_source){ 0 };
}

void stream_free(struct stream *st)
{
        if (!st)
                return;
        source_end(st);
        part_clear(st);
        free(st->lines);
        free(st->entries);
        struct live_line *l;
        while ((l = STAILQ_FIRST(&st->live))) {
                STAILQ_REMOVE_HEAD(&st->live, link);
                free(l);
        }
        if (st->ev)
                event_free(st->ev);
        free(st->note);
        free(st->gadget);
        free(st);
}

int stream_note(struct stream *st, const char *note)
{
        if (st->note)
                return 0;
        return (st->note = strdup(note)) ? 0 : -ENOMEM;
}

/* Ends the stream, telling the client why with an error of its id. */
static void fail(struct stream *st, int code, const char *why)
{
        struct client *cl = st->cl;
        uint64_t id = st->id;
        cl->stream = NULL;
        stream_free(st);
        client_error(cl, id, code, "%s", why);
}

int stream_add(struct stream *st, const char *line, size_t len)
{
        if ((st->n > 0 || st->n_entries > 0) && st->bytes + len > STREAM_PART_MAX)
                return 0;
        if (st->n == st->cap) {
                size_t cap = st->cap ? st->cap * 2 : 64;
                char **v = realloc(st->lines, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                st->lines = v;
                st->cap = cap;
        }
        char *copy = strndup(line, len);
        if (!copy)
                return -ENOMEM;
        st->lines[st->n++] = copy;
        st->bytes += len + 8; /* the line's own framing inside the message */
        return 1;
}

int stream_add_entry(struct stream *st, const struct stream_entry *e)
{
        size_t tl = strlen(e->text), gl = strlen(e->gadget);
        /* The entry's own framing: its numbers, tags and lengths. */
        size_t cost = tl + gl + 40;
        if ((st->n > 0 || st->n_entries > 0) && st->bytes + cost > STREAM_PART_MAX)
                return 0;
        if (st->n_entries == st->cap_entries) {
                size_t cap = st->cap_entries ? st->cap_entries * 2 : 64;
                Control__LogEntry **v = realloc(st->entries, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                st->entries = v;
                st->cap_entries = cap;
        }
        Control__LogEntry *m = malloc(sizeof *m + tl + gl + 2);
        if (!m)
                return -ENOMEM;
        control__log_entry__init(m);
        char *text = (char *)(m + 1), *gadget = text + tl + 1;
        memcpy(text, e->text, tl + 1);
        memcpy(gadget, e->gadget, gl + 1);
        const char *source = logbuf_source_name(e->source);
        m->text = text;
        m->gadget = gadget;
        m->stream = (char *)(source ? source : "gadgetd");
        m->time_ms = e->time_ms;
        m->run = e->run;
        m->priority = e->prio;
        st->entries[st->n_entries++] = m;
        st->bytes += cost;
        return 1;
}

/* Live lines into the part, while it has room. */
static int take_live(struct stream *st)
{
        struct live_line *l;
        while ((l = STAILQ_FIRST(&st->live))) {
                int e = l->entry ? stream_add_entry(st, &l->e) : stream_add(st, l->text, strlen(l->text));
                if (e <= 0)
                        return e;
                STAILQ_REMOVE_HEAD(&st->live, link);
                st->live_bytes -= l->size;
                free(l);
        }
        return 1;
}

/* Sends the part made; more: further parts follow. 0 or -errno. */
static int send_part(struct stream *st, bool more)
{
        Control__LogLines ll = CONTROL__LOG_LINES__INIT;
        ll.n_lines = st->n;
        ll.lines = st->lines;
        ll.n_entries = st->n_entries;
        ll.entries = st->entries;
        ll.more = more;
        if (st->note)
                ll.note = st->note;
        int e = client_answer(st->cl, st->id, &ll.base);
        part_clear(st);
        free(st->note);
        st->note = NULL;
        return e;
}

static void step_cb(evutil_socket_t fd, short what, void *arg)
{
        struct stream *st = arg;
        char why[512] = "";
        int e = 1;
        /* Why the loop never waits: one part per turn, and none while the
         * client has not read the last one. */
        if (conn_pending(st->cl->conn) > 0)
                return; /* control.c's on_drained kicks when the queue is empty */
        if (st->src.step) {
                e = st->src.step(st->src.arg, st, why, sizeof why);
                if (e < 0) {
                        fail(st, e == -ENOMEM ? GADGET_EINTERNAL : e == -ENOENT ? GADGET_ENOTFOUND : GADGET_EFAILED,
                             why[0] ? why : strerror(-e));
                        return;
                }
                if (e == STREAM_WAIT && st->n == 0 && st->n_entries == 0)
                        return; /* the source kicks when it has more */
                if (e == 0)
                        source_end(st);
        }
        if (!st->src.step && take_live(st) < 0) {
                fail(st, GADGET_EINTERNAL, "out of memory");
                return;
        }
        bool last = !st->src.step && st->follow == STREAM_ONCE;
        if ((st->n > 0 || st->n_entries > 0 || last) && (e = send_part(st, !last)) < 0) {
                snprintf(why, sizeof why, "the answer could not be sent: %s", strerror(-e));
                fail(st, GADGET_EINTERNAL, why);
                return;
        }
        if (last) {
                st->cl->stream = NULL;
                stream_free(st);
                return;
        }
        if ((st->src.step && e != STREAM_WAIT) || !STAILQ_EMPTY(&st->live))
                stream_kick(st);
}

void stream_kick(struct stream *st)
{
        static const struct timeval now = { 0, 0 };
        if (st && !evtimer_pending(st->ev, NULL))
                evtimer_add(st->ev, &now);
}

int stream_start(struct client *cl, uint64_t id, const struct stream_source *src, enum stream_follow follow,
                 const char *gadget)
{
        struct stream *st = NULL;
        int e = -EBUSY;
        if (cl->stream)
                goto fail;
        e = -ENOMEM;
        if (!(st = calloc(1, sizeof *st)))
                goto fail;
        st->src = *src;
        src = NULL;
        st->cl = cl;
        st->id = id;
        st->follow = follow;
        STAILQ_INIT(&st->live);
        if ((gadget && !(st->gadget = strdup(gadget))) ||
            !(st->ev = evtimer_new(client_env(cl)->base, step_cb, st)))
                goto fail;
        cl->stream = st;
        stream_kick(st);
        return 0;
fail:
        if (src && src->free)
                src->free(src->arg);
        stream_free(st);
        return e;
}

/* Queues l (taken) on st's live lines, or ends st if it fell behind. */
static void push_live(struct stream *st, struct live_line *l)
{
        char why[160];
        if (!l) {
                fail(st, GADGET_EINTERNAL, "out of memory");
                return;
        }
        if (st->live_bytes + l->size > STREAM_LIVE_MAX) {
                free(l);
                snprintf(why, sizeof why, "this client fell behind: more than %u bytes of new lines waited to be "
                         "sent", STREAM_LIVE_MAX);
                fail(st, GADGET_ELIMIT, why);
                return;
        }
        STAILQ_INSERT_TAIL(&st->live, l, link);
        st->live_bytes += l->size;
        stream_kick(st);
}

void stream_push(struct stream *st, enum stream_follow kind, const char *gadget, const char *line)
{
        if (!st || st->follow != kind || !st->gadget || strcmp(st->gadget, gadget) != 0)
                return;
        size_t len = strlen(line);
        struct live_line *l = malloc(sizeof *l + len + 1);
        if (l) {
                *l = (struct live_line){ .size = len };
                memcpy(l->text, line, len + 1);
        }
        push_live(st, l);
}

void stream_push_entry(struct stream *st, const struct stream_entry *e)
{
        if (!st || st->follow != STREAM_FOLLOW_LOGS || (st->gadget && strcmp(st->gadget, e->gadget) != 0))
                return;
        size_t tl = strlen(e->text), gl = strlen(e->gadget);
        struct live_line *l = malloc(sizeof *l + tl + gl + 2);
        if (l) {
                *l = (struct live_line){ .entry = true, .e = *e, .size = tl + gl };
                memcpy(l->text, e->text, tl + 1);
                memcpy(l->text + tl + 1, e->gadget, gl + 1);
                l->e.text = l->text;
                l->e.gadget = l->text + tl + 1;
        }
        push_live(st, l);
}
