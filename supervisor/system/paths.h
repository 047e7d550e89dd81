/* paths: resolution of the host paths a policy lists, done by gadgetd
 * before a worker starts. */
#pragma once

#include <limits.h>

/* Resolves path into real as the kernel would, but refuses with -ELOOP a
 * symlink that lies in a directory anyone but root may write, so nothing
 * planted there can redirect a listed path. Other errors: -errno. */
int paths_resolve_trusted(const char *path, char real[PATH_MAX]);
/* Opens path (resolved as above) with flags plus O_NOFOLLOW, O_NONBLOCK,
 * O_CLOEXEC and O_NOCTTY, refusing any symlink met on the way (-ELOOP),
 * so what is opened is what was resolved. The fd, or -errno. */
int paths_open_trusted(const char *path, int flags);
