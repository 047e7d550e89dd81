/* nodelink_out: the session kept to each node this one calls: connect,
 * handshake, the sends waiting on it and their ends. */
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

/* --- outgoing sessions -------------------------------------------------- */

static void out_dial(struct out *o);

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
        nodelink_rate_put(o->rate);
        o->rate = NULL;
        if (o->connected)
                event_free(o->connected);
        o->connected = NULL;
        evtimer_del(o->deadline);
        o->why[0] = '\0';
        wire_writer_free(&o->staged);
        o->queued = 0;
        o->heard = o->refused = o->goodbye = o->backoff = false;
        o->heard_ms = 0;
        o->state = OUT_IDLE;
        ERR_clear_error();
}

void nodelink_out_free(struct out *o)
{
        out_close(o);
        TAILQ_REMOVE(&o->nl->outs, o, link);
        event_free(o->deadline);
        free(o);
}

/* Ends the session: every send waiting on it is told why, once; a send
 * made from one of those done callbacks starts a new session. Whether a
 * send left: a byte of its frame was handed to the socket (the session
 * was ready, and its output drained past the frame's start). */
void nodelink_out_fail(struct out *o, const char *fmt, ...)
{
        char msg[512], left[700];
        va_list ap;
        struct send_list gone;
        struct nodelink_send *s;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        uint64_t written = o->conn && !o->refused ? o->queued - conn_pending(o->conn) : 0;
        bool unread = o->goodbye;
        snprintf(left, sizeof left, "node %s went away after the call was sent; it may have run (%s)", o->node, msg);
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
                bool sent = s->start < written;
                s->done(s->arg, NULL, unread ? NODELINK_UNREAD : sent ? GADGET_EGONE : GADGET_EUNAVAILABLE,
                        sent && !unread ? left : msg);
                free(s);
        }
        if (o->state != OUT_IDLE || o->n_sends)
                return;
        /* Kept a while after sessions that ended unanswered, so that the
         * next send's session waits its turn (out_connect); freed at the
         * deadline if none comes (out_deadline). */
        if (o->unanswered)
                timer_arm_ms(o->deadline, NODELINK_BACKOFF_MAX_MS);
        else
                nodelink_out_free(o);
}

/* A kept session with no send waiting ends after NODELINK_OUT_IDLE_MS
 * (out_deadline); the next send opens a new one. */
static void out_idle_arm(struct out *o)
{
        if (o->state == OUT_READY && o->n_sends == 0)
                timer_arm_ms(o->deadline, NODELINK_OUT_IDLE_MS);
}

/* One more session in a row that ended before the peer answered. */
static void unanswered(struct out *o)
{
        if (o->unanswered < 32)
                o->unanswered++;
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
        bool ok = nodelink_frame_ok(&control__response__descriptor, data, len, &values);
        o->heard = true;
        o->heard_ms = monotime_ms();
        *cost += values;
        nodelink_rate_count(o->rate, values ? values : 1, len);
        if (!ok)
                return -EBADMSG;
        Control__Response *resp = control__response__unpack(NULL, len, data);
        if (!resp)
                return -EBADMSG;
        if (validate_control_response(resp, why, sizeof why) < 0) {
                control__response__free_unpacked(resp, NULL);
                return -EBADMSG;
        }
        if (resp->resp_case == CONTROL__RESPONSE__RESP_GOODBYE) {
                /* Why this is safe: it ends this session only, to the node
                 * its certificate proves; the sends it makes go again are
                 * that node's, and only those it did not answer. */
                control__response__free_unpacked(resp, NULL);
                o->goodbye = true;
                unanswered(o);
                return -ECONNABORTED;
        }
        o->unanswered = 0;
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
        return nodelink_frame_out_ok(&control__request__descriptor, data, len);
}

