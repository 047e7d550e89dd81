/* nametab: the one table of gadgetd's things by name (a core's units, the
 * audit budget's windows, a lease session's wanted gadgets), so that a
 * look-up costs the same with 10,000 of them as with one. Intrusive: each
 * thing holds a struct nametab_link, and the table an array of chains of
 * them, a power of 2 slots by strhash, doubled (and rehashed in place)
 * once there are as many things as slots. The table keeps no name: the
 * caller's name_of reads it from the thing, so a thing whose name lives
 * in a struct that is replaced (a unit's policy) is still found. A zeroed
 * struct nametab is an empty table; a name must not change while its
 * thing is in the table. Pure code, no locks: one thread's. */
#pragma once

#include <stddef.h>

struct nametab_link {
        struct nametab_link *next;      /* the next of its slot */
};

struct nametab {
        struct nametab_link **slots;    /* size chains, or NULL */
        size_t size, n;                 /* a power of 2 (or 0); things in it */
};

/* The name of the thing that holds link. */
typedef const char *nametab_name_fn(const struct nametab_link *link);

/* The thing of type holding link as member. */
#define NAMETAB_ENTRY(link, type, member) ((type *)(void *)((char *)(link) - offsetof(type, member)))

/* The link of name, or NULL. */
struct nametab_link *nametab_find(const struct nametab *t, const char *name, nametab_name_fn *name_of);
/* Adds link (its name not in t yet): 0, or -ENOMEM (when it had to grow and
 * could not; t is as it was, link not in it). */
int nametab_insert(struct nametab *t, struct nametab_link *link, nametab_name_fn *name_of);
/* Takes link (in t) out of t. */
void nametab_remove(struct nametab *t, struct nametab_link *link, nametab_name_fn *name_of);
/* Frees the slots (the things are the caller's): t is empty again. */
void nametab_free(struct nametab *t);
