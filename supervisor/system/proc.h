/* proc: what /proc says of a process. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* True if pid's parent is this process (a worker, a shell, a child a
 * re-executed gadgetd inherited from its previous image). */
bool proc_is_child(pid_t pid);
/* The child of parent (a sandbox's PID 1, seen from gadgetd) whose pid in
 * its innermost PID namespace is inner (2: the gadget's program), among
 * parent's first PROC_CHILDREN_TRIED children (the program is its first;
 * orphans it adopted come after): its host pid, or 0. */
#define PROC_CHILDREN_TRIED 8
pid_t proc_child_inner(pid_t parent, pid_t inner);
