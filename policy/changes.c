/* changes: what a policy file set, key by key, kept with its policy to
 * tell which keys a new version of the file changed (a reload names them). */
#include "keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a over s and a separator, continuing from h. */
static uint64_t changes_fold(uint64_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ull;
        return (h ^ '\n') * 1099511628211ull;
}

void policy_written_add(struct policy_ctx *c, const char *key, const char *value)
{
        struct policy *p = c->p;
        char section[128];
        const char *what = key;

        if (c->sect == POLICY_SECT_BINDING) {
                /* A binding is one entry: any of its keys changed changes it. */
                snprintf(section, sizeof section, "[Binding %s]", p->bindings[p->n_bindings - 1].name);
                what = section;
        } else if (c->sect != POLICY_SECT_GADGET) {
                return;
        }
        size_t i = 0;
        while (i < p->n_written && strcmp(p->written[i].what, what) != 0)
                i++;
        if (i == p->n_written) {
                struct policy_written *nw = realloc(p->written, (p->n_written + 1) * sizeof *nw);
                char *copy = strdup(what);
                if (!nw || !copy) {
                        free(copy);
                        if (nw)
                                p->written = nw;
                        policy_oom(c);
                        return;
                }
                p->written = nw;
                p->written[p->n_written++] = (struct policy_written){ .what = copy, .hash = 1469598103934665603ull };
        }
        if (c->sect == POLICY_SECT_BINDING)
                p->written[i].hash = changes_fold(p->written[i].hash, key);
        p->written[i].hash = changes_fold(p->written[i].hash, value);
}

/* The entry of p named what, or NULL. */
static const struct policy_written *changes_find(const struct policy *p, const char *what)
{
        for (size_t i = 0; i < p->n_written; i++)
                if (strcmp(p->written[i].what, what) == 0)
                        return &p->written[i];
        return NULL;
}

size_t policy_changed(const struct policy *old, const struct policy *new, const char **out, size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < new->n_written; i++) {
                const struct policy_written *o = changes_find(old, new->written[i].what);
                if ((!o || o->hash != new->written[i].hash) && n < max)
                        out[n++] = new->written[i].what;
        }
        for (size_t i = 0; i < old->n_written; i++)
                if (!changes_find(new, old->written[i].what) && n < max)
                        out[n++] = old->written[i].what;
        return n;
}

void policy_written_free(struct policy *p)
{
        for (size_t i = 0; i < p->n_written; i++)
                free(p->written[i].what);
        free(p->written);
        p->written = NULL;
        p->n_written = 0;
}
