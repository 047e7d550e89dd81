/* lines: the logs and audit answers — a gadget's log lines from its ring,
 * its audit records from the audit log — as sources for stream.c, so that
 * an answer of any size is sent whole, in parts, as the client reads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/audit.h"
#include "client.h"
#include "control.h"
#include "core/core.h"
#include "contract.h"
#include "policy.h"
#include "stream.h"

/* The log lines numbered [next, end) of gadget name (numbered from its
 * first line, logbuf.total), read from its ring as parts are made. */
struct logs_source {
        struct core *core;
        char *name;
        unsigned long long next, end;
};

static void logs_free(void *arg)
{
        struct logs_source *s = arg;
        free(s->name);
        free(s);
}

static int logs_step(void *arg, struct stream *st, char *why, size_t len)
{
        struct logs_source *s = arg;
        struct unit *u = core_find(s->core, s->name);
        const struct logbuf *log = u ? unit_log(u) : NULL;
        if (!u || log->total < s->end) {
                snprintf(why, len, "gadget \"%s\" was unloaded while its log was sent", s->name);
                return -ENOENT;
        }
        unsigned long long oldest = log->total - log->count;
        if (s->next < oldest) {
                /* Never a silent gap: the caller learns the answer is not whole. */
                snprintf(why, len, "%llu lines of the log of \"%s\" were replaced by newer ones before they "
                         "could be sent", oldest - s->next, s->name);
                return -ESTALE;
        }
        for (; s->next < s->end; s->next++) {
                const char *line = logbuf_line(log, (size_t)(log->total - s->next), 0);
                int e = stream_add(st, line, strlen(line));
                if (e <= 0)
                        return e < 0 ? e : 1;
        }
        return 0;
}

void request_logs(struct client *cl, const Control__Request *q)
{
        struct core *core = client_env(cl)->core;
        struct unit *u = core_find(core, q->logs->name);
        struct logs_source *s;
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", q->logs->name);
                return;
        }
        const struct logbuf *log = unit_log(u);
        size_t n = q->logs->none ? 0 : q->logs->lines && q->logs->lines < log->count ? q->logs->lines
                                                                                     : log->count;
        if (!(s = calloc(1, sizeof *s)) || !(s->name = strdup(unit_name(u)))) {
                free(s);
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        s->core = core;
        s->end = log->total;
        s->next = s->end - n;
        struct stream_source src = { logs_step, logs_free, s };
        int e = stream_start(cl, q->id, &src, q->logs->follow ? STREAM_FOLLOW_LOGS : STREAM_ONCE, s->name);
        if (e < 0)
                client_error(cl, q->id, e == -EBUSY ? GADGET_EBUSY : GADGET_EINTERNAL, "%s",
                             e == -EBUSY ? "another answer is being sent on this connection" : "out of memory");
}

/* A gadget's audit records being read; quiet reads one to learn that it
 * has any, and sends none (-n 0). */
struct audit_source {
        struct audit_reader *r;
        struct core *core;
        char *name;
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

/* A name neither loaded nor in the audit log is no gadget's: not found,
 * as for every other command. */
static int audit_step(void *arg, struct stream *st, char *why, size_t len)
{
        struct audit_source *s = arg;
        s->st = st;
        int e = audit_reader_step(s->r, audit_emit, s);
        if (e < 0)
                snprintf(why, len, "cannot read the audit log: %s", strerror(-e));
        else if (e == 0 && !s->any && !core_find(s->core, s->name)) {
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
        audit_reader_free(s->r);
        free(s->name);
        free(s);
}

/* The gadget's audit records, from the audit log and its rotated files;
 * then, with follow, each new record as it is written. The gadget need not
 * be loaded any more. */
void request_audit(struct client *cl, const Control__Request *q)
{
        struct audit *a = core_audit(client_env(cl)->core);
        struct audit_source *s = calloc(1, sizeof *s);
        if (!s || !(s->name = strdup(q->audit->name))) {
                free(s);
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        s->core = client_env(cl)->core;
        s->quiet = q->audit->none;
        size_t n = s->quiet ? 1 : q->audit->lines;
        int e = audit_reader_new(audit_dir(a), audit_keep(a), q->audit->name, n, &s->r);
        if (e < 0) {
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
