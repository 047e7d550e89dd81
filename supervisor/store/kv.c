/* kv: a gadget's store on its backend, and its queue bounded per
 * binding. */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_backend.h"
#include "kv_job.h"
#include "system/log.h"

/* Refused operations are logged as one count per this many seconds. */
#define KV_REPORT_SECONDS 5

/* Operations of one binding queued or running, and those refused since
 * the last report. */
struct kv_count {
        char binding[KV_BINDING_MAX];
        unsigned n, refused, max_pending;
        struct kv_count *next;
};

/* On the loop only; the backend's queue does the rest. */
struct kv {
        char *gadget;
        struct kv_queue *q;
        struct event *ev_report;  /* the next count of refusals */
        struct kv_count *counts;
};

static struct kv_count *count_of(struct kv *kv, const char *binding)
{
        for (struct kv_count *c = kv->counts; c; c = c->next)
                if (strcmp(c->binding, binding) == 0)
                        return c;
        struct kv_count *c = calloc(1, sizeof *c);
        if (c) {
                snprintf(c->binding, sizeof c->binding, "%s", binding);
                c->next = kv->counts;
                kv->counts = c;
        }
        return c;
}

/* Drops the counts that hold nothing any more. */
static void counts_prune(struct kv *kv)
{
        struct kv_count **pp = &kv->counts;
        while (*pp) {
                struct kv_count *c = *pp;
                if (c->n == 0 && c->refused == 0) {
                        *pp = c->next;
                        free(c);
                } else {
                        pp = &c->next;
                }
        }
}

/* Logs the refusals counted since the last report, one line per binding. */
static void report(struct kv *kv)
{
        for (struct kv_count *c = kv->counts; c; c = c->next) {
                if (c->refused)
                        log_msg(L_WARN, kv->gadget,
                                "kv binding %s: %u operations refused busy (queue full, CallsMax=%u)", c->binding,
                                c->refused, c->max_pending);
                c->refused = 0;
        }
        counts_prune(kv);
}

static void on_report(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        report(arg);
}

/* A job of binding left the queue. */
static void count_down(struct kv *kv, const char *binding)
{
        struct kv_count *c = kv->counts;
        while (c && strcmp(c->binding, binding) != 0)
                c = c->next;
        if (c && --c->n == 0 && c->refused == 0)
                counts_prune(kv);
}

static void store_free(struct kv *kv)
{
        if (kv->ev_report)
                event_free(kv->ev_report);
        while (kv->counts) {
                struct kv_count *c = kv->counts;
                kv->counts = c->next;
                free(c);
        }
        free(kv->gadget);
        free(kv);
}

int kv_open(struct event_base *base, const char *gadget, struct kv_backend *be, struct kv **out)
{
        struct kv *kv = calloc(1, sizeof *kv);
        if (!kv)
                return -ENOMEM;
        int e = -ENOMEM;
        if (!(kv->gadget = strdup(gadget)) || !(kv->ev_report = evtimer_new(base, on_report, kv)) ||
            (e = be->ops->open(be, kv, gadget, &kv->q)) < 0) {
                store_free(kv);
                return e;
        }
        *out = kv;
        return 0;
}

bool kv_idle(const struct kv *kv)
{
        for (const struct kv_count *c = kv->counts; c; c = c->next)
                if (c->n)
                        return false;
        return true;
}

bool kv_full(struct kv *kv, const char *binding, unsigned max_pending)
{
        struct kv_count *c = count_of(kv, binding);
        if (!c || c->n < max_pending)
                return false;
        c->max_pending = max_pending;
        /* One line now, then one count per KV_REPORT_SECONDS: the refusals
         * cannot flood the log. */
        if (c->refused++ == 0 && !evtimer_pending(kv->ev_report, NULL)) {
                struct timeval tv = { .tv_sec = KV_REPORT_SECONDS };
                log_msg(L_WARN, kv->gadget, "kv binding %s: queue full (CallsMax=%u): refusing operations as busy",
                        binding, max_pending);
                evtimer_add(kv->ev_report, &tv);
        }
        return true;
}

/* A job is done (on the loop): its binding's count goes down. */
static void job_done(struct kv_job *job)
{
        count_down(job->kv, job->binding);
        job->user_done(job);
}

int kv_submit(struct kv *kv, struct kv_job *job, unsigned max_pending)
{
        if (kv_full(kv, job->binding, max_pending))
                return -EBUSY;
        struct kv_count *c = count_of(kv, job->binding);
        if (!c)
                return -ENOMEM;
        /* Only with nothing of this gadget queued, running or unanswered:
         * an answer given now cannot overtake an earlier job's, nor miss a
         * write the gadget was told succeeded. */
        bool idle = kv_idle(kv);
        job->kv = kv;
        job->gadget = kv->gadget;
        job->user_done = job->done;
        job->done = job_done;
        c->n++;
        if (idle && kv->q->ops->now && kv->q->ops->now(kv->q, job)) {
                job->done(job);
                kv_job_free(job);
                return 0;
        }
        int e = kv->q->ops->submit(kv->q, job);
        if (e < 0) {
                job->done = job->user_done;
                count_down(kv, job->binding);
        }
        return e;
}

void kv_close(struct kv *kv)
{
        if (!kv)
                return;
        kv->q->ops->close(kv->q);
        report(kv);
        store_free(kv);
}

void kv_backend_free(struct kv_backend *be)
{
        if (be)
                be->ops->free(be);
}
