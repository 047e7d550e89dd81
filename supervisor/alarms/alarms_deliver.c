/* alarms_deliver: delivering one alarm read from the store (a->row):
 * the call of its binding's Method= through the one door, and its end
 * recorded in the store — deleted, or its next try after backoff. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alarms_int.h"
#include "bindings/bindings.h"
#include "contract.h"
#include "core/backoff.h"
#include "core/core.h"
#include "policy.h"
#include "store/store.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/monotime.h"
#include "value.h"

/* A step of an alarm's delivery ended: what changed meanwhile is read now. */
static void settled(struct unit_alarms *a)
{
        a->delivering = false;
        kv_job_free(a->row);
        a->row = NULL;
        alarms_read(a);
}

/* Why escaped: the id and a method's error message are the gadget's
 * text, and they reach gadgetd's log and audit (cut to fit). */
#define ESC_ID 160
#define ESC_MSG 256

static const char *esc_id(const struct kv_job *row, char *buf)
{
        return log_escape((const char *)row->key, row->klen, buf, ESC_ID);
}

/* Recording the end of a delivery failed (logged once per window): the
 * alarm stays as it was, so it is delivered again. */
static void record_failed(struct unit_alarms *a, const struct kv_job *row, const char *why)
{
        char line[600], id[ESC_ID];
        snprintf(line, sizeof line, "alarm binding %s: recording alarm %s failed: %s", row->binding, esc_id(row, id),
                 why);
        alarms_log_failure(a, line);
}

static void settle_done(struct kv_job *job)
{
        struct unit_alarms *a = job->arg;
        if (job->err < 0 && job->err != -ECANCELED)
                record_failed(a, job, job->why[0] ? job->why : strerror(-job->err));
        if (!a->closing)
                settled(a);
}

/* Deletes the delivered alarm (retry_due < 0) or records its next try. */
static void settle(struct unit_alarms *a, int64_t retry_due)
{
        struct kv *kv = bindings_kv(unit_bindings(a->u));
        struct kv_job *row = a->row;
        struct kv_job *job = kv ? kv_job_new(row->type, "alarm delivery's record", row->binding, settle_done, a) : NULL;
        if (!job || !(job->val = malloc(row->vlen ? row->vlen : 1))) {
                kv_job_free(job);
                log_msg(L_ERR, unit_name(a->u), "alarm binding %s: out of memory", row->binding);
                settled(a);
                return;
        }
        memcpy(job->key, row->key, job->klen = row->klen);
        memcpy(job->val, row->val, job->vlen = row->vlen);
        job->at = row->at;
        job->due = row->due;
        job->retry_due = retry_due;
        /* The store's own queue bound: the scheduler's jobs are one at a
         * time, never refused for the gadget's own operations. */
        int e = kv_submit(kv, job, UINT32_MAX);
        if (e < 0) {
                record_failed(a, row, job->why[0] ? job->why : strerror(-e));
                kv_job_free(job);
                settled(a);
        }
}

void alarms_log_failure(struct unit_alarms *a, const char *line)
{
        ratelog_warn(&a->fail_log, monotime_ms(), unit_name(a->u),
                     "failed deliveries of alarms or scheduled calls (each in the audit log)", "%s", line);
}

static void audit_alarm(struct unit_alarms *a, enum audit_outcome outcome, const char *detail)
{
        struct audit_record rec = { .gadget = unit_name(a->u), .binding = a->row->binding, .op = "deliver",
                                    .outcome = outcome, .detail = detail };
        audit_write(core_audit(a->al->core), &rec);
}

/* The method failed: the alarm is tried again later, or dropped. */
static void delivery_failed(struct unit_alarms *a, int code, const char *message)
{
        const struct kv_job *row = a->row;
        char detail[640], id[ESC_ID], why[ESC_MSG];
        unsigned attempt = row->attempts + 1;
        esc_id(row, id);
        log_escape(message, strlen(message), why, sizeof why);
        if (attempt >= ALARMS_ATTEMPTS_MAX) {
                snprintf(detail, sizeof detail, "alarm %s: attempt %u of %u failed (%s: %s): dropped", id, attempt,
                         ALARMS_ATTEMPTS_MAX, gadget_error_name((unsigned)code), why);
                log_msg(L_WARN, unit_name(a->u), "alarm binding %s: %s", row->binding, detail);
                audit_alarm(a, AUDIT_ERROR, detail);
                settle(a, -1);
                return;
        }
        int64_t delay = backoff_delay_ms(row->attempts);
        snprintf(detail, sizeof detail, "alarm %s: attempt %u failed (%s: %s): next try in %" PRId64 " ms", id,
                 attempt, gadget_error_name((unsigned)code), why, delay);
        char line[760];
        snprintf(line, sizeof line, "alarm binding %s: %s", row->binding, detail);
        alarms_log_failure(a, line);
        audit_alarm(a, AUDIT_ERROR, detail);
        settle(a, bind_alarm_now_ms() + delay);
}

static void call_done(void *cbdata, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct unit_alarms *a = cbdata;
        (void)tag;
        if (a->closing)
                return;
        if (!res) {
                delivery_failed(a, code, message ? message : "failed");
                return;
        }
        audit_alarm(a, AUDIT_OK, NULL);
        settle(a, -1);
}

/* {binding, id, at, payload, attempt}: what the method gets. NULL if out
 * of memory or the stored payload does not decode. */
static Gadget__Value *call_args(const struct kv_job *row)
{
        Gadget__Value *m = value_new_map();
        Gadget__Value *payload = value_unpack(row->val, row->vlen);
        if (!m || !payload) {
                value_free(m);
                value_free(payload);
                return NULL;
        }
        value_map_set(m, "binding", value_new_string(row->binding));
        value_map_set(m, "id", value_new_string_len((const char *)row->key, row->klen));
        value_map_set(m, "at", value_new_int(row->at));
        value_map_set(m, "payload", payload);
        value_map_set(m, "attempt", value_new_int((int64_t)row->attempts + 1));
        return m;
}

void alarms_deliver(struct unit_alarms *a)
{
        const struct kv_job *row = a->row;
        const struct policy_binding *b = policy_binding_find(unit_policy(a->u), row->binding);
        char msg[256];
        Gadget__Value *args = call_args(row);
        if (!b || b->type != BINDING_ALARM || !args) {
                value_free(args);
                delivery_failed(a, GADGET_EINTERNAL, args ? "the binding is gone" : "the payload does not decode");
                return;
        }
        snprintf(a->caller, sizeof a->caller, "alarm %s", row->binding);
        snprintf(a->via, sizeof a->via, "alarm binding %s", row->binding);
        struct call_req q = { .method = b->method, .args = args, .done = call_done, .cbdata = a,
                              .caller = a->caller, .via = a->via };
        int code = calls_start(a->u, &q, msg, sizeof msg);
        value_free(args);
        if (code)
                delivery_failed(a, code, msg);
}
