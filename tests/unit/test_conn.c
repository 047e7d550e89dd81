/* Unit tests of supervisor/system/conn.c on a real libevent loop and a
 * socketpair: frames in order, the end codes (end of file, inside a frame,
 * over the maximum, the frame callback's error), the turn budget, holding,
 * the bound on unsent output, a drop from inside a callback, and the
 * drained callback, a batch's one clock reading; each over both transports, a plain fd and a
 * bufferevent (as the node link's TLS sessions use), and the sending
 * check that refuses a frame before it is queued; fds passed with frames. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "tap.h"
#include "system/conn.h"
#include "system/monotime.h"
#include "wire.h"
#include "gadget.pb-c.h"

/* What the callbacks saw. */
struct seen {
        struct conn *c;
        int frames, closed, why, yields, drained;
        size_t last_len;
        uint64_t turn_us[8]; /* the turn's clock reading at each of the first frames */
        long frame_ns;       /* each frame's callback takes this long (0: no pause) */
        int fail_at;      /* the frame callback fails at this frame (1-based) */
        int drop_at;      /* or drops the conn there */
        int hold_at;      /* or holds its input there */
        bool freed_in_closed;
};

static int on_frame(void *arg, const uint8_t *data, size_t len, size_t *cost)
{
        struct seen *s = arg;
        s->frames++;
        s->last_len = len;
        if (s->frames <= 8)
                s->turn_us[s->frames - 1] = monotime_turn_us();
        if (s->frame_ns) {
                struct timespec pause = { 0, s->frame_ns };
                nanosleep(&pause, NULL);
        }
        *cost += 1;
        if (s->frames == s->drop_at) {
                Gadget__Shutdown m = GADGET__SHUTDOWN__INIT;
                conn_drop(s->c, -ENOBUFS);
                /* Dropped: nothing more is sent. */
                CHECK(conn_send(s->c, &m.base) == -ECONNRESET, "a send after the drop is refused");
                CHECK(s->closed == 0, "closed() does not run inside the callback that dropped");
        }
        if (s->frames == s->hold_at)
                conn_hold(s->c, true);
        return s->frames == s->fail_at ? -EPROTO : 0;
}

static void on_closed(void *arg, int why)
{
        struct seen *s = arg;
        s->closed++;
        s->why = why;
        if (s->freed_in_closed) {
                conn_free(s->c);
                s->c = NULL;
        }
}

static void on_yielded(void *arg, size_t frames, size_t bytes, size_t cost)
{
        struct seen *s = arg;
        s->yields++;
}

static void on_drained(void *arg)
{
        ((struct seen *)arg)->drained++;
}

static const struct conn_ops ops = {
        .frame = on_frame, .closed = on_closed, .yielded = on_yielded, .drained = on_drained,
};

/* Turns of the loop: each handles one batch of ready events (a tick every
 * millisecond keeps a turn from waiting for ever; EVLOOP_NONBLOCK would run
 * turns until nothing is ready, the budget's later turns included). */
static void turns(struct event_base *base, int n)
{
        for (int i = 0; i < n; i++)
                event_base_loop(base, EVLOOP_ONCE);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
}

/* Writes n frames of a small message to fd, in one write. */
static void put_frames(int fd, int n)
{
        struct wire_writer w;
        Gadget__Log l = GADGET__LOG__INIT;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        l.text = "x";
        m.msg_case = GADGET__WORKER_MSG__MSG_LOG;
        m.log = &l;
        wire_writer_init(&w, 0);
        for (int i = 0; i < n; i++)
                wire_writer_put(&w, &m.base, WIRE_MAX_FRAME);
        CHECK(wire_writer_flush(&w, fd) == 0, "%d frames written", n);
        wire_writer_free(&w);
}

static bool over_bev; /* the tests' transport: a bufferevent, or a plain fd */

