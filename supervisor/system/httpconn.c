/* httpconn: the connections of one of gadgetd's evhttp servers and what
 * they may cost (httpconn.h). */
#include "httpconn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "listener.h"
#include "log.h"
#include "monotime.h"
#include "secret_file.h"
#include "timer.h"

#define TOKEN_MIN 16
#define TOKEN_MAX 4096
#define SWEEP_MS 250             /* how often deadlines and closed connections are looked at */
#define BACKOFF_MS 500           /* listener paused after EMFILE and the like */

/* One line now, or counted into the window's summary line. */
static void refusal(struct httpconns *h, enum httpconn_refusal k, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void refusal(struct httpconns *h, enum httpconn_refusal k, const char *fmt, ...)
{
        char what[128];
        if (k == HTTPCONN_FULL)
                snprintf(what, sizeof what, "%s connections refused: %s reached", h->who, h->max_key);
        else
                snprintf(what, sizeof what, "%s connections closed: no request within %s", h->who, h->timeout_key);
        va_list ap;
        va_start(ap, fmt);
        ratelog_vwarn(&h->rl[k], monotime_ms(), NULL, what, fmt, ap);
        va_end(ap);
}

static struct httpconn *find(struct httpconns *h, struct evhttp_request *req)
{
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        for (size_t i = 0; evcon && i < h->n_conns; i++)
                if (h->conns[i].evcon == evcon)
                        return &h->conns[i];
        return NULL;
}

static void request_done(struct evhttp_request *req, void *arg)
{
        struct httpconn *c = find(arg, req);
        if (c && c->busy) {
                c->busy--;
                c->since_ms = monotime_ms();
                c->answered = true;
                c->req = NULL;
        }
}

void httpconn_request(struct httpconns *h, struct evhttp_request *req)
{
        struct httpconn *c = find(h, req);
        if (!c)
                return;
        c->busy++;
        c->req = req;
        evhttp_request_set_on_complete_cb(req, request_done, h);
        if (h->held)
                evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
}

void httpconn_authed(struct httpconns *h, struct evhttp_request *req)
{
        struct httpconn *c = find(h, req);
        if (c)
                c->authed = true;
}

static void pause_listener(struct httpconns *h)
{
        if (h->paused || !h->lev)
                return;
        h->paused = true;
        evconnlistener_disable(h->lev);
        h->refused[HTTPCONN_FULL]++;
        refusal(h, HTTPCONN_FULL, "%s: %u connections open (%s): not accepting more until some close", h->who,
                h->max_connections, h->max_key);
}

static void room_cb(evutil_socket_t fd, short what, void *arg)
{
        struct httpconns *h = arg;
        if (h->lev && h->paused && !h->held && h->n_conns < h->max_connections) {
                h->paused = false;
                evconnlistener_enable(h->lev);
        }
}

/* Accepts again once a connection is gone, from a timer of 0: evhttp
 * frees a connection's bufferevent, and so closes its fd, from a
 * finalizer that runs after this loop turn. Enabled at once, the listener
 * could accept the maximum again while as many closed ones still held
 * their fds (seen: 128 over the baseline under ASan, with 64 allowed). */
static void resume_if_room(struct httpconns *h)
{
        static const struct timeval now = { 0, 0 };
        if (h->paused && h->n_conns < h->max_connections && !evtimer_pending(h->ev_room, NULL))
                evtimer_add(h->ev_room, &now);
}

/* evhttp frees a connection: it no longer counts. */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
        struct httpconns *h = arg;
        for (size_t i = 0; i < h->n_conns; i++)
                if (h->conns[i].evcon == evcon) {
                        h->conns[i] = h->conns[--h->n_conns];
                        break;
                }
        if (h->closed)
                h->closed(h->arg, evcon);
        resume_if_room(h);
}

/* Ends a connection evhttp still holds: it reads end of file and frees it. */
static void cut(struct httpconn *c)
{
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
        c->cut = true;
}

/* evhttp's bufferevent for a new connection: ours, so it is counted.
 * evhttp makes the connection around it right after this returns; the
 * fresh event then finds that connection (the bufferevent's callback
 * argument) and asks evhttp to say when it frees it. Until then a
 * reference of ours keeps the bufferevent, in case evhttp gives up on it
 * at once. */
