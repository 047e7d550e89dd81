/* nodelink: mutual-TLS sessions between gadgetd nodes on the loop, carrying
 * control.proto frames (see nodelink.h for the rules of names and bounds).
 * A session is a TLS bufferevent until its handshake proved the peer's
 * name, then a conn (system/conn.c) over it, as every other link: frames,
 * a budget per turn, holding, the order of closing. */
#include "nodelink.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "answer.h"
#include "cluster/nodelink_tls.h"
#include "contract.h"
#include "system/conn.h"
#include "system/listener.h"
#include "system/monotime.h"
#include "system/rate.h"
#include "system/timer.h"
#include "validate.h"
#include "value.h"

#define NODE_MAX NODELINK_NODE_MAX
#define ADDR_MAX 64
#define TLS_READ_MAX 65536     /* what a bufferevent reads ahead of the frames taken */

/* One node's NODELINK_VALUES_PER_S, over all its sessions, both ways. An
 * entry lives while a session of its node does. */
struct node_rate {
        TAILQ_ENTRY(node_rate) link;
        struct nodelink *nl;
        char node[NODE_MAX + 1];
        struct rate rate;
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
};

struct nodelink_in {
        TAILQ_ENTRY(nodelink_in) link;
        struct nodelink *nl;
        struct bufferevent *bev;    /* the handshake's; then the conn's */
        struct conn *conn;          /* once the handshake named a node */
        struct node_rate *rate;
        struct event *deadline;     /* the handshake's, then the idle time's */
        char from[NODE_MAX + 1];
        struct sockaddr_storage src; /* where it connects from (its address, not its port) */
        uint64_t accepted_ms;
        bool named;                 /* its certificate named a node: admission is what is left */
        bool spoke;                 /* its first request came, of this version */
        bool refused;               /* ends once its last answer is written */
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
};

struct nodelink_send {
        TAILQ_ENTRY(nodelink_send) link;
        struct out *out;            /* NULL once its session failed (its done is due) */
        struct send_list *list;     /* the list it is on: its session's, or a failed one's */
        uint64_t id;
        nodelink_done done;
        void *arg;
};

/* What one session may take per loop turn (at least one frame). */
static const struct conn_budget turn_budget = { 64, 4 * (uint64_t)WIRE_MAX_FRAME, NODELINK_FRAME_VALUES_MAX };

/* "HOST:PORT" with a numeric host into sa. 0 or -EINVAL (a name, no port). */
static int parse_addr(const char *addr, bool port0_ok, struct sockaddr_storage *sa, int *salen)
{
        char copy[ADDR_MAX + 2];
        int n = (int)sizeof *sa;
        size_t len = addr ? strlen(addr) : 0;
        if (!addr || len > ADDR_MAX)
                return -EINVAL;
        /* libevent takes no port 0: a listener's ":0" (any port) is parsed
         * as ":1" and set back. */
        bool any = port0_ok && len >= 2 && strcmp(addr + len - 2, ":0") == 0;
        snprintf(copy, sizeof copy, "%.*s%s", (int)(any ? len - 1 : len), addr, any ? "1" : "");
        memset(sa, 0, sizeof *sa);
        if (evutil_parse_sockaddr_port(copy, (struct sockaddr *)sa, &n) < 0 || !strrchr(copy, ':'))
                return -EINVAL;
        if (sa->ss_family == AF_INET6)
                ((struct sockaddr_in6 *)sa)->sin6_port = any ? 0 : ((struct sockaddr_in6 *)sa)->sin6_port;
        else if (sa->ss_family == AF_INET)
                ((struct sockaddr_in *)sa)->sin_port = any ? 0 : ((struct sockaddr_in *)sa)->sin_port;
        else
                return -EINVAL;
        *salen = n;
        return 0;
}

/* Whether a frame read from a peer may be unpacked as desc: its nesting
 * within what a VALUE_MAX_DEPTH value needs and at most
 * NODELINK_FRAME_VALUES_MAX values, counted on the packed bytes (one
 * linear walk, never the allocations of unpacking it). The count is added
 * to *values. */
static bool frame_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, size_t *values)
{
        char why[160];
        return value_packed_cost(desc, data, len, NODELINK_FRAME_VALUES_MAX, values, why, sizeof why) == 0;
}

/* A frame about to leave, request or answer: one past
 * NODELINK_FRAME_VALUES_MAX is refused here (-E2BIG), where the one who
 * sends it hears why, since the other end would end the session. */
static int frame_out_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len)
{
        size_t values = 0;
        return frame_ok(desc, data, len, &values) ? 0 : -E2BIG;
}

/* --- each node's values a second ---------------------------------------- */

static void rate_hold(struct node_rate *r, bool hold);

static void rate_release(evutil_socket_t fd, short what, void *arg)
{
        rate_hold(arg, false);
}

