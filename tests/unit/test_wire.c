/* Unit tests of proto/wire.c: frames through real sockets, byte-by-byte
 * feeds, size caps checked before allocating, end of file, queue limits,
 * batching and a peer that went away. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "wire.h"
#include "gadget.pb-c.h"

/* A hello message; h and m are the caller's storage. */
static void hello(Gadget__WorkerMsg *m, Gadget__Hello *h, const char *name, uint32_t version)
{
        static char *methods[] = { "get", "put" };

        gadget__worker_msg__init(m);
        gadget__hello__init(h);
        h->name = (char *)name;
        h->protocol_version = version;
        h->n_methods = 2;
        h->methods = methods;
        m->msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        m->hello = h;
}

/* Whether frame data/len is a hello named name with version. */
static int is_hello(const uint8_t *data, size_t len, const char *name, uint32_t version)
{
        Gadget__WorkerMsg *m = gadget__worker_msg__unpack(NULL, len, data);
        int ok = m && m->msg_case == GADGET__WORKER_MSG__MSG_HELLO && m->hello &&
                 strcmp(m->hello->name, name) == 0 && m->hello->protocol_version == version &&
                 m->hello->n_methods == 2 && strcmp(m->hello->methods[1], "put") == 0;
        gadget__worker_msg__free_unpacked(m, NULL);
        return ok;
}

/* A connected AF_UNIX pair of the given type. */
static int pair(int type, int sv[2])
{
        return socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv);
}

static void test_socketpair_round_trip(void)
{
        static const char *names[] = { "alpha", "beta", "gamma" };
        struct wire_writer w;
        struct wire_reader r;
        Gadget__WorkerMsg m, empty = GADGET__WORKER_MSG__INIT;
        Gadget__Hello h;
        const uint8_t *data;
        size_t len;
        int sv[2], got = 0, e = 0;

        CHECK(pair(SOCK_STREAM, sv) == 0, "socketpair");
        wire_writer_init(&w, 0);
        wire_reader_init(&r, 0);
        for (int i = 0; i < 3; i++) {
                hello(&m, &h, names[i], 10 + (uint32_t)i);
                CHECK(wire_writer_put(&w, &m.base, 0) == 0, "put %s", names[i]);
        }
        CHECK(wire_writer_put(&w, &empty.base, 0) == 0, "put an empty message (0-byte frame)");
        CHECK(wire_writer_flush(&w, sv[0]) == 0 && wire_writer_pending(&w) == 0, "flush sends everything");
        while (got < 4 && e >= 0) {
                e = wire_reader_next(&r, &data, &len);
                if (e == 1) {
                        if (got < 3)
                                CHECK(is_hello(data, len, names[got], 10 + (uint32_t)got),
                                      "frame %d is hello %s", got, names[got]);
                        else
                                CHECK(len == 0, "empty message arrives as a 0-byte frame");
                        got++;
                } else if (e == 0) {
                        ssize_t n = wire_reader_fill(&r, sv[1]);
                        if (n <= 0)
                                e = n < 0 ? (int)n : -EPROTO;
                }
        }
        CHECK(got == 4 && e >= 0, "all frames received in order");
        CHECK(wire_reader_next(&r, &data, &len) == 0, "no frame left");

        hello(&m, &h, "delta", 7);
        CHECK(wire_send(sv[0], &m.base, 0) == 0, "wire_send");
        CHECK(wire_recv(&r, sv[1], &data, &len) == 1 && is_hello(data, len, "delta", 7), "wire_recv");
        close(sv[0]);
        CHECK(wire_recv(&r, sv[1], &data, &len) == 0, "wire_recv at a clean end of file returns 0");
        close(sv[1]);
        wire_writer_free(&w);
        wire_reader_free(&r);
        wire_writer_free(NULL);
        wire_reader_free(NULL);
}

