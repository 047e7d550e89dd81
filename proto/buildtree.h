/* buildtree: whether this program runs from the meson build tree it was
 * built in, found from where it runs (/proc/self/exe), not from a path
 * compiled in — a compiled-in build path made the package differ with the
 * directory it was built in (not reproducible). gadgetd then uses that
 * tree's gadgetd-sandbox, gadgetctl selftest its gadgetd and probe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* If this program is BUILD/self_rel (e.g. "supervisor/gadgetd") and BUILD
 * is a meson build tree (it holds meson-private/), writes BUILD/other_rel
 * into out and returns true; else false. */
bool buildtree_path(const char *self_rel, const char *other_rel, char *out, size_t len);
