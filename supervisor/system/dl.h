/* dl: libraries gadgetd loads at first use (libcurl, SQLite, libsystemd),
 * so that a gadgetd that never needs them starts without them. */
#pragma once

#include <stddef.h>

/* One function to resolve: where its address goes, and its name. */
struct dl_sym {
        void **slot;
        const char *name;
};

/* Loads soname and fills every slot. Returns the library's handle, or NULL
 * with the reason in err (no slot is left half filled then). */
void *dl_load(const char *soname, const struct dl_sym *syms, size_t n, char *err, size_t errlen);
