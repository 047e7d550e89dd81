/* logbuf: line splitting, the log budget and a ring of recent lines. */
#include "logbuf.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "system/log.h"

void logbuf_init(struct logbuf *b)
{
        *b = (struct logbuf){ 0 };
}

void logbuf_free(struct logbuf *b)
{
        if (!b->lines)
                return;
        for (size_t i = 0; i < b->count; i++)
                free(b->lines[(b->head + i) % b->cap]);
        free(b->lines);
        b->lines = NULL;
}

#define RING_FIRST 16

/* Room for one more line: the ring grown (in order, from slot 0) while it
 * is below LOGBUF_LINES; a full ring of LOGBUF_LINES drops its oldest
 * (put_line). False if out of memory. */
static bool ring_room(struct logbuf *b)
{
        if (b->lines && (b->count < b->cap || b->cap == LOGBUF_LINES))
                return true;
        size_t cap = b->cap ? b->cap * 2 : RING_FIRST;
        if (cap > LOGBUF_LINES)
                cap = LOGBUF_LINES;
        struct logbuf_entry **lines = calloc(cap, sizeof *lines);
        if (!lines)
                return false;
        for (size_t i = 0; i < b->count; i++)
                lines[i] = b->lines[(b->head + i) % b->cap];
        free(b->lines);
        b->lines = lines;
        b->cap = cap;
        b->head = 0;
        return true;
}

static const char *const source_names[LOGBUF_N_SOURCES] = {
        [LOGBUF_STDOUT] = "stdout", [LOGBUF_STDERR] = "stderr", [LOGBUF_MESSAGE] = "message",
        [LOGBUF_GADGETD] = "gadgetd",
};

const char *logbuf_source_name(unsigned source)
{
        return source < LOGBUF_N_SOURCES ? source_names[source] : NULL;
}

int64_t logbuf_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An entry of m and the len bytes of text (a NUL added), or NULL. */
static struct logbuf_entry *entry_new(const struct logbuf_meta *m, const char *text, size_t len)
{
        struct logbuf_entry *e = malloc(sizeof *e + len + 1);
        if (!e)
                return NULL;
        e->time_ms = m->time_ms;
        e->run = m->run;
        e->source = m->source < LOGBUF_N_SOURCES ? (uint8_t)m->source : LOGBUF_GADGETD;
        e->prio = m->prio > LOGBUF_PRIO_MAX ? LOGBUF_PRIO_MAX : (uint8_t)m->prio;
        memcpy(e->text, text, len);
        e->text[len] = '\0';
        return e;
}

/* Puts line (taken) in the ring, the oldest out if it is full. */
static const struct logbuf_entry *put_line(struct logbuf *b, struct logbuf_entry *line)
{
        size_t slot = (b->head + b->count) % b->cap;
        if (b->count == b->cap) {
                free(b->lines[b->head]);
                b->head = (b->head + 1) % b->cap;
                slot = (b->head + b->count - 1) % b->cap;
        } else {
                b->count++;
        }
        b->lines[slot] = line;
        b->total++;
        return line;
}

const struct logbuf_entry *logbuf_add_kept(struct logbuf *b, const struct logbuf_meta *m, const char *line)
{
        struct logbuf_entry *copy;
        if (!ring_room(b) || !(copy = entry_new(m, line, strlen(line))))
                return NULL;
        return put_line(b, copy);
}

const struct logbuf_entry *logbuf_add(struct logbuf *b, const struct logbuf_meta *m, const char *s, size_t len)
{
        char esc[LOGBUF_LINE_MAX * 4 + 3];
        if (len > LOGBUF_LINE_MAX)
                len = LOGBUF_LINE_MAX;
        if (!ring_room(b))
                return NULL;
        log_escape(s, len, esc, sizeof esc);
        /* log_escape quotes; the stored line is the text between quotes. */
        size_t n = strlen(esc);
        struct logbuf_entry *line = entry_new(m, esc + 1, n >= 2 ? n - 2 : 0);
        if (!line)
                return NULL;
        return put_line(b, line);
}

/* Whether no further line can be kept in this window. */
static bool budget_full(const struct logbuf_budget *g)
{
        return g->lines >= g->lines_max || g->bytes >= g->bytes_max;
}

/* A complete line: to fn if the budget keeps it. */
static void line(struct logbuf_budget *g, const char *data, size_t len, logbuf_line_fn *fn, void *arg)
{
        if (logbuf_budget_admit(g, len))
                fn(arg, data, len);
}

/* Appends up to len bytes of data to the partial line; a full one goes out
 * first (only when more bytes come, so a line of exactly the maximum is
 * one line). Returns the bytes taken. */
static size_t take(struct logbuf_stream *s, struct logbuf_budget *g, const char *data, size_t len,
                   logbuf_line_fn *fn, void *arg, size_t *lines)
{
        if (s->len == sizeof s->partial) {
                line(g, s->partial, s->len, fn, arg);
                s->len = 0;
                (*lines)++;
        }
        size_t room = sizeof s->partial - s->len;
        size_t n = len < room ? len : room;
        memcpy(s->partial + s->len, data, n);
        s->len += n;
        return n;
}

