/* show: gadgetd's answers as text or JSON. */
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

/* Width of the labels of `status` ("Limits mode"). */
#define LABEL_WIDTH 11


int show_json(FILE *f, json_t *json)
{
        int e = 0;

        if (!json)
                return -ENOMEM;
        if (json_dumpf(json, f, JSON_COMPACT) < 0 || fputc('\n', f) == EOF)
                e = -EIO;
        json_decref(json);
        return e;
}

json_t *show_json_string(const char *s)
{
        char *e;
        json_t *j;

        if (value_utf8_valid(s, strlen(s)))
                return json_string(s);
        e = output_escape(s, OUTPUT_KEEP_TAB | OUTPUT_KEEP_NEWLINE);
        j = e ? json_string(e) : NULL;
        free(e);
        return j;
}

json_t *show_json_strv(char *const *v, size_t n)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++) {
                if (json_array_append_new(a, show_json_string(v[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

int show_put_escaped(FILE *f, const char *s, unsigned flags)
{
        char *e = output_escape(s, flags);

        if (!e)
                return -ENOMEM;
        fputs(e, f);
        free(e);
        return 0;
}

int show_line(FILE *f, const char *s)
{
        int e = show_put_escaped(f, s, OUTPUT_KEEP_TAB);

        fputc('\n', f);
        return e;
}

/* The fields of GadgetInfo, named as in control.proto; node and epoch only
 * when a node runs it (a shared store), so a lone gadgetd's objects stay
 * as they were. */
static json_t *info_json(const Control__GadgetInfo *g)
{
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name", g->name,
                              "state", g->state, "cause", g->cause, "pid", (int)g->pid, "uptime_ms",
                              show_clamp(g->uptime_ms), "restarts", (json_int_t)g->restarts, "calls",
                              show_clamp(g->calls), "memory_bytes", show_clamp(g->memory_bytes), "tasks",
                              show_clamp(g->tasks), "cpu_usec", show_clamp(g->cpu_usec), "start_us", show_clamp(g->start_us));

        if (o && (json_object_set_new(o, "start", json_string(g->start[0] ? g->start : "always")) < 0 ||
                  json_object_set_new(o, "active_ago_ms", json_integer(show_clamp(g->active_ago_ms))) < 0 ||
                  json_object_set_new(o, "in_flight", json_integer(show_clamp(g->in_flight))) < 0 ||
                  json_object_set_new(o, "kept_errors", json_integer((json_int_t)g->kept_errors)) < 0 ||
                  json_object_set_new(o, "denials", json_integer(show_clamp(g->denials))) < 0)) {
                json_decref(o);
                return NULL;
        }
        if (o && g->program_pid > 0 && json_object_set_new(o, "program_pid", json_integer(g->program_pid)) < 0) {
                json_decref(o);
                return NULL;
        }
        if (o && g->next_alarm_ms && json_object_set_new(o, "next_alarm_ms", json_integer(g->next_alarm_ms)) < 0) {
                json_decref(o);
                return NULL;
        }
        if (o && g->node[0] &&
            (json_object_set_new(o, "node", json_string(g->node)) < 0 ||
             json_object_set_new(o, "epoch", json_integer((json_int_t)g->epoch)) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* Whether g's gadgetd shares a store with other nodes, as far as its info
 * tells: a node runs it, or it waits for one (state remote, node ""). A
 * lone gadgetd sends node "" and never says remote. */
static bool clustered(const Control__GadgetInfo *g)
{
        return g->node[0] || strcmp(g->state, "remote") == 0;
}

/* `list --json`: an array of info_json objects. */
static int list_json(FILE *f, const Control__GadgetList *l)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < l->n_gadgets; i++) {
                if (json_array_append_new(a, info_json(l->gadgets[i])) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        }
        return show_json(f, a);
}

/* One gadget's row of `list`: its cells printed into the buffers given;
 * with node, a NODE cell after STATE (the owner, "-" if none yet). */
struct list_row {
        char pid[16], up[OUTPUT_UNIT_MAX], mem[OUTPUT_UNIT_MAX], rs[16], calls[24], tasks[24], cpu[OUTPUT_UNIT_MAX];
        char kept[48];
        const char *cells[11];
};

/* With kept, a last POLICY cell: "kept: N errors" for a gadget a reload
 * left on its previous policy, "-" for one that runs its file's. */
static void list_row_fill(struct list_row *r, const Control__GadgetInfo *g, bool node, bool kept)
{
        size_t c = 0;

        snprintf(r->pid, sizeof(r->pid), "-");
        if (g->pid > 0)
                snprintf(r->pid, sizeof(r->pid), "%d", (int)g->pid);
        snprintf(r->tasks, sizeof(r->tasks), "-");
        if (g->tasks > 0)
                snprintf(r->tasks, sizeof(r->tasks), "%llu", (unsigned long long)g->tasks);
        output_uptime(g->uptime_ms, r->up, sizeof(r->up));
        output_size(g->memory_bytes, r->mem, sizeof(r->mem));
        output_cpu(g->cpu_usec, r->cpu, sizeof(r->cpu));
        snprintf(r->rs, sizeof(r->rs), "%u", (unsigned)g->restarts);
        snprintf(r->calls, sizeof(r->calls), "%llu", (unsigned long long)g->calls);
        r->cells[c++] = g->name;
        r->cells[c++] = g->state;
        if (node)
                r->cells[c++] = g->node[0] ? g->node : "-";
        r->cells[c++] = r->pid;
        r->cells[c++] = r->up;
        r->cells[c++] = r->rs;
        r->cells[c++] = r->calls;
        r->cells[c++] = r->mem;
        r->cells[c++] = r->tasks;
        r->cells[c++] = r->cpu;
        snprintf(r->kept, sizeof(r->kept), "-");
        if (g->kept_errors)
                snprintf(r->kept, sizeof(r->kept), "kept: %u error%s", (unsigned)g->kept_errors,
                         g->kept_errors == 1 ? "" : "s");
        if (kept)
                r->cells[c++] = r->kept;
}

int show_list(FILE *f, const Control__GadgetList *l, bool json)
{
        static const char *const headers[] = { "NAME", "STATE", "PID", "UPTIME", "RESTARTS",
                                               "CALLS", "MEMORY", "TASKS", "CPU", "POLICY" };
        static const bool right[] = { false, false, true, true, true, true, true, true, true, false };
        static const char *const node_headers[] = { "NAME", "STATE", "NODE", "PID", "UPTIME", "RESTARTS",
                                                    "CALLS", "MEMORY", "TASKS", "CPU", "POLICY" };
        static const bool node_right[] = { false, false, false, true, true, true, true, true, true, true, false };
        struct output_table *t;
        bool node = false, kept = false;
        int e = 0;

        if (json)
                return list_json(f, l);
        if (l->n_gadgets == 0) {
                fputs("no gadgets loaded\n", f);
                return ferror(f) ? -EIO : 0;
        }
        for (size_t i = 0; i < l->n_gadgets; i++) {
                node |= clustered(l->gadgets[i]);
                kept |= l->gadgets[i]->kept_errors > 0;
        }
        /* The POLICY column only while some gadget was kept on its previous policy. */
        t = node ? output_table_new(10 + kept, node_headers, node_right) : output_table_new(9 + kept, headers, right);
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < l->n_gadgets && e >= 0; i++) {
                struct list_row r;
                list_row_fill(&r, l->gadgets[i], node, kept);
                e = output_table_add(t, r.cells);
        }
        if (e >= 0)
                e = output_table_print(t, f);
        output_table_free(t);
        if (e >= 0 && kept)
                fputs("kept: a reload left the gadget on its previous policy, its file has errors "
                      "(gadgetctl status NAME lists them)\n", f);
        return e;
}

/* "LABEL: value" with the labels right-aligned. */
static int put_field(FILE *f, const char *label, const char *value)
{
        fprintf(f, "%*s: ", LABEL_WIDTH, label);
        int e = show_put_escaped(f, *value ? value : "-", 0);
        fputc('\n', f);
        return e;
}

int show_put_joined(FILE *f, char *const *v, size_t n)
{
        int e = 0;
        for (size_t i = 0; i < n && e >= 0; i++) {
                if (i > 0)
                        fputs(", ", f);
                e = show_put_escaped(f, v[i], 0);
        }
        fputc('\n', f);
        return e;
}

/* "LABEL: a, b, c", or "-" when empty. */
static int put_strv(FILE *f, const char *label, char *const *v, size_t n)
{
        fprintf(f, "%*s: ", LABEL_WIDTH, label);
        if (n == 0) {
                fputs("-\n", f);
                return 0;
        }
        return show_put_joined(f, v, n);
}

/* Lines under a label: the first beside it, the rest below it, indented;
 * "-" for none. */
static int put_lines(FILE *f, const char *label, char *const *v, size_t n, const char *indent)
{
        int e = 0;
        fprintf(f, "%*s: ", LABEL_WIDTH, label);
        if (n == 0)
                fputc('-', f);
        for (size_t i = 0; i < n && e >= 0; i++) {
                if (i > 0)
                        fprintf(f, "\n%*s  %s", LABEL_WIDTH, "", indent);
                e = show_put_escaped(f, v[i], 0);
        }
        fputc('\n', f);
        return e;
}

/* One line per binding (with its credential file, if any), its
 * operations' signatures under it. */
static int put_bindings(FILE *f, const Control__GadgetStatus *s)
{
        int e = 0;

        fprintf(f, "%*s: ", LABEL_WIDTH, "Bindings");
        if (s->n_bindings == 0)
                fputs("-\n", f);
        for (size_t i = 0; i < s->n_bindings && e >= 0; i++) {
                const Control__Binding *b = s->bindings[i];
                if (i > 0)
                        fprintf(f, "%*s  ", LABEL_WIDTH, "");
                e = show_put_escaped(f, b->name, 0);
                fputs(" (", f);
                if (e >= 0)
                        e = show_put_escaped(f, b->type, 0);
                if (e >= 0 && b->credential[0]) {
                        fputs(", credential ", f);
                        e = show_put_escaped(f, b->credential, 0);
                }
                fputs(")\n", f);
                for (size_t k = 0; k < b->n_ops && e >= 0; k++) {
                        fprintf(f, "%*s    ", LABEL_WIDTH, "");
                        e = show_put_escaped(f, b->ops[k], 0);
                        fputc('\n', f);
                }
        }
        return e;
}

/* Each method's signature, or "NAME (untyped)". */
static int put_methods(FILE *f, const Control__GadgetStatus *s)
{
        char **v = calloc(s->n_methods + 1, sizeof *v);
        int e = v ? 0 : -ENOMEM;
        for (size_t i = 0; i < s->n_methods && e == 0; i++) {
                const char *sig = i < s->n_signatures ? s->signatures[i] : "";
                if (sig[0] ? !(v[i] = strdup(sig)) : asprintf(&v[i], "%s (untyped)", s->methods[i]) < 0) {
                        v[i] = NULL;
                        e = -ENOMEM;
                }
        }
        if (e == 0)
                e = put_lines(f, "Methods", v, s->n_methods, "");
        for (size_t i = 0; v && i < s->n_methods; i++)
                free(v[i]);
        free(v);
        return e;
}

/* "failed (killed by signal SIGSEGV)"; for a gadget running again after a
 * stop, the cause is that of the last stop. */
static int put_state(FILE *f, const Control__GadgetInfo *g)
{
        bool running = strcmp(g->state, "ready") == 0 || strcmp(g->state, "starting") == 0;
        int e;

        fprintf(f, "%*s: ", LABEL_WIDTH, "State");
        e = show_put_escaped(f, g->state, 0);
        if (e >= 0 && *g->cause) {
                fputs(running ? " (last stop: " : " (", f);
                e = show_put_escaped(f, g->cause, 0);
                fputc(')', f);
        }
        fputc('\n', f);
        return e;
}

/* Under Policy:, for a gadget a reload kept on its previous policy: the
 * count of its file's errors, then each of them. */
static int put_kept(FILE *f, const Control__GadgetStatus *s)
{
        int e = 0;
        fprintf(f, "%*s  kept on its previous policy: ", LABEL_WIDTH, "");
        e = show_put_escaped(f, s->policy_path, 0);
        fprintf(f, " has %u error%s\n", (unsigned)s->info->kept_errors, s->info->kept_errors == 1 ? "" : "s");
        for (size_t i = 0; i < s->n_kept_errors && e >= 0; i++) {
                fprintf(f, "%*s    ", LABEL_WIDTH, "");
                e = show_put_escaped(f, s->kept_errors[i], 0);
                fputc('\n', f);
        }
        return e;
}

/* "Node: b (lease epoch 3)", or "Node: none yet" while no node runs it. */
static int put_node(FILE *f, const Control__GadgetInfo *g)
{
        char v[120];

        if (!g->node[0])
                return put_field(f, "Node", "none yet");
        snprintf(v, sizeof(v), "%s (lease epoch %lld)", g->node, (long long)g->epoch);
        return put_field(f, "Node", v);
}

/* "Next alarm: 2026-12-02 08:00:00 UTC (in 5 min)", or "(due)" when
 * its time has come (a delivery on its way or being retried). */
static int put_next_alarm(FILE *f, int64_t at_ms)
{
        char v[96], when[40], in[OUTPUT_UNIT_MAX];
        struct timespec now;
        struct tm tm;
        time_t t = (time_t)(at_ms / 1000);
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t left = at_ms - ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        if (!gmtime_r(&t, &tm) || strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
                snprintf(when, sizeof(when), "%lld ms since the epoch", (long long)at_ms);
        if (left > 0)
                snprintf(v, sizeof(v), "%s (in %s)", when, output_uptime((uint64_t)left, in, sizeof(in)));
        else
                snprintf(v, sizeof(v), "%s (due)", when);
        return put_field(f, "Next alarm", v);
}

/* "Denied: 1234 system calls, 3 kinds, most often socket (EACCES) x1200:
 * gadgetctl denials NAME". */
static void put_denied(FILE *f, const Control__GadgetStatus *s)
{
        char v[400];
        size_t top = 0;
        for (size_t i = 1; i < s->n_denials; i++)
                if (s->denials[i]->count > s->denials[top]->count)
                        top = i;
        int n = snprintf(v, sizeof(v), "%llu system call%s", (unsigned long long)s->info->denials,
                         s->info->denials == 1 ? "" : "s");
        if (s->n_denials > 0 && n > 0 && (size_t)n < sizeof(v))
                n += snprintf(v + n, sizeof(v) - (size_t)n, ", %zu kind%s, most often %s (%s) x%llu", s->n_denials,
                              s->n_denials == 1 ? "" : "s", s->denials[top]->call, s->denials[top]->answer,
                              (unsigned long long)s->denials[top]->count);
        if (n > 0 && (size_t)n < sizeof(v))
                snprintf(v + n, sizeof(v) - (size_t)n, ": gadgetctl denials %s", s->info->name);
        put_field(f, "Denied", v);
}

/* `status --json`: info_json plus the rest of GadgetStatus. */
static json_t *status_json(const Control__GadgetStatus *s)
{
        json_t *o = info_json(s->info), *b = json_array();

        for (size_t i = 0; b && i < s->n_bindings; i++) {
                const Control__Binding *sb = s->bindings[i];
                json_t *entry = json_pack("{s:s, s:s, s:o}", "name", sb->name, "type", sb->type, "ops",
                                          show_json_strv(sb->ops, sb->n_ops));
                if (entry && sb->credential[0] &&
                    json_object_set_new(entry, "credential", json_string(sb->credential)) < 0) {
                        json_decref(entry);
                        entry = NULL;
                }
                if (json_array_append_new(b, entry) < 0) {
                        json_decref(b);
                        b = NULL;
                }
        }
        if (!o || !b) {
                json_decref(o);
                json_decref(b);
                return NULL;
        }
        if (json_object_set_new(o, "policy_path", json_string(s->policy_path)) < 0 ||
            json_object_set_new(o, "limits_mode", json_string(s->limits_mode)) < 0 ||
            json_object_set_new(o, "limits", show_json_strv(s->limits, s->n_limits)) < 0 ||
            json_object_set_new(o, "bindings", b) < 0 ||
            json_object_set_new(o, "methods", show_json_strv(s->methods, s->n_methods)) < 0 ||
            json_object_set_new(o, "signatures", show_json_strv(s->signatures, s->n_signatures)) < 0 ||
            json_object_set_new(o, "log_tail", show_json_strv(s->log_tail, s->n_log_tail)) < 0 ||
            json_object_set_new(o, "audit_unwritten", json_integer((json_int_t)s->audit_unwritten)) < 0 ||
            json_object_set_new(o, "audit_error", json_string(s->audit_error)) < 0 ||
            json_object_set_new(o, "audit_unsent", json_integer((json_int_t)s->audit_unsent)) < 0 ||
            json_object_set_new(o, "audit_unsent_error", json_string(s->audit_unsent_error)) < 0 ||
            json_object_set_new(o, "audit_caught_up", json_integer((json_int_t)s->audit_caught_up)) < 0 ||
            json_object_set_new(o, "audit_log_skipped", json_integer((json_int_t)s->audit_log_skipped)) < 0 ||
            json_object_set_new(o, "kept_error_lines", show_json_strv(s->kept_errors, s->n_kept_errors)) < 0 ||
            json_object_set_new(o, "denial_kinds", json_integer((json_int_t)s->n_denials)) < 0 ||
            json_object_set_new(o, "crash_cause", json_string(s->crash_cause)) < 0 ||
            json_object_set_new(o, "crash_backtrace", show_json_strv(s->crash_backtrace, s->n_crash_backtrace)) < 0 ||
            json_object_set_new(o, "version", json_string(s->version)) < 0 ||
            json_object_set_new(o, "previous_version", json_string(s->previous_version)) < 0 ||
            json_object_set_new(o, "rollout_version", json_string(s->rollout_version)) < 0 ||
            json_object_set_new(o, "rollout_percent", json_integer(s->rollout_percent)) < 0 ||
            json_object_set_new(o, "rollout_back", json_string(s->rollout_back)) < 0 ||
            json_object_set_new(o, "release_generation", json_integer((json_int_t)s->release_generation)) < 0 ||
            json_object_set_new(o, "release_node", json_string(s->release_node)) < 0 ||
            json_object_set_new(o, "release_refused", json_string(s->release_refused)) < 0 ||
            json_object_set_new(o, "previous_state_ms", json_integer((json_int_t)s->previous_state_ms)) < 0 ||
            json_object_set_new(o, "previous_state_bytes", json_integer((json_int_t)s->previous_state_bytes)) < 0) {
                /* json_object_set_new takes b over even when it fails. */
                json_decref(o);
                return NULL;
        }
        return o;
}

int show_status(FILE *f, const Control__GadgetStatus *s, bool json)
{
        const Control__GadgetInfo *g = s->info;
        char pid[16] = "", program[16] = "", up[OUTPUT_UNIT_MAX], mem[OUTPUT_UNIT_MAX], rs[16], calls[56];
        char tasks[24] = "", cpu[OUTPUT_UNIT_MAX];
        int e;

        if (json)
                return show_json(f, status_json(s));
        if (g->pid > 0)
                snprintf(pid, sizeof(pid), "%d", (int)g->pid);
        if (g->program_pid > 0)
                snprintf(program, sizeof(program), "%d", (int)g->program_pid);
        if (g->tasks > 0)
                snprintf(tasks, sizeof(tasks), "%llu", (unsigned long long)g->tasks);
        snprintf(rs, sizeof(rs), "%u", (unsigned)g->restarts);
        if (g->in_flight)
                snprintf(calls, sizeof(calls), "%llu, %llu in flight", (unsigned long long)g->calls,
                         (unsigned long long)g->in_flight);
        else
                snprintf(calls, sizeof(calls), "%llu", (unsigned long long)g->calls);
        e = show_put_escaped(f, g->name, 0);
        fputc('\n', f);
        if (e >= 0)
                e = put_state(f, g);
        if (e >= 0 && clustered(g))
                e = put_node(f, g);
        if (e >= 0)
                e = put_field(f, "Policy", s->policy_path);
        if (e >= 0 && g->kept_errors)
                e = put_kept(f, s);
        if (e >= 0) {
                char ago[OUTPUT_UNIT_MAX];
                put_field(f, "Start", g->start[0] ? g->start : "always");
                e = put_field(f, "Last active", g->active_ago_ms ? output_ago(g->active_ago_ms, ago, sizeof(ago))
                                                                   : "none yet");
        }
        if (e >= 0 && g->next_alarm_ms)
                e = put_next_alarm(f, g->next_alarm_ms);
        if (e >= 0) {
                put_field(f, "PID", pid);
                if (g->program_pid > 0)
                        put_field(f, "Program PID", program);
                put_field(f, "Uptime", output_uptime(g->uptime_ms, up, sizeof(up)));
                put_field(f, "Restarts", rs);
                put_field(f, "Calls", calls);
                put_field(f, "Memory", output_size(g->memory_bytes, mem, sizeof(mem)));
                put_field(f, "Tasks", tasks);
                put_field(f, "CPU", output_cpu(g->cpu_usec, cpu, sizeof(cpu)));
                if (g->denials)
                        put_denied(f, s);
                e = put_field(f, "Limits mode", s->limits_mode);
        }
        if (e >= 0)
                e = put_strv(f, "Limits", s->limits, s->n_limits);
        if (e >= 0)
                e = put_bindings(f, s);
        if (e >= 0)
                e = put_methods(f, s);
        if (e >= 0 && s->audit_unwritten > 0) {
                char lost[320];
                snprintf(lost, sizeof(lost), "%llu records not written since gadgetd started (%s)",
                         (unsigned long long)s->audit_unwritten, s->audit_error);
                e = put_field(f, "Audit log", lost);
        }
        if (e >= 0 && s->audit_unsent > 0) {
                char unsent[480];
                snprintf(unsent, sizeof(unsent), "%llu records not copied to the store since gadgetd started (%s)",
                         (unsigned long long)s->audit_unsent, s->audit_unsent_error);
                e = put_field(f, "Audit store", unsent);
        }
        if (e >= 0 && s->audit_log_skipped > 0) {
                char skipped[160];
                snprintf(skipped, sizeof(skipped), "%llu lines of audit.log skipped by its catch-up, never sent "
                         "(damaged, another node's, or older than StoreKeepDays=)",
                         (unsigned long long)s->audit_log_skipped);
                e = put_field(f, "Audit store", skipped);
        }
        if (e >= 0 && s->version[0])
                e = put_field(f, "Version", s->version);
        if (e >= 0 && s->previous_version[0])
                e = put_field(f, "Previous version", s->previous_version);
        if (e >= 0 && s->previous_state_ms) {
                /* What rollback --with-state would put back. */
                char kept[120], at[40] = "?";
                time_t t = (time_t)(s->previous_state_ms / 1000);
                struct tm tm;
                if (gmtime_r(&t, &tm))
                        strftime(at, sizeof at, "%Y-%m-%d %H:%M:%S UTC", &tm);
                snprintf(kept, sizeof kept, "kept %s, %llu bytes (rollback --with-state)", at,
                         (unsigned long long)s->previous_state_bytes);
                e = put_field(f, "Previous state", kept);
        }
        if (e >= 0 && s->rollout_version[0]) {
                char ro[160];
                snprintf(ro, sizeof ro, "version %s serves %u%% of the call trees", s->rollout_version,
                         (unsigned)s->rollout_percent);
                e = put_field(f, "Rollout", ro);
        }
        if (e >= 0 && s->rollout_back[0])
                e = put_field(f, "Last rollback", s->rollout_back);
        if (e >= 0 && s->release_generation) {
                char gen[120];
                snprintf(gen, sizeof gen, "generation %llu, by node %s", (unsigned long long)s->release_generation,
                         s->release_node);
                e = put_field(f, "Release in store", gen);
        }
        if (e >= 0 && s->release_refused[0])
                e = put_field(f, "Refused here", s->release_refused);
        /* Its last crash: the cause, then the backtrace innermost first. */
        if (e >= 0 && s->crash_cause[0]) {
                e = put_field(f, "Last crash", s->crash_cause);
                if (e >= 0 && s->n_crash_backtrace)
                        e = put_lines(f, "Backtrace", s->crash_backtrace, s->n_crash_backtrace, "");
        }
        fputs("\nLast log lines:\n", f);
        if (s->n_log_tail == 0)
                fputs("(none)\n", f);
        for (size_t i = 0; i < s->n_log_tail && e >= 0; i++) {
                e = show_put_escaped(f, s->log_tail[i], OUTPUT_KEEP_TAB);
                fputc('\n', f);
        }
        if (e >= 0 && ferror(f))
                e = -EIO;
        return e;
}

int show_value(FILE *f, const Gadget__Value *v)
{
        char *s = json_from_value(v);

        if (!s)
                return -ENOMEM;
        fprintf(f, "%s\n", s);
        free(s);
        return ferror(f) ? -EIO : 0;
}

void show_note(FILE *f, const char *note, bool json)
{
        if (json) {
                json_t *j = json_pack("{s:s}", "note", note);
                if (!j || show_json(f, j) < 0)
                        fputs("{\"note\":\"out of memory\"}\n", f);
                return;
        }
        char *esc = output_escape(note, 0);
        fprintf(f, "gadgetctl: note: %s\n", esc ? esc : "out of memory");
        free(esc);
}

void show_error(FILE *f, bool json, uint32_t code, const char *fmt, ...)
{
        char *msg = NULL, *esc;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        esc = output_escape(msg ? msg : "out of memory", json ? 0 : OUTPUT_KEEP_NEWLINE);
        if (json) {
                /* A message naming a file of invalid UTF-8 is sent escaped:
                 * jansson refuses invalid strings. */
                const char *m = msg && value_utf8_valid(msg, strlen(msg)) ? msg : esc;
                json_t *j = json_pack("{s:{s:I, s:s}}", "error", "code", (json_int_t)code, "message",
                                      m ? m : "out of memory");
                if (show_json(f, j) < 0)
                        fputs("{\"error\":{\"code\":0,\"message\":\"out of memory\"}}\n", f);
        } else {
                /* Why this is safe: a message keeps its lines (a policy's
                 * errors, one a line), each after the first indented, so
                 * text from a gadget cannot print a line of gadgetctl's own. */
                const char *p = esc ? esc : "out of memory";
                fputs("gadgetctl: ", f);
                for (; *p; p++) {
                        fputc(*p, f);
                        if (*p == '\n' && p[1])
                                fputs("  ", f);
                }
                fputc('\n', f);
        }
        free(esc);
        free(msg);
}
