/* format: a parsed policy written back as key=value lines (gadgetctl cat's
 * "as in effect"), sizes and times as an operator writes them (16M, 30s),
 * every key with the value in force, defaults included. */
#include "keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 16M, 64K, 1G, or bytes; "infinity" for POLICY_UNLIMITED. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
        static const struct { char unit; unsigned shift; } units[] = { { 'G', 30 }, { 'M', 20 }, { 'K', 10 } };
        if (v == POLICY_UNLIMITED) {
                snprintf(buf, len, "infinity");
                return buf;
        }
        for (size_t i = 0; i < sizeof units / sizeof *units; i++)
                if (v && v % (1ull << units[i].shift) == 0) {
                        snprintf(buf, len, "%llu%c", (unsigned long long)(v >> units[i].shift), units[i].unit);
                        return buf;
                }
        snprintf(buf, len, "%llu", (unsigned long long)v);
        return buf;
}

/* 2h, 5min, 30s, 250ms; zero_text (a key's "none") for 0. */
static const char *duration_text(uint64_t ms, const char *zero_text, char *buf, size_t len)
{
        if (ms == 0 && zero_text)
                snprintf(buf, len, "%s", zero_text);
        else if (ms && ms % 3600000 == 0)
                snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
        else if (ms && ms % 60000 == 0)
                snprintf(buf, len, "%llumin", (unsigned long long)(ms / 60000));
        else if (ms % 1000 == 0)
                snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
        else
                snprintf(buf, len, "%llums", (unsigned long long)ms);
        return buf;
}

static const char *count_text(uint64_t v, char *buf, size_t len)
{
        if (v == POLICY_UNLIMITED)
                snprintf(buf, len, "infinity");
        else
                snprintf(buf, len, "%llu", (unsigned long long)v);
        return buf;
}

/* KEY=a b c on one line, nothing when n is 0. */
static void words(FILE *f, const char *key, char *const *v, size_t n)
{
        if (!n)
                return;
        fprintf(f, "%s=", key);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i ? " " : "", v[i]);
        fputc('\n', f);
}

/* KEY=a, KEY=b, ...: one line a word, for a repeated key that takes one. */
static void lines(FILE *f, const char *key, char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s=%s\n", key, v[i]);
}

/* An argument as the shell-like split of Arguments= reads it back. */
static void argument(FILE *f, const char *a)
{
        if (*a && !strpbrk(a, " \t\"'\\")) {
                fputs(a, f);
                return;
        }
        fputc('"', f);
        for (; *a; a++) {
                if (*a == '"' || *a == '\\')
                        fputc('\\', f);
                fputc(*a, f);
        }
        fputc('"', f);
}

