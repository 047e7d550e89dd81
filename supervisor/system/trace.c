/* trace: the spans of this node's call chains, in a bounded ring (trace.h). */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

struct traces {
        const char *node;
        size_t keep;
        struct span *ring;
        uint64_t next;          /* spans ever added: the next goes to ring[next % keep] */
        uint64_t taken;         /* the export's: spans before this one were taken (or dropped) */
        bool exporting;
        uint64_t dropped;
        uint64_t rng;           /* splitmix64's state, seeded from getrandom */
        uint64_t sample_below;  /* a new trace is sampled if a random number is below (UINT64_MAX: all) */
        /* The index by trace id: chains of spans whose ids hash alike, newest
         * first. head[h] is the newest such span's number + 1 (0: none),
         * older[i % keep] the one before span i in its chain (+ 1). A number
         * below the ring's oldest ends a chain: those spans are gone. */
        uint64_t *head, *older;
        uint64_t mask;          /* head's size - 1 (a power of two, >= keep) */
        uint64_t key[2];        /* the hash's key, random: chosen ids do not collide on purpose */
        uint64_t wall_off_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC (mod 2^64), */
        uint64_t wall_at_ns;    /* read at this CLOCK_MONOTONIC time (0: never) */
};

/* Ids need to be unique, not secret: a fast generator seeded once. */
static uint64_t rand64(struct traces *t)
{
        uint64_t z = (t->rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

int traces_new(const char *node, size_t keep, double sample, struct traces **out)
{
        struct traces *t = calloc(1, sizeof *t);
        if (!t || (keep && !(t->ring = calloc(keep, sizeof *t->ring)))) {
                free(t);
                return -ENOMEM;
        }
        t->node = node ? node : "";
        t->keep = keep;
        size_t buckets = 1;
        while (buckets < keep)
                buckets <<= 1;
        if (keep && (!(t->head = calloc(buckets, sizeof *t->head)) || !(t->older = calloc(keep, sizeof *t->older)))) {
                traces_free(t);
                return -ENOMEM;
        }
        t->mask = buckets - 1;
        t->sample_below = sample >= 1 ? UINT64_MAX : sample <= 0 ? 0 : (uint64_t)(sample * 18446744073709551615.0);
        if (getrandom(&t->rng, sizeof t->rng, GRND_NONBLOCK) != sizeof t->rng) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                t->rng = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid();
        }
        t->key[0] = rand64(t);
        t->key[1] = rand64(t);
        *out = t;
        return 0;
}

void traces_free(struct traces *t)
{
        if (!t)
                return;
        free(t->ring);
        free(t->head);
        free(t->older);
        free(t);
}

bool traces_on(const struct traces *t)
{
        return t && t->keep;
}

const char *traces_node(const struct traces *t)
{
        return t ? t->node : "";
}

#define WALL_RESYNC_NS 1000000000ull

static uint64_t ns_of(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

uint64_t traces_wall_ns(struct traces *t, uint64_t mono_ns)
{
        if (!t->wall_at_ns || mono_ns - t->wall_at_ns >= WALL_RESYNC_NS) {
                struct timespec mono, wall;
                clock_gettime(CLOCK_MONOTONIC, &mono);
                clock_gettime(CLOCK_REALTIME, &wall);
                t->wall_off_ns = ns_of(&wall) - ns_of(&mono);
                t->wall_at_ns = ns_of(&mono);
        }
        return mono_ns + t->wall_off_ns;
}

static void fill(struct traces *t, uint8_t *b, size_t n)
{
        do {
                for (size_t i = 0; i < n; i += 8) {
                        uint64_t r = rand64(t);
                        memcpy(b + i, &r, n - i < 8 ? n - i : 8);
                }
        } while (trace_id_zero(b, n));
}

void trace_begin(struct traces *t, const struct trace_ctx *parent, struct trace_ctx *out)
{
        if (parent) {
                memcpy(out->trace_id, parent->trace_id, TRACE_ID_LEN);
                out->flags = parent->flags;
        } else {
                fill(t, out->trace_id, TRACE_ID_LEN);
                out->flags = t->sample_below == UINT64_MAX || rand64(t) < t->sample_below ? TRACE_FLAG_SAMPLED : 0;
        }
        fill(t, out->span_id, TRACE_SPAN_ID_LEN);
}

/* id's chain in the index: a keyed mix of its two halves. */
static uint64_t bucket(const struct traces *t, const uint8_t id[TRACE_ID_LEN])
{
        uint64_t a, b;
        memcpy(&a, id, 8);
        memcpy(&b, id + 8, 8);
        uint64_t h = (a ^ t->key[0]) * 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 29) ^ b ^ t->key[1]) * 0xbf58476d1ce4e5b9ull;
        return (h ^ (h >> 32)) & t->mask;
}

struct span *traces_next(struct traces *t, const struct trace_ctx *ctx)
{
        if (!traces_on(t))
                return NULL;
        uint64_t i = t->next++;
        struct span *s = &t->ring[i % t->keep];
        s->ctx = *ctx;
        uint64_t *h = &t->head[bucket(t, ctx->trace_id)];
        t->older[i % t->keep] = *h;
        *h = i + 1;
        return s;
}

size_t traces_find(const struct traces *t, const uint8_t id[TRACE_ID_LEN], const struct span **out, size_t max)
{
        if (!traces_on(t) || !max)
                return 0;
        size_t n = 0;
        uint64_t first = t->next > t->keep ? t->next - t->keep : 0;
        /* Newest first along the chain, then turned to oldest first. */
        for (uint64_t i = t->head[bucket(t, id)]; i > first && n < max; i = t->older[(i - 1) % t->keep]) {
                const struct span *s = &t->ring[(i - 1) % t->keep];
                if (memcmp(s->ctx.trace_id, id, TRACE_ID_LEN) == 0)
                        out[n++] = s;
        }
        for (size_t a = 0, b = n; a + 1 < b; a++, b--) {
                const struct span *x = out[a];
                out[a] = out[b - 1];
                out[b - 1] = x;
        }
        return n;
}

void traces_export_start(struct traces *t)
{
        if (!traces_on(t))
                return;
        t->exporting = true;
        t->taken = t->next;
}

size_t traces_take(struct traces *t, struct span *out, size_t max)
{
        if (!traces_on(t) || !t->exporting)
                return 0;
        if (t->next - t->taken > t->keep) {
                t->dropped += t->next - t->taken - t->keep;
                t->taken = t->next - t->keep;
        }
        size_t n = 0;
        for (; t->taken < t->next && n < max; t->taken++)
                if (t->ring[t->taken % t->keep].ctx.flags & TRACE_FLAG_SAMPLED)
                        out[n++] = t->ring[t->taken % t->keep];
        return n;
}

uint64_t traces_dropped(const struct traces *t)
{
        return t ? t->dropped : 0;
}

void traces_count_dropped(struct traces *t, uint64_t n)
{
        if (t)
                t->dropped += n;
}
