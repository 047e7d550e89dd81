/* Unit tests of supervisor/store/kvpg_lanes.c: the gadgets with jobs
 * queued on the PostgreSQL store take turns, each gadget's jobs in order;
 * a closing store's jobs are taken out, the others' stay. */
#include <stdint.h>
#include <stdlib.h>

#include "store/kv_job.h"
#include "store/kvpg_lanes.h"
#include "tap.h"

/* A job of store owner (any distinct pointers serve as stores), numbered. */
static struct kv_job *job(uintptr_t owner, unsigned n)
{
        struct kv_job *j = calloc(1, sizeof *j);
        j->kv = (struct kv *)owner;
        j->limit = n;
        return j;
}

static void test_turns(void)
{
        struct kvpg_lanes q;
        kvpg_lanes_init(&q);
        CHECK(kvpg_lanes_empty(&q) && !kvpg_lanes_next(&q), "empty at first");
        /* A floods 5 jobs, then B and C queue 2 each. */
        for (unsigned i = 0; i < 5; i++)
                kvpg_lanes_put(&q, job(0xa0, i));
        kvpg_lanes_put(&q, job(0xb0, 0));
        kvpg_lanes_put(&q, job(0xc0, 0));
        kvpg_lanes_put(&q, job(0xb0, 1));
        kvpg_lanes_put(&q, job(0xc0, 1));
        static const uintptr_t want_owner[] = { 0xa0, 0xb0, 0xc0, 0xa0, 0xb0, 0xc0, 0xa0, 0xa0, 0xa0 };
        static const unsigned want_n[] = { 0, 0, 0, 1, 1, 1, 2, 3, 4 };
        for (size_t i = 0; i < 9; i++) {
                struct kv_job *j = kvpg_lanes_next(&q);
                CHECK(j && (uintptr_t)j->kv == want_owner[i] && j->limit == want_n[i],
                      "turn %zu: store %#lx job %u (want %#lx job %u)", i, j ? (unsigned long)(uintptr_t)j->kv : 0,
                      j ? j->limit : 0, (unsigned long)want_owner[i], want_n[i]);
                free(j);
        }
        CHECK(kvpg_lanes_empty(&q), "empty after all");
        /* A lane emptied and refilled goes last. */
        kvpg_lanes_put(&q, job(0xb0, 7));
        kvpg_lanes_put(&q, job(0xa0, 8));
        struct kv_job *j = kvpg_lanes_next(&q);
        CHECK(j && (uintptr_t)j->kv == 0xb0, "the first to queue goes first");
        free(j);
        free(kvpg_lanes_next(&q));
}

static void test_take(void)
{
        struct kvpg_lanes q;
        kvpg_lanes_init(&q);
        for (unsigned i = 0; i < 3; i++) {
                kvpg_lanes_put(&q, job(0xa0, i));
                kvpg_lanes_put(&q, job(0xb0, i));
        }
        struct kv_job *gone = kvpg_lanes_take(&q, (struct kv *)0xa0);
        unsigned n = 0;
        while (gone) {
                struct kv_job *j = gone;
                gone = j->next;
                CHECK((uintptr_t)j->kv == 0xa0 && j->limit == n, "taken in order: %u", n);
                n++;
                free(j);
        }
        CHECK(n == 3, "3 of A's taken, %u", n);
        kvpg_lanes_put(&q, job(0xc0, 0));
        struct kv_job *j = kvpg_lanes_next(&q);
        CHECK(j && (uintptr_t)j->kv == 0xb0 && j->limit == 0, "B goes on after A left");
        free(j);
        j = kvpg_lanes_next(&q);
        CHECK(j && (uintptr_t)j->kv == 0xc0, "then C, queued after A left");
        free(j);
        struct kv_job *all = kvpg_lanes_take(&q, NULL);
        n = 0;
        while (all) {
                j = all;
                all = j->next;
                n++;
                free(j);
        }
        CHECK(n == 2 && kvpg_lanes_empty(&q), "the rest taken: %u", n);
        kvpg_lanes_put(&q, job(0xd0, 0));
        j = kvpg_lanes_next(&q);
        CHECK(j && (uintptr_t)j->kv == 0xd0, "usable after everything was taken");
        free(j);
}

int main(void)
{
        test_turns();
        test_take();
        return tap_done();
}
