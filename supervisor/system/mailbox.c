/* mailbox: a thread's items handed to the loop (mailbox.h). */
#include "mailbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <event2/event.h>

STAILQ_HEAD(mailbox_list, mailbox_item);

struct mailbox {
        /* The posters' and the loop's, under mu. */
        pthread_mutex_t mu;
        struct mailbox_list box;        /* posted, not taken yet */
        bool closed;                    /* set by the loop alone */
        int efd;                        /* written under mu; closed by the loop once closed is set */
        /* The loop's. */
        struct event *ev;
        struct event *ev_more;          /* a drain left items for the next turn (turn_max) */
        struct mailbox_list batch;      /* the drain's: taken from box, not given to take yet */
        bool *gone;                     /* the running drain's: set when the box is closed or freed */
        struct mailbox_owner owner;
        void *arg;
};

static void drain(struct mailbox *mb, bool turn);

static void on_more(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        drain(arg, true);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
        uint64_t n;
        (void)what;
        /* Read before the drain takes the box: a post that comes after
         * the take finds the box empty and writes again, so the loop is
         * woken for it (a post between the read and the take is taken
         * now, and its write wakes a drain that finds nothing). */
        if (read(fd, &n, sizeof n) < 0) {
                /* EAGAIN: nothing counted since the last read. */
        }
        drain(arg, true);
}

int mailbox_new(struct event_base *base, const struct mailbox_owner *owner, void *arg, struct mailbox **out)
{
        struct mailbox *mb = calloc(1, sizeof *mb);
        int e;
        if (!mb)
                return -ENOMEM;
        pthread_mutex_init(&mb->mu, NULL);
        STAILQ_INIT(&mb->box);
        STAILQ_INIT(&mb->batch);
        mb->owner = *owner;
        mb->arg = arg;
        if ((mb->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                e = -errno;
                goto fail;
        }
        if (!(mb->ev = event_new(base, mb->efd, EV_READ | EV_PERSIST, on_wake, mb)) || event_add(mb->ev, NULL) < 0 ||
            (owner->turn_max && !(mb->ev_more = evtimer_new(base, on_more, mb)))) {
                e = -ENOMEM;
                goto fail;
        }
        *out = mb;
        return 0;
fail:
        if (mb->ev)
                event_free(mb->ev);
        if (mb->ev_more)
                event_free(mb->ev_more);
        if (mb->efd >= 0)
                close(mb->efd);
        pthread_mutex_destroy(&mb->mu);
        free(mb);
        return e;
}

bool mailbox_post(struct mailbox *mb, struct mailbox_item *item)
{
        pthread_mutex_lock(&mb->mu);
        if (mb->closed) {
                void (*drop)(struct mailbox_item *) = mb->owner.drop;
                pthread_mutex_unlock(&mb->mu);
                if (drop)
                        drop(item);
                return false;
        }
        bool wake = STAILQ_EMPTY(&mb->box);
        STAILQ_INSERT_TAIL(&mb->box, item, link);
        if (wake) {
                /* Why under mu: the loop closes efd only after it set
                 * closed under mu, so this write cannot reach a file that
                 * took efd's number. An eventfd's counter, read at each
                 * drain and written once per empty box, is far from its
                 * limit: the write neither blocks nor fails. */
                uint64_t one = 1;
                if (write(mb->efd, &one, sizeof one) < 0) {
                        /* Nothing to do: see above. */
                }
        }
        pthread_mutex_unlock(&mb->mu);
        return true;
}

void mailbox_drain(struct mailbox *mb)
{
        drain(mb, false);
}

/* turn: within the owner's turn_max (a wake-up's drain, or its sequel). */
static void drain(struct mailbox *mb, bool turn)
{
        if (mb->closed)
                return;
        size_t spent = 0, max = turn && mb->owner.cost ? mb->owner.turn_max : 0;
        /* gone: set by a close or a free from inside take (this drain's
         * or a drain it called), after which the box is not touched. A
         * drain within take carries on with this one's batch: the items
         * keep their order whoever takes them. */
        bool gone = false, *outer = mb->gone;
        mb->gone = &gone;
        pthread_mutex_lock(&mb->mu);
        STAILQ_CONCAT(&mb->batch, &mb->box);
        pthread_mutex_unlock(&mb->mu);
        struct mailbox_item *item;
        while ((item = STAILQ_FIRST(&mb->batch))) {
                if (max && spent >= max) {
                        /* Why this loses nothing: the rest stays in batch,
                         * ahead of what is posted meanwhile, for on_more. */
                        static const struct timeval now = { 0, 0 };
                        event_add(mb->ev_more, &now);
                        break;
                }
                if (max)
                        spent += mb->owner.cost(item);
                STAILQ_REMOVE_HEAD(&mb->batch, link);
                mb->owner.take(mb->arg, item);
                if (gone) {
                        if (outer)
                                *outer = true;
                        return;
                }
        }
        mb->gone = outer;
        if (mb->owner.end)
                mb->owner.end(mb->arg);
}

void mailbox_close(struct mailbox *mb)
{
        if (mb->closed)
                return;
        /* All of the box that the close needs is taken out under mu:
         * once it is unlocked, a thread that posts and sees closed may
         * free the box (mailbox_free, the last of the two). */
        struct mailbox_list left = STAILQ_HEAD_INITIALIZER(left);
        pthread_mutex_lock(&mb->mu);
        mb->closed = true;
        STAILQ_CONCAT(&left, &mb->batch);
        STAILQ_CONCAT(&left, &mb->box);
        struct event *ev = mb->ev, *more = mb->ev_more;
        int efd = mb->efd;
        bool *gone = mb->gone;
        void (*drop)(struct mailbox_item *) = mb->owner.drop;
        mb->ev = mb->ev_more = NULL;
        mb->efd = -1;
        mb->gone = NULL;
        pthread_mutex_unlock(&mb->mu);
        /* No post writes efd from here on: each looks at closed first,
         * under mu. No post waits for anything here either: one that
         * comes now drops its item and returns. */
        event_free(ev);
        if (more)
                event_free(more);
        close(efd);
        if (gone)
                *gone = true;
        struct mailbox_item *item;
        while ((item = STAILQ_FIRST(&left))) {
                STAILQ_REMOVE_HEAD(&left, link);
                if (drop)
                        drop(item);
        }
}

void mailbox_free(struct mailbox *mb)
{
        if (!mb)
                return;
        pthread_mutex_lock(&mb->mu);
        bool closed = mb->closed;
        pthread_mutex_unlock(&mb->mu);
        if (!closed)
                mailbox_close(mb);
        pthread_mutex_destroy(&mb->mu);
        free(mb);
}
