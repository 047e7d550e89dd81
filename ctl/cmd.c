/* cmd: the gadgetctl commands that talk to gadgetd over the control socket
 * (one connection and one request per command), and the command table of
 * them all: a command is its row and its handler. */
#include "cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "check.h"
#include "client.h"
#include "contract.h"
#include "json.h"
#include "policy.h"
#include "show.h"
#include "traceparent.h"
#include "value.h"

/* Lines `logs -f` starts with unless -n says otherwise, like tail -f. */
#define FOLLOW_LINES 10

#define PERMISSION_HINT "run as root or as a member of the gadgetd group"

/* Prints why the socket could not be reached; the exit status. */
static int connect_failed(const struct ctl *ctl, int e)
{
        if (e == -ENOENT || e == -ECONNREFUSED)
                show_error(stderr, ctl->json, 0, "cannot connect to %s: is gadgetd running?",
                           ctl->socket);
        else if (e == -EACCES || e == -EPERM)
                show_error(stderr, ctl->json, 0, "permission denied on %s: " PERMISSION_HINT,
                           ctl->socket);
        else
                show_error(stderr, ctl->json, 0, "cannot connect to %s: %s", ctl->socket, strerror(-e));
        return CTL_EXIT_NOCONNECT;
}

/* Prints an error answer; the exit status it maps to. A denial answering a
 * `call` comes from the method (or the gadget's policy), not from gadgetd's
 * access check, unless it carries id 0 (the connection refused). */
static int answer_error(const struct ctl *ctl, const Control__Response *r, bool call)
{
        const Gadget__Error *err = r->error;
        const char *msg = *err->message ? err->message : gadget_error_text(err->code);

        if (err->code == GADGET_EDENIED && (!call || r->id == 0)) {
                if (*err->message)
                        show_error(stderr, ctl->json, err->code, "%s", msg);
                else
                        show_error(stderr, ctl->json, err->code,
                                   "permission denied on %s: " PERMISSION_HINT, ctl->socket);
                return CTL_EXIT_NOCONNECT;
        }
        show_error(stderr, ctl->json, err->code, "%s", msg);
        return err->code == GADGET_ENOTFOUND ? CTL_EXIT_NOTFOUND : CTL_EXIT_FAILED;
}

/* Receives the next answer. CTL_EXIT_OK with *out an answer of kind want
 * (NULL if eof_ok and gadgetd closed the connection), else prints why and
 * returns the exit status. */
static int receive(const struct ctl *ctl, struct client *c, bool call,
                   Control__Response__RespCase want, bool eof_ok, Control__Response **out)
{
        Control__Response *r = NULL;
        char why[200];
        int e = client_recv(c, &r, why, sizeof(why));

        *out = NULL;
        if (e == 0 && eof_ok)
                return CTL_EXIT_OK;
        if (e == 0) {
                show_error(stderr, ctl->json, 0, "gadgetd closed the connection without answering");
                return CTL_EXIT_FAILED;
        }
        if (e < 0) {
                show_error(stderr, ctl->json, 0, "cannot read the answer of gadgetd: %s",
                           e == -EPROTO ? why : strerror(-e));
                return CTL_EXIT_FAILED;
        }
        if (r->resp_case == CONTROL__RESPONSE__RESP_ERROR) {
                e = answer_error(ctl, r, call);
                control__response__free_unpacked(r, NULL);
                return e;
        }
        if (r->resp_case != want) {
                control__response__free_unpacked(r, NULL);
                show_error(stderr, ctl->json, 0, "unexpected answer from gadgetd");
                return CTL_EXIT_FAILED;
        }
        *out = r;
        return CTL_EXIT_OK;
}

/* Connects, sends req and receives its first answer, as receive(). */
static int exchange(const struct ctl *ctl, struct client *c, Control__Request *req,
                    Control__Response__RespCase want, Control__Response **out)
{
        int e = client_connect(c, ctl->socket);

        if (e < 0)
                return connect_failed(ctl, e);
        e = client_send(c, req);
        if (e == -EMSGSIZE) {
                show_error(stderr, ctl->json, 0, "request too large: at most %u bytes", WIRE_MAX_FRAME);
                return CTL_EXIT_USAGE;
        }
        /* gadgetd refusing a client answers and closes at once: that answer
         * is still readable when sending failed because of the close. */
        if (e < 0 && e != -EPIPE && e != -ECONNRESET) {
                show_error(stderr, ctl->json, 0, "cannot send to gadgetd: %s", strerror(-e));
                return CTL_EXIT_FAILED;
        }
        return receive(ctl, c, req->req_case == CONTROL__REQUEST__REQ_CALL, want, false, out);
}

/* After printing an answer on stdout with result e (>= 0 or -errno):
 * stdout flushed, and st, or why it could not print and CTL_EXIT_FAILED. */
static int printed(const struct ctl *ctl, int e, int st)
{
        if (e >= 0 && fflush(stdout) == EOF)
                e = -errno;
        if (e < 0) {
                show_error(stderr, ctl->json, 0, "cannot print the answer: %s", strerror(-e));
                return CTL_EXIT_FAILED;
        }
        return st;
}

/* Prints an answer on stdout (reload errors on stderr). The exit status. */
static int print_answer(const struct ctl *ctl, const Control__Response *r, bool audit)
{
        bool failed = false;
        int e = show_answer(stdout, stderr, r, ctl->json, audit, &failed);

        return printed(ctl, e, failed ? CTL_EXIT_FAILED : CTL_EXIT_OK);
}

/* Sends req on a connection of its own and receives its one answer, as
 * exchange(): *r is the answer (the caller's) when the status is CTL_EXIT_OK. */
int cmd_ask(const struct ctl *ctl, Control__Request *req, Control__Response__RespCase want,
            Control__Response **r)
{
        return cmd_ask_fds(ctl, req, NULL, 0, want, r);
}

int cmd_ask_fds(const struct ctl *ctl, Control__Request *req, const int *fds, size_t n_fds,
                Control__Response__RespCase want, Control__Response **r)
{
        struct client c = { .fd = -1, .fds = fds, .n_fds = n_fds };
        int st = exchange(ctl, &c, req, want, r);

        client_close(&c);
        return st;
}

int cmd_print_answer(const struct ctl *ctl, const Control__Response *r)
{
        return print_answer(ctl, r, false);
}

