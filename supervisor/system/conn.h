/* conn: one framed connection on the libevent loop — its transport (a
 * plain fd with its read and write events, or a bufferevent such as a TLS
 * session), the frames in and out (proto/wire.h), a budget of input per
 * loop turn, holding input, a bound on unsent output and the order of
 * closing. The worker link (link/peer.c), the control link
 * (control/control.c) and the node link (cluster/nodelink.c, over TLS) are
 * each a conn plus their own protocol. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <protobuf-c/protobuf-c.h>

struct conn;

/* End codes given to closed(), besides a read error (-errno) and the frame
 * callback's own error: */
#define CONN_EOF 0               /* end of file (or a reset) between frames */
#define CONN_TRUNCATED (-EPIPE)  /* end of file (or a reset) inside a frame */
#define CONN_TOO_BIG (-EMSGSIZE) /* a frame announced over the maximum */

struct conn_ops {
        /* One whole frame, valid until it returns; adds to *cost what the
         * frame cost beyond its bytes (counted against the budget). 0 to
         * go on, -errno to end the input: closed(error) follows at once.
         * It may call conn_close, conn_drop or conn_hold, never conn_free. */
        int (*frame)(void *arg, const uint8_t *data, size_t len, size_t *cost);
        /* The connection ended (CONN_* or -errno); called at most once, and
         * not after conn_close. Nothing more is read; the owner may call
         * conn_free here. */
        void (*closed)(void *arg, int why);
        /* Optional: every queued frame was written. */
        void (*drained)(void *arg);
        /* Optional: a frame packed by conn_send, before it is queued; < 0
         * refuses it (conn_send returns that, and it never leaves). */
        int (*sending)(void *arg, const uint8_t *data, size_t len);
        /* Optional: a turn's budget ran out after frames, bytes and cost;
         * the rest waits for the next turn. */
        void (*yielded)(void *arg, size_t frames, size_t bytes, size_t cost);
};

/* What one connection may take per loop turn (at least one frame). */
struct conn_budget {
        uint64_t frames, bytes, cost;
};

/* Takes fd (non-blocking, close-on-exec) on success only. queue_max: once
 * more than that many bytes wait unsent, conn_send refuses (-ENOBUFS); 0
 * for the writer's own bound. The budget starts unlimited. 0 or -ENOMEM. */
int conn_new(struct event_base *base, int fd, size_t queue_max, const struct conn_ops *ops, void *arg,
             struct conn **out);
/* The same over a bufferevent that is ready to carry bytes (a TLS
 * session past its handshake): the conn takes its callbacks, and it on
 * success only; bytes it already read are handled first. */
struct bufferevent;
int conn_new_bev(struct bufferevent *bev, size_t queue_max, const struct conn_ops *ops, void *arg,
                 struct conn **out);
/* Frees the events and buffers and closes the fd (frees the bufferevent);
 * accepts NULL. */
void conn_free(struct conn *c);
void conn_set_budget(struct conn *c, const struct conn_budget *b);
/* Queues one frame; it leaves in this loop turn, with any queued beside it.
 * 0, -EMSGSIZE, -ENOBUFS (the peer does not read), -ECONNRESET (dropped). */
int conn_send(struct conn *c, const ProtobufCMessage *msg);
/* The same; on success *bytes is the frame's size on the wire, its header
 * included: what the send cost, for a budget of the bytes a party makes
 * gadgetd send it. */
int conn_send_counted(struct conn *c, const ProtobufCMessage *msg, size_t *bytes);
/* Queues whole frames packed elsewhere (wire.h's framing), as conn_send. */
int conn_send_frames(struct conn *c, const uint8_t *frames, size_t len);
/* Bytes queued and not yet on the wire. */
size_t conn_pending(const struct conn *c);
/* Bytes read and not handled yet (0: the input is at a frame boundary);
 * *bytes (if not NULL) points at them. */
size_t conn_buffered(const struct conn *c, const uint8_t **bytes);
/* Whether the input has ended (its end seen, not yet handled). */
bool conn_input_ended(const struct conn *c);
/* Whether input waits that was not handled yet: bytes read and not
 * handled, or bytes in the socket not yet read. */
bool conn_unread(const struct conn *c);
/* Bytes another process read from this connection and did not handle
 * (a re-exec's), handled first, as if read now. 0 or -errno. */
int conn_preload(struct conn *c, const uint8_t *bytes, size_t len);
/* Lets a plain fd's Unix socket carry fds (SCM_RIGHTS) with its bytes,
 * at most max (up to CONN_FDS_MAX) kept until taken; without it, any that
 * come are closed by the kernel. */
#define CONN_FDS_MAX 4
void conn_accept_fds(struct conn *c, size_t max);
/* Takes the fds received since the last take (call it from frame(): the
 * frame's own if its sender sent them with it): their number (up to max,
 * into fds), or -E2BIG if more came than max or than accepted, every one
 * of them closed. conn_free closes those never taken. */
int conn_take_fds(struct conn *c, int *fds, size_t max);
/* The plain fd (-1 on a bufferevent): a re-exec hands it on (daemon.c). */
int conn_fd(const struct conn *c);
/* Holds the input (hold true): nothing more is read or handled until it is
 * released; released, the frames already read come first. */
void conn_hold(struct conn *c, bool hold);
/* Ends the input for good, without calling closed(); output still leaves. */
void conn_close(struct conn *c);
/* Ends the connection from anywhere, even inside a callback: nothing more is
 * read or sent, and closed(why) runs from the loop once the caller returned. */
void conn_drop(struct conn *c, int why);
