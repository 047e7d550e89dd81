/* schedule: the calls of a gadget's Schedule= lines (policy/calendar.h),
 * delivered as alarms are (alarms_int.h): one at a time per gadget,
 * through the one door for calls, caller "schedule". A failing scheduled
 * call is tried again after backoff_delay_ms of its failures until its
 * next occurrence comes: then that one is called instead (calls never
 * stack up). Nothing of it is stored: occurrences that passed while
 * gadgetd was down, or while the gadget could not be called, are skipped. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alarms_int.h"
#include "bindings/bindings.h"
#include "calendar.h"
#include "contract.h"
#include "core/backoff.h"
#include "core/core.h"
#include "policy.h"
#include "system/audit.h"
#include "system/log.h"
#include "value.h"

/* Schedule i's first occurrence after now (ms), -1 if it has none. */
static int64_t next_after(const struct policy_schedule *s, int64_t now_ms)
{
        int64_t next;
        if (calendar_next(s->cal, now_ms / 1000, &next) < 0)
                return -1;
        return next * 1000;
}

/* Slot i waits for the schedule's next occurrence after now. */
static void advance(struct unit_alarms *a, size_t i)
{
        struct sched_slot *s = &a->sched[i];
        s->at = s->due = next_after(&unit_policy(a->u)->schedules[i], bind_alarm_now_ms());
        s->attempts = 0;
}

int schedule_slots(struct unit_alarms *a)
{
        const struct policy *p = unit_policy(a->u);
        int64_t now = bind_alarm_now_ms();
        /* Why a flag and not the policy's address: a policy allocated
         * after an earlier one was freed may have its address. */
        if (!a->sched_made || a->sched_stale) {
                struct sched_slot *s = calloc(p->n_schedules ? p->n_schedules : 1, sizeof *s);
                if (!s)
                        return -ENOMEM;
                free(a->sched);
                a->sched = s;
                a->n_sched = p->n_schedules;
                a->sched_made = true;
                a->sched_stale = false;
                for (size_t i = 0; i < a->n_sched; i++)
                        advance(a, i);
                return 0;
        }
        /* Why an occurrence that passed is skipped, not called late: it
         * could not be delivered then (the gadget was stopped, starting,
         * or another node owned it), and a periodic job runs again at its
         * next time; a retry that is due goes on. */
        for (size_t i = 0; i < a->n_sched; i++)
                if (a->sched[i].attempts == 0 && a->sched[i].at >= 0 && a->sched[i].at < now - 1000)
                        advance(a, i);
        return 0;
}

int64_t schedule_first(const struct unit_alarms *a, size_t *which)
{
        int64_t first = -1;
        for (size_t i = 0; i < a->n_sched; i++)
                if (a->sched[i].due >= 0 && (first < 0 || a->sched[i].due < first)) {
                        first = a->sched[i].due;
                        *which = i;
                }
        return first;
}

static void audit_call(struct unit_alarms *a, enum audit_outcome outcome, const char *detail)
{
        struct audit_record rec = { .gadget = unit_name(a->u), .binding = "schedule", .op = "call",
                                    .outcome = outcome, .detail = detail };
        audit_write(core_audit(a->al->core), &rec);
}

/* The call failed: tried again after backoff, unless the next occurrence
 * comes first. */
static void failed(struct unit_alarms *a, size_t i, int code, const char *message)
{
        const struct policy_schedule *ps = &unit_policy(a->u)->schedules[i];
        struct sched_slot *s = &a->sched[i];
        int64_t now = bind_alarm_now_ms(), retry = now + backoff_delay_ms(s->attempts);
        int64_t next = next_after(ps, now);
        char detail[512], why[256];
        /* The error message is the gadget's text: escaped for the log. */
        log_escape(message, strlen(message), why, sizeof why);
        s->attempts++;
        if (next >= 0 && retry >= next) {
                snprintf(detail, sizeof detail, "%s (line %u): attempt %u failed (%s: %s): given up, its next "
                         "time comes first", ps->method, ps->line, s->attempts, gadget_error_name((unsigned)code),
                         why);
                advance(a, i);
        } else {
                snprintf(detail, sizeof detail, "%s (line %u): attempt %u failed (%s: %s): next try in %" PRId64
                         " ms", ps->method, ps->line, s->attempts, gadget_error_name((unsigned)code), why,
                         retry - now);
                s->due = retry;
        }
        char line[600];
        snprintf(line, sizeof line, "Schedule=%s", detail);
        alarms_log_failure(a, line);
        audit_call(a, AUDIT_ERROR, detail);
}

static void call_done(void *cbdata, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct unit_alarms *a = cbdata;
        size_t i = (size_t)tag;
        if (a->closing)
                return;
        /* A reload replaced the policy meanwhile: i names none of its
         * schedules; they start over (schedule_slots). */
        if (a->sched_stale) {
                alarms_delivered(a);
                return;
        }
        if (res) {
                audit_call(a, AUDIT_OK, unit_policy(a->u)->schedules[i].method);
                advance(a, i);
        } else
                failed(a, i, code, message ? message : "failed");
        alarms_delivered(a);
}

void schedule_deliver(struct unit_alarms *a, size_t i)
{
        const struct policy_schedule *ps = &unit_policy(a->u)->schedules[i];
        struct sched_slot *s = &a->sched[i];
        char msg[256];
        Gadget__Value *args = value_new_map();
        if (!args) {
                failed(a, i, GADGET_EINTERNAL, "out of memory");
                alarms_delivered(a);
                return;
        }
        value_map_set(args, "schedule", value_new_string(ps->calendar));
        value_map_set(args, "at", value_new_int(s->at));
        value_map_set(args, "attempt", value_new_int((int64_t)s->attempts + 1));
        snprintf(a->caller, sizeof a->caller, "schedule");
        snprintf(a->via, sizeof a->via, "Schedule= (line %u)", ps->line);
        struct call_req q = { .method = ps->method, .args = args, .done = call_done, .cbdata = a, .tag = i,
                              .caller = a->caller, .via = a->via };
        int code = calls_start(a->u, &q, msg, sizeof msg);
        value_free(args);
        if (code) {
                failed(a, i, code, msg);
                alarms_delivered(a);
        }
}
