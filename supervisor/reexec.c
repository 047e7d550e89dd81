/* reexec: the re-exec state's record (reexec.h).
 *
 *   "GDREEXEC" u32 version u32 body-length u64 FNV-1a of the body, then
 *   the body: i32 listen-fd, state-lock, socket-lock, uid-lock fds,
 *   u8 activated i32 answer-fd u64 answer-id
 *   u32 units, each: str name, str path, u64 hash, u8 from-dir, u8 state,
 *   str cause, u32 restarts, u64 calls, u32 runs, u32 length and the policy
 *   text, u32 log lines, each a log str, i64 its time (ms since the epoch),
 *   u32 its run, u8 its source, u8 its priority; if REMOTE: str its owner as last read
 *   ("" none), u64 that owner's epoch, u8 dormant; if READY: i32 pid, i32 rpc,
 *   report, out, err fds, i32 pidfd (-1: none), i32 its core's memfd (-1: none),
 *   u32 uid, i64 started-ms, u64 start-us,
 *   u32 methods, each str method, str signature; then u32 control
 *   connections, each: i32 fd, u8 spoke, u32 length and the bytes read of
 *   it and not handled; then i32 the gateway's listening fd (-1: none) and
 *   str its session (empty with -1); u64 the time (CLOCK_MONOTONIC ms)
 *   by which the leases must be taken back (0: no shared store); i32 the
 *   node link's listening fd (-1: none); i32 the metrics endpoint's
 *   listening fd (-1: none).
 *
 * Integers little-endian; a str is u32 length (its NUL included) and its
 * bytes, NUL last and nowhere else. Versions 7, 6, 5, 4 and 3 (the images
 * before) are read too: 7 without a run's core memfd (a run it handed on
 * kept no core of its crash), 6 also without the metrics endpoint's socket (none
 * handed on: the next image listens again), 5 also without runs and with each log line a str alone
 * (read as run 0, time 0: unknown), 4 also without a worker's pidfd, 3
 * also without REMOTE gadgets, which it never handed on. */
#include "reexec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract.h"
#include "system/monotime.h"

#define MAGIC "GDREEXEC"
#define VERSION 8u
#define VERSION_NO_CORE 7u     /* read too: no run's core memfd in it */
#define VERSION_NO_METRICS 6u  /* read too: no metrics endpoint's socket in it */
#define VERSION_NO_LOG_META 5u /* read too: no runs, log lines as text alone */
#define VERSION_NO_PIDFD 4u   /* read too: no worker's pidfd in it */
#define VERSION_NO_REMOTE 3u  /* read too: no REMOTE gadget and no pidfd in it */
#define HEADER (8 + 4 + 4 + 8)
#define MAX_BODY (256u << 20)
#define MAX_STR 4097u        /* a path of 4096 bytes and its NUL */
#define MAX_METHODS 1024u
#define MAX_POLICY (1u << 20)  /* POLICY_MAX_FILE */
#define MAX_LOG_LINE (LOGBUF_LINE_MAX * 4 + 1) /* an escaped line and its NUL */

struct buf {
        uint8_t *p;
        size_t len, cap;
        bool failed;
};

static void put(struct buf *b, const void *v, size_t n)
{
        if (b->failed || n == 0)
                return;
        if (b->len + n > b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 4096;
                while (cap < b->len + n)
                        cap *= 2;
                uint8_t *np = realloc(b->p, cap);
                if (!np) {
                        b->failed = true;
                        return;
                }
                b->p = np;
                b->cap = cap;
        }
        memcpy(b->p + b->len, v, n);
        b->len += n;
}

static void put_u(struct buf *b, uint64_t v, size_t n)
{
        uint8_t x[8];
        for (size_t i = 0; i < n; i++)
                x[i] = (uint8_t)(v >> (8 * i));
        put(b, x, n);
}

static void put_str(struct buf *b, const char *s)
{
        size_t n = strlen(s ? s : "") + 1;
        put_u(b, n, 4);
        put(b, s ? s : "", n);
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
        uint64_t h = 14695981039346656037ull;
        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 1099511628211ull;
        return h;
}

