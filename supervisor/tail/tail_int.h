/* tail_int: what tail.c (the listener, the events recorded) and
 * tail_batch.c (their delivery in batches) share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <event2/util.h>

#include "contract.h"
#include "core/core.h"
#include "system/rate.h"
#include "system/ratelog.h"

/* The longest text of one event (a log line, an exit's cause): longer is
 * cut. A batch holds at most TAIL_BATCH_MAX events and about
 * TAIL_BATCH_BYTES of them, well within one frame. */
#define TAIL_TEXT_MAX 4096
/* How long the first event of a batch waits for others, unless a full
 * batch is there sooner: a call per batch, not per event. */
#define TAIL_LINGER_MS 50
#define TAIL_BATCH_MAX 256
#define TAIL_BATCH_BYTES (256u * 1024u)

enum tail_kind { TAIL_CALL, TAIL_LOG, TAIL_EXIT };

/* One event of an observed gadget, waiting in a binding's queue. */
struct tail_event {
        STAILQ_ENTRY(tail_event) link;
        enum tail_kind kind;
        uint64_t seq;                       /* the binding's count of events, dropped ones too */
        int64_t time_ms;                    /* when, ms since the epoch */
        char gadget[GADGET_NAME_MAX + 1];
        /* call */
        char method[GADGET_NAME_MAX + 1];
        int code;                           /* 0, or its GADGET_E* code */
        uint64_t duration_us;
        char trace[64];
        /* log: its stream ("stdout", "stderr", "log"); exit: its wait status */
        const char *stream;
        int status;
        char text[];                        /* the log line, or the exit's cause */
};

struct tails;
struct tail_unit;

/* One tail binding of a gadget: its queue and its one batch in flight. */
struct tail_feed {
        struct tail_unit *owner;
        char *binding, *method, **of;       /* copies of its policy's */
        size_t n_of;
        size_t queue_max, queued;
        STAILQ_HEAD(, tail_event) queue;
        uint64_t seq;
        uint64_t dropped;                   /* since the last batch sent: told in the next */
        uint64_t dropped_total;             /* since the gadget was loaded (gadgetctl status) */
        bool sending;                       /* a batch in flight */
        struct rate rate;                   /* EventsPerSecond= */
        uint64_t hold_until_ms;             /* past it: no batch before then (monotime_ms) */
        struct call_owner calls;
        struct event *kick;                 /* a send, after TAIL_LINGER_MS or on a later turn of the loop */
        struct ratelog warn;
        char caller[96];
        LIST_ENTRY(tail_feed) link;         /* in tails->feeds */
};

/* What the listener keeps of every unit: its own tail bindings, and the
 * bindings that observe it (recomputed when gen is behind the tails'). */
struct tail_unit {
        struct tails *t;
        struct unit *u;
        struct tail_feed *feeds;
        size_t n_feeds;
        struct tail_feed **watchers;
        size_t n_watchers;
        uint64_t gen;
        bool going;
};

struct tails {
        struct core *core;
        int id;
        uint64_t gen;                       /* bumped whenever a feed comes or goes */
        LIST_HEAD(, tail_feed) feeds;
};

/* tail_value.c: the batch of events ev[0..n) as one value, in one
 * allocation (free() frees it) whose strings point into the events and
 * binding: they must outlive it. NULL if out of memory. */
Gadget__Value *tail_batch_value(const char *binding, uint64_t dropped, struct tail_event *const *ev, size_t n);

/* tail_batch.c: sends f's next batch (if none is in flight and there is
 * something to tell) on a later turn if a whole one waits, else once the
 * first of it waited TAIL_LINGER_MS. */
void tail_feed_kick(struct tail_feed *f);
/* The send itself (f->kick's callback). */
void tail_feed_send(evutil_socket_t fd, short what, void *arg);
/* Whether u declared f's Method= (warned in gadgetd's log if not). */
void tail_feed_check_method(struct tail_feed *f);