/* Holds or releases the input of every session of r's node. */
static void rate_hold(struct node_rate *r, bool hold)
{
        struct nodelink *nl = r->nl;
        struct nodelink_in *in;
        struct out *o;
        r->held = hold;
        TAILQ_FOREACH(in, &nl->ins, link)
                if (in->rate == r && in->conn)
                        conn_hold(in->conn, hold);
        TAILQ_FOREACH(o, &nl->outs, link)
                if (o->rate == r && o->conn)
                        conn_hold(o->conn, hold);
}

/* The entry of node `node`, made if none; NULL when out of memory. */
static struct node_rate *rate_get(struct nodelink *nl, const char *node)
{
        struct node_rate *r;
        TAILQ_FOREACH(r, &nl->rates, link)
                if (strcmp(r->node, node) == 0)
                        goto found;
        if (!(r = calloc(1, sizeof *r)) || !(r->release = evtimer_new(nl->base, rate_release, r))) {
                free(r);
                return NULL;
        }
        r->nl = nl;
        snprintf(r->node, sizeof r->node, "%s", node);
        rate_init(&r->rate, NODELINK_VALUES_PER_S, monotime_ms());
        TAILQ_INSERT_TAIL(&nl->rates, r, link);
found:
        r->refs++;
        return r;
}

/* A session of r's node ended. Why forgetting the bucket with the last
 * one is safe: a node that reconnects to empty it pays a TLS handshake
 * and gets at most one more budget, which is within what one second
 * allows it. */
static void rate_put(struct node_rate *r)
{
        if (!r || --r->refs > 0)
                return;
        TAILQ_REMOVE(&r->nl->rates, r, link);
        event_free(r->release);
        free(r);
}

/* Counts a frame's values against its node's second; past the budget
 * every session of that node stops being read until the bucket has
 * drained back to it. Why this is safe: a peer resending wide frames costs
 * this node the decoding of at most NODELINK_VALUES_PER_S values a second,
 * however many sessions it holds. */
static void rate_count(struct node_rate *r, size_t values)
{
        uint64_t wait_ms = rate_add(&r->rate, values ? values : 1, monotime_ms());
        if (!wait_ms || r->held)
                return;
        rate_hold(r, true);
        timer_arm_ms(r->release, wait_ms);
}

/* The reason OpenSSL gave for a session's failure, or NULL; *eof if it
 * was only an end without close_notify (OpenSSL 3 calls that an error). */
static const char *tls_reason(struct bufferevent *bev, bool *eof)
{
        unsigned long e, first = 0;
        /* libevent adds SSL_get_error's code (no library) after the queue. */
        while ((e = bufferevent_get_openssl_error(bev)))
                if (!first && ERR_GET_LIB(e))
                        first = e;
        *eof = first && ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
        return first && !*eof ? ERR_reason_error_string(first) : NULL;
}

/* A peer that vanished (powered off, cut off) ends its sessions within
 * seconds, not at TCP's retransmission limit of many minutes: keepalives
 * on an idle session, and a bound on how long sent bytes may stay
 * unacknowledged. Without it a kept session to a dead node would swallow
 * every later send. */