static struct bufferevent *new_conn(struct event_base *base, void *arg)
{
        struct httpconns *h = arg;
        if (h->n_conns == h->cap_conns) {
                size_t cap = h->cap_conns ? 2 * h->cap_conns : 64;
                struct httpconn *nc = realloc(h->conns, cap * sizeof *nc);
                if (!nc)
                        return NULL;
                h->conns = nc;
                h->cap_conns = cap;
        }
        struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (!bev)
                return NULL;
        bufferevent_incref(bev);
        /* Why this is safe: connections that never showed the token hold
         * at most half of the seats; past that, the oldest of them makes
         * room, so the token holder's next connection always finds one. */
        size_t unauthed = 0;
        struct httpconn *oldest = NULL;
        for (size_t i = 0; i < h->n_conns; i++) {
                struct httpconn *c = &h->conns[i];
                if (c->cut || c->refuse || c->authed || !c->evcon)
                        continue;
                unauthed++;
                if (!oldest || c->accepted_ms < oldest->accepted_ms)
                        oldest = c;
        }
        if (oldest && unauthed >= (h->max_connections + 1) / 2)
                cut(oldest);
        bool over = h->n_conns >= h->max_connections;
        h->conns[h->n_conns++] = (struct httpconn){ .bev = bev, .since_ms = monotime_ms(), .accepted_ms = monotime_ms(),
                                                        .refuse = over };
        if (h->n_conns >= h->max_connections)
                pause_listener(h);
        event_active(h->ev_fresh, EV_TIMEOUT, 0);
        return bev;
}

static void fresh_cb(evutil_socket_t fd, short what, void *arg)
{
        struct httpconns *h = arg;
        for (size_t i = 0; i < h->n_conns;) {
                struct httpconn *c = &h->conns[i];
                if (c->evcon) {
                        i++;
                        continue;
                }
                bufferevent_event_cb ecb;
                void *evcon;
                bufferevent_getcb(c->bev, NULL, NULL, &ecb, &evcon);
                bufferevent_decref(c->bev);
                if (!ecb || !evcon) {
                        h->conns[i] = h->conns[--h->n_conns]; /* evhttp gave up on it */
                        continue;
                }
                c->evcon = evcon;
                evhttp_connection_set_closecb(c->evcon, conn_closed, h);
                i++;
        }
        resume_if_room(h);
}


static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
        struct httpconns *h = arg;
        uint64_t now = monotime_ms();
        size_t late = 0;
        for (size_t i = 0; i < h->n_conns; i++) {
                struct httpconn *c = &h->conns[i];
                if (!c->evcon || c->cut)
                        continue;
                if (c->refuse) {
                        cut(c);
                } else if (!c->busy && now - c->since_ms >= h->header_timeout_ms) {
                        cut(c);
                        late++;
                } else if (!c->authed && now - c->accepted_ms >= h->header_timeout_ms) {
                        /* Why this is safe: a connection that only ever
                         * gets 401s holds its seat a header timeout, not for
                         * as long as it keeps asking. */
                        cut(c);
                        late++;
                }
        }
        h->refused[HTTPCONN_DEADLINE] += late;
        if (late)
                refusal(h, HTTPCONN_DEADLINE, "%s: closed %zu connection%s that sent no complete request "
                        "within %s=%llums", h->who, late, late == 1 ? "" : "s", h->timeout_key,
                        (unsigned long long)h->header_timeout_ms);
        for (int k = 0; k < HTTPCONN_N; k++)
                refusal(h, (enum httpconn_refusal)k, NULL);
        if (h->sweep)
                h->sweep(h->arg);
}

/* The listener's callback argument is evhttp's, so this knows only the
 * listener, named by its address; if the server is full when it wakes,
 * the next connection pauses it again. */
static void accept_error(struct evconnlistener *lev, void *arg)
{
        char who[160];
        listener_name(lev, who, sizeof who);
        listener_pause(lev, NULL, who, BACKOFF_MS);
}

int httpconn_setup(struct httpconns *h, struct event_base *base, struct evhttp *http,
                   struct evhttp_bound_socket *bound)
{
        h->http = http;
        h->lev = evhttp_bound_socket_get_listener(bound);
        h->ev_sweep = event_new(base, -1, EV_PERSIST, sweep_cb, h);
        h->ev_fresh = event_new(base, -1, 0, fresh_cb, h);
        h->ev_room = evtimer_new(base, room_cb, h);
        if (!h->lev || !h->ev_sweep || !h->ev_fresh || !h->ev_room || timer_arm_ms(h->ev_sweep, SWEEP_MS) < 0)
                return -ENOMEM;
        evconnlistener_set_error_cb(h->lev, accept_error);
        evhttp_set_bevcb(h->http, new_conn, h);
        return 0;
}

