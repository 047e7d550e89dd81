/* nodelink_int.h: what the node link's files share (nodelink.c: the link,
 * the buckets a node and an address, TLS; nodelink_in.c: accepted
 * sessions; nodelink_out.c: outgoing ones). Private to cluster/. */
#ifndef GADGETD_NODELINK_INT_H
#define GADGETD_NODELINK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "cluster/nodelink.h"
#include "cluster/nodelink_tls.h"
#include "system/conn.h"
#include "system/rate.h"
#include "wire.h"

#define NODE_MAX NODELINK_NODE_MAX
#define ADDR_MAX 64
#define TLS_READ_MAX 65536     /* what a bufferevent reads ahead of the frames taken */

/* One node's NODELINK_VALUES_PER_S, over all its sessions, both ways. An
 * entry lives while a session of its node does. */
struct node_rate {
        TAILQ_ENTRY(node_rate) link;
        struct nodelink *nl;
        char node[NODE_MAX + 1];
        struct rate rate;           /* the values of its frames (NODELINK_VALUES_PER_S) */
        struct rate bytes;          /* its frames' bytes and its answers' (NODELINK_BYTES_PER_S) */
        struct rate traces;         /* its asks for spans (NODELINK_TRACES_PER_S) */
        struct event *release;      /* the bucket has drained back: its sessions read again */
        unsigned refs;              /* sessions of this node */
        bool held;
};

/* The sessions one source address started lately (NODELINK_HANDSHAKES_PER_S). */
struct addr_rate {
        struct sockaddr_storage src;
        struct rate rate;
};

TAILQ_HEAD(in_list, nodelink_in);
TAILQ_HEAD(out_list, out);
TAILQ_HEAD(send_list, nodelink_send);
TAILQ_HEAD(rate_list, node_rate);

struct nodelink {
        struct event_base *base;
        struct nodelink_server_ops ops;
        char node[NODE_MAX + 1];
        SSL_CTX *server, *client;
        struct evconnlistener *listener;
        struct nodelink_hs *hs;     /* the handshakes' thread, with the listener (nodelink_hs.c) */
        struct event *relisten;     /* accepts again after an accept error's pause */
        int port;
        struct in_list ins;         /* in the order of acceptance */
        struct out_list outs;
        struct rate_list rates;
        unsigned n_in, n_pre;       /* sessions past their handshake, and in it */
        struct addr_rate *addrs;    /* NODELINK_ADDRS_MAX */
        size_t n_addrs;
        unsigned handshakes_per_s;
        uint64_t next_id;
        bool closing;               /* nodelink_free runs: no new sends */
        bool reexec_held;           /* a re-exec: nothing accepted, no request read (nodelink_reexec.c) */
        bool bye_sent;              /* each session was told goodbye, each outgoing one closed */
};

struct nodelink_in {
        TAILQ_ENTRY(nodelink_in) link;
        struct nodelink *nl;
        struct hs_job *hs;          /* its handshake, on the handshakes' thread */
        struct bufferevent *bev;    /* once its handshake completed; then the conn's */
        struct conn *conn;          /* once the handshake named a node */
        struct node_rate *rate;
        struct event *deadline;     /* the handshake's, then the idle time's */
        char from[NODE_MAX + 1];
        struct sockaddr_storage src; /* where it connects from (its address, not its port) */
        uint64_t accepted_ms;
        bool named;                 /* its certificate named a node: admission is what is left */
        bool spoke;                 /* its first request came, of this version */
        bool refused;               /* ends once its last answer is written */
        bool bye;                   /* told goodbye: what it sends is dropped unread until it closes */
        unsigned inflight;
};

enum out_state { OUT_IDLE, OUT_CONNECTING, OUT_HANDSHAKE, OUT_READY };