/* The session ended: why, in words, from the TLS session when it says. */
static void out_closed(void *arg, int why)
{
        struct out *o = arg;
        bool eof;
        const char *reason = nodelink_tls_reason(o->bev, &eof);
        if (!o->goodbye && !o->heard)
                unanswered(o); /* a goodbye was counted as it came */
        if (o->goodbye)
                nodelink_out_fail(o, "node %s is re-executing (gadgetctl daemon-reexec); the call was not read "
                                  "there", o->node);
        else if (why == CONN_TOO_BIG)
                nodelink_out_fail(o, "node %s at %s announced a frame over %u bytes", o->node, o->addr, WIRE_MAX_FRAME);
        else if (why == -EBADMSG)
                nodelink_out_fail(o, "node %s at %s sent a frame that is not a response", o->node, o->addr);
        else if (reason) {
                /* A TLS alert before any frame came back: the peer
                 * refused the session (TLS 1.3 checks our certificate after
                 * our side's handshake ended), so no request of it ran. */
                o->refused = !o->heard;
                nodelink_out_fail(o, "node %s at %s ended the TLS session: %s", o->node, o->addr, reason);
        } else if (why == CONN_EOF || why == CONN_TRUNCATED || why == -EPROTO || eof)
                nodelink_out_fail(o, "node %s at %s closed the link", o->node, o->addr);
        else
                nodelink_out_fail(o, "the link to node %s at %s failed: %s", o->node, o->addr, strerror(-why));
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
                unanswered(o);
                nodelink_out_fail(o, "node %s's certificate was not accepted: it %s", o->node, peer ? why : "is missing");
                return;
        }
        if (strcmp(name, o->node) != 0) {
                unanswered(o);
                nodelink_out_fail(o, "node %s's certificate was not accepted: it names node %s", o->node, name);
                return;
        }
        if (!(o->rate = nodelink_rate_get(o->nl, o->node)) || conn_new_bev(o->bev, NODELINK_MAX_OUTPUT, &out_ops, o, &o->conn) < 0) {
                nodelink_out_fail(o, "node %s at %s: out of memory", o->node, o->addr);
                return;
        }
        conn_set_budget(o->conn, &nodelink_turn_budget);
        conn_hold(o->conn, o->rate->held);
        o->state = OUT_READY;
        evtimer_del(o->deadline);
        size_t n = wire_writer_pending(&o->staged);
        /* The staged frames' places (o->queued counted them) are the
         * session's first bytes now. */
        o->queued = 0;
        if (n && conn_send_frames(o->conn, o->staged.buf + o->staged.start, n) < 0) {
                nodelink_out_fail(o, "node %s at %s: out of memory", o->node, o->addr);
                return;
        }
        o->queued = n;
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
        const char *reason = nodelink_tls_reason(bev, &eof);
        if (!(what & BEV_EVENT_CONNECTED))
                unanswered(o);
        if (what & BEV_EVENT_CONNECTED)
                out_connected(o);
        else if (verify != X509_V_OK)
                nodelink_out_fail(o, "node %s's certificate was not accepted: %s", o->node, X509_verify_cert_error_string(verify));
        else if (reason)
                nodelink_out_fail(o, "node %s at %s ended the TLS session: %s", o->node, o->addr, reason);
        else if ((what & BEV_EVENT_EOF) || eof || !err)
                nodelink_out_fail(o, "node %s at %s closed the link", o->node, o->addr);
        else
                nodelink_out_fail(o, "the link to node %s at %s failed: %s", o->node, o->addr, strerror(err));
}

