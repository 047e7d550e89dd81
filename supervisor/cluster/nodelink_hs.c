/* nodelink_hs: the TLS handshakes of the sessions other nodes start, off
 * the loop. A handshake with client certificates costs about a
 * millisecond of CPU, most of it OpenSSL's own overhead: on the loop, a
 * party reconnecting in a loop stalled every gadget's calls that long,
 * NODELINK_HANDSHAKES_PER_S times a second per address. One thread per
 * link runs every handshake in flight at once, non-blocking, on its own
 * epoll (a slow or silent client holds up no other), and hands each
 * session back through a mailbox; the loop keeps everything before the
 * handshake (the accept and its bounds) and after it (the certificate's
 * name, admission, seats), and the handshake's deadline. A handshake that
 * fails lingers until the peer closes (see job_step), within that
 * deadline, so that the alert saying why reaches it.
 *
 * Who owns a job's fd and SSL: the thread, from nodelink_hs_start until
 * it posts the job; the loop, from the post on (the take, or the drop of
 * a box closed at nodelink_hs_free). A cancel (the loop ends a session in
 * its handshake) only marks the job, under mu: whoever owns it then frees
 * it, once. */
#include "nodelink_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include "system/mailbox.h"
#include "system/thread.h"

#define HS_STACK (512u * 1024u) /* OpenSSL's handshake, as the store's threads */
#define HS_EVENTS 32
#define LINGER_MAX (64u << 10) /* bytes read and dropped after a failed handshake */

TAILQ_HEAD(job_list, hs_job);

struct hs_job {
        struct mailbox_item done;   /* posted to the loop once the handshake ended */
        TAILQ_ENTRY(hs_job) link;   /* on add (under mu), then on the thread's jobs */
        struct nodelink_in *in;     /* the loop's: NULL once cancelled */
        SSL *ssl;
        int fd;
        bool ok;                    /* the handshake completed (set before the post) */
        bool lingering;             /* it failed: the peer's bytes are dropped until it closes */
        size_t dropped;             /* how many (LINGER_MAX) */
        uint32_t events;            /* what epoll waits for (the thread's) */
        /* Under mu. */
        bool cancelled, posted;
};

struct nodelink_hs {
        pthread_mutex_t mu;
        struct job_list add;        /* started, not yet taken by the thread (under mu) */
        bool cancels;               /* a job was cancelled since the thread last looked (under mu) */
        bool stop;                  /* nodelink_hs_free: the thread frees its jobs and ends (under mu) */
        int wake;                   /* an eventfd: the loop wakes the thread; closed after the join */
        int ep;                     /* the thread's epoll: wake and every job's fd */
        pthread_t thread;
        struct mailbox *mb;         /* finished handshakes, to the loop */
        struct job_list jobs;       /* the thread's: handshakes in flight */
};

static void job_free(struct hs_job *job)
{
        SSL_free(job->ssl);
        close(job->fd);
        free(job);
}

/* --- the thread ---------------------------------------------------------- */

/* The job is done (or dropped): out of epoll and of jobs. */
static void job_leave(struct nodelink_hs *hs, struct hs_job *job)
{
        TAILQ_REMOVE(&hs->jobs, job, link);
        if (job->events)
                epoll_ctl(hs->ep, EPOLL_CTL_DEL, job->fd, NULL);
}

/* Handed to the loop, unless the loop cancelled it meanwhile. Why each is
 * freed once: cancelled and posted are set under mu; a cancel that came
 * first leaves the job to the thread (here), one that comes after the
 * post finds posted and leaves it to the loop's take. */
static void job_finish(struct nodelink_hs *hs, struct hs_job *job, bool ok)
{
        job_leave(hs, job);
        job->ok = ok;
        pthread_mutex_lock(&hs->mu);
        bool cancelled = job->cancelled;
        job->posted = !cancelled;
        pthread_mutex_unlock(&hs->mu);
        if (cancelled)
                job_free(job);
        else
                mailbox_post(hs->mb, &job->done); /* the job is the loop's from here */
}

/* After a failed handshake: drops what the peer sent. true while it has
 * not closed (nor sent LINGER_MAX). */
static bool linger(struct hs_job *job)
{
        char buf[4096];
        for (;;) {
                ssize_t n = read(job->fd, buf, sizeof buf);
                if (n > 0 && (job->dropped += (size_t)n) < LINGER_MAX)
                        continue;
                return n < 0 && (errno == EAGAIN || errno == EINTR);
        }
}

