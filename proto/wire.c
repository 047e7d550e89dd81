/* wire: framing of protobuf-c messages on a stream socket. */
#include "wire.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK (64u * 1024u)

static uint32_t get_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
        p[3] = (uint8_t)(v >> 24);
}

/* Makes room for at least want more bytes after end, compacting first.
 * Callers bound want, so the buffer never grows past one frame plus a chunk. */
static int reserve(uint8_t **buf, size_t *cap, size_t *start, size_t *end, size_t want)
{
        if (*start > 0 && (*cap - *end < want || *start == *end)) {
                memmove(*buf, *buf + *start, *end - *start);
                *end -= *start;
                *start = 0;
        }
        if (*cap - *end >= want)
                return 0;
        size_t ncap = *cap ? *cap : 4096;
        while (ncap - *end < want)
                ncap *= 2;
        uint8_t *n = realloc(*buf, ncap);
        if (!n)
                return -ENOMEM;
        *buf = n;
        *cap = ncap;
        return 0;
}

void wire_reader_init(struct wire_reader *r, uint32_t max_frame)
{
        *r = (struct wire_reader){ .max_frame = max_frame ? max_frame : WIRE_MAX_FRAME };
}

void wire_reader_free(struct wire_reader *r)
{
        if (!r)
                return;
        free(r->buf);
        r->buf = NULL;
        r->cap = r->start = r->end = 0;
}

/* How many bytes the reader should be able to take next: a whole chunk
 * with what it holds already, or the rest of the frame being read if that
 * is announced and allowed. (A chunk on top of what it holds doubled the
 * buffer whenever part of a frame was in it: a report read header first,
 * then its body, copied 64 KiB it never used, 32 page faults.) */
static size_t reader_want(const struct wire_reader *r)
{
        size_t have = r->end - r->start;
        size_t chunk = have < READ_CHUNK ? READ_CHUNK - have : 1;
        if (have >= WIRE_HEADER_SIZE) {
                uint32_t len = get_le32(r->buf + r->start);
                if (len <= r->max_frame && have < WIRE_HEADER_SIZE + (size_t)len) {
                        size_t rest = WIRE_HEADER_SIZE + (size_t)len - have;
                        return rest > chunk ? rest : chunk;
                }
        }
        return chunk;
}

/* Reads once from fd, at most most bytes. */
static ssize_t fill(struct wire_reader *r, int fd, size_t most)
{
        int e = reserve(&r->buf, &r->cap, &r->start, &r->end, reader_want(r));
        if (e < 0)
                return e;
        size_t room = r->cap - r->end;
        ssize_t n;
        do
                n = read(fd, r->buf + r->end, room < most ? room : most);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        r->end += (size_t)n;
        return n;
}

ssize_t wire_reader_fill(struct wire_reader *r, int fd)
{
        return fill(r, fd, SIZE_MAX);
}

int wire_reader_feed(struct wire_reader *r, const void *data, size_t len)
{
        if (len == 0) /* nothing: and no arithmetic on a buffer not made yet */
                return 0;
        int e = reserve(&r->buf, &r->cap, &r->start, &r->end, len);
        if (e < 0)
                return e;
        memcpy(r->buf + r->end, data, len);
        r->end += len;
        return 0;
}

int wire_reader_next(struct wire_reader *r, const uint8_t **data, size_t *len)
{
        size_t have = r->end - r->start;
        if (have < WIRE_HEADER_SIZE)
                return 0;
        uint32_t flen = get_le32(r->buf + r->start);
        /* Why this is safe: the announced length is refused before any
         * buffer of that size is requested. */
        if (flen > r->max_frame)
                return -EMSGSIZE;
        if (have < WIRE_HEADER_SIZE + (size_t)flen)
                return 0;
        *data = r->buf + r->start + WIRE_HEADER_SIZE;
        *len = flen;
        r->start += WIRE_HEADER_SIZE + (size_t)flen;
        return 1;
}

void wire_writer_init(struct wire_writer *w, size_t limit)
{
        *w = (struct wire_writer){ .limit = limit ? limit : 4 * (size_t)WIRE_MAX_FRAME };
}

void wire_writer_free(struct wire_writer *w)
{
        if (!w)
                return;
        free(w->buf);
        w->buf = NULL;
        w->cap = w->start = w->end = 0;
}

size_t wire_writer_pending(const struct wire_writer *w)
{
        return w->end - w->start;
}

int wire_writer_put(struct wire_writer *w, const ProtobufCMessage *msg, uint32_t max_frame)
{
        size_t len = protobuf_c_message_get_packed_size(msg);
        if (len > (max_frame ? max_frame : WIRE_MAX_FRAME))
                return -EMSGSIZE;
        if (wire_writer_pending(w) + WIRE_HEADER_SIZE + len > w->limit)
                return -ENOBUFS;
        int e = reserve(&w->buf, &w->cap, &w->start, &w->end, WIRE_HEADER_SIZE + len);
        if (e < 0)
                return e;
        put_le32(w->buf + w->end, (uint32_t)len);
        protobuf_c_message_pack(msg, w->buf + w->end + WIRE_HEADER_SIZE);
        w->end += WIRE_HEADER_SIZE + len;
        return 0;
}

int wire_writer_append(struct wire_writer *w, const uint8_t *frames, size_t len)
{
        if (wire_writer_pending(w) + len > w->limit)
                return -ENOBUFS;
        int e = reserve(&w->buf, &w->cap, &w->start, &w->end, len);
        if (e < 0)
                return e;
        memcpy(w->buf + w->end, frames, len);
        w->end += len;
        return 0;
}