/* The kept session to one node at one address. */
struct out {
        TAILQ_ENTRY(out) link;
        struct nodelink *nl;
        char node[NODE_MAX + 1], addr[ADDR_MAX + 1];
        struct sockaddr_storage sa;
        int salen;
        enum out_state state;
        int fd;                     /* while connecting */
        struct event *connected, *deadline; /* deadline: the connect's, then the idle time's */
        char why[256];              /* a failure found inside nodelink_send, told from the loop */
        struct bufferevent *bev;    /* the TLS session (the conn's once ready; kept to read its errors) */
        struct conn *conn;          /* once ready */
        struct node_rate *rate;
        struct wire_writer staged;  /* frames waiting for the peer's name to be checked */
        struct send_list sends;
        unsigned n_sends;
        uint64_t queued;            /* bytes given to the session (its conn, or staged) since it opened */
        bool heard;                 /* a frame came from the peer on this session */
        uint64_t heard_ms;          /* when the last one came (monotime_ms; 0: none yet) */
        bool refused;               /* the peer's TLS refused the session before any frame: nothing ran */
        bool goodbye;               /* the peer said goodbye: nothing unanswered was read */
        unsigned unanswered;        /* sessions in a row that ended before the peer answered anything:
                                     * goodbyes, and ends after the TCP connect (kept across sessions) */
        bool backoff;               /* deadline times the wait before connecting after those */
};

struct nodelink_send {
        TAILQ_ENTRY(nodelink_send) link;
        struct out *out;            /* NULL once its session failed (its done is due) */
        struct send_list *list;     /* the list it is on: its session's, or a failed one's */
        uint64_t id;
        uint64_t start;             /* where its frame starts in its session's bytes (out->queued) */
        uint64_t sent_ms;           /* when it was given to the session (monotime_ms) */
        nodelink_done done;
        void *arg;
};

/* What one session may take per loop turn (at least one frame). */
extern const struct conn_budget nodelink_turn_budget;

/* "HOST:PORT" with a numeric host into sa. 0 or -EINVAL (a name, no port). */
int nodelink_parse_addr(const char *addr, bool port0_ok, struct sockaddr_storage *sa, int *salen);
/* Whether a frame read from a peer may be unpacked as desc (its values added to *values). */
bool nodelink_frame_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, size_t *values);
/* 0, or -E2BIG for a frame about to leave that the other end would refuse. */
int nodelink_frame_out_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len);
/* The bucket of node `node` (a reference taken), NULL when out of memory. */
struct node_rate *nodelink_rate_get(struct nodelink *nl, const char *node);
/* A session of r's node ended (r may be NULL). */
void nodelink_rate_put(struct node_rate *r);
/* Counts a frame's values against its node's second. */
void nodelink_rate_count(struct node_rate *r, size_t values, size_t bytes);
/* The reason OpenSSL gave for a session's failure, or NULL (*eof: only an end). */
const char *nodelink_tls_reason(struct bufferevent *bev, bool *eof);
/* A TLS bufferevent over fd with TCP liveness set (state: where its
 * handshake is: BUFFEREVENT_SSL_CONNECTING, or _OPEN once done), or NULL. */
struct bufferevent *nodelink_tls_bev(struct nodelink *nl, int fd, SSL *ssl, enum bufferevent_ssl_state state);

/* nodelink_in.c */
void nodelink_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg);
void nodelink_on_accept_error(struct evconnlistener *l, void *arg);
void nodelink_in_end(struct nodelink_in *in, bool tell);
/* in's handshake ended (ok: completed), its fd and ssl handed back. */
void nodelink_in_handshaken(struct nodelink_in *in, int fd, SSL *ssl, bool ok);

/* nodelink_hs.c: the handshakes of accepted sessions, on a thread. */
struct nodelink_hs;
struct hs_job;
/* Starts the thread (and the mailbox it answers through). 0, or -errno. */
int nodelink_hs_new(struct nodelink *nl, struct nodelink_hs **out);
/* Stops and joins the thread; every handshake left is dropped. NULL: nothing. */
void nodelink_hs_free(struct nodelink_hs *hs);
/* in's handshake over fd and ssl (the thread's from here, 0), or -ENOMEM
 * (fd and ssl still the caller's). nodelink_in_handshaken follows on the
 * loop unless in is cancelled first. */
int nodelink_hs_start(struct nodelink_hs *hs, struct nodelink_in *in, int fd, SSL *ssl);
/* in, in its handshake, ends: nothing of it reaches the loop again. */
void nodelink_hs_cancel(struct nodelink_hs *hs, struct nodelink_in *in);

/* nodelink_out.c */
void nodelink_out_fail(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nodelink_out_free(struct out *o);

#endif
