/* unit_lifecycle: a gadget's lifecycle events — started, ready, exited,
 * restarted, parked, idle, woken, moved, lease lost — each one line of
 * gadgetd's log (under journald an entry with the event's own MESSAGE_ID
 * and fields: GADGET=, RUN=, PID=, EXIT_STATUS= or SIGNAL= ...), an audit
 * record of the gadget (binding "lifecycle", the event as its op, the
 * fields lower-cased), and a line of the gadget's log ring (stream
 * gadgetd). The MESSAGE_IDs are fixed: packaging/gadgetd.catalog explains
 * each, docs/operating.md lists them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "core_int.h"
#include "policy.h"
#include "system/audit.h"
#include "system/log.h"

static const struct {
        const char *name;        /* the audit record's op, and EVENT= */
        const char *message_id;
} events[LC_N] = {
        [LC_STARTED] = { "started", "MESSAGE_ID=dd0e4b28462e48aeba51d00dae8c243d" },
        [LC_READY] = { "ready", "MESSAGE_ID=a4dd72216bd54a6a97aa42018d927f9a" },
        [LC_EXITED] = { "exited", "MESSAGE_ID=96be81863a274c8abd5206253964bc9f" },
        [LC_RESTARTED] = { "restarted", "MESSAGE_ID=da6b3b130beb45879e07d6916a6e323d" },
        [LC_PARKED] = { "parked", "MESSAGE_ID=4ab4b2c4e5f34b268c4f037016ad8e3e" },
        [LC_IDLE] = { "idle", "MESSAGE_ID=d32bc8567aa7451286b43d17e08b9576" },
        [LC_WOKEN] = { "woken", "MESSAGE_ID=5d85aa63ab0e43778a2d20094d2f1b69" },
        [LC_MOVED] = { "moved", "MESSAGE_ID=1a47ebda54b5467583197a5c2257c7f9" },
        [LC_LEASE_LOST] = { "lease_lost", "MESSAGE_ID=b6ded5198323488fbca2b9d3e9f06815" },
};

void unit_lifecycle(struct unit *u, const struct unit_lifecycle_info *in, const char *fmt, ...)
{
        enum { MAX_FIELDS = 9 };
        char text[400], run[16], pid[16], status[16], delay[24], tagged[420];
        char trace[SANDBOX_CRASH_FRAMES_MAX * (SANDBOX_CRASH_FRAME_MAX + 3) + 1];
        struct log_field f[MAX_FIELDS];
        size_t n = 0;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        f[n++] = (struct log_field){ "EVENT", events[in->event].name };
        if (in->run) {
                snprintf(run, sizeof run, "%u", in->run);
                f[n++] = (struct log_field){ "RUN", run };
        }
        if (in->pid > 0) {
                snprintf(pid, sizeof pid, "%d", (int)in->pid);
                f[n++] = (struct log_field){ "PID", pid };
        }
        if (in->has_status && WIFEXITED(in->status)) {
                snprintf(status, sizeof status, "%d", WEXITSTATUS(in->status));
                f[n++] = (struct log_field){ "EXIT_STATUS", status };
        } else if (in->has_status && WIFSIGNALED(in->status)) {
                const char *s = sigabbrev_np(WTERMSIG(in->status));
                snprintf(status, sizeof status, "%s%s", s ? "SIG" : "", s ? s : "unknown");
                f[n++] = (struct log_field){ "SIGNAL", status };
        }
        if (in->delay_ms >= 0 && in->event == LC_RESTARTED) {
                snprintf(delay, sizeof delay, "%lld", (long long)in->delay_ms);
                f[n++] = (struct log_field){ "DELAY_MS", delay };
        }
        if (in->node)
                f[n++] = (struct log_field){ "NODE", in->node };
        /* A crash's backtrace, innermost first, " | " between frames. Why
         * it is safe in a record: the frames were checked printable ASCII
         * of bounded length (proto/validate.c). */
        if (in->crash && in->crash->n_frames) {
                size_t k = 0;
                trace[0] = '\0';
                for (size_t i = 0; i < in->crash->n_frames; i++)
                        k += (size_t)snprintf(trace + k, sizeof trace - k, "%s%s", i ? " | " : "",
                                              in->crash->frames[i]);
                f[n++] = (struct log_field){ "BACKTRACE", trace };
        }
        log_fields(in->level, u->policy->name, events[in->event].message_id, f, n, text);
        /* Why the fields' values are safe in a record: numbers, a signal's
         * name, a node's name (checked as gadget names are); the text is
         * gadgetd's own, quoting what it quotes in its log. */
        struct audit_record rec = { .gadget = u->policy->name, .binding = "lifecycle", .op = events[in->event].name,
                                    .outcome = in->failed ? AUDIT_ERROR : AUDIT_OK, .detail = text,
                                    .fields = f + 1, .n_fields = n - 1, .logged = true };
        audit_write(u->core->audit, &rec);
        /* In its log, an event of no process (idle, woken) goes with its last. */
        struct logbuf_meta m = { .time_ms = logbuf_now_ms(), .run = in->run ? in->run : u->runs,
                                 .source = LOGBUF_GADGETD,
                                 .prio = (unsigned)in->level };
        snprintf(tagged, sizeof tagged, "gadgetd: %s", text);
        if (logbuf_add(&u->log, &m, tagged, strlen(tagged)))
                u->hooks->log_added(u->hooks->arg, u, 1);
}
