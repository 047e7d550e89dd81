/* gateway_conn: what the gateway's connections may cost gadgetd — how
 * many are open, how long each may take to send a request, and what the
 * listener does when gadgetd is out of file descriptors. evhttp accepts
 * and speaks HTTP; this file counts its connections through the
 * bufferevent evhttp asks us for (evhttp_set_bevcb) and closes the ones
 * over their budget. */
#include "gateway_int.h"

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

#include "core/core.h"
#include "system/listener.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"

#define SWEEP_MS 250             /* how often deadlines and closed connections are looked at */
#define BACKOFF_MS 500           /* listener paused after EMFILE and the like */

/* One line now, or counted into the window's summary line. */
void gateway_refusal(struct gateway *g, enum gateway_refusal k, const char *fmt, ...)
{
        static const char *const what[GW_REF_N] = {
                [GW_REF_TOKEN] = "gateway requests refused without a valid token",
                [GW_REF_FOREIGN] = "gateway requests refused from another origin or host",
                [GW_REF_FULL] = "gateway connections refused: MaxConnections reached",
                [GW_REF_DEADLINE] = "gateway connections closed: no request within HeaderTimeout",
        };
        va_list ap;
        va_start(ap, fmt);
        ratelog_vwarn(&g->rl[k], monotime_ms(), NULL, what[k], fmt, ap);
        va_end(ap);
}

static struct gateway_conn *find(struct gateway *g, struct evhttp_request *req)
{
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        for (size_t i = 0; evcon && i < g->n_conns; i++)
                if (g->conns[i].evcon == evcon)
                        return &g->conns[i];
        return NULL;
}

static void request_done(struct evhttp_request *req, void *arg)
{
        struct gateway_conn *c = find(arg, req);
        if (c && c->busy) {
                c->busy--;
                c->since_ms = monotime_ms();
                c->answered = true;
                c->req = NULL;
        }
}

void gateway_conn_request(struct gateway *g, struct evhttp_request *req)
{
        struct gateway_conn *c = find(g, req);
        if (!c)
                return;
        c->busy++;
        c->req = req;
        evhttp_request_set_on_complete_cb(req, request_done, g);
        if (g->held)
                evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
}

void gateway_conn_authed(struct gateway *g, struct evhttp_request *req)
{
        struct gateway_conn *c = find(g, req);
        if (c)
                c->authed = true;
}

static void pause_listener(struct gateway *g)
{
        if (g->paused || !g->lev)
                return;
        g->paused = true;
        evconnlistener_disable(g->lev);
        gateway_refusal(g, GW_REF_FULL, "gateway: %u connections open (MaxConnections): not accepting "
                        "more until some close", g->lim.max_connections);
}

static void room_cb(evutil_socket_t fd, short what, void *arg)
{
        struct gateway *g = arg;
        if (g->lev && g->paused && !g->held && g->n_conns < g->lim.max_connections) {
                g->paused = false;
                evconnlistener_enable(g->lev);
        }
}

/* Accepts again once a connection is gone, from a timer of 0: evhttp
 * frees a connection's bufferevent, and so closes its fd, from a
 * finalizer that runs after this loop turn. Enabled at once, the listener
 * could accept MaxConnections more while as many closed ones still held
 * their fds (seen: 128 over the baseline under ASan, with 64 allowed). */
static void resume_if_room(struct gateway *g)
{
        static const struct timeval now = { 0, 0 };
        if (g->paused && g->n_conns < g->lim.max_connections && !evtimer_pending(g->ev_room, NULL))
                evtimer_add(g->ev_room, &now);
}

/* evhttp frees a connection: it no longer counts. */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
        struct gateway *g = arg;
        for (size_t i = 0; i < g->n_conns; i++)
                if (g->conns[i].evcon == evcon) {
                        g->conns[i] = g->conns[--g->n_conns];
                        break;
                }
        resume_if_room(g);
}

/* Ends a connection evhttp still holds: it reads end of file and frees it. */
static void cut(struct gateway_conn *c)
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
        struct gateway *g = arg;
        if (g->n_conns == g->cap_conns) {
                size_t cap = g->cap_conns ? 2 * g->cap_conns : 64;
                struct gateway_conn *nc = realloc(g->conns, cap * sizeof *nc);
                if (!nc)
                        return NULL;
                g->conns = nc;
                g->cap_conns = cap;
        }
        struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (!bev)
                return NULL;
        bufferevent_incref(bev);
        /* Why this is safe: connections that never showed the token hold
         * at most half of the seats; past that, the oldest of them makes
         * room, so the token holder's next connection always finds one. */
        size_t unauthed = 0;
        struct gateway_conn *oldest = NULL;
        for (size_t i = 0; i < g->n_conns; i++) {
                struct gateway_conn *c = &g->conns[i];
                if (c->cut || c->refuse || c->authed || !c->evcon)
                        continue;
                unauthed++;
                if (!oldest || c->accepted_ms < oldest->accepted_ms)
                        oldest = c;
        }
        if (oldest && unauthed >= (g->lim.max_connections + 1) / 2)
                cut(oldest);
        bool over = g->n_conns >= g->lim.max_connections;
        g->conns[g->n_conns++] = (struct gateway_conn){ .bev = bev, .since_ms = monotime_ms(), .accepted_ms = monotime_ms(),
                                                        .refuse = over };
        if (g->n_conns >= g->lim.max_connections)
                pause_listener(g);
        event_active(g->ev_fresh, EV_TIMEOUT, 0);
        return bev;
}

