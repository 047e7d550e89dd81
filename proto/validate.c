/* validate: checks of worker messages, one function per message kind;
 * then control requests and sandbox reports. */
#include "validate.h"
#include "traceparent.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "types.h"
#include "value.h"
#include "control.pb-c.h"
#include "sandbox.pb-c.h"
#include "sandbox_abi.h"

#define REFUSE(...) do { snprintf(why, len, __VA_ARGS__); return -EPROTO; } while (0)

static int check_value(const Gadget__Value *v, const char *what, char *why, size_t len)
{
        char reason[200];
        if (v && value_check(v, VALUE_MAX_DEPTH, reason, sizeof reason) < 0)
                REFUSE("%s: %s", what, reason);
        return 0;
}

/* Signature i of a version 2 hello: "" (untyped), or one that parses and
 * names its method; *types counts the types of all so far. */
static int check_signature(const Gadget__Hello *h, size_t i, size_t *types, char *why, size_t len)
{
        const char *text = h->signatures[i];
        struct type_sig *sig;
        char err[160];
        if (!text[0])
                return 0;
        if (strlen(text) > TYPES_MAX_TEXT)
                REFUSE("hello: signature of %s: longer than %d bytes", h->methods[i], TYPES_MAX_TEXT);
        int e = types_sig_parse(text, &sig, err, sizeof err);
        if (e == -ENOMEM)
                return e;
        if (e < 0)
                REFUSE("hello: signature of %s: %s", h->methods[i], err);
        bool same = strcmp(types_sig_name(sig), h->methods[i]) == 0;
        *types += types_sig_nodes(sig);
        types_sig_free(sig);
        if (!same)
                REFUSE("hello: signature %zu is not of method %s", i, h->methods[i]);
        if (*types > VALIDATE_MAX_SIGNATURE_TYPES)
                REFUSE("hello: the signatures hold more than %d types together", VALIDATE_MAX_SIGNATURE_TYPES);
        return 0;
}

static int check_hello(const Gadget__Hello *h, const char *name, char *why, size_t len)
{
        if (h->protocol_version < GADGET_PROTOCOL_MIN || h->protocol_version > GADGET_PROTOCOL_VERSION)
                REFUSE("hello: protocol version %u, gadgetd speaks %u to %u", h->protocol_version,
                       GADGET_PROTOCOL_MIN, GADGET_PROTOCOL_VERSION);
        if (h->n_signatures != (h->protocol_version >= 2 ? h->n_methods : 0))
                REFUSE("hello: %zu signatures for %zu methods (version %u)", h->n_signatures, h->n_methods,
                       h->protocol_version);
        if (strcmp(h->name, name) != 0)
                REFUSE("hello: the gadget calls itself by another name than its policy's");
        if (h->n_methods > VALIDATE_MAX_METHODS)
                REFUSE("hello: %zu methods, at most %d", h->n_methods, VALIDATE_MAX_METHODS);
        size_t types = 0;
        for (size_t i = 0; i < h->n_methods; i++) {
                if (!gadget_method_name_ok(h->methods[i]))
                        REFUSE("hello: method %zu has an invalid name", i);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(h->methods[i], h->methods[j]) == 0)
                                REFUSE("hello: method %zu repeats an earlier name", i);
                int e = i < h->n_signatures ? check_signature(h, i, &types, why, len) : 0;
                if (e < 0)
                        return e;
        }
        return 0;
}

static int check_result(const Gadget__CallResult *r, char *why, size_t len)
{
        switch (r->outcome_case) {
        case GADGET__CALL_RESULT__OUTCOME_VALUE:
                if (!r->value)
                        REFUSE("result: no value");
                return check_value(r->value, "result", why, len);
        case GADGET__CALL_RESULT__OUTCOME_ERROR:
                if (!r->error || strlen(r->error->message) > VALIDATE_MAX_ERROR ||
                    !value_utf8_valid(r->error->message, strlen(r->error->message)))
                        REFUSE("result: invalid error message");
                return 0;
        default:
                REFUSE("result: neither value nor error");
        }
}