static void test_byte_feeds(void)
{
        struct wire_writer w;
        struct wire_reader r;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        char *big = malloc(10001);
        const uint8_t *data;
        size_t len, ends[3], total, frames = 0, early = 0;
        int e, bad = 0;

        memset(big, 'x', 10000);
        big[10000] = '\0';
        wire_writer_init(&w, 0);
        wire_reader_init(&r, 0);
        hello(&m, &h, "one", 1);
        wire_writer_put(&w, &m.base, 0);
        ends[0] = wire_writer_pending(&w);
        hello(&m, &h, big, 2); /* larger than the reader's first buffer */
        wire_writer_put(&w, &m.base, 0);
        ends[1] = wire_writer_pending(&w);
        hello(&m, &h, "three", 3);
        wire_writer_put(&w, &m.base, 0);
        ends[2] = total = wire_writer_pending(&w);

        for (size_t i = 0; i < total; i++) {
                if (wire_reader_feed(&r, w.buf + w.start + i, 1) < 0)
                        bad++;
                while ((e = wire_reader_next(&r, &data, &len)) == 1) {
                        if (frames >= 3 || i + 1 != ends[frames])
                                early++;
                        else if (!is_hello(data, len, frames == 0 ? "one" : frames == 1 ? big : "three",
                                           (uint32_t)frames + 1))
                                bad++;
                        frames++;
                }
                if (e < 0)
                        bad++;
        }
        CHECK(frames == 3, "3 frames from %zu one-byte feeds", total);
        CHECK(early == 0, "each frame appears exactly when its last byte arrives");
        CHECK(bad == 0, "frames intact, no errors");
        CHECK(r.cap < 2 * 16384, "reader buffer stays near one frame (%zu bytes)", r.cap);
        wire_writer_free(&w);
        wire_reader_free(&r);
        free(big);
}

static void test_oversize(void)
{
        static const uint8_t huge[] = { 0xf0, 0xff, 0xff, 0xff };
        uint8_t frame[4 + 1025] = { 0 };
        struct wire_reader r;
        const uint8_t *data = NULL;
        size_t len = 0;
        int sv[2];

        wire_reader_init(&r, 1024);
        for (int i = 0; i < 4; i++)
                wire_reader_feed(&r, huge + i, 1);
        CHECK(wire_reader_next(&r, &data, &len) == -EMSGSIZE, "announced 0xFFFFFFF0 > max_frame: -EMSGSIZE");
        CHECK(data == NULL && len == 0, "outputs untouched on error");
        CHECK(r.cap <= 4096, "no allocation of the announced size (cap %zu)", r.cap);
        CHECK(wire_reader_next(&r, &data, &len) == -EMSGSIZE, "and again on the next call");
        wire_reader_free(&r);

        CHECK(pair(SOCK_STREAM, sv) == 0, "socketpair");
        wire_reader_init(&r, 1024);
        CHECK(write(sv[0], huge, 4) == 4 && write(sv[0], frame, 100) == 100, "peer sends a huge header");
        CHECK(wire_reader_fill(&r, sv[1]) == 104, "fill reads it");
        CHECK(r.cap <= 2 * 65536, "fill sized its buffer by chunk, not by the announced length (cap %zu)", r.cap);
        CHECK(wire_recv(&r, sv[1], &data, &len) == -EMSGSIZE, "wire_recv gives -EMSGSIZE");
        wire_reader_free(&r);
        close(sv[0]);
        close(sv[1]);

        wire_reader_init(&r, 1024);
        frame[0] = 0x00, frame[1] = 0x04; /* 1024: exactly max_frame */
        wire_reader_feed(&r, frame, 4 + 1024);
        CHECK(wire_reader_next(&r, &data, &len) == 1 && len == 1024, "a frame of exactly max_frame passes");
        frame[0] = 0x01; /* 1025 */
        wire_reader_feed(&r, frame, 4 + 1025);
        CHECK(wire_reader_next(&r, &data, &len) == -EMSGSIZE, "max_frame + 1 refused");
        wire_reader_free(&r);

        wire_reader_init(&r, 0);
        CHECK(r.max_frame == WIRE_MAX_FRAME, "max_frame 0 means WIRE_MAX_FRAME");
        wire_reader_free(&r);
}

static void test_truncated_eof(void)
{
        static const uint8_t header[] = { 100, 0, 0, 0 };
        uint8_t body[10] = { 0 };
        struct wire_reader r;
        const uint8_t *data;
        size_t len;
        int sv[2];

        CHECK(pair(SOCK_STREAM, sv) == 0, "socketpair");
        wire_reader_init(&r, 0);
        CHECK(write(sv[0], header, 4) == 4 && write(sv[0], body, 10) == 10, "peer sends 14 of 104 bytes");
        close(sv[0]);
        CHECK(wire_recv(&r, sv[1], &data, &len) == -EPROTO, "truncated frame at end of file: -EPROTO");
        wire_reader_free(&r);
        close(sv[1]);

        CHECK(pair(SOCK_STREAM, sv) == 0, "socketpair");
        wire_reader_init(&r, 0);
        CHECK(write(sv[0], header, 2) == 2, "peer sends half a header");
        close(sv[0]);
        CHECK(wire_recv(&r, sv[1], &data, &len) == -EPROTO, "truncated header at end of file: -EPROTO");
        wire_reader_free(&r);
        close(sv[1]);
}

