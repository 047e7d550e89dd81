/* run: `gadgetd run`, one gadget in its sandbox in the foreground, served by
 * the same unit and bindings code as the daemon, on its own small loop. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <event2/event.h>

#include "casefile.h"
#include "config.h"
#include "learn.h"
#include "alarms/alarms.h"
#include "core/core.h"
#include "core/denials.h"
#include "spawn/spawn.h"
#include "contract.h"
#include "json.h"
#include "system/instance.h"
#include "system/log.h"
#include "system/timer.h"
#include "spawn/uidpool.h"
#include "policy.h"
#include "relay.h"
#include "sandbox_abi.h"
#include "validate.h"
#include "value.h"

struct run_ctx {
        struct event_base *base;
        struct core *core;
        const char *method;          /* --call METHOD, or NULL */
        Gadget__Value *args;
        int exit;                    /* gadgetd run's exit status */
        bool answered;
        bool ended;                  /* the gadget ended: stop once its output is relayed */
        struct relay *out, *err;     /* the program's stdout and stderr, relayed */
        const char *learn;           /* --learn FILE: the policy to write, or NULL */
        struct event *ev_drain;      /* the limit on waiting for their end */
        struct casefile *cf;         /* gadgetd test: the file's calls, or NULL */
        const char *file;            /* its path, for the report */
        size_t next;                 /* the next of its calls */
        unsigned failed;             /* of its calls, those answered otherwise than expected */
};

/* How long gadgetd run waits, after the gadget ended, for the last of its
 * output (every process of the sandbox is gone by then: only a descendant
 * that holds the pipe somewhere else could keep it open). */
#define RUN_DRAIN_MS 2000

static void case_next(struct run_ctx *c, struct unit *u);
static void call_done(void *arg, uint64_t tag, const Gadget__Value *res, int code, const char *message);

/* gadgetd test: a call's answer against the one its lines want, shown. */
static void case_report(struct run_ctx *c, const Gadget__Value *res, int code, const char *message)
{
        const struct case_call *k = &c->cf->calls[c->next++];
        char *got = res ? json_from_value(res) : NULL;
        bool ok = k->expect ? res && casefile_equal(k->expect, res) : !res && code == k->code;
        if (!ok) {
                c->failed++;
                printf("FAIL %s:%u: call %s: ", c->file, k->line, k->method);
                if (k->expect)
                        printf("expected %s, ", k->expect_json);
                else
                        printf("expected error %s (%d), ", gadget_error_name((unsigned)k->code), k->code);
                if (res)
                        printf("got %s\n", got ? got : "a value");
                else
                        printf("got error %s (%d): %s\n", gadget_error_name((unsigned)code), code, message);
        } else {
                printf("ok   %s:%u: call %s\n", c->file, k->line, k->method);
        }
        fflush(stdout);
        free(got);
}

static void case_done(struct run_ctx *c, struct unit *u, const Gadget__Value *res, int code, const char *message)
{
        case_report(c, res, code, message);
        case_next(c, u);
}

/* Starts the file's next call, or ends the run once all are answered. */
static void case_next(struct run_ctx *c, struct unit *u)
{
        char msg[400];
        while (c->next < c->cf->n_calls) {
                const struct case_call *k = &c->cf->calls[c->next];
                const struct call_req q = { .method = k->method, .args = k->args, .done = call_done, .cbdata = c };
                int code = calls_start(u, &q, msg, sizeof msg);
                if (code == 0)
                        return;
                /* Refused before it reached the gadget: its answer all the
                 * same (reported here, not by recursion: a file of refused
                 * calls is a loop, not a deep stack). */
                case_report(c, NULL, code, msg);
        }
        c->answered = true;
        c->exit = c->failed ? 1 : 0;
        if (unit_is_ready(u))
                unit_stop(u, "the test file's calls are answered");
}

static void call_done(void *arg, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct run_ctx *c = arg;
        struct unit *u = core_first(c->core);
        if (c->cf) {
                case_done(c, u, res, code, message);
                return;
        }
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
        if (unit_is_ready(u))
                unit_stop(u, "the call is answered");
}

