/* nodelink: mutual-TLS sessions between gadgetd nodes on the loop, carrying
 * control.proto frames (see nodelink.h for the rules of names and bounds).
 * A session is a TLS bufferevent until its handshake proved the peer's
 * name, then a conn (system/conn.c) over it, as every other link: frames,
 * a budget per turn, holding, the order of closing. */
#include "nodelink_int.h"

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

#include "cluster/nodelink_tls.h"
#include "contract.h"
#include "system/conn.h"
#include "system/listener.h"
#include "system/monotime.h"
#include "system/rate.h"
#include "system/timer.h"
#include "validate.h"
#include "value.h"

/* What one session may take per loop turn (at least one frame). */
const struct conn_budget nodelink_turn_budget = { 64, 4 * (uint64_t)WIRE_MAX_FRAME, NODELINK_FRAME_VALUES_MAX };

/* "HOST:PORT" with a numeric host into sa. 0 or -EINVAL (a name, no port). */
int nodelink_parse_addr(const char *addr, bool port0_ok, struct sockaddr_storage *sa, int *salen)
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
bool nodelink_frame_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, size_t *values)
{
        char why[160];
        return value_packed_cost(desc, data, len, NODELINK_FRAME_VALUES_MAX, values, why, sizeof why) == 0;
}

/* A frame about to leave, request or answer: one past
 * NODELINK_FRAME_VALUES_MAX is refused here (-E2BIG), where the one who
 * sends it hears why, since the other end would end the session. */
int nodelink_frame_out_ok(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len)
{
        size_t values = 0;
        return nodelink_frame_ok(desc, data, len, &values) ? 0 : -E2BIG;
}

/* --- each node's values a second ---------------------------------------- */

static void rate_hold(struct node_rate *r, bool hold);

/* The wait is over: its sessions are read again, or wait again for the
 * answers sent to it meanwhile (to requests read before the hold). */
static void rate_release(evutil_socket_t fd, short what, void *arg)
{
        struct node_rate *r = arg;
        uint64_t now = monotime_ms(), wv = rate_add(&r->rate, 0, now), wb = rate_add(&r->bytes, 0, now);
        if (wv || wb)
                timer_arm_ms(r->release, wv > wb ? wv : wb);
        else
                rate_hold(r, false);
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
                        conn_hold(in->conn, hold || (nl->reexec_held && !in->bye));
        TAILQ_FOREACH(o, &nl->outs, link)
                if (o->rate == r && o->conn)
                        conn_hold(o->conn, hold);
}

/* The entry of node `node`, made if none; NULL when out of memory. */
struct node_rate *nodelink_rate_get(struct nodelink *nl, const char *node)
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
        rate_init(&r->bytes, NODELINK_BYTES_PER_S, monotime_ms());
        rate_init(&r->traces, NODELINK_TRACES_PER_S, monotime_ms());
        TAILQ_INSERT_TAIL(&nl->rates, r, link);
found:
        r->refs++;
        return r;
}

/* A session of r's node ended. Why forgetting the bucket with the last
 * one is safe: a node that reconnects to empty it pays a TLS handshake
 * and gets at most one more budget, which is within what one second
 * allows it. */
void nodelink_rate_put(struct node_rate *r)
{
        if (!r || --r->refs > 0)
                return;
        TAILQ_REMOVE(&r->nl->rates, r, link);
        event_free(r->release);
        free(r);
}

/* Counts a frame's values and bytes (or an answer's bytes) against its
 * node's second; past either budget every session of that node stops
 * being read until both buckets have drained back to them. Why this is
 * safe: a peer resending wide frames, or asking for big answers, costs
 * this node the decoding of at most NODELINK_VALUES_PER_S values and the
 * handling of NODELINK_BYTES_PER_S bytes a second (plus the answers to
 * requests read before), however many sessions it holds. */
void nodelink_rate_count(struct node_rate *r, size_t values, size_t bytes)
{
        uint64_t now = monotime_ms(), wv = rate_add(&r->rate, values, now), wb = rate_add(&r->bytes, bytes, now);
        uint64_t wait_ms = wv > wb ? wv : wb;
        if (!wait_ms || r->held)
                return;
        rate_hold(r, true);
        timer_arm_ms(r->release, wait_ms);
}

