/* loader: a policy file read for `gadgetctl load`, in a thread, with the
 * requesting user's rights. Why a thread: open() of a file on a FUSE
 * mount its user serves, or on a hung network file system, can wait
 * forever, and O_NONBLOCK does not help there; a thread may wait, the
 * loop may not. */
#include "loader.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mailbox.h"
#include "thread.h"
#include "policy.h"

struct loader_job {
        struct loader *l;
        char *path;
        struct peercred cred;
        bool as_user;            /* cred is the requester's (else gadgetd's own rights) */
        struct mailbox *mb;      /* the thread posts end when it is done */
        struct mailbox_item end;
        pthread_t thread;
        loader_done_fn *done;
        void *arg;
        /* Written by the thread before its post, read by the loop after. */
        int err;
        struct policy *p;
        uint64_t hash;
        char msg[8192];
        LIST_ENTRY(loader_job) run;     /* in the loader's jobs, once started */
        STAILQ_ENTRY(loader_job) wait;  /* in its waiting jobs, before */
};

/* All of a policy's errors as lines in msg. */
static void join_errors(const struct policy_errors *errs, char *msg, size_t len)
{
        size_t o = 0;
        msg[0] = '\0';
        for (size_t i = 0; i < errs->n && o < len; i++)
                o += (size_t)snprintf(msg + o, len - o, "%s%s", i ? "\n" : "", errs->msgs[i]);
}

/* Why this is safe: a control-group member's load opens the file as that
 * user (peercred_open), so gadgetd reads for her only what she could read
 * herself; it opens without following a final symlink (unless follow) or
 * waiting for a FIFO's writer, and reads only a regular file of at most 1 MiB
 * (policy_load_fd). A user other than root gets messages without text of
 * the file (POLICY_REDACT): gadgetd never shows her what it read. */
int loader_read(const char *path, const struct peercred *cred, bool follow, struct policy **p, uint64_t *hash,
                char *msg, size_t len)
{
        struct policy_errors errs = { 0 };
        bool redact = cred && cred->uid != 0;
        int flags = POLICY_OPEN_FLAGS | (follow ? 0 : O_NOFOLLOW);
        int e, fd = cred ? peercred_open(cred, path, flags) : open(path, flags);
        if (!cred && fd < 0)
                fd = -errno;
        if (fd < 0) {
                snprintf(msg, len, "%s: cannot open: %s", path,
                         fd == -ELOOP ? "a symbolic link (name the file it points to)" : strerror(-fd));
                return fd;
        }
        e = policy_load_fd(fd, path, redact ? POLICY_REDACT : 0, p, &errs, hash);
        close(fd);
        if (e < 0)
                join_errors(&errs, msg, len);
        /* Parse errors ("FILE:LINE: ...") are the ones whose text is hidden. */
        size_t n = strlen(path);
        if (e < 0 && redact && strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] >= '0' &&
            msg[n + 1] <= '9' && strlen(msg) + 80 < len)
                strcat(msg, "\n(text of the file is not shown: `gadgetctl check FILE` shows it)");
        policy_errors_clear(&errs);
        return e;
}

static void *job_thread(void *arg)
{
        struct loader_job *j = arg;
        j->err = loader_read(j->path, j->as_user ? &j->cred : NULL, false, &j->p, &j->hash, j->msg, sizeof j->msg);
        /* Never blocks, never refused: the box stays open while the
         * thread runs. */
        mailbox_post(j->mb, &j->end);
        return NULL;
}

static void job_free(struct loader_job *j)
{
        mailbox_free(j->mb);
        free(j->path);
        free(j);
}

void loader_init(struct loader *l, struct event_base *base, unsigned max)
{
        *l = (struct loader){ .base = base, .max = max };
        LIST_INIT(&l->jobs);
        STAILQ_INIT(&l->waiting);
}

static bool over_budget(const struct loader *l, uid_t uid);
static int job_run(struct loader *l, struct loader_job *j);

/* Starts root's waiting loads while its budget allows. */
static void start_waiting(struct loader *l)
{
        struct loader_job *j;
        while ((j = STAILQ_FIRST(&l->waiting)) && !over_budget(l, 0)) {
                STAILQ_REMOVE_HEAD(&l->waiting, wait);
                int e = job_run(l, j);
                if (e < 0) {
                        snprintf(j->msg, sizeof j->msg, "%s: cannot start reading: %s", j->path, strerror(-e));
                        j->done(j->arg, e, NULL, 0, j->msg);
                        job_free(j);
                }
        }
}

static void job_done_cb(void *arg, struct mailbox_item *item)
{
        struct loader_job *j = arg;
        struct loader *l = j->l;
        (void)item;
        pthread_join(j->thread, NULL); /* it has posted its end: it is returning */
        LIST_REMOVE(j, run);
        j->done(j->arg, j->err, j->p, j->hash, j->msg);
        job_free(j);
        start_waiting(l);
}

static const struct mailbox_owner loader_box = { .take = job_done_cb };

/* Why a budget: a job whose open() never returns holds its thread for
 * good. One such job per user, and LOADER budget for all users but root,
 * bound the threads anyone can strand; root's loads have their own. */
static bool over_budget(const struct loader *l, uid_t uid)
{
        unsigned same = 0, others = 0;
        const struct loader_job *j;
        LIST_FOREACH(j, &l->jobs, run) {
                same += j->cred.uid == uid;
                others += j->cred.uid != 0;
        }
        return uid == 0 ? same >= l->max : same >= 1 || others >= l->max;
}

/* Starts j's thread and counts it in flight. */
static int job_run(struct loader *l, struct loader_job *j)
{
        int e = thread_start(&j->thread, job_thread, j, 0, false);
        if (e < 0)
                return e;
        LIST_INSERT_HEAD(&l->jobs, j, run);
        return 0;
}

int loader_start(struct loader *l, const char *path, const struct peercred *cred, loader_done_fn *done,
                 void *arg)
{
        struct loader_job *j;
        uid_t uid = cred ? cred->uid : 0;
        int e;

        if (uid != 0 && over_budget(l, uid))
                return -EBUSY;
        if (!(j = calloc(1, sizeof *j)))
                return -ENOMEM;
        *j = (struct loader_job){ .l = l, .done = done, .arg = arg, .as_user = cred != NULL };
        if (cred)
                j->cred = *cred;
        if (!(j->path = strdup(path)) || mailbox_new(l->base, &loader_box, j, &j->mb) < 0) {
                e = -ENOMEM;
                goto fail;
        }
        if (uid == 0 && over_budget(l, 0)) {
                STAILQ_INSERT_TAIL(&l->waiting, j, wait);
                return 0;
        }
        if ((e = job_run(l, j)) < 0)
                goto fail;
        return 0;
fail:
        job_free(j);
        return e;
}

void loader_close(struct loader *l)
{
        struct loader_job *j;
        while ((j = STAILQ_FIRST(&l->waiting))) { /* never started: nobody waits for them any more */
                STAILQ_REMOVE_HEAD(&l->waiting, wait);
                job_free(j);
        }
        LIST_INIT(&l->jobs); /* each is its thread's until it returns; gadgetd is ending */
}