/* gadgetd run's hooks of its one unit (struct unit_hooks). */
static void unit_ready(void *arg, struct unit *u)
{
        struct run_ctx *c = arg;
        if (c->cf) {
                /* A restart's (Restart=) ready: the calls go on where they were. */
                if (c->next == 0)
                        case_next(c, u);
                return;
        }
        if (!c->method)
                return;
        char msg[400];
        const struct call_req q = { .method = c->method, .args = c->args, .done = call_done, .cbdata = c };
        int code = calls_start(u, &q, msg, sizeof msg);
        if (code == 0)
                return;
        fprintf(stderr, "gadgetd: %s\n", msg);
        c->answered = true;
        c->exit = 1;
        unit_stop(u, code == GADGET_ENOMETHOD ? "no such method" : "the call could not be made");
}

static void drain_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct run_ctx *c = arg;
        event_base_loopbreak(c->base);
}

/* The loop ends once the gadget ended and both relays reached their end. */
static void relay_closed(void *arg)
{
        struct run_ctx *c = arg;
        if (c->ended && !relay_is_open(c->out) && !relay_is_open(c->err))
                event_base_loopbreak(c->base);
}

/* The pipes the program's stdout and stderr go to: gadgetd run copies
 * them to its own, so the program never holds the caller's files. Sets
 * the write ends for the spawn (the caller closes them). 0 or -errno. */
static int output_pipes(void *arg, int *out_w, int *err_w)
{
        struct run_ctx *c = arg;
        int e;
        if (c->out || c->err)
                return -EALREADY; /* gadgetd run starts its gadget once */
        if ((e = relay_open(c->base, STDOUT_FILENO, relay_closed, c, &c->out, out_w)) < 0)
                return e;
        if ((e = relay_open(c->base, STDERR_FILENO, relay_closed, c, &c->err, err_w)) < 0) {
                close(*out_w);
                return e;
        }
        return 0;
}

static void unit_exited(void *arg, struct unit *u)
{
        struct run_ctx *c = arg;
        int st = unit_program_status(u);
        const char *name = unit_name(u), *cause = unit_cause(u);
        if (strncmp(cause, "cannot start: ", 14) == 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": %s\n", name, cause + 14);
                c->exit = RUN_EXIT_START;
        } else if (c->cf) {
                if (!c->answered) {
                        printf("FAIL %s: gadget \"%s\" ended before its calls were answered (%zu of %zu): %s\n",
                               c->file, name, c->next, c->cf->n_calls, cause);
                        c->exit = 1;
                }
        } else if (c->method) {
                if (!c->answered) {
                        fprintf(stderr, "gadgetd: gadget \"%s\" ended before answering: %s\n", name, cause);
                        c->exit = 1;
                }
        } else if (WIFSIGNALED(st)) {
                fprintf(stderr, "gadgetd: gadget \"%s\" ended: %s\n", name, cause);
                c->exit = 128 + WTERMSIG(st);
        } else {
                c->exit = WEXITSTATUS(st);
        }
        c->ended = true;
        if (!relay_is_open(c->out) && !relay_is_open(c->err))
                event_base_loopbreak(c->base);
        else if (!(c->ev_drain = evtimer_new(c->base, drain_timeout, c)) || timer_arm_ms(c->ev_drain, RUN_DRAIN_MS) < 0)
                event_base_loopbreak(c->base);
}

static void unit_stopped(void *arg, struct unit *u)
{
        /* gadgetd run's unit ends by unit_exited: a stop is one way there. */
}

static void unit_log_added(void *arg, struct unit *u, size_t lines)
{
        /* gadgetd run relays the output; it keeps no log for a client. */
}

/* The signals gadgetd run forwards, read from its signalfd: PID 1 in the
 * sandbox passes each on to the program. */
static void signal_cb(evutil_socket_t fd, short what, void *arg)
{
        struct signalfd_siginfo si[8];
        ssize_t n;
        while ((n = read(fd, si, sizeof si)) > 0)
                for (size_t i = 0; i < (size_t)n / sizeof *si; i++)
                        unit_signal(arg, (int)si[i].ssi_signo);
}

/* The signals ignored when gadgetd run started (nohup, say), from
 * /proc/self/status's SigIgn (one read, where a sigaction per signal
 * would be 45): they stay ignored, and the gadget does not get them from
 * gadgetd run either. -errno if the line cannot be read. */
static int ignored_at_start(sigset_t *set)
{
        char buf[4096];
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
        if (fd >= 0)
                close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        const char *line = strstr(buf, "\nSigIgn:\t");
        char *end;
        if (!line)
                return -EIO;
        errno = 0;
        unsigned long long mask = strtoull(line + 9, &end, 16);
        if (errno || end == line + 9 || *end != '\n')
                return -EIO;
        sigemptyset(set);
        for (int sig = 1; sig <= 64 && sig < NSIG; sig++)
                if (mask & 1ull << (sig - 1))
                        sigaddset(set, sig);
        return 0;
}

