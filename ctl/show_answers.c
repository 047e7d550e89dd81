/* show_answers: the answers other than a gadget's list and status as text
 * or JSON (done, log lines, audit records, reload, approvals, nodes), and
 * show_answer, which prints any answer by its kind: a new kind of answer
 * is its renderer and its case here. */
#include "show.h"
#include "show_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "json.h"
#include "output.h"
#include "value.h"

int show_done(FILE *f, const Control__Done *d, bool json)
{
        int e = 0;

        if (json)
                return show_json(f, json_pack("{s:b, s:s}", "ok", 1, "message", d->message));
        if (*d->message) {
                e = show_put_escaped(f, d->message, OUTPUT_KEEP_NEWLINE | OUTPUT_KEEP_TAB);
                fputc('\n', f);
        }
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}

int show_audit(FILE *f, const Control__LogLines *l, bool json)
{
        int e = 0;

        if (!json)
                return show_logs(f, l, false);
        for (size_t i = 0; i < l->n_lines && e >= 0; i++) {
                json_t *rec = json_loads(l->lines[i], JSON_REJECT_DUPLICATES, NULL);

                if (rec && !json_is_object(rec)) {
                        json_decref(rec);
                        rec = NULL;
                }
                e = show_json(f, rec ? rec : json_pack("{s:s}", "line", l->lines[i]));
        }
        return e < 0 ? e : ferror(f) ? -EIO : 0;
}

/* `reload --json`: each list of ReloadReport as an array; kept, an array
 * of {name, path, errors}; failed, of {name, cause}. */
static json_t *reload_json(const Control__ReloadReport *r)
{
        json_t *kept = json_array();
        for (size_t i = 0; kept && i < r->n_kept; i++) {
                const Control__ReloadKept *k = r->kept[i];
                if (json_array_append_new(kept, json_pack("{s:s, s:s, s:o}", "name", k->name, "path", k->path,
                                                          "errors", show_json_strv(k->errors, k->n_errors))) < 0) {
                        json_decref(kept);
                        kept = NULL;
                }
        }
        json_t *changed = json_array();
        for (size_t i = 0; changed && i < r->n_changed; i++) {
                const Control__ReloadChanged *c = r->changed[i];
                if (json_array_append_new(changed, json_pack("{s:s, s:o}", "name", c->name, "keys",
                                                             show_json_strv(c->keys, c->n_keys))) < 0) {
                        json_decref(changed);
                        changed = NULL;
                }
        }
        json_t *failed = json_array();
        for (size_t i = 0; failed && i < r->n_failed; i++) {
                const Control__ReloadFailed *f = r->failed[i];
                if (json_array_append_new(failed, json_pack("{s:s, s:s}", "name", f->name, "cause", f->cause)) < 0) {
                        json_decref(failed);
                        failed = NULL;
                }
        }
        if (!kept || !changed || !failed) {
                json_decref(kept);
                json_decref(changed);
                json_decref(failed);
                return NULL;
        }
        return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "loaded", show_json_strv(r->loaded, r->n_loaded),
                         "stopped", show_json_strv(r->stopped, r->n_stopped), "restarted",
                         show_json_strv(r->restarted, r->n_restarted), "unchanged",
                         show_json_strv(r->unchanged, r->n_unchanged), "errors",
                         show_json_strv(r->errors, r->n_errors), "kept", kept, "changed", changed,
                         "failed", failed);
}

/* "restarted: a (CallTimeout, [Binding N]), b": each with the keys that changed. */
static int put_restarted(FILE *f, const Control__ReloadReport *r)
{
        int e = 0;
        if (r->n_restarted == 0)
                return 0;
        fputs("restarted: ", f);
        for (size_t i = 0; i < r->n_restarted && e >= 0; i++) {
                e = show_put_escaped(f, r->restarted[i], 0);
                for (size_t k = 0; k < r->n_changed && e >= 0; k++) {
                        const Control__ReloadChanged *c = r->changed[k];
                        if (strcmp(c->name, r->restarted[i]) != 0 || c->n_keys == 0)
                                continue;
                        for (size_t j = 0; j < c->n_keys && e >= 0; j++) {
                                fputs(j ? ", " : " (", f);
                                e = show_put_escaped(f, c->keys[j], 0);
                        }
                        fputc(')', f);
                }
                fputs(i + 1 < r->n_restarted ? ", " : "\n", f);
        }
        return e;
}