static int check_binding_call(const Gadget__BindingCall *b, char *why, size_t len)
{
        if (!gadget_identifier_ok(b->binding))
                REFUSE("binding call: invalid binding name");
        if (!gadget_method_name_ok(b->op))
                REFUSE("binding call: invalid operation name");
        return check_value(b->args, "binding call arguments", why, len);
}

static int check_log(const Gadget__Log *l, char *why, size_t len)
{
        if (l->level > 7)
                REFUSE("log: level %u out of range", l->level);
        size_t n = strlen(l->text);
        if (n > VALIDATE_MAX_LOG || !value_utf8_valid(l->text, n))
                REFUSE("log: text too long or not UTF-8");
        return 0;
}

int validate_worker_msg(const Gadget__WorkerMsg *m, const char *name, char *why, size_t len)
{
        switch (m->msg_case) {
        case GADGET__WORKER_MSG__MSG_HELLO:
                return check_hello(m->hello, name, why, len);
        case GADGET__WORKER_MSG__MSG_RESULT:
                return check_result(m->result, why, len);
        case GADGET__WORKER_MSG__MSG_BINDING_CALL:
                return check_binding_call(m->binding_call, why, len);
        case GADGET__WORKER_MSG__MSG_LOG:
                return check_log(m->log, why, len);
        default:
                REFUSE("unknown message kind %d", (int)m->msg_case);
        }
}

static bool utf8(const char *s)
{
        return value_utf8_valid(s, strlen(s));
}

/* A forwarded call's record of its origin: names, bounded. Whether it may
 * carry one at all is the receiver's to say (only the link between nodes). */
/* A version's name as bundle_version_ok (bundle.c) takes it, which the
 * handler checks again: this library links no bundle code. */
static bool version_name_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      strchr("._+-", *s)))
                        return false;
        return true;
}

