/* kv: a gadget's SQLite thread, or its share of the PostgreSQL store, and
 * its bounded queue. */
#include "kv.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kvpg.h"
#include "system/log.h"

#define KV_STACK (512u * 1024u)
/* Refused operations are logged as one count per this many seconds. */
#define KV_REPORT_SECONDS 5

/* Operations of one binding queued or running, and those refused since
 * the last report (loop side only). */
struct kv_count {
        char binding[KV_BINDING_MAX];
        unsigned n, refused, max_pending;
        struct kv_count *next;
};

/* Shared by the loop and the thread: the fields under mu. Once closing is
 * set the loop has let go of the store and the thread frees it. */
struct kv {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct kv_job *todo, **todo_tail;   /* queued, not started */
        struct kv_job *done, **done_tail;   /* finished, for the loop */
        struct kv_job *running;
        bool closing;
        /* The thread's own. */
        char *state_dir, *gadget;
        /* The loop's own. */
        struct kvpg *pg;          /* Store=postgresql: no thread, no efd */
        int efd;
        struct event *ev;
        struct event *ev_report;  /* the next count of refusals */
        struct kv_count *counts;
};

bool kv_op_writes(enum kv_op op)
{
        return op == KV_PUT || op == KV_DELETE || op == KV_ALARM_SET || op == KV_ALARM_CANCEL ||
               op == KV_ALARM_SETTLE;
}

const char *kv_op_name(enum kv_op op)
{
        static const char *const names[] = {
                [KV_GET] = "get", [KV_PUT] = "put", [KV_DELETE] = "delete", [KV_LIST] = "list",
                [KV_ALARM_SET] = "alarm set", [KV_ALARM_CANCEL] = "alarm cancel", [KV_ALARM_LIST] = "alarm list",
                [KV_ALARM_NEXT] = "alarm look-up", [KV_ALARM_SETTLE] = "alarm delivery's record",
        };
        return (size_t)op < sizeof names / sizeof *names ? names[op] : "operation";
}

struct kv_job *kv_job_new(enum kv_op op, const char *binding, kv_done_fn *done, void *arg)
{
        struct kv_job *job = calloc(1, sizeof *job);
        if (!job)
                return NULL;
        job->op = op;
        snprintf(job->binding, sizeof job->binding, "%s", binding);
        job->done = done;
        job->arg = arg;
        return job;
}

void kv_job_free(struct kv_job *job)
{
        if (!job)
                return;
        free(job->val);
        free(job->keys);
        free(job);
}

int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen)
{
        if (*pos + 2 > job->keys_len)
                return 0;
        size_t n = (size_t)job->keys[*pos] | (size_t)job->keys[*pos + 1] << 8;
        *key = job->keys + *pos + 2;
        *klen = n;
        *pos += 2 + n;
        return 1;
}

/* Appends one listed key to the job (the thread's side of list). */
static void list_add(void *arg, const void *key, size_t klen)
{
        struct kv_job *job = arg;
        uint8_t *k = realloc(job->keys, job->keys_len + 2 + klen);
        if (!k) {
                job->err = -ENOMEM;
                return;
        }
        k[job->keys_len] = (uint8_t)klen;
        k[job->keys_len + 1] = (uint8_t)(klen >> 8);
        memcpy(k + job->keys_len + 2, key, klen);
        job->keys = k;
        job->keys_len += 2 + klen;
        job->n_keys++;
}

/* Carries out one job on the database (on the thread). */
static void run_job(struct kvdb *db, struct kv_job *job)
{
        int e = 0;
        switch (job->op) {
        case KV_GET:
                e = kvdb_get(db, job->binding, job->key, job->klen, &job->val, &job->vlen);
                break;
        case KV_PUT:
                e = kvdb_put(db, job->binding, job->key, job->klen, job->val, job->vlen, &job->quota);
                break;
        case KV_DELETE:
                e = kvdb_delete(db, job->binding, job->key, job->klen, &job->existed);
                break;
        case KV_LIST:
                e = kvdb_list(db, job->binding, job->key, job->klen, job->after, job->alen, job->limit, list_add,
                              job, &job->more);
                break;
        default:
                e = kv_alarm_run(db, job);
                break;
        }
        if (e < 0 || job->err == 0)
                job->err = e;
}

/* Hands a finished job to the loop (mu held). Why this write cannot reach
 * another file: efd is closed only after closing is set under mu. */
static void finish(struct kv *kv, struct kv_job *job)
{
        if (kv->closing || !job->done) {
                kv_job_free(job);
                return;
        }
        job->next = NULL;
        *kv->done_tail = job;
        kv->done_tail = &job->next;
        uint64_t one = 1;
        if (write(kv->efd, &one, sizeof one) < 0) {
                /* The counter cannot overflow at one per job: nothing to do. */
        }
}

static void store_free(struct kv *kv)
{
        pthread_mutex_destroy(&kv->mu);
        pthread_cond_destroy(&kv->cv);
        free(kv->state_dir);
        free(kv->gadget);
        free(kv);
}

/* The thread: opens the database at the first job (again after a failed
 * open), runs the jobs in order, and at close frees the store. */
static void *thread_main(void *arg)
{
        struct kv *kv = arg;
        struct kvdb *db = NULL;

        pthread_mutex_lock(&kv->mu);
        for (;;) {
                while (!kv->todo && !kv->closing)
                        pthread_cond_wait(&kv->cv, &kv->mu);
                if (kv->closing)
                        break;
                struct kv_job *job = kv->todo;
                if (!(kv->todo = job->next))
                        kv->todo_tail = &kv->todo;
                kv->running = job;
                pthread_mutex_unlock(&kv->mu);
                int e = db ? 0 : kvdb_open(kv->state_dir, kv->gadget, &db);
                if (e < 0) {
                        job->err = e;
                        job->open_failed = true;
                } else
                        run_job(db, job);
                pthread_mutex_lock(&kv->mu);
                kv->running = NULL;
                finish(kv, job);
        }
        pthread_mutex_unlock(&kv->mu);
        kvdb_close(db);
        store_free(kv);
        return NULL;
}

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

