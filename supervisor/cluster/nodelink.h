/* nodelink: the link between gadgetd nodes that share a store — mutual TLS
 * (OpenSSL through libevent's bufferevent_openssl) carrying control.proto's
 * Request (caller to owner) and Response (owner to caller) in wire.h's
 * frames. One nodelink per gadgetd: a listener for other nodes' sessions
 * and one kept outgoing session per node it calls. Transport only: what a
 * request means is the caller's business (validate it as any control
 * request).
 *
 * Who is who. A node is named by its certificate: the certificate's
 * subjectAltName DNS entries if it has any, else its subject's commonName;
 * there must be exactly one such name and it must be a node name (1 to 63
 * of a-z 0-9 _ -, as Node=). Wildcards never match. Every certificate,
 * this node's own included, must chain to PeerCA= alone (never the
 * system's store). A session's answers come from the node its certificate
 * names; a node may call itself (harmless: it proves the same key).
 *
 * Addresses are numeric only ("127.0.0.2:7001", "[::1]:7001"): a name
 * would need a blocking or threaded resolver on the loop, so names are
 * refused with an error that says so. There is no plaintext mode. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>

#include "control.pb-c.h"
#include "wire.h"

/* Bounds against hostile nodes (each is a node with a valid certificate
 * from a CA that may be badly run, or anyone who can connect). */
#define NODELINK_MAX_IN 64                  /* accepted sessions that passed their handshake */
/* Sessions still in their handshake: at most this many in all and from
 * one source address; a new one past either bound closes the oldest of
 * them (of that address first), so that connections that never
 * authenticate cannot hold the seats certified nodes need. */
#define NODELINK_MAX_PREAUTH 16
#define NODELINK_MAX_PREAUTH_PER_ADDR 4
/* Values a frame of the link may hold (counted on its packed bytes,
 * before it is unpacked; as FrameValuesMax='s default for a gadget): a
 * request or answer past it is refused where it would be sent, and a
 * session that receives one ends. */
#define NODELINK_FRAME_VALUES_MAX 131072
/* Values one node's frames may hold a second, over all its sessions both
 * ways (as FrameValuesPerSecond='s default for a gadget): past it, none of
 * that node's sessions is read until the second's share has drained. */
#define NODELINK_VALUES_PER_S 524288
/* Bytes of one node's frames, over all its sessions both ways, and of the
 * answers this node sends it, a second (as FrameBytesPerSecond='s default
 * for a gadget): past it, none of that node's sessions is read until the
 * second's share has drained. */
#define NODELINK_BYTES_PER_S (64u << 20)
/* Asks for a trace's spans one node may make a second, over all its
 * sessions (gadgetctl trace there: a person's command asks each node
 * once): past it, an ask is answered busy. The spans an answer carries
 * are charged to NODELINK_VALUES_PER_S as well. */
#define NODELINK_TRACES_PER_S 8
#define NODELINK_MAX_IN_PER_NODE 4          /* authenticated sessions of one node (a node keeps one) */
#ifndef NODELINK_HANDSHAKE_MS
#define NODELINK_HANDSHAKE_MS 3000          /* an accepted session's TLS handshake (and admission) */
#endif
#define NODELINK_ADMIT_RETRY_MS 100         /* how often a node not known yet is looked for again */
#define NODELINK_ACCEPT_PAUSE_MS 1000       /* no accepting after an accept error (EMFILE, ...) */
/* Sessions one source address may start a second (a TLS handshake costs
 * about a millisecond of CPU, on the link's handshakes' thread; the loop
 * accepts and admits each): past it, a connection from that
 * address is closed as it is accepted, before any TLS work. A node keeps
 * one session to each peer; 16 at once, then 16 a second, is room for a
 * restart of every gadgetd on a host. NODELINK_ADDRS_MAX addresses are
 * remembered (the one seen longest ago makes room). */
#define NODELINK_HANDSHAKES_PER_S 16
#define NODELINK_ADDRS_MAX 256
#ifndef NODELINK_CONNECT_MS
#define NODELINK_CONNECT_MS 3000            /* an outgoing connect plus handshake */
#endif
#define NODELINK_MAX_INFLIGHT 256           /* requests of one session not yet answered */
#define NODELINK_MAX_PENDING 1024           /* sends waiting on one outgoing session */
#define NODELINK_MAX_OUTPUT (2 * (size_t)WIRE_MAX_FRAME) /* unsent bytes per session */
/* A node that says goodbye (a re-exec) or ends a session before answering
 * anything is connected to again at once; after a second such session in
 * a row the next waits 50 ms, doubled per session up to 1 s, so that a
 * node that only says goodbye, closes each session or fails each
 * handshake cannot make its callers reconnect in a loop (each session a
 * TLS handshake on this node's loop). A node that is down (its connect
 * refused or not answered) costs a connect only: no wait. */