/* Sends req and prints its one answer of kind want. The exit status. */
static int request(const struct ctl *ctl, Control__Request *req, Control__Response__RespCase want)
{
        Control__Response *r = NULL;
        int st = cmd_ask(ctl, req, want, &r);

        if (st == CTL_EXIT_OK) {
                st = print_answer(ctl, r, false);
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

/* Fills req, of kind, and its message n naming gadget name (no_block:
 * for start and restart, answer once asked, not once ready). */
static void name_fill(const char *name, Control__Request__ReqCase kind, bool no_block,
                      Control__Request *req, Control__Name *n)
{
        n->name = (char *)name;
        n->no_block = no_block;
        req->req_case = kind;
        if (kind == CONTROL__REQUEST__REQ_STOP)
                req->stop = n;
        else if (kind == CONTROL__REQUEST__REQ_WAKE)
                req->wake = n;
        else if (kind == CONTROL__REQUEST__REQ_START)
                req->start = n;
        else if (kind == CONTROL__REQUEST__REQ_RESTART)
                req->restart = n;
        else if (kind == CONTROL__REQUEST__REQ_UNLOAD)
                req->unload = n;
        else if (kind == CONTROL__REQUEST__REQ_CAT)
                req->cat = n;
        else if (kind == CONTROL__REQUEST__REQ_DEBUG)
                req->debug = n;
        else if (kind == CONTROL__REQUEST__REQ_CORES)
                req->cores = n;
        else if (kind == CONTROL__REQUEST__REQ_VERSIONS)
                req->versions = n;
        else if (kind == CONTROL__REQUEST__REQ_ROLLBACK)
                req->rollback = n;
        else if (kind == CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE)
                req->rollback_with_state = n;
        else
                req->status = n;
}

/* stop, start, restart, wake, unload, cat, status: a request naming one
 * gadget, its answer of kind want printed. The exit status. */
int cmd_name_request(const struct ctl *ctl, const char *name, Control__Request__ReqCase kind,
                     Control__Response__RespCase want, bool no_block)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Name n = CONTROL__NAME__INIT;

        name_fill(name, kind, no_block, &req, &n);
        return request(ctl, &req, want);
}

/* A request whose message has no fields (list, reload, nodes). */
static int empty_request(const struct ctl *ctl, Control__Request__ReqCase kind,
                         Control__Response__RespCase want)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__List list = CONTROL__LIST__INIT;
        Control__Reload reload = CONTROL__RELOAD__INIT;
        Control__DaemonReexec reexec = CONTROL__DAEMON_REEXEC__INIT;

        req.req_case = kind;
        if (kind == CONTROL__REQUEST__REQ_LIST)
                req.list = &list;
        else if (kind == CONTROL__REQUEST__REQ_NODES)
                req.nodes = &list;
        else if (kind == CONTROL__REQUEST__REQ_DAEMON_REEXEC)
                req.daemon_reexec = &reexec;
        else
                req.reload = &reload;
        return request(ctl, &req, want);
}

int cmd_load_file(const struct ctl *ctl, const char *file, bool runtime, bool no_block)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Load load = CONTROL__LOAD__INIT;
        char *path;
        int st = check_policy(ctl, file);

        if (st != CTL_EXIT_OK)
                return st;
        /* gadgetd runs elsewhere: it gets the file by absolute path. */
        path = realpath(file, NULL);
        if (!path) {
                show_error(stderr, ctl->json, 0, "%s: %s", file, strerror(errno));
                return CTL_EXIT_FAILED;
        }
        load.path = path;
        load.runtime = runtime;
        load.no_block = no_block;
        req.req_case = CONTROL__REQUEST__REQ_LOAD;
        req.load = &load;
        st = request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
        free(path);
        return st;
}

static int cmd_load(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_load_file(ctl, a->pos[0], a->runtime, a->no_block);
}

static int cmd_stop(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_STOP, CONTROL__RESPONSE__RESP_DONE, false);
}

/* restart and start are answered once the gadget is ready (or with why
 * it did not start) unless --no-block. */
static int cmd_restart(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_RESTART, CONTROL__RESPONSE__RESP_DONE,
                            a->no_block);
}

static int cmd_wake(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_WAKE, CONTROL__RESPONSE__RESP_DONE, false);
}

static int cmd_start(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_START, CONTROL__RESPONSE__RESP_DONE,
                            a->no_block);
}

static int cmd_unload(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_UNLOAD, CONTROL__RESPONSE__RESP_DONE, false);
}

static int cmd_kill(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Kill k = CONTROL__KILL__INIT;

        k.name = a->pos[0];
        k.signal = SIGTERM;
        if (a->n_pos > 1 && (k.signal = gadget_signal_parse(a->pos[1])) < 0) {
                show_error(stderr, ctl->json, 0,
                           "\"%s\" is not a signal gadgetd sends a gadget: one of HUP, INT, QUIT, TERM, USR1, "
                           "USR2, ALRM, VTALRM, PROF, IO, PWR, XCPU, XFSZ, STKFLT, RTMIN+N, KILL (or its number)",
                           a->pos[1]);
                return CTL_EXIT_USAGE;
        }
        req.req_case = CONTROL__REQUEST__REQ_KILL;
        req.kill = &k;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
}

/* exec NAME -- COMMAND...: the command runs in the gadget's sandbox with
 * gadgetctl's own stdin, stdout and stderr; its exit status is
 * gadgetctl's. */
static int cmd_exec(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Exec x = CONTROL__EXEC__INIT;
        Control__Response *r = NULL;
        static const int stdio[] = { 0, 1, 2 };
        int first = a->n_pos > 1 && strcmp(a->pos[1], "--") == 0 ? 2 : 1;

        if (first >= a->n_pos) {
                show_error(stderr, ctl->json, 0, "exec needs a command: gadgetctl exec NAME -- COMMAND [ARG...]");
                return CTL_EXIT_USAGE;
        }
        x.name = a->pos[0];
        x.argv = a->pos + first;
        x.n_argv = (size_t)(a->n_pos - first);
        req.req_case = CONTROL__REQUEST__REQ_EXEC;
        req.exec = &x;
        int st = cmd_ask_fds(ctl, &req, stdio, 3, CONTROL__RESPONSE__RESP_EXEC, &r);
        if (st == CTL_EXIT_OK) {
                st = r->exec->status;
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

/* install BUNDLE: the file is opened here, with the caller's rights, and
 * passed to gadgetd as an fd (gadgetd opens no path for the caller). */
static int cmd_install(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Install x = CONTROL__INSTALL__INIT;
        int fd = open(a->pos[0], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                show_error(stderr, ctl->json, 0, "%s: %s", a->pos[0], strerror(errno));
                return CTL_EXIT_FAILED;
        }
        req.req_case = CONTROL__REQUEST__REQ_INSTALL;
        req.install = &x;
        Control__Response *r = NULL;
        int st = cmd_ask_fds(ctl, &req, &fd, 1, CONTROL__RESPONSE__RESP_DONE, &r);
        close(fd);
        if (st == CTL_EXIT_OK) {
                st = print_answer(ctl, r, false);
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

/* The status of gadget name: *r is the answer (the caller's) when the
 * exit status is CTL_EXIT_OK. */
static int status_of(const struct ctl *ctl, const char *name, Control__Response **r)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Name n = CONTROL__NAME__INIT;

        name_fill(name, CONTROL__REQUEST__REQ_STATUS, false, &req, &n);
        return cmd_ask(ctl, &req, CONTROL__RESPONSE__RESP_STATUS, r);
}

/* Exit statuses of is-active and is-failed, as systemctl's. */
enum { IS_NO_ACTIVE = 3, IS_NO_FAILED = 1, IS_UNKNOWN = 4 };

/* is-active, is-failed: the gadget's state printed; exit status 0 if it
 * is state, else no; 4 for a gadget gadgetd does not know. */
static int is_state(const struct ctl *ctl, const char *name, const char *state, int no)
{
        Control__Response *r = NULL;
        int st = status_of(ctl, name, &r);

        if (st == CTL_EXIT_NOTFOUND)
                st = IS_UNKNOWN;
        if (st == CTL_EXIT_OK) {
                const char *now = r->status->info->state;
                if (ctl->json)
                        printf("{\"name\": \"%s\", \"state\": \"%s\"}\n", name, now);
                else
                        printf("%s\n", now);
                st = strcmp(now, state) == 0 ? CTL_EXIT_OK : no;
                if (fflush(stdout) == EOF)
                        st = CTL_EXIT_FAILED;
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

static int cmd_is_active(const struct ctl *ctl, const struct cmd_args *a)
{
        return is_state(ctl, a->pos[0], "ready", IS_NO_ACTIVE);
}

static int cmd_is_failed(const struct ctl *ctl, const struct cmd_args *a)
{
        return is_state(ctl, a->pos[0], "failed", IS_NO_FAILED);
}

static int cmd_cat(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_CAT, CONTROL__RESPONSE__RESP_LOGS, false);
}

static int cmd_cores(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_CORES, CONTROL__RESPONSE__RESP_CORES, false);
}

static int cmd_versions(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_VERSIONS, CONTROL__RESPONSE__RESP_VERSIONS, false);
}

/* deploy NAME VERSION: the answer comes once the version serves, or says
 * why it did not start (then it was rolled back). */
static int cmd_deploy(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Deploy d = CONTROL__DEPLOY__INIT;

        d.name = a->pos[0];
        d.version = a->pos[1];
        d.percent = a->percent;
        d.max_error_percent = a->max_errors;
        d.min_calls = a->min_calls;
        req.req_case = CONTROL__REQUEST__REQ_DEPLOY;
        req.deploy = &d;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
}

static int cmd_rollback(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], a->with_state ? CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE
                                : CONTROL__REQUEST__REQ_ROLLBACK, CONTROL__RESPONSE__RESP_DONE, false);
}