/* Every signal that would end gadgetd run by default (sandbox.h's list
 * and the real-time ones) is taken and forwarded instead, so that neither
 * gadgetd run nor its gadget ends without a word: the gadget decides, and
 * gadgetd run reports how it ended. They are blocked and read from a
 * signalfd (three system calls, where a handler each cost two sigactions
 * to set and one more to give back at the end); the mask a caller may have
 * left is replaced by theirs. Why blocking is safe: gadgetd's other
 * threads block every signal anyway (thread.h); the sandbox's PID 1, which
 * inherits the mask, blocks the same ones itself, and the program starts
 * with none blocked (init_reset_signals). Taken before the start, so none
 * is lost meanwhile. The signalfd: *fd; its event: *ev. */
static int take_signals(struct event_base *base, struct unit *u, int *fd, struct event **ev)
{
        static const int fixed[] = { SANDBOX_FORWARDED_SIGNALS };
        sigset_t ign, set;
        if (ignored_at_start(&ign) < 0)
                return -EIO;
        sigemptyset(&set);
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
                if (!sigismember(&ign, fixed[i]))
                        sigaddset(&set, fixed[i]);
        for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
                if (!sigismember(&ign, sig))
                        sigaddset(&set, sig);
        if (sigprocmask(SIG_SETMASK, &set, NULL) < 0 ||
            (*fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
                return -errno;
        if (!(*ev = event_new(base, *fd, EV_READ | EV_PERSIST, signal_cb, u)) || event_add(*ev, NULL) < 0)
                return -ENOMEM;
        return 0;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetd run [--state-dir DIR] [--run-dir DIR] [--uid-base N] [--uid-count N]\n"
                   "                   [--limits-mode MODE] [--allow-degraded-limits]\n"
                   "                   [--learn FILE] POLICY [--call METHOD [JSON]] [-- ARGS...]\n"
                   "Runs the gadget of POLICY in its sandbox in the foreground, its bindings served.\n"
                   "  --call METHOD [JSON]  call METHOD once with JSON arguments, print the result, stop\n"
                   "  --learn FILE          note what the program looks for and cannot find or do, and\n"
                   "                        write to FILE the policy it would need, a comment on each\n"
                   "                        line added saying why (the seccomp filter stays as it is)\n"
                   "  --state-dir DIR       kv stores and the audit log (default %s)\n"
                   "  --run-dir DIR         runtime directory (default %s)\n"
                   "  --uid-base N          first host uid for gadgets (default %u)\n"
                   "  --uid-count N         how many host uids from there (default %u; held host-wide\n"
                   "                        in %s with every other gadgetd)\n"
                   "  --limits-mode MODE    auto (default), cgroup-v2, cgroup-v1 or rlimits\n"
                   "  --allow-degraded-limits  run even if MemoryMax or CPUQuota cannot be enforced\n"
                   "Exit status: the gadget's (128+signal if killed); with --call 0 or 1;\n"
                   "2 for a bad command line or policy, 125 if the sandbox could not be set up\n"
                   "(or a gadgetd daemon holds the state directory).\n"
                   "The program's output is relayed through pipes; signals that would end gadgetd run\n"
                   "(HUP, INT, QUIT, TERM, USR1, USR2, ALRM, real-time, ...) are forwarded to it.\n",
                CONFIG_STATE_DIR, CONFIG_RUN_DIR, UIDPOOL_DEFAULT_BASE, UIDPOOL_DEFAULT_COUNT, UIDPOOL_LOCK_FILE);
}

/* gadgetd run's loop. EVENT_BASE_FLAG_IGNORE_ENV: libevent's EVENT_*
 * variables (a backend left out, a debug print) are for its own tests;
 * reading each is four system calls here (getuid, geteuid, getgid,
 * getegid: whether to trust the environment), 16 per run. */
static struct event_base *run_base(void)
{
        struct event_config *cfg = event_config_new();
        struct event_base *base = NULL;
        if (cfg && event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV) == 0)
                base = event_base_new_with_config(cfg);
        if (cfg)
                event_config_free(cfg);
        return base;
}

