/* show_trace: gadgetctl trace's answer — one call chain's spans as a tree
 * (each span under its parent, siblings by their start), or as JSON. */
#include "show.h"
#include "show_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

#define TREE_DEPTH_MAX 64   /* deeper spans are printed at this depth */

static json_t *span_json(const Control__Span *s)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "span_id", s->span_id, "parent_id",
                         s->parent_id, "gadget", s->gadget, "name", s->name, "kind", s->kind, "node", s->node,
                         "peer", s->peer, "outcome", s->outcome, "start_us", show_clamp(s->start_us),
                         "duration_us", show_clamp(s->duration_us));
}

static int trace_json(FILE *f, const Control__TraceTree *t)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < t->n_spans; i++)
                if (json_array_append_new(a, span_json(t->spans[i])) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        json_t *u = show_json_strv(t->unreached, t->n_unreached);
        if (!a || !u) {
                json_decref(a);
                json_decref(u);
                return show_json(f, NULL);
        }
        return show_json(f, json_pack("{s:s, s:o, s:o}", "trace_id", t->trace_id, "spans", a, "unreached", u));
}

/* One span's line at depth. */
static int span_line(FILE *f, const Control__Span *s, unsigned depth)
{
        char line[512], dur[32];
        output_duration_us(s->duration_us, dur, sizeof dur);
        snprintf(line, sizeof line, "%*s%s %s %s (%s) %s%s%s%s%s", (int)(2 * depth), "",
                 strcmp(s->kind, "call") == 0 ? "call" : "binding", s->gadget, s->name, s->outcome, dur,
                 s->node[0] ? " on node " : "", s->node, s->peer[0] ? " peer " : "", s->peer);
        int e = show_put_escaped(f, line, 0);
        fputc('\n', f);
        return e;
}

/* Whether s's parent is among the spans (else it starts a tree here). */
static bool has_parent(const Control__TraceTree *t, const Control__Span *s)
{
        if (!s->parent_id[0])
                return false;
        for (size_t i = 0; i < t->n_spans; i++)
                if (t->spans[i] != s && strcmp(t->spans[i]->span_id, s->parent_id) == 0)
                        return true;
        return false;
}

/* Prints span i and, under it, its children (in the answer's order: by
 * start). Each span once: a loop of parents (a node's answer may be
 * anything valid) ends where it meets a span already printed. */
static int print_tree(FILE *f, const Control__TraceTree *t, size_t i, unsigned depth, bool *done)
{
        done[i] = true;
        int e = span_line(f, t->spans[i], depth);
        for (size_t k = 0; k < t->n_spans && e >= 0; k++)
                if (!done[k] && strcmp(t->spans[k]->parent_id, t->spans[i]->span_id) == 0)
                        e = print_tree(f, t, k, depth < TREE_DEPTH_MAX ? depth + 1 : depth, done);
        return e;
}

int show_trace(FILE *f, FILE *err, const Control__TraceTree *t, bool json)
{
        if (t->n_unreached && !json) {  /* JSON: its "unreached" */
                fputs("not answered by node ", err);
                show_put_joined(err, t->unreached, t->n_unreached);
        }
        if (json)
                return trace_json(f, t);
        bool *done = calloc(t->n_spans ? t->n_spans : 1, sizeof *done);
        if (!done)
                return -ENOMEM;
        fprintf(f, "trace %s\n", t->trace_id);
        int e = 0;
        for (size_t i = 0; i < t->n_spans && e >= 0; i++)
                if (!done[i] && !has_parent(t, t->spans[i]))
                        e = print_tree(f, t, i, 0, done);
        for (size_t i = 0; i < t->n_spans && e >= 0; i++)
                if (!done[i])
                        e = print_tree(f, t, i, 0, done);
        free(done);
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}

/* One frame as JSON: what gadgetd sent, dir "in" (from the gadget) or "out". */
static json_t *frame_json(const Control__Frame *m, const char *gadget)
{
        char iso[OUTPUT_LOG_TIME_MAX];
        return json_pack("{s:s, s:I, s:s, s:I, s:s, s:s, s:I, s:s, s:I, s:s, s:I, s:o, s:b}", "time",
                         output_log_time_iso(m->time_ms, iso, sizeof iso), "time_ms", (json_int_t)m->time_ms,
                         "gadget", gadget, "run", (json_int_t)m->run, "dir", m->in ? "in" : "out", "kind", m->kind,
                         "id", show_clamp(m->id), "name", m->name, "bytes", show_clamp(m->bytes), "outcome",
                         m->outcome, "duration_us", show_clamp(m->duration_us), "preview",
                         show_json_string(m->preview), "withheld", m->withheld);
}

/* One frame as a line: time, gadget[run], direction (-> to the gadget, <-
 * from it), kind, #id, name, outcome, size, duration, then the preview. */
static int frame_line(FILE *f, const Control__Frame *m, const char *gadget)
{
        char when[OUTPUT_LOG_TIME_MAX];
        fprintf(f, "%s %s[%u] %s %s", output_log_time(m->time_ms, when, sizeof when), gadget, m->run,
                m->in ? "<-" : "->", m->kind);
        if (m->id)
                fprintf(f, " #%llu", (unsigned long long)m->id);
        int r = 0;
        if (m->name[0]) {
                fputc(' ', f);
                r = show_put_escaped(f, m->name, 0);
        }
        if (m->outcome[0] && r >= 0) {
                fputc(' ', f);
                r = show_put_escaped(f, m->outcome, 0);
        }
        fprintf(f, " %lluB", (unsigned long long)m->bytes);
        if (m->duration_us)
                fprintf(f, " %.3fms", (double)m->duration_us / 1000.0);
        if (m->withheld)
                fputs(" (values withheld)", f);
        else if (m->preview[0] && r >= 0) {
                fputc(' ', f);
                r = show_put_escaped(f, m->preview, 0);
        }
        fputc('\n', f);
        return r;
}

int show_frames(FILE *f, const Control__FrameBatch *b, const char *gadget, size_t max, bool json)
{
        int e = 0;
        if (b->dropped)
                e = json ? show_json(f, json_pack("{s:I}", "dropped", show_clamp(b->dropped)))
                         : fprintf(f, "-- %llu frames dropped: this reader fell behind\n",
                                   (unsigned long long)b->dropped) < 0 ? -EIO : 0;
        for (size_t i = 0; i < b->n_frames && i < max && e >= 0; i++)
                e = json ? show_json(f, frame_json(b->frames[i], gadget)) : frame_line(f, b->frames[i], gadget);
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}
