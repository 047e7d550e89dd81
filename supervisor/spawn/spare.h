/* spare: one sandbox shell (spawn.h) kept ready by the daemon, so that a
 * gadget's start does not wait for its namespaces to be made: the next
 * start takes it, and a new one is made once starts have been quiet for
 * SPARE_DELAY_MS. In a burst of starts (one taken less than SPARE_DELAY_MS
 * after the last was done: quiet is measured from a start's end, so a slow
 * start does not end a burst) a start makes the next spare while it waits
 * for its own sandbox to be built (spare_refill), so that the starts after
 * it find one too. A shell whose copy of the mount table is out of date is
 * dropped instead of used. gadgetd run makes one shell at once instead
 * (spare_fill), which gets ready while gadgetd does, and no more. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "spawn.h"

#define SPARE_DELAY_MS 20

struct spare {
        struct spawn_shell shell;
        const struct spawn_helper *helper; /* makes the shells */
        struct event *ev;        /* makes the shell, SPARE_DELAY_MS after the last start; NULL in gadgetd run */
        uint64_t last_done_us;   /* monotime_us when the last start was done, 0 before any */
        bool burst;              /* the last take came less than SPARE_DELAY_MS after the start before was done */
        bool shared_net;         /* the kind of the next shell: that of the last start (spawn_shell_new) */
};

/* Starts keeping a spare: with a base, the next is made SPARE_DELAY_MS
 * after each take (the daemon); without (gadgetd run), only by
 * spare_fill. 0 or -ENOMEM. */
int spare_open(struct spare *s, struct event_base *base, const struct spawn_helper *helper);
void spare_close(struct spare *s);
/* Makes the spare now if there is none. 0 if one is ready, else -errno. */
int spare_fill(struct spare *s);
/* Drops the spare, and makes none until the next start is done. */
void spare_drop(struct spare *s);
/* During a burst of starts, the daemon's spare, made now if there is
 * none (a start waits for its sandbox meanwhile); else nothing. */
void spare_refill(struct spare *s);
/* Hands over the spare if there is a fresh one in the network namespace
 * the start asks for (shared_net: NetworkNamespace=shared), else out is
 * SPAWN_SHELL_NONE; spare_done when that start is done. The next spare is
 * made for the kind of this start. */
void spare_take(struct spare *s, bool shared_net, struct spawn_shell *out);
/* The start that took is done (or failed): the next spare is made after
 * SPARE_DELAY_MS of quiet from now. */
void spare_done(struct spare *s);
