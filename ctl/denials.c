/* denials: the system calls a gadget's filter refused (`gadgetctl denials
 * NAME`), from the status gadgetd answers: one line per call and answer,
 * most refused first. */
#include "show.h"
#include "show_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "output.h"

/* "2026-12-06 10:58:35 UTC". */
static const char *when(int64_t ms, char *buf, size_t len)
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
                snprintf(buf, len, "%lld ms", (long long)ms);
        return buf;
}

static int by_count(const void *a, const void *b)
{
        const Control__Denial *x = *(Control__Denial *const *)a, *y = *(Control__Denial *const *)b;
        return x->count < y->count ? 1 : x->count > y->count ? -1 : strcmp(x->call, y->call);
}

static json_t *denials_json(const Control__GadgetStatus *s, Control__Denial **d)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < s->n_denials; i++) {
                json_t *o = json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:s}", "call", d[i]->call, "nr", (int)d[i]->nr,
                                      "answer", d[i]->answer, "count", show_clamp(d[i]->count), "first_ms",
                                      (json_int_t)d[i]->first_ms, "last_ms", (json_int_t)d[i]->last_ms, "path",
                                      d[i]->path);
                if (json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        }
        return json_pack("{s:s, s:I, s:I, s:o}", "name", s->info->name, "total", show_clamp(s->info->denials),
                         "untracked", show_clamp(s->denials_untracked), "denials", a);
}

int show_denials(FILE *f, const Control__GadgetStatus *s, bool json)
{
        Control__Denial **d = calloc(s->n_denials + 1, sizeof *d);
        int e = 0;
        if (!d)
                return -ENOMEM;
        if (s->n_denials)
                memcpy(d, s->denials, s->n_denials * sizeof *d);
        qsort(d, s->n_denials, sizeof *d, by_count);
        if (json) {
                e = show_json(f, denials_json(s, d));
                free(d);
                return e;
        }
        if (s->n_denials == 0)
                fprintf(f, "no system call of %s was refused since it was loaded\n", s->info->name);
        else
                fprintf(f, "%-24s %-8s %10s  %-23s  %-23s  %s\n", "CALL", "ANSWER", "COUNT", "FIRST", "LAST", "PATH");
        for (size_t i = 0; i < s->n_denials && e >= 0; i++) {
                char first[40], last[40];
                fprintf(f, "%-24s %-8s %10llu  %-23s  %-23s  ", d[i]->call, d[i]->answer,
                        (unsigned long long)d[i]->count, when(d[i]->first_ms, first, sizeof first),
                        when(d[i]->last_ms, last, sizeof last));
                e = show_put_escaped(f, d[i]->path[0] ? d[i]->path : "-", 0);
                fputc('\n', f);
        }
        if (e >= 0 && s->denials_untracked)
                fprintf(f, "and %llu refusals of further calls (gadgetd keeps %zu calls a gadget)\n",
                        (unsigned long long)s->denials_untracked, s->n_denials);
        free(d);
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}
