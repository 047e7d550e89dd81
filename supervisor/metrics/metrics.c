/* metrics: the endpoint's listener, token, requests and the turns of a
 * scrape (metrics.h). */
#include "metrics_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "system/audit.h"
#include "system/httpconn.h"
#include "system/listener.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"
#include "core/denials.h"

#define ROWS_PER_TURN 64         /* gadgets read (their cgroup files) in one loop turn */
#define ROWS_PER_CHUNK 256       /* gadgets (or families of gadgetd's own) written in one chunk, */
#define BYTES_PER_CHUNK 16384    /* and about so many bytes at most */
#define LAG_PROBE_MS 100
#define HEADERS_MAX 8192

struct metrics {
        struct metrics_env env;
        struct evhttp *http;
        struct httpconns conns;
        char *token;                 /* NULL: none asked */
        size_t token_len;
        char *unix_path;             /* the socket's path, removed at the end */
        struct event *ev_lag;
        uint64_t lag_due_us;
        struct metrics_lag lag;
        LIST_HEAD(, metrics_scrape) scrapes;
};

int metrics_parse_listen(const char *s, char *why, size_t whylen)
{
        struct sockaddr_storage sa;
        socklen_t len;
        if (s[0] == '/') {
                if (strlen(s) >= sizeof ((struct sockaddr_un *)0)->sun_path) {
                        snprintf(why, whylen, "MetricsListen=\"%.64s...\": a Unix socket's path is at most %zu bytes", s,
                                 sizeof ((struct sockaddr_un *)0)->sun_path - 1);
                        return -EINVAL;
                }
                return 0;
        }
        int e = listener_parse_loopback(s, &sa, &len);
        if (e == -EADDRNOTAVAIL)
                /* Why loopback only: plain HTTP carries the token in clear. */
                snprintf(why, whylen, "MetricsListen=\"%.64s\": the metrics endpoint speaks plain HTTP and listens "
                         "on loopback addresses (127.0.0.0/8, [::1]) or a Unix socket only", s);
        else if (e < 0)
                snprintf(why, whylen, "MetricsListen=\"%.64s\" is not a numeric ADDRESS:PORT (127.0.0.1:9464, "
                         "[::1]:9464) or a Unix socket's absolute path", s);
        return e < 0 ? -EINVAL : 0;
}

/* Whether got (a bound socket's address) is where want says to listen:
 * the same path, or the same address and port (any port for port 0). */
static bool same_place(const struct sockaddr_storage *want, const struct sockaddr_storage *got)
{
        if (want->ss_family == AF_UNIX)
                return strncmp(((const struct sockaddr_un *)want)->sun_path, ((const struct sockaddr_un *)got)->sun_path,
                               sizeof ((struct sockaddr_un *)0)->sun_path) == 0;
        if (want->ss_family == AF_INET) {
                const struct sockaddr_in *w = (const void *)want, *g = (const void *)got;
                return w->sin_addr.s_addr == g->sin_addr.s_addr && (!w->sin_port || w->sin_port == g->sin_port);
        }
        const struct sockaddr_in6 *w = (const void *)want, *g = (const void *)got;
        return memcmp(&w->sin6_addr, &g->sin6_addr, sizeof w->sin6_addr) == 0 &&
               (!w->sin6_port || w->sin6_port == g->sin6_port);
}

/* The previous image's listening socket (gadgetctl daemon-reexec, the fd
 * store), if it is one on sa: its address stays bound, and a scraper that
 * connects meanwhile waits in its backlog instead of being refused. A Unix
 * socket's file is left as it is. Another socket is closed (-EINVAL): the
 * caller listens afresh. */
static int adopt_on(const struct sockaddr_storage *sa, const char *s, int fd, int *out)
{
        struct sockaddr_storage got;
        socklen_t glen = sizeof got;
        memset(&got, 0, sizeof got);
        if (listener_adopt(fd, sa->ss_family) < 0 || getsockname(fd, (struct sockaddr *)&got, &glen) < 0 ||
            !same_place(sa, &got)) {
                log_msg(L_WARN, NULL, "metrics: the listening socket handed on (fd %d) is not one on %s: listening "
                        "again", fd, s);
                close(fd);
                return -EINVAL;
        }
        *out = fd;
        return 0;
}

/* The listening socket, close-on-exec from birth, or the one handed on
 * (adopt_fd >= 0) if it is one on s (*kept then). A Unix socket's file is
 * made again (a stale one from a previous run removed), mode 0666 with a
 * token (the token guards it), else 0600 (root only). */
