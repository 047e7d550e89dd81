/* unit_denials: what a gadget's sandbox reported its filter refused
 * (worker/sandbox/denials.c: at most one report each 100 ms, checked by
 * proto/validate.c). Each report is summed at once into the gadget's
 * table (denials.h: status, the metrics, the workshop), and over a window
 * of DENIALS_WINDOW_MS into one audit record per call (binding "seccomp",
 * the call as its op, outcome denied) and one note of the gadget's log.
 * Why this stays bounded whatever the program does: ten reports a second
 * at most, a window's records at most one per distinct call (DENIALS_KEPT),
 * and the audit's own budget per gadget on top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "denials.h"
#include "policy.h"
#include "spawn/spawn.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/timer.h"

/* The second's refusals: an audit record per call, one note in the log. */
static void write_window(struct unit *u, bool note_it)
{
        struct denials *w = u->denial_window;
        char note[600], count[24], first[24], last[24], detail[300];
        size_t at = 0;
        note[0] = '\0';
        for (size_t i = 0; i < w->n; i++) {
                const struct denial *d = &w->d[i];
                const char *call = denial_call(d), *answer = denial_answer(d);
                snprintf(count, sizeof count, "%llu", (unsigned long long)d->count);
                snprintf(first, sizeof first, "%llu", (unsigned long long)d->first_ms);
                snprintf(last, sizeof last, "%llu", (unsigned long long)d->last_ms);
                struct log_field f[] = { { "COUNT", count }, { "ERRNO", answer }, { "FIRST_MS", first },
                                         { "LAST_MS", last }, { "PATH", d->path } };
                snprintf(detail, sizeof detail, "%s refused (%s) %llu time%s%s%s", call, answer,
                         (unsigned long long)d->count, d->count == 1 ? "" : "s", d->path[0] ? ": " : "", d->path);
                /* Why the values are safe in a record: numbers, names from
                 * gadgetd's own tables, a path of printable ASCII checked
                 * by proto/validate.c. */
                struct audit_record rec = { .gadget = u->policy->name, .binding = "seccomp", .op = call,
                                            .outcome = d->error ? AUDIT_DENIED : AUDIT_ERROR, .detail = detail,
                                            .fields = f, .n_fields = d->path[0] ? 5 : 4 };
                audit_write(u->core->audit, &rec);
                int n = snprintf(note + at, sizeof note - at, "%s%s %s x%llu%s%s", i ? ", " : "", call, answer,
                                 (unsigned long long)d->count, d->path[0] ? " " : "", d->path);
                if (n > 0 && (size_t)n < sizeof note - at)
                        at += (size_t)n;
        }
        if (w->untracked && at < sizeof note)
                snprintf(note + at, sizeof note - at, ", %llu more", (unsigned long long)w->untracked);
        *w = (struct denials){ 0 };
        if (!note_it)
                return;
        char tagged[sizeof note + 64];
        snprintf(tagged, sizeof tagged, "gadgetd: refused system calls: %s (gadgetctl denials %s)", note,
                 u->policy->name);
        struct logbuf_meta m = { .time_ms = logbuf_now_ms(), .run = u->runs, .source = LOGBUF_GADGETD,
                                 .prio = (unsigned)L_WARN };
        if (logbuf_add(&u->log, &m, tagged, strlen(tagged)))
                u->hooks->log_added(u->hooks->arg, u, 1);
}

static void window_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        if (u->denial_window->n || u->denial_window->untracked)
                write_window(u, true);
}

void unit_denials_flush(struct unit *u)
{
        if (u->denial_window && (u->denial_window->n || u->denial_window->untracked))
                write_window(u, false); /* the unit goes: its log with it */
}

void unit_denied(struct unit_run *r, const struct spawn_denials *den)
{
        struct unit *u = r->u;
        if (!u->denials)
                u->denials = calloc(1, sizeof *u->denials);
        if (!u->denial_window)
                u->denial_window = calloc(1, sizeof *u->denial_window);
        if (!u->ev_denials)
                u->ev_denials = evtimer_new(u->core->base, window_cb, u);
        if (!u->denials || !u->denial_window || !u->ev_denials) {
                log_msg(L_WARN, u->policy->name, "refused system calls not counted: out of memory");
                return;
        }
        for (size_t i = 0; i < den->n; i++) {
                denials_add(u->denials, &den->calls[i]);
                denials_add(u->denial_window, &den->calls[i]);
        }
        if (!evtimer_pending(u->ev_denials, NULL))
                timer_arm_ms(u->ev_denials, DENIALS_WINDOW_MS);
}

void unit_learned(struct unit_run *r, const struct spawn_learned *l)
{
        struct learned *t = &r->u->learned;
        if (t->n == LEARNED_MAX || (!t->v && !(t->v = calloc(LEARNED_MAX, sizeof *t->v))))
                return;
        t->v[t->n++] = *l;
}

const struct learned *unit_learned_paths(const struct unit *u)
{
        return &u->learned;
}
