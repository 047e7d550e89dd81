/* http: curl multi-socket driven by libevent, and the budget of requests
 * in flight. */
#include "http.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "system/curl_dl.h"
#include "system/fds.h"
#include "system/log.h"
#include "system/timer.h"

/* Refusals are logged at the first one, then at most once per window
 * per binding (and for the total), and what is left when the burst ends. */
#define HTTP_LOG_WINDOW_S 10
/* Idle connections libcurl keeps for reuse. */
#define HTTP_MAX_IDLE_CONNECTIONS 32
/* After a burst of at least this many requests in flight, the heap is
 * trimmed once none is left, so gadgetd's RSS comes back. */
#define HTTP_TRIM_AFTER 8

/* The requests in flight of one gadget's binding; exists while n > 0. */
struct http_owner {
        char gadget[72], binding[72];
        unsigned n, max;
        unsigned long long refused;   /* since last logged */
        time_t logged;                /* when refusals were last logged */
        LIST_ENTRY(http_owner) link;
};

struct http_slot {
        struct http_owner *owner;
        http_done_fn *done;
        void *arg;
};

struct http {
        CURLM *multi;
        struct event_base *base;
        struct event *timer;
        unsigned max_total, n, peak;
        unsigned long long refused;   /* over max_total, since last logged */
        time_t logged;
        LIST_HEAD(, http_owner) owners;
};

static time_t now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return ts.tv_sec;
}

/* Whether refusals counted since *logged are due for a log line: the
 * first of a burst is, then one line per window sums up the rest. */
static bool log_due(time_t *logged)
{
        time_t t = now_s();
        if (*logged == 0 || t - *logged >= HTTP_LOG_WINDOW_S) {
                *logged = t;
                return true;
        }
        return false;
}

static void owner_log(struct http_owner *o)
{
        log_msg(L_WARN, o->gadget, "binding %s: %llu HTTP request%s answered busy (CallsMax=%u in flight)",
                o->binding, o->refused, o->refused == 1 ? "" : "s", o->max);
        o->refused = 0;
}

static void total_log(struct http *h, const char *gadget)
{
        log_msg(L_WARN, gadget, "%llu HTTP request%s answered busy (HTTPRequestsMax=%u in flight for all gadgets)",
                h->refused, h->refused == 1 ? "" : "s", h->max_total);
        h->refused = 0;
}

static struct http_owner *owner_find(struct http *h, const char *gadget, const char *binding)
{
        struct http_owner *o;
        LIST_FOREACH(o, &h->owners, link)
                if (strcmp(o->gadget, gadget) == 0 && strcmp(o->binding, binding) == 0)
                        return o;
        return NULL;
}

int http_slot_take(struct http *h, const char *gadget, const char *binding, unsigned binding_max,
                   struct http_slot **out)
{
        /* Why this is safe: a gadget's requests beyond its binding's budget,
         * or beyond gadgetd's total, are refused here, before a curl handle,
         * socket or buffer exists for them, so a flood of requests costs
         * gadgetd one answer each and never a transfer. */
        struct http_owner *o = owner_find(h, gadget, binding);
        if (o && o->n >= binding_max) {
                o->max = binding_max;
                o->refused++;
                if (log_due(&o->logged))
                        owner_log(o);
                return -EBUSY;
        }
        if (h->n >= h->max_total) {
                h->refused++;
                if (log_due(&h->logged))
                        total_log(h, gadget);
                return -EAGAIN;
        }
        struct http_slot *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        if (!o) {
                if (!(o = calloc(1, sizeof *o))) {
                        free(s);
                        return -ENOMEM;
                }
                snprintf(o->gadget, sizeof o->gadget, "%s", gadget);
                snprintf(o->binding, sizeof o->binding, "%s", binding);
                LIST_INSERT_HEAD(&h->owners, o, link);
        }
        o->max = binding_max;
        o->n++;
        s->owner = o;
        if (++h->n > h->peak)
                h->peak = h->n;
        *out = s;
        return 0;
}