static int cmd_debug(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_DEBUG, CONTROL__RESPONSE__RESP_DONE, false);
}

static int cmd_status(const struct ctl *ctl, const struct cmd_args *a)
{
        return cmd_name_request(ctl, a->pos[0], CONTROL__REQUEST__REQ_STATUS, CONTROL__RESPONSE__RESP_STATUS,
                            false);
}

static int cmd_describe(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Response *r = NULL;
        int st = status_of(ctl, a->pos[0], &r);

        if (st == CTL_EXIT_OK) {
                st = printed(ctl, show_describe(stdout, r->status, ctl->json), CTL_EXIT_OK);
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

static int cmd_denials(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Response *r = NULL;
        int st = status_of(ctl, a->pos[0], &r);

        if (st == CTL_EXIT_OK) {
                st = printed(ctl, show_denials(stdout, r->status, ctl->json), CTL_EXIT_OK);
                control__response__free_unpacked(r, NULL);
        }
        return st;
}

static int cmd_list(const struct ctl *ctl, const struct cmd_args *a)
{
        return empty_request(ctl, CONTROL__REQUEST__REQ_LIST, CONTROL__RESPONSE__RESP_LIST);
}

/* nodes, or nodes forget NODE. */
static int cmd_nodes(const struct ctl *ctl, const struct cmd_args *a)
{
        if (a->n_pos == 0)
                return empty_request(ctl, CONTROL__REQUEST__REQ_NODES, CONTROL__RESPONSE__RESP_NODES);
        if (a->n_pos != 2 || strcmp(a->pos[0], "forget") != 0) {
                show_error(stderr, ctl->json, 0, "nodes takes no argument, or forget NODE (not \"%s\")", a->pos[0]);
                return CTL_EXIT_USAGE;
        }
        if (!gadget_name_ok(a->pos[1])) {
                show_error(stderr, ctl->json, 0,
                           "\"%s\" is not a node name (lower case letters, digits, - and _)", a->pos[1]);
                return CTL_EXIT_USAGE;
        }
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Name n = CONTROL__NAME__INIT;
        n.name = a->pos[1];
        req.req_case = CONTROL__REQUEST__REQ_FORGET_NODE;
        req.forget_node = &n;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
}

static int cmd_move(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Move move = CONTROL__MOVE__INIT;

        /* Node= follows the rule of gadget names (gadgetd's config.c). */
        if (!gadget_name_ok(a->pos[1])) {
                show_error(stderr, ctl->json, 0,
                           "\"%s\" is not a node name (lower case letters, digits, - and _)", a->pos[1]);
                return CTL_EXIT_USAGE;
        }
        move.name = a->pos[0];
        move.node = a->pos[1];
        req.req_case = CONTROL__REQUEST__REQ_MOVE;
        req.move = &move;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
}

static int cmd_reload(const struct ctl *ctl, const struct cmd_args *a)
{
        return empty_request(ctl, CONTROL__REQUEST__REQ_RELOAD, CONTROL__RESPONSE__RESP_RELOAD);
}

static int cmd_daemon_reexec(const struct ctl *ctl, const struct cmd_args *a)
{
        return empty_request(ctl, CONTROL__REQUEST__REQ_DAEMON_REEXEC, CONTROL__RESPONSE__RESP_DONE);
}

/* call's traceparent into tp: --traceparent's (checked as gadgetd reads
 * it), or with --trace a new trace's, its id printed on stderr; "" for
 * neither (gadgetd starts a trace of its own). 0, or -EINVAL (printed). */
static int call_traceparent(const struct ctl *ctl, const struct cmd_args *a, char tp[TRACEPARENT_LEN + 1])
{
        struct trace_ctx t;
        if (a->traceparent && traceparent_parse(a->traceparent, strlen(a->traceparent), &t) < 0) {
                show_error(stderr, ctl->json, 0, "--traceparent \"%.80s\" is not a W3C traceparent "
                           "(00-<32 hex>-<16 hex>-<2 hex>, lower case, ids not all zero)", a->traceparent);
                return -EINVAL;
        }
        if (!a->traceparent && !a->trace)
                return 0;
        if (!a->traceparent) {
                t.flags = TRACE_FLAG_SAMPLED;
                do {
                        if (getrandom(t.trace_id, sizeof t.trace_id, 0) != sizeof t.trace_id ||
                            getrandom(t.span_id, sizeof t.span_id, 0) != sizeof t.span_id) {
                                show_error(stderr, ctl->json, 0, "no random bytes for a trace id");
                                return -EINVAL;
                        }
                } while (trace_id_zero(t.trace_id, TRACE_ID_LEN) || trace_id_zero(t.span_id, TRACE_SPAN_ID_LEN));
        }
        traceparent_format(&t, tp);
        if (a->trace) {
                char id[2 * TRACE_ID_LEN + 1];
                trace_hex(t.trace_id, TRACE_ID_LEN, id);
                fprintf(stderr, "trace %s\n", id);
        }
        return 0;
}

/* trace NAME: the gadget's frames, part after part, until interrupted,
 * gadgetd closes, or -n N frames were printed. */
static int follow_frames(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Frames fr = CONTROL__FRAMES__INIT;
        struct client c = { .fd = -1 };
        Control__Response *r = NULL;
        size_t left = a->lines_set && a->lines ? a->lines : SIZE_MAX;

        if (!gadget_name_ok(a->pos[0])) {
                show_error(stderr, ctl->json, 0, "\"%.80s\" is neither a trace id (32 lower-case hex digits) nor a "
                           "gadget name (lower case letters, digits, - and _)", a->pos[0]);
                return CTL_EXIT_USAGE;
        }
        fr.name = a->pos[0];
        req.req_case = CONTROL__REQUEST__REQ_FRAMES;
        req.frames = &fr;
        int st = exchange(ctl, &c, &req, CONTROL__RESPONSE__RESP_FRAMES, &r);
        while (st == CTL_EXIT_OK && r) {
                const Control__FrameBatch *b = r->frames;
                bool more = b->more;
                /* The note (the first part's "following", the last's why)
                 * on stderr: stdout holds frames only. */
                if (b->note[0])
                        show_note(stderr, b->note, ctl->json);
                fflush(stderr);
                st = printed(ctl, show_frames(stdout, b, a->pos[0], left, ctl->json), CTL_EXIT_OK);
                left -= b->n_frames < left ? b->n_frames : left;
                control__response__free_unpacked(r, NULL);
                r = NULL;
                if (st == CTL_EXIT_OK && more && left)
                        st = receive(ctl, &c, false, CONTROL__RESPONSE__RESP_FRAMES, true, &r);
        }
        client_close(&c);
        return st;
}

/* trace ID: one trace's spans; trace NAME (or --frames NAME): a gadget's
 * frames. An argument of exactly 32 lower-case hex digits, not all zero,
 * is a trace id unless --frames says otherwise. */
static int cmd_trace(const struct ctl *ctl, const struct cmd_args *a)
{
        uint8_t id[TRACE_ID_LEN];
        const char *t = a->pos[0];
        if (a->frames || strlen(t) != 2 * TRACE_ID_LEN || trace_unhex(t, TRACE_ID_LEN, id) < 0 ||
            trace_id_zero(id, TRACE_ID_LEN))
                return follow_frames(ctl, a);
        if (a->lines_set) {
                show_error(stderr, ctl->json, 0, "trace ID takes no -n: it prints one trace");
                return CTL_EXIT_USAGE;
        }
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Trace tr = CONTROL__TRACE__INIT;
        tr.trace_id = (char *)t;
        req.req_case = CONTROL__REQUEST__REQ_TRACE;
        req.trace = &tr;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_TRACE);
}

static int cmd_call(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Call call = CONTROL__CALL__INIT;
        const char *json = a->n_pos > 2 ? a->pos[2] : "null";
        char err[256] = "";
        int st;

        if (!*a->pos[1] || !value_utf8_valid(a->pos[1], strlen(a->pos[1]))) {
                show_error(stderr, ctl->json, 0, "\"%s\" is not a method name", a->pos[1]);
                return CTL_EXIT_USAGE;
        }
        if (json_to_value(json, strlen(json), &call.args, err, sizeof(err)) < 0) {
                show_error(stderr, ctl->json, 0, "bad JSON arguments: %s", err);
                return CTL_EXIT_USAGE;
        }
        char tp[TRACEPARENT_LEN + 1] = "";
        if (call_traceparent(ctl, a, tp) < 0) {
                value_free(call.args);
                return CTL_EXIT_USAGE;
        }
        call.traceparent = tp;
        call.name = a->pos[0];
        call.method = a->pos[1];
        req.req_case = CONTROL__REQUEST__REQ_CALL;
        req.call = &call;
        st = request(ctl, &req, CONTROL__RESPONSE__RESP_RESULT);
        value_free(call.args);
        return st;
}

/* Prints a logs answer: its note on stderr, its entries as a asks. */
static int print_logs(const struct ctl *ctl, const struct cmd_args *a, const Control__Response *r)
{
        if (!a->cat)
                return print_answer(ctl, r, false);
        if (r->logs->note && r->logs->note[0])
                show_note(stderr, r->logs->note, ctl->json);
        return printed(ctl, show_log_entries(stdout, r->logs, ctl->json ? SHOW_LOGS_JSON : SHOW_LOGS_CAT),
                       CTL_EXIT_OK);
}

/* logs and audit: lines of a gadget (logs: or of every gadget), then
 * (with -f) new ones as they come. */
static int follow_lines(const struct ctl *ctl, const struct cmd_args *a, bool audit)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Logs logs = CONTROL__LOGS__INIT;
        struct client c = { .fd = -1 };
        Control__Response *r = NULL;
        int st;

        logs.name = a->n_pos > 0 ? a->pos[0] : "";
        logs.lines = a->lines_set ? a->lines : a->follow ? FOLLOW_LINES : 0;
        logs.none = a->lines_set && a->lines == 0;
        logs.follow = a->follow;
        if (audit) {
                req.req_case = CONTROL__REQUEST__REQ_AUDIT;
                req.audit = &logs;
        } else {
                req.req_case = CONTROL__REQUEST__REQ_LOGS;
                req.logs = &logs;
                logs.since_ms = a->since_ms;
                logs.all = a->all;
        }
        st = exchange(ctl, &c, &req, CONTROL__RESPONSE__RESP_LOGS, &r);
        /* The answer comes in parts with `more` set on all but the last;
         * following, the parts go on with new lines until gadgetd closes
         * the connection or the user interrupts. */
        while (st == CTL_EXIT_OK && r) {
                bool more = r->logs->more;
                st = audit ? print_answer(ctl, r, true) : print_logs(ctl, a, r);
                control__response__free_unpacked(r, NULL);
                r = NULL;
                if (st == CTL_EXIT_OK && (more || a->follow))
                        st = receive(ctl, &c, false, CONTROL__RESPONSE__RESP_LOGS, a->follow, &r);
        }
        client_close(&c);
        return st;
}

