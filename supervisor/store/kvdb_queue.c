/* kvdb_queue: the SQLite backend: a gadget's thread, its queue, and the
 * jobs carried out on its database. */
#include "kvdb_queue.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_backend.h"
#include "kv_job.h"
#include "kvdb.h"
#include "kvdb_nowait.h"
#include "system/mailbox.h"
#include "system/thread.h"

#define KV_STACK (512u * 1024u)

struct kvdb_backend {
        struct kv_backend be;
        struct event_base *base;
        char *state_dir;
        const struct kv_type *types[KV_TYPES_MAX];
        size_t n_types;
};

/* Shared by the loop and the thread: the fields under mu. Once closing is
 * set the loop has let go of the queue and the thread frees it. */
struct kvdb_queue {
        struct kv_queue q;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct kv_job *todo, **todo_tail;   /* queued, not started */
        struct kv_job *running;
        bool closing;
        /* The loop's read-only connection (kvdb_nowait.c), opened by the
         * thread after its own, closed by it at the end; the loop uses it
         * only while nothing is queued or running. */
        struct kvdb *ro;
        /* The thread's own. */
        char *state_dir, *gadget;
        const struct kv_type *types[KV_TYPES_MAX]; /* the backend's, copied: the thread may outlive it */
        size_t n_types;
        /* The loop's own: finished jobs, posted by the thread under mu
         * until closing. */
        struct mailbox *mb;
};

/* A job the loop's read-only connection may answer: a kv get. */
static bool nowait_job(const struct kv_job *job)
{
        return !job->op->writes && strcmp(job->type->name, "kv") == 0 && kv_job_is(job, "get");
}

/* Carries out one job on the database (on the thread). */
static void run_job(struct kvdb *db, struct kv_job *job)
{
        int e = kvdb_run(db, job);
        if (e < 0 || job->err == 0)
                job->err = e;
}

/* A get on ro: true if answered (found or not), else job is as it was
 * (ro's busy timeout is 0: a lock held elsewhere is the writer's to wait
 * for). */
static bool run_get(struct kvdb *ro, struct kv_job *job)
{
        int e = kvdb_run(ro, job);
        if (e < 0 && e != -ENOENT) {
                free(job->val);
                job->val = NULL;
                job->vlen = 0;
                return false;
        }
        job->err = e;
        return true;
}

/* Hands a finished job to the loop (mu held). Why mb is still there: the
 * loop frees it only after it set closing under mu. */
static void finish(struct kvdb_queue *kq, struct kv_job *job)
{
        if (kq->closing || !job->done) {
                kv_job_free(job);
                return;
        }
        mailbox_post(kq->mb, &job->finished);
}

static void queue_free(struct kvdb_queue *kq)
{
        pthread_mutex_destroy(&kq->mu);
        pthread_cond_destroy(&kq->cv);
        free(kq->state_dir);
        free(kq->gadget);
        free(kq);
}

/* The thread: opens the database at the first job (again after a failed
 * open), runs the jobs in order, and at close frees the queue. */