static int listen_on(struct metrics *m, const char *s, int adopt_fd, int *out, bool *kept)
{
        struct sockaddr_storage sa;
        socklen_t len;
        int one = 1;
        memset(&sa, 0, sizeof sa);
        if (s[0] == '/') {
                struct sockaddr_un *un = (struct sockaddr_un *)&sa;
                un->sun_family = AF_UNIX;
                snprintf(un->sun_path, sizeof un->sun_path, "%s", s);
                len = sizeof *un;
                if (!(m->unix_path = strdup(s))) {
                        if (adopt_fd >= 0)
                                close(adopt_fd);
                        return -ENOMEM;
                }
        } else if (listener_parse_loopback(s, &sa, &len) < 0) {
                if (adopt_fd >= 0)
                        close(adopt_fd);
                return -EINVAL;
        }
        if (adopt_fd >= 0 && adopt_on(&sa, s, adopt_fd, out) == 0) {
                *kept = true;
                return 0;
        }
        struct stat st;
        if (m->unix_path && lstat(s, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(s);
        int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || (sa.ss_family != AF_UNIX && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) ||
            bind(fd, (struct sockaddr *)&sa, len) < 0 ||
            (m->unix_path && chmod(m->unix_path, m->token ? 0666 : 0600) < 0) || listen(fd, 64) < 0) {
                int e = -errno;
                log_msg(L_ERR, NULL, "metrics: cannot listen on %s: %s", s, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return e;
        }
        *out = fd;
        return 0;
}

/* The loop's lag: how late the probe fired against when it was due. */
static void lag_cb(evutil_socket_t fd, short what, void *arg)
{
        struct metrics *m = arg;
        uint64_t now = monotime_us(), late = now > m->lag_due_us ? now - m->lag_due_us : 0;
        size_t i = 0;
        while (i < METRICS_LAG_BUCKETS - 1 && (double)late / 1e6 > metrics_lag_bounds[i])
                i++;
        m->lag.buckets[i]++;
        m->lag.count++;
        m->lag.sum_us += late;
        m->lag_due_us = now + LAG_PROBE_MS * 1000;
        timer_arm_ms(m->ev_lag, LAG_PROBE_MS);
}

static void scrape_free(struct metrics_scrape *s)
{
        LIST_REMOVE(s, link);
        free(s->names);
        for (size_t i = 0; i < s->n_rows; i++) {
                unit_stats_clear(&s->rows[i].stats);
                free(s->rows[i].bstats);
                free(s->rows[i].tails);
                free(s->rows[i].denials);
        }
        free(s->rows);
        if (s->ev_turn)
                event_free(s->ev_turn);
        free(s);
}

/* A connection is gone, with its request: a scrape on it ends here. */
static void conn_gone(void *arg, struct evhttp_connection *evcon)
{
        struct metrics *m = arg;
        struct metrics_scrape *s, *next;
        for (s = LIST_FIRST(&m->scrapes); s; s = next) {
                next = LIST_NEXT(s, link);
                if (s->evcon != evcon)
                        continue;
                /* Why: evhttp detaches a request it was answering when its
                 * connection fails (EOF, timeout) and leaves it to be
                 * ended; one still attached is freed with the connection. */
                if (!evhttp_request_get_connection(s->req))
                        evhttp_send_reply_end(s->req);
                scrape_free(s);
        }
}

/* The cluster's numbers, if gadgetd shares a store: the nodes as last read
 * (up: seen within KVPG_NODE_DOWN_MS), bounded; calls between nodes; the
 * store's latency. */
static void read_cluster(const struct core *core, struct metrics_cluster *c)
{
        const struct kvpg_node *nodes;
        const char *self;
        uint64_t since;
        size_t n = core_nodes(core, &nodes, &self, &since);
        const struct store_latency *l = core_store_latency(core);
        if (!self || !l)
                return;
        c->on = true;
        for (size_t i = 0; i < n; i++) {
                bool up = nodes[i].age_ms + since <= KVPG_NODE_DOWN_MS;
                /* Why bounded: a label value each, from rows other nodes write. */
                if (c->n_nodes < METRICS_NODES_MAX && gadget_name_ok(nodes[i].name)) {
                        snprintf(c->nodes[c->n_nodes].name, sizeof c->nodes[c->n_nodes].name, "%s", nodes[i].name);
                        c->nodes[c->n_nodes++].up = up;
                } else {
                        c->other[up]++;
                }
        }
        c->forwarded = *core_forwarded(core);
        c->latency = *l;
}

/* gadgetd's own numbers: resident memory and open fds, read once a scrape. */
static void read_self(struct metrics_scrape *s)
{
        unsigned long size, resident;
        FILE *f = fopen("/proc/self/statm", "re");
        if (f) {
                if (fscanf(f, "%lu %lu", &size, &resident) == 2)
                        s->rss = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
                fclose(f);
        }
        DIR *d = opendir("/proc/self/fd");
        if (d) {
                for (struct dirent *e; (e = readdir(d));)
                        s->fds += e->d_name[0] != '.';
                s->fds--; /* the directory's own */
                closedir(d);
        }
        if (s->m->env.self)
                s->m->env.self(s->m->env.arg, &s->self);
        s->self.refused[METRICS_BUDGET_METRICS_CONNECTIONS] = s->m->conns.refused[HTTPCONN_FULL];
        s->self.refused[METRICS_BUDGET_METRICS_DEADLINE] = s->m->conns.refused[HTTPCONN_DEADLINE];
        s->lag = s->m->lag;
        s->audit_summarized = audit_summarized(core_audit(s->m->env.core));
        int last_error;
        s->audit_unwritten = audit_unwritten(core_audit(s->m->env.core), &last_error);
        kvdb_nowait_counts(&s->kv_loop);
        read_cluster(s->m->env.core, &s->cluster);
}

/* Reads up to ROWS_PER_TURN gadgets into rows: true when all are read. A
 * gadget unloaded meanwhile is left out. */
static bool read_rows(struct metrics_scrape *s)
{
        for (size_t k = 0; k < ROWS_PER_TURN && s->next < s->n_names; k++, s->next++) {
                const char *name = s->names + s->names_at;
                s->names_at += strlen(name) + 1;
                struct unit *u = core_find(s->m->env.core, name);
                if (!u)
                        continue;
                struct unit_info info;
                struct metrics_row *r = &s->rows[s->n_rows];
                unit_info(u, &info);
                *r = (struct metrics_row){ .state = info.state, .memory_bytes = info.memory_bytes, .tasks = info.tasks,
                                           .cpu_usec = info.cpu_usec, .approvals = unit_approvals_waiting(u),
                                           .memory_peak = info.memory_peak, .leased = unit_leased(u) };
                memcpy(r->limit_hits, info.limit_hits, sizeof r->limit_hits);
                snprintf(r->name, sizeof r->name, "%s", info.name);
                const struct gadget_bindings *b = unit_bindings(u);
                if (unit_stats_copy(unit_stats(u), &r->stats) < 0)
                        continue;
                unit_stats_phase(&r->stats, r->stats.phase, monotime_ms()); /* its time so far */
                if (b && b->n_stats && (r->bstats = malloc(b->n_stats * sizeof *r->bstats))) {
                        memcpy(r->bstats, b->stats, b->n_stats * sizeof *r->bstats);
                        r->n_bstats = b->n_stats;
                }
                if (info.n_tail_drops && (r->tails = calloc(info.n_tail_drops, sizeof *r->tails))) {
                        for (size_t i = 0; i < info.n_tail_drops; i++) {
                                snprintf(r->tails[i].binding, sizeof r->tails[i].binding, "%s",
                                         info.tail_drops[i].binding);
                                r->tails[i].dropped = info.tail_drops[i].dropped;
                        }
                        r->n_tails = info.n_tail_drops;
                }
                if (info.denials && info.denials->n &&
                    (r->denials = calloc(info.denials->n, sizeof *r->denials))) {
                        for (size_t i = 0; i < info.denials->n; i++)
                                r->denials[i] = (struct metrics_denial){ denial_call(&info.denials->d[i]),
                                                                         denial_answer(&info.denials->d[i]),
                                                                         info.denials->d[i].count };
                        r->n_denials = info.denials->n;
                }
                s->n_rows++;
        }
        return s->next == s->n_names;
}

static void write_chunk(struct metrics_scrape *s);

/* Runs s's next turn once the loop has looked at its I/O again. Why a
 * timer due now, not event_active: libevent runs an event activated from
 * a callback in the same pass over the active events, so a turn that
 * activated the next would read all 10,000 gadgets before any other
 * request or frame was seen (one 11 ms turn; bench/notes.md). */
static void next_turn(struct metrics_scrape *s)
{
        timer_arm_ms(s->ev_turn, 0);
}

static void written_cb(struct evhttp_connection *evcon, void *arg)
{
        write_chunk(arg);
}

/* One chunk of series; the next once it is written out (its callback),
 * or, if this slice wrote nothing (gadgets without a series of a family:
 * most have no calls yet), in the next loop turn: an empty chunk is never
 * written, so its callback would never come. */
static void write_chunk(struct metrics_scrape *s)
{
        struct evbuffer *b = evbuffer_new();
        if (!b) {
                evhttp_send_reply_end(s->req);
                scrape_free(s);
                return;
        }
        bool done = metrics_text_slice(s, b, ROWS_PER_CHUNK, BYTES_PER_CHUNK);
        if (done) {
                evhttp_send_reply_chunk(s->req, b);
                evbuffer_free(b);
                evhttp_send_reply_end(s->req);
                scrape_free(s);
                return;
        }
        if (evbuffer_get_length(b) == 0) {
                s->writing = true;
                next_turn(s);
        } else {
                evhttp_send_reply_chunk_with_cb(s->req, b, written_cb, s);
        }
        evbuffer_free(b);
}

/* A turn of reading gadgets; the writing starts once all are read. */
static void turn_cb(evutil_socket_t fd, short what, void *arg)
{
        struct metrics_scrape *s = arg;
        if (s->writing) {
                write_chunk(s);
                return;
        }
        if (!read_rows(s)) {
                next_turn(s);
                return;
        }
        read_self(s);
        struct evkeyvalq *h = evhttp_request_get_output_headers(s->req);
        evhttp_add_header(h, "Content-Type", s->openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                                            : "text/plain; version=0.0.4; charset=utf-8");
        evhttp_add_header(h, "Cache-Control", "no-store");
        evhttp_send_reply_start(s->req, 200, "OK");
        write_chunk(s);
}

static void send_text(struct evhttp_request *req, int status, const char *text)
{
        struct evbuffer *b = evbuffer_new();
        if (b)
                evbuffer_add_printf(b, "%s\n", text);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; charset=utf-8");
        evhttp_send_reply(req, status, NULL, b);
        if (b)
                evbuffer_free(b);
}

static bool authorized(const struct metrics *m, struct evhttp_request *req)
{
        const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        if (!m->token)
                return true;
        if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
                return false;
        const char *v = auth + 7 + strspn(auth + 7, " ");
        return httpconn_token_equal(m->token, m->token_len, v, strlen(v));
}

/* The names of every gadget now into s->names, one after another, in
 * one pass over the units (each a cache miss or two with 10,000 of them:
 * this turn is the scrape's longest), one allocation. 0 or -ENOMEM. */
static int names_take(struct metrics_scrape *s)
{
        size_t len = 0, cap = 4096;
        char *text = malloc(cap);
        for (struct unit *u = core_first(s->m->env.core); u && text; u = unit_next(u)) {
                const char *name = unit_name(u);
                size_t n = strlen(name) + 1;
                if (len + n > cap) {
                        char *more = realloc(text, cap *= 2);
                        if (!more)
                                free(text);
                        text = more;
                        if (!text)
                                break;
                }
                memcpy(text + len, name, n);
                len += n;
                s->n_names++;
        }
        s->names = text;
        return text ? 0 : -ENOMEM;
}

/* Starts a scrape: the gadgets' names now, read and written in turns. */
static void scrape_start(struct metrics *m, struct evhttp_request *req)
{
        const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
        struct metrics_scrape *s = calloc(1, sizeof *s);
        if (s)
                s->m = m;
        if (!s || names_take(s) < 0 || !(s->rows = calloc(s->n_names ? s->n_names : 1, sizeof *s->rows)) ||
            !(s->ev_turn = event_new(evhttp_connection_get_base(evhttp_request_get_connection(req)), -1, 0, turn_cb, s))) {
                if (s) {
                        free(s->names);
                        free(s->rows);
                }
                free(s);
                send_text(req, 503, "out of memory");
                return;
        }
        s->req = req;
        s->evcon = evhttp_request_get_connection(req);
        s->openmetrics = accept && strstr(accept, "application/openmetrics-text");
        LIST_INSERT_HEAD(&m->scrapes, s, link);
        next_turn(s);
}

static void on_request(struct evhttp_request *req, void *arg)
{
        struct metrics *m = arg;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        httpconn_request(&m->conns, req);
        if (!authorized(m, req)) {
                /* Why before routing: without the token nothing is told. */
                evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer realm=\"gadgetd\"");
                send_text(req, 401, "a valid token is needed: \"Authorization: Bearer TOKEN\"");
                return;
        }
        httpconn_authed(&m->conns, req);
        if (!path || strcmp(path, "/metrics") != 0) {
                send_text(req, 404, "the metrics are at /metrics");
                return;
        }
        if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
                send_text(req, 405, "use GET");
                return;
        }
        scrape_start(m, req);
}