static void test_writer_limits(void)
{
        struct wire_writer w;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        char *big = malloc(2001);
        size_t one, before;
        int e = 0, n = 0;

        hello(&m, &h, "limit", 1);
        one = WIRE_HEADER_SIZE + protobuf_c_message_get_packed_size(&m.base);
        wire_writer_init(&w, 10 * one);
        while (n < 100 && (e = wire_writer_put(&w, &m.base, 0)) == 0)
                n++;
        CHECK(e == -ENOBUFS && n == 10, "queue limit of 10 frames: 11th put gives -ENOBUFS (after %d)", n);
        before = wire_writer_pending(&w);
        CHECK(before == 10 * one, "the refused frame left the queue as it was");
        wire_writer_free(&w);

        memset(big, 'b', 2000);
        big[2000] = '\0';
        hello(&m, &h, big, 1);
        wire_writer_init(&w, 0);
        CHECK(wire_writer_put(&w, &m.base, 1024) == -EMSGSIZE, "message over max_frame: -EMSGSIZE");
        CHECK(wire_writer_pending(&w) == 0, "nothing queued");
        CHECK(wire_writer_put(&w, &m.base, 0) == 0, "same message under the default max_frame");
        wire_writer_free(&w);
        free(big);
}

static void test_batching(void)
{
        struct wire_writer w;
        struct wire_reader r;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        const uint8_t *data;
        size_t len, total;
        uint8_t *rec = malloc(1 << 20);
        ssize_t n;
        int sv[2], records = 0, frames = 0, bad = 0;

        /* SOCK_SEQPACKET keeps the boundary of every write: the records the
         * peer receives count the writes the flush made. */
        CHECK(pair(SOCK_SEQPACKET, sv) == 0, "seqpacket socketpair");
        wire_writer_init(&w, 0);
        hello(&m, &h, "batch", 5);
        for (int i = 0; i < 1000; i++)
                if (wire_writer_put(&w, &m.base, 0) < 0)
                        bad++;
        total = wire_writer_pending(&w);
        CHECK(bad == 0, "1000 messages queued (%zu bytes)", total);
        CHECK(wire_writer_flush(&w, sv[0]) == 0, "one flush call sends them all");
        wire_reader_init(&r, 0);
        while ((n = recv(sv[1], rec, 1 << 20, MSG_DONTWAIT)) > 0) {
                records++;
                wire_reader_feed(&r, rec, (size_t)n);
        }
        CHECK(records == 1, "in one write (%d records)", records);
        while (wire_reader_next(&r, &data, &len) == 1)
                if (is_hello(data, len, "batch", 5))
                        frames++;
        CHECK(frames == 1000, "peer reads 1000 frames back");
        wire_writer_free(&w);
        wire_reader_free(&r);
        close(sv[0]);
        close(sv[1]);
        free(rec);
}

static void test_would_block(void)
{
        struct wire_writer w;
        struct wire_reader r;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        char *name = malloc(10001);
        const uint8_t *data;
        size_t len;
        int sv[2], e, frames = 0, expected = 200, bad = 0, rounds = 0;

        CHECK(pair(SOCK_STREAM | SOCK_NONBLOCK, sv) == 0, "non-blocking socketpair");
        wire_writer_init(&w, 0);
        wire_reader_init(&r, 0);
        memset(name, 'n', 10000);
        name[10000] = '\0';
        hello(&m, &h, name, 9);
        for (int i = 0; i < 200; i++)
                wire_writer_put(&w, &m.base, 0);
        e = wire_writer_flush(&w, sv[0]);
        CHECK(e == 1 && wire_writer_pending(&w) > 0, "2 MB into a full socket: flush returns 1, bytes remain");
        while (rounds++ < 100000 && (e == 1 || frames < expected)) {
                ssize_t n = wire_reader_fill(&r, sv[1]);
                if (n < 0 && n != -EAGAIN)
                        bad++;
                while (wire_reader_next(&r, &data, &len) == 1) {
                        if (!is_hello(data, len, name, 9))
                                bad++;
                        frames++;
                }
                if (e == 1)
                        e = wire_writer_flush(&w, sv[0]);
                /* One more frame queued while the socket is partly drained. */
                if (rounds == 3 && wire_writer_put(&w, &m.base, 0) == 0) {
                        expected++;
                        if (e == 0)
                                e = 1;
                }
        }
        CHECK(e == 0 && wire_writer_pending(&w) == 0, "later flushes finish the queue");
        CHECK(frames == expected && expected == 201 && bad == 0, "all frames arrive intact (%d)", frames);
        wire_writer_free(&w);
        wire_reader_free(&r);
        close(sv[0]);
        close(sv[1]);
        free(name);
}

