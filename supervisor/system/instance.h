/* instance: one gadgetd per state directory and per control socket. A
 * lock file beside each (STATE_DIR/gadgetd.lock, SOCKET.lock) is held with
 * open-file-description locks, which the kernel drops when the holder
 * exits, however it exits: nothing stale is ever left to clean up. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Byte 0 of a lock file is the instance: exclusive for a daemon, shared
 * among gadgetd run processes. Each holder also locks byte 1 + its pid,
 * so that a refused process can ask the kernel who holds the file. */
#define INSTANCE_PID_SPAN (1u << 23) /* above the largest pid_max */

/* The byte that stands for pid (pure, for the tests). */
uint64_t instance_pid_byte(pid_t pid);
/* The pid a lock at byte off stands for, or 0 (pure, for the tests). */
pid_t instance_byte_pid(uint64_t off);

/* Takes the lock file at path (created 0600 if missing; refused unless a
 * regular file of gadgetd's own user with one link): exclusively, or
 * shared with other shared holders. Returns the fd, held until closed or
 * the process ends; -EBUSY with *holder set to a holding process (0 if
 * none can be named) if another gadgetd holds it; or -errno. */
int instance_lock(const char *path, bool shared, pid_t *holder);

/* Takes the lock of what (a "state directory" or "control socket"):
 * path, held as instance_lock does; a refusal is logged, naming the
 * holder. The fd, or -errno. */
int instance_take(const char *what, const char *subject, const char *path, bool shared);
/* The state directory's lock (STATE_DIR/gadgetd.lock), the directory made
 * 0700 if missing: exclusive for the daemon, shared among gadgetd run
 * processes. The fd, or -errno (logged). */
int instance_lock_state(const char *state_dir, bool shared);