/* The core of gadgetd run: one unit, whose events come to c. */
static int open_core(struct run_ctx *c, const struct core_config *cc)
{
        const struct unit_hooks hooks = { .ready = unit_ready, .exited = unit_exited, .stopped = unit_stopped,
                                          .log_added = unit_log_added, .output_pipes = output_pipes,
                                          .await_hello = c->method || c->cf, .arg = c };
        int e = core_open(cc, &hooks, &c->core);
        if (e < 0)
                return e;
        /* The alarms and Schedule= calls listen to the unit. */
        if ((e = alarms_listen(c->core)) < 0)
                log_msg(L_ERR, NULL, "alarms: %s", strerror(-e));
        return e;
}

/* Starts the unit and runs the loop until it ends. */
static int run_gadget(struct run_ctx *c, struct policy *p, char **args)
{
        const struct unit_origin o = { .args = args };
        struct unit *u = core_add(c->core, p, &o);
        struct event *ev_sig = NULL;
        int sig_fd = -1;
        if (!u)
                return RUN_EXIT_START;
        if (take_signals(c->base, u, &sig_fd, &ev_sig) < 0) {
                fprintf(stderr, "gadgetd: cannot start \"%s\": signal handling\n", unit_name(u));
                c->exit = RUN_EXIT_START;
        } else {
                c->exit = -1;
                unit_start(u);
                if (c->exit == -1)
                        event_base_dispatch(c->base);
        }
        /* The signals stay blocked: gadgetd run ends next (one that comes
         * now is the caller's for gadgetd run, not the gadget's, and it is
         * discarded with gadgetd run). */
        if (ev_sig)
                event_free(ev_sig);
        if (sig_fd >= 0)
                close(sig_fd);
        return c->exit < 0 ? RUN_EXIT_START : c->exit;
}

/* --learn FILE: the policy the run found its program needs (learn.c). A
 * program whose interpreter was missing did not run: its Exec='s
 * interpreter, as this host names it, is what it looked for. */
static int write_learned(struct run_ctx *c, const char *path)
{
        struct unit *u = core_first(c->core);
        if (!u)
                return -ENOENT;
        const struct policy *p = unit_policy(u);
        const struct learned *l = unit_learned_paths(u);
        struct unit_info in;
        unit_info(u, &in);
        struct learned more = { 0 };
        struct spawn_learned *v = NULL;
        char interp[SANDBOX_REPORT_TEXT_MAX + 1], err[600];
        if (strstr(unit_cause(u), "its interpreter") && policy_interpreter(p->exec, interp, sizeof interp) > 0 &&
            (v = calloc(l->n + 1, sizeof *v))) {
                if (l->n)
                        memcpy(v, l->v, l->n * sizeof *v);
                v[l->n] = (struct spawn_learned){ .nr = (uint32_t)SYS_execve };
                snprintf(v[l->n].path, sizeof v[l->n].path, "%s", interp);
                snprintf(v[l->n].interpreter_of, sizeof v[l->n].interpreter_of, "%s", p->exec);
                more = (struct learned){ l->n + 1, v };
                l = &more;
        }
        int e = learn_write(c->learn, path, p, l, in.denials, err, sizeof err);
        free(v);
        if (e < 0)
                fprintf(stderr, "gadgetd run: --learn %s\n", err);
        else
                fprintf(stderr, "gadgetd run: what it needs is in %s\n", c->learn);
        return e;
}