static void fresh_cb(evutil_socket_t fd, short what, void *arg)
{
        struct gateway *g = arg;
        for (size_t i = 0; i < g->n_conns;) {
                struct gateway_conn *c = &g->conns[i];
                if (c->evcon) {
                        i++;
                        continue;
                }
                bufferevent_event_cb ecb;
                void *evcon;
                bufferevent_getcb(c->bev, NULL, NULL, &ecb, &evcon);
                bufferevent_decref(c->bev);
                if (!ecb || !evcon) {
                        g->conns[i] = g->conns[--g->n_conns]; /* evhttp gave up on it */
                        continue;
                }
                c->evcon = evcon;
                evhttp_connection_set_closecb(c->evcon, conn_closed, g);
                i++;
        }
        resume_if_room(g);
}


static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
        struct gateway *g = arg;
        uint64_t now = monotime_ms();
        size_t late = 0;
        for (size_t i = 0; i < g->n_conns; i++) {
                struct gateway_conn *c = &g->conns[i];
                if (!c->evcon || c->cut)
                        continue;
                if (c->refuse) {
                        cut(c);
                } else if (!c->busy && now - c->since_ms >= g->lim.header_timeout_ms) {
                        cut(c);
                        late++;
                } else if (!c->authed && now - c->accepted_ms >= g->lim.header_timeout_ms) {
                        /* Why this is safe: a connection that only ever
                         * gets 401s holds its seat HeaderTimeout, not for
                         * as long as it keeps asking. */
                        cut(c);
                        late++;
                }
        }
        if (late)
                gateway_refusal(g, GW_REF_DEADLINE, "gateway: closed %zu connection%s that sent no complete "
                                "request within HeaderTimeout=%llums", late, late == 1 ? "" : "s",
                                (unsigned long long)g->lim.header_timeout_ms);
        for (int k = 0; k < GW_REF_N; k++)
                gateway_refusal(g, (enum gateway_refusal)k, NULL);
}

/* The listener's callback argument is evhttp's, so this knows only the
 * listener; if the gateway is full when it wakes, the next connection
 * pauses it again. */
static void accept_error(struct evconnlistener *lev, void *arg)
{
        listener_pause(lev, NULL, "gateway", BACKOFF_MS);
}

int gateway_conn_setup(struct gateway *g, struct evhttp_bound_socket *bound)
{
        g->lev = evhttp_bound_socket_get_listener(bound);
        g->ev_sweep = event_new(core_base(g->core), -1, EV_PERSIST, sweep_cb, g);
        g->ev_fresh = event_new(core_base(g->core), -1, 0, fresh_cb, g);
        g->ev_room = evtimer_new(core_base(g->core), room_cb, g);
        if (!g->lev || !g->ev_sweep || !g->ev_fresh || !g->ev_room || timer_arm_ms(g->ev_sweep, SWEEP_MS) < 0)
                return -ENOMEM;
        evconnlistener_set_error_cb(g->lev, accept_error);
        evhttp_set_bevcb(g->http, new_conn, g);
        return 0;
}

/* After evhttp_free: every connection is gone; references are left only
 * on connections the fresh event has not seen. */
void gateway_conn_free(struct gateway *g)
{
        for (size_t i = 0; i < g->n_conns; i++)
                if (!g->conns[i].evcon)
                        bufferevent_decref(g->conns[i].bev);
        free(g->conns);
        g->conns = NULL;
        g->n_conns = 0;
        if (g->ev_sweep)
                event_free(g->ev_sweep);
        if (g->ev_fresh)
                event_free(g->ev_fresh);
        if (g->ev_room)
                event_free(g->ev_room);
        g->ev_sweep = g->ev_fresh = g->ev_room = NULL;
}

void gateway_reexec_hold(struct gateway *g, bool hold)
{
        g->held = hold;
        if (!g->lev)
                return;
        if (hold) {
                evconnlistener_disable(g->lev);
        } else if (!g->paused) {
                evconnlistener_enable(g->lev);
        } else {
                resume_if_room(g);
        }
        /* Why Connection: close on the answers under way: the client's next
         * request then goes on a new connection, which waits in the
         * backlog for the next image, never on one the exec closes. */
        for (size_t i = 0; hold && i < g->n_conns; i++)
                if (g->conns[i].req && g->conns[i].evcon)
                        evhttp_add_header(evhttp_request_get_output_headers(g->conns[i].req), "Connection",
                                          "close");
}

/* Bytes of c that evhttp has not made a request of yet (its buffer, and
 * the kernel's). */
static bool unread(const struct gateway_conn *c)
{
        int n = 0;
        evutil_socket_t fd = bufferevent_getfd(c->bev);
        return evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 ||
               (fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0);
}

int gateway_reexec_quiet(const struct gateway *g, char *why, size_t len)
{
        for (size_t i = 0; i < g->n_conns; i++) {
                const struct gateway_conn *c = &g->conns[i];
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
                        snprintf(why, len, "gateway: %s", busy);
                        return -EBUSY;
                }
        }
        return 0;
}

void gateway_reexec_handoff(const struct gateway *g, struct gateway_handoff *h)
{
        h->fd = g->fd;
        memcpy(h->session, g->session, sizeof h->session);
}
