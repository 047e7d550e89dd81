/* proc: what /proc says of a process. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* True if pid's parent is this process (a worker, a shell, a child a
 * re-executed gadgetd inherited from its previous image). */
bool proc_is_child(pid_t pid);
