/* peercred: who is on the other end of a local socket, and opening a file
 * with that user's rights rather than gadgetd's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PEERCRED_MAX_GROUPS 256

struct peercred {
        pid_t pid;
        uid_t uid;
        gid_t gid;
        gid_t groups[PEERCRED_MAX_GROUPS];
        size_t n_groups;       /* the first PEERCRED_MAX_GROUPS of the peer's groups */
};

/* The credentials the kernel recorded for the peer of the Unix socket fd
 * (at connect time). 0 or -errno. */
int peercred_get(int fd, struct peercred *out);
/* Whether gid is the peer's primary group or one of its groups. */
bool peercred_in_group(const struct peercred *c, gid_t gid);
/* Opens path with flags as c's user would: the calling thread's
 * filesystem uid, gid and groups are c's for the open() only, so the
 * kernel's own checks (modes, ACLs, LSMs) decide. Returns an fd or
 * -errno (-EPERM if gadgetd may not take the user's rights). */
int peercred_open(const struct peercred *c, const char *path, int flags);
