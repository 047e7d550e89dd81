/* run: `gadgetd run`, one gadget in its sandbox in the foreground, served by
 * the same unit and bindings code as the daemon, on its own small loop. */
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

#include "config.h"
#include "daemon.h"
#include "gadget.h"
#include "json.h"
#include "log.h"
#include "policy.h"
#include "unit.h"
#include "validate.h"
#include "value.h"

struct run_ctx {
        struct daemon *d;
        const char *method;          /* --call METHOD, or NULL */
        Gadget__Value *args;
        int exit;                    /* gadgetd run's exit status */
        bool answered;
};

static void call_done(void *arg, const Gadget__Value *res, int code, const char *message)
{
        struct unit *u = arg;
        struct run_ctx *c = u->d->run;
        c->answered = true;
        if (res) {
                char *json = json_from_value(res);
                printf("%s\n", json ? json : "null");
                fflush(stdout);
                free(json);
                c->exit = 0;
        } else {
                fprintf(stderr, "gadgetd: call %s failed: %s (error %d)\n", c->method, message, code);
                c->exit = 1;
        }
        if (u->state == UNIT_READY && u->peer)
                unit_stop(u, "the call is answered");
}

void run_unit_ready(struct run_ctx *c, struct unit *u)
{
        if (!c->method)
                return;
        int e = unit_call(u, c->method, c->args, NULL, 0, call_done, u);
        if (e == 0)
                return;
        if (e == -ENOENT)
                fprintf(stderr, "gadgetd: gadget \"%s\" has no method \"%s\"\n", u->policy->name, c->method);
        else
                fprintf(stderr, "gadgetd: cannot call %s: %s\n", c->method, strerror(-e));
        c->answered = true;
        c->exit = 1;
        unit_stop(u, "no such method");
}

void run_unit_exited(struct run_ctx *c, struct unit *u)
{
        int st = u->program_status;
        if (strncmp(u->cause, "cannot start: ", 14) == 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": %s\n", u->policy->name, u->cause + 14);
                c->exit = RUN_EXIT_START;
        } else if (c->method) {
                if (!c->answered) {
                        fprintf(stderr, "gadgetd: gadget \"%s\" ended before answering: %s\n", u->policy->name,
                                u->cause);
                        c->exit = 1;
                }
        } else if (WIFSIGNALED(st)) {
                fprintf(stderr, "gadgetd: gadget \"%s\" ended: %s\n", u->policy->name, u->cause);
                c->exit = 128 + WTERMSIG(st);
        } else {
                c->exit = WEXITSTATUS(st);
        }
        event_base_loopbreak(c->d->base);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
        struct unit *u = arg;
        /* PID 1 in the sandbox passes it on to the program. */
        if (u->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->child.pidfd, (int)sig, NULL, 0);
}

static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetd run [--state-dir DIR] [--run-dir DIR] [--uid-base N] [--limits-mode MODE]\n"
                   "                   [--allow-degraded-limits] POLICY [--call METHOD [JSON]] [-- ARGS...]\n"
                   "Runs the gadget of POLICY in its sandbox in the foreground, its bindings served.\n"
                   "  --call METHOD [JSON]  call METHOD once with JSON arguments, print the result, stop\n"
                   "  --state-dir DIR       kv stores and the audit log (default %s)\n"
                   "  --run-dir DIR         where the uid lock file lives (default %s)\n"
                   "  --uid-base N          first host uid for gadgets (default %u)\n"
                   "  --limits-mode MODE    auto (default), cgroup-v2, cgroup-v1 or rlimits\n"
                   "  --allow-degraded-limits  run even if MemoryMax or CPUQuota cannot be enforced\n"
                   "Exit status: the gadget's (128+signal if killed); with --call 0 or 1;\n"
                   "2 for a bad command line or policy, 125 if the sandbox could not be set up.\n",
                CONFIG_STATE_DIR, CONFIG_RUN_DIR, UIDPOOL_DEFAULT_BASE);
}