static void tcp_liveness(int fd)
{
        int on = 1, idle = NODELINK_KEEPALIVE_S, intvl = NODELINK_KEEPALIVE_S, cnt = 3;
        unsigned user_timeout = 3 * NODELINK_KEEPALIVE_S * 1000;
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

static struct bufferevent *tls_bev(struct nodelink *nl, int fd, SSL *ssl, bool server)
{
        tcp_liveness(fd);
        struct bufferevent *bev = bufferevent_openssl_socket_new(
                nl->base, fd, ssl, server ? BUFFEREVENT_SSL_ACCEPTING : BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
        if (!bev)
                return NULL;
        /* An end without close_notify is an end of file: frames say
         * themselves whether one was cut. */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        bufferevent_setwatermark(bev, EV_READ, 0, TLS_READ_MAX);
        return bev;
}

/* --- accepted sessions -------------------------------------------------- */

static void in_end(struct nodelink_in *in, bool tell)
{
        struct nodelink *nl = in->nl;
        if (in->conn && tell && nl->ops.gone)
                nl->ops.gone(nl->ops.arg, in);
        TAILQ_REMOVE(&nl->ins, in, link);
        if (in->conn) {
                nl->n_in--;
                conn_free(in->conn); /* and its bufferevent */
        } else {
                nl->n_pre--;
                if (in->bev)
                        bufferevent_free(in->bev);
        }
        rate_put(in->rate);
        event_free(in->deadline);
        free(in);
}

/* An authenticated session is closed once idle for NODELINK_IDLE_MS. */
static void in_idle_arm(struct nodelink_in *in)
{
        timer_arm_ms(in->deadline, NODELINK_IDLE_MS);
}

/* Answers id with an error (the session goes on or ends as the caller says). */
static int in_error(struct nodelink_in *in, uint64_t id, int code, const char *msg)
{
        struct answer a;
        return conn_send(in->conn, &answer_error(&a, id, code, msg)->base);
}

/* Past NODELINK_MAX_INFLIGHT the link answers itself. */
static int in_busy(struct nodelink_in *in, uint64_t id)
{
        char msg[160];
        snprintf(msg, sizeof msg, "node %s has %d requests of this link in flight", in->nl->node,
                 NODELINK_MAX_INFLIGHT);
        return in_error(in, id, GADGET_EBUSY, msg);
}

/* Refused with an answer saying why: nothing more is read, and the
 * session ends once that answer is written (in_drained), or at its
 * deadline if the peer does not read it. */
static void in_refuse(struct nodelink_in *in, uint64_t id, int code, const char *why)
{
        in->refused = true;
        conn_close(in->conn);
        if (in_error(in, id, code, why) < 0)
                conn_drop(in->conn, -ESHUTDOWN);
}

static int in_frame(void *arg, const uint8_t *data, size_t len, size_t *cost)
{
        struct nodelink_in *in = arg;
        struct nodelink *nl = in->nl;
        char why[200];
        size_t values = 0;
        /* Why this is safe: protobuf-c's unpacker recurses once per nested
         * message and allocates per value; both are bounded on the raw
         * bytes first. A peer that sends more ends its own session. */
        bool ok = frame_ok(&control__request__descriptor, data, len, &values);
        *cost += values;
        rate_count(in->rate, values);
        if (!ok)
                return -EPROTO;
        Control__Request *req = control__request__unpack(NULL, len, data);
        if (!req)
                return -EPROTO;
        int e = 0;
        if (!in->spoke && req->version != CONTROL_PROTOCOL_VERSION) {
                /* As on the control socket: the peer hears why, then the
                 * session ends. */
                snprintf(why, sizeof why, "node %s speaks control protocol %u, node %s speaks %u", in->from,
                         (unsigned)req->version, nl->node, CONTROL_PROTOCOL_VERSION);
                in_refuse(in, req->id, GADGET_EPROTO, why);
        } else if (nl->ops.admit && nl->ops.admit(nl->ops.arg, in->from, true, why, sizeof why) < 0) {
                in_refuse(in, req->id, GADGET_EDENIED, why);
        } else if (in->inflight >= NODELINK_MAX_INFLIGHT) {
                /* A peer that floods and does not read its answers ends. */
                e = in_busy(in, req->id);
        } else {
                in->spoke = true;
                in->inflight++;
                nl->ops.request(nl->ops.arg, in, in->from, req);
        }
        control__request__free_unpacked(req, NULL);
        return e;
}

static int in_sending(void *arg, const uint8_t *data, size_t len)
{
        return frame_out_ok(&control__response__descriptor, data, len);
}

static void in_closed(void *arg, int why)
{
        in_end(arg, true);
}

/* Every answer queued was written: a refused session ends now. */
static void in_drained(void *arg)
{
        struct nodelink_in *in = arg;
        if (in->refused)
                conn_drop(in->conn, -ESHUTDOWN);
}

static void in_admit(struct nodelink_in *in);

static const struct conn_ops in_ops = {
        .frame = in_frame,
        .closed = in_closed,
        .drained = in_drained,
        .sending = in_sending,
};

/* The handshake is done: the session is the node its certificate names. */
static void in_connected(struct nodelink_in *in)
{
        SSL *ssl = bufferevent_openssl_get_ssl(in->bev);
        X509 *peer = SSL_get0_peer_certificate(ssl);
        char why[128];
        /* Why this is safe: OpenSSL verified the chain to PeerCA (the
         * context requires a certificate); the name is read by the same
         * rule as every node's own. */
        if (!peer || SSL_get_verify_result(ssl) != X509_V_OK || nodelink_tls_node(peer, in->from, why, sizeof why) < 0) {
                in_end(in, false);
                return;
        }
        in->named = true;
        in_admit(in);
}

/* The session of a node its certificate named takes a seat, if the node
 * may take part and there is one. */
static void in_admit(struct nodelink_in *in)
{
        struct nodelink *nl = in->nl;
        char why[256];
        /* Why this is safe: one node (one certificate's name) holds at
         * most NODELINK_MAX_IN_PER_NODE of the NODELINK_MAX_IN sessions, so
         * a node with a valid certificate cannot take the others' seats. */
        unsigned same = 0;
        const struct nodelink_in *o;
        TAILQ_FOREACH(o, &nl->ins, link)
                same += o->conn && strcmp(o->from, in->from) == 0;
        if (same >= NODELINK_MAX_IN_PER_NODE || nl->n_in >= NODELINK_MAX_IN) {
                in_end(in, false);
                return;
        }
        /* A name the store does not know as a node, or one revoked, takes
         * no seat. One not known yet may be a node that joined since the
         * store was last read: it is looked for again while its session
         * stays one in its handshake (bounded as those are), so its first
         * call is not refused for being early. */
        bool last = monotime_ms() - in->accepted_ms + NODELINK_ADMIT_RETRY_MS >= NODELINK_HANDSHAKE_MS;
        int e = nl->ops.admit ? nl->ops.admit(nl->ops.arg, in->from, last, why, sizeof why) : 0;
        if (e == -EAGAIN && !last) {
                timer_arm_ms(in->deadline, NODELINK_ADMIT_RETRY_MS);
                return;
        }
        if (e < 0) {
                in_end(in, false);
                return;
        }
        if (!(in->rate = rate_get(nl, in->from)) || conn_new_bev(in->bev, NODELINK_MAX_OUTPUT, &in_ops, in, &in->conn) < 0) {
                in_end(in, false);
                return;
        }
        in->bev = NULL; /* the conn's now */
        conn_set_budget(in->conn, &turn_budget);
        conn_hold(in->conn, in->rate->held);
        nl->n_pre--;
        nl->n_in++;
        in_idle_arm(in);
}

/* The handshake's end, either way. Why nothing is read before it: the
 * bufferevent has no read callback until the conn takes it over, once
 * the peer's certificate was verified and named a node. */
static void in_event(struct bufferevent *bev, short what, void *arg)
{
        struct nodelink_in *in = arg;
        if (what & BEV_EVENT_CONNECTED)
                in_connected(in);
        else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
                ERR_clear_error();
                in_end(in, false);
        }
}

/* The handshake took too long, or the session is idle: closed. One with
 * requests in flight is not idle (they end within their CallTimeout). */
static void in_deadline(evutil_socket_t fd, short what, void *arg)
{
        struct nodelink_in *in = arg;
        if (!in->conn && in->named) {
                in_admit(in); /* a node not known yet: looked for again */
                return;
        }
        if (in->conn && in->inflight > 0 && !in->refused) {
                in_idle_arm(in);
                return;
        }
        in_end(in, true);
}

/* Whether a and b are the same source address (ports aside). */
static bool same_source(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
        if (a->ss_family != b->ss_family)
                return false;
        if (a->ss_family == AF_INET)
                return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
        if (a->ss_family == AF_INET6)
                return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                              sizeof(struct in6_addr)) == 0;
        return false;
}

