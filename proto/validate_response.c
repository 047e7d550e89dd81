/* validate_response: the one validator of a control Response, wherever one
 * is read — gadgetctl's answers from gadgetd, and a node's answers to
 * another over the link (cluster/nodelink.c): whatever is read afterwards
 * is present and valid UTF-8, and a value is within value.h's limits. */
#include "validate.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "traceparent.h"
#include "value.h"
#include "control.pb-c.h"

#define REFUSE(...) do { snprintf(why, whylen, __VA_ARGS__); return -EPROTO; } while (0)

/* Present and valid UTF-8. */
static bool str_ok(const char *s)
{
        return s && value_utf8_valid(s, strlen(s));
}

/* Every string of v as str_ok. */
static bool strv_ok(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!str_ok(v[i]))
                        return false;
        return true;
}

/* One GadgetInfo (of list or status). */
static int check_info(const Control__GadgetInfo *g, char *why, size_t whylen)
{
        if (!g)
                REFUSE("gadget without information");
        if (!str_ok(g->name) || !str_ok(g->state) || !str_ok(g->cause))
                REFUSE("gadget information with invalid text");
        /* Why a node name is checked as strictly as gadgetd's Node=: it is
         * printed in a table column and handed back in `move`. */
        if (!g->node || (g->node[0] && !gadget_name_ok(g->node)))
                REFUSE("gadget information with an invalid node name");
        if (g->epoch < 0)
                REFUSE("gadget information with a negative lease epoch");
        if (g->program_pid < 0)
                REFUSE("gadget information with a negative program pid");
        if (!g->start || (g->start[0] && strcmp(g->start, "always") != 0 && strcmp(g->start, "on-demand") != 0))
                REFUSE("gadget information with an unknown Start= mode");
        /* The largest time an alarm may be set to (year 9999). */
        if (g->next_alarm_ms < 0 || g->next_alarm_ms > 253402300799999LL)
                REFUSE("gadget information with a next alarm time out of range");
        return 0;
}

/* A LogLines' entries: text and names printable, numbers in range (the
 * stream's name one gadgetctl knows, else it is printed as it came). */
static int check_entries(const Control__LogLines *l, char *why, size_t whylen)
{
        for (size_t i = 0; i < l->n_entries; i++) {
                const Control__LogEntry *e = l->entries[i];
                if (!e || !str_ok(e->text) || !e->stream || !e->gadget)
                        REFUSE("log entry with invalid text");
                if (!gadget_name_ok(e->gadget) || strlen(e->stream) > 16 || !gadget_name_ok(e->stream))
                        REFUSE("log entry with an invalid gadget or stream name");
                if (e->priority > 7 || e->time_ms < 0)
                        REFUSE("log entry with priority %u, time %lld", e->priority, (long long)e->time_ms);
        }
        return 0;
}

/* A GadgetList: every entry. */
static int check_list(const Control__GadgetList *l, char *why, size_t whylen)
{
        for (size_t i = 0; i < l->n_gadgets; i++) {
                int e = check_info(l->gadgets[i], why, whylen);
                if (e < 0)
                        return e;
        }
        return 0;
}