/* One step of the handshake, as far as the socket lets it go now. */
static void job_step(struct nodelink_hs *hs, struct hs_job *job)
{
        if (job->lingering) {
                if (!linger(job))
                        job_finish(hs, job, false);
                return;
        }
        ERR_clear_error();
        int r = SSL_do_handshake(job->ssl);
        if (r == 1) {
                job_finish(hs, job, true);
                return;
        }
        uint32_t want;
        switch (SSL_get_error(job->ssl, r)) {
        case SSL_ERROR_WANT_READ:
                want = EPOLLIN;
                break;
        case SSL_ERROR_WANT_WRITE:
                want = EPOLLOUT;
                break;
        default:
                /* Failed: OpenSSL wrote the alert saying why. A close now,
                 * with the peer's next records unread (its Finished, its
                 * first request), would answer with a reset that can reach
                 * the peer before the alert is read, and it would never
                 * learn why. So the session says it is done (a FIN after
                 * the alert) and what the peer sends is dropped until it
                 * closes: the loop ends it then, or at its deadline, as
                 * any session in its handshake. */
                ERR_clear_error();
                job->lingering = true;
                if (shutdown(job->fd, SHUT_WR) < 0 || !linger(job)) {
                        job_finish(hs, job, false);
                        return;
                }
                want = EPOLLIN;
                break;
        }
        if (want == job->events)
                return;
        struct epoll_event ev = { .events = want, .data.ptr = job };
        if (epoll_ctl(hs->ep, job->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, job->fd, &ev) < 0) {
                job_finish(hs, job, false); /* out of memory: the session ends */
                return;
        }
        job->events = want;
}

/* What the loop asked since the thread last looked: new jobs are stepped
 * (a ClientHello may be there already), cancelled ones freed. Returns
 * whether to stop. */
static bool look(struct nodelink_hs *hs)
{
        struct job_list fresh = TAILQ_HEAD_INITIALIZER(fresh), gone = TAILQ_HEAD_INITIALIZER(gone);
        struct hs_job *job, *next;
        uint64_t n;
        if (read(hs->wake, &n, sizeof n) < 0) {
                /* EAGAIN: woken for what was already seen. */
        }
        pthread_mutex_lock(&hs->mu);
        bool stop = hs->stop;
        TAILQ_CONCAT(&fresh, &hs->add, link);
        /* Why a cancelled job is not touched by the loop: it was never
         * posted, so it stays the thread's until freed here. One started
         * and cancelled before this look is among fresh. */
        for (job = TAILQ_FIRST(&fresh); job; job = next) {
                next = TAILQ_NEXT(job, link);
                if (job->cancelled || stop) {
                        TAILQ_REMOVE(&fresh, job, link);
                        TAILQ_INSERT_TAIL(&gone, job, link);
                }
        }
        if (hs->cancels || stop) {
                hs->cancels = false;
                for (job = TAILQ_FIRST(&hs->jobs); job; job = next) {
                        next = TAILQ_NEXT(job, link);
                        if (job->cancelled || stop) {
                                job_leave(hs, job);
                                TAILQ_INSERT_TAIL(&gone, job, link);
                        }
                }
        }
        pthread_mutex_unlock(&hs->mu);
        while ((job = TAILQ_FIRST(&gone))) {
                TAILQ_REMOVE(&gone, job, link);
                job_free(job);
        }
        /* A job cancelled from here on is freed at the next look (the
         * cancel wakes the thread again) or at its handshake's end. */
        while ((job = TAILQ_FIRST(&fresh))) {
                TAILQ_REMOVE(&fresh, job, link);
                TAILQ_INSERT_TAIL(&hs->jobs, job, link);
                job_step(hs, job);
        }
        return stop;
}

static void *thread_main(void *arg)
{
        struct nodelink_hs *hs = arg;
        struct epoll_event evs[HS_EVENTS];
        for (;;) {
                int n = epoll_wait(hs->ep, evs, HS_EVENTS, -1);
                bool woken = false;
                /* Why no job is freed while evs may still name it: within
                 * the batch a job ends only at its own (single) event;
                 * cancels and the stop are looked at after the batch. */
                for (int i = 0; i < n; i++) {
                        if (!evs[i].data.ptr)
                                woken = true;
                        else
                                job_step(hs, evs[i].data.ptr);
                }
                if ((woken || (n < 0 && errno != EINTR)) && look(hs))
                        break;
        }
        OPENSSL_thread_stop(); /* this thread's state of OpenSSL's, freed */
        return NULL;
}