/* A conn on one end of a fresh socketpair; *other is the far end. */
static struct conn *open_conn(struct event_base *base, struct seen *s, size_t queue_max, int *other)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                return NULL;
        *other = sv[1];
        if (over_bev) {
                struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
                /* As a TLS bufferevent may: more read at once than the conn
                 * takes at a time. */
                if (bev)
                        bufferevent_set_max_single_read(bev, 65536);
                if (!bev || conn_new_bev(bev, queue_max, &ops, s, &s->c) < 0) {
                        if (bev)
                                bufferevent_free(bev);
                        else
                                close(sv[0]);
                        return NULL;
                }
        } else if (conn_new(base, sv[0], queue_max, &ops, s, &s->c) < 0) {
                close(sv[0]);
                return NULL;
        }
        return s->c;
}

static void test_frames_then_eof(struct event_base *base)
{
        struct seen s = { .freed_in_closed = true };
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        put_frames(fd, 3);
        close(fd);
        turns(base, 3);
        CHECK(s.frames == 3, "every frame before the end of file is handled: %d", s.frames);
        CHECK(s.closed == 1 && s.why == CONN_EOF, "then closed(CONN_EOF) once: %d, %d", s.closed, s.why);
}

/* Frames larger than what a transport hands over at once (a bufferevent:
 * 16 KiB at a time) all come, with no more bytes arriving after them. */
static void test_large_frames(struct event_base *base)
{
        static char text[40000];
        struct seen s = { 0 };
        struct wire_writer w;
        Gadget__Log l = GADGET__LOG__INIT;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        int fd;
        memset(text, 'y', sizeof text - 1);
        l.text = text;
        m.msg_case = GADGET__WORKER_MSG__MSG_LOG;
        m.log = &l;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        wire_writer_init(&w, 0);
        for (int i = 0; i < 3; i++)
                wire_writer_put(&w, &m.base, WIRE_MAX_FRAME);
        CHECK(wire_writer_flush(&w, fd) == 0, "3 frames of 40 KB written");
        wire_writer_free(&w);
        for (int i = 0; i < 100 && s.frames < 3; i++)
                turns(base, 1);
        CHECK(s.frames == 3 && s.last_len > sizeof text, "every large frame is handled: %d", s.frames);
        conn_free(s.c);
        close(fd);
}

/* What a bufferevent read before the conn took it over (a TLS session's
 * first frames, read with its handshake) is handled, every frame of it,
 * though no more bytes arrive. */
static void test_read_before(struct event_base *base)
{
        struct seen s = { 0 };
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "a socketpair");
        struct bufferevent *bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
        CHECK(bev && bufferevent_enable(bev, EV_READ) == 0, "a bufferevent reading");
        put_frames(sv[1], 3000); /* 9 bytes each: more than the conn takes at once */
        size_t want = evbuffer_get_length(bufferevent_get_input(bev));
        for (int i = 0; i < 1000 && (want = evbuffer_get_length(bufferevent_get_input(bev))) < 3000 * 9; i++)
                turns(base, 1);
        CHECK(want == 3000 * 9, "the bufferevent read them all first: %zu bytes", want);
        CHECK(conn_new_bev(bev, 0, &ops, &s, &s.c) == 0, "conn_new_bev");
        for (int i = 0; i < 100 && s.frames < 3000; i++)
                turns(base, 1);
        CHECK(s.frames == 3000, "every frame read before is handled: %d", s.frames);
        conn_free(s.c);
        close(sv[1]);
}

static void test_truncated_and_too_big(struct event_base *base)
{
        static const uint8_t part[] = { 10, 0, 0, 0, 'a' }, huge[] = { 0xff, 0xff, 0xff, 0x7f };
        struct seen s = { .freed_in_closed = true };
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        CHECK(write(fd, part, sizeof part) == (ssize_t)sizeof part, "half a frame written");
        close(fd);
        turns(base, 3);
        CHECK(s.closed == 1 && s.why == CONN_TRUNCATED, "end of file inside a frame: %d", s.why);

        s = (struct seen){ .freed_in_closed = true };
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        CHECK(write(fd, huge, sizeof huge) == (ssize_t)sizeof huge, "a huge length written");
        turns(base, 2);
        CHECK(s.closed == 1 && s.why == CONN_TOO_BIG, "a frame over the maximum: %d", s.why);
        close(fd);
}

