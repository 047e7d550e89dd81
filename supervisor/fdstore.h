/* fdstore: gadgetd's handoff through systemd's file-descriptor store
 * (FdStore=yes): at SIGTERM the re-exec state (reexec.h) and every fd it
 * names go to the store (FDSTORE=1, one FDNAME a fd), and the next gadgetd
 * finds them among its LISTEN_FDS and adopts the gadgets as after
 * gadgetctl daemon-reexec. */
#pragma once

#include <stddef.h>

#include "reexec.h"

#define FDSTORE_STATE "gadgetd-state"
#define FDSTORE_FD_PREFIX "gadgetd-fd-"

/* Whether there is a service manager to push to (NOTIFY_SOCKET). */
bool fdstore_available(void);
/* Why a SIGTERM is not a handoff: no service manager, or systemd's job
 * for gadgetd's unit is a stop (asked over D-Bus, a second at most; a
 * restart or no answer hands on). NULL: hand on. */
const char *fdstore_refusal(void);
/* Pushes every fd s names (the activated control socket aside: systemd
 * holds it) and, last, state_fd to the store. 0, or -errno with err. */
int fdstore_push(const struct reexec_state *s, int state_fd, char *err, size_t len);
/* In the next gadgetd, first thing: takes what a previous one pushed out
 * of the passed fds, each put back at the number the state names it by
 * (the one place they are mapped: a name of another form, a number below 3
 * or named twice is closed), removes them from the store and leaves
 * LISTEN_FDS to the sockets only. The state's fd, or -1 (none: whatever
 * fds were stored are closed, so the sandboxes they kept end); note says
 * what was found ("" if nothing), to log once the fds the state does not
 * name are closed (no log line before: libsystemd's journal socket would
 * be one of them). */
int fdstore_take(char *note, size_t len);
