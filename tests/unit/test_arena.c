/* Unit tests of supervisor/system/arena.c with real frames: a binding call
 * of 131,000 values (the most FrameValuesMax= lets in) unpacks through the
 * arena into the same tree as through malloc, into one chunk kept for the
 * next frame of its size, which then makes no new chunk; small frames stay
 * in the smallest chunk; every cut is 16-byte aligned. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gadget.pb-c.h"
#include "system/arena.h"
#include "tap.h"

#define VALUES 131000

/* A packed WorkerMsg: a binding call whose args are a list of lists of
 * nulls, n values in all (as tests/integration/hostile.c big-frames),
 * built in arrays of their final size (appending one by one is quadratic
 * under AddressSanitizer, whose realloc always copies). */
static uint8_t *frame(long n, size_t *len)
{
        enum { PER = 60000 };
        long inner = n - 1, lists = (inner + PER) / (PER + 1);
        Gadget__Value *vals = calloc((size_t)inner, sizeof *vals);
        Gadget__Value **ptrs = calloc((size_t)inner, sizeof *ptrs);
        Gadget__List *ls = calloc((size_t)lists + 1, sizeof *ls);
        Gadget__Value **tops = calloc((size_t)lists + 1, sizeof *tops);
        for (long i = 0; i < inner; i++) {
                gadget__value__init(&vals[i]);
                vals[i].kind_case = GADGET__VALUE__KIND_NULL_VALUE;
                ptrs[i] = &vals[i];
        }
        /* lists values that are lists, the rest nulls spread over them */
        long nulls = inner - lists, at = 0;
        for (long l = 0; l < lists; l++) {
                Gadget__Value *v = &vals[nulls + l];
                gadget__list__init(&ls[l]);
                long k = nulls - at < PER ? nulls - at : PER;
                ls[l].n_items = (size_t)k, ls[l].items = ptrs + at;
                at += k;
                v->kind_case = GADGET__VALUE__KIND_LIST_VALUE, v->list_value = &ls[l];
                tops[l] = v;
        }
        Gadget__Value top = GADGET__VALUE__INIT;
        gadget__list__init(&ls[lists]);
        ls[lists].n_items = (size_t)lists, ls[lists].items = tops;
        top.kind_case = GADGET__VALUE__KIND_LIST_VALUE, top.list_value = &ls[lists];
        Gadget__BindingCall bc = GADGET__BINDING_CALL__INIT;
        bc.id = 7, bc.binding = "NOPE", bc.op = "get", bc.args = &top;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL, m.binding_call = &bc;
        *len = gadget__worker_msg__get_packed_size(&m);
        uint8_t *buf = malloc(*len);
        gadget__worker_msg__pack(&m, buf);
        free(vals);
        free(ptrs);
        free(ls);
        free(tops);
        return buf;
}

/* Values in a decoded tree. */
static long count(const Gadget__Value *v)
{
        long n = 1;
        if (v->kind_case == GADGET__VALUE__KIND_LIST_VALUE)
                for (size_t i = 0; i < v->list_value->n_items; i++)
                        n += count(v->list_value->items[i]);
        return n;
}

static bool aligned(void *arg, size_t size)
{
        struct arena *a = arg;
        void *p = a->pb.alloc(a->pb.allocator_data, size);
        return p && ((uintptr_t)p & 15) == 0;
}

int main(void)
{
        size_t big_len, small_len;
        uint8_t *big = frame(VALUES, &big_len), *small = frame(3, &small_len);
        struct arena a;
        arena_init(&a);

        Gadget__WorkerMsg *m = gadget__worker_msg__unpack(&a.pb, big_len, big);
        CHECK(m && m->binding_call && count(m->binding_call->args) == VALUES &&
              m->binding_call->id == 7, "a frame of %d values decodes through the arena", VALUES);
        gadget__worker_msg__free_unpacked(m, &a.pb);
        size_t grown = a.kept;
        arena_reset(&a);
        const struct arena_chunk *kept = SLIST_FIRST(&a.chunks);
        size_t kept_size = a.kept;
        CHECK(kept && !SLIST_NEXT(kept, link) && a.kept <= ARENA_KEEP && a.kept <= grown, "one chunk kept (%zu bytes of %zu made)",
              a.kept, grown);

        for (int i = 0; i < 3; i++) {
                m = gadget__worker_msg__unpack(&a.pb, big_len, big);
                CHECK(m && count(m->binding_call->args) == VALUES && SLIST_FIRST(&a.chunks) == kept && a.kept == kept_size,
                      "the same frame again (%d) in the chunk kept, no new one", i + 1);
                arena_reset(&a);
        }
        arena_release(&a);
        CHECK(SLIST_EMPTY(&a.chunks) && a.kept == 0, "released");

        m = gadget__worker_msg__unpack(&a.pb, small_len, small);
        CHECK(m && count(m->binding_call->args) == 3 && a.kept == 64u << 10, "a small frame: one 64 KiB chunk");
        arena_reset(&a);
        bool ok = true;
        for (size_t size = 1; size < 100; size++)
                ok &= aligned(&a, size);
        CHECK(ok, "every cut 16-byte aligned");
        arena_release(&a);
        free(big);
        free(small);
        return tap_done();
}