/* Makes room for one more session in its handshake from src: past
 * NODELINK_MAX_PREAUTH_PER_ADDR of that address, or NODELINK_MAX_PREAUTH
 * in all, the oldest such session (of that address first) is closed. A
 * real node's handshake takes milliseconds; a connection that holds its
 * seat without one is the first to go. */
static void preauth_room(struct nodelink *nl, const struct sockaddr_storage *src)
{
        struct nodelink_in *o, *oldest = NULL, *oldest_here = NULL;
        unsigned here = 0;
        /* ins is in the order of acceptance: the first found is the oldest. */
        TAILQ_FOREACH(o, &nl->ins, link) {
                if (o->conn)
                        continue;
                if (!oldest)
                        oldest = o;
                if (same_source(&o->src, src) && here++ == 0)
                        oldest_here = o;
        }
        if (here >= NODELINK_MAX_PREAUTH_PER_ADDR)
                in_end(oldest_here, false);
        else if (nl->n_pre >= NODELINK_MAX_PREAUTH && oldest)
                in_end(oldest, false);
}

/* Whether src may start one more session now: its bucket of sessions
 * started is within NODELINK_HANDSHAKES_PER_S. Why this is safe: a
 * party that opens session after session (each ended by a bad frame, a
 * name that is no node, or nothing) costs the loop at most that many TLS
 * handshakes a second per address it holds. */
static bool handshake_room(struct nodelink *nl, const struct sockaddr_storage *src)
{
        uint64_t now = monotime_ms();
        struct addr_rate *a = NULL, *oldest = NULL;
        for (size_t i = 0; i < nl->n_addrs && !a; i++) {
                if (same_source(&nl->addrs[i].src, src))
                        a = &nl->addrs[i];
                else if (!oldest || nl->addrs[i].rate.at_ms < oldest->rate.at_ms)
                        oldest = &nl->addrs[i];
        }
        if (!a) {
                a = nl->n_addrs < NODELINK_ADDRS_MAX ? &nl->addrs[nl->n_addrs++] : oldest;
                a->src = *src;
                rate_init(&a->rate, nl->handshakes_per_s, now);
        }
        return rate_try(&a->rate, 1, now);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
        struct nodelink *nl = arg;
        struct nodelink_in *in = NULL;
        SSL *ssl = NULL;
        struct sockaddr_storage src = { 0 };
        memcpy(&src, sa, (size_t)salen < sizeof src ? (size_t)salen : sizeof src);
        if (!handshake_room(nl, &src)) {
                close(fd);
                return;
        }
        /* Why this is safe: sessions in their handshake are bounded in all
         * and per source address (the oldest makes room), apart from the
         * seats of authenticated nodes, before any TLS work. */
        preauth_room(nl, &src);
        if (!(in = calloc(1, sizeof *in)) || !(ssl = SSL_new(nl->server)))
                goto fail;
        in->nl = nl;
        in->src = src;
        in->accepted_ms = monotime_ms();
        if (!(in->deadline = evtimer_new(nl->base, in_deadline, in)) || !(in->bev = tls_bev(nl, fd, ssl, true)))
                goto fail;
        TAILQ_INSERT_TAIL(&nl->ins, in, link);
        nl->n_pre++;
        bufferevent_setcb(in->bev, NULL, NULL, in_event, in);
        timer_arm_ms(in->deadline, NODELINK_HANDSHAKE_MS);
        bufferevent_enable(in->bev, EV_READ | EV_WRITE);
        return;
fail:
        if (in && in->deadline)
                event_free(in->deadline);
        free(in);
        SSL_free(ssl);
        ERR_clear_error();
        close(fd);
}

