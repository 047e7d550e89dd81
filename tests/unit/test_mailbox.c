/* Unit tests of supervisor/system/mailbox.c on a real loop and real
 * threads: several threads' items, each thread's in order; one wake for
 * many posts; a box closed or freed with items pending (each dropped,
 * none lost); a box closed while a thread still posts (no deadlock,
 * every item taken or dropped); a box freed or drained from its own
 * take; a turn's drain within the owner's turn_max. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "system/mailbox.h"
#include "tap.h"

#define THREADS 4
#define PER_THREAD 20000

struct item {
        struct mailbox_item link;
        unsigned thread, seq;
};

struct owner {
        struct event_base *base;
        struct mailbox *mb;
        unsigned taken, dropped, drains, want;
        unsigned next[THREADS];         /* each thread's next seq */
        bool in_order;
        unsigned order[16];             /* the seqs taken, for the small tests */
        bool free_in_take, drain_in_take;
};

static _Atomic unsigned dropped_any;

static struct item *item_of(struct mailbox_item *i)
{
        return mailbox_entry(i, struct item, link);
}

static void take(void *arg, struct mailbox_item *i)
{
        struct owner *o = arg;
        struct item *it = item_of(i);
        if (it->thread < THREADS) {
                if (it->seq != o->next[it->thread])
                        o->in_order = false;
                o->next[it->thread] = it->seq + 1;
        }
        if (o->taken < 16)
                o->order[o->taken] = it->seq;
        o->taken++;
        free(it);
        if (o->drain_in_take) {
                o->drain_in_take = false;
                mailbox_drain(o->mb);
                mailbox_free(o->mb);
        }
        if (o->free_in_take) {
                o->free_in_take = false;
                mailbox_free(o->mb);
        }
        if (o->want && o->taken == o->want)
                event_base_loopbreak(o->base);
}

static void end(void *arg)
{
        ((struct owner *)arg)->drains++;
}

static void drop(struct mailbox_item *i)
{
        dropped_any++;
        free(item_of(i));
}

static const struct mailbox_owner owner_fns = { .take = take, .end = end, .drop = drop };

static struct item *item_new(unsigned thread, unsigned seq)
{
        struct item *it = calloc(1, sizeof *it);
        it->thread = thread;
        it->seq = seq;
        return it;
}

static struct owner *owner_new(struct event_base *base)
{
        struct owner *o = calloc(1, sizeof *o);
        o->base = base;
        o->in_order = true;
        if (mailbox_new(base, &owner_fns, o, &o->mb) < 0)
                abort();
        return o;
}

/* A new box with n items of thread 0 pending (seq 0 to n-1), no drop yet. */
static struct owner *owner_with(struct event_base *base, unsigned n)
{
        struct owner *o = owner_new(base);
        dropped_any = 0;
        for (unsigned i = 0; i < n; i++)
                mailbox_post(o->mb, &item_new(0, i)->link);
        return o;
}

struct poster {
        struct mailbox *mb;
        unsigned thread, n, refused;
};

static void *post_all(void *arg)
{
        struct poster *p = arg;
        for (unsigned i = 0; i < p->n; i++)
                if (!mailbox_post(p->mb, &item_new(p->thread, i)->link))
                        p->refused++;
        return NULL;
}

static void test_threads_in_order(struct event_base *base)
{
        struct owner *o = owner_new(base);
        struct poster p[THREADS];
        pthread_t t[THREADS];
        o->want = THREADS * PER_THREAD;
        for (unsigned i = 0; i < THREADS; i++) {
                p[i] = (struct poster){ .mb = o->mb, .thread = i, .n = PER_THREAD };
                pthread_create(&t[i], NULL, post_all, &p[i]);
        }
        /* Until every item is taken (take breaks the loop then). */
        event_base_dispatch(base);
        for (unsigned i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        CHECK(o->taken == THREADS * PER_THREAD, "every item of %d threads taken (%u)", THREADS, o->taken);
        CHECK(o->in_order, "each thread's items taken in the order it posted them");
        CHECK(o->drains >= 1 && o->drains <= o->taken, "%u drains for %u items", o->drains, o->taken);
        mailbox_free(o->mb);
        free(o);
}

/* The process's write calls so far (/proc/self/io's syscw); -1 where the
 * kernel does not count them. */
static long long writes_now(void)
{
        FILE *f = fopen("/proc/self/io", "r");
        char line[128];
        long long n = -1;
        while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "syscw: %lld", &n) == 1)
                        break;
        if (f)
                fclose(f);
        return n;
}

static void test_one_wake(struct event_base *base)
{
        long long before = writes_now();
        struct owner *o = owner_with(base, 100);
        long long wrote = writes_now() - before;
        if (before < 0)
                CHECK(true, "# SKIP the kernel counts no write calls (/proc/self/io)");
        else
                CHECK(wrote == 1, "100 posts to an empty box woke the loop once (%lld writes)", wrote);
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->taken == 100 && o->drains == 1, "one drain took the 100 (%u taken, %u drains)", o->taken,
              o->drains);
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->drains == 1, "no drain more without a post");
        mailbox_post(o->mb, &item_new(0, 100)->link);
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->taken == 101 && o->drains == 2, "a post to the emptied box woke the loop again");
        CHECK(o->in_order, "in order");
        mailbox_free(o->mb);
        free(o);
}

