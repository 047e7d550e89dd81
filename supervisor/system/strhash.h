/* strhash: the one string hash of gadgetd's tables by name (nametab.c's:
 * units in core, audit windows, wanted leases in kvpg_lease): FNV-1a,
 * enough for names gadgetd checked (gadget_name_ok) and masked to a
 * power-of-2 table. */
#pragma once

#include <stddef.h>
#include <stdint.h>

static inline size_t strhash(const char *s)
{
        uint64_t h = 14695981039346656037ull;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return (size_t)h;
}