/* The eventfd: finished jobs are answered on the loop. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
        struct kv *kv = arg;
        uint64_t n;
        (void)what;
        if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
                return;
        pthread_mutex_lock(&kv->mu);
        struct kv_job *list = kv->done;
        kv->done = NULL;
        kv->done_tail = &kv->done;
        pthread_mutex_unlock(&kv->mu);
        while (list) {
                struct kv_job *job = list;
                list = job->next;
                count_down(kv, job->binding);
                job->done(job);
                kv_job_free(job);
        }
}

/* Starts the thread with every signal blocked: signals are the loop's. */
static int start_thread(struct kv *kv)
{
        pthread_attr_t attr;
        pthread_t t;
        sigset_t all, old;
        int e;

        if ((e = pthread_attr_init(&attr)) != 0)
                return -e;
        pthread_attr_setstacksize(&attr, KV_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        e = pthread_create(&t, &attr, thread_main, kv);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        return -e;
}

int kv_open(struct event_base *base, const char *state_dir, const char *gadget, struct kvpg *pg,
            struct kv **out)
{
        struct kv *kv = calloc(1, sizeof *kv);
        int e = -ENOMEM;

        if (!kv)
                return -ENOMEM;
        kv->efd = -1;
        pthread_mutex_init(&kv->mu, NULL);
        pthread_cond_init(&kv->cv, NULL);
        kv->todo_tail = &kv->todo;
        kv->done_tail = &kv->done;
        if (!(kv->state_dir = strdup(state_dir)) || !(kv->gadget = strdup(gadget)))
                goto fail;
        if (pg) {
                if (!(kv->ev_report = evtimer_new(base, on_report, kv)))
                        goto fail;
                kv->pg = pg;
                *out = kv;
                return 0;
        }
        if ((kv->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                e = -errno;
                goto fail;
        }
        if (!(kv->ev = event_new(base, kv->efd, EV_READ | EV_PERSIST, on_done, kv)) ||
            event_add(kv->ev, NULL) < 0 || !(kv->ev_report = evtimer_new(base, on_report, kv)))
                goto fail;
        if ((e = start_thread(kv)) < 0)
                goto fail;
        *out = kv;
        return 0;
fail:
        if (kv->ev_report)
                event_free(kv->ev_report);
        if (kv->ev)
                event_free(kv->ev);
        if (kv->efd >= 0)
                close(kv->efd);
        store_free(kv);
        return e;
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

/* A PostgreSQL job is done (on the loop): its binding's count goes down. */
static void pg_done(struct kv_job *job)
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
        if (kv->pg) {
                job->kv = kv;
                job->gadget = kv->gadget;
                job->user_done = job->done;
                job->done = pg_done;
                c->n++;
                int e = kvpg_submit(kv->pg, job);
                if (e < 0) {
                        job->done = job->user_done;
                        count_down(kv, job->binding);
                }
                return e;
        }
        c->n++;
        job->next = NULL;
        pthread_mutex_lock(&kv->mu);
        *kv->todo_tail = job;
        kv->todo_tail = &job->next;
        pthread_cond_signal(&kv->cv);
        pthread_mutex_unlock(&kv->mu);
        return 0;
}

/* Answers job as cancelled. */
static void cancel(struct kv_job *job)
{
        job->err = -ECANCELED;
        job->done(job);
        kv_job_free(job);
}

/* Closes a store on PostgreSQL: its jobs are answered cancelled now. */
static void close_pg(struct kv *kv)
{
        kvpg_cancel(kv->pg, kv);
        report(kv);
        event_free(kv->ev_report);
        while (kv->counts) {
                struct kv_count *c = kv->counts;
                kv->counts = c->next;
                free(c);
        }
        store_free(kv);
}

void kv_close(struct kv *kv)
{
        if (!kv)
                return;
        if (kv->pg) {
                close_pg(kv);
                return;
        }
        report(kv);
        event_free(kv->ev_report);
        /* Everything the loop needs is taken out under mu: once it is
         * unlocked the thread may free the store at any moment. */
        struct event *ev = kv->ev;
        int efd = kv->efd;
        struct kv_count *counts = kv->counts;
        pthread_mutex_lock(&kv->mu);
        kv->closing = true;
        struct kv_job *todo = kv->todo, *done = kv->done;
        kv->todo = kv->done = NULL;
        kv->todo_tail = &kv->todo;
        kv->done_tail = &kv->done;
        /* The running job stays the thread's; its caller is answered now
         * with a stand-in, and the thread drops the job when it ends. */
        struct kv_job *running = kv->running;
        struct kv_job stand_in = { .err = -ECANCELED };
        if (running) {
                stand_in.op = running->op;
                stand_in.done = running->done;
                stand_in.arg = running->arg;
                running->done = NULL;
        }
        pthread_cond_signal(&kv->cv);
        pthread_mutex_unlock(&kv->mu);

        event_free(ev);
        close(efd);
        while (done) {
                struct kv_job *job = done;
                done = job->next;
                job->done(job);
                kv_job_free(job);
        }
        while (todo) {
                struct kv_job *job = todo;
                todo = job->next;
                cancel(job);
        }
        if (stand_in.done)
                stand_in.done(&stand_in);
        while (counts) {
                struct kv_count *c = counts;
                counts = c->next;
                free(c);
        }
}