static size_t cost_one(const struct mailbox_item *i)
{
        (void)i;
        return 1;
}

/* A fd another party of the loop is ready on, and counted when served. */
static void other_party(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        (*(unsigned *)arg)++;
}

/* An owner with turn_max 3 (each item costing 1): a wake-up's drain takes
 * 3 of the 10 pending, the loop serves its other ready parties, and the
 * rest follow in later turns, in order; mailbox_drain itself takes all. */
static void test_turn_max(struct event_base *base)
{
        static const struct mailbox_owner fns = { .take = take, .end = end, .drop = drop, .cost = cost_one,
                                                  .turn_max = 3 };
        struct owner *o = calloc(1, sizeof *o);
        o->base = base;
        o->in_order = true;
        if (mailbox_new(base, &fns, o, &o->mb) < 0)
                abort();
        for (unsigned i = 0; i < 10; i++)
                mailbox_post(o->mb, &item_new(0, i)->link);
        unsigned served = 0;
        struct event *other = event_new(base, 1, EV_WRITE | EV_PERSIST, other_party, &served); /* stdout: ready */
        event_add(other, NULL);
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        CHECK(o->taken == 3, "a wake-up's drain took turn_max's 3 of 10 (%u)", o->taken);
        unsigned turns = 0;
        while (o->taken < 10 && turns++ < 20)
                event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        CHECK(o->taken == 10 && o->in_order, "the rest taken in later turns, in order (%u, %u turns)", o->taken,
              turns);
        CHECK(served >= 3, "the other party served between them (%u times)", served);
        event_free(other);
        for (unsigned i = 10; i < 20; i++)
                mailbox_post(o->mb, &item_new(0, i)->link);
        mailbox_drain(o->mb);
        CHECK(o->taken == 20 && o->in_order, "mailbox_drain took all 10 at once (%u)", o->taken);
        mailbox_free(o->mb);
        free(o);
}

static void test_free_pending(struct event_base *base)
{
        struct owner *o = owner_with(base, 5);
        mailbox_close(o->mb);
        CHECK(dropped_any == 5 && o->taken == 0, "a close dropped the 5 pending (%u), took none", dropped_any);
        CHECK(!mailbox_post(o->mb, &item_new(0, 5)->link) && dropped_any == 6,
              "a post to a closed box is refused, its item dropped");
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->taken == 0 && o->drains == 0, "a closed box is not drained");
        mailbox_free(o->mb);
        free(o);

        o = owner_with(base, 3);
        mailbox_free(o->mb);
        CHECK(dropped_any == 3, "a free dropped the 3 pending (%u)", dropped_any);
        free(o);
}

static void test_free_in_take(struct event_base *base)
{
        struct owner *o = owner_with(base, 3);
        o->free_in_take = true;
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->taken == 1 && dropped_any == 2 && o->drains == 0,
              "a box freed by its take: the rest dropped, no end (%u taken, %u dropped)", o->taken, dropped_any);
        free(o);

        o = owner_with(base, 3);
        o->drain_in_take = true;
        event_base_loop(base, EVLOOP_NONBLOCK);
        CHECK(o->taken == 3 && dropped_any == 0 && o->order[0] == 0 && o->order[1] == 1 && o->order[2] == 2,
              "a drain from a take, then a free: all taken, in order (%u taken)", o->taken);
        free(o);
}

/* A thread that posts while the loop closes the box, until a post is
 * refused, then frees it (the last of the two): each item taken or
 * dropped, the thread never stuck. */
static void *post_then_free(void *arg)
{
        struct poster *p = arg;
        while (mailbox_post(p->mb, &item_new(p->thread, p->n++)->link))
                ;
        mailbox_free(p->mb);
        return NULL;
}

static void test_close_while_posting(struct event_base *base)
{
        struct owner *o = owner_new(base);
        struct poster p = { .mb = o->mb, .thread = 0 };
        pthread_t t;
        dropped_any = 0;
        o->want = 1000;
        pthread_create(&t, NULL, post_then_free, &p);
        event_base_dispatch(base); /* until 1000 are taken */
        mailbox_close(o->mb);
        pthread_join(t, NULL);
        CHECK(o->taken + dropped_any == p.n && dropped_any >= 1, "each of %u items taken (%u) or dropped (%u)", p.n,
              o->taken, dropped_any);
        CHECK(o->in_order, "those taken in order");
        free(o);
}

int main(void)
{
        struct event_base *base = event_base_new();
        test_threads_in_order(base);
        test_one_wake(base);
        test_turn_max(base);
        test_free_pending(base);
        test_free_in_take(base);
        test_close_while_posting(base);
        event_base_free(base);
        return tap_done();
}