/* Parses METHOD [JSON] of --call. */
static int parse_call(struct run_ctx *c, const char *json)
{
        char jerr[256];
        if (!gadget_method_name_ok(c->method)) {
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

/* The options gadgetd run and gadgetd test share: the sandbox's host uids
 * and limits. */
#define SANDBOX_OPTS                                                    \
        { "uid-base", required_argument, NULL, 'u' },                   \
        { "uid-count", required_argument, NULL, 'U' },                  \
        { "limits-mode", required_argument, NULL, 'l' },                \
        { "allow-degraded-limits", no_argument, NULL, 'D' }

/* One of SANDBOX_OPTS, opt, taken into cc: 1; 0 if opt is none of them;
 * -1 for a bad value (said why). */
static int sandbox_opt(const char *cmd, int opt, struct core_config *cc)
{
        switch (opt) {
        case 'u': return config_opt_uid_base(cmd, optarg, &cc->uid_base) < 0 ? -1 : 1;
        case 'U': return config_opt_uid_count(cmd, optarg, &cc->uid_count) < 0 ? -1 : 1;
        case 'l': return config_opt_limits_mode(cmd, optarg, &cc->limits_want) < 0 ? -1 : 1;
        case 'D': cc->allow_degraded_limits = true; return 1;
        default: return 0;
        }
}

/* Whether cc's host uids are a range the pool can hold (else said why). */
static bool uid_range_ok(const char *cmd, const struct core_config *cc)
{
        if (uidpool_check_range(cc->uid_base, cc->uid_count) == 0)
                return true;
        fprintf(stderr, "%s: --uid-base %u --uid-count %u: not a range of host uids above 0 "
                "(at most %u of them, ending below 4294967294)\n", cmd, (unsigned)cc->uid_base, cc->uid_count,
                UIDPOOL_MAX_COUNT);
        return false;
}

/* What a run or test opened, closed. */
static void run_close(struct run_ctx *c, int state_lock)
{
        core_close(c->core);
        relay_free(c->out);
        relay_free(c->err);
        if (c->ev_drain)
                event_free(c->ev_drain);
        if (c->base)
                event_base_free(c->base);
        value_free(c->args);
        if (state_lock >= 0)
                close(state_lock);
}

int run_main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "state-dir", required_argument, NULL, 's' },
                { "run-dir", required_argument, NULL, 'r' },
                { "learn", required_argument, NULL, 'L' },
                SANDBOX_OPTS,
                { 0 },
        };
        struct run_ctx c = { 0 };
        struct core_config cc = { .state_dir = CONFIG_STATE_DIR, .audit = AUDIT_DEFAULT_CONFIG,
                                  .uid_base = UIDPOOL_DEFAULT_BASE, .uid_count = UIDPOOL_DEFAULT_COUNT,
                                  .no_approver = "gadgetd run has no one to approve calls (Approve=): denied" };
        int state_lock = -1;
        struct policy_errors errs = { 0 };
        struct policy *p = NULL;
        const char *json = NULL;
        char **args = NULL;
        int opt, ret = RUN_EXIT_USAGE;

        /* "+": stop at the first non-option (the policy) so that --call
         * after it and "--" ARGS are seen in order below. */
        while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (opt) {
                case 'h': usage(stdout); return 0;
                case 's': cc.state_dir = optarg; break;
                case 'r': break; /* nothing of gadgetd run lives there now */
                case 'L': c.learn = optarg; cc.learn = true; break;
                default: {
                        int k = sandbox_opt("gadgetd run", opt, &cc);
                        if (k > 0)
                                break;
                        if (k == 0)
                                usage(stderr);
                        return RUN_EXIT_USAGE;
                }
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return RUN_EXIT_USAGE;
        }
        if (!uid_range_ok("gadgetd run", &cc))
                return RUN_EXIT_USAGE;
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
        for (size_t i = 0; i < p->n_warnings; i++)
                fprintf(stderr, "%s\n", p->warnings[i]);
        log_set_level(L_WARN);
        ret = RUN_EXIT_START;
        /* Shared with other gadgetd run processes (tests and benchmarks run
         * many at once, the same gadget too), never with a daemon. */
        if ((state_lock = instance_lock_state(cc.state_dir, true)) < 0 || !(c.base = cc.base = run_base()) ||
            open_core(&c, &cc) < 0) {
                policy_free(p);
                goto out;
        }
        ret = run_gadget(&c, p, args);
        if (c.learn && write_learned(&c, path) < 0 && ret == 0)
                ret = RUN_EXIT_START;
out:
        run_close(&c, state_lock);
        return ret;
}