/* An accept that failed (no fds left, say): the listener pauses for a
 * second instead of spinning. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
        struct nodelink *nl = arg;
        listener_pause(l, nl->relisten, "the peer link", NODELINK_ACCEPT_PAUSE_MS);
}

int nodelink_answer(struct nodelink_in *in, const Control__Response *resp)
{
        if (!in->conn || in->refused)
                return -ECONNRESET;
        int e = conn_send(in->conn, &resp->base);
        if (e == -E2BIG) {
                char msg[200];
                snprintf(msg, sizeof msg, "the answer holds more than %d values, more than the link between nodes "
                         "carries", NODELINK_FRAME_VALUES_MAX);
                e = in_error(in, resp->id, GADGET_ELIMIT, msg);
        }
        /* An answer lost to a peer that does not read still ends its
         * request; -EMSGSIZE or -ENOMEM leave room for an error answer. */
        if ((e == 0 || e == -ENOBUFS) && in->inflight > 0 && --in->inflight == 0)
                in_idle_arm(in); /* idle from its last answer */
        return e;
}

/* --- outgoing sessions -------------------------------------------------- */

static void out_close(struct out *o)
{
        if (o->conn)
                conn_free(o->conn); /* and its bufferevent */
        else if (o->bev)
                bufferevent_free(o->bev);
        else if (o->fd >= 0)
                close(o->fd);
        o->conn = NULL;
        o->bev = NULL;
        o->fd = -1;
        rate_put(o->rate);
        o->rate = NULL;
        if (o->connected)
                event_free(o->connected);
        o->connected = NULL;
        evtimer_del(o->deadline);
        o->why[0] = '\0';
        wire_writer_free(&o->staged);
        o->state = OUT_IDLE;
        ERR_clear_error();
}

static void out_free(struct out *o)
{
        out_close(o);
        TAILQ_REMOVE(&o->nl->outs, o, link);
        event_free(o->deadline);
        free(o);
}

/* Ends the session: every send waiting on it is told why, once; a send
 * made from one of those done callbacks starts a new session. */