static void gadget_keys(FILE *f, const struct policy *p)
{
        char b[32];
        fprintf(f, "[Gadget]\nName=%s\nExec=%s\n", p->name, p->exec);
        if (p->argc) {
                fputs("Arguments=", f);
                for (size_t i = 0; i < p->argc; i++) {
                        if (i)
                                fputc(' ', f);
                        argument(f, p->argv[i]);
                }
                fputc('\n', f);
        }
        for (size_t i = 0; i < p->n_env; i++) {
                fputs("Environment=", f);
                argument(f, p->env[i]);
                fputc('\n', f);
        }
        words(f, "ReadOnlyPaths", p->ro_paths, p->n_ro_paths);
        fprintf(f, "SystemLibraries=%s\n", p->system_libraries ? "yes" : "no");
        fprintf(f, "RecordDenials=%s\n", p->record_denials ? "yes" : "no");
        fprintf(f, "NetworkNamespace=%s\n", policy_netns_name(p->netns));
        fprintf(f, "TmpSize=%s\n", size_text(p->tmp_size, b, sizeof b));
        if (p->core_dump)
                fprintf(f, "CoreDump=%s\n", size_text(p->core_dump, b, sizeof b));
        else
                fputs("# CoreDump= not set: no core is kept\n", f);
        fprintf(f, "StateMax=%s\n", size_text(p->state_max, b, sizeof b));
        fprintf(f, "MemoryMax=%s\n", size_text(p->memory_max, b, sizeof b));
        fprintf(f, "TasksMax=%s\n", count_text(p->tasks_max, b, sizeof b));
        if (p->cpu_quota)
                fprintf(f, "CPUQuota=%u%%\n", p->cpu_quota);
        else
                fputs("# CPUQuota= not set: no CPU limit\n", f);
        fprintf(f, "LimitNOFILE=%s\n", count_text(p->limit_nofile, b, sizeof b));
        fprintf(f, "CallTimeout=%s\n", duration_text(p->call_timeout_ms, NULL, b, sizeof b));
        fprintf(f, "RuntimeMax=%s\n", duration_text(p->runtime_max_ms, "infinity", b, sizeof b));
        fprintf(f, "StartTimeout=%s\n", duration_text(p->start_timeout_ms, NULL, b, sizeof b));
        if (p->log_lines)
                fprintf(f, "LogLinesPerSecond=%llu\n", (unsigned long long)p->log_lines);
        else
                fputs("# LogLinesPerSecond= not set: gadgetd's, from gadgetd.conf\n", f);
        if (p->log_bytes)
                fprintf(f, "LogBytesPerSecond=%s\n", size_text(p->log_bytes, b, sizeof b));
        else
                fputs("# LogBytesPerSecond= not set: gadgetd's, from gadgetd.conf\n", f);
        fprintf(f, "Restart=%s\nStart=%s\n", policy_restart_name(p->restart), policy_start_name(p->start));
        fprintf(f, "IdleStop=%s\n", duration_text(p->idle_stop_ms, "infinity", b, sizeof b));
        if (p->require_types == POLICY_TYPES_DEFAULT)
                fputs("# RequireTypes= not set: gadgetd's, from gadgetd.conf\n", f);
        else
                fprintf(f, "RequireTypes=%s\n", p->require_types == POLICY_TYPES_REQUIRED ? "yes" : "no");
        if (p->ui)
                fprintf(f, "UI=%s\n", p->ui);
        fprintf(f, "Gatekeeper=%s\n", p->gatekeeper ? "yes" : "no");
        words(f, "AdminMethods", p->admin_methods, p->n_admin_methods);
        if (p->admin_ui)
                fprintf(f, "AdminUI=%s\n", p->admin_ui);
        words(f, "Approve", p->approve, p->n_approve);
        fprintf(f, "ApproveTimeout=%s\n", duration_text(p->approve_timeout_ms, NULL, b, sizeof b));
        words(f, "Nodes", p->nodes, p->n_nodes);
        for (size_t i = 0; i < p->n_schedules; i++)
                fprintf(f, "Schedule=%s %s\n", p->schedules[i].method, p->schedules[i].calendar);
        fprintf(f, "BindingCallsMax=%llu\n", (unsigned long long)p->binding_calls_max);
        fprintf(f, "FrameValuesMax=%llu\n", (unsigned long long)p->frame_values_max);
        fprintf(f, "FrameValuesPerSecond=%llu\n", (unsigned long long)p->frame_values_per_s);
        fprintf(f, "FrameBytesPerSecond=%s\n", size_text(p->frame_bytes_per_s, b, sizeof b));
        fprintf(f, "TurnFramesMax=%llu\n", (unsigned long long)p->turn_frames_max);
        fprintf(f, "TurnBytesMax=%s\n", size_text(p->turn_bytes_max, b, sizeof b));
        fprintf(f, "CallsQueuedMax=%llu\n", (unsigned long long)p->calls_queued_max);
}

/* KEY=VALUE from the field of obj that k names, as its kind says: a size or
 * time as an operator writes it, infinity where k allows it; a text not set
 * and an empty list print nothing. */
static void key_line(FILE *f, const void *obj, const struct policy_key *k)
{
        const char *field = (const char *)obj + k->off;
        const char *text = NULL;
        char b[32];

        switch (k->kind) {
        case KIND_BOOL:
                text = *(const bool *)field ? "yes" : "no";
                break;
        case KIND_SIZE:
                text = size_text(*(const uint64_t *)field, b, sizeof b);
                break;
        case KIND_COUNT:
                text = count_text(*(const uint64_t *)field, b, sizeof b);
                break;
        case KIND_DURATION:
                text = duration_text(*(const uint64_t *)field, k->flags & KEY_INFINITY ? "infinity" : NULL, b,
                                     sizeof b);
                break;
        case KIND_TEXT:
                text = *(char *const *)field;
                break;
        case KIND_WORDS:
                (k->flags & KEY_REPEAT ? lines : words)(f, k->name, *(char **const *)field,
                                                        *(const size_t *)((const char *)obj + k->max));
                return;
        case KIND_CUSTOM: /* no field to print from: not a binding key */
                return;
        }
        if (text)
                fprintf(f, "%s=%s\n", k->name, text);
}

/* Type=, then each key of its type in the order of binding.c's table. */
static void binding_keys(FILE *f, const struct policy_binding *bd)
{
        size_t n;
        const struct policy_key *t = policy_binding_key_table(&n);

        fprintf(f, "\n[Binding %s]\nType=%s\n", bd->name, policy_binding_type_name(bd->type));
        for (size_t i = 0; i < n; i++)
                if (t[i].types & (1u << bd->type))
                        key_line(f, bd, &t[i]);
}

int policy_format(const struct policy *p, char **out)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return -errno;
        gadget_keys(f, p);
        for (size_t i = 0; i < p->n_bindings; i++)
                binding_keys(f, &p->bindings[i]);
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *out = text;
        return 0;
}