/* A gadget kept on its previous policy, on err: the count of its file's
 * errors, each of them indented under it. */
static int put_kept(FILE *err, const Control__ReloadKept *k)
{
        int e;
        fputs("kept ", err);
        e = show_put_escaped(err, k->name, 0);
        fputs(" on its previous policy: ", err);
        if (e >= 0)
                e = show_put_escaped(err, k->path, 0);
        fprintf(err, " has %zu error%s:\n", k->n_errors, k->n_errors == 1 ? "" : "s");
        for (size_t i = 0; i < k->n_errors && e >= 0; i++) {
                fputs("  ", err);
                e = show_put_escaped(err, k->errors[i], 0);
                fputc('\n', err);
        }
        return e;
}

/* Gadgets a reload did not restart: "not restarted: a, b" on out, and on
 * err each with why (its new process did not start; the old one serves). */
static int put_failed(FILE *out, FILE *err, const Control__ReloadReport *r)
{
        int e = 0;
        if (r->n_failed == 0)
                return 0;
        fputs("not restarted: ", out);
        for (size_t i = 0; i < r->n_failed && e >= 0; i++) {
                e = show_put_escaped(out, r->failed[i]->name, 0);
                fputs(i + 1 < r->n_failed ? ", " : "\n", out);
        }
        for (size_t i = 0; i < r->n_failed && e >= 0; i++) {
                e = show_put_escaped(err, r->failed[i]->name, 0);
                fputs(": its changed policy's new process ", err);
                if (e >= 0)
                        e = show_put_escaped(err, r->failed[i]->cause, 0);
                fputs("; it serves on with its previous process and policy\n", err);
        }
        return e;
}

/* "label: a, b" if v is not empty. */
static int put_names(FILE *f, const char *label, char *const *v, size_t n)
{
        if (n == 0)
                return 0;
        fprintf(f, "%s: ", label);
        return show_put_joined(f, v, n);
}

int show_reload(FILE *out, FILE *err, const Control__ReloadReport *r, bool json)
{
        int e;

        if (json)
                return show_json(out, reload_json(r));
        if (r->n_loaded + r->n_stopped + r->n_restarted + r->n_unchanged + r->n_kept == 0)
                fputs("no policies\n", out);
        e = put_names(out, "loaded", r->loaded, r->n_loaded);
        if (e >= 0)
                e = put_restarted(out, r);
        if (e >= 0)
                e = put_names(out, "stopped", r->stopped, r->n_stopped);
        if (e >= 0)
                e = put_names(out, "unchanged", r->unchanged, r->n_unchanged);
        if (e >= 0 && r->n_kept) {
                fputs("kept on its previous policy: ", out);
                for (size_t i = 0; i < r->n_kept && e >= 0; i++) {
                        e = show_put_escaped(out, r->kept[i]->name, 0);
                        fputs(i + 1 < r->n_kept ? ", " : "\n", out);
                }
        }
        if (e >= 0)
                e = put_failed(out, err, r);
        for (size_t i = 0; i < r->n_kept && e >= 0; i++)
                e = put_kept(err, r->kept[i]);
        for (size_t i = 0; i < r->n_errors && e >= 0; i++) {
                e = show_put_escaped(err, r->errors[i], OUTPUT_KEEP_NEWLINE); /* a file's errors, one a line */
                fputc('\n', err);
        }
        return e < 0 ? e : ferror(out) ? -EIO : 0;
}

