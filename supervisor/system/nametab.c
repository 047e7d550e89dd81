/* nametab: things by name in chained slots (nametab.h). */
#include "nametab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strhash.h"

static struct nametab_link **slot_of(const struct nametab *t, const char *name)
{
        return &t->slots[strhash(name) & (t->size - 1)];
}

struct nametab_link *nametab_find(const struct nametab *t, const char *name, nametab_name_fn *name_of)
{
        if (!t->size)
                return NULL;
        for (struct nametab_link *l = *slot_of(t, name); l; l = l->next)
                if (strcmp(name_of(l), name) == 0)
                        return l;
        return NULL;
}

/* Doubles the slots (64 at first), moving every link to its new chain. */
static int grow(struct nametab *t, nametab_name_fn *name_of)
{
        size_t size = t->size ? t->size * 2 : 64;
        struct nametab_link **slots = calloc(size, sizeof *slots);
        if (!slots)
                return -ENOMEM;
        struct nametab_link **old = t->slots;
        size_t old_size = t->size;
        t->slots = slots;
        t->size = size;
        for (size_t i = 0; i < old_size; i++)
                for (struct nametab_link *l = old[i], *next; l; l = next) {
                        next = l->next;
                        struct nametab_link **s = slot_of(t, name_of(l));
                        l->next = *s;
                        *s = l;
                }
        free(old);
        return 0;
}

int nametab_insert(struct nametab *t, struct nametab_link *link, nametab_name_fn *name_of)
{
        if (t->n >= t->size && grow(t, name_of) < 0)
                return -ENOMEM;
        struct nametab_link **s = slot_of(t, name_of(link));
        link->next = *s;
        *s = link;
        t->n++;
        return 0;
}

void nametab_remove(struct nametab *t, struct nametab_link *link, nametab_name_fn *name_of)
{
        for (struct nametab_link **pp = slot_of(t, name_of(link)); *pp; pp = &(*pp)->next)
                if (*pp == link) {
                        *pp = link->next;
                        link->next = NULL;
                        t->n--;
                        return;
                }
}

void nametab_free(struct nametab *t)
{
        free(t->slots);
        *t = (struct nametab){ 0 };
}
