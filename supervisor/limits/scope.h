/* scope: a delegated cgroup from systemd, for a gadgetd started in one that
 * is not (a login shell's session scope): a transient scope unit with
 * Delegate=yes that gadgetd's own processes move into, made through
 * systemd's D-Bus API (StartTransientUnit), as `systemd-run --scope -p
 * Delegate=yes` does. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* True if systemd is the init system (sd_booted(3)'s test, which needs no
 * libsystemd): only then can a scope be asked for. */
bool scope_systemd_running(void);

/* Starts the unit name (NAME.scope) with Delegate=yes, description desc
 * and pids in it, and waits until systemd's job for it is done: the pids
 * are then in the scope's cgroup. 0, or -errno with err saying why not
 * (libsystemd missing, no bus, refused). */
int scope_start(const char *name, const char *desc, const pid_t *pids, size_t n, char *err, size_t errlen);

/* Whether systemd delegated the cgroup of unit (a NAME.service or
 * NAME.scope, the last part of a cgroup path) to its processes
 * (Delegate=yes): 1 or 0, or -errno with err saying why it is not known
 * (libsystemd missing, no bus, no such unit). */
int scope_delegated(const char *unit, char *err, size_t errlen);

/* The type of the job systemd runs for the unit gadgetd is in ("stop",
 * "restart", ...): 1 with type set, 0 if no job, or -errno (no systemd,
 * no bus, libsystemd missing). */
int scope_own_job(char *type, size_t len);
