/* arena: bump allocation for one decoded frame (arena.h). */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>

/* Under AddressSanitizer what was reset is poisoned, so that a part of a
 * frame kept past its handler is still caught as a use after free. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A new chunk is at least this big, or twice the last, up to the request. */
#define CHUNK_MIN (64u << 10)
#define ALIGN 16u

static void *cut(void *arg, size_t size)
{
        struct arena *a = arg;
        if (size > SIZE_MAX / 4)
                return NULL;
        size = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        if (size == 0)
                size = ALIGN;
        struct arena_chunk *c = SLIST_FIRST(&a->chunks);
        if (c && c->size - c->used >= size) {
                void *p = c->data + c->used;
                c->used += size;
                UNPOISON(p, size);
                return p;
        }
        /* The older chunks' room is not looked for: a frame fills them in
         * order, and a reset keeps the newest alone. */
        size_t want = c ? c->size * 2 : CHUNK_MIN;
        if (want < size)
                want = size;
        struct arena_chunk *n = malloc(sizeof *n + want);
        if (!n)
                return NULL;
        n->size = want;
        n->used = size;
        SLIST_INSERT_HEAD(&a->chunks, n, link);
        a->kept += want;
        POISON(n->data + size, want - size);
        return n->data;
}

static void keep(void *arg, void *p)
{
        (void)arg;
        (void)p; /* given back with the rest at arena_reset */
}

void arena_init(struct arena *a)
{
        *a = (struct arena){ .pb = { .alloc = cut, .free = keep, .allocator_data = a } };
}

void arena_reset(struct arena *a)
{
        struct arena_chunk *c = SLIST_FIRST(&a->chunks);
        if (!c)
                return;
        if (!SLIST_NEXT(c, link) && c->size <= ARENA_KEEP) {
                c->used = 0;
                POISON(c->data, c->size);
                return;
        }
        /* The frame took several chunks: one big enough for all it took
         * replaces them, so that the next frame as big fits in it. */
        size_t need = 0;
        SLIST_FOREACH(c, &a->chunks, link)
                need += c->used;
        size_t size = (need + CHUNK_MIN - 1) / CHUNK_MIN * CHUNK_MIN;
        arena_release(a);
        if (size > ARENA_KEEP)
                return; /* made again for such a frame */
        c = malloc(sizeof *c + size);
        if (!c)
                return;
        *c = (struct arena_chunk){ .size = size };
        POISON(c->data, c->size);
        SLIST_INSERT_HEAD(&a->chunks, c, link);
        a->kept = size;
}

void arena_release(struct arena *a)
{
        struct arena_chunk *c;
        while ((c = SLIST_FIRST(&a->chunks))) {
                SLIST_REMOVE_HEAD(&a->chunks, link);
                UNPOISON(c->data, c->size);
                free(c);
        }
        a->kept = 0;
}