/* --- the loop ------------------------------------------------------------ */

static void hs_take(void *arg, struct mailbox_item *item)
{
        struct hs_job *job = mailbox_entry(item, struct hs_job, done);
        struct nodelink_in *in = job->in;
        if (!in) {
                job_free(job); /* ended while its handshake was finishing */
                return;
        }
        in->hs = NULL;
        SSL *ssl = job->ssl;
        int fd = job->fd;
        bool ok = job->ok;
        free(job);
        nodelink_in_handshaken(in, fd, ssl, ok);
}

static void hs_drop(struct mailbox_item *item)
{
        job_free(mailbox_entry(item, struct hs_job, done));
}

static const struct mailbox_owner hs_box = { .take = hs_take, .drop = hs_drop };

static void wake(struct nodelink_hs *hs)
{
        uint64_t one = 1;
        if (write(hs->wake, &one, sizeof one) < 0) {
                /* An eventfd's counter this far from its limit: never. */
        }
}

int nodelink_hs_new(struct nodelink *nl, struct nodelink_hs **out)
{
        struct nodelink_hs *hs = calloc(1, sizeof *hs);
        int e = -ENOMEM;
        if (!hs)
                return -ENOMEM;
        pthread_mutex_init(&hs->mu, NULL);
        TAILQ_INIT(&hs->add);
        TAILQ_INIT(&hs->jobs);
        hs->wake = hs->ep = -1;
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
        if ((hs->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 || (hs->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
            epoll_ctl(hs->ep, EPOLL_CTL_ADD, hs->wake, &ev) < 0) {
                e = -errno;
                goto fail;
        }
        if ((e = mailbox_new(nl->base, &hs_box, hs, &hs->mb)) < 0)
                goto fail;
        /* Why at nice 0: started from the loop after its priority was
         * set, with SCHED_RESET_ON_FORK (system/priority.c), as the store's
         * threads: a peer's handshakes never run ahead of the gadgets. */
        if ((e = thread_start(&hs->thread, thread_main, hs, HS_STACK, false)) < 0)
                goto fail;
        *out = hs;
        return 0;
fail:
        mailbox_free(hs->mb);
        if (hs->ep >= 0)
                close(hs->ep);
        if (hs->wake >= 0)
                close(hs->wake);
        pthread_mutex_destroy(&hs->mu);
        free(hs);
        return e;
}

int nodelink_hs_start(struct nodelink_hs *hs, struct nodelink_in *in, int fd, SSL *ssl)
{
        struct hs_job *job = calloc(1, sizeof *job);
        if (!job)
                return -ENOMEM;
        job->in = in;
        job->fd = fd;
        job->ssl = ssl;
        SSL_set_fd(ssl, fd);
        SSL_set_accept_state(ssl);
        in->hs = job;
        pthread_mutex_lock(&hs->mu);
        TAILQ_INSERT_TAIL(&hs->add, job, link);
        pthread_mutex_unlock(&hs->mu);
        wake(hs);
        return 0;
}

void nodelink_hs_cancel(struct nodelink_hs *hs, struct nodelink_in *in)
{
        struct hs_job *job = in->hs;
        in->hs = NULL;
        /* Why in is not used after its end: the take sees job->in NULL
         * (set here, on the loop, as the take runs) and frees the job. */
        job->in = NULL;
        pthread_mutex_lock(&hs->mu);
        job->cancelled = true;
        bool posted = job->posted;
        hs->cancels = hs->cancels || !posted;
        pthread_mutex_unlock(&hs->mu);
        /* Not posted: the thread frees it, at its next look or at the
         * handshake's end, whichever comes first (both under mu). */
        if (!posted)
                wake(hs);
}

void nodelink_hs_free(struct nodelink_hs *hs)
{
        if (!hs)
                return;
        pthread_mutex_lock(&hs->mu);
        hs->stop = true;
        pthread_mutex_unlock(&hs->mu);
        wake(hs);
        pthread_join(hs->thread, NULL);
        /* The thread is gone: what it posted and the loop did not take is
         * dropped (freed) by the close; nothing posts any more. */
        mailbox_free(hs->mb);
        close(hs->ep);
        close(hs->wake);
        pthread_mutex_destroy(&hs->mu);
        free(hs);
}
