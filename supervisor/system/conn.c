/* conn: one framed connection on the libevent loop (see conn.h). */
#include "conn.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "monotime.h"
#include "timer.h"
#include "wire.h"

/* A conn whose buffers grew to this gives its memory back when freed. */
#define CONN_TRIM_BYTES (64u << 10)
#define CONN_TRIM_DELAY_MS 100   /* one trim for all the frees of a moment */

#define BEV_CHUNK 16384          /* bytes taken from a bufferevent's input at a time */

struct conn;

/* How the bytes move: a plain fd with the conn's own events, or a
 * bufferevent (TLS, through bufferevent_openssl) whose buffers the conn
 * fills and empties. Everything above it (frames, budget, holding,
 * closing) is the same for both. */
struct transport {
        /* Bytes into c->rd: how many, 0 at the end, -EAGAIN when none wait, -errno. */
        ssize_t (*fill)(struct conn *c);
        /* Whether fill may find more at once (a bufferevent's input holds
         * bytes already read); a fd waits for its next read event. */
        bool buffered;
        /* The frames in c->wr go out. */
        void (*flush)(struct conn *c);
        /* Input is waited for, or not. */
        void (*reading)(struct conn *c, bool on);
        /* Bytes not yet on the wire. */
        size_t (*unsent)(const struct conn *c);
};

struct conn {
        int fd;                       /* -1 on a bufferevent */
        struct bufferevent *bev;      /* the transport, when not a plain fd */
        const struct transport *t;
        int bev_end;                  /* the bufferevent's end (0: end of file, -errno), once bev_ended */
        bool bev_ended;
        const struct conn_ops *ops;
        void *arg;
        struct event *ev_read, *ev_write;
        struct event *ev_more;        /* frames left over from a turn */
        struct wire_reader rd;
        struct wire_writer wr;
        size_t queue_max;             /* 0: only the writer's own bound */
        struct conn_budget budget;
        ssize_t read_end;             /* a fill's end of file or error, acted on once drained */
        bool read_ended;
        bool held;                    /* input left alone (conn_hold) */
        bool closed;                  /* input ended: nothing more is read */
        bool dropped;                 /* conn_drop: closed() is due from ev_write */
        bool told;                    /* closed() was called */
        int drop_why;                 /* conn_drop's why, for closed() */
        size_t fds_max;               /* fds taken with the bytes (conn_accept_fds), 0: none */
        int fds[CONN_FDS_MAX];        /* those received and not taken yet */
        size_t n_fds;
        bool fds_extra;               /* more came than fds_max: refused and closed */
};

static void read_cb(evutil_socket_t fd, short what, void *arg);
static bool pull(struct conn *c);
static void write_cb(evutil_socket_t fd, short what, void *arg);
static void more_cb(evutil_socket_t fd, short what, void *arg);

static const struct transport fd_transport, bev_transport;

static struct conn *conn_alloc(size_t queue_max, const struct conn_ops *ops, void *arg)
{
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        c->fd = -1;
        c->ops = ops;
        c->arg = arg;
        c->queue_max = queue_max;
        c->budget = (struct conn_budget){ UINT64_MAX, UINT64_MAX, UINT64_MAX };
        wire_reader_init(&c->rd, WIRE_MAX_FRAME);
        /* The writer's own cap: queue_max waiting plus one whole frame. */
        wire_writer_init(&c->wr, queue_max ? queue_max + WIRE_MAX_FRAME : 0);
        return c;
}

int conn_new(struct event_base *base, int fd, size_t queue_max, const struct conn_ops *ops, void *arg,
             struct conn **out)
{
        struct conn *c = conn_alloc(queue_max, ops, arg);
        if (!c)
                return -ENOMEM;
        c->t = &fd_transport;
        c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, read_cb, c);
        c->ev_write = event_new(base, fd, EV_WRITE, write_cb, c);
        c->ev_more = evtimer_new(base, more_cb, c);
        if (!c->ev_read || !c->ev_write || !c->ev_more || event_add(c->ev_read, NULL) < 0) {
                conn_free(c); /* the caller keeps its fd on failure */
                return -ENOMEM;
        }
        c->fd = fd;
        *out = c;
        return 0;
}