/* A GadgetStatus: its info and every string it carries. */
static int check_status(const Control__GadgetStatus *s, char *why, size_t whylen)
{
        int e = check_info(s->info, why, whylen);

        if (e < 0)
                return e;
        if (!str_ok(s->policy_path) || !str_ok(s->limits_mode) || !str_ok(s->audit_error) || !str_ok(s->audit_unsent_error) || !strv_ok(s->limits, s->n_limits) ||
            !strv_ok(s->methods, s->n_methods) || !strv_ok(s->log_tail, s->n_log_tail) ||
            !strv_ok(s->signatures, s->n_signatures) || s->n_signatures > s->n_methods ||
            !strv_ok(s->kept_errors, s->n_kept_errors) || !str_ok(s->crash_cause) || !str_ok(s->version) ||
            !str_ok(s->previous_version) || !str_ok(s->rollout_version) || !str_ok(s->rollout_back) ||
            s->rollout_percent > 100 ||
            !strv_ok(s->crash_backtrace, s->n_crash_backtrace))
                REFUSE("status with invalid text");
        for (size_t i = 0; i < s->n_bindings; i++)
                if (!s->bindings[i] || !str_ok(s->bindings[i]->name) || !str_ok(s->bindings[i]->type) ||
                    !str_ok(s->bindings[i]->credential) || !strv_ok(s->bindings[i]->ops, s->bindings[i]->n_ops))
                        REFUSE("status with an invalid binding");
        for (size_t i = 0; i < s->n_denials; i++) {
                const Control__Denial *d = s->denials[i];
                if (!d || !str_ok(d->call) || !str_ok(d->answer) || !str_ok(d->path) || d->first_ms < 0 ||
                    d->last_ms < d->first_ms || strlen(d->call) > 64 || strlen(d->answer) > 32 || strlen(d->path) > 256)
                        REFUSE("status with an invalid denial");
        }
        return 0;
}

/* A ReloadReport: every name and error line. */
static int check_reload(const Control__ReloadReport *r, char *why, size_t whylen)
{
        if (!strv_ok(r->loaded, r->n_loaded) || !strv_ok(r->stopped, r->n_stopped) ||
            !strv_ok(r->restarted, r->n_restarted) || !strv_ok(r->unchanged, r->n_unchanged) ||
            !strv_ok(r->errors, r->n_errors))
                REFUSE("reload report with invalid text");
        for (size_t i = 0; i < r->n_kept; i++) {
                const Control__ReloadKept *k = r->kept[i];
                /* Why a gadget's name is checked: it is printed as one. */
                if (!k || !k->name || !gadget_name_ok(k->name))
                        REFUSE("reload report with a kept gadget of an invalid name");
                if (!str_ok(k->path) || !strv_ok(k->errors, k->n_errors))
                        REFUSE("reload report with invalid text of kept gadget %s", k->name);
        }
        for (size_t i = 0; i < r->n_failed; i++) {
                const Control__ReloadFailed *f = r->failed[i];
                if (!f || !f->name || !gadget_name_ok(f->name))
                        REFUSE("reload report with a failed gadget of an invalid name");
                if (!str_ok(f->cause))
                        REFUSE("reload report with an invalid cause of failed gadget %s", f->name);
        }
        for (size_t i = 0; i < r->n_changed; i++) {
                const Control__ReloadChanged *c = r->changed[i];
                if (!c || !c->name || !gadget_name_ok(c->name))
                        REFUSE("reload report with a changed gadget of an invalid name");
                if (!strv_ok(c->keys, c->n_keys))
                        REFUSE("reload report with invalid keys of changed gadget %s", c->name);
        }
        return 0;
}

static int check_approvals(const Control__ApprovalList *l, char *why, size_t whylen)
{
        for (size_t i = 0; i < l->n_approvals; i++) {
                const Control__Approval *a = l->approvals[i];
                if (!a || !str_ok(a->caller) || !str_ok(a->via) || !str_ok(a->target) || !str_ok(a->method) ||
                    !str_ok(a->args))
                        REFUSE("approval with invalid text");
        }
        return 0;
}

/* A NodeList: at most VALIDATE_NODES_MAX nodes, each named as Node= allows,
 * its peer address text of bounded length, at most one of them self. */
static int check_nodes(const Control__NodeList *l, char *why, size_t whylen)
{
        size_t selves = 0;

        if (l->n_nodes > VALIDATE_NODES_MAX)
                REFUSE("list of %zu nodes, more than %d", l->n_nodes, VALIDATE_NODES_MAX);
        for (size_t i = 0; i < l->n_nodes; i++) {
                const Control__NodeInfo *n = l->nodes[i];
                if (!n || !n->name || !gadget_name_ok(n->name))
                        REFUSE("node with an invalid name");
                if (!str_ok(n->peer) || strlen(n->peer) > VALIDATE_PEER_MAX)
                        REFUSE("node %s with an invalid peer address", n->name);
                selves += n->self;
        }
        if (selves > 1)
                REFUSE("list of nodes with %zu marked as the one answering", selves);
        if (!str_ok(l->store_warning) || strlen(l->store_warning) > VALIDATE_PEER_MAX * 4)
                REFUSE("list of nodes with an invalid store warning");
        return 0;
}

