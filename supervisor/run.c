/* run: starts one gadget, serves its RPC socket on a libevent loop, makes
 * the one call asked for (if any) and ends with the gadget. */
#include "run.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <event2/event.h>

#include "gadget.h"
#include "json.h"
#include "log.h"
#include "peer.h"
#include "policy.h"
#include "sandbox.h"
#include "filter.h"
#include "spawn.h"
#include "uidpool.h"
#include "validate.h"
#include "value.h"

#define SHUTDOWN_GRACE_MS 3000

struct run_ctx {
        struct event_base *base;
        struct policy *policy;
        struct spawn_child child;
        struct peer *peer;
        const char *method;          /* --call METHOD, or NULL */
        Gadget__Value *args;
        int call_exit;               /* exit status once the call is answered */
        bool answered;
        bool have_status;
        int status;                  /* the program's wait status */
        struct event *ev_report, *ev_int, *ev_term, *ev_timeout, *ev_grace;
};

static void kill_worker(struct run_ctx *c)
{
        if (c->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, c->child.pidfd, SIGKILL, NULL, 0);
}

static void arm(struct event *ev, uint64_t ms)
{
        struct timeval tv = { .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
        event_add(ev, &tv);
}

/* Asks the gadget to finish, with SIGKILL after a grace period. */
static void stop_gadget(struct run_ctx *c)
{
        if (c->peer && peer_state(c->peer) == PEER_READY)
                peer_shutdown(c->peer);
        arm(c->ev_grace, SHUTDOWN_GRACE_MS);
}

static void call_done(void *arg, const Gadget__CallResult *res, const char *gone)
{
        struct run_ctx *c = arg;
        c->answered = true;
        event_del(c->ev_timeout);
        if (!res) {
                fprintf(stderr, "gadgetd: call %s failed: %s\n", c->method, gone);
                c->call_exit = 1;
        } else if (res->outcome_case == GADGET__CALL_RESULT__OUTCOME_VALUE) {
                char *json = json_from_value(res->value);
                printf("%s\n", json ? json : "null");
                fflush(stdout);
                free(json);
                c->call_exit = 0;
        } else {
                fprintf(stderr, "gadgetd: call %s failed: %s (error %u)\n", c->method,
                        res->error->message, res->error->code);
                c->call_exit = 1;
        }
        stop_gadget(c);
}

static void on_hello(struct peer *p, void *data)
{
        struct run_ctx *c = data;
        uint64_t id;
        if (!c->method)
                return;
        if (!peer_has_method(p, c->method)) {
                fprintf(stderr, "gadgetd: gadget \"%s\" has no method \"%s\"\n", c->policy->name, c->method);
                c->answered = true;
                c->call_exit = 1;
                stop_gadget(c);
                return;
        }
        int e = peer_call(p, c->method, c->args, NULL, 0, call_done, c, &id);
        if (e < 0) {
                fprintf(stderr, "gadgetd: cannot call %s: %s\n", c->method, strerror(-e));
                c->answered = true;
                c->call_exit = 1;
                stop_gadget(c);
                return;
        }
        arm(c->ev_timeout, c->policy->call_timeout_ms);
}

/* Binding calls are checked against the policy; the binding types are
 * served by supervisor/ code as they are built. */
static void on_binding_call(struct peer *p, const Gadget__BindingCall *bc, void *data)
{
        struct run_ctx *c = data;
        char msg[256];
        const struct policy_binding *b = policy_binding_find(c->policy, bc->binding);
        if (!b) {
                snprintf(msg, sizeof msg, "no binding named %s in the policy", bc->binding);
                peer_binding_reply(p, bc->id, NULL, GADGET_EDENIED, msg);
                return;
        }
        snprintf(msg, sizeof msg, "binding %s of type %s is not served by this gadgetd", b->name,
                 policy_binding_type_name(b->type));
        peer_binding_reply(p, bc->id, NULL, GADGET_EUNAVAILABLE, msg);
}

static void on_log(struct peer *p, const Gadget__Log *l, void *data)
{
        struct run_ctx *c = data;
        char esc[8300];
        log_msg(l->level <= 3 ? L_ERR : l->level == 4 ? L_WARN : L_INFO, c->policy->name, "%s",
                log_escape(l->text, strlen(l->text), esc, sizeof esc));
}

static void on_closed(struct peer *p, const char *why, void *data)
{
        struct run_ctx *c = data;
        if (why)
                kill_worker(c); /* a protocol violation ends the worker */
}

static const struct peer_handlers handlers = {
        .hello = on_hello,
        .binding_call = on_binding_call,
        .log = on_log,
        .closed = on_closed,
};

static void report_cb(evutil_socket_t fd, short what, void *arg)
{
        struct run_ctx *c = arg;
        char msg[512];
        int status;
        int r = spawn_read_report(fd, &status, msg, sizeof msg);
        if (r == SANDBOX_REPORT_STATUS) {
                c->status = status;
                c->have_status = true;
        } else if (r == SANDBOX_REPORT_ERROR) {
                fprintf(stderr, "gadgetd: %s\n", msg);
        } else if (r <= 0) {
                /* PID 1 of the sandbox is gone, so is everything in it. */
                event_base_loopbreak(c->base);
        }
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
        struct run_ctx *c = arg;
        /* PID 1 in the sandbox passes it on to the program. */
        syscall(SYS_pidfd_send_signal, c->child.pidfd, (int)sig, NULL, 0);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
        struct run_ctx *c = arg;
        fprintf(stderr, "gadgetd: call %s timed out after %llu ms\n", c->method,
                (unsigned long long)c->policy->call_timeout_ms);
        c->answered = true;
        c->call_exit = 1;
        kill_worker(c);
}

static void grace_cb(evutil_socket_t fd, short what, void *arg)
{
        kill_worker(arg);
}

static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetd run [--run-dir DIR] [--uid-base N] POLICY [--call METHOD [JSON]] [-- ARGS...]\n"
                   "Runs the gadget of POLICY in its sandbox in the foreground.\n"
                   "  --call METHOD [JSON]  call METHOD once with JSON arguments, print the result, stop\n"
                   "  --run-dir DIR         where the uid lock file lives (default /run/gadgetd)\n"
                   "  --uid-base N          first host uid for gadgets (default %u)\n"
                   "Exit status: the gadget's (128+signal if killed); with --call 0 or 1;\n"
                   "2 for a bad command line or policy, 125 if the sandbox could not be set up.\n",
                UIDPOOL_DEFAULT_BASE);
}