int metrics_open(const struct metrics_env *env, const char *listen_str, const char *token_file, int adopt_fd,
                 struct metrics **out)
{
        struct metrics *m = calloc(1, sizeof *m);
        struct evhttp_bound_socket *bound;
        struct event_base *base = core_base(env->core);
        int fd = -1, e;
        bool kept = false;
        char why[300];
        if (!m) {
                if (adopt_fd >= 0)
                        close(adopt_fd);
                return -ENOMEM;
        }
        m->env = *env;
        LIST_INIT(&m->scrapes);
        if (metrics_parse_listen(listen_str, why, sizeof why) < 0) {
                log_msg(L_ERR, NULL, "metrics: %s", why);
                e = -EINVAL;
                goto fail;
        }
        if (token_file && (e = httpconn_token_read(token_file, "metrics", "MetricsToken", &m->token, &m->token_len)) < 0)
                goto fail;
        e = listen_on(m, listen_str, adopt_fd, &fd, &kept);
        adopt_fd = -1; /* listen_on's now, closed unless kept */
        if (e < 0)
                goto fail;
        if (!(m->http = evhttp_new(base))) {
                close(fd);
                e = -ENOMEM;
                goto fail;
        }
        /* Why these limits: a scraper sends a short GET; anything with a
         * body or huge headers is refused by libevent before it is
         * buffered, and idle or slow clients are dropped. */
        evhttp_set_max_body_size(m->http, 0);
        evhttp_set_max_headers_size(m->http, HEADERS_MAX);
        evhttp_set_timeout(m->http, 60);
        evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
        evhttp_set_gencb(m->http, on_request, m);
        if (!(bound = evhttp_accept_socket_with_handle(m->http, fd))) {
                close(fd);
                e = -ENOMEM;
                goto fail;
        }
        m->conns = (struct httpconns){ .who = "metrics", .max_key = "its limit of connections",
                                       .timeout_key = "its header timeout", .max_connections = METRICS_MAX_CONNECTIONS,
                                       .header_timeout_ms = METRICS_HEADER_TIMEOUT_MS, .closed = conn_gone, .arg = m };
        if ((e = httpconn_setup(&m->conns, base, m->http, bound)) < 0 ||
            !(m->ev_lag = evtimer_new(base, lag_cb, m))) {
                e = e < 0 ? e : -ENOMEM;
                goto fail;
        }
        m->lag_due_us = monotime_us() + LAG_PROBE_MS * 1000;
        timer_arm_ms(m->ev_lag, LAG_PROBE_MS);
        char where[160];
        listener_name(m->conns.lev, where, sizeof where);
        log_msg(L_INFO, NULL, "metrics: serving /metrics, %s%s%s", where, m->token ? " (with a token)" : "",
                kept ? ", the socket kept across gadgetd's re-exec" : "");
        *out = m;
        return 0;
fail:
        if (adopt_fd >= 0)
                close(adopt_fd);
        metrics_free(m);
        return e;
}

void metrics_reexec_hold(struct metrics *m, bool hold)
{
        httpconn_hold(&m->conns, hold);
}

int metrics_reexec_quiet(const struct metrics *m, char *why, size_t len)
{
        return httpconn_quiet(&m->conns, why, len);
}

int metrics_listen_fd(const struct metrics *m)
{
        return m->conns.lev ? evconnlistener_get_fd(m->conns.lev) : -1;
}

size_t metrics_connections(const struct metrics *m)
{
        return m->conns.n_conns;
}

void metrics_free(struct metrics *m)
{
        if (!m)
                return;
        while (!LIST_EMPTY(&m->scrapes))
                scrape_free(LIST_FIRST(&m->scrapes));
        m->conns.lev = NULL; /* evhttp_free frees it before the connections */
        m->conns.closed = NULL;
        if (m->http)
                evhttp_free(m->http);
        httpconn_free(&m->conns);
        if (m->ev_lag)
                event_free(m->ev_lag);
        if (m->unix_path) {
                unlink(m->unix_path);
                free(m->unix_path);
        }
        if (m->token) {
                explicit_bzero(m->token, m->token_len);
                free(m->token);
        }
        free(m);
}
