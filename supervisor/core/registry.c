/* registry: the core's units, in a list (newest first) and by name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "policy.h"
#include "system/strhash.h"

static struct unit **name_slot(const struct core *c, const char *name)
{
        return &c->by_name[strhash(name) & (c->by_name_size - 1)];
}

/* Adds u to the list and to the name table. Why a table: 10,000 declared gadgets are loaded by name one after the
 * other, and a search through a list for each took most of the load. It
 * doubles once there are more units than slots. */
int core_index(struct core *c, struct unit *u)
{
        if (c->n_units + 1 > c->by_name_size) {
                size_t size = c->by_name_size ? c->by_name_size * 2 : 64;
                struct unit **t = calloc(size, sizeof *t);
                if (!t)
                        return -ENOMEM;
                struct unit **old = c->by_name;
                size_t old_size = c->by_name_size;
                c->by_name = t;
                c->by_name_size = size;
                for (size_t i = 0; i < old_size; i++)
                        for (struct unit *v = old[i], *next; v; v = next) {
                                next = v->name_next;
                                struct unit **slot = name_slot(c, v->policy->name);
                                v->name_next = *slot;
                                *slot = v;
                        }
                free(old);
        }
        struct unit **slot = name_slot(c, u->policy->name);
        u->name_next = *slot;
        *slot = u;
        c->n_units++;
        u->indexed = true;
        core_count_state(c, u->state, 1);
        core_count_running(u);
        u->next = c->units;
        if (u->next)
                u->next->pprev = &u->next;
        u->pprev = &c->units;
        c->units = u;
        return 0;
}

struct unit *core_find(const struct core *c, const char *name)
{
        if (!c->by_name_size)
                return NULL;
        for (struct unit *u = *name_slot(c, name); u; u = u->name_next)
                if (strcmp(u->policy->name, name) == 0)
                        return u;
        return NULL;
}

struct unit *core_first(const struct core *c)
{
        return c->units;
}

void core_unlink(struct core *c, struct unit *u)
{
        *u->pprev = u->next;
        if (u->next)
                u->next->pprev = u->pprev;
        for (struct unit **pp = name_slot(c, u->policy->name); *pp; pp = &(*pp)->name_next)
                if (*pp == u) {
                        *pp = u->name_next;
                        break;
                }
        c->n_units--;
        if (u->indexed)
                core_count_state(c, u->state, -1);
        u->indexed = false;
        core_count_running(u);
}