static void *thread_main(void *arg)
{
        struct kvdb_queue *kq = arg;
        struct kvdb *db = NULL;

        pthread_mutex_lock(&kq->mu);
        for (;;) {
                while (!kq->todo && !kq->closing)
                        pthread_cond_wait(&kq->cv, &kq->mu);
                if (kq->closing)
                        break;
                struct kv_job *job = kq->todo;
                if (!(kq->todo = job->next))
                        kq->todo_tail = &kq->todo;
                kq->running = job;
                pthread_mutex_unlock(&kq->mu);
                int e = db ? 0 : kvdb_open(kq->state_dir, kq->gadget, kq->types, kq->n_types, &db);
                struct kvdb *ro = NULL;
                if (e < 0) {
                        job->err = e;
                        job->open_failed = true;
                } else {
                        /* A get runs on the loop's connection here too
                         * (the loop uses it only while nothing runs
                         * here): its reads bring into the page cache the
                         * pages the loop could not read, which the
                         * writer's own cache would not. One that reads
                         * more than the loop would (a large value) is the
                         * writer's: the loop's connection's small cache
                         * would read the value twice, its lookup's and
                         * its own, from the files each time. */
                        if (!kq->ro || !nowait_job(job) || !kvdb_nowait_run_small(kq->ro, job, run_get))
                                run_job(db, job);
                        /* Without it every job stays the thread's. */
                        if (!kq->ro && kvdb_nowait_open(kq->state_dir, kq->gadget, kq->types, kq->n_types,
                                                        &ro) < 0)
                                ro = NULL;
                }
                pthread_mutex_lock(&kq->mu);
                if (ro)
                        kq->ro = ro;
                kq->running = NULL;
                finish(kq, job);
        }
        pthread_mutex_unlock(&kq->mu);
        kvdb_close(kq->ro);
        kvdb_close(db);
        queue_free(kq);
        return NULL;
}

/* A finished job, answered on the loop (its mailbox's drain). */
static void on_done(void *arg, struct mailbox_item *item)
{
        struct kv_job *job = mailbox_entry(item, struct kv_job, finished);
        (void)arg;
        job->done(job);
        kv_job_free(job);
}

static void job_drop(struct mailbox_item *item)
{
        kv_job_free(mailbox_entry(item, struct kv_job, finished));
}

/* What a finished job costs the loop to answer: about its value's bytes
 * (decoded, checked, encoded and sent), a small one a unit. */
static size_t job_cost(const struct mailbox_item *item)
{
        const struct kv_job *job = mailbox_entry(item, const struct kv_job, finished);
        return job->vlen + 1024;
}

/* Why a turn's answers are bounded (KVDB_TURN_BYTES, a link's TurnBytesMax=
 * default): a gadget that gets its 1 MiB value, 8 in flight, had the loop
 * answer all 8 in one drain once its thread ran ahead — 2 ms or more in
 * which no other party was served. This bounds one turn's stall only; how
 * many such answers a gadget gets a second is its FrameBytesPerSecond=
 * (link/peer.c), which is what keeps the other gadgets' calls prompt. */
#define KVDB_TURN_BYTES (1u << 20)
static const struct mailbox_owner kvdb_box = { .take = on_done, .drop = job_drop, .cost = job_cost,
                                               .turn_max = KVDB_TURN_BYTES };

/* Starts the thread with every signal blocked: signals are the loop's. */
static int start_thread(struct kvdb_queue *kq)
{
        pthread_t t;
        return thread_start(&t, thread_main, kq, KV_STACK, true);
}

static const struct kv_backend_ops kvdb_ops;

static int queue_open(struct kv_backend *be, const struct kv *kv, const char *gadget, struct kv_queue **out)
{
        struct kvdb_backend *b = (struct kvdb_backend *)be;
        struct kvdb_queue *kq = calloc(1, sizeof *kq);
        int e = -ENOMEM;

        (void)kv;
        if (!kq)
                return -ENOMEM;
        kq->q.ops = &kvdb_ops;
        pthread_mutex_init(&kq->mu, NULL);
        pthread_cond_init(&kq->cv, NULL);
        kq->todo_tail = &kq->todo;
        memcpy(kq->types, b->types, sizeof kq->types);
        kq->n_types = b->n_types;
        if (!(kq->state_dir = strdup(b->state_dir)) || !(kq->gadget = strdup(gadget)))
                goto fail;
        if ((e = mailbox_new(b->base, &kvdb_box, kq, &kq->mb)) < 0 || (e = start_thread(kq)) < 0)
                goto fail;
        *out = &kq->q;
        return 0;
fail:
        mailbox_free(kq->mb);
        queue_free(kq);
        return e;
}

