/* pgconn: a non-blocking libpq connection on the loop (pgconn.h).
 *
 * Nothing here waits: every libpq call is made non-blocking (no PQexec),
 * the socket's readiness drives PQconnectPoll, PQflush and
 * PQconsumeInput, and a connect or a query that takes too long counts as
 * a lost connection.
 *
 * Which server: libpq's. A conninfo may name several hosts (host=a,b),
 * which libpq tries in turn; unless it says otherwise
 * (target_session_attrs=), only a server that accepts writes is taken,
 * so a standby is skipped, and after a failover the next attempt finds
 * the promoted one (docs/cluster.md, "A store standby and failover").
 * libpq moves to the next host when one refuses, but in its non-blocking
 * mode never when one does not answer (a host gone silent: its
 * connect_timeout is its blocking calls'): an attempt with several hosts
 * has HOST_TIMEOUT_MS, and the next one starts at the host after the
 * first, so a dead host first in the list does not hide the others; and
 * after a server refused a write as read-only (SQLSTATE 25006: a standby
 * taken under target_session_attrs=any) the next starts after it. */
#include "pgconn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "system/monotime.h"
#include "system/timer.h"

#define HOST_TIMEOUT_MS 2000

struct pgconn {
        struct event_base *base;
        char *conninfo;
        bool own_attrs;               /* conninfo names target_session_attrs */
        /* Several hosts: the conninfo's options (NULL-terminated, with
         * target_session_attrs), to start at host first of n_hosts. */
        char **keys, **vals;
        size_t n_hosts, first;
        bool read_only;               /* this connection's server refused a write (25006) */
        struct pgconn_ops ops;
        PGconn *c;
        bool connecting;
        bool busy;                    /* a query is out: wait for its NULL result */
        enum store_op op;             /* its kind, */
        uint64_t sent_us;             /* and when it was sent, */
        unsigned timeout_ms;          /* and how long it may take */
        struct event *ev_io;          /* the socket: connecting, or reading */
        struct event *ev_write;       /* the socket, while libpq has output to flush */
        struct event *ev_timer;       /* connect or query timeout */
        char notice[200];             /* the server's last message outside a query (why it
                                       * ended the session, if it did) */
        char reason[200];             /* why the connection was lost */
};

void pgconn_one_line(char *dst, size_t len, const char *msg)
{
        size_t o = 0;
        bool space = false;
        if (!msg || !*msg)
                msg = "unknown error";
        for (; *msg && o + 1 < len; msg++) {
                if (*msg == '\n' || *msg == '\r' || *msg == '\t' || *msg == ' ') {
                        space = o > 0;
                        continue;
                }
                if (space && o + 2 < len)
                        dst[o++] = ' ';
                space = false;
                dst[o++] = *msg;
        }
        dst[o] = '\0';
}

static void timer_set(struct pgconn *pc, unsigned ms)
{
        timer_arm_ms(pc->ev_timer, ms);
}

static void io_clear(struct pgconn *pc)
{
        if (pc->ev_io)
                event_free(pc->ev_io);
        if (pc->ev_write)
                event_free(pc->ev_write);
        pc->ev_io = pc->ev_write = NULL;
}

/* Frees libpq's connection and the events on its socket. */
static void close_conn(struct pgconn *pc)
{
        io_clear(pc);
        evtimer_del(pc->ev_timer);
        PQfinish(pc->c);
        pc->c = NULL;
        pc->busy = pc->connecting = false;
}

/* The next attempt starts at the host after the one connected to, if the
 * list holds it (libpq names it as the list does). */
static void next_host(struct pgconn *pc)
{
        const char *h = pc->c ? PQhost(pc->c) : NULL;
        size_t hl = h ? strlen(h) : 0;
        for (size_t i = 0; h && pc->keys && pc->keys[i]; i++) {
                if (strcmp(pc->keys[i], "host") != 0 && strcmp(pc->keys[i], "hostaddr") != 0)
                        continue;
                size_t j = 0;
                for (const char *e = pc->vals[i]; e; j++) {
                        const char *comma = strchr(e, ',');
                        size_t el = comma ? (size_t)(comma - e) : strlen(e);
                        if (el == hl && strncmp(e, h, hl) == 0) {
                                pc->first = (j + 1) % pc->n_hosts;
                                return;
                        }
                        e = comma ? comma + 1 : NULL;
                }
        }
}