static void out_fail(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_fail(struct out *o, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        struct send_list gone;
        struct nodelink_send *s;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        out_close(o);
        TAILQ_INIT(&gone);
        TAILQ_CONCAT(&gone, &o->sends, link);
        TAILQ_FOREACH(s, &gone, link) {
                s->out = NULL;
                s->list = &gone; /* a done callback may cancel one of the others */
        }
        o->n_sends = 0;
        while ((s = TAILQ_FIRST(&gone))) {
                TAILQ_REMOVE(&gone, s, link);
                s->done(s->arg, NULL, GADGET_EUNAVAILABLE, msg);
                free(s);
        }
        if (o->state == OUT_IDLE && o->n_sends == 0)
                out_free(o);
}

/* A kept session with no send waiting ends after NODELINK_OUT_IDLE_MS
 * (out_deadline); the next send opens a new one. */
static void out_idle_arm(struct out *o)
{
        if (o->state == OUT_READY && o->n_sends == 0)
                timer_arm_ms(o->deadline, NODELINK_OUT_IDLE_MS);
}

static int out_frame(void *arg, const uint8_t *data, size_t len, size_t *cost)
{
        struct out *o = arg;
        char why[200];
        size_t values = 0;
        struct nodelink_send *s;
        /* Why this is safe: as a request (in_frame), an answer is bounded
         * on its raw bytes before it is unpacked, and checked by the one
         * answer validator before anyone reads it. */
        bool ok = frame_ok(&control__response__descriptor, data, len, &values);
        *cost += values;
        rate_count(o->rate, values);
        if (!ok)
                return -EBADMSG;
        Control__Response *resp = control__response__unpack(NULL, len, data);
        if (!resp)
                return -EBADMSG;
        if (validate_control_response(resp, why, sizeof why) < 0) {
                control__response__free_unpacked(resp, NULL);
                return -EBADMSG;
        }
        TAILQ_FOREACH(s, &o->sends, link) {
                if (s->id != resp->id)
                        continue;
                TAILQ_REMOVE(&o->sends, s, link);
                o->n_sends--;
                s->done(s->arg, resp, 0, NULL);
                free(s);
                break;
        }
        /* A response whose id matches nothing (cancelled, or made up) is
         * dropped. */
        control__response__free_unpacked(resp, NULL);
        out_idle_arm(o);
        return 0;
}

static int out_sending(void *arg, const uint8_t *data, size_t len)
{
        return frame_out_ok(&control__request__descriptor, data, len);
}

/* The session ended: why, in words, from the TLS session when it says. */
static void out_closed(void *arg, int why)
{
        struct out *o = arg;
        bool eof;
        const char *reason = tls_reason(o->bev, &eof);
        if (why == CONN_TOO_BIG)
                out_fail(o, "node %s at %s announced a frame over %u bytes", o->node, o->addr, WIRE_MAX_FRAME);
        else if (why == -EBADMSG)
                out_fail(o, "node %s at %s sent a frame that is not a response", o->node, o->addr);
        else if (reason)
                out_fail(o, "node %s at %s ended the TLS session: %s", o->node, o->addr, reason);
        else if (why == CONN_EOF || why == CONN_TRUNCATED || why == -EPROTO || eof)
                out_fail(o, "node %s at %s closed the link", o->node, o->addr);
        else
                out_fail(o, "the link to node %s at %s failed: %s", o->node, o->addr, strerror(-why));
}

static const struct conn_ops out_ops = {
        .frame = out_frame,
        .closed = out_closed,
        .sending = out_sending,
};

/* The handshake is done and OpenSSL checked the chain and the name asked
 * for (SSL_set1_host); the name rule is checked as the server checks
 * ours, then the frames waiting go out. */
static void out_connected(struct out *o)
{
        X509 *peer = SSL_get0_peer_certificate(bufferevent_openssl_get_ssl(o->bev));
        char name[NODE_MAX + 1], why[128];
        if (!peer || nodelink_tls_node(peer, name, why, sizeof why) < 0) {
                out_fail(o, "node %s's certificate was not accepted: it %s", o->node, peer ? why : "is missing");
                return;
        }
        if (strcmp(name, o->node) != 0) {
                out_fail(o, "node %s's certificate was not accepted: it names node %s", o->node, name);
                return;
        }
        if (!(o->rate = rate_get(o->nl, o->node)) || conn_new_bev(o->bev, NODELINK_MAX_OUTPUT, &out_ops, o, &o->conn) < 0) {
                out_fail(o, "node %s at %s: out of memory", o->node, o->addr);
                return;
        }
        conn_set_budget(o->conn, &turn_budget);
        conn_hold(o->conn, o->rate->held);
        o->state = OUT_READY;
        evtimer_del(o->deadline);
        size_t n = wire_writer_pending(&o->staged);
        if (n && conn_send_frames(o->conn, o->staged.buf + o->staged.start, n) < 0) {
                out_fail(o, "node %s at %s: out of memory", o->node, o->addr);
                return;
        }
        wire_writer_free(&o->staged);
        out_idle_arm(o); /* its sends were cancelled meanwhile */
}

/* The handshake's end, either way. */
static void out_event(struct bufferevent *bev, short what, void *arg)
{
        struct out *o = arg;
        long verify = SSL_get_verify_result(bufferevent_openssl_get_ssl(bev));
        int err = EVUTIL_SOCKET_ERROR();
        bool eof;
        const char *reason = tls_reason(bev, &eof);
        if (what & BEV_EVENT_CONNECTED)
                out_connected(o);
        else if (verify != X509_V_OK)
                out_fail(o, "node %s's certificate was not accepted: %s", o->node, X509_verify_cert_error_string(verify));
        else if (reason)
                out_fail(o, "node %s at %s ended the TLS session: %s", o->node, o->addr, reason);
        else if ((what & BEV_EVENT_EOF) || eof || !err)
                out_fail(o, "node %s at %s closed the link", o->node, o->addr);
        else
                out_fail(o, "the link to node %s at %s failed: %s", o->node, o->addr, strerror(err));
}

static void out_deadline(evutil_socket_t fd, short what, void *arg)
{
        struct out *o = arg;
        if (o->state == OUT_READY) {
                if (o->n_sends == 0) /* idle: closed and freed (no send to tell) */
                        out_fail(o, "idle");
                return;
        }
        if (o->why[0])
                out_fail(o, "%s", o->why);
        else
                out_fail(o, "cannot reach node %s at %s: no TLS session within %d ms", o->node, o->addr,
                         NODELINK_CONNECT_MS);
}

/* The TCP connect is done: TLS starts, asking for the node's name. */
static void out_tcp_done(evutil_socket_t fd, short what, void *arg)
{
        struct out *o = arg;
        int err = 0;
        socklen_t n = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) < 0)
                err = errno;
        if (err) {
                out_fail(o, "cannot reach node %s at %s: %s", o->node, o->addr, strerror(err));
                return;
        }
        SSL *ssl = SSL_new(o->nl->client);
        /* Why this is safe: the handshake fails unless PeerCA vouches for a
         * certificate naming this very node (no wildcards). */
        if (ssl)
                SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_WILDCARDS);
        if (!ssl || SSL_set1_host(ssl, o->node) != 1 || !(o->bev = tls_bev(o->nl, fd, ssl, false))) {
                SSL_free(ssl);
                out_fail(o, "cannot start TLS with node %s: out of memory", o->node);
                return;
        }
        o->fd = -1;  /* the bufferevent's now */
        o->state = OUT_HANDSHAKE;
        /* Nothing is read before the peer's name was checked (out_connected). */
        bufferevent_setcb(o->bev, NULL, NULL, out_event, o);
        bufferevent_enable(o->bev, EV_READ | EV_WRITE);
}