/* Newlines in data, eight bytes at a time: a flood of empty lines over the
 * budget costs a count, not a call per line. */
static size_t count_newlines(const char *data, size_t len)
{
        const uint64_t ones = 0x0101010101010101ull, low7 = 0x7f7f7f7f7f7f7f7full;
        size_t n = 0, i = 0;
        for (; i + 8 <= len; i += 8) {
                uint64_t w;
                memcpy(&w, data + i, 8);
                w ^= ones * '\n';
                /* The high bit of each byte of t is set where w's byte is not 0. */
                uint64_t t = ((w & low7) + low7) | w;
                /* Those bits as 0/1 per byte, summed into the top byte. */
                n += (size_t)((((~t & ~low7) >> 7) * ones) >> 56);
        }
        for (; i < len; i++)
                n += data[i] == '\n';
        return n;
}

/* Over the budget: every line that ends in data is dropped and counted as
 * one (a long line is not split first); returns the bytes consumed. */
static size_t drop_lines(struct logbuf_stream *s, struct logbuf_budget *g, const char *data, size_t len,
                         size_t *lines)
{
        const char *last = memrchr(data, '\n', len);
        if (!last)
                return 0;
        size_t used = (size_t)(last - data) + 1, n = count_newlines(data, used);
        g->dropped += n;
        g->dropped_bytes += used + s->len;
        s->len = 0;
        *lines += n;
        return used;
}

size_t logbuf_split(struct logbuf_stream *s, struct logbuf_budget *g, const char *data, size_t len,
                    logbuf_line_fn *fn, void *arg)
{
        size_t lines = 0;
        while (len > 0) {
                if (budget_full(g)) {
                        size_t used = drop_lines(s, g, data, len, &lines);
                        data += used;
                        len -= used;
                        if (len == 0)
                                break;
                }
                const char *nl = memchr(data, '\n', len);
                size_t upto = nl ? (size_t)(nl - data) : len;
                /* A line with nothing before it in the stream needs no copy. */
                if (nl && s->len == 0 && upto <= LOGBUF_LINE_MAX) {
                        line(g, data, upto, fn, arg);
                        lines++;
                } else {
                        size_t done = 0;
                        while (done < upto)
                                done += take(s, g, data + done, upto - done, fn, arg, &lines);
                        if (nl) {
                                line(g, s->partial, s->len, fn, arg);
                                s->len = 0;
                                lines++;
                        }
                }
                upto += nl ? 1 : 0;
                data += upto;
                len -= upto;
        }
        return lines;
}

size_t logbuf_split_flush(struct logbuf_stream *s, struct logbuf_budget *g, logbuf_line_fn *fn, void *arg)
{
        if (s->len == 0)
                return 0;
        line(g, s->partial, s->len, fn, arg);
        s->len = 0;
        return 1;
}

const struct logbuf_entry *logbuf_line(const struct logbuf *b, size_t n, size_t i)
{
        if (n > b->count)
                n = b->count;
        if (i >= n)
                return NULL;
        return b->lines[(b->head + b->count - n + i) % b->cap];
}

void logbuf_budget_init(struct logbuf_budget *g, uint64_t lines_max, uint64_t bytes_max)
{
        uint64_t read_max = bytes_max * LOGBUF_READ_FACTOR;
        *g = (struct logbuf_budget){ .lines_max = lines_max, .bytes_max = bytes_max,
                                     .read_max = read_max > LOGBUF_READ_MIN ? read_max : LOGBUF_READ_MIN };
}

bool logbuf_budget_roll(struct logbuf_budget *g, uint64_t now_ms, uint64_t *dropped, uint64_t *dropped_bytes)
{
        *dropped = *dropped_bytes = 0;
        if (g->start_ms && now_ms < g->start_ms + LOGBUF_WINDOW_MS)
                return false;
        bool ended = g->start_ms != 0;
        *dropped = g->dropped;
        *dropped_bytes = g->dropped_bytes;
        g->start_ms = now_ms ? now_ms : 1;
        g->lines = g->bytes = g->read = g->dropped = g->dropped_bytes = 0;
        g->paused = false;
        return ended;
}

bool logbuf_budget_admit(struct logbuf_budget *g, size_t len)
{
        /* The newline counts, so that empty lines cost bytes too. */
        uint64_t cost = (uint64_t)len + 1;
        if (g->lines < g->lines_max && g->bytes + cost <= g->bytes_max) {
                g->lines++;
                g->bytes += cost;
                return true;
        }
        g->dropped++;
        g->dropped_bytes += cost;
        return false;
}

size_t logbuf_budget_room(const struct logbuf_budget *g)
{
        if (g->paused || g->read >= g->read_max)
                return 0;
        uint64_t room = g->read_max - g->read;
        return room > SIZE_MAX ? SIZE_MAX : (size_t)room;
}

void logbuf_budget_read(struct logbuf_budget *g, size_t n)
{
        g->read += n;
        if (g->read >= g->read_max)
                g->paused = true;
}

uint64_t logbuf_budget_left_ms(const struct logbuf_budget *g, uint64_t now_ms)
{
        uint64_t end = g->start_ms + LOGBUF_WINDOW_MS;
        return end > now_ms ? end - now_ms : 1;
}
