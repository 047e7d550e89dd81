/* nodelink_in: the sessions other nodes start: the handshake's bounds
 * per source address (the handshake itself runs on nodelink_hs.c's
 * thread), admission by the store's names, the requests a session
 * carries and their answers. */
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

/* --- accepted sessions -------------------------------------------------- */

void nodelink_in_end(struct nodelink_in *in, bool tell)
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
                /* In its handshake, its fd and SSL are the thread's (or
                 * on their way back): the cancel leaves them to whoever
                 * holds them (nodelink_hs.c says why that is safe). */
                if (in->hs)
                        nodelink_hs_cancel(nl->hs, in);
                if (in->bev)
                        bufferevent_free(in->bev);
        }
        nodelink_rate_put(in->rate);
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
        bool ok = nodelink_frame_ok(&control__request__descriptor, data, len, &values);
        *cost += values;
        nodelink_rate_count(in->rate, values ? values : 1, len);
        if (!ok)
                return -EPROTO;
        /* Why this is safe: after its goodbye the session's node was told
         * that nothing more of it is read; it is dropped unread. */
        if (in->bye)
                return 0;
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
        return nodelink_frame_out_ok(&control__response__descriptor, data, len);
}

static void in_closed(void *arg, int why)
{
        nodelink_in_end(arg, true);
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
                nodelink_in_end(in, false);
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
                nodelink_in_end(in, false);
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
                nodelink_in_end(in, false);
                return;
        }
        if (!(in->rate = nodelink_rate_get(nl, in->from)) || conn_new_bev(in->bev, NODELINK_MAX_OUTPUT, &in_ops, in, &in->conn) < 0) {
                nodelink_in_end(in, false);
                return;
        }
        in->bev = NULL; /* the conn's now */
        conn_set_budget(in->conn, &nodelink_turn_budget);
        conn_hold(in->conn, in->rate->held || nl->reexec_held);
        nl->n_pre--;
        nl->n_in++;
        in_idle_arm(in);
}

/* The session's end before a conn took it over: the peer closed or
 * failed while its admission was looked for again (its handshake ran on
 * the handshake thread: no CONNECTED comes here). Why nothing is read:
 * the bufferevent has no read callback until the conn takes it over,
 * once the peer's certificate was verified and named a node. */
static void in_event(struct bufferevent *bev, short what, void *arg)
{
        struct nodelink_in *in = arg;
        if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
                ERR_clear_error();
                nodelink_in_end(in, false);
        }
}

void nodelink_in_handshaken(struct nodelink_in *in, int fd, SSL *ssl, bool ok)
{
        if (!ok || !(in->bev = nodelink_tls_bev(in->nl, fd, ssl, BUFFEREVENT_SSL_OPEN))) {
                SSL_free(ssl);
                close(fd);
                ERR_clear_error();
                nodelink_in_end(in, false);
                return;
        }
        bufferevent_setcb(in->bev, NULL, NULL, in_event, in);
        bufferevent_enable(in->bev, EV_READ | EV_WRITE);
        in_connected(in);
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
        nodelink_in_end(in, true);
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
                nodelink_in_end(oldest_here, false);
        else if (nl->n_pre >= NODELINK_MAX_PREAUTH && oldest)
                nodelink_in_end(oldest, false);
}

/* Whether src may start one more session now: its bucket of sessions
 * started is within NODELINK_HANDSHAKES_PER_S. Why this is safe: a
 * party that opens session after session (each ended by a bad frame, a
 * name that is no node, or nothing) costs the handshakes' thread at most
 * that many TLS handshakes a second per address it holds, and the loop
 * that many accepts and admissions. */
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

void nodelink_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
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
        /* Why this is safe: the handshake runs on its own thread, all of
         * them at once, never on the loop; the loop keeps its deadline. */
        if (!(in->deadline = evtimer_new(nl->base, in_deadline, in)) || nodelink_hs_start(nl->hs, in, fd, ssl) < 0)
                goto fail;
        TAILQ_INSERT_TAIL(&nl->ins, in, link);
        nl->n_pre++;
        timer_arm_ms(in->deadline, NODELINK_HANDSHAKE_MS);
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
void nodelink_on_accept_error(struct evconnlistener *l, void *arg)
{
        struct nodelink *nl = arg;
        listener_pause(l, nl->relisten, "the peer link", NODELINK_ACCEPT_PAUSE_MS);
}

int nodelink_answer(struct nodelink_in *in, const Control__Response *resp)
{
        if (!in->conn || in->refused)
                return -ECONNRESET;
        size_t sent = 0;
        int e = conn_send_counted(in->conn, &resp->base, &sent);
        /* What the answer costs this node is its asker's: nothing else
         * bounds the bytes a node may ask this one to send it. */
        if (e == 0)
                nodelink_rate_count(in->rate, 0, sent);
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

bool nodelink_in_may_trace(struct nodelink_in *in)
{
        return rate_try(&in->rate->traces, 1, monotime_ms());
}

void nodelink_in_charge(struct nodelink_in *in, size_t values)
{
        if (values)
                nodelink_rate_count(in->rate, values, 0);
}