/* Starts the unit and runs the loop until it ends. */
static int run_gadget(struct daemon *d, struct policy *p, char **args)
{
        struct unit *u = unit_new(d, p);
        struct event *ev_int = NULL, *ev_term = NULL;
        if (!u) {
                policy_free(p);
                return RUN_EXIT_START;
        }
        u->args = args;
        d->units = u;
        /* Signals are taken before the start, so none is lost meanwhile. */
        ev_int = evsignal_new(d->base, SIGINT, signal_cb, u);
        ev_term = evsignal_new(d->base, SIGTERM, signal_cb, u);
        if (!ev_int || !ev_term || event_add(ev_int, NULL) < 0 || event_add(ev_term, NULL) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": signal handling\n", p->name);
                d->run->exit = RUN_EXIT_START;
        } else {
                d->run->exit = -1;
                unit_start(u);
                if (d->run->exit == -1)
                        event_base_dispatch(d->base);
        }
        if (ev_int)
                event_free(ev_int);
        if (ev_term)
                event_free(ev_term);
        return d->run->exit < 0 ? RUN_EXIT_START : d->run->exit;
}

/* Parses METHOD [JSON] of --call. */
static int parse_call(struct run_ctx *c, const char *json)
{
        char jerr[256];
        if (validate_method_name(c->method) < 0) {
                fprintf(stderr, "gadgetd run: \"%s\" is not a valid method name\n", c->method);
                return -EINVAL;
        }
        if (json ? json_to_value(json, strlen(json), &c->args, jerr, sizeof jerr) < 0
                 : !(c->args = value_new_null())) {
                fprintf(stderr, "gadgetd run: bad JSON arguments: %s\n", json ? jerr : "out of memory");
                return -EINVAL;
        }
        return 0;
}

int run_main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "state-dir", required_argument, NULL, 's' },
                { "run-dir", required_argument, NULL, 'r' },
                { "uid-base", required_argument, NULL, 'u' },
                { "limits-mode", required_argument, NULL, 'l' },
                { "allow-degraded-limits", no_argument, NULL, 'D' },
                { 0 },
        };
        struct run_ctx c = { 0 };
        struct daemon d = { .state_dir = CONFIG_STATE_DIR, .run_dir = CONFIG_RUN_DIR, .helper = { -1, -1 },
                            .audit_cfg = AUDIT_DEFAULT_CONFIG,
                            .uid_base = UIDPOOL_DEFAULT_BASE, .uids = { .lock_fd = -1 }, .run = &c };
        struct policy_errors errs = { 0 };
        struct policy *p = NULL;
        const char *json = NULL;
        char **args = NULL;
        int opt, ret = RUN_EXIT_USAGE;

        c.d = &d;
        /* "+": stop at the first non-option (the policy) so that --call
         * after it and "--" ARGS are seen in order below. */
        while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (opt) {
                case 'h': usage(stdout); return 0;
                case 's': d.state_dir = optarg; break;
                case 'r': d.run_dir = optarg; break;
                case 'u': d.uid_base = (uid_t)strtoul(optarg, NULL, 10); break;
                case 'l':
                        if (limiter_parse_mode(optarg, &d.limits_want) < 0) {
                                fprintf(stderr, "gadgetd run: --limits-mode: \"%s\" is not one of auto, "
                                        "cgroup-v2, cgroup-v1, rlimits\n", optarg);
                                return RUN_EXIT_USAGE;
                        }
                        break;
                case 'D': d.allow_degraded_limits = true; break;
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
        if (c.method && parse_call(&c, json) < 0)
                return RUN_EXIT_USAGE;
        if (policy_load(path, &p, &errs) < 0) {
                for (size_t i = 0; i < errs.n; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                policy_errors_clear(&errs);
                goto out;
        }
        log_set_level(L_WARN);
        ret = RUN_EXIT_START;
        if (!(d.base = event_base_new()) || daemon_core_open(&d) < 0) {
                policy_free(p);
                goto out;
        }
        ret = run_gadget(&d, p, args);
out:
        daemon_core_close(&d);
        if (d.base)
                event_base_free(d.base);
        value_free(c.args);
        return ret;
}
