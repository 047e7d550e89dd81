/* audit: JSON lines, written with one write() each (O_APPEND), within each
 * gadget's budget, rotated at a size; failures counted and reported. */
#include "audit.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <event2/event.h>

#include "audit_budget.h"
#include "contract.h"
#include "log.h"
#include "policy.h"
#include "monotime.h"
#include "timer.h"

#define DETAIL_MAX 1024        /* longer details are cut: a record stays small */
#define AUDIT_TICK_MS 100       /* how often the budget's windows are looked at while any is open */
#define AUDIT_FAILED_TICK_MS 1000 /* after a record could not be written: when the loss is told */

struct audit {
        int fd;                 /* -1 until the first record */
        char *dir;
        struct audit_config cfg;
        uint64_t size;          /* of audit.log as written */
        struct audit_budget budget;
        struct event *ev_tick;  /* the end of the budget windows */
        uint64_t unwritten;     /* records the file refused, since the start */
        bool rotate_failing;    /* the last rotation failed (logged once) */
        int last_error;
        void (*listener)(void *arg, const char *gadget, const char *line);
        void *listener_arg;
        char *node;             /* with a shared store: this node, in every line */
        uint64_t seq;           /* with it: the last record's sequence */
        void (*store)(void *arg, const char *gadget, const char *line);
        void *store_arg;
        void (*dropped)(void *arg, const char *gadget, enum audit_drop why);
        void *dropped_arg;
};

static void dropped(struct audit *a, const char *gadget, enum audit_drop why)
{
        if (a->dropped && gadget)
                a->dropped(a->dropped_arg, gadget, why);
}

const char *audit_outcome_name(enum audit_outcome o)
{
        static const char *const names[AUDIT_N_OUTCOMES] = { "ok", "denied", "error", "not_found" };
        return names[o];
}

enum audit_outcome audit_outcome_of(int code)
{
        return !code ? AUDIT_OK : code == GADGET_EDENIED ? AUDIT_DENIED : code == GADGET_ENOTFOUND ? AUDIT_NOT_FOUND
                                                                                                 : AUDIT_ERROR;
}

int audit_config_key(struct audit_config *cfg, const char *key, const char *value, char *why, size_t len)
{
        uint64_t v;
        if (strcmp(key, "RecordsPerSecond") == 0) {
                if (policy_parse_count(value, &v) < 0 || v == 0 || (v > UINT32_MAX && v != POLICY_UNLIMITED))
                        goto bad;
                cfg->rate = v == POLICY_UNLIMITED ? 0 : (uint32_t)v; /* infinity: no budget */
                return 0;
        }
        if (strcmp(key, "MaxFileSize") == 0) {
                if (policy_parse_size(value, &v) < 0 || v < 4096)
                        goto bad;
                cfg->max_size = v;
                return 0;
        }
        if (strcmp(key, "StoreKeepDays") == 0) {
                if (policy_parse_count(value, &v) < 0 || v == 0 || v > AUDIT_STORE_KEEP_DAYS_MAX)
                        goto bad;
                cfg->store_keep_days = (uint32_t)v;
                return 0;
        }
        if (strcmp(key, "KeepFiles") == 0) {
                if (policy_parse_count(value, &v) < 0 || v > AUDIT_KEEP_MAX)
                        goto bad;
                cfg->keep = (uint32_t)v;
                return 0;
        }
        snprintf(why, len, "unknown key \"%.64s\" in [Audit] (RecordsPerSecond=, MaxFileSize=, KeepFiles=, StoreKeepDays=)", key);
        return -EINVAL;
bad:
        snprintf(why, len, "[Audit] %s=\"%.64s\": want %s", key, value,
                 strcmp(key, "MaxFileSize") == 0 ? "a size of at least 4K" :
                 strcmp(key, "KeepFiles") == 0 ? "a count from 0 to 32" :
                 strcmp(key, "StoreKeepDays") == 0 ? "a number of days from 1 to 36500" : "a count from 1, or infinity");
        return -EINVAL;
}

/* MESSAGE_ID= of audit records: `journalctl MESSAGE_ID=...` lists them all. */
#define AUDIT_MESSAGE_ID "MESSAGE_ID=4f0b1d6c8e2a4c7b9a3e5d1f2c6b8a90"

/* The record in gadgetd's log: "[GADGET] audit LINE" (line its JSON text),
 * and under journald the fields BINDING, OP, OUTCOME, BYTES, DURATION_US,
 * CALLER_UID (a local user's call), DETAIL (escaped: it may carry text a gadget chose, a key, a URL). */