static int approvals_json(FILE *f, const Control__ApprovalList *l)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < l->n_approvals; i++) {
                const Control__Approval *p = l->approvals[i];
                json_array_append_new(a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "id", show_clamp(p->id),
                                                   "caller", p->caller, "via", p->via, "target", p->target,
                                                   "method", p->method, "args", p->args, "age_ms", show_clamp(p->age_ms),
                                                   "timeout_ms", show_clamp(p->timeout_ms)));
        }
        return show_json(f, json_pack("{s:o, s:I}", "approvals", a, "total", (json_int_t)l->total));
}

int show_approvals(FILE *f, const Control__ApprovalList *l, bool json)
{
        if (json)
                return approvals_json(f, l);
        if (l->n_approvals == 0) {
                fputs("no calls wait for approval\n", f);
                return ferror(f) ? -EIO : 0;
        }
        for (size_t i = 0; i < l->n_approvals; i++) {
                const Control__Approval *p = l->approvals[i];
                char age[OUTPUT_UNIT_MAX], left[OUTPUT_UNIT_MAX];
                output_uptime(p->age_ms, age, sizeof age);
                output_uptime(p->timeout_ms > p->age_ms ? p->timeout_ms - p->age_ms : 0, left, sizeof left);
                int e = 0;
                fprintf(f, "%llu  ", (unsigned long long)p->id);
                e |= show_put_escaped(f, p->target, 0);
                fputs(" ", f);
                e |= show_put_escaped(f, p->method, 0);
                fputs("\n    from ", f);
                e |= show_put_escaped(f, p->caller, 0);
                fputs(" through ", f);
                e |= show_put_escaped(f, p->via, 0);
                fprintf(f, ", waiting %s, denied in %s\n    args: ", age, left);
                e |= show_line(f, p->args);
                if (e < 0)
                        return -ENOMEM;
        }
        if (l->total > l->n_approvals)
                fprintf(f, "... and %u more\n", (unsigned)(l->total - l->n_approvals));
        return ferror(f) ? -EIO : 0;
}

/* A node counts as up while its store saw it within CONTROL_NODE_DOWN_MS
 * (the bound gadgetd's move checks too). */
static bool node_up(const Control__NodeInfo *n)
{
        return n->last_seen_ms <= CONTROL_NODE_DOWN_MS;
}

static int nodes_json(FILE *f, const Control__NodeList *l)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < l->n_nodes; i++) {
                const Control__NodeInfo *n = l->nodes[i];
                if (json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:b, s:b, s:I}", "name", n->name, "peer",
                                                       n->peer, "last_seen_ms", show_clamp(n->last_seen_ms), "self",
                                                       n->self, "up", node_up(n), "leases",
                                                       show_clamp(n->leases))) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        }
        json_t *o = a ? json_pack("{s:o}", "nodes", a) : NULL;
        if (o && l->store_warning && l->store_warning[0] &&
            json_object_set_new(o, "store_warning", json_string(l->store_warning)) < 0) {
                json_decref(o);
                o = NULL;
        }
        return show_json(f, o);
}

/* LAST SEEN of one node: "now (this node)", "3 s ago", "down, last seen
 * 42 s ago". */
static void node_seen(const Control__NodeInfo *n, char *buf, size_t len)
{
        char ago[OUTPUT_UNIT_MAX];

        output_ago(n->last_seen_ms, ago, sizeof(ago));
        snprintf(buf, len, "%s%s%s", node_up(n) ? "" : "down, last seen ", ago, n->self ? " (this node)" : "");
}