/* n hex digits exactly ("" too if empty_ok), none but lower-case hex. */
static bool hex_ok(const char *s, size_t n, bool empty_ok)
{
        uint8_t b[TRACE_ID_LEN];
        if (!s)
                return false;
        if (!s[0])
                return empty_ok;
        return strlen(s) == n && n / 2 <= sizeof b && trace_unhex(s, n / 2, b) == 0;
}

/* A short printable text: no control character (it is printed in a tree). */
static bool label_ok(const char *s, size_t max)
{
        if (!str_ok(s) || strlen(s) > max)
                return false;
        for (const char *c = s; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        return false;
        return true;
}

/* A TraceTree: bounded, every span's ids hex, its names valid. Why: a
 * node's answer is printed by gadgetctl and merged by another node. */
static int check_trace(const Control__TraceTree *t, char *why, size_t whylen)
{
        if (!hex_ok(t->trace_id, 2 * TRACE_ID_LEN, false))
                REFUSE("trace with an invalid id");
        if (t->n_spans > CONTROL_TRACE_SPANS_MAX || t->n_unreached > CONTROL_TRACE_NODES_MAX)
                REFUSE("trace of %zu spans and %zu unreached nodes, more than %d and %d", t->n_spans,
                       t->n_unreached, CONTROL_TRACE_SPANS_MAX, CONTROL_TRACE_NODES_MAX);
        for (size_t i = 0; i < t->n_unreached; i++)
                if (!t->unreached[i] || !gadget_name_ok(t->unreached[i]))
                        REFUSE("trace naming an invalid node");
        for (size_t i = 0; i < t->n_spans; i++) {
                const Control__Span *s = t->spans[i];
                if (!s || !hex_ok(s->span_id, 2 * TRACE_SPAN_ID_LEN, false) ||
                    !hex_ok(s->parent_id, 2 * TRACE_SPAN_ID_LEN, true))
                        REFUSE("span %zu with an invalid id", i);
                if (!s->gadget || !gadget_name_ok(s->gadget) || !label_ok(s->name, 95) || !label_ok(s->outcome, 15))
                        REFUSE("span %zu with an invalid gadget, name or outcome", i);
                if (!s->kind || (strcmp(s->kind, "call") != 0 && strcmp(s->kind, "binding") != 0))
                        REFUSE("span %zu of an unknown kind", i);
                if (!s->node || !s->peer || (s->node[0] && !gadget_name_ok(s->node)) ||
                    (s->peer[0] && !gadget_name_ok(s->peer)))
                        REFUSE("span %zu with an invalid node name", i);
        }
        return 0;
}

/* A FrameBatch: at most CONTROL_FRAMES_QUEUE frames, each of a known
 * kind, its texts UTF-8 and bounded (a preview cut by gadgetd, with room
 * for the mark of the cut). */
static int check_frames(const Control__FrameBatch *b, char *why, size_t whylen)
{
        static const char *const kinds[] = { "hello", "welcome", "call", "result", "binding_call",
                                             "binding_result", "log", "shutdown" };
        if (b->n_frames > CONTROL_FRAMES_QUEUE || !str_ok(b->note))
                REFUSE("frames: more than %d, or an invalid note", CONTROL_FRAMES_QUEUE);
        for (size_t i = 0; i < b->n_frames; i++) {
                const Control__Frame *f = b->frames[i];
                bool known = false;
                for (size_t k = 0; f && f->kind && k < sizeof kinds / sizeof *kinds; k++)
                        known |= strcmp(f->kind, kinds[k]) == 0;
                if (!known)
                        REFUSE("frame %zu of an unknown kind", i);
                if (!label_ok(f->name, 2 * GADGET_NAME_MAX + 1) || !label_ok(f->outcome, 15) ||
                    !str_ok(f->preview) || strlen(f->preview) > CONTROL_FRAME_PREVIEW + 8)
                        REFUSE("frame %zu with an invalid name, outcome or preview", i);
        }
        return 0;
}

/* A TopReport: each gadget named as a gadget is, its state a short text. */
static int check_top(const Control__TopReport *t, char *why, size_t whylen)
{
        for (size_t i = 0; i < t->n_gadgets; i++) {
                const Control__TopGadget *g = t->gadgets[i];
                if (!g || !g->name || !gadget_name_ok(g->name))
                        REFUSE("top report with a gadget of an invalid name");
                if (!str_ok(g->state) || strlen(g->state) > 16)
                        REFUSE("top report with an invalid state of gadget %s", g->name);
        }
        return 0;
}

int validate_control_response(const Control__Response *r, char *why, size_t whylen)
{
        char reason[160];

        switch (r->resp_case) {
        case CONTROL__RESPONSE__RESP_ERROR:
                if (!r->error || !str_ok(r->error->message))
                        REFUSE("invalid error");
                return 0;
        case CONTROL__RESPONSE__RESP_DONE:
                if (!r->done || !str_ok(r->done->message))
                        REFUSE("invalid message");
                return 0;
        case CONTROL__RESPONSE__RESP_LIST:
                return r->list ? check_list(r->list, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_STATUS:
                return r->status ? check_status(r->status, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_RESULT:
                if (!r->result)
                        REFUSE("result without value");
                if (value_check(r->result, VALUE_MAX_DEPTH, reason, sizeof(reason)) < 0)
                        REFUSE("result: %s", reason);
                return 0;
        case CONTROL__RESPONSE__RESP_LOGS:
                if (!r->logs || !strv_ok(r->logs->lines, r->logs->n_lines) || !str_ok(r->logs->note))
                        REFUSE("log lines with invalid text");
                return check_entries(r->logs, why, whylen);
        case CONTROL__RESPONSE__RESP_RELOAD:
                return r->reload ? check_reload(r->reload, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_APPROVALS:
                return r->approvals ? check_approvals(r->approvals, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_GOODBYE:
                /* One per session, of no request: its id says so. */
                if (!r->goodbye || r->id != 0)
                        REFUSE("a goodbye answers no request (id 0)");
                return 0;
        case CONTROL__RESPONSE__RESP_NODES:
                return r->nodes ? check_nodes(r->nodes, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_TRACE:
                return r->trace ? check_trace(r->trace, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_TOP:
                return r->top ? check_top(r->top, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_FRAMES:
                return r->frames ? check_frames(r->frames, why, whylen) : -EPROTO;
        case CONTROL__RESPONSE__RESP_CORES:
                if (!r->cores)
                        REFUSE("core list missing");
                for (size_t i = 0; i < r->cores->n_cores; i++)
                        if (!r->cores->cores[i] || !str_ok(r->cores->cores[i]->signal) ||
                            !str_ok(r->cores->cores[i]->path))
                                REFUSE("core list with invalid text");
                return 0;
        case CONTROL__RESPONSE__RESP_VERSIONS:
                if (!r->versions)
                        REFUSE("version list missing");
                for (size_t i = 0; i < r->versions->n_versions; i++)
                        if (!r->versions->versions[i] || !label_ok(r->versions->versions[i]->version, 64) ||
                            !label_ok(r->versions->versions[i]->signer, 64) ||
                            !label_ok(r->versions->versions[i]->sdk, 64))
                                REFUSE("version list with invalid text");
                return 0;
        case CONTROL__RESPONSE__RESP_EXEC:
                /* A shell's exit status: 0-255 (128+N for signal N). */
                if (!r->exec || r->exec->status < 0 || r->exec->status > 255)
                        REFUSE("exec's end with an invalid status");
                return 0;
        default:
                REFUSE("answer of an unknown kind");
        }
}