/* The reason OpenSSL gave for a session's failure, or NULL; *eof if it
 * was only an end without close_notify (OpenSSL 3 calls that an error). */
const char *nodelink_tls_reason(struct bufferevent *bev, bool *eof)
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
 * every later send. And each frame leaves as it is made: a frame's TLS
 * records may be two writes, and with Nagle's algorithm the second waited
 * for the first's acknowledgement, which the peer may delay up to 40 ms
 * (a paced caller's first calls through another node: p99 28-31 ms). */
static void tcp_options(int fd)
{
        int on = 1, idle = NODELINK_KEEPALIVE_S, intvl = NODELINK_KEEPALIVE_S, cnt = 3;
        unsigned user_timeout = 3 * NODELINK_KEEPALIVE_S * 1000;
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

struct bufferevent *nodelink_tls_bev(struct nodelink *nl, int fd, SSL *ssl, enum bufferevent_ssl_state state)
{
        tcp_options(fd);
        struct bufferevent *bev = bufferevent_openssl_socket_new(nl->base, fd, ssl, state, BEV_OPT_CLOSE_ON_FREE);
        if (!bev)
                return NULL;
        /* An end without close_notify is an end of file: frames say
         * themselves whether one was cut. */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        bufferevent_setwatermark(bev, EV_READ, 0, TLS_READ_MAX);
        return bev;
}


/* --- the link ----------------------------------------------------------- */

static int listen_on(struct nodelink *nl, const char *addr, int adopt_fd, char *err, size_t len)
{
        struct sockaddr_storage sa;
        int salen;
        if (nodelink_parse_addr(addr, true, &sa, &salen) < 0) {
                snprintf(err, len, "PeerListen=%s: not a numeric HOST:PORT (an IPv4 address or [IPv6]; names are "
                         "not resolved)", addr);
                return -EINVAL;
        }
        if (adopt_fd >= 0 && listener_adopt(adopt_fd, sa.ss_family) < 0) {
                snprintf(err, len, "PeerListen=%s: the listening socket handed on (fd %d) is not one of its family",
                         addr, adopt_fd);
                return -EINVAL;
        }
        /* A re-exec's socket: peers' connects waited in its backlog. */
        nl->listener = adopt_fd >= 0 ? evconnlistener_new(nl->base, nodelink_on_accept, nl,
                                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, adopt_fd)
                                     : evconnlistener_new_bind(nl->base, nodelink_on_accept, nl,
                                                               LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
                                                                       LEV_OPT_REUSEABLE,
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
        evconnlistener_set_error_cb(nl->listener, nodelink_on_accept_error);
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
        if (cfg->listen && (e = listen_on(nl, cfg->listen, cfg->adopt ? cfg->adopt_fd : -1, err, len)) < 0)
                goto out;
        if (cfg->listen && (e = nodelink_hs_new(nl, &nl->hs)) < 0) {
                snprintf(err, len, "the peer link: cannot start the thread of its handshakes: %s", strerror(-e));
                goto out;
        }
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

void nodelink_sessions(const struct nodelink *nl, unsigned *in, unsigned *out)
{
        const struct out *o;
        *in = nl->n_in;
        *out = 0;
        TAILQ_FOREACH(o, &nl->outs, link)
                *out += o->state == OUT_READY;
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
                        nodelink_out_fail(o, "the link of node %s is closing", nl->node);
                else
                        nodelink_out_free(o);
        }
        while ((in = TAILQ_FIRST(&nl->ins)))
                nodelink_in_end(in, false);
        /* After the sessions: each one in its handshake was cancelled. */
        nodelink_hs_free(nl->hs);
        if (nl->relisten)
                event_free(nl->relisten);
        if (nl->listener)
                evconnlistener_free(nl->listener);
        SSL_CTX_free(nl->server);
        SSL_CTX_free(nl->client);
        free(nl->addrs);
        free(nl);
}