static void bev_read_cb(struct bufferevent *bev, void *arg);
static void bev_write_cb(struct bufferevent *bev, void *arg);
static void bev_event_cb(struct bufferevent *bev, short what, void *arg);

int conn_new_bev(struct bufferevent *bev, size_t queue_max, const struct conn_ops *ops, void *arg, struct conn **out)
{
        struct event_base *base = bufferevent_get_base(bev);
        struct conn *c = conn_alloc(queue_max, ops, arg);
        if (!c)
                return -ENOMEM;
        c->t = &bev_transport;
        /* ev_write has no fd here: it only runs the flush, or a drop's
         * closed(), from the loop. */
        c->ev_write = event_new(base, -1, 0, write_cb, c);
        c->ev_more = evtimer_new(base, more_cb, c);
        if (!c->ev_write || !c->ev_more) {
                conn_free(c); /* the caller keeps its bufferevent on failure */
                return -ENOMEM;
        }
        c->bev = bev;
        bufferevent_setcb(bev, bev_read_cb, bev_write_cb, bev_event_cb, c);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        /* What the bufferevent read before it was handed over comes first. */
        static const struct timeval now = { 0, 0 };
        event_add(c->ev_more, &now);
        *out = c;
        return 0;
}

/* Why a trim: a party's large buffers (a control client that never read
 * its answers, a big frame) are freed chunks amid the heap, which glibc
 * keeps for later; malloc_trim gives their pages back to the system, so
 * the memory a hostile party made gadgetd take goes with it. Once for all
 * the frees of a moment (a hundred clients dropped at once). */
static bool trim_due;

static void trim_cb(evutil_socket_t fd, short what, void *arg)
{
        trim_due = false;
        malloc_trim(0);
}

static void trim_soon(struct event_base *base)
{
        struct timeval tv = timer_tv_ms(CONN_TRIM_DELAY_MS);
        if (!trim_due && base && event_base_once(base, -1, EV_TIMEOUT, trim_cb, NULL, &tv) == 0)
                trim_due = true;
}

void conn_free(struct conn *c)
{
        if (!c)
                return;
        if (c->rd.cap + c->wr.cap >= CONN_TRIM_BYTES)
                trim_soon(c->ev_more ? event_get_base(c->ev_more) : NULL);
        if (c->ev_read)
                event_free(c->ev_read);
        if (c->ev_write)
                event_free(c->ev_write);
        if (c->ev_more)
                event_free(c->ev_more);
        if (c->bev)
                bufferevent_free(c->bev);
        if (c->fd >= 0)
                close(c->fd);
        conn_take_fds(c, NULL, 0);
        wire_reader_free(&c->rd);
        wire_writer_free(&c->wr);
        free(c);
}

void conn_set_budget(struct conn *c, const struct conn_budget *b)
{
        c->budget = *b;
}

size_t conn_pending(const struct conn *c)
{
        return c->t->unsent(c);
}

size_t conn_buffered(const struct conn *c, const uint8_t **bytes)
{
        if (bytes)
                *bytes = c->rd.buf + c->rd.start;
        return c->rd.end - c->rd.start;
}

bool conn_input_ended(const struct conn *c)
{
        return c->read_ended || c->closed || c->bev_ended;
}

int conn_preload(struct conn *c, const uint8_t *bytes, size_t len)
{
        static const struct timeval now = { 0, 0 };
        int e = len ? wire_reader_feed(&c->rd, bytes, len) : 0;
        if (e < 0)
                return e;
        if (!c->held)
                event_add(c->ev_more, &now);
        return 0;
}

