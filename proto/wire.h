/* wire: the one framing module. A frame is a 4-byte little-endian length
 * followed by that many bytes holding one protobuf-c message. Every process
 * (gadgetd, gadgetctl, libgadget, tests and fuzzers) reads and writes frames
 * through this code only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <protobuf-c/protobuf-c.h>

#define WIRE_HEADER_SIZE 4u
/* Largest frame either side may send unless negotiated lower: room for a
 * 1 MiB value plus its envelope. */
#define WIRE_MAX_FRAME (2u << 20)

/* Incoming bytes from one peer, cut into frames. */
struct wire_reader {
        uint8_t *buf;
        size_t cap, start, end;
        uint32_t max_frame;
};

/* Outgoing frames for one peer, written in batches. */
struct wire_writer {
        uint8_t *buf;
        size_t cap, start, end;
        size_t limit; /* most bytes that may wait unsent */
};

void wire_reader_init(struct wire_reader *r, uint32_t max_frame);
void wire_reader_free(struct wire_reader *r);
/* Reads once from fd. Returns bytes read, 0 at end of file, -errno
 * (-EAGAIN when a non-blocking fd has nothing). */
ssize_t wire_reader_fill(struct wire_reader *r, int fd);
/* Feeds bytes already read (tests, fuzzers). Returns 0 or -ENOMEM. */
int wire_reader_feed(struct wire_reader *r, const void *data, size_t len);
/* Takes the next whole frame. Returns 1 with data and len set (valid until the
 * next fill or feed), 0 if no whole frame is buffered, -EMSGSIZE if the
 * length field announces more than max_frame (checked before allocating). */
int wire_reader_next(struct wire_reader *r, const uint8_t **data, size_t *len);

void wire_writer_init(struct wire_writer *w, size_t limit);
void wire_writer_free(struct wire_writer *w);
/* Packs msg into a frame at the end of the queue. Returns 0, -EMSGSIZE if
 * the packed message exceeds max_frame, -ENOBUFS if the queue is full. */
int wire_writer_put(struct wire_writer *w, const ProtobufCMessage *msg, uint32_t max_frame);
/* Appends whole frames another writer packed. 0, -ENOBUFS, -ENOMEM. */
int wire_writer_append(struct wire_writer *w, const uint8_t *frames, size_t len);
/* Writes as much of the queue as fd takes, in as few writes as possible.
 * Returns 0 when the queue is empty, 1 when bytes remain (fd would block),
 * -errno on error. */
int wire_writer_flush(struct wire_writer *w, int fd);
size_t wire_writer_pending(const struct wire_writer *w);

/* File descriptors passed along (SCM_RIGHTS on a Unix socket): at most
 * WIRE_FDS_MAX with one message. */
#define WIRE_FDS_MAX 16
/* Like wire_writer_flush, but the first bytes written carry fds (n of
 * them) with them. */
int wire_writer_flush_fds(struct wire_writer *w, int fd, const int *fds, size_t n);
/* Sends len bytes with fds (n of them) in one sendmsg. Returns the bytes
 * sent (the fds went with the first) or -errno. */
ssize_t wire_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n);
/* Receives up to len bytes and the fds that came with them (close-on-exec,
 * at most max into fds, *n set): the bytes received, 0 at end of file,
 * -errno; -EPROTO if more fds came than max (the extra ones are closed by
 * the kernel). */
ssize_t wire_recv_fds(int sock, void *buf, size_t len, int *fds, size_t max, size_t *n);
/* wire_reader_fill on a Unix socket that may carry fds: those that came
 * with the bytes (close-on-exec, at most max into fds, *n set; *extra if
 * more came, none of which is left open). The bytes are kept either way. */
ssize_t wire_reader_fill_fds(struct wire_reader *r, int fd, int *fds, size_t max, size_t *n, bool *extra);

/* Blocking helpers: send one message / receive one frame on a blocking fd.
 * wire_recv returns 1 with a frame, 0 at a clean end of file, -errno
 * (-EPROTO if the file ends inside a frame). On a non-blocking fd it
 * returns -EAGAIN when the frame is not whole yet; what was read of it
 * stays in r for the next call. */
int wire_send(int fd, const ProtobufCMessage *msg, uint32_t max_frame);
int wire_recv(struct wire_reader *r, int fd, const uint8_t **data, size_t *len);
/* Like wire_recv, but never reads past the end of the frame: what follows
 * it on fd (another message, perhaps with fds of its own) stays there. */
int wire_recv_exact(struct wire_reader *r, int fd, const uint8_t **data, size_t *len);
/* Sends one message as a frame of at most PIPE_BUF bytes in one write,
 * packed on the stack: 0, -EMSGSIZE if the frame would be larger, -errno.
 * On a pipe such a write is atomic, so the frame arrives whole whoever
 * else writes there; and nothing is allocated, so a process short of
 * memory (an exec that failed under RLIMIT_AS) can still say why. */
int wire_send_atomic(int fd, const ProtobufCMessage *msg);