void http_slot_put(struct http *h, struct http_slot *s)
{
        if (!s)
                return;
        struct http_owner *o = s->owner;
        free(s);
        h->n--;
        if (--o->n == 0) {
                if (o->refused)
                        owner_log(o);
                LIST_REMOVE(o, link);
                free(o);
        }
        if (h->n == 0) {
                if (h->refused)
                        total_log(h, NULL);
                /* What a burst of transfers allocated goes back to the
                 * system (glibc keeps freed heap otherwise). */
                if (h->peak >= HTTP_TRIM_AFTER)
                        malloc_trim(0);
                h->peak = 0;
        }
}

/* Hands every finished transfer to its owner. */
static void finish_done(struct http *h)
{
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(h->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                CURL *easy = m->easy_handle;
                CURLcode res = m->data.result;
                struct http_slot *s = NULL;
                curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
                curl_multi_remove_handle(h->multi, easy);
                if (s) {
                        s->done(s->arg, easy, res);
                        http_slot_put(h, s);
                }
        }
}

static void socket_event(evutil_socket_t fd, short what, void *arg)
{
        struct http *h = arg;
        int running;
        int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
        curl_multi_socket_action(h->multi, fd, flags, &running);
        finish_done(h);
}

static void timer_event(evutil_socket_t fd, short what, void *arg)
{
        struct http *h = arg;
        int running;
        curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        finish_done(h);
}

/* curl says which events a socket needs; one libevent event per socket. */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        struct http *h = userp;
        struct event *ev = socketp;
        if (what == CURL_POLL_REMOVE) {
                if (ev)
                        event_free(ev);
                curl_multi_assign(h->multi, s, NULL);
                return 0;
        }
        short kind = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
        if (ev) {
                event_del(ev);
                event_assign(ev, h->base, s, kind, socket_event, h);
        } else {
                ev = event_new(h->base, s, kind, socket_event, h);
                if (!ev)
                        return -1;
                curl_multi_assign(h->multi, s, ev);
        }
        return event_add(ev, NULL);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct http *h = userp;
        if (timeout_ms < 0)
                return event_del(h->timer);
        return timer_arm_ms(h->timer, (uint64_t)timeout_ms);
}

int http_new(struct event_base *base, unsigned max_total, struct http **out)
{
        struct http *h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->base = base;
        LIST_INIT(&h->owners);
        h->max_total = max_total ? max_total : HTTP_MAX_TOTAL_DEFAULT;
        h->timer = evtimer_new(base, timer_event, h);
        if (!h->timer) {
                http_free(h);
                return -ENOMEM;
        }
        *out = h;
        return 0;
}

int http_ready(struct http *h, char *err, size_t errlen)
{
        if (h->multi)
                return 0;
        int e = curl_dl_load(err, errlen);
        if (e < 0)
                return e;
        if (!(h->multi = curl_multi_init())) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        fds_cloexec_all(); /* libcurl's internal socketpair comes without O_CLOEXEC */
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
        curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
        /* libcurl's own bounds, beside the slots: never more connections
         * than requests allowed in flight, and a small cache of idle ones
         * (by default it keeps four per handle ever added). */
        curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)h->max_total);
        curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)HTTP_MAX_IDLE_CONNECTIONS);
        return 0;
}

void http_free(struct http *h)
{
        if (!h)
                return;
        if (h->multi)
                curl_multi_cleanup(h->multi);
        if (h->timer)
                event_free(h->timer);
        struct http_owner *o;
        while ((o = LIST_FIRST(&h->owners))) {
                LIST_REMOVE(o, link);
                free(o);
        }
        free(h);
}

void http_abandon(struct http *h, CURL *easy)
{
        struct http_slot *s = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
        curl_multi_remove_handle(h->multi, easy);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        if (s)
                http_slot_put(h, s);
}

int http_start(struct http *h, struct http_slot *s, CURL *easy, http_done_fn *done, void *arg)
{
        s->done = done;
        s->arg = arg;
        curl_easy_setopt(easy, CURLOPT_PRIVATE, s);
        if (curl_multi_add_handle(h->multi, easy) != CURLM_OK)
                return -EIO;
        return 0;
}
