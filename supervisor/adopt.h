/* adopt: the next gadgetd image's side of gadgetctl daemon-reexec — the
 * state read before anything is opened, the gadgets taken over, and the
 * processes of the previous image it could not take over ended. */
#pragma once

#include <stddef.h>

#include "reexec.h"

/* Reads the state of fd (closed) into s and closes every other fd the
 * exec kept open; a state that cannot be read is logged and leaves s
 * empty (whatever the previous image left is ended by adopt_units). */
void adopt_read(int fd, struct reexec_state *s);
/* Takes over s's gadgets into c, each on its policy file if unchanged
 * since its load, else on the policy text it ran (kept on it, and told so);
 * one that cannot be taken over is ended and started afresh. Every other
 * child of gadgetd is ended. What happened, for the requester, in out.
 * Returns whether the state was read (false: a start from scratch). */
bool adopt_units(struct core *c, struct reexec_state *s, char *out, size_t outlen);
