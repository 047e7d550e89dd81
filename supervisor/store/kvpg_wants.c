/* kvpg_wants: the wanted leases by name and in order (kvpg_wants.h). */
#include "kvpg_wants.h"

#include <stdlib.h>
#include <string.h>

static const char *want_name(const struct nametab_link *l)
{
        return NAMETAB_ENTRY(l, struct kvpg_want, name_link)->gadget;
}

struct kvpg_want *kvpg_wants_find(const struct kvpg_wants *t, const char *gadget)
{
        struct nametab_link *l = nametab_find(&t->by_name, gadget, want_name);
        return l ? NAMETAB_ENTRY(l, struct kvpg_want, name_link) : NULL;
}

struct kvpg_want *kvpg_wants_add(struct kvpg_wants *t, const char *gadget)
{
        struct kvpg_want *w = calloc(1, sizeof *w);
        if (!w || !(w->gadget = strdup(gadget)) || nametab_insert(&t->by_name, &w->name_link, want_name) < 0) {
                if (w)
                        free(w->gadget);
                free(w);
                return NULL;
        }
        w->sent = -1;
        w->prev = t->last;
        if (t->last)
                t->last->next = w;
        else
                t->first = w;
        t->last = w;
        return w;
}

void kvpg_wants_remove(struct kvpg_wants *t, struct kvpg_want *w)
{
        nametab_remove(&t->by_name, &w->name_link, want_name);
        if (w->prev)
                w->prev->next = w->next;
        else
                t->first = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                t->last = w->prev;
        w->next = w->prev = NULL;
}

void kvpg_want_ahead_free(struct kvpg_want *w)
{
        if (w->ahead)
                for (unsigned i = 0; i < w->rank; i++)
                        free(w->ahead[i]);
        free(w->ahead);
        w->ahead = NULL;
}

void kvpg_want_free(struct kvpg_want *w)
{
        if (!w)
                return;
        free(w->gadget);
        kvpg_want_ahead_free(w);
        free(w);
}

void kvpg_wants_clear(struct kvpg_wants *t)
{
        while (t->first) {
                struct kvpg_want *w = t->first;
                t->first = w->next;
                kvpg_want_free(w);
        }
        nametab_free(&t->by_name);
        *t = (struct kvpg_wants){ 0 };
}
