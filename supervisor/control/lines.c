/* lines: the logs and audit answers — a gadget's log lines from its ring,
 * its audit records from the audit log — as sources for stream.c, so that
 * an answer of any size is sent whole, in parts, as the client reads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/audit.h"
#include "store/store.h"
#include "client.h"
#include "control.h"
#include "core/core.h"
#include "contract.h"
#include "policy.h"
#include "stream.h"

/* One gadget's part of a logs answer: its lines numbered [next, end)
 * (numbered from its first line, logbuf.total), read from its ring as
 * parts are made. end is fixed when the answer starts: later lines come
 * live (with follow). */
struct logs_gadget {
        char *name;
        unsigned long long next, end;
};

/* A logs answer: one gadget's lines, or (all) every gadget's in turn,
 * those before since_ms left out. */
struct logs_source {
        struct core *core;
        struct logs_gadget *g;    /* n_alloc of them (each filled once made, oldest loaded first) */
        size_t n, n_alloc, at;
        int64_t since_ms;
        bool all;
};

static void logs_free(void *arg)
{
        struct logs_source *s = arg;
        for (size_t i = 0; i < s->n_alloc; i++)
                free(s->g[i].name);
        free(s->g);
        free(s);
}

/* Where u's answer starts: its last `lines` lines (0: all) of those since
 * since_ms, none with none. A walk of the ring, at most LOGBUF_LINES. */
static void logs_range(const struct unit *u, const Control__Logs *q, struct logs_gadget *g)
{
        const struct logbuf *log = unit_log(u);
        size_t want = q->none ? 0 : q->lines ? q->lines : log->count, taken = 0, i = log->count;
        for (; i > 0 && taken < want; i--)
                taken += logbuf_line(log, log->count, i - 1)->time_ms >= q->since_ms;
        g->end = log->total;
        g->next = log->total - (log->count - i);
}

static int logs_step(void *arg, struct stream *st, char *why, size_t len)
{
        struct logs_source *s = arg;
        for (; s->at < s->n; s->at++) {
                struct logs_gadget *g = &s->g[s->at];
                struct unit *u = core_find(s->core, g->name);
                const struct logbuf *log = u ? unit_log(u) : NULL;
                if (!u || log->total < g->end) {
                        if (s->all)
                                continue; /* unloaded (and maybe loaded again) since: gone from the answer */
                        snprintf(why, len, "gadget \"%s\" was unloaded while its log was sent", g->name);
                        return -ENOENT;
                }
                unsigned long long oldest = log->total - log->count;
                if (g->next < oldest) {
                        /* Never a silent gap: the caller learns the answer is not whole. */
                        snprintf(why, len, "%llu lines of the log of \"%s\" were replaced by newer ones before "
                                 "they could be sent", oldest - g->next, g->name);
                        return -ESTALE;
                }
                for (; g->next < g->end; g->next++) {
                        const struct logbuf_entry *l = logbuf_line(log, (size_t)(log->total - g->next), 0);
                        if (l->time_ms < s->since_ms)
                                continue;
                        struct stream_entry e = { .gadget = g->name, .text = l->text, .time_ms = l->time_ms,
                                                  .run = l->run, .source = l->source, .prio = l->prio };
                        int r = stream_add_entry(st, &e);
                        if (r <= 0)
                                return r < 0 ? r : 1;
                }
        }
        return 0;
}

/* The gadgets of the answer: q's, or (all) every one loaded now, each with
 * its range. 0, -ENOENT (no such gadget) or -ENOMEM. */
static int logs_gadgets(struct logs_source *s, const Control__Logs *q)
{
        size_t n = 0;
        for (struct unit *u = core_first(s->core); u; u = unit_next(u))
                n += q->all || strcmp(unit_name(u), q->name) == 0;
        if (n == 0 && !q->all)
                return -ENOENT;
        if (!(s->g = calloc(n + 1, sizeof *s->g)))
                return -ENOMEM;
        s->n_alloc = n;
        /* Oldest loaded first: the list is newest first, so from its end. */
        for (struct unit *u = core_first(s->core); u; u = unit_next(u)) {
                if (!q->all && strcmp(unit_name(u), q->name) != 0)
                        continue;
                struct logs_gadget *g = &s->g[n - 1 - s->n];
                if (!(g->name = strdup(unit_name(u))))
                        return -ENOMEM;
                logs_range(u, q, g);
                s->n++;
        }
        return 0;
}

void request_logs(struct client *cl, const Control__Request *q)
{
        struct core *core = client_env(cl)->core;
        struct logs_source *s = calloc(1, sizeof *s);
        int e = s ? 0 : -ENOMEM;
        if (s) {
                s->core = core;
                s->since_ms = q->logs->since_ms;
                s->all = q->logs->all;
                e = logs_gadgets(s, q->logs);
        }
        if (e < 0) {
                if (e == -ENOENT)
                        client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", q->logs->name);
                else
                        client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                if (s)
                        logs_free(s);
                return;
        }
        struct stream_source src = { logs_step, logs_free, s };
        e = stream_start(cl, q->id, &src, q->logs->follow ? STREAM_FOLLOW_LOGS : STREAM_ONCE,
                         q->logs->all ? NULL : q->logs->name);
        if (e < 0)
                client_error(cl, q->id, e == -EBUSY ? GADGET_EBUSY : GADGET_EINTERNAL, "%s",
                             e == -EBUSY ? "another answer is being sent on this connection" : "out of memory");
}

/* A gadget's audit records being read: from the store (every node's)
 * when there is one and it answers, else from this node's audit.log.
 * quiet reads one to learn that it has any, and sends none (-n 0). */