static void put_unit(struct buf *b, const struct unit_saved *u)
{
        put_str(b, u->name);
        put_str(b, u->path);
        put_u(b, u->policy_hash, 8);
        put_u(b, u->from_dir, 1);
        put_u(b, (uint64_t)u->state, 1);
        put_str(b, u->cause);
        put_u(b, u->restarts, 4);
        put_u(b, u->calls, 8);
        put_u(b, u->runs, 4);
        put_u(b, u->text_len, 4);
        put(b, u->text, u->text_len);
        put_u(b, u->n_log, 4);
        for (size_t i = 0; i < u->n_log; i++) {
                const struct logbuf_meta *m = &u->log[i].meta;
                put_str(b, u->log[i].text);
                put_u(b, (uint64_t)m->time_ms, 8);
                put_u(b, m->run, 4);
                put_u(b, m->source, 1);
                put_u(b, m->prio, 1);
        }
        if (u->state == UNIT_REMOTE) {
                /* What the reader takes, or none: the next image reads the
                 * owner from the store again anyway. */
                bool named = u->owner && gadget_name_ok(u->owner) && u->owner_epoch >= 0;
                put_str(b, named ? u->owner : "");
                put_u(b, named ? (uint64_t)u->owner_epoch : 0, 8);
                put_u(b, u->dormant, 1);
        }
        if (u->state != UNIT_READY)
                return;
        const int32_t ints[] = { u->pid, u->rpc_fd, u->report_fd, u->out_fd, u->err_fd, u->pidfd, u->core_fd };
        for (size_t i = 0; i < 7; i++)
                put_u(b, (uint32_t)ints[i], 4);
        put_u(b, u->uid, 4);
        put_u(b, (uint64_t)u->started_ms, 8);
        put_u(b, u->start_us, 8);
        put_u(b, u->n_methods, 4);
        for (size_t i = 0; i < u->n_methods; i++) {
                put_str(b, u->methods[i]);
                put_str(b, u->sig_texts[i]);
        }
}

int reexec_state_write(const struct reexec_state *s)
{
        struct buf b = { 0 };
        put(&b, MAGIC, 8);
        put_u(&b, VERSION, 4);
        put_u(&b, 0, 4); /* length and checksum, below */
        put_u(&b, 0, 8);
        put_u(&b, (uint32_t)s->listen_fd, 4);
        put_u(&b, (uint32_t)s->state_lock, 4);
        put_u(&b, (uint32_t)s->socket_lock, 4);
        put_u(&b, (uint32_t)s->uid_lock, 4);
        put_u(&b, s->activated, 1);
        put_u(&b, (uint32_t)s->answer_fd, 4);
        put_u(&b, s->answer_id, 8);
        put_u(&b, s->n, 4);
        for (size_t i = 0; i < s->n; i++)
                put_unit(&b, &s->units[i]);
        put_u(&b, s->n_clients, 4);
        for (size_t i = 0; i < s->n_clients; i++) {
                put_u(&b, (uint32_t)s->clients[i].fd, 4);
                put_u(&b, s->clients[i].spoke, 1);
                put_u(&b, s->clients[i].input_len, 4);
                put(&b, s->clients[i].input, s->clients[i].input_len);
        }
        put_u(&b, (uint32_t)s->gateway.fd, 4);
        put_str(&b, s->gateway.fd >= 0 ? s->gateway.session : "");
        put_u(&b, s->lease_until_ms, 8);
        put_u(&b, (uint32_t)s->peer_fd, 4);
        put_u(&b, (uint32_t)s->metrics_fd, 4);
        if (b.failed || b.len - HEADER > MAX_BODY) {
                free(b.p);
                return b.failed ? -ENOMEM : -EFBIG;
        }
        uint64_t len = b.len - HEADER, sum = fnv(b.p + HEADER, len);
        for (size_t i = 0; i < 4; i++)
                b.p[12 + i] = (uint8_t)(len >> (8 * i));
        for (size_t i = 0; i < 8; i++)
                b.p[16 + i] = (uint8_t)(sum >> (8 * i));
        /* Why not close-on-exec: the next image reads it. */
        int fd = memfd_create("gadgetd-reexec", 0);
        int e = 0;
        if (fd < 0) {
                e = -errno;
        } else {
                for (size_t off = 0; off < b.len && e == 0;) {
                        ssize_t w = write(fd, b.p + off, b.len - off);
                        if (w < 0 && errno != EINTR)
                                e = -errno;
                        else if (w > 0)
                                off += (size_t)w;
                }
                if (e == 0 && lseek(fd, 0, SEEK_SET) < 0)
                        e = -errno;
        }
        free(b.p);
        if (e < 0 && fd >= 0)
                close(fd);
        return e < 0 ? e : fd;
}