void pgconn_fail(struct pgconn *pc, const char *why)
{
        if (pc->read_only)
                next_host(pc);
        pc->read_only = false;
        /* Copied before the connection, which may hold why, is freed. */
        pgconn_one_line(pc->reason, sizeof pc->reason, why ? why : pc->c ? PQerrorMessage(pc->c) : NULL);
        close_conn(pc);
        pc->ops.lost(pc->ops.arg, pc->reason);
}

/* libpq's notices (and a FATAL error sent while no query is out, such as
 * "terminating connection due to administrator command") come here
 * instead of gadgetd's stderr: kept as the reason of a loss that follows. */
static void on_notice(void *arg, const char *msg)
{
        struct pgconn *pc = arg;
        pgconn_one_line(pc->notice, sizeof pc->notice, msg);
}

/* Why the connection ended while no query was out: the server's own word
 * if it said one (PQisBusy parses what was read, passing an error sent
 * outside a query to on_notice). */
static const char *why_closed(struct pgconn *pc)
{
        PQisBusy(pc->c);
        return pc->notice[0] ? pc->notice : PQerrorMessage(pc->c);
}

static void on_connect_io(evutil_socket_t fd, short what, void *arg);
static void on_io(evutil_socket_t fd, short what, void *arg);

/* list ("a,b,c", n elements) from its element k on ("b,c,a"); NULL if
 * it has not n elements (a single port for every host) or no memory. */
static char *rotated(const char *list, size_t k, size_t n)
{
        size_t len = strlen(list), count = 1, at = 0;
        for (size_t i = 0; i < len; i++)
                if (list[i] == ',' && ++count == k + 1)
                        at = i + 1;
        char *out = count == n && k ? malloc(len + 2) : NULL;
        if (!out)
                return NULL;
        /* The tail from element k, a comma, the head before it. */
        snprintf(out, len + 2, "%s,%.*s", list + at, (int)(at - 1), list);
        return out;
}

/* An attempt from host pc->first on: the options with their host,
 * hostaddr and port lists rotated. */
static PGconn *start_rotated(struct pgconn *pc)
{
        size_t n = 0;
        while (pc->keys[n])
                n++;
        char **vals = calloc(n + 1, sizeof *vals), **mine = calloc(n + 1, sizeof *mine);
        PGconn *c = NULL;
        if (vals && mine) {
                for (size_t i = 0; i < n; i++) {
                        const char *k = pc->keys[i];
                        bool list = !strcmp(k, "host") || !strcmp(k, "hostaddr") || !strcmp(k, "port");
                        mine[i] = list ? rotated(pc->vals[i], pc->first, pc->n_hosts) : NULL;
                        vals[i] = mine[i] ? mine[i] : pc->vals[i];
                }
                c = PQconnectStartParams((const char *const *)pc->keys, (const char *const *)vals, 0);
                for (size_t i = 0; i < n; i++)
                        free(mine[i]);
        }
        free(vals);
        free(mine);
        return c;
}

void pgconn_connect(struct pgconn *pc)
{
        pc->connecting = true;
        pc->notice[0] = '\0';
        /* Why the conninfo goes as dbname: libpq expands it as a whole
         * (keywords or URI), then the keyword after it applies. */
        static const char *const keys[] = { "dbname", "target_session_attrs", NULL };
        const char *const values[] = { pc->conninfo, "read-write", NULL };
        if (pc->keys && pc->first)
                pc->c = start_rotated(pc);
        else
                pc->c = pc->own_attrs ? PQconnectStart(pc->conninfo) : PQconnectStartParams(keys, values, 1);
        if (!pc->c) {
                pgconn_fail(pc, "out of memory");
                return;
        }
        if (PQstatus(pc->c) == CONNECTION_BAD) {
                pgconn_fail(pc, NULL);
                return;
        }
        PQsetNoticeProcessor(pc->c, on_notice, pc);
        timer_set(pc, pc->keys && pc->ops.connect_timeout_ms > HOST_TIMEOUT_MS ? HOST_TIMEOUT_MS
                                                                             : pc->ops.connect_timeout_ms);
        /* libpq's rule: poll first when the socket is writable. */
        on_connect_io(-1, EV_WRITE, pc);
}

