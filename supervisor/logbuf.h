/* logbuf: a gadget's output, read line by line from its stdout/stderr pipes
 * and kept in a bounded ring for `gadgetctl logs`. */
#pragma once

#include <stddef.h>

#define LOGBUF_LINES 1000      /* lines kept per gadget */
#define LOGBUF_LINE_MAX 2048   /* longer lines are split */

struct logbuf {
        char **lines;          /* ring of LOGBUF_LINES, each escaped text */
        size_t head, count;
        unsigned long long total; /* lines ever added (for followers) */
        char partial[LOGBUF_LINE_MAX];
        size_t partial_len;
};

void logbuf_init(struct logbuf *b);
void logbuf_free(struct logbuf *b);
/* Feeds raw bytes from a pipe; complete lines are escaped (invalid UTF-8
 * and control bytes as \xNN) and added. Returns how many lines were added. */
size_t logbuf_feed(struct logbuf *b, const char *data, size_t len);
/* Flushes a last unterminated line (at end of file). */
size_t logbuf_flush(struct logbuf *b);
/* The i-th of the last n lines (0 = oldest of them), or NULL. */
const char *logbuf_line(const struct logbuf *b, size_t n, size_t i);