/* The reader: every take checks the bytes left. */
struct cur {
        uint8_t *p;
        size_t len, at;
        char *err;
        size_t errlen;
        bool bad;
        uint32_t version;
};

static void bad(struct cur *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(struct cur *c, const char *fmt, ...)
{
        if (c->bad)
                return;
        va_list ap;
        va_start(ap, fmt);
        int n = snprintf(c->err, c->errlen, "at byte %zu: ", c->at + HEADER);
        if (n >= 0 && (size_t)n < c->errlen)
                vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
        c->bad = true;
}

static uint64_t take_u(struct cur *c, size_t n, const char *what)
{
        uint64_t v = 0;
        if (c->bad)
                return 0;
        if (c->len - c->at < n) {
                bad(c, "it ends inside %s", what);
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                v |= (uint64_t)c->p[c->at + i] << (8 * i);
        c->at += n;
        return v;
}

static char *take_str_max(struct cur *c, const char *what, uint64_t max)
{
        uint64_t n = take_u(c, 4, what);
        if (c->bad)
                return NULL;
        if (n == 0 || n > max || n > c->len - c->at) {
                bad(c, "%s has a length of %llu", what, (unsigned long long)n);
                return NULL;
        }
        char *s = (char *)c->p + c->at;
        if (s[n - 1] != '\0' || strlen(s) != n - 1) {
                bad(c, "%s is not one string", what);
                return NULL;
        }
        c->at += n;
        return s;
}

static char *take_str(struct cur *c, const char *what)
{
        return take_str_max(c, what, MAX_STR);
}

/* An fd of the state: above stderr, and open in this process. */
static int take_fd(struct cur *c, const char *what)
{
        int32_t fd = (int32_t)(uint32_t)take_u(c, 4, what);
        if (!c->bad && (fd < 3 || fcntl(fd, F_GETFD) < 0))
                bad(c, "%s (%d) is not an fd this process holds", what, (int)fd);
        return fd;
}

/* A REMOTE gadget's owner (a node name as Node= takes, or "" with epoch 0:
 * none), its epoch and this node's want of it. */
static void take_remote(struct cur *c, struct unit_saved *u)
{
        u->owner = take_str_max(c, "its owner", REEXEC_NODE_MAX);
        uint64_t epoch = take_u(c, 8, "its owner's epoch"), dormant = take_u(c, 1, "a flag");
        if (c->bad)
                return;
        if (u->owner[0] ? !gadget_name_ok(u->owner) || epoch > INT64_MAX : epoch != 0)
                bad(c, "%s's owner \"%.64s\" at epoch %llu is not a node's lease", u->name, u->owner,
                    (unsigned long long)epoch);
        else if (dormant > 1)
                bad(c, "%s has an unknown flag %llu", u->name, (unsigned long long)dormant);
        u->owner_epoch = (int64_t)epoch;
        u->dormant = dormant;
}

/* A log line's time, run, source and priority (version 6): each in its
 * range, its run one of the gadget's so far. */
static void take_log_meta(struct cur *c, const struct unit_saved *u, struct logbuf_meta *m)
{
        uint64_t t = take_u(c, 8, "a log line's time"), run = take_u(c, 4, "a log line's run");
        uint64_t source = take_u(c, 1, "a log line's source"), prio = take_u(c, 1, "a log line's priority");
        if (c->bad)
                return;
        if (t > INT64_MAX || run > u->runs || source >= LOGBUF_N_SOURCES || prio > LOGBUF_PRIO_MAX) {
                bad(c, "%s has a log line of time %llu, run %llu (of %u), source %llu, priority %llu", u->name,
                    (unsigned long long)t, (unsigned long long)run, u->runs, (unsigned long long)source,
                    (unsigned long long)prio);
                return;
        }
        *m = (struct logbuf_meta){ .time_ms = (int64_t)t, .run = (uint32_t)run, .source = (enum logbuf_source)source,
                                   .prio = (unsigned)prio };
}

static void take_unit(struct cur *c, struct unit_saved *u)
{
        *u = (struct unit_saved){ .pid = -1, .rpc_fd = -1, .report_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1,
                                  .core_fd = -1 };
        u->name = take_str(c, "a gadget's name");
        if (!c->bad && !gadget_name_ok(u->name))
                bad(c, "\"%.64s\" is not a gadget name", u->name);
        u->path = take_str(c, "a policy file's path");
        if (!c->bad && u->path[0] != '/')
                bad(c, "%s's policy file is not an absolute path", u->name);
        u->policy_hash = take_u(c, 8, "a policy's hash");
        uint64_t from_dir = take_u(c, 1, "a flag"), state = take_u(c, 1, "a state");
        bool remote = state == UNIT_REMOTE && c->version != VERSION_NO_REMOTE;
        if (!c->bad && (from_dir > 1 || (state != UNIT_READY && state != UNIT_STOPPED && state != UNIT_FAILED &&
                                         state != UNIT_IDLE && !remote)))
                bad(c, "%s has an unknown state %llu or flag %llu", u->name, (unsigned long long)state,
                    (unsigned long long)from_dir);
        u->from_dir = from_dir;
        u->state = (int)state;
        u->cause = take_str(c, "a cause");
        u->restarts = (uint32_t)take_u(c, 4, "a count");
        u->calls = take_u(c, 8, "a count");
        bool meta = c->version > VERSION_NO_LOG_META;
        /* Before version 6: as many processes as restarts, and the one running. */
        u->runs = meta ? (uint32_t)take_u(c, 4, "a count") : u->restarts + (state == UNIT_READY);
        uint64_t tl = take_u(c, 4, "a length");
        if (!c->bad && (tl > MAX_POLICY || tl > c->len - c->at))
                bad(c, "%s's policy text of %llu bytes", u->name, (unsigned long long)tl);
        if (!c->bad) {
                u->text = (const char *)c->p + c->at;
                u->text_len = tl;
                c->at += tl;
        }
        uint64_t nl = take_u(c, 4, "a count of log lines");
        if (!c->bad && nl > LOGBUF_LINES)
                bad(c, "%s has %llu log lines", u->name, (unsigned long long)nl);
        struct unit_saved_line *log = c->bad ? NULL : calloc(nl + 1, sizeof *log);
        if (!c->bad && !log)
                bad(c, "out of memory");
        u->log = log;
        for (size_t i = 0; i < nl && !c->bad; i++) {
                log[i] = (struct unit_saved_line){ .meta = { .source = LOGBUF_STDOUT, .prio = LOGBUF_PRIO_INFO } };
                log[i].text = take_str_max(c, "a log line", MAX_LOG_LINE);
                if (meta)
                        take_log_meta(c, u, &log[i].meta);
                u->n_log = i + 1;
        }
        if (remote)
                take_remote(c, u);
        if (c->bad || state != UNIT_READY)
                return;
        u->pid = (int32_t)(uint32_t)take_u(c, 4, "a pid");
        if (!c->bad && u->pid <= 1)
                bad(c, "%s's worker has pid %d", u->name, (int)u->pid);
        u->rpc_fd = take_fd(c, "its RPC socket");
        u->report_fd = take_fd(c, "its report pipe");
        u->out_fd = take_fd(c, "its stdout pipe");
        u->err_fd = take_fd(c, "its stderr pipe");
        u->pidfd = c->version > VERSION_NO_PIDFD ? (int32_t)(uint32_t)take_u(c, 4, "its pidfd") : -1;
        if (!c->bad && u->pidfd != -1 && (u->pidfd < 3 || fcntl(u->pidfd, F_GETFD) < 0))
                bad(c, "its pidfd (%d) is not an fd this process holds", (int)u->pidfd);
        u->core_fd = c->version > VERSION_NO_CORE ? (int32_t)(uint32_t)take_u(c, 4, "its core's memfd") : -1;
        if (!c->bad && u->core_fd != -1 && (u->core_fd < 3 || fcntl(u->core_fd, F_GETFD) < 0))
                bad(c, "its core's memfd (%d) is not an fd this process holds", (int)u->core_fd);
        u->uid = (uint32_t)take_u(c, 4, "a uid");
        u->started_ms = (int64_t)take_u(c, 8, "a time");
        u->start_us = take_u(c, 8, "a time");
        uint64_t n = take_u(c, 4, "a count of methods");
        if (c->bad)
                return;
        if (n > MAX_METHODS) {
                bad(c, "%s has %llu methods", u->name, (unsigned long long)n);
                return;
        }
        char **v = calloc(2 * n + 1, sizeof *v);
        if (!v) {
                bad(c, "out of memory");
                return;
        }
        u->methods = v;
        u->sig_texts = v + n;
        u->n_methods = n;
        for (size_t i = 0; i < n && !c->bad; i++) {
                v[i] = take_str(c, "a method's name");
                v[n + i] = take_str(c, "a method's signature");
        }
}

static void take_clients(struct cur *c, struct reexec_state *s)
{
        uint64_t n = take_u(c, 4, "the count of control connections");
        bool answer_found = s->answer_fd == -1;
        if (!c->bad && n > REEXEC_MAX_CLIENTS)
                bad(c, "%llu control connections, at most %u", (unsigned long long)n, REEXEC_MAX_CLIENTS);
        if (!c->bad && !(s->clients = calloc(n + 1, sizeof *s->clients)))
                bad(c, "out of memory");
        for (size_t i = 0; i < n && !c->bad; i++) {
                struct control_handoff *h = &s->clients[i];
                h->fd = take_fd(c, "a control connection");
                uint64_t spoke = take_u(c, 1, "a flag"), len = take_u(c, 4, "a length");
                if (!c->bad && (spoke > 1 || len > REEXEC_MAX_INPUT || len > c->len - c->at)) {
                        bad(c, "a control connection's input of %llu bytes (flag %llu)", (unsigned long long)len,
                            (unsigned long long)spoke);
                        break;
                }
                h->spoke = spoke;
                h->input = c->p + c->at;
                h->input_len = len;
                c->at += len;
                answer_found = answer_found || h->fd == s->answer_fd;
                s->n_clients = i + 1;
        }
        if (!c->bad && !answer_found)
                bad(c, "the requester's connection %d is none of the connections handed on", s->answer_fd);
}

/* The gateway's socket and session: both, or neither. */
static void take_gateway(struct cur *c, struct reexec_state *s)
{
        int32_t fd = (int32_t)(uint32_t)take_u(c, 4, "the gateway's socket");
        if (!c->bad && fd != -1 && (fd < 3 || fcntl(fd, F_GETFD) < 0))
                bad(c, "the gateway's socket (%d) is not an fd this process holds", (int)fd);
        const char *session = take_str_max(c, "the gateway's session", sizeof s->gateway.session);
        if (!c->bad && (fd == -1 ? session[0] != '\0' : !gateway_session_ok(session)))
                bad(c, "the gateway's session is not %s", fd == -1 ? "empty" : "64 hexadecimal digits");
        if (c->bad)
                return;
        s->gateway.fd = fd;
        memcpy(s->gateway.session, session, strlen(session) + 1);
}

/* An fd of the state's, and whether it is named before (the n fds in v
 * so far: appended). */
static bool seen_fd(int *v, size_t *n, int fd)
{
        for (size_t i = 0; i < *n; i++)
                if (v[i] == fd)
                        return true;
        v[(*n)++] = fd;
        return false;
}

/* Each fd once in the whole state. */
static void check_fds(struct cur *c, const struct reexec_state *s)
{
        size_t n = 0;
        int *v = c->bad ? NULL : calloc(7 + 6 * s->n + s->n_clients, sizeof *v);
        if (!c->bad && !v) {
                bad(c, "out of memory");
                return;
        }
        const int top[] = { s->listen_fd, s->state_lock, s->socket_lock, s->uid_lock, s->gateway.fd, s->peer_fd,
                            s->metrics_fd };
        for (size_t i = 0; v && i < 7 && !c->bad; i++)
                if (top[i] >= 0 && seen_fd(v, &n, top[i]))
                        bad(c, "fd %d is named twice", top[i]);
        for (size_t i = 0; i < s->n && !c->bad; i++) {
                const struct unit_saved *u = &s->units[i];
                const int fds[] = { u->rpc_fd, u->report_fd, u->out_fd, u->err_fd, u->pidfd, u->core_fd };
                for (size_t k = 0; k < 6 && u->state == UNIT_READY && !c->bad; k++)
                        if (fds[k] >= 0 && seen_fd(v, &n, fds[k]))
                                bad(c, "fd %d is named twice", fds[k]);
                for (size_t j = 0; j < i && !c->bad; j++)
                        if (strcmp(s->units[j].name, u->name) == 0)
                                bad(c, "gadget %s is named twice", u->name);
        }
        for (size_t i = 0; i < s->n_clients && !c->bad; i++)
                if (seen_fd(v, &n, s->clients[i].fd))
                        bad(c, "fd %d is named twice", s->clients[i].fd);
        free(v);
}

int reexec_state_read(int fd, struct reexec_state *s, char *err, size_t len)
{
        uint8_t h[HEADER];
        struct stat st;
        *s = (struct reexec_state){ .listen_fd = -1, .state_lock = -1, .socket_lock = -1, .uid_lock = -1,
                                    .answer_fd = -1, .gateway.fd = -1, .peer_fd = -1,
                                    .metrics_fd = -1 };
        if (fstat(fd, &st) < 0) {
                snprintf(err, len, "fd %d: %s", fd, strerror(errno));
                return -EBADF;
        }
        if (pread(fd, h, HEADER, 0) != HEADER || memcmp(h, MAGIC, 8) != 0) {
                snprintf(err, len, "it is not a gadgetd re-exec state (no header)");
                return -EINVAL;
        }
        uint32_t version = (uint32_t)(h[8] | h[9] << 8 | h[10] << 16 | (uint32_t)h[11] << 24);
        uint64_t body = (uint64_t)(h[12] | h[13] << 8 | h[14] << 16 | (uint32_t)h[15] << 24), sum = 0;
        for (size_t i = 0; i < 8; i++)
                sum |= (uint64_t)h[16 + i] << (8 * i);
        if (version != VERSION && version != VERSION_NO_CORE && version != VERSION_NO_METRICS &&
            version != VERSION_NO_LOG_META &&
            version != VERSION_NO_PIDFD && version != VERSION_NO_REMOTE) {
                snprintf(err, len, "its version is %u, this gadgetd reads version %u", version, VERSION);
                return -EINVAL;
        }
        if (body > MAX_BODY || (uint64_t)st.st_size != HEADER + body) {
                snprintf(err, len, "it holds %lld bytes, its header says %llu", (long long)st.st_size,
                         (unsigned long long)(HEADER + body));
                return -EINVAL;
        }
        struct cur c = { .p = malloc(body + 1), .len = body, .err = err, .errlen = len, .version = version };
        if (!c.p) {
                snprintf(err, len, "out of memory");
                return -ENOMEM;
        }
        s->mem = c.p;
        if (pread(fd, c.p, body, HEADER) != (ssize_t)body) {
                snprintf(err, len, "cannot read its %llu bytes", (unsigned long long)body);
                return -EIO;
        }
        if (fnv(c.p, body) != sum) {
                snprintf(err, len, "its checksum does not match its bytes");
                return -EINVAL;
        }
        s->listen_fd = take_fd(&c, "the control socket");
        s->state_lock = take_fd(&c, "the state directory's lock");
        s->socket_lock = take_fd(&c, "the control socket's lock");
        s->uid_lock = take_fd(&c, "the uid pool's lock");
        s->activated = take_u(&c, 1, "a flag") != 0;
        s->answer_fd = (int32_t)(uint32_t)take_u(&c, 4, "the requester's connection");
        if (!c.bad && s->answer_fd != -1 && (s->answer_fd < 3 || fcntl(s->answer_fd, F_GETFD) < 0))
                bad(&c, "the requester's connection (%d) is not an fd this process holds", s->answer_fd);
        s->answer_id = take_u(&c, 8, "a request id");
        uint64_t n = take_u(&c, 4, "the count of gadgets");
        if (!c.bad && n > REEXEC_MAX_UNITS)
                bad(&c, "%llu gadgets, at most %u", (unsigned long long)n, REEXEC_MAX_UNITS);
        if (!c.bad && !(s->units = calloc(n + 1, sizeof *s->units)))
                bad(&c, "out of memory");
        for (size_t i = 0; i < n && !c.bad; i++) {
                take_unit(&c, &s->units[i]);
                s->n = i + 1;
        }
        take_clients(&c, s);
        take_gateway(&c, s);
        s->lease_until_ms = take_u(&c, 8, "a time");
        if (!c.bad && s->lease_until_ms > monotime_ms() + REEXEC_LEASE_AHEAD_MS)
                bad(&c, "the leases' time lies %llu ms ahead, a mark reaches %u",
                    (unsigned long long)(s->lease_until_ms - monotime_ms()), REEXEC_LEASE_AHEAD_MS);
        s->peer_fd = (int32_t)(uint32_t)take_u(&c, 4, "the node link's socket");
        if (!c.bad && s->peer_fd != -1 && (s->peer_fd < 3 || fcntl(s->peer_fd, F_GETFD) < 0))
                bad(&c, "the node link's socket (%d) is not an fd this process holds", s->peer_fd);
        if (version > VERSION_NO_METRICS)
                s->metrics_fd = (int32_t)(uint32_t)take_u(&c, 4, "the metrics endpoint's socket");
        if (!c.bad && s->metrics_fd != -1 && (s->metrics_fd < 3 || fcntl(s->metrics_fd, F_GETFD) < 0))
                bad(&c, "the metrics endpoint's socket (%d) is not an fd this process holds", s->metrics_fd);
        check_fds(&c, s);
        if (!c.bad && c.at != c.len)
                bad(&c, "%zu bytes follow its end", c.len - c.at);
        s->read = !c.bad;
        return c.bad ? -EINVAL : 0;
}

void reexec_state_free(struct reexec_state *s)
{
        for (size_t i = 0; s->units && i < s->n; i++) {
                free((void *)s->units[i].methods);
                free(s->units[i].log);
        }
        free(s->units);
        free(s->clients);
        free(s->mem);
        *s = (struct reexec_state){ .listen_fd = -1, .state_lock = -1, .socket_lock = -1, .uid_lock = -1,
                                    .answer_fd = -1, .gateway.fd = -1, .peer_fd = -1,
                                    .metrics_fd = -1 };
}

int reexec_fds_each(const struct reexec_state *s, int (*fn)(int fd, const void *ctx), const void *ctx)
{
        const int top[] = { s->listen_fd, s->state_lock, s->socket_lock, s->uid_lock, s->gateway.fd, s->peer_fd,
                            s->metrics_fd };
        int r = 0;
        for (size_t i = 0; i < 7 && !r; i++)
                if (top[i] >= 0)
                        r = fn(top[i], ctx);
        for (size_t i = 0; i < s->n_clients && !r; i++)
                if (s->clients[i].fd >= 0)
                        r = fn(s->clients[i].fd, ctx);
        for (size_t i = 0; i < s->n && !r; i++) {
                const struct unit_saved *u = &s->units[i];
                if (u->state != UNIT_READY)
                        continue;
                const int fds[] = { u->rpc_fd, u->report_fd, u->out_fd, u->err_fd, u->pidfd, u->core_fd };
                for (size_t k = 0; k < 6 && !r; k++)
                        if (fds[k] >= 0)
                                r = fn(fds[k], ctx);
        }
        return r;
}

static int set_cloexec(int fd, const void *ctx)
{
        bool on = *(const bool *)ctx;
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0)
                fcntl(fd, F_SETFD, on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC);
        return 0;
}

void reexec_fds_inherit(const struct reexec_state *s, bool inherit)
{
        bool on = !inherit;
        reexec_fds_each(s, set_cloexec, &on);
}

static int same_fd(int fd, const void *ctx)
{
        return fd == *(const int *)ctx;
}

bool reexec_fd_kept(const struct reexec_state *s, int fd)
{
        return fd >= 0 && reexec_fds_each(s, same_fd, &fd) != 0;
}
