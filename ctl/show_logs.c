/* show_logs: a gadget's log lines as text (journalctl's short-precise, or
 * the text alone) or JSON. */
#include "show.h"
#include "show_int.h"

#include <errno.h>
#include <stdio.h>

#include "output.h"

/* syslog's priority names. */
static const char *const prio_names[] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };

/* One entry as short-precise text. Why the names are escaped too: they
 * come from gadgetd's answer, checked by client.c, but a terminal is
 * never handed a byte it would act on. */
static int entry_short(FILE *f, const Control__LogEntry *e)
{
        char when[OUTPUT_LOG_TIME_MAX], run[16];
        if (e->run)
                snprintf(run, sizeof run, "%u", e->run);
        else
                snprintf(run, sizeof run, "-");
        fprintf(f, "%s ", output_log_time(e->time_ms, when, sizeof when));
        int r = show_put_escaped(f, e->gadget, 0);
        fprintf(f, "[%s] ", run);
        if (r >= 0)
                r = show_put_escaped(f, e->stream, 0);
        fprintf(f, ".%s: ", prio_names[e->priority & 7]);
        if (r >= 0)
                r = show_put_escaped(f, e->text, OUTPUT_KEEP_TAB);
        fputc('\n', f);
        return r;
}

static json_t *entry_json(const Control__LogEntry *e)
{
        char iso[OUTPUT_LOG_TIME_MAX];
        return json_pack("{s:s, s:I, s:s, s:I, s:s, s:I, s:s}",
                         "time", output_log_time_iso(e->time_ms, iso, sizeof iso),
                         "time_ms", (json_int_t)e->time_ms, "gadget", e->gadget, "run", (json_int_t)e->run,
                         "stream", e->stream, "priority", (json_int_t)e->priority, "line", e->text);
}

int show_log_entries(FILE *f, const Control__LogLines *l, enum show_logs_as as)
{
        int e = 0;
        for (size_t i = 0; i < l->n_entries && e >= 0; i++) {
                const Control__LogEntry *x = l->entries[i];
                if (as == SHOW_LOGS_JSON) {
                        e = show_json(f, entry_json(x));
                } else if (as == SHOW_LOGS_CAT) {
                        e = show_put_escaped(f, x->text, OUTPUT_KEEP_TAB);
                        fputc('\n', f);
                } else {
                        e = entry_short(f, x);
                }
        }
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}

int show_logs(FILE *f, const Control__LogLines *l, bool json)
{
        int e = 0;
        for (size_t i = 0; i < l->n_lines && e >= 0; i++) {
                if (json) {
                        e = show_json(f, json_pack("{s:s}", "line", l->lines[i]));
                } else {
                        e = show_put_escaped(f, l->lines[i], OUTPUT_KEEP_TAB);
                        fputc('\n', f);
                }
        }
        if (e >= 0)
                e = show_log_entries(f, l, json ? SHOW_LOGS_JSON : SHOW_LOGS_SHORT);
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}
