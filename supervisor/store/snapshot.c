/* snapshot: a backup or a restore on a thread of its own, its end handed
 * to the loop through a mailbox (snapshot.h). */
#include "snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "system/mailbox.h"
#include "system/thread.h"
#include "system/ssl_dl.h"

#define SNAPSHOT_STACK (512u * 1024u)

struct snapshot {
        struct snapshot_job job;    /* its strings and bindings copied below */
        char *gadget, *state_dir, *conninfo, *node;
        struct snapshot_binding *bindings;
        struct snapshot_run run;
        int err;
        struct mailbox *mb;         /* the thread's end, to the loop */
        struct mailbox_item end;
        snapshot_done_fn *done;
        void *arg;
};

static void snapshot_free(struct snapshot *s)
{
        mailbox_free(s->mb);
        if (s->job.fd >= 0)
                close(s->job.fd);
        free(s->gadget);
        free(s->state_dir);
        free(s->conninfo);
        free(s->node);
        free(s->bindings);
        free(s);
}

/* Whole writes to the file. */
static int fd_write(void *arg, const void *buf, size_t n)
{
        int fd = *(int *)arg;
        const char *p = buf;
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Exact reads of the file; -ENODATA where it ends first. */
static int fd_read(void *arg, void *buf, size_t n)
{
        int fd = *(int *)arg;
        char *p = buf;
        while (n > 0) {
                ssize_t k = read(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ENODATA;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

static int run_backup(struct snapshot *s)
{
        struct snapshot_run *run = &s->run;
        struct backup_writer *w = NULL;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(run->info.gadget, sizeof run->info.gadget, "%s", s->gadget);
        snprintf(run->info.source, sizeof run->info.source, "%s", s->conninfo ? "postgresql" : "sqlite");
        run->info.taken_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        int e = backup_writer_new(fd_write, &s->job.fd, &run->info, &w);
        if (e == 0)
                e = s->conninfo ? snapshot_pg_backup(run, w) : snapshot_db_backup(run, w);
        if (e == 0)
                e = backup_writer_end(w, &run->info);
        if (e == 0 && fsync(s->job.fd) < 0 && errno != EINVAL)
                e = -errno;
        if (e < 0 && !run->why[0])
                snprintf(run->why, sizeof run->why, "writing the backup: %s", strerror(-e));
        backup_writer_free(w);
        return e;
}

static int run_restore(struct snapshot *s)
{
        struct snapshot_run *run = &s->run;
        struct backup_reader *r = NULL;
        int e = backup_reader_new(fd_read, &s->job.fd, &run->info, &r, run->why, sizeof run->why);
        if (e == 0) {
                run->cur = -1;
                e = s->conninfo ? snapshot_pg_restore(run, r) : snapshot_db_restore(run, r);
        }
        if (e < 0 && !run->why[0])
                snprintf(run->why, sizeof run->why, "%s", strerror(-e));
        backup_reader_free(r);
        return e;
}

static void *thread_main(void *arg)
{
        struct snapshot *s = arg;
        s->err = s->job.restore ? run_restore(s) : run_backup(s);
        /* The box is open until the loop takes this: the post cannot be
         * refused, and the thread touches s no more after it. */
        mailbox_post(s->mb, &s->end);
        return NULL;
}

/* The thread ended (it touches s no more): its outcome to the caller. */
static void on_end(void *arg, struct mailbox_item *item)
{
        struct snapshot *s = arg;
        (void)item;
        s->done(s->arg, s->err, s->err < 0 ? s->run.why : NULL, &s->run.info);
        snapshot_free(s);
}

static const struct mailbox_owner snapshot_box = { .take = on_end };

static int copy(struct snapshot *s, const struct snapshot_job *job)
{
        s->job = *job;
        if (!(s->gadget = strdup(job->gadget)) || (job->state_dir && !(s->state_dir = strdup(job->state_dir))) ||
            (job->conninfo && !(s->conninfo = strdup(job->conninfo))) ||
            (job->node && !(s->node = strdup(job->node))))
                return -ENOMEM;
        if (job->n_bindings) {
                if (!(s->bindings = calloc(job->n_bindings, sizeof *s->bindings)))
                        return -ENOMEM;
                memcpy(s->bindings, job->bindings, job->n_bindings * sizeof *s->bindings);
        }
        s->job.gadget = s->gadget;
        s->job.state_dir = s->state_dir;
        s->job.conninfo = s->conninfo;
        s->job.node = s->node;
        s->job.bindings = s->bindings;
        s->run.job = &s->job;
        return 0;
}

int snapshot_start(struct event_base *base, const struct snapshot_job *job, snapshot_done_fn *done, void *arg,
                   struct snapshot **out)
{
        struct snapshot *s = calloc(1, sizeof *s);
        struct stat st;
        pthread_t t;
        int e;
        if (!s) {
                close(job->fd);
                return -ENOMEM;
        }
        s->done = done;
        s->arg = arg;
        /* libcrypto, for the file's SHA-256: loaded here, on the loop,
         * before the thread may call it (system/ssl_dl.c). */
        char why[200];
        if (ssl_dl_load(why, sizeof why) < 0) {
                e = -ELIBACC; /* "cannot access a needed shared library" */
                goto fail;
        }
        if ((e = copy(s, job)) < 0)
                goto fail;
        /* Why only a regular file: the thread reads or writes it to its
         * end, and a pipe or a socket nobody drains would hold the thread
         * (and its read transaction) for ever. */
        if (fstat(job->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                e = -EBADF;
                goto fail;
        }
        if ((e = mailbox_new(base, &snapshot_box, s, &s->mb)) < 0)
                goto fail;
        if ((e = thread_start(&t, thread_main, s, SNAPSHOT_STACK, true)) < 0)
                goto fail;
        *out = s;
        return 0;
fail:
        snapshot_free(s);
        return e;
}

/* The binding rec fills, by its name and kind, -1 if the policy has none. */
static int binding_of(const struct snapshot_job *job, const struct backup_record *rec)
{
        for (size_t i = 0; i < job->n_bindings; i++)
                if (job->bindings[i].kind == rec->kind && strcmp(job->bindings[i].name, rec->binding) == 0)
                        return (int)i;
        return -1;
}

int snapshot_check(struct snapshot_run *run, const struct backup_record *rec)
{
        const struct snapshot_job *job = run->job;
        const char *what = rec->kind == BACKUP_KV ? "kv" : "alarm";
        int b = binding_of(job, rec);
        if (b < 0) {
                snprintf(run->why, sizeof run->why, "the backup has %s binding %s, which %s's policy does not "
                         "declare", what, rec->binding, job->gadget);
                return -EINVAL;
        }
        const struct snapshot_binding *sb = &job->bindings[b];
        if (b != run->cur || rec->kind != run->cur_kind) {
                run->cur = b;
                run->cur_kind = rec->kind;
                run->keys = run->bytes = 0;
        }
        uint64_t bytes = rec->klen + rec->vlen;
        run->keys++;
        run->bytes += bytes;
        run->total_bytes += bytes;
        if (rec->vlen > sb->max_value) {
                snprintf(run->why, sizeof run->why, "binding %s: a %s of %zu bytes is over its %s (%" PRIu64 ")",
                         rec->binding, rec->kind == BACKUP_KV ? "value" : "payload", rec->vlen,
                         rec->kind == BACKUP_KV ? "MaxValueSize=" : "MaxPayloadSize=", sb->max_value);
                return -EDQUOT;
        }
        if (run->keys > sb->max_keys) {
                snprintf(run->why, sizeof run->why, "binding %s: more than its %s (%" PRIu64 ")", rec->binding,
                         rec->kind == BACKUP_KV ? "MaxKeys=" : "MaxAlarms=", sb->max_keys);
                return -EDQUOT;
        }
        if (rec->kind == BACKUP_KV && run->bytes > sb->max_bytes) {
                snprintf(run->why, sizeof run->why, "binding %s: more bytes than its MaxBytes= (%" PRIu64 ")",
                         rec->binding, sb->max_bytes);
                return -EDQUOT;
        }
        if (run->total_bytes > job->state_max) {
                snprintf(run->why, sizeof run->why, "more bytes than %s's StateMax= (%" PRIu64 ")", job->gadget,
                         job->state_max);
                return -EDQUOT;
        }
        return 0;
}