/* logs NAME, or every gadget's: with --all, or -f without NAME. */
static int cmd_logs(const struct ctl *ctl, const struct cmd_args *a)
{
        struct cmd_args all = *a;
        if (a->n_pos == 0 && !a->all && !a->follow) {
                show_error(stderr, ctl->json, 0, "logs: name a gadget, or follow every gadget's log with -f or --all");
                return CTL_EXIT_USAGE;
        }
        if (a->n_pos > 0 && a->all) {
                show_error(stderr, ctl->json, 0, "logs: --all names no gadget");
                return CTL_EXIT_USAGE;
        }
        if (a->n_pos > 0 && !gadget_name_ok(a->pos[0])) {
                show_error(stderr, ctl->json, 0, "\"%s\" is not a gadget name (lower case letters, digits, - and _)",
                           a->pos[0]);
                return CTL_EXIT_USAGE;
        }
        all.all = a->n_pos == 0;
        return follow_lines(ctl, &all, false);
}

static int cmd_audit(const struct ctl *ctl, const struct cmd_args *a)
{
        return follow_lines(ctl, a, true);
}

static int cmd_approvals(const struct ctl *ctl, const struct cmd_args *a)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__List list = CONTROL__LIST__INIT;

        (void)a;
        req.req_case = CONTROL__REQUEST__REQ_APPROVALS;
        req.approvals = &list;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_APPROVALS);
}