static void out_deadline(evutil_socket_t fd, short what, void *arg)
{
        struct out *o = arg;
        if (o->state == OUT_IDLE) { /* kept after unanswered sessions, and no send came */
                nodelink_out_free(o);
                return;
        }
        if (o->backoff) {
                o->backoff = false;
                out_dial(o);
                return;
        }
        if (o->state == OUT_READY) {
                if (o->n_sends == 0) /* idle: closed and freed (no send to tell) */
                        nodelink_out_fail(o, "idle");
                return;
        }
        if (o->why[0]) {
                nodelink_out_fail(o, "%s", o->why);
                return;
        }
        if (o->state == OUT_HANDSHAKE)
                unanswered(o); /* connected, and stalled its handshake */
        nodelink_out_fail(o, "cannot reach node %s at %s: no TLS session within %d ms", o->node, o->addr,
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
                nodelink_out_fail(o, "cannot reach node %s at %s: %s", o->node, o->addr, strerror(err));
                return;
        }
        SSL *ssl = SSL_new(o->nl->client);
        /* Why this is safe: the handshake fails unless PeerCA vouches for a
         * certificate naming this very node (no wildcards). */
        if (ssl)
                SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_WILDCARDS);
        if (!ssl || SSL_set1_host(ssl, o->node) != 1 || !(o->bev = nodelink_tls_bev(o->nl, fd, ssl, BUFFEREVENT_SSL_CONNECTING))) {
                SSL_free(ssl);
                nodelink_out_fail(o, "cannot start TLS with node %s: out of memory", o->node);
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
static void out_dial(struct out *o)
{
        const struct timeval now = { 0, 0 };
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

/* Connects, at once or, after sessions that ended unanswered, once their
 * backoff has passed. */
static void out_connect(struct out *o)
{
        o->state = OUT_CONNECTING;
        if (o->unanswered < 2) {
                out_dial(o);
                return;
        }
        /* Why this is safe: a node that says goodbye, closes or fails its
         * sessions before answering anything costs its callers one session
         * (one handshake on this loop) per backoff, not a loop
         * (NODELINK_BACKOFF_MS). */
        unsigned k = o->unanswered - 2;
        uint64_t ms = k > 10 ? NODELINK_BACKOFF_MAX_MS : (uint64_t)NODELINK_BACKOFF_MS << k;
        o->backoff = true;
        timer_arm_ms(o->deadline, ms < NODELINK_BACKOFF_MAX_MS ? ms : NODELINK_BACKOFF_MAX_MS);
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
        e = nodelink_frame_out_ok(&control__request__descriptor, o->staged.buf + end + WIRE_HEADER_SIZE,
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
        if (!node || !gadget_name_ok(node) || nodelink_parse_addr(addr, false, &sa, &salen) < 0)
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
        /* Where its frame starts among the session's bytes: a failure
         * tells whether any of it left (nodelink_out_fail). */
        uint64_t start = o->state == OUT_READY ? o->queued : o->staged.end - o->staged.start;
        size_t sent = 0;
        e = o->state == OUT_READY ? conn_send_counted(o->conn, &req->base, &sent) : stage(o, req);
        if (e < 0)
                goto out;
        o->queued += sent;
        *s = (struct nodelink_send){ .out = o, .list = &o->sends, .id = req->id, .start = start,
                                     .sent_ms = monotime_ms(), .done = done, .arg = arg };
        TAILQ_INSERT_TAIL(&o->sends, s, link);
        o->n_sends++;
        if (o->state == OUT_IDLE)
                out_connect(o);
        *handle = s;
        return 0;
out:
        free(s);
        if (o->state == OUT_IDLE && o->n_sends == 0)
                nodelink_out_free(o);
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

void nodelink_abandon(struct nodelink_send *s)
{
        struct out *o = s ? s->out : NULL;
        bool silent = o && o->state == OUT_READY && o->heard_ms < s->sent_ms;
        nodelink_cancel(s);
        if (!silent)
                return;
        /* Why abortive: a close would let the kernel go on sending what it
         * holds (retransmitting through the cut until it heals); SO_LINGER 0
         * discards it and resets the connection. What the node already read
         * may have run, and its sends say so. */
        int fd = o->bev ? bufferevent_getfd(o->bev) : -1;
        struct linger now = { .l_onoff = 1, .l_linger = 0 };
        if (fd >= 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
        nodelink_out_fail(o, "no answer in time and nothing heard from node %s since: the link looks cut, and "
                          "its session was reset", o->node);
}
