/* kv_backend: what a store backend gives the job API (kv.c), which calls
 * it without knowing which backend it holds. Two fill it: SQLite
 * (kvdb_queue.c: a thread and a database per gadget) and PostgreSQL
 * (kvpg.c: one connection, the gadgets taking turns). Every member is
 * called on the loop and never waits on a disk or the network. */
#pragma once

#include <stdbool.h>

struct kv;
struct kv_job;
struct kv_backend;
struct kv_queue;

struct kv_backend_ops {
        /* Opens the queue of gadget's store kv on be: no disk or network
         * access here (a database opens at its first job). 0 or -errno. */
        int (*open)(struct kv_backend *be, const struct kv *kv, const char *gadget, struct kv_queue **out);
        /* Queues job (job->kv, job->gadget set): 0, after which job->done
         * is called once on the loop and the job freed; or < 0 and the
         * caller keeps job: KV_EUNAVAILABLE with job->why when the store
         * is down, -ENOMEM. */
        int (*submit)(struct kv_queue *q, struct kv_job *job);
        /* May be NULL. Called only when q has no job queued, running or
         * unanswered: carries out job now if it can without waiting
         * (true: its results are in job, which the caller answers and
         * frees), else false and job is untouched, for submit. */
        bool (*now)(struct kv_queue *q, struct kv_job *job);
        /* The store closes: every job of q is answered now, each done
         * once (a finished one with its outcome, the others -ECANCELED; a
         * running one by a stand-in, the job dropped when it ends), and q
         * is let go of. */
        void (*close)(struct kv_queue *q);
        /* The backend ends (after every queue's close): what is still
         * queued on it is answered cancelled, and be is freed. */
        void (*free)(struct kv_backend *be);
};

/* A backend: each backend's own struct starts with it. */
struct kv_backend {
        const struct kv_backend_ops *ops;
};

/* A gadget's queue on a backend: each backend's own struct starts with it. */
struct kv_queue {
        const struct kv_backend_ops *ops;
};