static void log_record(const struct audit_record *r, const char *line)
{
        char text[2048], detail[1024], bytes[24], dur[24], uid[16];
        snprintf(text, sizeof text, "audit %s", line);
        snprintf(uid, sizeof uid, "%u", (unsigned)r->uid);
        snprintf(bytes, sizeof bytes, "%llu", (unsigned long long)r->bytes);
        snprintf(dur, sizeof dur, "%llu", (unsigned long long)r->duration_us);
        const struct log_field f[] = {
                { "BINDING", r->binding }, { "OP", r->op }, { "OUTCOME", audit_outcome_name(r->outcome) },
                { "BYTES", bytes }, { "DURATION_US", dur }, { "CALLER_UID", r->has_uid ? uid : NULL },
                { "DETAIL", r->detail ? log_escape(r->detail, strlen(r->detail), detail, sizeof detail) : NULL },
        };
        log_fields(r->outcome == AUDIT_DENIED ? L_WARN : L_INFO, r->gadget, AUDIT_MESSAGE_ID, f,
                   sizeof f / sizeof *f, text);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg);

int audit_open(const char *state_dir, const struct audit_config *cfg, struct event_base *base,
               struct audit **out)
{
        struct audit *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->fd = -1;
        a->cfg = *cfg;
        a->budget.rate = cfg->rate;
        if (!(a->dir = strdup(state_dir)) || (base && !(a->ev_tick = evtimer_new(base, tick_cb, a)))) {
                free(a->dir);
                free(a);
                return -ENOMEM;
        }
        *out = a;
        return 0;
}

const char *audit_dir(const struct audit *a)
{
        return a->dir;
}

uint32_t audit_keep(const struct audit *a)
{
        return a->cfg.keep;
}

uint64_t audit_summarized(const struct audit *a)
{
        return a ? a->budget.summarized : 0;
}

uint64_t audit_unwritten(const struct audit *a, int *last_error)
{
        *last_error = a ? a->last_error : 0;
        return a ? a->unwritten : 0;
}

/* The file is opened at the first record, so a `gadgetd run` of a gadget
 * without bindings leaves no trace in the state directory. */