int show_nodes(FILE *f, const Control__NodeList *l, bool json)
{
        static const char *const headers[] = { "NAME", "PEER", "LEASES", "LAST SEEN" };
        struct output_table *t;
        int e = 0;

        if (json)
                return nodes_json(f, l);
        if (l->n_nodes == 0) {
                fputs("no nodes seen in the store yet\n", f);
                return ferror(f) ? -EIO : 0;
        }
        t = output_table_new(sizeof headers / sizeof *headers, headers, NULL);
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_nodes && e >= 0; i++) {
                const Control__NodeInfo *n = l->nodes[i];
                char seen[80], leases[24];
                node_seen(n, seen, sizeof(seen));
                snprintf(leases, sizeof leases, "%llu", (unsigned long long)n->leases);
                const char *row[4] = { n->name, n->peer[0] ? n->peer : "-", leases, seen };
                e = output_table_add(t, row);
        }
        if (e >= 0)
                e = output_table_print(t, f);
        output_table_free(t);
        if (e >= 0 && l->store_warning && l->store_warning[0] && fprintf(f, "warning: %s\n", l->store_warning) < 0)
                e = -EIO;
        return e;
}

/* gadgetctl cores: TIME RUN SIGNAL SIZE PATH, oldest first. */
/* gadgetctl versions: the store's versions of a gadget, newest install
 * first (times in UTC, as the store records them). */
int show_versions(FILE *f, const Control__VersionList *l, bool json)
{
        static const char *const headers[] = { "VERSION", "CURRENT", "INSTALLED (UTC)", "UID", "SIGNER",
                                               "STATE KEPT (UTC)" };
        int e = 0;
        if (json) {
                json_t *a = json_array();
                for (size_t i = 0; a && i < l->n_versions; i++) {
                        const Control__VersionInfo *v = l->versions[i];
                        json_t *o = json_pack("{s:s, s:b, s:I, s:I, s:s, s:s, s:s, s:s, s:I, s:I}", "version",
                                              v->version, "current", v->current, "installed_ms",
                                              (json_int_t)v->installed_ms, "uid", (json_int_t)v->uid, "signer",
                                              v->signer, "sdk", v->sdk, "node", v->node, "refused", v->refused,
                                              "state_ms", (json_int_t)v->state_ms, "state_bytes",
                                              (json_int_t)v->state_bytes);
                        if (json_array_append_new(a, o) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                }
                return show_json(f, a);
        }
        if (l->n_versions == 0) {
                fputs("no version installed (gadgetctl install BUNDLE installs one)\n", f);
                return ferror(f) ? -EIO : 0;
        }
        struct output_table *t = output_table_new(sizeof headers / sizeof *headers, headers, NULL);
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_versions && e >= 0; i++) {
                const Control__VersionInfo *v = l->versions[i];
                char when[40] = "?", uid[16], signer[20];
                time_t s = (time_t)(v->installed_ms / 1000);
                struct tm tm;
                if (gmtime_r(&s, &tm))
                        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
                snprintf(uid, sizeof uid, "%u", (unsigned)v->uid);
                snprintf(signer, sizeof signer, "%.16s", v->signer[0] ? v->signer : "(unsigned)");
                /* The state a deploy kept with it: rollback --with-state's. */
                char state[80] = "";
                s = (time_t)(v->state_ms / 1000);
                if (v->state_ms && gmtime_r(&s, &tm)) {
                        char at[40];
                        strftime(at, sizeof at, "%Y-%m-%d %H:%M:%S", &tm);
                        snprintf(state, sizeof state, "%s, %llu bytes", at, (unsigned long long)v->state_bytes);
                }
                const char *row[6] = { v->version, v->current ? "yes" : "", when, uid, signer, state };
                if (v->refused[0]) { /* from the store, refused here: nothing of it installed */
                        row[1] = "refused";
                        row[2] = "-";
                        row[3] = "-";
                        row[4] = "-";
                        row[5] = "-";
                }
                e = output_table_add(t, row);
        }
        if (e >= 0)
                e = output_table_print(t, f);
        output_table_free(t);
        for (size_t i = 0; i < l->n_versions && e >= 0; i++)
                if (l->versions[i]->refused[0] && fprintf(f, "%s refused here (from node %s): %s\n",
                                                          l->versions[i]->version, l->versions[i]->node,
                                                          l->versions[i]->refused) < 0)
                        e = -EIO;
        return e;
}

