/* relay: gadgetd run's copy of the program's stdout or stderr to its own,
 * through a pipe it reads, so the program never holds the caller's file. */
#pragma once

#include <stdbool.h>
#include <event2/event.h>

struct relay;

/* Called once when the relay has closed (end of file, or the caller's fd
 * refused a write). */
typedef void relay_closed_fn(void *arg);

/* Makes a pipe whose bytes go to to_fd; *write_end is for the program
 * (close it once handed over). 0 or -errno. */
int relay_open(struct event_base *base, int to_fd, relay_closed_fn *closed, void *arg, struct relay **out,
               int *write_end);
bool relay_is_open(const struct relay *r);
void relay_free(struct relay *r);