static int open_file(struct audit *a)
{
        char path[4096];
        struct stat st;
        int e;
        if (a->fd >= 0)
                return 0;
        if ((e = audit_file_path(a->dir, 0, path, sizeof path)) < 0)
                return e;
        /* Read too: its last byte (below). The directory is made only
         * when it is missing (it is the state directory, there already
         * in a gadgetd run: a mkdir saved). */
        a->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (a->fd < 0 && errno == ENOENT) {
                if (mkdir(a->dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                a->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        }
        if (a->fd < 0)
                return -errno;
        a->size = fstat(a->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        /* A last line without its newline (a write cut short by a
         * SIGKILL or a full disk, not taken back) is ended first: the
         * next record must start a line of its own, or it would be lost
         * with the torn one to whatever reads the file. */
        char last;
        if (a->size > 0 && pread(a->fd, &last, 1, (off_t)a->size - 1) == 1 && last != '\n' &&
            write(a->fd, "\n", 1) == 1)
                a->size++;
        return 0;
}

/* audit.log becomes audit.log.1, .1 becomes .2, ..., the oldest beyond
 * KeepFiles= is removed; the next record opens a new audit.log. Readers
 * keep the files they opened (audit_read.c), whatever their names now. */
static int rotate(struct audit *a)
{
        char from[4096], to[4096];
        int e = 0;
        close(a->fd);
        a->fd = -1;
        if (a->cfg.keep == 0) {
                if (audit_file_path(a->dir, 0, from, sizeof from) == 0 && unlink(from) < 0 && errno != ENOENT)
                        e = -errno;
                return e;
        }
        for (uint32_t k = a->cfg.keep; k >= 1; k--) {
                if (audit_file_path(a->dir, k - 1, from, sizeof from) < 0 ||
                    audit_file_path(a->dir, k, to, sizeof to) < 0)
                        return -ENAMETOOLONG;
                if (rename(from, to) < 0 && errno != ENOENT)
                        e = -errno;
        }
        return e;
}

/* Appends line (n bytes, newline included) to the file. 0 or -errno; a
 * short write is taken back, so the next record starts a line. */
static int append(struct audit *a, const char *line, size_t n)
{
        int e;
        if (a->fd >= 0 && a->size > 0 && a->size + n > a->cfg.max_size) {
                /* A rotation that fails leaves audit.log growing: better than
                 * losing records; said once until a rotation works again. */
                e = rotate(a);
                if (e < 0 && !a->rotate_failing)
                        log_msg(L_ERR, NULL, "cannot rotate %s/audit.log: %s", a->dir, strerror(-e));
                a->rotate_failing = e < 0;
        }
        if ((e = open_file(a)) < 0)
                return e;
        /* One write with O_APPEND: records never interleave. */
        ssize_t w = write(a->fd, line, n);
        if (w == (ssize_t)n) {
                a->size += n;
                return 0;
        }
        e = w < 0 ? -errno : -ENOSPC;
        if (w > 0 && ftruncate(a->fd, (off_t)a->size) < 0)
                a->size += (uint64_t)w; /* cannot take it back: at least count it */
        return e;
}

/* The civil date of a day counted from 1970-01-01, in the proleptic
 * Gregorian calendar (H. Hinnant's days_from_civil, inverted). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
        z += 719468;
        int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        unsigned doe = (unsigned)(z - era * 146097);                          /* [0, 146096] */
        unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
        unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
        unsigned mp = (5 * doy + 2) / 153;                                     /* [0, 11], from March */
        *d = doy - (153 * mp + 2) / 5 + 1;
        *m = mp < 10 ? mp + 3 : mp - 9;
        *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static void now_rfc3339(char *buf, size_t len)
{
        struct timeval tv;
        gettimeofday(&tv, NULL);
        /* Reckoned here, not by gmtime_r and strftime: glibc reads the
         * local time zone at its first conversion of a time even to UTC
         * (tzset: /etc/localtime, seven system calls in a one-shot gadgetd
         * run), which a time in UTC never needs. */
        int64_t t = (int64_t)tv.tv_sec, days = t >= 0 ? t / 86400 : (t - 86399) / 86400, y;
        unsigned sod = (unsigned)(t - days * 86400), m, d;
        civil_from_days(days, &y, &m, &d);
        snprintf(buf, len, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", (unsigned)y % 10000u, m % 100u, d % 100u,
                 sod / 3600 % 100u, sod / 60 % 60u, sod % 60u, (unsigned)(tv.tv_usec / 1000) % 1000u);
}

/* One more field of a record: NAME as name, a value of digits alone as a
 * number (RUN=2: "run": 2). */
static void add_field(json_t *o, const struct log_field *f)
{
        char key[32];
        size_t i = 0, digits = strspn(f->value ? f->value : "", "0123456789");
        if (!f->value)
                return;
        for (; f->name[i] && i + 1 < sizeof key; i++)
                key[i] = (char)tolower((unsigned char)f->name[i]);
        key[i] = '\0';
        if (strcmp(key, "seq") == 0)
                return; /* the record's own (audit_seq_of reads the first) */
        if (digits > 0 && digits < 19 && !f->value[digits])
                json_object_set_new(o, key, json_integer((json_int_t)strtoll(f->value, NULL, 10)));
        else
                json_object_set_new(o, key, json_string(f->value));
}

/* Writes r (with "summarized": count if count > 0), whatever the budget. */
static void put_record(struct audit *a, const struct audit_record *r, uint64_t count)
{
        char when[40], detail[DETAIL_MAX + 1];
        now_rfc3339(when, sizeof when);
        /* "time" then "gadget" first, always: audit_line_of reads only that. */
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "time", when, "gadget", r->gadget,
                              "binding", r->binding, "op", r->op, "outcome", audit_outcome_name(r->outcome),
                              "bytes", (json_int_t)r->bytes, "duration_us", (json_int_t)r->duration_us);
        if (!o)
                return;
        if (a && a->node) {
                json_object_set_new(o, "node", json_string(a->node));
                json_object_set_new(o, "seq", json_integer((json_int_t)++a->seq));
        }
        if (r->has_uid)
                json_object_set_new(o, "uid", json_integer((json_int_t)r->uid));
        for (size_t i = 0; i < r->n_fields; i++)
                add_field(o, &r->fields[i]);
        if (count)
                json_object_set_new(o, "summarized", json_integer((json_int_t)count));
        if (r->detail) {
                snprintf(detail, sizeof detail, "%s", r->detail);
                json_object_set_new(o, "detail", json_string(detail));
        }
        if (r->trace)
                json_object_set_new(o, "trace", json_string(r->trace));
        char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!line)
                return;
        if (!r->logged)
                log_record(r, line);
        if (!a) {
                free(line);
                return;
        }
        size_t n = strlen(line);
        line[n] = '\n';
        int e = append(a, line, n + 1);
        line[n] = '\0';
        if (e < 0) {
                a->unwritten++;
                a->last_error = e;
                audit_budget_failed(&a->budget, r->gadget, e, monotime_ms());
                dropped(a, r->gadget, AUDIT_DROP_UNWRITTEN);
                if (a->ev_tick && !evtimer_pending(a->ev_tick, NULL))
                        timer_arm_ms(a->ev_tick, AUDIT_FAILED_TICK_MS);
        }
        if (a->store)
                a->store(a->store_arg, r->gadget, line);
        if (a->listener)
                a->listener(a->listener_arg, r->gadget, line);
        free(line);
}

/* A window is over: its summaries are written, its failures logged once. */
static void window_ended(void *arg, const struct audit_window *w)
{
        struct audit *a = arg;
        char detail[512];
        for (size_t i = 0; w->sums && i < AUDIT_SUMMARY_SLOTS; i++) {
                const struct audit_summary *s = &w->sums[i];
                bool other = i >= AUDIT_SUMMARIES_MAX;
                if ((i >= w->n_sums && !other) || !s->count)
                        continue;
                snprintf(detail, sizeof detail, "%llu more calls of %s%s%s %s within 1s, over the budget of %u "
                         "records per second ([Audit] RecordsPerSecond=)", (unsigned long long)s->count,
                         other ? "other bindings" : s->binding, other ? "" : ".", other ? "" : s->op,
                         audit_outcome_name(s->outcome), a->cfg.rate);
                struct audit_record r = {
                        .gadget = w->gadget, .binding = other ? "(other)" : s->binding,
                        .op = other ? "(other)" : s->op, .outcome = s->outcome, .bytes = s->bytes,
                        .duration_us = s->duration_us, .detail = detail,
                };
                put_record(a, &r, s->count);
        }
        if (w->unwritten)
                log_msg(L_ERR, w->gadget, "%llu audit records could not be written to %s/audit.log: %s "
                        "(they are in this log only)", (unsigned long long)w->unwritten, a->dir,
                        strerror(-w->error));
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
        struct audit *a = arg;
        if (audit_budget_flush(&a->budget, monotime_ms(), false, window_ended, a))
                timer_arm_ms(a->ev_tick, AUDIT_TICK_MS);
}

void audit_write(struct audit *a, const struct audit_record *r)
{
        if (!a) {
                put_record(NULL, r, 0); /* gadgetd's log only */
                return;
        }
        int take = audit_budget_take(&a->budget, r, r->now_ms ? r->now_ms : monotime_ms());
        if (a->ev_tick && !LIST_EMPTY(&a->budget.windows) && !evtimer_pending(a->ev_tick, NULL))
                timer_arm_ms(a->ev_tick, AUDIT_TICK_MS);
        if (take != 0)
                put_record(a, r, 0);
        else
                dropped(a, r->gadget, AUDIT_DROP_SUMMARIZED);
}

void audit_close(struct audit *a)
{
        if (!a)
                return;
        audit_budget_flush(&a->budget, monotime_ms(), true, window_ended, a);
        audit_budget_free(&a->budget);
        if (a->ev_tick)
                event_free(a->ev_tick);
        if (a->fd >= 0)
                close(a->fd);
        free(a->node);
        free(a->dir);
        free(a);
}

void audit_listen(struct audit *a, void (*fn)(void *arg, const char *gadget, const char *line), void *arg)
{
        a->listener = fn;
        a->listener_arg = arg;
}

void audit_on_drop(struct audit *a, void (*fn)(void *arg, const char *gadget, enum audit_drop why), void *arg)
{
        a->dropped = fn;
        a->dropped_arg = arg;
}

void audit_set_store(struct audit *a, const char *node, void (*fn)(void *arg, const char *gadget, const char *line),
                     void *arg)
{
        free(a->node);
        a->node = node ? strdup(node) : NULL; /* without it, lines only lack the node */
        /* The sequence goes on from the last record in the files, so a
         * restarted node never numbers a record as an earlier one (the
         * store keeps one row per node and sequence: a reused number
         * would be dropped there); and from the clock's microseconds
         * at least, so that a state directory emptied or lost does not
         * start it again from 1 either. */
        struct timeval tv;
        gettimeofday(&tv, NULL);
        uint64_t last = audit_last_seq(a->dir, a->cfg.keep);
        uint64_t now = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
        a->seq = last > now ? last : now;
        /* An audit.log there already is opened now, so that a torn last
         * line is ended before the store's catch-up reads it (a line
         * without its newline is taken for a write in progress). */
        char path[4096];
        struct stat st;
        if (audit_file_path(a->dir, 0, path, sizeof path) == 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
                open_file(a);
        a->store = fn;
        a->store_arg = arg;
}