static int queue_submit(struct kv_queue *q, struct kv_job *job)
{
        struct kvdb_queue *kq = (struct kvdb_queue *)q;
        job->next = NULL;
        pthread_mutex_lock(&kq->mu);
        /* The thread waits only with nothing to do and nothing running;
         * otherwise it looks at todo again, under mu, before it waits. */
        bool idle = !kq->todo && !kq->running;
        *kq->todo_tail = job;
        kq->todo_tail = &job->next;
        pthread_mutex_unlock(&kq->mu);
        /* Woken after the unlock, so that it does not wake only to wait
         * for mu (three futex calls and a switch more per job). Why kq is
         * still there: only the loop, which is here, closes it. */
        if (idle)
                pthread_cond_signal(&kq->cv);
        return 0;
}

/* A kv get, on the loop's connection, when it needs no disk and no lock
 * (kvdb_nowait.c): found or not found is the answer; anything else (a
 * read that would wait, a busy lock, an error) goes to the thread, which
 * answers as it always did. */
static bool queue_now(struct kv_queue *q, struct kv_job *job)
{
        struct kvdb_queue *kq = (struct kvdb_queue *)q;
        if (!nowait_job(job))
                return false;
        /* ro is set by the thread, under mu. Why the thread does not use
         * it now: nothing of this gadget is queued or running (the
         * caller's rule, kv.c), and only the loop gives the thread work. */
        pthread_mutex_lock(&kq->mu);
        struct kvdb *ro = kq->ro;
        pthread_mutex_unlock(&kq->mu);
        if (!ro)
                return false;
        return kvdb_nowait_run(ro, job, run_get);
}

/* Answers each job of list as cancelled. */
static void cancel_all(struct kv_job *list)
{
        while (list) {
                struct kv_job *job = list;
                list = job->next;
                job->err = -ECANCELED;
                job->done(job);
                kv_job_free(job);
        }
}

static void queue_close(struct kv_queue *q)
{
        struct kvdb_queue *kq = (struct kvdb_queue *)q;
        /* Everything the loop needs is taken out under mu: once it is
         * unlocked the thread may free the queue at any moment. */
        struct mailbox *mb = kq->mb;
        pthread_mutex_lock(&kq->mu);
        kq->closing = true;
        struct kv_job *todo = kq->todo;
        kq->todo = NULL;
        kq->todo_tail = &kq->todo;
        /* The running job stays the thread's; its caller is answered now
         * with a stand-in, and the thread drops the job when it ends. */
        struct kv_job stand_in = { .done = NULL };
        if (kq->running) {
                stand_in = kv_job_stand_in(kq->running);
                kq->running->done = NULL;
        }
        pthread_cond_signal(&kq->cv);
        pthread_mutex_unlock(&kq->mu);

        /* The thread posts no more (closing, under mu): the jobs it
         * finished are answered with their outcome, the rest cancelled. */
        mailbox_drain(mb);
        mailbox_free(mb);
        cancel_all(todo);
        if (stand_in.done)
                stand_in.done(&stand_in);
}

static void backend_free(struct kv_backend *be)
{
        struct kvdb_backend *b = (struct kvdb_backend *)be;
        free(b->state_dir);
        free(b);
}

static const struct kv_backend_ops kvdb_ops = {
        .open = queue_open, .submit = queue_submit, .now = queue_now, .close = queue_close, .free = backend_free,
};

int kvdb_backend_new(struct event_base *base, const char *state_dir, const struct kv_type *const *types,
                     size_t n, struct kv_backend **out, char *why, size_t len)
{
        if (!kvdb_types_ok(types, n, why, len))
                return -EINVAL;
        struct kvdb_backend *b = calloc(1, sizeof *b);
        if (!b || !(b->state_dir = strdup(state_dir))) {
                free(b);
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        memcpy(b->types, types, n * sizeof *types);
        b->n_types = n;
        b->be.ops = &kvdb_ops;
        b->base = base;
        *out = &b->be;
        return 0;
}
