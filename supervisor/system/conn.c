/* conn: one framed connection on the libevent loop (see conn.h). */
#include "conn.h"

#include <stdlib.h>
#include <unistd.h>

#include "wire.h"

struct conn {
        int fd;
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
};

static void read_cb(evutil_socket_t fd, short what, void *arg);
static void write_cb(evutil_socket_t fd, short what, void *arg);
static void more_cb(evutil_socket_t fd, short what, void *arg);

int conn_new(struct event_base *base, int fd, size_t queue_max, const struct conn_ops *ops, void *arg,
             struct conn **out)
{
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->fd = fd;
        c->ops = ops;
        c->arg = arg;
        c->queue_max = queue_max;
        c->budget = (struct conn_budget){ UINT64_MAX, UINT64_MAX, UINT64_MAX };
        wire_reader_init(&c->rd, WIRE_MAX_FRAME);
        /* The writer's own cap: queue_max waiting plus one whole frame. */
        wire_writer_init(&c->wr, queue_max ? queue_max + WIRE_MAX_FRAME : 0);
        c->ev_read = event_new(base, fd, EV_READ | EV_PERSIST, read_cb, c);
        c->ev_write = event_new(base, fd, EV_WRITE, write_cb, c);
        c->ev_more = evtimer_new(base, more_cb, c);
        if (!c->ev_read || !c->ev_write || !c->ev_more || event_add(c->ev_read, NULL) < 0) {
                c->fd = -1; /* the caller keeps its fd on failure */
                conn_free(c);
                return -ENOMEM;
        }
        *out = c;
        return 0;
}

void conn_free(struct conn *c)
{
        if (!c)
                return;
        if (c->ev_read)
                event_free(c->ev_read);
        if (c->ev_write)
                event_free(c->ev_write);
        if (c->ev_more)
                event_free(c->ev_more);
        if (c->fd >= 0)
                close(c->fd);
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
        return wire_writer_pending(&c->wr);
}

int conn_send(struct conn *c, const ProtobufCMessage *msg)
{
        /* Why this bounds memory: frames wait only while no more than
         * queue_max bytes are unsent (plus the one being added, at most a
         * frame); a peer with more has stopped reading, and its owner ends it. */
        if (c->dropped)
                return -ECONNRESET;
        if (c->queue_max && wire_writer_pending(&c->wr) > c->queue_max)
                return -ENOBUFS;
        int e = wire_writer_put(&c->wr, msg, WIRE_MAX_FRAME);
        if (e < 0)
                return e;
        /* A flush in this loop turn: frames queued together leave in one write. */
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
        int e = wire_writer_flush(&c->wr, c->fd);
        if (e == 1)
                event_add(c->ev_write, NULL);
        else if (e == 0 && c->ops->drained)
                c->ops->drained(c->arg);
        /* A write error means the peer is gone; the read side sees it. */
}

void conn_close(struct conn *c)
{
        c->closed = true;
        event_del(c->ev_read);
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
        event_del(c->ev_read);
        event_add(c->ev_more, &now);
        if (c->ops->yielded)
                c->ops->yielded(c->arg, frames, bytes, cost);
}

/* Handles the frames buffered, within this turn's budget. Frames left over
 * wait for the next turn, and meanwhile nothing more is read (the peer's
 * writes block: the socket is its queue). */
static void drain(struct conn *c)
{
        size_t frames = 0, bytes = 0, cost = 0;
        for (;;) {
                const uint8_t *data;
                size_t len;
                if (c->held) {
                        event_del(c->ev_read);
                        return;
                }
                if (!within(c, frames, bytes, cost)) {
                        yield(c, frames, bytes, cost);
                        return;
                }
                int r = wire_reader_next(&c->rd, &data, &len);
                if (r < 0) {
                        end(c, r);
                        return;
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
        if (!event_pending(c->ev_read, EV_READ, NULL))
                event_add(c->ev_read, NULL);
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
        struct conn *c = arg;
        ssize_t n = wire_reader_fill(&c->rd, c->fd);
        if (n == -EAGAIN)
                return;
        if (n <= 0) {
                c->read_ended = true;
                c->read_end = n;
                event_del(c->ev_read);
        }
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
                event_del(c->ev_read);
                event_del(c->ev_more);
        } else {
                /* Frames already buffered first, then the socket again. */
                static const struct timeval now = { 0, 0 };
                event_add(c->ev_more, &now);
        }
}