/* gadgetd test's fake binding answers: the file's, in turn. */
static bool fake_answer(void *arg, const char *binding, const char *op, const Gadget__Value **res, int *code,
                        char *msg, size_t len)
{
        struct run_ctx *c = arg;
        const struct case_fake *f = casefile_fake(c->cf, binding, op);
        if (!f)
                return false;
        *res = f->value;
        *code = f->code;
        snprintf(msg, len, "%s", f->message ? f->message : "");
        return true;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void test_usage(FILE *f)
{
        fprintf(f, "usage: gadgetd test [--uid-base N] [--uid-count N] [--limits-mode MODE]\n"
                   "                    [--allow-degraded-limits] FILE\n"
                   "Runs the gadget of FILE's policy in its sandbox, as gadgetd run does, on a state\n"
                   "directory of its own that is removed at the end (an empty kv store), makes FILE's\n"
                   "calls one after another and compares each answer with the one FILE wants.\n"
                   "FILE's lines (# comments):\n"
                   "  policy FILE            the gadget's policy, relative to FILE's folder\n"
                   "  call METHOD [JSON]     a call; JSON its arguments (default null)\n"
                   "  expect JSON            the call's result (maps in any order)\n"
                   "  error CODE             the call fails with CODE: a name (not_found) or number\n"
                   "  fake BINDING OP JSON   the gadget's calls of BINDING's OP are answered JSON,\n"
                   "  fake BINDING OP error CODE [MESSAGE]   or fail, and are not made (wherever\n"
                   "                         the line stands); several fakes of one OP answer in\n"
                   "                         turn, the last one from then on\n"
                   "Bindings without a fake are real (http requests are made; gadget bindings\n"
                   "fail unavailable: only this gadget runs).\n"
                   "Prints \"ok FILE:LINE\" or \"FAIL FILE:LINE: ...\" per call.\n"
                   "Exit status: 0 if every answer was the one wanted, 1 if not, 2 for a bad\n"
                   "command line, FILE or policy, 125 if the sandbox could not be set up.\n");
}

int test_main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                SANDBOX_OPTS,
                { 0 },
        };
        struct run_ctx c = { 0 };
        struct casefile cf;
        struct core_config cc = { .audit = AUDIT_DEFAULT_CONFIG, .uid_base = UIDPOOL_DEFAULT_BASE,
                                  .uid_count = UIDPOOL_DEFAULT_COUNT, .fake = fake_answer, .fake_arg = &c,
                                  .no_approver = "gadgetd test has no one to approve calls (Approve=): denied" };
        struct policy_errors errs = { 0 };
        struct policy *p = NULL;
        char err[600], state[64] = "";
        int opt, ret = RUN_EXIT_USAGE, state_lock = -1;

        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (opt) {
                case 'h': test_usage(stdout); return 0;
                default: {
                        int k = sandbox_opt("gadgetd test", opt, &cc);
                        if (k > 0)
                                break;
                        if (k == 0)
                                test_usage(stderr);
                        return RUN_EXIT_USAGE;
                }
                }
        }
        if (optind + 1 != argc) {
                test_usage(stderr);
                return RUN_EXIT_USAGE;
        }
        if (!uid_range_ok("gadgetd test", &cc))
                return RUN_EXIT_USAGE;
        c.file = argv[optind];
        if (casefile_read(c.file, &cf, err, sizeof err) < 0) {
                fprintf(stderr, "gadgetd test: %s\n", err);
                return RUN_EXIT_USAGE;
        }
        c.cf = &cf;
        if (policy_load(cf.policy, &p, &errs) < 0) {
                for (size_t i = 0; i < errs.n; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                policy_errors_clear(&errs);
                goto out;
        }
        /* A fake of a binding the policy lacks would never answer: a typo. */
        for (size_t i = 0; i < cf.n_fakes; i++)
                if (!policy_binding_find(p, cf.fakes[i].binding)) {
                        fprintf(stderr, "gadgetd test: %s:%u: no binding %s in %s\n", c.file, cf.fakes[i].line,
                                cf.fakes[i].binding, cf.policy);
                        policy_free(p);
                        goto out;
                }
        log_set_level(L_WARN);
        ret = RUN_EXIT_START;
        /* A state directory of this run's own: the kv store starts empty
         * and nothing of it outlives the test. */
        const char *tmp = getenv("TMPDIR");
        snprintf(state, sizeof state, "%s/gadgetd-test-state-XXXXXX", tmp && *tmp == '/' && strlen(tmp) < 32 ? tmp : "/tmp");
        if (!mkdtemp(state)) {
                fprintf(stderr, "gadgetd test: cannot make a state directory in %s: %s\n", state, strerror(errno));
                state[0] = '\0';
                policy_free(p);
                goto out;
        }
        cc.state_dir = state;
        if ((state_lock = instance_lock_state(cc.state_dir, true)) < 0 || !(c.base = cc.base = run_base()) ||
            open_core(&c, &cc) < 0) {
                policy_free(p);
                goto out;
        }
        ret = run_gadget(&c, p, NULL);
        if (ret == 0 || ret == 1)
                printf("%s: %zu calls, %u failed\n", c.file, cf.n_calls, c.failed);
        if (ret == 0 && c.failed)
                ret = 1;
out:
        run_close(&c, state_lock);
        if (state[0])
                nftw(state, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        casefile_free(&cf);
        return ret;
}
