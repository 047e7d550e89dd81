/* httpconn: what the clients of one of gadgetd's evhttp servers (the
 * gateway, the metrics endpoint) may cost it — how many connections are
 * open, how long each may take to send a request, half of the seats at
 * most for connections that never showed the token, and what the
 * listener does when gadgetd is out of file descriptors. evhttp accepts
 * and speaks HTTP; this counts its connections through the bufferevent
 * evhttp asks for (evhttp_set_bevcb) and closes the ones over their
 * budget. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/http.h>

#include "ratelog.h"

struct bufferevent;
struct evconnlistener;

/* One connection evhttp accepted. */
struct httpconn {
        struct bufferevent *bev;     /* evhttp's (ours referenced until evcon is known) */
        struct evhttp_connection *evcon; /* NULL until the fresh event has seen it */
        uint64_t since_ms;           /* accepted, or its last reply completed */
        uint64_t accepted_ms;        /* accepted: one that never shows the token is closed
                                      * the header timeout after it, however many 401s it got */
        bool authed;                 /* one of its requests carried a valid token */
        unsigned busy;               /* requests read and not yet answered */
        struct evhttp_request *req;  /* the one being answered (evhttp reads the next after), or NULL */
        bool answered;               /* a request of it was answered */
        bool refuse;                 /* over the maximum: closed at once */
        bool cut;                    /* shut down, evhttp will free it */
};

enum httpconn_refusal { HTTPCONN_FULL, HTTPCONN_DEADLINE, HTTPCONN_N };

/* The connections of one evhttp server: zeroed, then its fields in the
 * first group set before httpconn_setup. */
struct httpconns {
        const char *who;             /* "gateway", "metrics": the log lines' prefix */
        const char *max_key, *timeout_key; /* the settings' names, for the log lines */
        unsigned max_connections;    /* open at once; beyond, the listener waits */
        uint64_t header_timeout_ms;  /* from connect or the last answer to the next complete request */
        /* Called at each sweep (every 250 ms), for the owner's own
         * refusal windows; may be NULL. */
        void (*sweep)(void *arg);
        /* Called when evhttp frees a connection (its requests with it); may be NULL. */
        void (*closed)(void *arg, struct evhttp_connection *evcon);
        void *arg;

        struct evhttp *http;
        struct evconnlistener *lev;  /* evhttp's listener; NULL it before evhttp_free */
        struct event *ev_sweep, *ev_fresh, *ev_room;
        struct httpconn *conns;
        size_t n_conns, cap_conns;
        bool paused;                 /* listener off: the maximum open */
        bool held;                   /* gadgetctl daemon-reexec: not accepting, every answer closes */
        struct ratelog rl[HTTPCONN_N];
        uint64_t refused[HTTPCONN_N]; /* connections refused over the maximum, closed at the deadline */
};

/* Counts http's connections (bevcb) on bound's listener. 0 or -ENOMEM. */
int httpconn_setup(struct httpconns *h, struct event_base *base, struct evhttp *http,
                   struct evhttp_bound_socket *bound);
/* After evhttp_free: every connection is gone. */
void httpconn_free(struct httpconns *h);
/* A request was read on its connection: it is busy until answered. */
void httpconn_request(struct httpconns *h, struct evhttp_request *req);
/* req carried a valid token: its connection keeps its seat while in use. */
void httpconn_authed(struct httpconns *h, struct evhttp_request *req);
/* gadgetctl daemon-reexec: no new connection is accepted, and every
 * answer from now on closes its connection; false undoes it. */
void httpconn_hold(struct httpconns *h, bool hold);
/* Whether no request is read and unanswered, none half read, and no
 * connection accepted has not sent its first request. 0, or -EBUSY with
 * why ("WHO: ..."). */
int httpconn_quiet(const struct httpconns *h, char *why, size_t len);

/* Reads a bearer token from path: the file's content without trailing
 * blanks, 16 to 4096 characters that go unchanged into a header, a cookie
 * and a URL query. Why the checks: read as every secret is
 * (system/secret_file.h: no symlink planted on the way, a regular file),
 * not readable or writable by every user. Errors are logged, prefixed by
 * who and naming the setting key. 0 or -errno; *out is the caller's (free after explicit_bzero). */
int httpconn_token_read(const char *path, const char *who, const char *key, char **out, size_t *out_len);
/* Compares a secret with a candidate in time that depends only on the
 * secret's length, so a client cannot find the token byte by byte. */
bool httpconn_token_equal(const char *secret, size_t slen, const char *cand, size_t clen);