bool conn_unread(const struct conn *c)
{
        int n = 0;
        if (conn_buffered(c, NULL) > 0)
                return true;
        return c->fd >= 0 && !conn_input_ended(c) && ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

int conn_fd(const struct conn *c)
{
        return c->fd;
}

int conn_send_counted(struct conn *c, const ProtobufCMessage *msg, size_t *bytes)
{
        /* Why this bounds memory: frames wait only while no more than
         * queue_max bytes are unsent (plus the one being added, at most a
         * frame); a peer with more has stopped reading, and its owner ends it. */
        if (c->dropped)
                return -ECONNRESET;
        if (c->queue_max && c->t->unsent(c) > c->queue_max)
                return -ENOBUFS;
        size_t had = wire_writer_pending(&c->wr);
        int e = wire_writer_put(&c->wr, msg, WIRE_MAX_FRAME);
        if (e < 0)
                return e;
        /* The frame is the writer's last bytes: making room may have moved
         * those before it, so its place is counted from the end. */
        size_t len = wire_writer_pending(&c->wr) - had;
        if (c->ops->sending) {
                e = c->ops->sending(c->arg, c->wr.buf + c->wr.end - len + WIRE_HEADER_SIZE, len - WIRE_HEADER_SIZE);
                if (e < 0) {
                        c->wr.end -= len; /* refused: it never leaves */
                        return e;
                }
        }
        /* A flush in this loop turn: frames queued together leave in one write. */
        if (!event_pending(c->ev_write, EV_WRITE, NULL))
                event_active(c->ev_write, EV_WRITE, 0);
        if (bytes)
                *bytes = len;
        return 0;
}

int conn_send(struct conn *c, const ProtobufCMessage *msg)
{
        return conn_send_counted(c, msg, NULL);
}

int conn_send_frames(struct conn *c, const uint8_t *frames, size_t len)
{
        if (c->dropped)
                return -ECONNRESET;
        if (c->queue_max && c->t->unsent(c) > c->queue_max)
                return -ENOBUFS;
        int e = wire_writer_append(&c->wr, frames, len);
        if (e < 0)
                return e;
        if (!event_pending(c->ev_write, EV_WRITE, NULL))
                event_active(c->ev_write, EV_WRITE, 0);
        return 0;
}

/* The owner hears why the connection ended, once; it may free it. */
static void tell(struct conn *c, int why)
{
        if (c->told)
                return;
        c->told = true;
        c->ops->closed(c->arg, why);
}

static void write_cb(evutil_socket_t fd, short what, void *arg)
{
        struct conn *c = arg;
        if (c->dropped) {
                tell(c, c->drop_why);
                return;
        }
        c->t->flush(c);
}

void conn_close(struct conn *c)
{
        c->closed = true;
        c->t->reading(c, false);
        event_del(c->ev_more);
}

void conn_drop(struct conn *c, int why)
{
        if (c->dropped)
                return;
        conn_close(c);
        c->dropped = true;
        c->drop_why = why;
        event_active(c->ev_write, EV_WRITE, 0);
}

/* The input ended by itself. */
static void end(struct conn *c, int why)
{
        conn_close(c);
        tell(c, why);
}

/* What the end of the input means, once every frame before it is handled.
 * A reset is how a peer that exits with unread input closes. */
static int read_end_why(const struct conn *c)
{
        ssize_t n = c->read_end;
        if (n == 0 || n == -ECONNRESET)
                return c->rd.end != c->rd.start ? CONN_TRUNCATED : CONN_EOF;
        return (int)n;
}

/* Room left in this turn's budget for another frame. */
static bool within(const struct conn *c, size_t frames, size_t bytes, size_t cost)
{
        return frames < c->budget.frames && bytes < c->budget.bytes && cost < c->budget.cost;
}

/* Leaves the rest for the next turn. Why this is safe: one peer holds the
 * loop for a bounded amount of work; a zero timeout runs after the next
 * poll, behind every peer that is ready. */
static void yield(struct conn *c, size_t frames, size_t bytes, size_t cost)
{
        static const struct timeval now = { 0, 0 };
        c->t->reading(c, false);
        event_add(c->ev_more, &now);
        if (c->ops->yielded)
                c->ops->yielded(c->arg, frames, bytes, cost);
}

/* Handles the frames buffered, within this turn's budget. Frames left over
 * wait for the next turn, and meanwhile nothing more is read (the peer's
 * writes block: the socket is its queue). */
static void drain_frames(struct conn *c)
{
        size_t frames = 0, bytes = 0, cost = 0;
        for (;;) {
                const uint8_t *data;
                size_t len;
                if (c->held) {
                        c->t->reading(c, false);
                        return;
                }
                if (!within(c, frames, bytes, cost)) {
                        /* Nothing left over (a fd's reads are in turn
                         * with every other ready peer's anyway): no
                         * yield, whose reading off and on again and
                         * extra turn cost three system calls. */
                        if (!c->t->buffered && conn_buffered(c, NULL) == 0)
                                break;
                        yield(c, frames, bytes, cost);
                        return;
                }
                int r = wire_reader_next(&c->rd, &data, &len);
                if (r < 0) {
                        end(c, r);
                        return;
                }
                if (r == 0 && c->t->buffered && !c->read_ended && pull(c)) {
                        monotime_turn_mark(); /* its frames were read now */
                        continue; /* more was waiting in the transport's buffer */
                }
                if (r == 0)
                        break;
                frames++;
                bytes += WIRE_HEADER_SIZE + len;
                int e = c->ops->frame(c->arg, data, len, &cost);
                if (c->closed)
                        return;
                if (e < 0) {
                        end(c, e);
                        return;
                }
        }
        if (c->read_ended) {
                end(c, read_end_why(c));
                return;
        }
        c->t->reading(c, true);
}

/* The batch's frames share one clock reading (monotime_turn): a call's
 * start, its deadline and a result's end cost no reading each. */
static void drain(struct conn *c)
{
        monotime_turn_begin();
        drain_frames(c);
        monotime_turn_end();
}

/* Takes what the transport has into the reader: true if that was bytes or
 * the input's end (then read_ended), false if nothing waits. */
static bool pull(struct conn *c)
{
        ssize_t n = c->t->fill(c);
        if (n == -EAGAIN)
                return false;
        if (n <= 0) {
                c->read_ended = true;
                c->read_end = n;
                c->t->reading(c, false);
        }
        return true;
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
        struct conn *c = arg;
        if (pull(c))
                drain(c);
}

static void more_cb(evutil_socket_t fd, short what, void *arg)
{
        drain(arg);
}

void conn_hold(struct conn *c, bool hold)
{
        bool was = c->held;
        c->held = hold;
        if (was == hold || c->closed)
                return;
        if (hold) {
                c->t->reading(c, false);
                event_del(c->ev_more);
        } else {
                /* Frames already buffered first, then the socket again. */
                static const struct timeval now = { 0, 0 };
                event_add(c->ev_more, &now);
        }
}

/* --- a plain fd ---------------------------------------------------------- */

/* With fds accepted, those that come are kept until conn_take_fds, at
 * most fds_max. Why this is safe: a peer sending more (at once or over
 * several reads before its frame is handled) gets none kept open; they
 * are closed here, and the frame they came with is told so. */
static ssize_t fd_fill(struct conn *c)
{
        if (!c->fds_max)
                return wire_reader_fill(&c->rd, c->fd);
        int got[CONN_FDS_MAX];
        size_t n = 0;
        bool extra = false;
        ssize_t r = wire_reader_fill_fds(&c->rd, c->fd, got, c->fds_max, &n, &extra);
        for (size_t i = 0; i < n; i++) {
                if (c->n_fds < c->fds_max)
                        c->fds[c->n_fds++] = got[i];
                else {
                        close(got[i]);
                        extra = true;
                }
        }
        c->fds_extra |= extra;
        return r;
}

void conn_accept_fds(struct conn *c, size_t max)
{
        c->fds_max = max < CONN_FDS_MAX ? max : CONN_FDS_MAX;
}

int conn_take_fds(struct conn *c, int *fds, size_t max)
{
        bool refuse = c->fds_extra || c->n_fds > max;
        size_t n = c->n_fds;
        for (size_t i = 0; i < n; i++) {
                if (refuse)
                        close(c->fds[i]);
                else
                        fds[i] = c->fds[i];
        }
        c->n_fds = 0;
        c->fds_extra = false;
        return refuse ? -E2BIG : (int)n;
}

static void fd_flush(struct conn *c)
{
        int e = wire_writer_flush(&c->wr, c->fd);
        if (e == 1)
                event_add(c->ev_write, NULL);
        else if (e == 0 && c->ops->drained)
                c->ops->drained(c->arg);
        /* A write error means the peer is gone; the read side sees it. */
}

static void fd_reading(struct conn *c, bool on)
{
        if (!on)
                event_del(c->ev_read);
        else if (!event_pending(c->ev_read, EV_READ, NULL))
                event_add(c->ev_read, NULL);
}

static size_t fd_unsent(const struct conn *c)
{
        return wire_writer_pending(&c->wr);
}

static const struct transport fd_transport = {
        .fill = fd_fill, .buffered = false, .flush = fd_flush, .reading = fd_reading, .unsent = fd_unsent,
};

/* --- a bufferevent ------------------------------------------------------- */

/* A chunk at a time, so no more than one frame plus a chunk waits in the
 * reader and an oversized announcement is refused once its 4 bytes are in. */
static ssize_t bev_fill(struct conn *c)
{
        uint8_t chunk[BEV_CHUNK];
        int n = evbuffer_remove(bufferevent_get_input(c->bev), chunk, sizeof chunk);
        if (n > 0) {
                int e = wire_reader_feed(&c->rd, chunk, (size_t)n);
                return e < 0 ? e : n;
        }
        return c->bev_ended ? c->bev_end : -EAGAIN;
}

/* The frames move to the bufferevent's output; it writes them, and says
 * when all are gone (bev_write_cb). */
static void bev_flush(struct conn *c)
{
        size_t n = wire_writer_pending(&c->wr);
        if (n && evbuffer_add(bufferevent_get_output(c->bev), c->wr.buf + c->wr.start, n) < 0)
                return; /* out of memory: they wait for the next send */
        c->wr.start = c->wr.end = 0;
        if (c->wr.cap > BEV_CHUNK)
                wire_writer_free(&c->wr); /* a large frame's room is not kept */
}

static void bev_reading(struct conn *c, bool on)
{
        if (on)
                bufferevent_enable(c->bev, EV_READ);
        else
                bufferevent_disable(c->bev, EV_READ);
}

static size_t bev_unsent(const struct conn *c)
{
        return wire_writer_pending(&c->wr) + evbuffer_get_length(bufferevent_get_output(c->bev));
}

static const struct transport bev_transport = {
        .fill = bev_fill, .buffered = true, .flush = bev_flush, .reading = bev_reading, .unsent = bev_unsent,
};

static void bev_read_cb(struct bufferevent *bev, void *arg)
{
        read_cb(-1, EV_READ, arg);
}

static void bev_write_cb(struct bufferevent *bev, void *arg)
{
        struct conn *c = arg;
        if (!c->dropped && c->ops->drained)
                c->ops->drained(c->arg);
}

/* The end of the bufferevent's input (a reset, a TLS error): acted on once
 * the bytes before it are handled. */
static void bev_event_cb(struct bufferevent *bev, short what, void *arg)
{
        struct conn *c = arg;
        if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) || c->bev_ended)
                return;
        int err = EVUTIL_SOCKET_ERROR();
        c->bev_ended = true;
        c->bev_end = (what & BEV_EVENT_EOF) ? 0 : err ? -err : -EPROTO;
        bufferevent_disable(bev, EV_READ);
        /* Held or yielded, the end is found when the input goes on. */
        if (!c->closed && !c->held && !evtimer_pending(c->ev_more, NULL))
                read_cb(-1, EV_READ, c);
}