static void test_frame_error(struct event_base *base)
{
        struct seen s = { .fail_at = 2, .freed_in_closed = true };
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        put_frames(fd, 4);
        turns(base, 3);
        CHECK(s.frames == 2, "no frame after the one refused: %d", s.frames);
        CHECK(s.closed == 1 && s.why == -EPROTO, "closed() with the callback's error: %d", s.why);
        close(fd);
}

static void test_budget(struct event_base *base)
{
        struct seen s = { 0 };
        struct conn_budget b = { 2, UINT64_MAX, UINT64_MAX };
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        conn_set_budget(s.c, &b);
        put_frames(fd, 5);
        turns(base, 1);
        CHECK(s.frames == 2 && s.yields == 1, "one turn handles the budget's frames: %d, %d yields", s.frames,
              s.yields);
        turns(base, 4);
        CHECK(s.frames == 5, "the rest in later turns: %d", s.frames);
        b = (struct conn_budget){ UINT64_MAX, UINT64_MAX, 3 };
        conn_set_budget(s.c, &b);
        put_frames(fd, 4);
        turns(base, 1);
        CHECK(s.frames == 8, "the cost budget counts what the callback adds: %d", s.frames);
        turns(base, 3);
        CHECK(s.frames == 9 && s.closed == 0, "then the last one: %d", s.frames);
        /* A fd's budget used up by the last frame there was: no yield
         * (none is left over), and the socket is read again at the next
         * turn. (A bufferevent may hold more than its conn has taken: it
         * yields.) */
        if (!over_bev) {
                b = (struct conn_budget){ 2, UINT64_MAX, UINT64_MAX };
                conn_set_budget(s.c, &b);
                int yields = s.yields;
                put_frames(fd, 2);
                turns(base, 1);
                CHECK(s.frames == 11 && s.yields == yields, "a budget met exactly is no yield: %d, %d yields",
                      s.frames, s.yields - yields);
                put_frames(fd, 1);
                turns(base, 1);
                CHECK(s.frames == 12, "the next frame in the next turn: %d", s.frames);
        }
        conn_free(s.c);
        close(fd);
}

/* The frames of one batch share the clock's reading of their turn
 * (monotime_turn); a later batch has a later one; outside a turn the
 * clock is read. */
static void test_turn_clock(struct event_base *base)
{
        struct seen s = { .frame_ns = 100000 }; /* a frame's handling takes time */
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        put_frames(fd, 3);
        turns(base, 1);
        CHECK(s.frames == 3 && s.turn_us[0] && s.turn_us[1] == s.turn_us[0] && s.turn_us[2] == s.turn_us[0],
              "one batch, one reading: %llu %llu %llu", (unsigned long long)s.turn_us[0],
              (unsigned long long)s.turn_us[1], (unsigned long long)s.turn_us[2]);
        struct timespec pause = { 0, 2000000 };
        nanosleep(&pause, NULL);
        uint64_t between = monotime_turn_us();
        CHECK(between >= s.turn_us[0] + 2000, "outside a turn the clock now: %llu after %llu",
              (unsigned long long)between, (unsigned long long)s.turn_us[0]);
        put_frames(fd, 1);
        turns(base, 1);
        CHECK(s.frames == 4 && s.turn_us[3] >= between, "the next batch's reading is later: %llu, %llu",
              (unsigned long long)s.turn_us[3], (unsigned long long)between);
        conn_free(s.c);
        close(fd);
}

static void test_hold(struct event_base *base)
{
        struct seen s = { 0 };
        int fd;
        CHECK(open_conn(base, &s, 0, &fd), "conn_new");
        conn_hold(s.c, true);
        put_frames(fd, 2);
        turns(base, 3);
        CHECK(s.frames == 0, "nothing is handled while held: %d", s.frames);
        conn_hold(s.c, false);
        turns(base, 3);
        CHECK(s.frames == 2, "released, the frames come: %d", s.frames);
        s.hold_at = 3;
        put_frames(fd, 3);
        turns(base, 3);
        CHECK(s.frames == 3, "held from inside a frame callback: no frame after it: %d", s.frames);
        conn_hold(s.c, false);
        turns(base, 3);
        CHECK(s.frames == 5, "released, the frames already read come: %d", s.frames);
        conn_free(s.c);
        close(fd);
}