/* Waits for the sandbox's PID 1 and works out the exit status. */
static int finish(struct run_ctx *c)
{
        int st = 0;
        while (waitpid(c->child.pid, &st, 0) < 0 && errno == EINTR)
                ;
        if (!c->have_status)
                c->status = st;
        if (c->method) {
                if (!c->answered) {
                        fprintf(stderr, "gadgetd: gadget \"%s\" ended before answering\n", c->policy->name);
                        return 1;
                }
                return c->call_exit;
        }
        if (WIFSIGNALED(c->status)) {
                const char *sig = sigabbrev_np(WTERMSIG(c->status));
                fprintf(stderr, "gadgetd: gadget \"%s\" killed by signal SIG%s\n", c->policy->name,
                        sig ? sig : "?");
                return 128 + WTERMSIG(c->status);
        }
        return WEXITSTATUS(c->status);
}

/* Starts the gadget and runs the loop; the exit status of gadgetd run. */
static int run_gadget(struct run_ctx *c, char **args, const char *run_dir, uid_t uid_base)
{
        struct gadget_filter filter = { 0 };
        struct uidpool pool = { .lock_fd = -1 };
        char err[600];
        uid_t uid;
        int e, ret = RUN_EXIT_START;

        if ((e = filter_build(&filter)) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": seccomp filter: %s\n", c->policy->name, strerror(-e));
                goto out;
        }
        if ((e = uidpool_open(&pool, run_dir, uid_base, UIDPOOL_DEFAULT_COUNT)) < 0 ||
            (e = uidpool_take(&pool, c->policy->name, &uid)) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": uid pool in %s: %s\n", c->policy->name,
                        run_dir, strerror(-e));
                goto out;
        }
        struct spawn_opts so = { .policy = c->policy, .args = args, .filter = &filter,
                                 .host_uid = uid, .stdout_fd = 1, .stderr_fd = 2 };
        /* Signals reach us through the loop, not as default actions; taken
         * before the start, so none is lost while the gadget starts. */
        signal(SIGPIPE, SIG_IGN);
        c->ev_int = evsignal_new(c->base, SIGINT, signal_cb, c);
        c->ev_term = evsignal_new(c->base, SIGTERM, signal_cb, c);
        if (!c->ev_int || !c->ev_term || event_add(c->ev_int, NULL) < 0 || event_add(c->ev_term, NULL) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": signal handling\n", c->policy->name);
                goto out;
        }
        if ((e = spawn_gadget(&so, &c->child, err, sizeof err)) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": %s\n", c->policy->name, err);
                goto out;
        }
        c->peer = peer_new(c->base, c->child.rpc_fd, c->policy, &handlers, c);
        if (!c->peer) {
                kill_worker(c);
                fprintf(stderr, "gadgetd: cannot start \"%s\": out of memory\n", c->policy->name);
                waitpid(c->child.pid, NULL, 0);
                goto out;
        }
        c->child.rpc_fd = -1; /* owned by the peer now */
        c->ev_report = event_new(c->base, c->child.report_fd, EV_READ | EV_PERSIST, report_cb, c);
        c->ev_timeout = evtimer_new(c->base, timeout_cb, c);
        c->ev_grace = evtimer_new(c->base, grace_cb, c);
        event_add(c->ev_report, NULL);
        event_base_dispatch(c->base);
        ret = finish(c);
