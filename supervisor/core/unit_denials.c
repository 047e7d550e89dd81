/* unit_denials: what a gadget's sandbox reported its filter refused
 * (worker/sandbox/denials.c: at most one report a second, checked by
 * proto/validate.c). Each report is summed into the gadget's table
 * (denials.h), written as one audit record per call (binding "seccomp",
 * the call as its op, outcome denied) and summed in one note of the
 * gadget's log. Why this stays bounded whatever the program does: the
 * init reports at most once a second, at most DENIALS_KEPT calls a
 * report in practice (there are that few distinct refusals), and the
 * audit's own budget per gadget holds on top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "denials.h"
#include "policy.h"
#include "spawn/spawn.h"
#include "system/audit.h"
#include "system/log.h"

void unit_denied(struct unit_run *r, const struct spawn_denials *den)
{
        struct unit *u = r->u;
        char note[600], count[24], first[24], last[24], detail[300];
        size_t at = 0;
        if (!u->denials && !(u->denials = calloc(1, sizeof *u->denials))) {
                log_msg(L_WARN, u->policy->name, "refused system calls not counted: out of memory");
                return;
        }
        for (size_t i = 0; i < den->n; i++) {
                const struct spawn_denial *in = &den->calls[i];
                denials_add(u->denials, in);
                struct denial d = { .nr = in->nr, .error = in->error };
                const char *call = denial_call(&d), *answer = denial_answer(&d);
                snprintf(count, sizeof count, "%llu", (unsigned long long)in->count);
                snprintf(first, sizeof first, "%llu", (unsigned long long)in->first_ms);
                snprintf(last, sizeof last, "%llu", (unsigned long long)in->last_ms);
                struct log_field f[] = { { "COUNT", count }, { "ERRNO", answer }, { "FIRST_MS", first },
                                         { "LAST_MS", last }, { "PATH", in->path } };
                snprintf(detail, sizeof detail, "%s refused (%s) %llu time%s%s%s", call, answer,
                         (unsigned long long)in->count, in->count == 1 ? "" : "s", in->path[0] ? ": " : "",
                         in->path);
                /* Why the values are safe in a record: numbers, names from
                 * gadgetd's own tables, a path of printable ASCII checked
                 * by proto/validate.c. */
                struct audit_record rec = { .gadget = u->policy->name, .binding = "seccomp", .op = call,
                                            .outcome = in->error ? AUDIT_DENIED : AUDIT_ERROR, .detail = detail,
                                            .fields = f, .n_fields = in->path[0] ? 5 : 4 };
                audit_write(u->core->audit, &rec);
                int n = snprintf(note + at, sizeof note - at, "%s%s %s x%llu%s%s", i ? ", " : "", call, answer,
                                 (unsigned long long)in->count, in->path[0] ? " " : "", in->path);
                if (n > 0 && (size_t)n < sizeof note - at)
                        at += (size_t)n;
        }
        char tagged[sizeof note + 64];
        snprintf(tagged, sizeof tagged, "gadgetd: refused system calls: %s (gadgetctl denials %s)", note,
                 u->policy->name);
        struct logbuf_meta m = { .time_ms = logbuf_now_ms(), .run = r->number, .source = LOGBUF_GADGETD,
                                 .prio = (unsigned)L_WARN };
        if (logbuf_add(&u->log, &m, tagged, strlen(tagged)))
                u->hooks->log_added(u->hooks->arg, u, 1);
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