/* Waits for the socket as PQconnectPoll asked (it may change between
 * polls). */
static void connect_wait(struct pgconn *pc, short what)
{
        io_clear(pc);
        pc->ev_io = event_new(pc->base, PQsocket(pc->c), what, on_connect_io, pc);
        if (!pc->ev_io || event_add(pc->ev_io, NULL) < 0)
                pgconn_fail(pc, "out of memory");
}

/* Connected: reading from now on, writing when libpq has output. */
static void connected(struct pgconn *pc)
{
        io_clear(pc);
        if (PQsetnonblocking(pc->c, 1) != 0) {
                pgconn_fail(pc, NULL);
                return;
        }
        pc->ev_io = event_new(pc->base, PQsocket(pc->c), EV_READ | EV_PERSIST, on_io, pc);
        pc->ev_write = event_new(pc->base, PQsocket(pc->c), EV_WRITE, on_io, pc);
        if (!pc->ev_io || !pc->ev_write || event_add(pc->ev_io, NULL) < 0) {
                pgconn_fail(pc, "out of memory");
                return;
        }
        pc->connecting = false;
        pc->ops.connected(pc->ops.arg);
}

static void on_connect_io(evutil_socket_t fd, short what, void *arg)
{
        struct pgconn *pc = arg;
        (void)fd;
        (void)what;
        switch (PQconnectPoll(pc->c)) {
        case PGRES_POLLING_READING: connect_wait(pc, EV_READ); break;
        case PGRES_POLLING_WRITING: connect_wait(pc, EV_WRITE); break;
        case PGRES_POLLING_OK: connected(pc); break;
        default: pgconn_fail(pc, NULL); break;
        }
}

/* Flushes libpq's output; waits for the socket if it could not all go. */
static void flush(struct pgconn *pc)
{
        int r = PQflush(pc->c);
        if (r < 0)
                pgconn_fail(pc, NULL);
        else if (r > 0)
                event_add(pc->ev_write, NULL);
}

int pgconn_sent(struct pgconn *pc, int sent, enum store_op op)
{
        return pgconn_sent_within(pc, sent, op, pc->ops.query_timeout_ms);
}

int pgconn_sent_within(struct pgconn *pc, int sent, enum store_op op, unsigned timeout_ms)
{
        if (!sent) {
                pgconn_fail(pc, NULL);
                return -EIO;
        }
        pc->busy = true;
        pc->op = op;
        pc->sent_us = monotime_us();
        pc->timeout_ms = timeout_ms;
        timer_set(pc, timeout_ms);
        flush(pc);
        return pc->c ? 0 : -EIO;
}

/* Reads what came: each result of the query out goes to the owner, then
 * its end; input with no query out is a notice or the server saying
 * goodbye. */
static void on_io(evutil_socket_t fd, short what, void *arg)
{
        struct pgconn *pc = arg;
        (void)fd;
        if (what & EV_WRITE) {
                flush(pc);
                if (!pc->c)
                        return;
        }
        if (!(what & EV_READ))
                return;
        if (!PQconsumeInput(pc->c)) {
                pgconn_fail(pc, pc->busy && !pc->ops.notice_in_query ? PQerrorMessage(pc->c) : why_closed(pc));
                return;
        }
        while (pc->c && pc->busy && !PQisBusy(pc->c)) {
                PGresult *r = PQgetResult(pc->c);
                if (r) {
                        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                        if (state && strcmp(state, "25006") == 0)
                                pc->read_only = true;
                        pc->ops.result(pc->ops.arg, r);
                        continue;
                }
                pc->busy = false;
                evtimer_del(pc->ev_timer);
                store_latency_add(pc->ops.latency, pc->op, monotime_us() - pc->sent_us);
                pc->ops.end(pc->ops.arg);
        }
        if (pc->c && !pc->busy) {
                PQisBusy(pc->c);
                if (PQstatus(pc->c) == CONNECTION_BAD)
                        pgconn_fail(pc, why_closed(pc));
        }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct pgconn *pc = arg;
        char why[120];
        (void)fd;
        (void)what;
        if (pc->connecting && pc->keys) {
                snprintf(why, sizeof why, "no connection within %u s (host %zu of %zu first; the next from the one "
                         "after it)", HOST_TIMEOUT_MS / 1000, pc->first + 1, pc->n_hosts);
                pc->first = (pc->first + 1) % pc->n_hosts;
        } else if (pc->connecting)
                snprintf(why, sizeof why, "no connection within %u s", pc->ops.connect_timeout_ms / 1000);
        else if (pc->timeout_ms % 1000 == 0)
                snprintf(why, sizeof why, "no answer from the server within %u s", pc->timeout_ms / 1000);
        else
                snprintf(why, sizeof why, "no answer from the server within %u ms", pc->timeout_ms);
        pgconn_fail(pc, why);
}

