/* cgroup_scope: cgroup v2 with a delegated transient scope per gadget
 * (CGROUP_HOST_SCOPES), outside gadgetd's own cgroup:
 *
 *   .../gadgetd-NAME-PID.scope          systemd's (Delegate=yes), made with
 *                                       the sandbox's PID 1 (PID) in it
 *   .../gadgetd-NAME-PID.scope/gadget   the gadget's cgroup, its limits
 *
 * Why: gadgetd's service cgroup then hands no controller to children and
 * holds processes only, so systemd 252 can start the next gadgetd in it
 * (a cgroup that hands controllers down may hold no process: EBUSY, exit
 * 219/CGROUP) while the gadgets live on; each scope ends with its gadget. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Asks systemd for the scope of gadget name with pid in it, then moves pid
 * into SCOPE/gadget and hands ctrls ("memory pids cpu", as
 * cgroup.subtree_control words) down to it. *dir (malloc'd) is set once
 * that directory exists, even if a later step failed. 0, or -errno with
 * err. */
int cgroup_scope_make(const char *mount, const char *name, pid_t pid, const char *ctrls, char **dir, char *err,
                      size_t errlen);
/* The cgroup of the running gadget name whose PID 1 is pid, as an adopting
 * gadgetd finds it: pid's own cgroup, which must be
 * .../gadgetd-NAME-PID.scope/gadget. 0 with *dir, or -errno with err. */
int cgroup_scope_find(const char *mount, const char *name, pid_t pid, char **dir, char *err, size_t errlen);
