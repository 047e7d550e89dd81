/* paths: resolution of the host paths a policy lists, done by gadgetd
 * before a worker starts. */
#pragma once

#include <limits.h>

/* Resolves path into real as the kernel would, but refuses with -ELOOP a
 * symlink that lies in a directory anyone but root may write, so nothing
 * planted there can redirect a listed path. Other errors: -errno. */
int paths_resolve_trusted(const char *path, char real[PATH_MAX]);
