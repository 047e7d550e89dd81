/* kvpg_wants: the wanted leases by name and in order (kvpg_wants.h). */
#include "kvpg_wants.h"

#include <stdlib.h>
#include <string.h>

#include "system/strhash.h"

static struct kvpg_want **slot(const struct kvpg_wants *t, const char *gadget)
{
        return &t->table[strhash(gadget) & (t->size - 1)];
}

struct kvpg_want *kvpg_wants_find(const struct kvpg_wants *t, const char *gadget)
{
        if (!t->size)
                return NULL;
        for (struct kvpg_want *w = *slot(t, gadget); w; w = w->hnext)
                if (strcmp(w->gadget, gadget) == 0)
                        return w;
        return NULL;
}

/* Doubles the table once there are more wants than slots. */
static int grow(struct kvpg_wants *t)
{
        size_t size = t->size ? t->size * 2 : 64;
        struct kvpg_want **table = calloc(size, sizeof *table);
        if (!table)
                return -1;
        free(t->table);
        t->table = table;
        t->size = size;
        for (struct kvpg_want *w = t->first; w; w = w->next) {
                struct kvpg_want **s = slot(t, w->gadget);
                w->hnext = *s;
                *s = w;
        }
        return 0;
}

struct kvpg_want *kvpg_wants_add(struct kvpg_wants *t, const char *gadget)
{
        if (t->n + 1 > t->size && grow(t) < 0)
                return NULL;
        struct kvpg_want *w = calloc(1, sizeof *w);
        if (!w || !(w->gadget = strdup(gadget))) {
                free(w);
                return NULL;
        }
        w->sent = -1;
        struct kvpg_want **s = slot(t, gadget);
        w->hnext = *s;
        *s = w;
        w->prev = t->last;
        if (t->last)
                t->last->next = w;
        else
                t->first = w;
        t->last = w;
        t->n++;
        return w;
}

void kvpg_wants_remove(struct kvpg_wants *t, struct kvpg_want *w)
{
        for (struct kvpg_want **pp = slot(t, w->gadget); *pp; pp = &(*pp)->hnext)
                if (*pp == w) {
                        *pp = w->hnext;
                        break;
                }
        if (w->prev)
                w->prev->next = w->next;
        else
                t->first = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                t->last = w->prev;
        w->next = w->prev = w->hnext = NULL;
        t->n--;
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
        free(t->table);
        *t = (struct kvpg_wants){ 0 };
}
