/* Unit tests of supervisor/store/kvpg_wants.c: 10,000 wants are each
 * found by name, kept in the order wanted, and taken out from anywhere
 * (first, last, middle) without losing the others. */
#include <stdio.h>
#include <string.h>

#include "store/kvpg_wants.h"
#include "tap.h"

#define N 10000

static void name_of(char *buf, size_t len, int i)
{
        snprintf(buf, len, "g%05d", i);
}

/* The wants in order are exactly the indexes i with i % step != gone, in
 * increasing order, and each is found by name (the others are not). */
static void check_all(const struct kvpg_wants *t, int step, int gone, const char *when)
{
        char name[16];
        int i = 0, bad = 0;
        size_t n = 0;
        for (const struct kvpg_want *w = t->first; w; w = w->next, i++, n++) {
                while (i % step == gone)
                        i++;
                name_of(name, sizeof name, i);
                bad += strcmp(w->gadget, name) != 0 || (w->next && w->next->prev != w);
        }
        CHECK(bad == 0 && n == t->by_name.n, "%s: order (%d out of place, %zu of %zu)", when, bad, n, t->by_name.n);
        bad = 0;
        for (i = 0; i < N; i++) {
                name_of(name, sizeof name, i);
                const struct kvpg_want *w = kvpg_wants_find(t, name);
                bad += i % step == gone ? w != NULL : !w || strcmp(w->gadget, name) != 0;
        }
        CHECK(bad == 0, "%s: found by name (%d wrong)", when, bad);
}

int main(void)
{
        struct kvpg_wants t = { 0 };
        char name[16];
        CHECK(kvpg_wants_find(&t, "g00000") == NULL, "an empty table finds nothing");
        for (int i = 0; i < N; i++) {
                name_of(name, sizeof name, i);
                struct kvpg_want *w = kvpg_wants_add(&t, name);
                CHECK(w && w->sent == -1 && !w->held, "add %d", i);
        }
        CHECK(t.by_name.n == N && t.by_name.size >= N, "%zu wants in %zu slots", t.by_name.n, t.by_name.size);
        check_all(&t, N + 1, -1, "all");
        /* Every third out: the first one, then from anywhere in the list
         * and in the chains. */
        for (int i = 0; i < N; i += 3) {
                name_of(name, sizeof name, i);
                struct kvpg_want *w = kvpg_wants_find(&t, name);
                kvpg_wants_remove(&t, w);
                kvpg_want_free(w);
        }
        check_all(&t, 3, 0, "every third removed");
        struct kvpg_want *last = t.last;
        kvpg_wants_remove(&t, last);
        CHECK(t.last && t.last->next == NULL && strcmp(t.last->gadget, "g09997") == 0, "the last removed");
        kvpg_want_free(last);
        kvpg_wants_clear(&t);
        CHECK(t.first == NULL && t.by_name.n == 0 && t.by_name.size == 0, "cleared");
        return tap_done();
}