static void test_peer_gone(void)
{
        struct wire_writer w;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        int sv[2], status = 0, p[2];
        pid_t pid;

        /* A writer whose peer has gone must get -EPIPE, not be killed by
         * SIGPIPE: gadgetd outlives every worker. Run in a child so a
         * signal shows up as a failed check. */
        CHECK(pair(SOCK_STREAM, sv) == 0, "socketpair");
        close(sv[1]); /* the peer is gone before anything is written */
        pid = fork();
        if (pid == 0) {
                signal(SIGPIPE, SIG_DFL);
                wire_writer_init(&w, 0);
                hello(&m, &h, "gone", 1);
                wire_writer_put(&w, &m.base, 0);
                _exit(wire_writer_flush(&w, sv[0]) == -EPIPE ? 0 : 1);
        }
        close(sv[0]);
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "child ran");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "flush to a closed peer returns -EPIPE (child %s %d)",
              WIFSIGNALED(status) ? "killed by signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));

        /* Not every fd is a socket: frames also go through a pipe. */
        CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
        wire_writer_init(&w, 0);
        hello(&m, &h, "pipe", 2);
        wire_writer_put(&w, &m.base, 0);
        CHECK(wire_writer_flush(&w, p[1]) == 0, "flush into a pipe");
        wire_writer_free(&w);
        {
                struct wire_reader r;
                const uint8_t *data;
                size_t len;
                wire_reader_init(&r, 0);
                close(p[1]);
                CHECK(wire_recv(&r, p[0], &data, &len) == 1 && is_hello(data, len, "pipe", 2), "read from the pipe");
                wire_reader_free(&r);
        }
        close(p[0]);
}

/* fds passed along: they arrive with the bytes, usable; more than the
 * receiver takes is a protocol error; a frame queue's first bytes carry
 * them. */
static void test_fds(void)
{
        int sv[2], p[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0 && pipe(p) == 0, "socketpair and pipe");
        int send[2] = { p[0], p[1] }, got[WIRE_FDS_MAX];
        size_t n = 99;
        char byte = 'c', in = 0;
        CHECK(wire_send_fds(sv[0], &byte, 1, send, 2) == 1, "one byte sent with two fds");
        CHECK(wire_recv_fds(sv[1], &in, 1, got, 4, &n) == 1 && in == 'c' && n == 2, "received: n=%zu", n);
        CHECK(n == 2 && write(got[1], "z", 1) == 1 && read(p[0], &in, 1) == 1 && in == 'z',
              "the received write end writes into the sent pipe");
        CHECK(n == 2 && (fcntl(got[0], F_GETFD) & FD_CLOEXEC), "received fds are close-on-exec");
        for (size_t i = 0; i < n && i < 2; i++)
                close(got[i]);
        CHECK(wire_send_fds(sv[0], &byte, 1, send, 2) == 1, "sent again");
        CHECK(wire_recv_fds(sv[1], &in, 1, got, 1, &n) == -EPROTO, "two fds where one is taken: EPROTO");
        CHECK(wire_send_fds(sv[0], &byte, 1, send, WIRE_FDS_MAX + 1) == -EINVAL, "over WIRE_FDS_MAX refused");
        struct wire_writer w;
        Gadget__WorkerMsg m;
        Gadget__Hello h;
        hello(&m, &h, "fds", 1);
        wire_writer_init(&w, 0);
        CHECK(wire_writer_put(&w, &m.base, WIRE_MAX_FRAME) == 0 && wire_writer_flush_fds(&w, sv[0], send, 1) == 0,
              "a frame flushed with an fd");
        uint8_t buf[256];
        ssize_t r = wire_recv_fds(sv[1], buf, sizeof buf, got, 4, &n);
        CHECK(r == (ssize_t)gadget__worker_msg__get_packed_size(&m) + 4 && n == 1, "the frame came with it: %zd %zu",
              r, n);
        if (n == 1)
                close(got[0]);
        wire_writer_free(&w);
        close(p[0]);
        close(p[1]);
        close(sv[0]);
        close(sv[1]);
}

int main(void)
{
        test_socketpair_round_trip();
        test_byte_feeds();
        test_oversize();
        test_truncated_eof();
        test_writer_limits();
        test_batching();
        test_would_block();
        test_peer_gone();
        test_fds();
        return tap_done();
}