struct audit_source {
        struct audit_reader *r;         /* the file; NULL while reading the store */
        struct audit *audit;
        struct kvpg_audit *au;          /* the store; NULL once done with it */
        struct kvpg_audit_read rd;
        PGresult *page;                 /* the page being sent */
        int row;
        bool waiting;                   /* a page was asked */
        int page_err;
        char page_why[200];
        struct core *core;
        char *name;
        size_t n;                       /* -n */
        struct stream *st;
        bool quiet, any;
};

/* stream_add as audit_emit_fn. */
static int audit_emit(void *arg, const char *line, size_t len)
{
        struct audit_source *s = arg;
        int e = s->quiet ? 1 : stream_add(s->st, line, len);
        if (e > 0)
                s->any = true;
        return e;
}

/* A page of the store came (or not): the stream goes on. */
static void store_page(struct kvpg_audit_read *rd, PGresult *res, int err, const char *why)
{
        struct audit_source *s = rd->arg;
        s->waiting = false;
        s->page = res;
        s->row = 0;
        s->page_err = err;
        snprintf(s->page_why, sizeof s->page_why, "%s", why ? why : "");
        stream_kick(s->st);
}

/* The store cannot answer (why): this node's audit.log instead, said in
 * a note; or, if part of the answer came from the store, an error. */
static int store_failed(struct audit_source *s, const char *why, char *out, size_t len)
{
        char note[400];
        s->au = NULL;
        if (s->any) {
                snprintf(out, len, "the store was lost while the audit records were sent: %s", why);
                return -EIO;
        }
        snprintf(note, sizeof note, "the store is unreachable (%s): these are this node's records only, from its "
                 "audit.log", why);
        int e = audit_reader_new(audit_dir(s->audit), audit_keep(s->audit), s->name, s->n, &s->r);
        if (e < 0) {
                snprintf(out, len, "cannot read the audit log: %s", strerror(-e));
                return e;
        }
        return stream_note(s->st, note) < 0 ? -ENOMEM : 1;
}

/* One slice of the store's answer: the rows of the page that came, or
 * the next page asked. */
static int store_step(struct audit_source *s, char *why, size_t len)
{
        if (s->waiting)
                return STREAM_WAIT;
        if (s->page_err)
                return store_failed(s, s->page_why, why, len);
        if (s->page) {
                int rows = PQntuples(s->page);
                for (; s->row < rows; s->row++) {
                        const char *line = PQgetvalue(s->page, s->row, 1);
                        int e = audit_emit(s, line, (size_t)PQgetlength(s->page, s->row, 1));
                        if (e <= 0)
                                return e < 0 ? e : 1;
                }
                bool last = rows < KVPG_AUDIT_PAGE;
                PQclear(s->page);
                s->page = NULL;
                if (last) {
                        s->au = NULL;
                        return 0;
                }
        }
        char reason[200];
        if (kvpg_audit_read_next(s->au, &s->rd, reason, sizeof reason) < 0)
                return store_failed(s, reason, why, len);
        s->waiting = true;
        return STREAM_WAIT;
}

/* A name neither loaded nor in the audit log is no gadget's: not found,
 * as for every other command. */
static int audit_step(void *arg, struct stream *st, char *why, size_t len)
{
        struct audit_source *s = arg;
        int e;
        s->st = st;
        if (s->au) {
                e = store_step(s, why, len);
        } else {
                e = audit_reader_step(s->r, audit_emit, s);
                if (e < 0)
                        snprintf(why, len, "cannot read the audit log: %s", strerror(-e));
        }
        if (e == 0 && !s->any && !core_find(s->core, s->name)) {
                snprintf(why, len, "no gadget named \"%s\"", s->name);
                e = -ENOENT;
        }
        return e;
}

static void audit_source_free(void *arg)
{
        struct audit_source *s = arg;
        if (!s)
                return;
        /* Every read waiting is answered when the store closes, so a
         * source still waiting has a store to cancel with. */
        if (s->waiting)
                kvpg_audit_read_cancel(s->au, &s->rd);
        PQclear(s->page);
        audit_reader_free(s->r);
        free(s->name);
        free(s);
}

/* The gadget's audit records — with Store=postgresql from the store,
 * every node's; else (or when the store does not answer) from the audit
 * log and its rotated files — then, with follow, each new record as this
 * node writes it. The gadget need not be loaded any more. */
void request_audit(struct client *cl, const Control__Request *q)
{
        struct audit *a = core_audit(client_env(cl)->core);
        struct audit_source *s = calloc(1, sizeof *s);
        int e = 0;
        if (!s || !(s->name = strdup(q->audit->name))) {
                free(s);
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        s->core = client_env(cl)->core;
        s->audit = a;
        s->quiet = q->audit->none;
        s->n = s->quiet ? 1 : q->audit->lines;
        s->au = core_audit_store(s->core);
        if (s->au) {
                /* Checked name: at most GADGET_NAME_MAX bytes (validator). */
                snprintf(s->rd.gadget, sizeof s->rd.gadget, "%s", s->name);
                s->rd.last = s->n;
                s->rd.upto = -1;
                s->rd.done = store_page;
                s->rd.arg = s;
        } else if ((e = audit_reader_new(audit_dir(a), audit_keep(a), q->audit->name, s->n, &s->r)) < 0) {
                audit_source_free(s);
                client_error(cl, q->id, GADGET_EFAILED, "cannot read the audit log: %s", strerror(-e));
                return;
        }
        struct stream_source src = { audit_step, audit_source_free, s };
        e = stream_start(cl, q->id, &src, q->audit->follow ? STREAM_FOLLOW_AUDIT : STREAM_ONCE, q->audit->name);
        if (e < 0)
                client_error(cl, q->id, e == -EBUSY ? GADGET_EBUSY : GADGET_EINTERNAL, "%s",
                             e == -EBUSY ? "another answer is being sent on this connection" : "out of memory");
}
