/* logbuf: a gadget's output — split into lines, charged to the gadget's
 * log budget, and kept in a bounded ring for `gadgetctl logs`. Pure code:
 * the caller reads the pipes and passes the time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOGBUF_LINES 1000      /* lines kept per gadget */
#define LOGBUF_LINE_MAX 2048   /* longer lines are split */
#define LOGBUF_WINDOW_MS 1000  /* the budget is per second */
/* gadgetd reads at most this many times the byte budget from a gadget's
 * pipes per window (kept or dropped), then leaves the rest in the pipe. */
#define LOGBUF_READ_FACTOR 4
#define LOGBUF_READ_MIN (64 * 1024)

/* Defaults of LogLinesPerSecond= and LogBytesPerSecond= (policy keys and
 * gadgetd.conf [Daemon] keys). */
#define LOGBUF_DEFAULT_LINES 100
#define LOGBUF_DEFAULT_BYTES (64 * 1024)

/* One output stream's unfinished last line (stdout and stderr each have
 * one, so their lines never mix). */
struct logbuf_stream {
        char partial[LOGBUF_LINE_MAX];
        size_t len;
};

/* A gadget's log budget: lines and bytes kept per window; what is over is
 * dropped and counted until the window ends. */
struct logbuf_budget {
        uint64_t lines_max, bytes_max, read_max;
        uint64_t start_ms;             /* this window began (0: none yet) */
        uint64_t lines, bytes, read;   /* kept and read in this window */
        uint64_t dropped, dropped_bytes; /* dropped in this window */
        bool paused;                   /* read_max reached in this window */
};

/* Where a line came from: the program's stdout or stderr, a log message
 * it sent over the RPC (libgadget's gadget_log), or gadgetd itself (its
 * notes in the gadget's log: lines dropped over the budget). */
enum logbuf_source { LOGBUF_STDOUT, LOGBUF_STDERR, LOGBUF_MESSAGE, LOGBUF_GADGETD, LOGBUF_N_SOURCES };

/* Priorities, as syslog's (0 emerg ... 7 debug). */
#define LOGBUF_PRIO_WARNING 4
#define LOGBUF_PRIO_INFO 6
#define LOGBUF_PRIO_MAX 7

/* One kept line and what is known of it. */
struct logbuf_entry {
        int64_t time_ms;       /* wall clock (CLOCK_REALTIME) when gadgetd read it, ms since the epoch */
        uint32_t run;          /* which process of the gadget wrote it: 1 its first start, 2 the next ... */
        uint8_t source;        /* enum logbuf_source */
        uint8_t prio;          /* 0 ... LOGBUF_PRIO_MAX */
        char text[];           /* escaped (no control byte, valid UTF-8) */
};

/* What a line is, but its text (logbuf_add's). */
struct logbuf_meta {
        int64_t time_ms;
        uint32_t run;
        enum logbuf_source source;
        unsigned prio;
};

struct logbuf {
        /* A ring of cap slots, grown by doubling up to LOGBUF_LINES as
         * lines come: a gadget that logs one line (an on-demand gadget's
         * "idle") holds 16 slots, not 1,000 (8 KiB each of 10,000). */
        struct logbuf_entry **lines;
        size_t head, count, cap;
        unsigned long long total; /* lines ever added (for followers) */
};

/* Called with each complete raw line (without its newline) that the
 * budget keeps. */
typedef void logbuf_line_fn(void *arg, const char *line, size_t len);

void logbuf_init(struct logbuf *b);
void logbuf_free(struct logbuf *b);
/* Splits raw bytes of a stream into lines (lines longer than
 * LOGBUF_LINE_MAX in pieces), charges each to g and passes the kept ones
 * to fn, in order; the tail waits in s for more. Once g's window is full,
 * the lines that end in data are counted as dropped without a call each.
 * Linear in len. Returns the number of lines (kept and dropped). */
size_t logbuf_split(struct logbuf_stream *s, struct logbuf_budget *g, const char *data, size_t len,
                    logbuf_line_fn *fn, void *arg);
/* The same for a stream's unterminated last line (at end of file). */
size_t logbuf_split_flush(struct logbuf_stream *s, struct logbuf_budget *g, logbuf_line_fn *fn, void *arg);
/* Escapes one line (invalid UTF-8 and control bytes as \xNN) and stores it
 * with m (its priority clamped to LOGBUF_PRIO_MAX), dropping the oldest
 * when the ring is full. Returns the stored entry, or NULL when out of
 * memory. */
const struct logbuf_entry *logbuf_add(struct logbuf *b, const struct logbuf_meta *m, const char *line, size_t len);
/* The i-th of the last n lines (0 = oldest of them), or NULL. */
const struct logbuf_entry *logbuf_line(const struct logbuf *b, size_t n, size_t i);
/* Adds a line as logbuf_line gave it (escaped already): the ring handed
 * on by gadgetd's re-exec. NULL when out of memory. */
const struct logbuf_entry *logbuf_add_kept(struct logbuf *b, const struct logbuf_meta *m, const char *line);
/* A source's name ("stdout", "stderr", "message", "gadgetd"), NULL if none. */
const char *logbuf_source_name(unsigned source);
/* The wall clock now, ms since the epoch (a line's time_ms). */
int64_t logbuf_now_ms(void);

/* A budget of lines_max lines and bytes_max bytes per window (both > 0). */
void logbuf_budget_init(struct logbuf_budget *g, uint64_t lines_max, uint64_t bytes_max);
/* Ends the window if it is over at now_ms: *dropped and *dropped_bytes are
 * set to what the ended window dropped (0 if none). Returns true if a
 * window ended. */
bool logbuf_budget_roll(struct logbuf_budget *g, uint64_t now_ms, uint64_t *dropped, uint64_t *dropped_bytes);
/* Charges a line of len bytes: true if it fits the window (kept), false if
 * it is dropped (counted). */
bool logbuf_budget_admit(struct logbuf_budget *g, size_t len);
/* Bytes that may still be read from the pipes in this window. */
size_t logbuf_budget_room(const struct logbuf_budget *g);
/* Charges n bytes read; reaching read_max pauses the window. */
void logbuf_budget_read(struct logbuf_budget *g, size_t n);
/* Milliseconds until the window ends (at least 1). */
uint64_t logbuf_budget_left_ms(const struct logbuf_budget *g, uint64_t now_ms);