/* After evhttp_free: every connection is gone; references are left only
 * on connections the fresh event has not seen. */
void httpconn_free(struct httpconns *h)
{
        for (size_t i = 0; i < h->n_conns; i++)
                if (!h->conns[i].evcon)
                        bufferevent_decref(h->conns[i].bev);
        free(h->conns);
        h->conns = NULL;
        h->n_conns = 0;
        if (h->ev_sweep)
                event_free(h->ev_sweep);
        if (h->ev_fresh)
                event_free(h->ev_fresh);
        if (h->ev_room)
                event_free(h->ev_room);
        h->ev_sweep = h->ev_fresh = h->ev_room = NULL;
}

void httpconn_hold(struct httpconns *h, bool hold)
{
        h->held = hold;
        if (!h->lev)
                return;
        if (hold) {
                evconnlistener_disable(h->lev);
        } else if (!h->paused) {
                evconnlistener_enable(h->lev);
        } else {
                resume_if_room(h);
        }
        /* Why Connection: close on the answers under way: the client's next
         * request then goes on a new connection, which waits in the
         * backlog for the next image, never on one the exec closes. */
        for (size_t i = 0; hold && i < h->n_conns; i++)
                if (h->conns[i].req && h->conns[i].evcon)
                        evhttp_add_header(evhttp_request_get_output_headers(h->conns[i].req), "Connection",
                                          "close");
}

/* Bytes of c that evhttp has not made a request of yet (its buffer, and
 * the kernel's). */
static bool unread(const struct httpconn *c)
{
        int n = 0;
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        return evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 ||
               (fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0);
}

int httpconn_quiet(const struct httpconns *h, char *why, size_t len)
{
        for (size_t i = 0; i < h->n_conns; i++) {
                const struct httpconn *c = &h->conns[i];
                const char *busy = NULL;
                if (c->cut || c->refuse)
                        continue;
                if (c->busy)
                        busy = "a request is being answered";
                else if (unread(c))
                        busy = "a request is being read";
                else if (!c->answered)
                        busy = "a connection has not sent its first request";
                if (busy) {
                        snprintf(why, len, "%s: %s", h->who, busy);
                        return -EBUSY;
                }
        }
        return 0;
}

static bool token_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '~';
}

/* Reads the token: the file's content without trailing blanks. Why the
 * checks: read as every secret is (system/secret_file.h: no symlink
 * planted on the way, a regular file), not readable or writable by every
 * user, and characters that go unchanged into a header, a cookie and a
 * URL query. */
int httpconn_token_read(const char *path, const char *who, const char *key, char **out, size_t *out_len)
{
        char *buf = NULL;
        size_t n = 0;
        int e = secret_file_read(path, TOKEN_MAX + 64, SECRET_NOT_WORLD, NULL, &buf, &n);

        if (e == -EPERM) {
                log_msg(L_ERR, NULL, "%s: %s=%s is readable or writable by every user (chmod 600 it)", who, key,
                        path);
                return e;
        }
        if (e < 0 && e != -EFBIG) {
                log_msg(L_ERR, NULL, "%s: %s=%s: %s", who, key, path, secret_file_why(e));
                return e;
        }
        size_t len = n;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' || buf[len - 1] == '\t'))
                len--;
        bool ok = e == 0 && len >= TOKEN_MIN && len <= TOKEN_MAX;
        for (size_t i = 0; ok && i < len; i++)
                ok = token_char(buf[i]);
        if (!ok) {
                log_msg(L_ERR, NULL, "%s: %s=%s must hold one token of %d to %d characters "
                        "A-Z a-z 0-9 - _ . ~ (for example: openssl rand -hex 32)", who, key, path, TOKEN_MIN,
                        TOKEN_MAX);
                secret_file_free(buf, n);
                return -EINVAL;
        }
        buf[len] = '\0';
        *out = buf;
        *out_len = len;
        return 0;
}

/* Compares a secret with a candidate in time that depends only on the
 * secret's length, so a client cannot find the token byte by byte. */
bool httpconn_token_equal(const char *secret, size_t slen, const char *cand, size_t clen)
{
        unsigned char diff = slen != clen;
        for (size_t i = 0; i < slen; i++)
                diff |= (unsigned char)secret[i] ^ (unsigned char)(i < clen ? cand[i] : 0);
        return diff == 0;
}