/* Starts connecting, without blocking. A failure found here is told from
 * the loop (done is never called inside nodelink_send). */
static void out_connect(struct out *o)
{
        const struct timeval now = { 0, 0 };
        o->state = OUT_CONNECTING;
        o->fd = socket(o->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (o->fd < 0 || (connect(o->fd, (struct sockaddr *)&o->sa, (socklen_t)o->salen) < 0 && errno != EINPROGRESS)) {
                snprintf(o->why, sizeof o->why, "cannot reach node %s at %s: %s", o->node, o->addr, strerror(errno));
                evtimer_add(o->deadline, &now);
                return;
        }
        if (!(o->connected = event_new(o->nl->base, o->fd, EV_WRITE, out_tcp_done, o))) {
                snprintf(o->why, sizeof o->why, "cannot reach node %s at %s: out of memory", o->node, o->addr);
                evtimer_add(o->deadline, &now);
                return;
        }
        event_add(o->connected, NULL);
        timer_arm_ms(o->deadline, NODELINK_CONNECT_MS);
}

static struct out *out_get(struct nodelink *nl, const char *node, const char *addr, const struct sockaddr_storage *sa,
                           int salen)
{
        struct out *o;
        TAILQ_FOREACH(o, &nl->outs, link)
                if (strcmp(o->node, node) == 0 && strcmp(o->addr, addr) == 0)
                        return o;
        o = calloc(1, sizeof *o);
        if (!o || !(o->deadline = evtimer_new(nl->base, out_deadline, o))) {
                free(o);
                return NULL;
        }
        o->nl = nl;
        snprintf(o->node, sizeof o->node, "%s", node);
        snprintf(o->addr, sizeof o->addr, "%s", addr);
        o->sa = *sa;
        o->salen = salen;
        o->fd = -1;
        TAILQ_INIT(&o->sends);
        TAILQ_INSERT_TAIL(&nl->outs, o, link);
        return o;
}

/* Packs req for a session still proving the peer's name: it waits in
 * staged, bounded as the session's output is. */
static int stage(struct out *o, Control__Request *req)
{
        if (!o->staged.limit)
                wire_writer_init(&o->staged, NODELINK_MAX_OUTPUT);
        size_t end = o->staged.end;
        int e = wire_writer_put(&o->staged, &req->base, WIRE_MAX_FRAME);
        if (e < 0)
                return e;
        e = frame_out_ok(&control__request__descriptor, o->staged.buf + end + WIRE_HEADER_SIZE,
                         o->staged.end - end - WIRE_HEADER_SIZE);
        if (e < 0)
                o->staged.end = end;
        return e;
}

int nodelink_send(struct nodelink *nl, const char *node, const char *addr, Control__Request *req, nodelink_done done,
                  void *arg, struct nodelink_send **handle)
{
        struct sockaddr_storage sa;
        int salen, e;
        if (nl->closing)
                return -ESHUTDOWN;
        if (!node || !gadget_name_ok(node) || parse_addr(addr, false, &sa, &salen) < 0)
                return -EINVAL;
        struct out *o = out_get(nl, node, addr, &sa, salen);
        struct nodelink_send *s = NULL;
        if (!o)
                return -ENOMEM;
        if (o->n_sends >= NODELINK_MAX_PENDING) {
                e = -ENOBUFS;
                goto out;
        }
        if (!(s = calloc(1, sizeof *s))) {
                e = -ENOMEM;
                goto out;
        }
        req->id = ++nl->next_id;
        req->version = CONTROL_PROTOCOL_VERSION;
        e = o->state == OUT_READY ? conn_send(o->conn, &req->base) : stage(o, req);
        if (e < 0)
                goto out;
        *s = (struct nodelink_send){ .out = o, .list = &o->sends, .id = req->id, .done = done, .arg = arg };
        TAILQ_INSERT_TAIL(&o->sends, s, link);
        o->n_sends++;
        if (o->state == OUT_IDLE)
                out_connect(o);
        *handle = s;
        return 0;
out:
        free(s);
        if (o->state == OUT_IDLE && o->n_sends == 0)
                out_free(o);
        return e;
}

void nodelink_cancel(struct nodelink_send *s)
{
        if (!s)
                return;
        TAILQ_REMOVE(s->list, s, link);
        if (s->out) {
                s->out->n_sends--;
                out_idle_arm(s->out);
        }
        free(s);
}

/* --- the link ----------------------------------------------------------- */

static int listen_on(struct nodelink *nl, const char *addr, char *err, size_t len)
{
        struct sockaddr_storage sa;
        int salen;
        if (parse_addr(addr, true, &sa, &salen) < 0) {
                snprintf(err, len, "PeerListen=%s: not a numeric HOST:PORT (an IPv4 address or [IPv6]; names are "
                         "not resolved)", addr);
                return -EINVAL;
        }
        nl->listener = evconnlistener_new_bind(nl->base, on_accept, nl,
                                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
                                               NODELINK_MAX_IN, (struct sockaddr *)&sa, salen);
        if (!nl->listener) {
                int e = errno ? errno : EADDRNOTAVAIL;
                snprintf(err, len, "PeerListen=%s: cannot listen: %s", addr, strerror(e));
                return -e;
        }
        if (!(nl->relisten = listener_resume_new(nl->listener))) {
                snprintf(err, len, "the peer link: out of memory");
                return -ENOMEM;
        }
        evconnlistener_set_error_cb(nl->listener, on_accept_error);
        struct sockaddr_storage bound;
        socklen_t n = sizeof bound;
        if (getsockname(evconnlistener_get_fd(nl->listener), (struct sockaddr *)&bound, &n) == 0)
                nl->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                             : ((struct sockaddr_in *)&bound)->sin_port);
        return 0;
}