static void options_free(struct pgconn *pc)
{
        for (size_t i = 0; pc->keys && pc->vals && (pc->keys[i] || pc->vals[i]); i++) {
                free(pc->keys[i]);
                free(pc->vals[i]);
        }
        free(pc->keys);
        free(pc->vals);
        pc->keys = pc->vals = NULL;
}

/* Whether conninfo names target_session_attrs, how many hosts, and, with
 * several, its options for rotated attempts. 0 or -ENOMEM. */
static int options_load(struct pgconn *pc, const char *conninfo)
{
        PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
        size_t n = 0;
        pc->n_hosts = 1;
        for (PQconninfoOption *o = opts; o && o->keyword; o++) {
                if (!o->val)
                        continue;
                n++;
                if (strcmp(o->keyword, "target_session_attrs") == 0 && o->val[0])
                        pc->own_attrs = true;
                if (strcmp(o->keyword, "host") == 0 || strcmp(o->keyword, "hostaddr") == 0) {
                        size_t k = 1;
                        for (const char *c = o->val; *c; c++)
                                k += *c == ',';
                        if (k > pc->n_hosts)
                                pc->n_hosts = k;
                }
        }
        int e = 0;
        if (pc->n_hosts > 1) {
                /* Zeroed: a NULL key ends the list wherever a copy failed. */
                pc->keys = calloc(n + 2, sizeof *pc->keys);
                pc->vals = calloc(n + 2, sizeof *pc->vals);
                size_t i = 0;
                for (PQconninfoOption *o = opts; pc->keys && pc->vals && o && o->keyword; o++) {
                        if (!o->val)
                                continue;
                        pc->keys[i] = strdup(o->keyword);
                        pc->vals[i] = strdup(o->val);
                        if (!pc->keys[i] || !pc->vals[i])
                                break;
                        i++;
                }
                if (i == n && !pc->own_attrs) {
                        pc->keys[i] = strdup("target_session_attrs");
                        pc->vals[i] = strdup("read-write");
                        i += pc->keys[i] && pc->vals[i];
                }
                if (i != n + !pc->own_attrs) {
                        options_free(pc);
                        e = -ENOMEM;
                }
        }
        PQconninfoFree(opts);
        return e;
}

int pgconn_new(struct event_base *base, const char *conninfo, const struct pgconn_ops *ops, struct pgconn **out)
{
        struct pgconn *pc = calloc(1, sizeof *pc);
        if (!pc || !(pc->conninfo = strdup(conninfo)) || !(pc->ev_timer = evtimer_new(base, on_timer, pc))) {
                pgconn_free(pc);
                return -ENOMEM;
        }
        pc->base = base;
        pc->ops = *ops;
        if (options_load(pc, conninfo) < 0) {
                pgconn_free(pc);
                return -ENOMEM;
        }
        *out = pc;
        return 0;
}

void pgconn_free(struct pgconn *pc)
{
        if (!pc)
                return;
        io_clear(pc);
        if (pc->ev_timer)
                event_free(pc->ev_timer);
        PQfinish(pc->c);
        options_free(pc);
        free(pc->conninfo);
        free(pc);
}

PGconn *pgconn_pq(const struct pgconn *pc)
{
        return pc->c;
}

void pgconn_server(const struct pgconn *pc, char *dst, size_t len)
{
        const char *host = pc->c && !pc->connecting ? PQhost(pc->c) : NULL;
        const char *port = host ? PQport(pc->c) : NULL;
        snprintf(dst, len, "%s%s%s", host ? host : "", host ? ":" : "", host && port ? port : "");
}

bool pgconn_busy(const struct pgconn *pc)
{
        return pc->busy;
}