out:
        if (c->peer)
                peer_free(c->peer, "the gadget ended");
        struct event *evs[] = { c->ev_report, c->ev_int, c->ev_term, c->ev_timeout, c->ev_grace };
        for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
                if (evs[i])
                        event_free(evs[i]);
        spawn_child_close(&c->child);
        uidpool_close(&pool);
        filter_free(&filter);
        return ret;
}

int run_main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "run-dir", required_argument, NULL, 'r' },
                { "uid-base", required_argument, NULL, 'u' },
                { "call", required_argument, NULL, 'c' },
                { 0 },
        };
        struct run_ctx c = { .child = { .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = -1 } };
        struct policy_errors errs = { 0 };
        const char *run_dir = "/run/gadgetd", *json = NULL;
        uid_t uid_base = UIDPOOL_DEFAULT_BASE;
        char **args = NULL;
        int opt, ret = RUN_EXIT_USAGE;

        /* "+": stop at the first non-option (the policy) so that --call
         * after it and "--" ARGS are seen in order below. */
        while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (opt) {
                case 'h': usage(stdout); return 0;
                case 'r': run_dir = optarg; break;
                case 'u': uid_base = (uid_t)strtoul(optarg, NULL, 10); break;
                default: usage(stderr); return RUN_EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return RUN_EXIT_USAGE;
        }
        const char *path = argv[optind++];
        for (; optind < argc; optind++) {
                if (strcmp(argv[optind], "--") == 0) {
                        args = &argv[optind + 1];
                        break;
                } else if (strcmp(argv[optind], "--call") == 0 && optind + 1 < argc && !c.method) {
                        c.method = argv[++optind];
                        if (optind + 1 < argc && strcmp(argv[optind + 1], "--") != 0)
                                json = argv[++optind];
                } else {
                        fprintf(stderr, "gadgetd run: unexpected argument \"%s\"\n", argv[optind]);
                        usage(stderr);
                        return RUN_EXIT_USAGE;
                }
        }
        if (c.method) {
                char jerr[256];
                if (validate_method_name(c.method) < 0) {
                        fprintf(stderr, "gadgetd run: \"%s\" is not a valid method name\n", c.method);
                        return RUN_EXIT_USAGE;
                }
                if (json ? json_to_value(json, strlen(json), &c.args, jerr, sizeof jerr) < 0
                         : !(c.args = value_new_null())) {
                        fprintf(stderr, "gadgetd run: bad JSON arguments: %s\n", jerr);
                        return RUN_EXIT_USAGE;
                }
        }
        if (policy_load(path, &c.policy, &errs) < 0) {
                for (size_t i = 0; i < errs.n; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                policy_errors_clear(&errs);
                goto out;
        }
        c.base = event_base_new();
        if (!c.base) {
                fprintf(stderr, "gadgetd: cannot create event loop\n");
                goto out;
        }
        ret = run_gadget(&c, args, run_dir, uid_base);
out:
        if (c.base)
                event_base_free(c.base);
        value_free(c.args);
        policy_free(c.policy);
        return ret;
}
