/* Unit tests of supervisor/system/nametab.c: 3,000 things named one after
 * the other (the table doubling from 64 to 4,096 slots, through the
 * growths that 10,000 declared gadgets go through too), some taken out
 * while it grows and more after, each found by name while in and not
 * found once out; names never added are not found; a thing whose name
 * is read through a struct that is replaced (as a unit's policy is on
 * reload) is still found and taken out. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/nametab.h"
#include "tap.h"

#define N 3000

struct named {
        char name[16];
        const char *const *shown;       /* where name_of reads the name */
        bool in;
        struct nametab_link link;
};

static const char *name_of(const struct nametab_link *l)
{
        return *NAMETAB_ENTRY(l, struct named, link)->shown;
}

static struct named things[N];
static const char *names[N];

/* Every thing is found if in and not found if out; n in all. */
static void check_all(const struct nametab *t, const char *when)
{
        int lost = 0, ghost = 0;
        size_t n = 0;
        for (int i = 0; i < N; i++) {
                struct nametab_link *l = nametab_find(t, names[i], name_of);
                if (things[i].in)
                        lost += l != &things[i].link, n++;
                else
                        ghost += l != NULL;
        }
        CHECK(lost == 0 && ghost == 0 && t->n == n, "%s: %d lost, %d found when out, %zu of %zu in",
              when, lost, ghost, t->n, n);
}

int main(void)
{
        struct nametab t = { 0 };
        CHECK(nametab_find(&t, "x0", name_of) == NULL, "an empty table finds nothing");
        int bad = 0;
        size_t grown = 0, size = 0;
        for (int i = 0; i < N; i++) {
                snprintf(things[i].name, sizeof things[i].name, "x%d", i);
                names[i] = things[i].name;
                things[i].shown = &names[i];
                bad += nametab_insert(&t, &things[i].link, name_of) != 0;
                things[i].in = true;
                grown += t.size != size;
                size = t.size;
                /* One in 7 out again as soon as in, one in 5 (of those
                 * before it) while the table grows. */
                if (i % 7 == 3) {
                        nametab_remove(&t, &things[i].link, name_of);
                        things[i].in = false;
                }
                if (i % 5 == 1 && i >= 10) {
                        nametab_remove(&t, &things[i - 10].link, name_of);
                        things[i - 10].in = false;
                }
                /* Each found right after its table grew. */
                if (t.size == 64 * 2 || t.size == 1024)
                        for (int j = 0; j <= i; j++)
                                bad += (nametab_find(&t, things[j].name, name_of) == &things[j].link) != things[j].in;
        }
        CHECK(bad == 0, "%d inserts, each found after each growth (%d wrong)", N, bad);
        CHECK(t.size >= t.n && (t.size & (t.size - 1)) == 0 && t.size <= 4096 && grown >= 6,
              "%zu slots (a power of 2, at least the %zu in it), grown %zu times", t.size, t.n, grown);
        check_all(&t, "after growth");

        /* Absent names: never added, near the added ones, the empty one. */
        const char *absent[] = { "", "x", "x3000", "x-1", "x00", "y1", "x1 ", "X1" };
        bad = 0;
        for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
                bad += nametab_find(&t, absent[i], name_of) != NULL;
        CHECK(bad == 0, "names never added are not found (%d found)", bad);

        /* The names read through another copy (a unit's new policy). */
        static char copies[N][16];
        for (int i = 0; i < N; i++) {
                memcpy(copies[i], things[i].name, sizeof copies[i]);
                names[i] = copies[i];
                strcpy(things[i].name, "gone");
        }
        check_all(&t, "the names moved");

        /* Every other one left out, then the rest, then one in again. */
        for (int i = 0; i < N; i += 2)
                if (things[i].in) {
                        nametab_remove(&t, &things[i].link, name_of);
                        things[i].in = false;
                }
        check_all(&t, "every other one out");
        for (int i = 0; i < N; i++)
                if (things[i].in) {
                        nametab_remove(&t, &things[i].link, name_of);
                        things[i].in = false;
                }
        check_all(&t, "all out");
        CHECK(nametab_insert(&t, &things[7].link, name_of) == 0 &&
              nametab_find(&t, names[7], name_of) == &things[7].link && t.n == 1, "one in again");
        nametab_free(&t);
        CHECK(t.slots == NULL && t.size == 0 && t.n == 0 && nametab_find(&t, "x7", name_of) == NULL, "freed: empty");
        return tap_done();
}