static void test_queue_bound_and_drop(struct event_base *base)
{
        struct seen s = { .freed_in_closed = true };
        Gadget__Shutdown m = GADGET__SHUTDOWN__INIT;
        int fd, e = 0, sent = 0;
        CHECK(open_conn(base, &s, 4096, &fd), "conn_new");
        CHECK(conn_send(s.c, &m.base) == 0, "a frame queued");
        turns(base, 2);
        CHECK(s.drained == 1 && conn_pending(s.c) == 0, "written, then drained() once: %d", s.drained);
        /* The far end never reads: the socket fills, then the queue. */
        while ((e = conn_send(s.c, &m.base)) == 0 && sent < 10000000) {
                sent++;
                if (sent % 1024 == 0)
                        turns(base, 1);
        }
        /* Frames of 4 bytes (an empty message): refused at the first past 4096. */
        CHECK(e == -ENOBUFS && conn_pending(s.c) > 4096 && conn_pending(s.c) <= 4096 + WIRE_HEADER_SIZE,
              "past queue_max bytes unsent, sends are refused: %d with %zu pending", e, conn_pending(s.c));
        put_frames(fd, 3);
        s.drop_at = 1;
        turns(base, 1);
        CHECK(s.frames == 1, "no frame after the drop: %d", s.frames);
        turns(base, 1);
        CHECK(s.closed == 1 && s.why == -ENOBUFS, "closed() from the loop after a drop: %d, %d", s.closed, s.why);
        close(fd);
}

/* A frame the sending check refuses never leaves; the next one does. */
static int refuse_big(void *arg, const uint8_t *data, size_t len)
{
        return len > 8 ? -E2BIG : 0;
}

static void test_sending_check(struct event_base *base)
{
        static struct conn_ops checked;
        struct seen s = { 0 };
        Gadget__Log big = GADGET__LOG__INIT;
        Gadget__Shutdown small = GADGET__SHUTDOWN__INIT;
        uint8_t buf[64];
        checked = ops;
        checked.sending = refuse_big;
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "a socketpair");
        CHECK(conn_new(base, sv[0], 0, &checked, &s, &s.c) == 0, "conn_new with a sending check");
        big.text = "more than eight bytes";
        CHECK(conn_send(s.c, &big.base) == -E2BIG, "the check refuses a frame");
        CHECK(conn_pending(s.c) == 0, "nothing of it is queued: %zu", conn_pending(s.c));
        CHECK(conn_send(s.c, &small.base) == 0, "the next frame goes");
        turns(base, 2);
        CHECK(read(sv[1], buf, sizeof buf) == WIRE_HEADER_SIZE, "only the small frame arrived");
        conn_free(s.c);
        close(sv[1]);
}

/* The sending check is shown the frame being queued even when the writer
 * made room for it by moving the bytes still waiting to the buffer's
 * start (a peer that read part of what was sent). */
static uint8_t sending_want[70000];
static size_t sending_want_len;
static int sending_seen, sending_wrong;

static int check_bytes(void *arg, const uint8_t *data, size_t len)
{
        sending_seen++;
        sending_wrong += len != sending_want_len || memcmp(data, sending_want, len) != 0;
        return 0;
}

static int send_log(struct conn *c, char fill, size_t n)
{
        static char text[sizeof sending_want];
        Gadget__Log l = GADGET__LOG__INIT;
        memset(text, fill, n);
        text[n] = '\0';
        l.text = text;
        sending_want_len = protobuf_c_message_pack(&l.base, sending_want);
        return conn_send(c, &l.base);
}

static void test_sending_sees_moved_frame(struct event_base *base)
{
        static struct conn_ops checked;
        struct seen s = { 0 };
        checked = ops;
        checked.sending = check_bytes;
        int sv[2], small = 4096;
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "a socketpair");
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        CHECK(conn_new(base, sv[0], 0, &checked, &s, &s.c) == 0, "conn_new with a sending check");
        for (int i = 0; i < 64; i++)
                CHECK(send_log(s.c, 'a', 1000) == 0, "frame %d queued", i);
        turns(base, 2); /* part of them written: the rest waits past the buffer's start */
        size_t waiting = conn_pending(s.c);
        CHECK(waiting > 0 && waiting < 64 * 1004, "part of the frames left: %zu bytes wait", waiting);
        CHECK(send_log(s.c, 'b', 65000) == 0, "a large frame queued behind them");
        CHECK(sending_seen == 65 && sending_wrong == 0, "the check saw each frame's own bytes: %d of %d wrong",
              sending_wrong, sending_seen);
        conn_free(s.c);
        close(sv[1]);
}

