/* audit_budget: records per gadget per second, the excess summarized. */
#include "audit_budget.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


static void window_free(struct audit_window *w)
{
        if (!w)
                return;
        for (size_t i = 0; i < w->n_sums; i++) {
                free(w->sums[i].binding);
                free(w->sums[i].op);
        }
        free(w->sums);
        free(w->gadget);
        free(w);
}

static const char *window_name(const struct nametab_link *l)
{
        return NAMETAB_ENTRY(l, struct audit_window, name_link)->gadget;
}

/* Takes w out of the list and the index (its memory stays the caller's). */
static void window_unlink(struct audit_budget *b, struct audit_window *w)
{
        LIST_REMOVE(w, link);
        nametab_remove(&b->by_name, &w->name_link, window_name);
}

/* gadget's window at now_ms, a new one if its last one is over (NULL if
 * out of memory). A window that ended unflushed keeps counting until the
 * caller's flush: nothing in it is lost. */
static struct audit_window *window_of(struct audit_budget *b, const char *gadget, uint64_t now_ms)
{
        struct nametab_link *l = nametab_find(&b->by_name, gadget, window_name);
        struct audit_window *w;
        if (l) {
                w = NAMETAB_ENTRY(l, struct audit_window, name_link);
                if (now_ms - w->start_ms >= AUDIT_WINDOW_MS && w->n_sums == 0 && !w->unwritten) {
                        w->start_ms = now_ms;
                        w->written = 0;
                }
                return w;
        }
        if (!(w = calloc(1, sizeof *w)))
                return NULL;
        if (!(w->gadget = strdup(gadget)) || nametab_insert(&b->by_name, &w->name_link, window_name) < 0) {
                free(w->gadget);
                free(w);
                return NULL;
        }
        w->start_ms = now_ms;
        LIST_INSERT_HEAD(&b->windows, w, link);
        return w;
}

static bool same(const char *a, const char *b)
{
        return a && b && strcmp(a, b) == 0;
}

/* The summary of r's kind in w: an existing one, a new one, or the last
 * ("other" of that outcome) when AUDIT_SUMMARIES_MAX kinds are taken. */
static struct audit_summary *summary_of(struct audit_window *w, const struct audit_record *r)
{
        if (!w->sums && !(w->sums = calloc(AUDIT_SUMMARY_SLOTS, sizeof *w->sums)))
                return NULL;
        for (size_t i = 0; i < w->n_sums; i++) {
                struct audit_summary *s = &w->sums[i];
                if (s->outcome == r->outcome && same(s->binding, r->binding) && same(s->op, r->op))
                        return s;
        }
        struct audit_summary *other = &w->sums[AUDIT_SUMMARIES_MAX + r->outcome];
        other->outcome = r->outcome;
        if (w->n_sums < AUDIT_SUMMARIES_MAX) {
                struct audit_summary *s = &w->sums[w->n_sums];
                *s = (struct audit_summary){ .outcome = r->outcome };
                if ((s->binding = strdup(r->binding)) && (s->op = strdup(r->op))) {
                        w->n_sums++;
                        return s;
                }
                free(s->binding);
                *s = (struct audit_summary){ 0 };
        }
        return other;
}

int audit_budget_take(struct audit_budget *b, const struct audit_record *r, uint64_t now_ms)
{
        if (b->rate == 0)
                return 1;
        struct audit_window *w = window_of(b, r->gadget, now_ms);
        if (!w)
                return -ENOMEM;
        if (w->written < b->rate) {
                w->written++;
                return 1;
        }
        struct audit_summary *s = summary_of(w, r);
        if (!s)
                return -ENOMEM;
        b->summarized++;
        s->count++;
        s->bytes += r->bytes;
        s->duration_us += r->duration_us;
        return 0;
}

void audit_budget_failed(struct audit_budget *b, const char *gadget, int e, uint64_t now_ms)
{
        struct audit_window *w = window_of(b, gadget, now_ms);
        if (!w)
                return;
        w->unwritten++;
        w->error = e;
}

/* Whether w holds anything to report. */
static bool window_busy(const struct audit_window *w)
{
        for (size_t i = AUDIT_SUMMARIES_MAX; i < AUDIT_SUMMARY_SLOTS; i++)
                if (w->sums && w->sums[i].count)
                        return true;
        return w->n_sums || w->unwritten;
}

bool audit_budget_flush(struct audit_budget *b, uint64_t now_ms, bool force,
                        void (*ended)(void *arg, const struct audit_window *w), void *arg)
{
        bool pending = false;
        /* kept: the last window kept; what follows it is looked at next. */
        struct audit_window *kept = NULL, *w;
        while ((w = kept ? LIST_NEXT(kept, link) : LIST_FIRST(&b->windows))) {
                bool over = force || now_ms - w->start_ms >= AUDIT_WINDOW_MS;
                if (!over) {
                        pending = true;
                        kept = w;
                        continue;
                }
                /* Unlinked first: what ended() writes starts a new window. */
                window_unlink(b, w);
                if (window_busy(w))
                        ended(arg, w);
                window_free(w);
        }
        return pending;
}

void audit_budget_free(struct audit_budget *b)
{
        struct audit_window *w;
        while ((w = LIST_FIRST(&b->windows))) {
                window_unlink(b, w);
                window_free(w);
        }
        nametab_free(&b->by_name);
}
