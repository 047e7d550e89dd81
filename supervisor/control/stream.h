/* stream: the one way long list answers (logs, audit) go to a control
 * client — as several LogLines Responses of the request's id, each part at
 * most STREAM_PART_MAX bytes of lines, `more` set on every part but the
 * last. A part is made only when the client's queue is empty, one per loop
 * turn, from a source that works in bounded slices: the answer costs
 * gadgetd one part of memory whatever its size, and a client that does not
 * read stops it. With follow, the answer never ends: after the source,
 * lines pushed as they come (at most STREAM_LIVE_MAX bytes waiting; beyond
 * that the client gets an error and the stream ends). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STREAM_PART_MAX (64u << 10)
#define STREAM_LIVE_MAX (1u << 20)
#define STREAM_WAIT 2

struct client;
struct stream;

enum stream_follow { STREAM_ONCE, STREAM_FOLLOW_LOGS, STREAM_FOLLOW_AUDIT };

struct stream_source {
        /* One slice: lines go out with stream_add. 1 if there is more to do,
         * STREAM_WAIT if there is more that is not there yet (the source
         * calls stream_kick when it is), 0 when done, -errno with the
         * reason in why (-ENOENT: the client is told "not found"). */
        int (*step)(void *arg, struct stream *st, char *why, size_t len);
        void (*free)(void *arg);
        void *arg;
};

/* Starts answering id on cl from src (owned from here on, freed even on
 * failure); with follow, then lines of gadget (NULL: of every gadget)
 * pushed by stream_push or stream_push_entry. 0, or
 * -EBUSY if cl already has a stream, -ENOMEM. */
int stream_start(struct client *cl, uint64_t id, const struct stream_source *src, enum stream_follow follow,
                 const char *gadget);
/* Adds one line (len bytes) to the part being made: 1 taken, 0 the part is
 * full (the source gives the line again at its next step), -ENOMEM. */
int stream_add(struct stream *st, const char *line, size_t len);
/* One line of a gadget's log as a logs answer sends it (a LogEntry). */
struct stream_entry {
        const char *gadget, *text;
        int64_t time_ms;
        uint32_t run;
        unsigned source, prio;  /* enum logbuf_source, a syslog priority */
};
/* Adds one log line to the part being made, as stream_add. */
int stream_add_entry(struct stream *st, const struct stream_entry *e);
/* A note for the user, sent with the next part (the first note stays). */
int stream_note(struct stream *st, const char *note);
/* A new line of gadget's audit, for a stream following it. */
void stream_push(struct stream *st, enum stream_follow kind, const char *gadget, const char *line);
/* A new line of a gadget's log, for a stream following it (or every gadget). */
void stream_push_entry(struct stream *st, const struct stream_entry *e);
/* The client's queue emptied: the next part may be made. */
void stream_kick(struct stream *st);
void stream_free(struct stream *st);
