/* registry: the core's units, in a list (newest first) and by name. */
#include "core_int.h"
#include "policy.h"

static const char *link_name(const struct nametab_link *l)
{
        return NAMETAB_ENTRY(l, struct unit, name_link)->policy->name;
}

/* Adds u to the list and to the name table. Why a table: 10,000 declared gadgets are loaded by name one after the
 * other, and a search through a list for each took most of the load. */
int core_index(struct core *c, struct unit *u)
{
        int e = nametab_insert(&c->by_name, &u->name_link, link_name);
        if (e < 0)
                return e;
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
        struct nametab_link *l = nametab_find(&c->by_name, name, link_name);
        return l ? NAMETAB_ENTRY(l, struct unit, name_link) : NULL;
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
        nametab_remove(&c->by_name, &u->name_link, link_name);
        if (u->indexed)
                core_count_state(c, u->state, -1);
        u->indexed = false;
        core_count_running(u);
}