int nodelink_new(struct event_base *base, const struct nodelink_config *cfg, const struct nodelink_server_ops *ops,
                 struct nodelink **out, char *err, size_t len)
{
        struct nodelink *nl = NULL;
        int e;
        if (!cfg->node || !gadget_name_ok(cfg->node) || !cfg->cert || !cfg->key || !cfg->ca) {
                snprintf(err, len, "the peer link needs a node name, PeerCertificate=, PeerKey= and PeerCA=");
                return -EINVAL;
        }
        if (cfg->listen && (!ops || !ops->request)) {
                snprintf(err, len, "PeerListen=%s: no handler for requests", cfg->listen);
                return -EINVAL;
        }
        if (!(nl = calloc(1, sizeof *nl))) {
                snprintf(err, len, "the peer link: out of memory");
                return -ENOMEM;
        }
        nl->base = base;
        nl->handshakes_per_s = cfg->handshakes_per_s ? cfg->handshakes_per_s : NODELINK_HANDSHAKES_PER_S;
        if (ops)
                nl->ops = *ops;
        snprintf(nl->node, sizeof nl->node, "%s", cfg->node);
        TAILQ_INIT(&nl->ins);
        TAILQ_INIT(&nl->outs);
        TAILQ_INIT(&nl->rates);
        if ((e = nodelink_tls_new(cfg, &nl->server, &nl->client, err, len)) < 0)
                goto out;
        /* OpenSSL writes to the socket with write(): a peer that resets
         * must not take gadgetd with it (as core_open does). */
        signal(SIGPIPE, SIG_IGN);
        e = -ENOMEM;
        if (!(nl->addrs = calloc(NODELINK_ADDRS_MAX, sizeof *nl->addrs))) {
                snprintf(err, len, "the peer link: out of memory");
                goto out;
        }
        if (cfg->listen && (e = listen_on(nl, cfg->listen, err, len)) < 0)
                goto out;
        e = 0;
        *out = nl;
        nl = NULL;
out:
        nodelink_free(nl);
        return e;
}

int nodelink_listen_port(const struct nodelink *nl)
{
        return nl->port;
}

void nodelink_free(struct nodelink *nl)
{
        if (!nl)
                return;
        nl->closing = true;
        struct out *o;
        struct nodelink_in *in;
        while ((o = TAILQ_FIRST(&nl->outs))) {
                if (o->n_sends)
                        out_fail(o, "the link of node %s is closing", nl->node);
                else
                        out_free(o);
        }
        while ((in = TAILQ_FIRST(&nl->ins)))
                in_end(in, false);
        if (nl->relisten)
                event_free(nl->relisten);
        if (nl->listener)
                evconnlistener_free(nl->listener);
        SSL_CTX_free(nl->server);
        SSL_CTX_free(nl->client);
        free(nl->addrs);
        free(nl);
}
