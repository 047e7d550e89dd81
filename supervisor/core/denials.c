/* denials: a gadget's refused system calls, summed (denials.h). */
#include "denials.h"

#include <stdio.h>
#include <string.h>

#include "filter.h"
#include "spawn/spawn.h"

void denials_add(struct denials *t, const struct spawn_denial *in)
{
        struct denial *d = NULL;
        t->total += in->count;
        for (size_t i = 0; i < t->n && !d; i++)
                if (t->d[i].nr == in->nr && t->d[i].error == in->error)
                        d = &t->d[i];
        if (!d && t->n == DENIALS_KEPT) {
                t->untracked += in->count;
                return;
        }
        if (!d) {
                d = &t->d[t->n++];
                *d = (struct denial){ .nr = in->nr, .error = in->error, .first_ms = in->first_ms };
        }
        d->count += in->count;
        if (in->last_ms > d->last_ms)
                d->last_ms = in->last_ms;
        if (in->path[0])
                snprintf(d->path, sizeof d->path, "%s", in->path);
}

const char *denial_call(const struct denial *d)
{
        if (d->error == 0)
                return "a call of a foreign ABI";
        const char *name = filter_call_name((int)d->nr);
        return name ? name : "an unknown call";
}

const char *denials_call_name(uint32_t nr)
{
        return filter_call_name((int)nr);
}

const char *denial_answer(const struct denial *d)
{
        const char *name = d->error ? strerrorname_np((int)d->error) : "killed";
        return name ? name : "an errno";
}
