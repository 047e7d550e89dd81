/* spare: one sandbox shell (spawn.h) kept ready by the daemon, so that a
 * gadget's start does not wait for its namespaces to be made: the next
 * start takes it, and a new one is made once starts have been quiet for
 * SPARE_DELAY_MS — never during a burst of starts, which would only pay
 * for it twice. A shell whose copy of the mount table is out of date is
 * dropped instead of used. gadgetd run makes one shell at once instead
 * (spare_fill), which gets ready while gadgetd does, and no more. */
#pragma once

#include <stdbool.h>

#include <event2/event.h>

#include "spawn.h"

#define SPARE_DELAY_MS 20

struct daemon;

struct spare {
        struct spawn_shell shell;
        struct event *ev;        /* makes the shell, SPARE_DELAY_MS after the last take; NULL in gadgetd run */
};

/* Starts keeping a spare (the first is made after SPARE_DELAY_MS). */
int spare_open(struct daemon *d);
void spare_close(struct daemon *d);
/* Makes the spare now if there is none (gadgetd run: its one shell, with
 * no spare_open and so no timer). */
void spare_fill(struct daemon *d);
/* Moves the spare into *out if it is fresh (else drops it); out->pid is -1
 * if there was none. Schedules the next one. */
void spare_take(struct daemon *d, struct spawn_shell *out);
/* Ends the spare, if any, without making another. */
void spare_drop(struct daemon *d);