int show_cores(FILE *f, const Control__CoreList *l, bool json)
{
        static const char *const headers[] = { "TIME", "RUN", "SIGNAL", "SIZE", "PATH" };
        int e = 0;
        if (json) {
                json_t *a = json_array();
                for (size_t i = 0; a && i < l->n_cores; i++) {
                        const Control__CoreFile *c = l->cores[i];
                        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:s}", "time_ms", (json_int_t)c->time_ms,
                                              "run", (json_int_t)c->run, "signal", c->signal, "size",
                                              show_clamp(c->size), "path", c->path);
                        if (json_array_append_new(a, o) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                }
                return show_json(f, a);
        }
        if (l->n_cores == 0) {
                fputs("no cores kept (CoreDump= in its policy keeps them)\n", f);
                return ferror(f) ? -EIO : 0;
        }
        struct output_table *t = output_table_new(sizeof headers / sizeof *headers, headers, NULL);
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_cores && e >= 0; i++) {
                const Control__CoreFile *c = l->cores[i];
                char when[40] = "?", run[16], sig[24], size[OUTPUT_UNIT_MAX];
                time_t s = (time_t)(c->time_ms / 1000);
                struct tm tm;
                if (localtime_r(&s, &tm))
                        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
                snprintf(run, sizeof run, "%u", (unsigned)c->run);
                snprintf(sig, sizeof sig, "SIG%s", c->signal);
                const char *row[5] = { when, run, sig, output_size(c->size, size, sizeof size), c->path };
                e = output_table_add(t, row);
        }
        if (e >= 0)
                e = output_table_print(t, f);
        output_table_free(t);
        return e;
}

static int top_json(FILE *f, const Control__TopReport *t)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < t->n_gadgets; i++) {
                const Control__TopGadget *g = t->gadgets[i];
                json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "name", g->name, "state", g->state,
                                      "cpu_usec", show_clamp(g->cpu_usec), "memory_bytes", show_clamp(g->memory_bytes),
                                      "tasks", show_clamp(g->tasks), "calls", show_clamp(g->calls), "errors",
                                      show_clamp(g->errors), "p99_us", show_clamp(g->p99_us));
                if (json_array_append_new(a, o) < 0) {
                        json_decref(a);
                        return -ENOMEM;
                }
        }
        return show_json(f, a);
}

/* g's row in before, or NULL (new since). */
static const Control__TopGadget *top_find(const Control__TopReport *before, const char *name)
{
        for (size_t i = 0; before && i < before->n_gadgets; i++)
                if (strcmp(before->gadgets[i]->name, name) == 0)
                        return before->gadgets[i];
        return NULL;
}

/* A row's rates over the interval: CPU %, calls/s, errors/s (-1: unknown). */
struct top_row {
        const Control__TopGadget *g;
        double cpu, calls, errors;
};

static int cmp_top_row(const void *a, const void *b)
{
        const struct top_row *x = a, *y = b;
        if (x->cpu != y->cpu)
                return x->cpu < y->cpu ? 1 : -1;
        if (x->calls != y->calls)
                return x->calls < y->calls ? 1 : -1;
        return strcmp(x->g->name, y->g->name);
}

static void rate(char *buf, size_t len, double v)
{
        if (v < 0)
                snprintf(buf, len, "-");
        else
                snprintf(buf, len, "%.1f", v);
}