static int decide(const struct ctl *ctl, const char *id, bool approve, bool always)
{
        Control__Request req = CONTROL__REQUEST__INIT;
        Control__Decide d = CONTROL__DECIDE__INIT;
        char *end;

        errno = 0;
        d.id = strtoull(id, &end, 10);
        if (!*id || *end || errno || id[0] == '-' || d.id == 0) {
                show_error(stderr, ctl->json, 0, "\"%s\" is not an approval ID (see gadgetctl approvals)", id);
                return CTL_EXIT_USAGE;
        }
        d.approve = approve;
        d.always = always;
        req.req_case = CONTROL__REQUEST__REQ_DECIDE;
        req.decide = &d;
        return request(ctl, &req, CONTROL__RESPONSE__RESP_DONE);
}

static int cmd_approve(const struct ctl *ctl, const struct cmd_args *a)
{
        return decide(ctl, a->pos[0], true, a->always);
}

static int cmd_deny(const struct ctl *ctl, const struct cmd_args *a)
{
        return decide(ctl, a->pos[0], false, false);
}

const struct command cmd_commands[] = {
        { "load", cmd_load, 1, 1, "hRB", "FILE [--runtime] [--no-block]",
          "validate a policy file, then load and start it",
          "Every FILE:LINE error is printed and nothing is sent if the file is invalid.\n"
          "gadgetd is given the file's absolute path and reads it itself. It answers\n"
          "once the gadget is ready (a Start=on-demand one: idle), or with why it did\n"
          "not start (exit status 1), within its StartTimeout. gadgetd records the\n"
          "path and loads it again at its next start, after the policy directory.\n"
          "      --runtime   load it only until gadgetd restarts (drops its record)\n"
          "      --no-block  answer once it is loaded, not once it is ready\n" },
        { "install", cmd_install, 1, 1, "h", "BUNDLE", "install a signed gadget bundle and run it",
          "gadgetd checks the bundle's signature against TrustedKeys= of gadgetd.conf\n"
          "(unsigned or unknown-key bundles are refused, unless AllowUnsigned=yes and\n"
          "root asks), unpacks it into its own store (STATE_DIR/releases/NAME/VERSION),\n"
          "checks its policy and loads it; a running gadget of that name restarts on the\n"
          "new version without a gap; the answer comes once it is ready. A refused\n"
          "bundle leaves nothing behind; the error says why. The file is opened here\n"
          "and passed to gadgetd (docs/releases.md).\n" },
        { "versions", cmd_versions, 1, 1, "h", "NAME", "list the installed versions of a gadget",
          "Newest install first: the version, whether it is current, when and by whom\n"
          "it was installed (UTC, uid) and its signer's key id. gadgetd keeps the last\n"
          "VersionsKept= (default 10) of each gadget. STATE KEPT: the gadget's state\n"
          "a deploy kept with the version as it left it (when, its size), which\n"
          "rollback --with-state restores; empty if none. With Store=postgresql the\n"
          "versions are the store's: a bundle installed through any node is listed on\n"
          "each once that node checked and unpacked it, or as refused, with why.\n"
          "With --json: an array of {\"version\", \"current\", \"installed_ms\", \"uid\",\n"
          "\"signer\", \"sdk\", \"node\", \"refused\", \"state_ms\", \"state_bytes\"}\n"
          "(state_ms 0: none kept).\n" },
        { "deploy", cmd_deploy, 2, 2, "hCEM", "NAME VERSION [--percent P]",
          "make an installed version of a gadget current, or roll it out",
          "Its policy becomes the gadget's, and a running gadget restarts on it without\n"
          "a gap: its new process starts beside the old one, which drains its calls.\n"
          "The answer comes once the new process serves. A version that does not\n"
          "start is rolled back to the version before at once, and the error says why\n"
          "(exit status 1); the old process serves meanwhile (docs/releases.md).\n"
          "With Store=postgresql it is written to the store first, and every node\n"
          "follows; the node that runs the gadget runs the version or the rollout.\n"
          "With --percent below 100, a staged rollout: the new process serves that\n"
          "share of the call trees beside the old one (one tree never mixes versions);\n"
          "deploy it again with another --percent to change the share, without one\n"
          "(or --percent 100) to complete it. Rolled back automatically when more than\n"
          "--max-errors percent of at least --min-calls of its calls fail.\n"
          "      --percent P     the share of the call trees, 1 to 100 (default 100)\n"
          "      --max-errors PCT  the rollout's error bound, 0 to 100 (default 5)\n"
          "      --min-calls N   calls of the new version before the bound counts (default 100)\n" },
        { "rollback", cmd_rollback, 1, 1, "hW", "NAME [--with-state]", "go back to a gadget's version before",
          "A rollout running: its new version gets no more calls and drains, at once.\n"
          "Else deploys the version that was current before the last install, deploy\n"
          "or rollback (status shows it as Previous version), without a gap, as deploy\n"
          "does. Twice in a row comes back to where it was. The gadget's data stays as\n"
          "it is, unless --with-state.\n"
          "Every deploy (and install of a new current version) first keeps the gadget's\n"
          "state (its kv keys and alarms, as backup writes them) with the version it\n"
          "leaves; versions shows which keep one.\n"
          "      --with-state  root only: also put back the state kept with the version\n"
          "                    before, as it was when a deploy left it. The gadget is\n"
          "                    stopped after its calls (calls that come meanwhile wait),\n"
          "                    the state it leaves kept with its version, the other\n"
          "                    restored, and the version before started for the calls.\n"
          "                    Refused, nothing changed, if no state is kept with it.\n"
          "                    With Store=postgresql only on the node that runs the\n"
          "                    gadget (it holds the lease); elsewhere refused, naming it.\n" },
        { "bundle", cmd_bundle, 1, 1, "hK:o:", "DIR --key KEY -o FILE", "make a signed gadget bundle of a directory",
          "DIR holds a manifest (Name=, Version=, Protocol=, SDK=), a policy template\n"
          "whose Exec=, UI= and AdminUI= name files of DIR relative to it, and those\n"
          "files (regular files only; the executable bit is kept). KEY is an Ed25519\n"
          "private key in PEM (gadgetctl keygen, or openssl genpkey -algorithm ed25519).\n"
          "No gadgetd is needed.\n"
          "      --key KEY   the signing key\n"
          "  -o, --output FILE  the bundle written\n" },
        { "keygen", cmd_keygen, 0, 0, "ho:", "-o KEY", "make an Ed25519 key for signing bundles",
          "Writes the private key (PEM, mode 0600; never over an existing file) and\n"
          "prints its public key, for TrustedKeys= in gadgetd.conf. No gadgetd is needed.\n"
          "  -o, --output KEY  the private key's file\n" },
        { "stop", cmd_stop, 1, 1, "h", "NAME", "stop a gadget", "" },
        { "start", cmd_start, 1, 1, "hB", "NAME [--no-block]", "start a stopped or failed gadget",
          "Answers once the gadget is ready, or with why it did not start (exit\n"
          "status 1). A gadget that runs already is left as it is (exit status 0, and\n"
          "says so). An idle gadget (Start=on-demand) is woken, as by wake. A\n"
          "stopping gadget is refused: start it once stopped.\n"
          "      --no-block  answer once the start is asked, not once it is ready\n" },
        { "restart", cmd_restart, 1, 1, "hB", "NAME [--no-block]",
          "read a gadget's policy file again, stop it and start it",
          "If the file now has errors, they are printed (FILE:LINE) and the gadget\n"
          "keeps running on its current policy. Answers once the gadget is ready, or\n"
          "with why it did not start (exit status 1).\n"
          "      --no-block  answer once the restart is asked, not once it is ready\n" },
        { "unload", cmd_unload, 1, 1, "h", "NAME", "stop a gadget added by load and forget it",
          "It leaves the list once stopped. A gadget whose file is in the policy directory\n"
          "is refused: remove its file and run reload (stop stops it until then).\n" },
        { "kill", cmd_kill, 1, 2, "h", "NAME [SIGNAL]", "send a signal to a gadget's program",
          "SIGNAL: TERM (the default), HUP, INT, QUIT, USR1, USR2, ALRM, VTALRM, PROF, IO,\n"
          "PWR, XCPU, XFSZ, STKFLT, RTMIN+N or KILL, with or without SIG, or its number.\n"
          "Its Restart= applies to the exit that follows, as to any other.\n" },
        { "exec", cmd_exec, 2, -1, "+h", "NAME -- COMMAND [ARG...]",
          "run a command inside a running gadget's sandbox, as the gadget",
          "The command runs in the gadget's namespaces and root, with its uid, no\n"
          "capability, its limits (in its cgroup) and its seccomp filter: it can do\n"
          "nothing the gadget cannot. COMMAND is looked up on the gadget's PATH inside\n"
          "its root, with gadgetctl's stdin, stdout and stderr. Root only; audited.\n"
          "Exit status: the command's (128+N if signal N ended it); 1 if it could not\n"
          "start (the error names the step), 3 if there is no gadget NAME, 4 if not root.\n" },
        { "is-active", cmd_is_active, 1, 1, "h", "NAME", "print a gadget's state; exit status 0 if ready",
          "Exit status 0 if ready, 3 in any other state (starting, idle, stopped...),\n"
          "4 if gadgetd knows no gadget NAME (as systemctl is-active).\n" },
        { "is-failed", cmd_is_failed, 1, 1, "h", "NAME", "print a gadget's state; exit status 0 if failed",
          "Exit status 0 if failed, 1 in any other state, 4 if gadgetd knows no\n"
          "gadget NAME (as systemctl is-failed).\n" },
        { "wake", cmd_wake, 1, 1, "h", "NAME", "start an idle gadget without calling it",
          "Answers once the gadget is ready. An idle gadget (Start=on-demand, IdleStop=)\n"
          "also starts at its first call; wake spares that call the start's wait.\n"
          "A gadget that is stopped or failed is not idle: use start.\n"
          "On a shared store, a gadget another node holds is woken on that node.\n" },
        { "list", cmd_list, 0, 0, "h", "",
          "list the gadgets with their state and usage",
          "When gadgetd shares its store with other nodes (Store=postgresql), a NODE\n"
          "column names the node that runs each gadget (\"-\": none yet); on the others\n"
          "its state is remote.\n"
          "With --json: an array of objects with the fields name, state, cause, pid,\n"
          "uptime_ms, restarts, calls, memory_bytes, tasks, cpu_usec, start_us, start\n"
          "and active_ago_ms (0: unknown; start_us: from the start of this run to the\n"
          "gadget's hello; start: Start=; active_ago_ms: since its last call or binding\n"
          "call, 0 if none yet) and in_flight (calls taken and not answered yet);\n"
          "an idle gadget's state is idle,\n"
          "and node and epoch (its lease's) when a node runs it.\n" },
        { "status", cmd_status, 1, 1, "h", "NAME",
          "show one gadget in detail, with its last log lines",
          "With --json: one object with the fields of `list --json` and policy_path,\n"
          "limits_mode, limits, bindings ([{name, type, ops, credential}]: ops are the\n"
          "operations' signatures, credential an http binding's Credential= file, if it\n"
          "has one), methods, signatures (per method, \"\" if untyped), log_tail, and\n"
          "crash_cause and crash_backtrace (its last crash: \"killed by SIGSEGV\n"
          "(SEGV_MAPERR at 0x0) in f\" and its frames, innermost first; \"\" and [] if none).\n"
          "With a shared store, a Node line names the node that runs it and its lease's\n"
          "epoch (\"none yet\" if no node does).\n" },
        { "cat", cmd_cat, 1, 1, "h", "NAME", "print a gadget's policy as written and as in effect",
          "First the policy file's text as gadgetd read it when it last loaded it (an\n"
          "edit since then is not shown: it takes effect at a load or reload), then\n"
          "every key with the value in force, defaults included, sizes and times as\n"
          "written in a policy (16M, 30s). Root only.\n"
          "With --json: one {\"line\": \"...\"} object per line.\n" },
        { "denials", cmd_denials, 1, 1, "h", "NAME",
          "list the system calls a gadget's filter refused, by call and answer",
          "Each line: the call, the errno the program got (\"killed\" for a call of a\n"
          "foreign ABI, which ends the program), how often, the first and the last time\n"
          "(UTC) and, for a call that names a path (mount, chroot ...), the last path.\n"
          "Counted since the gadget was loaded, over all its runs; most refused first.\n"
          "With --json: {\"name\", \"total\", \"untracked\", \"denials\": [{\"call\", \"nr\",\n"
          "\"answer\", \"count\", \"first_ms\", \"last_ms\", \"path\"}]}.\n" },
        { "cores", cmd_cores, 1, 1, "h", "NAME", "list the cores kept of a gadget's crashes",
          "With CoreDump=SIZE in its policy, gadgetd keeps a core file of each crash of\n"
          "the gadget (at most SIZE bytes; the last 3), under its state directory:\n"
          "gdb PROGRAM CORE reads one. One line each, oldest first: when it was kept, the\n"
          "run that crashed, the signal, the size and the file. Root only.\n"
          "With --json: an array of {\"time_ms\", \"run\", \"signal\", \"size\", \"path\"}.\n" },
        { "backup", cmd_backup, 2, 2, "h", "NAME FILE", "write a gadget's kv state and alarms to a new file",
          "A snapshot of one instant (one read transaction), taken while the gadget runs\n"
          "and writes, on either store (SQLite or PostgreSQL). gadgetctl creates FILE\n"
          "(mode 0600; an existing FILE is refused) and gadgetd writes it: a versioned,\n"
          "checksummed file that restore reads on either store. The answer names the\n"
          "keys, alarms and SHA-256 written. Root only; audited.\n" },
        { "restore", cmd_restore, 2, 2, "h", "NAME FILE", "replace a stopped gadget's kv state and alarms with a backup's",
          "The gadget must be stopped, failed or idle (else refused: exit status 1,\n"
          "nothing changed). All or nothing: the file is checked record by record\n"
          "(format, checksum, values, the policy's bindings, MaxKeys=, MaxBytes=,\n"
          "MaxValueSize=, MaxAlarms=, MaxPayloadSize=, StateMax=) inside one transaction\n"
          "that commits only if all of it passes; a refusal names the reason. On a\n"
          "shared store it is refused while another node runs the gadget. Root only;\n"
          "audited.\n" },
        { "export", cmd_export, 1, 1, "h", "NAME", "print a gadget's kv state and alarms as JSON",
          "A backup (as gadgetctl backup takes it) printed as one JSON object, for\n"
          "people and migrations: {\"gadget\", \"format\", \"source\", \"taken_ms\",\n"
          "\"kv\": [{\"binding\", \"key\", \"value\"}], \"alarms\": [{\"binding\", \"id\",\n"
          "\"at_ms\", \"due_ms\", \"attempts\", \"payload\"}], \"keys\", \"alarm_count\",\n"
          "\"sha256\"}; keys and values as gadgetctl call writes values (bytes as\n"
          "{\"$bytes\": \"<base64>\"}). Written a record at a time. Root only.\n" },
        { "debug", cmd_debug, 1, 1, "h", "NAME", "let a debugger attach to a gadget's program",
          "The sandbox's init traces the program to explain its crashes (the cause and\n"
          "backtrace of status), and a process has one tracer only: debug makes it let\n"
          "go for the rest of this run, and prints the program's host pid, for strace -p\n"
          "or gdb -p. Its crashes are not explained until it starts again. Root only.\n" },
        { "describe", cmd_describe, 1, 1, "h", "NAME",
          "show a gadget's methods with their signatures",
          "One signature per line, \"NAME (untyped)\" for a method declared without one.\n"
          "With --json: {\"name\", \"methods\"}, each method {\"name\", \"signature\", \"params\",\n"
          "\"result\"} with params and result as JSON Schema (2020-12) of the JSON that\n"
          "`gadgetctl call` and the gateway take and give, or {\"name\", \"untyped\": true}.\n" },
        { "call", cmd_call, 2, 3, "+hTP", "NAME METHOD [JSON]",
          "call a gadget's method and print its result as JSON",
          "JSON is the argument value (default null). Bytes are written {\"$bytes\": \"<base64>\"}.\n"
          "The method's errors are printed on stderr (exit status 1; 3 for not found).\n"
          "Options go before NAME:\n"
          "      --trace     start the call's trace here and print its id on stderr\n"
          "                  (\"trace ID\"), for gadgetctl trace ID\n"
          "      --traceparent VALUE  the call's parent span, a W3C traceparent\n"
          "                  (00-<32 hex>-<16 hex>-<2 hex>): the call joins that trace\n" },
        { "trace", cmd_trace, 1, 1, "hn:F", "NAME | ID [-n N] [--frames]",
          "follow a gadget's frames live, or print one call chain's spans as a tree",
          "trace ID (32 lower-case hex digits): each line one hop of that trace: a call\n"
          "of a gadget's method or a binding operation, its outcome, its duration and the\n"
          "node it ran on, under the hop that caused it. The node asked gives its own\n"
          "spans and asks each node they name (where a call came from or went to) for\n"
          "theirs; one that does not answer is named on stderr. gadgetd keeps the last\n"
          "TraceKeep= spans (gadgetd.conf; default 4096).\n"
          "With --json: {\"trace_id\", \"spans\": [{\"span_id\", \"parent_id\", \"gadget\", \"name\",\n"
          "\"kind\", \"node\", \"peer\", \"outcome\", \"start_us\", \"duration_us\"}], \"unreached\"}.\n"
          "trace NAME: the frames on gadget NAME's channel as they pass, until interrupted:\n"
          "calls to it (->) and its results (<-), its binding calls (<-) and their\n"
          "answers (->), its log messages, each with its time, process, id, size and, for\n"
          "an answer, the time since its call. Values are cut to a short preview, bytes\n"
          "shown as their size; a secret binding's values are never shown (nor an answer\n"
          "whose call was not seen). A reader that falls behind loses frames, and is\n"
          "told how many (\"-- N frames dropped\"). Root only; at most 4 followers of a\n"
          "gadget, 16 in all.\n"
          "  -n, --lines N   stop after N frames\n"
          "      --frames    NAME is a gadget's name even if it is 32 hex digits (a\n"
          "                  gadget may be named so; without --frames that is a trace id)\n"
          "With --json: one {\"time\", \"time_ms\", \"gadget\", \"run\", \"dir\" (in: from the\n"
          "gadget), \"kind\", \"id\", \"name\", \"bytes\", \"outcome\", \"duration_us\",\n"
          "\"preview\", \"withheld\"} object per frame, {\"dropped\": N} for frames lost.\n" },
        { "logs", cmd_logs, 0, 1, "hn:fo:SA", "[NAME] [-n N] [-f] [--since TIME] [--all] [-o cat]",
          "print the log lines gadgetd keeps for a gadget, or follow every gadget's",
          "Each line: its time (local, to the ms), the gadget and its run (which process:\n"
          "1 its first start, 2 the next ...), the stream (stdout, stderr, message: the SDK's\n"
          "log, gadgetd: its notes) and the priority, then the text:\n"
          "  Dec 06 05:03:50.123 notes[2] stderr.info: cannot open cache\n"
          "  -n, --lines N   only the last N lines (0: none, only new ones with -f; default all, 10 with -f)\n"
          "  -f, --follow    keep printing new lines until interrupted; without NAME, of every gadget\n"
          "      --since TIME  only lines from TIME on: a duration ago (5min, 30s, 2h) or\n"
          "                  YYYY-MM-DD HH:MM:SS (local; YYYY-MM-DDTHH:MM:SSZ: UTC)\n"
          "      --all       every gadget's lines, each gadget's in turn, then (with -f) as they come\n"
          "  -o, --output MODE  cat: the text alone (short-precise: the default)\n"
          "With --json: one {\"time\", \"time_ms\", \"gadget\", \"run\", \"stream\", \"priority\",\n"
          "\"line\"} object per line.\n" },
        { "audit", cmd_audit, 1, 1, "hn:f", "NAME [-n N] [-f]",
          "print a gadget's audit records (its binding calls, calls, limit hits, lifecycle)",
          "Each record is a JSON object: time, gadget, binding, op, outcome (ok, denied,\n"
          "error, not_found), bytes, duration_us and, for failures, detail; a gadgetctl\n"
          "call's names the caller's uid, a lifecycle event's (binding \"lifecycle\") its\n"
          "run, pid, exit_status or signal.\n"
          "  -n, --lines N   only the last N records (0: none, only new ones with -f; default all, 10 with -f)\n"
          "  -f, --follow    keep printing new records until interrupted\n" },
        { "selftest", cmd_selftest, 0, 1, "h", "[POLICY]",
          "run the escape probe in a sandbox on this host and show every attempt",
          "Runs `gadgetd run` (as root) with the escape probe under the default policy, or\n"
          "under POLICY with the probe as its program, and prints each way out it tried\n"
          "with its verdict. Exit status 1 if anything escaped. No daemon is needed.\n"
          "GADGETD and GADGETD_ESCAPE_PROBE override the paths of gadgetd and the probe.\n"
          "With --json: [{\"attempt\", \"verdict\", \"detail\"}].\n" },
        { "dev", cmd_dev, 1, 1, "h", "DIR",
          "build, load and restart a gadget as its files in DIR change, until interrupted",
          "DIR/gadget.dev names the policy and the build command (both optional):\n"
          "  Policy=FILE      the gadget's policy, relative to DIR (default: DIR's one *.policy)\n"
          "  Build=COMMAND    run by sh in DIR when a file of DIR changes (default: none)\n"
          "It builds, then loads the policy (as load --runtime), prints the gadget's page\n"
          "on gadgetd's gateway (if it has one) and watches DIR and the folders of the\n"
          "policy's Exec= and UI= (inotify). A changed source is built (without Build=,\n"
          "a script its program reads: the gadget restarts); a new program, or a changed\n"
          "policy, restarts the gadget without a gap: the old process serves until the\n"
          "new one is ready, so no call is refused. A failed build prints its output, a\n"
          "policy with errors its FILE:LINE errors, and the running version serves on.\n"
          "A changed UI is served at its page's next load. Hidden files, names ending\n"
          "in ~, .swp, .tmp or .o are no sources. Build= runs with your rights.\n"
          "Interrupted (Ctrl-C), it unloads the gadget if it loaded it; a gadget gadgetd\n"
          "had before stays loaded, on its last version.\n" },
        { "check", check_run, 1, -1, "h", "FILE...",
          "validate policy files here, without gadgetd",
          "Prints \"FILE: ok\" or every FILE:LINE error; exit status 1 if any file is invalid.\n"
          "With --json: [{\"file\": ..., \"ok\": true|false, \"errors\": [...]}].\n" },
        { "approvals", cmd_approvals, 0, 0, "h", "",
          "list the calls waiting for a person's approval (Approve=)",
          "Each: its ID, who calls (a gadget, gadgetctl, the workshop) and through what,\n"
          "the gadget and method called (or an http binding's URL and method), its\n"
          "arguments, how long it has waited and when it will be denied (ApproveTimeout=).\n"
          "With --json: {\"approvals\": [{\"id\", \"caller\", \"via\", \"target\", \"method\",\n"
          "\"args\", \"age_ms\", \"timeout_ms\"}], \"total\"}.\n" },
        { "approve", cmd_approve, 1, 1, "ha", "ID [--always]",
          "let a waiting call go on",
          "  -a, --always    also approve this caller's calls of this method from now on,\n"
          "                  until gadgetd restarts\n"
          "The decision is an audit record of the gadget that asked, naming your user.\n" },
        { "deny", cmd_deny, 1, 1, "h", "ID",
          "refuse a waiting call: its caller gets a \"denied\" error",
          "The decision is an audit record of the gadget that asked, naming your user.\n" },
        { "top", cmd_top, 0, 0, "hn:d:", "[-n N] [-d SECS]",
          "show gadgets by CPU, memory, calls and errors a second, refreshed in place",
          "  -n, --lines N   N views, then end (default: until interrupted; 1 with --json)\n"
          "  -d, --delay SECS  between views (default 1; 0.1 to 3600)\n"
          "CPU% is of one CPU. On a terminal each view replaces the last; otherwise\n"
          "views follow one another, a blank line between. With --json: one view of\n"
          "the counters as they are (cpu_usec, memory_bytes, tasks, calls, errors).\n" },
        { "nodes", cmd_nodes, 0, 2, "h", "[forget NODE]",
          "list the gadgetd nodes that share the store, when each was last seen",
          "Each node writes to the store every second; one not seen for more than\n"
          "10 s is shown as down. \"(this node)\" marks the gadgetd that answered.\n"
          "A node not seen for NodeForget= (gadgetd.conf; default a day) leaves the list.\n"
          "forget NODE: takes a down node off the list now (root only); a live node\n"
          "(seen within 10 s) is refused. A node forgotten that comes back is listed again.\n"
          "Fails (exit status 1) if gadgetd shares no store (Store=postgresql).\n"
          "With --json: {\"nodes\": [{\"name\", \"peer\", \"last_seen_ms\", \"self\", \"up\"}]}.\n" },
        { "move", cmd_move, 2, 2, "h", "NAME NODE",
          "hand a gadget over to another node of the store",
          "The node running NAME stops it gracefully (as gadgetctl stop), gives its\n"
          "lease back, and only NODE may take it for the next 10 s; NODE starts it with\n"
          "its kv state as it was. gadgetctl waits until NODE has taken it (exit status 0)\n"
          "or fails: NODE unknown or down, not in NAME's Nodes=, already running it, or\n"
          "not taking it in time (then any node may). Calls to NAME during the hand-over\n"
          "may fail while it stops (those made while no node runs it wait for NODE)\n"
          "or time out: retry them once NODE runs it.\n" },
        { "reload", cmd_reload, 0, 0, "h", "",
          "re-read the policy directory",
          "New files are loaded, removed ones stopped, changed ones restarted; the answer\n"
          "comes once each restarted one serves on its new process. Policy errors, and\n"
          "restarts whose new process did not start (\"not restarted\": the old one serves\n"
          "on), are printed on stderr and give exit status 1.\n"
          "With --json: {\"loaded\", \"stopped\", \"restarted\", \"unchanged\", \"errors\", \"kept\",\n"
          "\"changed\", \"failed\"} arrays.\n" },
        { "daemon-reexec", cmd_daemon_reexec, 0, 0, "h", "",
          "re-execute gadgetd in place, keeping its gadgets running",
          "gadgetd runs its binary on disk again (an upgraded package takes effect)\n"
          "with the same pid, control socket and running gadgets (same pids, kv\n"
          "state). It first waits (at most 2 s) for the gadgets' calls in flight to\n"
          "end; past that, or if anything fails, the old gadgetd serves on and the\n"
          "error says why. Root only.\n" },
};

const size_t cmd_n_commands = sizeof cmd_commands / sizeof *cmd_commands;
