/* http: curl multi-socket driven by libevent. */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "curl_dl.h"
#include "fds.h"

struct http {
        CURLM *multi;
        struct event_base *base;
        struct event *timer;
};

struct transfer {
        http_done_fn *done;
        void *arg;
};

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
                struct transfer *t = NULL;
                curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&t);
                curl_multi_remove_handle(h->multi, easy);
                if (t) {
                        t->done(t->arg, easy, res);
                        free(t);
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
        struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
        return event_add(h->timer, &tv);
}

int http_new(struct event_base *base, struct http **out)
{
        struct http *h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->base = base;
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
        free(h);
}

int http_start(struct http *h, CURL *easy, http_done_fn *done, void *arg)
{
        struct transfer *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->done = done;
        t->arg = arg;
        curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
        if (curl_multi_add_handle(h->multi, easy) != CURLM_OK) {
                free(t);
                return -EIO;
        }
        return 0;
}