int show_top(FILE *f, const Control__TopReport *now, const Control__TopReport *before, bool json)
{
        static const char *const headers[] = { "GADGET", "STATE", "CPU%", "MEMORY", "TASKS", "CALLS/S", "ERRORS/S",
                                               "P99" };
        static const bool right[] = { false, false, true, true, true, true, true, true };
        if (json)
                return top_json(f, now);
        double secs = before && now->at_ms > before->at_ms ? (double)(now->at_ms - before->at_ms) / 1000 : 0;
        struct top_row *rows = calloc(now->n_gadgets + 1, sizeof *rows);
        struct output_table *t = output_table_new(sizeof headers / sizeof *headers, headers, right);
        int e = rows && t ? 0 : -ENOMEM;
        for (size_t i = 0; e == 0 && i < now->n_gadgets; i++) {
                const Control__TopGadget *g = now->gadgets[i], *p = top_find(before, g->name);
                rows[i] = (struct top_row){ .g = g, .cpu = -1, .calls = -1, .errors = -1 };
                if (p && secs > 0) {
                        /* A new run starts its CPU time at 0: no rate across it. */
                        if (g->cpu_usec >= p->cpu_usec)
                                rows[i].cpu = (double)(g->cpu_usec - p->cpu_usec) / 1e4 / secs;
                        rows[i].calls = g->calls >= p->calls ? (double)(g->calls - p->calls) / secs : -1;
                        rows[i].errors = g->errors >= p->errors ? (double)(g->errors - p->errors) / secs : -1;
                }
        }
        if (e == 0)
                qsort(rows, now->n_gadgets, sizeof *rows, cmp_top_row);
        for (size_t i = 0; e == 0 && i < now->n_gadgets; i++) {
                char cpu[24], mem[24], tasks[24], calls[24], errors[24], p99[32];
                rate(cpu, sizeof cpu, rows[i].cpu);
                output_size(rows[i].g->memory_bytes, mem, sizeof mem);
                snprintf(tasks, sizeof tasks, "%llu", (unsigned long long)rows[i].g->tasks);
                rate(calls, sizeof calls, rows[i].calls);
                rate(errors, sizeof errors, rows[i].errors);
                if (rows[i].g->p99_us)
                        output_duration_us(rows[i].g->p99_us, p99, sizeof p99);
                else
                        snprintf(p99, sizeof p99, "-");
                const char *row[8] = { rows[i].g->name, rows[i].g->state, cpu, mem, tasks, calls, errors, p99 };
                e = output_table_add(t, row);
        }
        if (e == 0 && now->n_gadgets == 0)
                fputs("no gadgets loaded\n", f);
        else if (e == 0)
                e = output_table_print(t, f);
        output_table_free(t);
        free(rows);
        return e;
}

int show_answer(FILE *out, FILE *err, const Control__Response *r, bool json, bool audit, bool *failed)
{
        switch (r->resp_case) {
        case CONTROL__RESPONSE__RESP_DONE:
                return show_done(out, r->done, json);
        case CONTROL__RESPONSE__RESP_LIST:
                return show_list(out, r->list, json);
        case CONTROL__RESPONSE__RESP_STATUS:
                return show_status(out, r->status, json);
        case CONTROL__RESPONSE__RESP_RESULT:
                return show_value(out, r->result);
        case CONTROL__RESPONSE__RESP_LOGS:
                /* A note (the store unreachable: one node's records) goes to
                 * err, so out stays the records alone. */
                if (r->logs->note && r->logs->note[0])
                        show_note(err, r->logs->note, json);
                return audit ? show_audit(out, r->logs, json) : show_logs(out, r->logs, json);
        case CONTROL__RESPONSE__RESP_APPROVALS:
                return show_approvals(out, r->approvals, json);
        case CONTROL__RESPONSE__RESP_NODES:
                return show_nodes(out, r->nodes, json);
        case CONTROL__RESPONSE__RESP_TRACE:
                return show_trace(out, err, r->trace, json);
        case CONTROL__RESPONSE__RESP_TOP:
                return show_top(out, r->top, NULL, json);
        case CONTROL__RESPONSE__RESP_CORES:
                return show_cores(out, r->cores, json);
        case CONTROL__RESPONSE__RESP_VERSIONS:
                return show_versions(out, r->versions, json);
        case CONTROL__RESPONSE__RESP_RELOAD:
                *failed = r->reload->n_errors > 0 || r->reload->n_kept > 0 || r->reload->n_failed > 0;
                return show_reload(out, err, r->reload, json);
        default:
                return -EPROTO;
        }
}
