/* logbuf: line splitting and a ring of recent lines. */
#include "logbuf.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

void logbuf_init(struct logbuf *b)
{
        *b = (struct logbuf){ 0 };
}

void logbuf_free(struct logbuf *b)
{
        if (!b->lines)
                return;
        for (size_t i = 0; i < LOGBUF_LINES; i++)
                free(b->lines[i]);
        free(b->lines);
        b->lines = NULL;
}

/* Escapes and stores one line, dropping the oldest when full. */
static size_t add_line(struct logbuf *b, const char *s, size_t len)
{
        char esc[LOGBUF_LINE_MAX * 4 + 3];
        if (!b->lines && !(b->lines = calloc(LOGBUF_LINES, sizeof *b->lines)))
                return 0;
        log_escape(s, len, esc, sizeof esc);
        /* log_escape quotes; the stored line is the text between quotes. */
        size_t n = strlen(esc);
        char *line = strndup(esc + 1, n >= 2 ? n - 2 : 0);
        if (!line)
                return 0;
        size_t slot = (b->head + b->count) % LOGBUF_LINES;
        if (b->count == LOGBUF_LINES) {
                free(b->lines[b->head]);
                b->head = (b->head + 1) % LOGBUF_LINES;
                slot = (b->head + b->count - 1) % LOGBUF_LINES;
        } else {
                b->count++;
        }
        b->lines[slot] = line;
        b->total++;
        return 1;
}

size_t logbuf_feed(struct logbuf *b, const char *data, size_t len)
{
        size_t added = 0;
        for (size_t i = 0; i < len; i++) {
                if (data[i] == '\n') {
                        added += add_line(b, b->partial, b->partial_len);
                        b->partial_len = 0;
                        continue;
                }
                if (b->partial_len == sizeof b->partial) {
                        added += add_line(b, b->partial, b->partial_len);
                        b->partial_len = 0;
                }
                b->partial[b->partial_len++] = data[i];
        }
        return added;
}

size_t logbuf_flush(struct logbuf *b)
{
        if (b->partial_len == 0)
                return 0;
        size_t added = add_line(b, b->partial, b->partial_len);
        b->partial_len = 0;
        return added;
}

const char *logbuf_line(const struct logbuf *b, size_t n, size_t i)
{
        if (n > b->count)
                n = b->count;
        if (i >= n)
                return NULL;
        return b->lines[(b->head + b->count - n + i) % LOGBUF_LINES];
}