#define NODELINK_BACKOFF_MS 50
#define NODELINK_BACKOFF_MAX_MS 1000
#define NODELINK_KEEPALIVE_S 5              /* TCP keepalive; a vanished peer ends a session in ~15 s */
/* An accepted session with nothing in flight for this long (since its
 * handshake or its last answer) is closed; a node closes its own idle outgoing session sooner, so that
 * the other end's close never meets a request on the way. */
#ifndef NODELINK_IDLE_MS
#define NODELINK_IDLE_MS 120000
#endif
#ifndef NODELINK_OUT_IDLE_MS
#define NODELINK_OUT_IDLE_MS 60000
#endif

struct nodelink_config {
        const char *node;            /* this node's name (its certificate must name it) */
        const char *listen;          /* PeerListen= "HOST:PORT" (numeric, port 0: any), NULL: no listener */
        const char *cert, *key, *ca; /* PeerCertificate=, PeerKey=, PeerCA= PEM files */
        unsigned handshakes_per_s;   /* per source address; 0: NODELINK_HANDSHAKES_PER_S */
        bool adopt;                  /* listen on adopt_fd, handed on by a re-exec (checked: a listening */
        int adopt_fd;                /* stream socket of listen's family), instead of binding */
};

struct nodelink;          /* the whole link of this node: listener + outgoing sessions */
struct nodelink_in;       /* one accepted, authenticated session from another node */
struct nodelink_send;     /* one request sent and not answered yet */

struct nodelink_server_ops {
        /* A request from node `from` (the name its certificate proves; req
         * and from are valid during the call only). Answer it once, now or
         * later, with nodelink_answer(in, resp) and the request's id. Past
         * NODELINK_MAX_INFLIGHT unanswered requests on a session the link
         * answers "busy" itself and this is not called. */
        void (*request)(void *arg, struct nodelink_in *in, const char *from, const Control__Request *req);
        /* A session that had passed its handshake ended: answers to it are
         * dropped from now on; after this returns, `in` is freed. */
        void (*gone)(void *arg, struct nodelink_in *in);
        /* Optional: whether node `node` (its certificate's name) may take
         * part now — a node the store knows, not revoked: 0 it may,
         * -EPERM it may not (why says why), -EAGAIN not known yet (a node
         * that joined since the store was last read). Asked at each
         * session's handshake and before each of its requests: a node
         * refused ends its session (why is logged); at the handshake a
         * node not known yet is asked again every NODELINK_ADMIT_RETRY_MS,
         * its session held as one still in its handshake, until
         * NODELINK_HANDSHAKE_MS from its start. last: no asking follows
         * (answer -EPERM rather than -EAGAIN; the refusal is final). NULL:
         * every node. */
        int (*admit)(void *arg, const char *node, bool last, char *why, size_t len);
        void *arg;
};

/* A send's end when its session's node said goodbye (a re-exec, the
 * Goodbye message) before answering it: it was not read there and did
 * not run; it may be sent to that node again once its link is back. Not
 * a GADGET_E* code: never shown as one. */
#define NODELINK_UNREAD (-1)

/* A send's end: resp non-NULL (valid during the call only; code is 0), or
 * resp NULL with a GADGET_E* code (proto/contract.h) and a message naming
 * the node and what went wrong: GADGET_EUNAVAILABLE when not a byte of
 * the request left (connect refused, the handshake failed, the session
 * ended before its frame was handed to the socket: it cannot have run,
 * and may be sent again), GADGET_EGONE when it left and the session ended
 * before its answer ("node b went away after the call was sent; it may
 * have run (...)"). */
typedef void (*nodelink_done)(void *arg, const Control__Response *resp, int code, const char *msg);

/* Reads the certificate, key and CA once (the key is wiped from memory
 * after loading), checks that the key matches the certificate, that the
 * certificate chains to the CA and names cfg->node, and binds the listener
 * if any. 0, or -errno with err saying which file or setting is wrong and
 * why ("PeerKey=/x: does not match PeerCertificate=/y"); never any key
 * material. Callbacks are never made from inside nodelink_new. */