static int check_call_origin(const Control__Call *c, char *why, size_t len)
{
        if (c->n_chain > CONTROL_CHAIN_MAX || c->depth > CONTROL_CHAIN_MAX) {
                snprintf(why, len, "call chain longer than %d", CONTROL_CHAIN_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < c->n_chain; i++)
                if (!gadget_name_ok(c->chain[i])) {
                        snprintf(why, len, "invalid gadget name in the call chain");
                        return -EINVAL;
                }
        if (strlen(c->caller) > 200 || strlen(c->via) > 200 || !utf8(c->caller) || !utf8(c->via)) {
                snprintf(why, len, "invalid caller or via");
                return -EINVAL;
        }
        return 0;
}

/* gadgetctl exec's command. Why: its words go into the sandbox helper's
 * setup and onto its exec; bounded, and text (UTF-8; no word holds a NUL,
 * which protobuf-c's strings cannot anyway). */
static int check_exec_argv(const Control__Exec *x, char *why, size_t len)
{
        if (x->n_argv == 0 || x->n_argv > CONTROL_EXEC_ARGS_MAX) {
                snprintf(why, len, "exec needs a command of 1 to %d words", CONTROL_EXEC_ARGS_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < x->n_argv; i++)
                if (strlen(x->argv[i]) > CONTROL_EXEC_ARG_MAX || !utf8(x->argv[i]) || (i == 0 && !x->argv[0][0])) {
                        snprintf(why, len, "exec: word %zu of the command is empty, longer than %d bytes or not "
                                 "UTF-8", i + 1, CONTROL_EXEC_ARG_MAX);
                        return -EINVAL;
                }
        return 0;
}

int validate_control_request(const Control__Request *q, char *why, size_t len)
{
        const char *name = NULL;
        bool no_block = false;  /* of a Name other than restart's */
        switch (q->req_case) {
        case CONTROL__REQUEST__REQ_LOAD:
                if (q->load->path[0] != '/' || strlen(q->load->path) > 4096 || !utf8(q->load->path)) {
                        snprintf(why, len, "load needs an absolute path");
                        return -EINVAL;
                }
                /* Why: gadgetd keeps the paths it loads one a line
                 * (system/loads.c); no path splits or forges a line. */
                for (const char *c = q->load->path; *c; c++)
                        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                                snprintf(why, len, "load's path holds a control character");
                                return -EINVAL;
                        }
                return 0;
        case CONTROL__REQUEST__REQ_STOP: name = q->stop->name; no_block = q->stop->no_block; break;
        case CONTROL__REQUEST__REQ_RESTART: name = q->restart->name; break;
        case CONTROL__REQUEST__REQ_WAKE: name = q->wake->name; no_block = q->wake->no_block; break;
        case CONTROL__REQUEST__REQ_STATUS: name = q->status->name; no_block = q->status->no_block; break;
        case CONTROL__REQUEST__REQ_START: name = q->start->name; break;
        case CONTROL__REQUEST__REQ_UNLOAD: name = q->unload->name; no_block = q->unload->no_block; break;
        case CONTROL__REQUEST__REQ_CAT: name = q->cat->name; no_block = q->cat->no_block; break;
        case CONTROL__REQUEST__REQ_DEBUG: name = q->debug->name; no_block = q->debug->no_block; break;
        case CONTROL__REQUEST__REQ_CORES: name = q->cores->name; no_block = q->cores->no_block; break;
        case CONTROL__REQUEST__REQ_WORKSHOP: name = q->workshop->name; no_block = q->workshop->no_block; break;
        case CONTROL__REQUEST__REQ_VERSIONS: name = q->versions->name; no_block = q->versions->no_block; break;
        case CONTROL__REQUEST__REQ_ROLLBACK: name = q->rollback->name; no_block = q->rollback->no_block; break;
        case CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE:
                name = q->rollback_with_state->name;
                no_block = q->rollback_with_state->no_block;
                break;
        case CONTROL__REQUEST__REQ_DEPLOY:
                /* Why: the version names a directory of the store
                 * (bundle_version_ok's rule): no "/", no "..", no dot first. */
                if (!version_name_ok(q->deploy->version) || q->deploy->percent > 100 ||
                    q->deploy->max_error_percent > 100 || q->deploy->min_calls > 1000000000) {
                        snprintf(why, len, "deploy needs a version (1 to 64 of A-Z a-z 0-9 . _ + -, not starting "
                                 "with . or -), percents of at most 100 and at most 10^9 calls");
                        return -EINVAL;
                }
                name = q->deploy->name;
                break;
        case CONTROL__REQUEST__REQ_INSTALL:
                return 0; /* its fd is the input: read by install.c within BUNDLE_SIZE_MAX, parsed by bundle.c */
        case CONTROL__REQUEST__REQ_FORGET_NODE:
                if (!gadget_name_ok(q->forget_node->name) || q->forget_node->no_block) {
                        snprintf(why, len, q->forget_node->no_block ? "no_block goes with restart, start and load "
                                 "only" : "invalid node name");
                        return -EINVAL;
                }
                return 0;
        case CONTROL__REQUEST__REQ_KILL:
                name = q->kill->name;
                /* Why: PID 1 of the sandbox takes the signals it does not
                 * pass on (STOP would freeze it, CHLD confuse its reaping). */
                if (!gadget_signal_ok(q->kill->signal)) {
                        snprintf(why, len, "signal %d is not one gadgetd sends a gadget (HUP, INT, QUIT, TERM, "
                                 "USR1, USR2, ALRM, VTALRM, PROF, IO, PWR, XCPU, XFSZ, STKFLT, RTMIN+N, KILL)",
                                 (int)q->kill->signal);
                        return -EINVAL;
                }
                break;
        case CONTROL__REQUEST__REQ_LOGS:
                /* Every gadget: no name; one: its name. No time before the
                 * epoch (a time of the year 9999 at most, as an alarm's). */
                if (q->logs->since_ms < 0 || q->logs->since_ms > 253402300799999LL) {
                        snprintf(why, len, "logs: since is out of range");
                        return -EINVAL;
                }
                if (q->logs->all) {
                        if (q->logs->name[0]) {
                                snprintf(why, len, "logs of every gadget name none");
                                return -EINVAL;
                        }
                        return 0;
                }
                name = q->logs->name;
                break;
        case CONTROL__REQUEST__REQ_AUDIT:
                if (q->audit->since_ms || q->audit->all) {
                        snprintf(why, len, "since and all go with logs only");
                        return -EINVAL;
                }
                name = q->audit->name;
                break;
        case CONTROL__REQUEST__REQ_CALL:
                name = q->call->name;
                if (!gadget_method_name_ok(q->call->method)) {
                        snprintf(why, len, "invalid method name");
                        return -EINVAL;
                }
                if (q->call->args && value_check(q->call->args, VALUE_MAX_DEPTH, why, len) < 0)
                        return -EINVAL;
                if (check_call_origin(q->call, why, len) < 0)
                        return -EINVAL;
                break;
        case CONTROL__REQUEST__REQ_MOVE:
                name = q->move->name;
                if (!gadget_name_ok(q->move->node)) {
                        snprintf(why, len, "invalid node name");
                        return -EINVAL;
                }
                break;
        case CONTROL__REQUEST__REQ_NODES:
        case CONTROL__REQUEST__REQ_LIST:
        case CONTROL__REQUEST__REQ_TOP:
        case CONTROL__REQUEST__REQ_RELOAD:
        case CONTROL__REQUEST__REQ_APPROVALS:
        case CONTROL__REQUEST__REQ_DAEMON_REEXEC:
                return 0;
        case CONTROL__REQUEST__REQ_TRACE: {
                uint8_t id[TRACE_ID_LEN];
                const char *t = q->trace->trace_id;
                if (strlen(t) != 2 * TRACE_ID_LEN || trace_unhex(t, TRACE_ID_LEN, id) < 0 ||
                    trace_id_zero(id, TRACE_ID_LEN)) {
                        snprintf(why, len, "a trace id is 32 lower-case hex digits, not all zero");
                        return -EINVAL;
                }
                return 0;
        }
        case CONTROL__REQUEST__REQ_FRAMES:
                name = q->frames->name;
                break;
        case CONTROL__REQUEST__REQ_BACKUP: name = q->backup->name; break;
        case CONTROL__REQUEST__REQ_RESTORE: name = q->restore->name; break;
        case CONTROL__REQUEST__REQ_EXEC:
                name = q->exec->name;
                if (check_exec_argv(q->exec, why, len) < 0)
                        return -EINVAL;
                break;
        case CONTROL__REQUEST__REQ_DECIDE:
                if (q->decide->always && !q->decide->approve) {
                        snprintf(why, len, "\"always\" goes with approve only");
                        return -EINVAL;
                }
                return 0;
        default:
                snprintf(why, len, "unknown request kind %d", (int)q->req_case);
                return -EINVAL;
        }
        if (!gadget_name_ok(name)) {
                snprintf(why, len, "invalid gadget name");
                return -EINVAL;
        }
        if (no_block) {
                snprintf(why, len, "no_block goes with restart, start and load only");
                return -EINVAL;
        }
        return 0;
}

/* A text of a failure report: what the user will read, so bounded and
 * UTF-8 (it goes on to logs, gadgetctl and the gateway's JSON). */
static bool report_text_ok(const char *s, bool empty_ok)
{
        size_t n = strlen(s);
        return (n > 0 || empty_ok) && n <= SANDBOX_REPORT_TEXT_MAX && value_utf8_valid(s, n);
}

/* Whether s is a status waitpid gives for a process that ended: an exit
 * code in bits 8-15, or a signal number (with the core-dump bit 0x80) in
 * bits 0-7. gadgetd turns it into gadgetd run's exit status and the cause
 * it shows, so nothing else is taken. */
static bool wait_status_ok(uint32_t s)
{
        if ((s & 0x7f) == 0)
                return s <= 0xff00;
        return s <= 0xff && (s & 0x7f) < NSIG;
}

/* No control byte (a path shown on a terminal and written into a policy). */
static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

/* A Denials report: bounded in calls and path length, each call an
 * (nr, errno) pair once, a count of at least 1, times in order, a path
 * of printable UTF-8. Only counts and times are the sandbox's word: the
 * call's name comes from gadgetd's own table (filter_call_name). */
static bool denials_ok(const Sandbox__Denials *d, char *why, size_t len)
{
        if (!d || d->n_calls == 0 || d->n_calls > SANDBOX_DENIALS_MAX) {
                snprintf(why, len, "denials: 1 to %u calls", SANDBOX_DENIALS_MAX);
                return false;
        }
        for (size_t i = 0; i < d->n_calls; i++) {
                const Sandbox__Denial *c = d->calls[i];
                size_t n = strlen(c->path);
                if (c->nr >= 1024 || c->error > 4095 || c->count == 0 || c->first_ms > c->last_ms ||
                    n > SANDBOX_DENIAL_PATH_MAX || !printable(c->path) || !value_utf8_valid(c->path, n)) {
                        snprintf(why, len, "denials: call %zu out of bounds (nr < 1024, errno <= 4095, count >= 1, "
                                           "first <= last, a printable path of at most %u bytes)", i,
                                 SANDBOX_DENIAL_PATH_MAX);
                        return false;
                }
                for (size_t j = 0; j < i; j++)
                        if (d->calls[j]->nr == c->nr && d->calls[j]->error == c->error) {
                                snprintf(why, len, "denials: call %u with errno %u twice", c->nr, c->error);
                                return false;
                        }
        }
        return true;
}

/* A frame of a crash's backtrace: printable ASCII only (the sandbox
 * writes '?' for anything else), at most SANDBOX_CRASH_FRAME_MAX bytes:
 * it goes into the audit, the journal and gadgetctl's output. */
static bool frame_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > SANDBOX_CRASH_FRAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

static int check_crash(const Sandbox__Crash *c, char *why, size_t len)
{
        static const int crash_signals[] = { SANDBOX_CRASH_SIGNALS };
        bool known = false;
        for (size_t i = 0; i < sizeof crash_signals / sizeof *crash_signals; i++)
                known |= c->signal == (uint32_t)crash_signals[i];
        if (!known)
                REFUSE("crash: signal %u is not one a crash is made of", c->signal);
        if (c->thread == 0 || c->thread > (1u << 22))
                REFUSE("crash: thread %u", c->thread);
        if (c->core_size > SANDBOX_CORE_MAX)
                REFUSE("crash: a core of %llu bytes", (unsigned long long)c->core_size);
        if (c->n_frames > SANDBOX_CRASH_FRAMES_MAX)
                REFUSE("crash: %zu frames, at most %u", c->n_frames, SANDBOX_CRASH_FRAMES_MAX);
        for (size_t i = 0; i < c->n_frames; i++)
                if (!frame_ok(c->frames[i]))
                        REFUSE("crash: frame %zu empty, longer than %u bytes or not printable ASCII", i,
                               SANDBOX_CRASH_FRAME_MAX);
        return 0;
}

/* Why this is safe: the report comes from the sandbox's PID 1, which runs
 * inside the sandbox; nothing of it is used before these checks. */
int validate_sandbox_report(const Sandbox__Report *r, char *why, size_t len)
{
        switch (r->kind_case) {
        case SANDBOX__REPORT__KIND_FAILED:
                if (!r->failed || !report_text_ok(r->failed->step, false) ||
                    !report_text_ok(r->failed->reason, true))
                        REFUSE("failure: step or reason empty, longer than %u bytes or not UTF-8",
                               SANDBOX_REPORT_TEXT_MAX);
                return 0;
        case SANDBOX__REPORT__KIND_WARM:
        case SANDBOX__REPORT__KIND_READY:
                return 0;
        case SANDBOX__REPORT__KIND_WAIT_STATUS:
                if (!wait_status_ok(r->wait_status))
                        REFUSE("wait status %#x is not one of a process that ended", r->wait_status);
                return 0;
        case SANDBOX__REPORT__KIND_DENIALS:
                return denials_ok(r->denials, why, len) ? 0 : -EPROTO;
        case SANDBOX__REPORT__KIND_LEARNED:
                if (!r->learned || r->learned->path[0] != '/' || !report_text_ok(r->learned->path, false) ||
                    !report_text_ok(r->learned->interpreter_of, true) || !printable(r->learned->path) ||
                    !printable(r->learned->interpreter_of) || r->learned->nr >= 1024)
                        REFUSE("learned: a path that is not absolute, printable UTF-8 of at most %u bytes",
                               SANDBOX_REPORT_TEXT_MAX);
                return 0;
        case SANDBOX__REPORT__KIND_CRASH:
                if (!r->crash)
                        REFUSE("crash: empty");
                return check_crash(r->crash, why, len);
        default:
                REFUSE("unknown report kind %d", (int)r->kind_case);
        }
}