/* Writes once to fd. On a socket, a peer that went away gives -EPIPE and
 * no SIGPIPE: a dead worker must not take gadgetd with it. */
static ssize_t write_nosignal(int fd, const void *buf, size_t len)
{
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
                n = write(fd, buf, len);
        return n;
}

int wire_writer_flush(struct wire_writer *w, int fd)
{
        while (w->start < w->end) {
                ssize_t n = write_nosignal(fd, w->buf + w->start, w->end - w->start);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 1;
                        return -errno;
                }
                w->start += (size_t)n;
        }
        w->start = w->end = 0;
        return 0;
}

ssize_t wire_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * WIRE_FDS_MAX)];
        } u;
        struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n > WIRE_FDS_MAX)
                return -EINVAL;
        if (n) {
                memset(&u, 0, sizeof u);
                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        }
        ssize_t w;
        do
                w = sendmsg(sock, &mh, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        return w < 0 ? -errno : w;
}

/* The fds of a message received (at most max into fds, *n set): true if
 * more came than that, none of which is left open. */
static bool take_fds(struct msghdr *mh, int *fds, size_t max, size_t *n)
{
        bool extra = (mh->msg_flags & MSG_CTRUNC) != 0;
        *n = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                if (*n == 0 && k <= max) {
                        *n = k;
                        memcpy(fds, CMSG_DATA(c), k * sizeof(int));
                        continue;
                }
                /* More than the caller takes: none is kept open. */
                int fd;
                for (size_t i = 0; i < k; i++) {
                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                        close(fd);
                }
                extra = true;
        }
        return extra;
}

/* One recvmsg of up to len bytes into buf, with room for max fds. */
static ssize_t recv_with_fds(int sock, void *buf, size_t len, int *fds, size_t max, size_t *n, bool *extra)
{
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * WIRE_FDS_MAX)];
        } u;
        struct iovec iov = { .iov_base = buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * (max < WIRE_FDS_MAX ? max : WIRE_FDS_MAX)) };
        ssize_t r;
        *n = 0;
        *extra = false;
        do
                r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        *extra = take_fds(&mh, fds, max < WIRE_FDS_MAX ? max : WIRE_FDS_MAX, n);
        return r;
}

ssize_t wire_recv_fds(int sock, void *buf, size_t len, int *fds, size_t max, size_t *n)
{
        bool extra;
        ssize_t r = recv_with_fds(sock, buf, len, fds, max, n, &extra);
        return r >= 0 && extra ? -EPROTO : r;
}

ssize_t wire_reader_fill_fds(struct wire_reader *r, int fd, int *fds, size_t max, size_t *n, bool *extra)
{
        *n = 0;
        *extra = false;
        int e = reserve(&r->buf, &r->cap, &r->start, &r->end, reader_want(r));
        if (e < 0)
                return e;
        ssize_t got = recv_with_fds(fd, r->buf + r->end, r->cap - r->end, fds, max, n, extra);
        if (got > 0)
                r->end += (size_t)got;
        return got;
}

int wire_writer_flush_fds(struct wire_writer *w, int fd, const int *fds, size_t n)
{
        if (w->start < w->end) {
                ssize_t sent = wire_send_fds(fd, w->buf + w->start, w->end - w->start, fds, n);
                if (sent < 0)
                        return (int)sent;
                w->start += (size_t)sent;
        }
        return wire_writer_flush(w, fd);
}

int wire_send(int fd, const ProtobufCMessage *msg, uint32_t max_frame)
{
        struct wire_writer w;
        wire_writer_init(&w, 0);
        int e = wire_writer_put(&w, msg, max_frame);
        if (e >= 0)
                e = wire_writer_flush(&w, fd);
        wire_writer_free(&w);
        return e == 1 ? -EAGAIN : e;
}

int wire_send_atomic(int fd, const ProtobufCMessage *msg)
{
        uint8_t buf[PIPE_BUF];
        size_t len = protobuf_c_message_get_packed_size(msg);
        if (len > sizeof buf - WIRE_HEADER_SIZE)
                return -EMSGSIZE;
        put_le32(buf, (uint32_t)len);
        protobuf_c_message_pack(msg, buf + WIRE_HEADER_SIZE);
        ssize_t n;
        do
                n = write_nosignal(fd, buf, WIRE_HEADER_SIZE + len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == WIRE_HEADER_SIZE + len ? 0 : -EIO;
}

/* What the frame being read still lacks (its header first). */
static size_t frame_rest(const struct wire_reader *r)
{
        size_t have = r->end - r->start;
        if (have < WIRE_HEADER_SIZE)
                return WIRE_HEADER_SIZE - have;
        return WIRE_HEADER_SIZE + (size_t)get_le32(r->buf + r->start) - have;
}

static int recv_frame(struct wire_reader *r, int fd, const uint8_t **data, size_t *len, bool exact)
{
        for (;;) {
                int e = wire_reader_next(r, data, len);
                if (e != 0)
                        return e;
                ssize_t n = fill(r, fd, exact ? frame_rest(r) : SIZE_MAX);
                if (n < 0)
                        return (int)n;
                if (n == 0)
                        return r->end == r->start ? 0 : -EPROTO;
        }
}

int wire_recv(struct wire_reader *r, int fd, const uint8_t **data, size_t *len)
{
        return recv_frame(r, fd, data, len, false);
}

int wire_recv_exact(struct wire_reader *r, int fd, const uint8_t **data, size_t *len)
{
        return recv_frame(r, fd, data, len, true);
}