int nodelink_new(struct event_base *base, const struct nodelink_config *cfg, const struct nodelink_server_ops *ops,
                 struct nodelink **out, char *err, size_t len);
/* Fails every pending send (done with GADGET_EUNAVAILABLE), closes every
 * session (gone is not called) and the listener; accepts NULL. Never from
 * inside one of the link's callbacks. */
void nodelink_free(struct nodelink *nl);
/* The port the listener is bound to (PeerListen= with port 0), 0 if none. */
int nodelink_listen_port(const struct nodelink *nl);
/* Its sessions now past their handshake: from other nodes (in), and to
 * them (out). */
void nodelink_sessions(const struct nodelink *nl, unsigned *in, unsigned *out);

/* gadgetctl daemon-reexec (nodelink_reexec.c). hold: nothing more is
 * accepted (connects wait in the listener's backlog) and no session's
 * next request is read (each stops at a frame boundary); false resumes.
 * quiet: -EBUSY (why says what) while a session is in its handshake, a
 * request read is unanswered or a send waits for its answer; once none
 * is, each accepted session is sent a Goodbye (and dropped unread from
 * then on) and each outgoing session closed, and -EBUSY lasts until each
 * told node closed its session (so that it read the goodbye), 0 after. */
void nodelink_reexec_hold(struct nodelink *nl, bool hold);
int nodelink_reexec_quiet(struct nodelink *nl, char *why, size_t len);
/* The listener's fd to hand on (-1: none). */
int nodelink_listen_fd(const struct nodelink *nl);

/* Sends req to node `node` at addr ("HOST:PORT", numeric) on the kept
 * session to that node, connecting first if there is none (without
 * blocking; NODELINK_CONNECT_MS for connect and handshake). req->id and
 * req->version (CONTROL_PROTOCOL_VERSION: a session's first request of
 * another version is answered with an error and ends it) are set by the
 * link. Nothing leaves before the peer's certificate proved it is
 * `node`. done is called exactly once, never from inside this call: with
 * the first response of that id, or with an error when the session fails
 * or closes first (GADGET_EUNAVAILABLE: "cannot reach node b at
 * 127.0.0.2:7001: Connection refused", "node b's certificate was not
 * accepted: ...") — the next send reconnects. The link does not time a
 * request out: a peer may take as long as its work takes, so the caller
 * bounds its wait (nodelink_cancel); a session whose node said goodbye
 * ends its sends unanswered with NODELINK_UNREAD; a peer that vanished ends its session
 * by TCP keepalive and an unacknowledged-data bound (NODELINK_KEEPALIVE_S). 0 and *handle (valid until
 * done is called), or -errno and done is never called: -EINVAL a bad node
 * name or address, -ENOBUFS NODELINK_MAX_PENDING sends already wait on
 * that session or its unsent output is full, -EMSGSIZE, -ENOMEM. */
int nodelink_send(struct nodelink *nl, const char *node, const char *addr, Control__Request *req, nodelink_done done,
                  void *arg, struct nodelink_send **handle);
/* Forgets a send: done is never called for it; its response, if one comes,
 * is ignored. Only before done was called. */
void nodelink_cancel(struct nodelink_send *s);
/* As nodelink_cancel, for a send whose caller gave up waiting (its
 * timeout). If its session heard nothing from the node since the send was
 * made, the link to that node looks cut: the session ends at once and
 * abortively (RST), which discards what the kernel still holds of it, so
 * that no request queued in it reaches the node later, after the cut
 * heals, and runs when its caller was long told it failed. Its other
 * sends end as at any session's end (not a byte left: GADGET_EUNAVAILABLE,
 * sent again by the caller; else GADGET_EGONE, "may have run"). */
void nodelink_abandon(struct nodelink_send *s);
/* Queues the answer to a request of session in (resp->id the request's).
 * 0, -ENOBUFS when the peer does not read (NODELINK_MAX_OUTPUT unsent),
 * -EMSGSIZE, -ENOMEM, -ECONNRESET the session is ending. */
int nodelink_answer(struct nodelink_in *in, const Control__Response *resp);
/* Whether in's node may ask for one more trace this second
 * (NODELINK_TRACES_PER_S); counted if so. */
bool nodelink_in_may_trace(struct nodelink_in *in);
/* Charges values more to in's node's second (what an answer costs beyond
 * the request's frame): past NODELINK_VALUES_PER_S, none of its sessions
 * is read until the second's share has drained. */
void nodelink_in_charge(struct nodelink_in *in, size_t values);