/* fds passed with frames (the control link's exec): each frame takes
 * those that came with it; more than accepted are refused (-E2BIG) and
 * closed, and a conn that does not accept fds keeps none. */
struct fd_seen {
        struct conn *c;
        int taken[4];
        int frames;
};

static int on_frame_fds(void *arg, const uint8_t *data, size_t len, size_t *cost)
{
        struct fd_seen *s = arg;
        int fds[3];
        int n = conn_take_fds(s->c, fds, 3);
        for (int i = 0; i < n; i++)
                close(fds[i]);
        if (s->frames < 4)
                s->taken[s->frames] = n;
        s->frames++;
        return 0;
}

static void on_closed_fds(void *arg, int why)
{
}

static const struct conn_ops fd_ops = { .frame = on_frame_fds, .closed = on_closed_fds };

static int open_fds(void)
{
        int n = 0;
        char path[64];
        for (int fd = 0; fd < 1024; fd++) {
                snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
                n += access(path, F_OK) == 0;
        }
        return n;
}

/* One small frame with n copies of fd 0 attached. */
static void put_frame_fds(int fd, size_t n)
{
        struct wire_writer w;
        Gadget__Shutdown m = GADGET__SHUTDOWN__INIT;
        int fds[4] = { 0, 0, 0, 0 };
        wire_writer_init(&w, 0);
        wire_writer_put(&w, &m.base, WIRE_MAX_FRAME);
        CHECK(wire_writer_flush_fds(&w, fd, fds, n) == 0, "a frame with %zu fds written", n);
        wire_writer_free(&w);
}

static void test_fds(struct event_base *base)
{
        int before = open_fds();
        for (int accept = 0; accept < 2; accept++) {
                struct fd_seen s = { 0 };
                int sv[2];
                CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
                CHECK(conn_new(base, sv[0], 0, &fd_ops, &s, &s.c) == 0, "conn_new");
                if (accept)
                        conn_accept_fds(s.c, 3);
                const size_t sent[] = { 3, 0, 4, 1 };
                for (int i = 0; i < 4; i++) {
                        put_frame_fds(sv[1], sent[i]);
                        turns(base, 2);
                }
                CHECK(s.frames == 4, "four frames: %d", s.frames);
                if (accept)
                        CHECK(s.taken[0] == 3 && s.taken[1] == 0 && s.taken[2] == -E2BIG && s.taken[3] == 1,
                              "each frame takes its own fds, 4 refused: %d %d %d %d", s.taken[0], s.taken[1],
                              s.taken[2], s.taken[3]);
                else
                        CHECK(s.taken[0] == 0 && s.taken[2] == 0 && s.taken[3] == 0,
                              "without conn_accept_fds none is kept");
                conn_free(s.c);
                close(sv[1]);
        }
        CHECK(open_fds() <= before, "no fd left open: %d, were %d", open_fds(), before);
}

int main(void)
{
        struct event_base *base = event_base_new();
        struct timeval ms = { 0, 1000 };
        struct event *ticks = base ? event_new(base, -1, EV_PERSIST, tick, NULL) : NULL;
        CHECK(ticks && event_add(ticks, &ms) == 0, "a loop with a tick");
        for (int bev = 0; bev < 2; bev++) {
                over_bev = bev;
                printf("# over %s\n", bev ? "a bufferevent" : "a plain fd");
                test_frames_then_eof(base);
                test_large_frames(base);
                test_truncated_and_too_big(base);
                test_frame_error(base);
                test_budget(base);
                test_turn_clock(base);
                test_hold(base);
                test_queue_bound_and_drop(base);
        }
        test_sending_check(base);
        test_sending_sees_moved_frame(base);
        test_read_before(base);
        test_fds(base);
        event_free(ticks);
        event_base_free(base);
        return tap_done();
}
