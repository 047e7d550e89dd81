/* unit: starting, watching and restarting one gadget in the daemon. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bindings/bindings.h"
#include "core_int.h"
#include "contract.h"
#include "system/log.h"
#include "link/peer.h"
#include "policy.h"
#include "spawn/spare.h"
#include "spawn/uidpool.h"
#include "system/monotime.h"

#define LIMITS_CHECK_MS 1000     /* how often the limit counters are read */

/* gadgetd run's unit: one life (struct unit_hooks). */
static bool one_life(const struct unit *u)
{
        return u->hooks->output_pipes != NULL;
}



static void timer_cb(evutil_socket_t fd, short what, void *arg);
static void limits_cb(evutil_socket_t fd, short what, void *arg);
static void runtime_cb(evutil_socket_t fd, short what, void *arg);
static void start_timeout_cb(evutil_socket_t fd, short what, void *arg);

/* The policy's value, else gadgetd's, else the built-in default. */
static uint64_t setting(uint64_t policy, uint64_t daemon, uint64_t builtin)
{
        return policy ? policy : daemon ? daemon : builtin;
}

struct unit *unit_new(struct core *c, struct policy *policy)
{
        struct unit *u = calloc(1, sizeof *u);
        if (!u)
                return NULL;
        u->core = c;
        u->hooks = &c->hooks;
        u->policy = policy;
        unit_set_state(u, UNIT_STOPPED);
        u->child = (struct spawn_child){ .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = -1, .go_fd = -1 };
        u->out_fd = u->err_fd = -1;
        TAILQ_INIT(&u->pending);
        logbuf_init(&u->log);
        limiter_run_init(&u->limits);
        u->ev_timer = evtimer_new(c->base, timer_cb, u);
        u->ev_limits = event_new(c->base, -1, EV_PERSIST, limits_cb, u);
        u->ev_runtime = evtimer_new(c->base, runtime_cb, u);
        u->ev_logwin = evtimer_new(c->base, unit_output_window_cb, u);
        u->ev_start = evtimer_new(c->base, start_timeout_cb, u);
        u->bind = bindings_new(&c->bindings, policy);
        logbuf_budget_init(&u->log_budget, setting(policy->log_lines, c->cfg.log_lines, LOGBUF_DEFAULT_LINES),
                           setting(policy->log_bytes, c->cfg.log_bytes, LOGBUF_DEFAULT_BYTES));
        if (!u->bind || !u->ev_timer || !u->ev_limits || !u->ev_runtime || !u->ev_logwin || !u->ev_start ||
            unit_events_created(u) < 0) {
                bindings_free(u->bind);
                struct event *evs[] = { u->ev_timer, u->ev_limits, u->ev_runtime, u->ev_logwin, u->ev_start };
                for (size_t i = 0; i < 5; i++)
                        if (evs[i])
                                event_free(evs[i]);
                free(u);
                return NULL;
        }
        return u;
}

/* Releases everything of the running worker (it is dead or being killed). */
static void drop_worker(struct unit *u, const char *gone)
{
        bindings_orphan(u->bind);
        if (u->peer) {
                /* Callbacks of failing calls run inside peer_free: they must
                 * not see the peer any more. */
                struct peer *p = u->peer;
                u->peer = NULL;
                peer_free(p, gone);
        }
        struct event **evs[] = { &u->ev_report, &u->ev_out, &u->ev_err };
        for (size_t i = 0; i < 3; i++)
                if (*evs[i]) {
                        event_free(*evs[i]);
                        *evs[i] = NULL;
                }
        if (u->out_fd >= 0)
                close(u->out_fd);
        if (u->err_fd >= 0)
                close(u->err_fd);
        u->out_fd = u->err_fd = -1;
        /* Why apart from the unit: 4 KiB that only a running gadget needs
         * (a declared, idle one costs little). */
        free(u->lines);
        u->lines = NULL;
        spawn_child_close(&u->child);
        u->child.pid = -1;
        event_del(u->ev_limits);
        event_del(u->ev_runtime);
        event_del(u->ev_start);
        limiter_end(&u->limits);
        if (u->have_uid) {
                uidpool_release(&u->core->uids, u->uid);
                u->have_uid = false;
        }
}

void unit_free(struct unit *u)
{
        if (!u)
                return;
        if (u->child.pid > 0) {
                if (u->child.pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, u->child.pidfd, SIGKILL, NULL, 0);
                waitpid(u->child.pid, NULL, 0);
        }
        unit_events_going(u);
        unit_wake_done(u);
        drop_worker(u, "gadgetd is stopping");
        calls_unit_gone(u);
        unit_lease_gone(u);
        unit_output_end(u);
        bindings_free(u->bind);
        unit_events_freed(u);
        event_free(u->ev_timer);
        event_free(u->ev_limits);
        event_free(u->ev_runtime);
        event_free(u->ev_logwin);
        event_free(u->ev_start);
        if (u->ev_idle)
                event_free(u->ev_idle);
        logbuf_free(&u->log);
        policy_free(u->policy);
        free(u->kept_errors);
        free(u);
}

void unit_kill(struct unit *u, const char *why)
{
        if (why && !u->cause[0])
                snprintf(u->cause, sizeof u->cause, "%s", why);
        if (u->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->child.pidfd, SIGKILL, NULL, 0);
        limiter_kill(&u->limits);
}

/* Describes a wait status the way operators read it. */
static void describe_status(int status, char *out, size_t len)
{
        if (WIFEXITED(status)) {
                snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) {
                snprintf(out, len, "seccomp violation (SIGSYS)");
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) {
                snprintf(out, len, "CPU time limit (SIGXCPU)");
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
                snprintf(out, len, "file size limit (SIGXFSZ)");
        } else if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                const char *s = sigabbrev_np(sig);
                if (s)
                        snprintf(out, len, "killed by signal SIG%s", s);
                else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
                        snprintf(out, len, "killed by signal SIGRTMIN+%d", sig - SIGRTMIN);
                else
                        snprintf(out, len, "killed by signal %d", sig);
        } else {
                snprintf(out, len, "ended (status 0x%x)", (unsigned)status);
        }
}

/* The end of a stop: removes an unloaded unit from the registry (and
 * frees it), restarts one whose restart waited for the stop, then tells
 * the owner. */
static void stopped(struct unit *u)
{
        struct core *c = u->core;
        /* Another node may run it now (not when it starts again here, nor
         * while it is idle here: calls are forwarded to this node, which
         * starts it). */
        if (u->remove_when_stopped || c->stopping || (!u->restart_pending && !u->dormant))
                unit_lease_release(u);
        if (!u->remove_when_stopped && !c->stopping)
                unit_lease_stopped(u);
        if (u->remove_when_stopped) {
                core_unlink(c, u);
                log_msg(L_INFO, u->policy->name, "unloaded");
                c->hooks.stopped(c->hooks.arg, u);
                unit_free(u);
                return;
        }
        if (u->restart_pending && !c->stopping) {
                u->restart_pending = false;
                backoff_reset(&u->backoff);
                u->restarts++;
                unit_start(u);
        }
        c->hooks.stopped(c->hooks.arg, u);
}

/* Decides what follows an end: stopped, failed, parked or a restart. */
static void after_exit(struct unit *u, int status)
{
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !u->cause[0];
        uint64_t ran = unit_uptime_ms(u);
        char what[200];

        describe_status(status, what, sizeof what);
        if (!u->cause[0])
                snprintf(u->cause, sizeof u->cause, "%s", what);
        memcpy(u->last_cause, u->cause, sizeof u->last_cause);
        log_msg(clean || !u->want_running || one_life(u) ? L_INFO : L_WARN, u->policy->name, "%s", u->cause);
        if (one_life(u)) { /* gadgetd run: no restarts */
                unit_set_state(u, clean ? UNIT_STOPPED : UNIT_FAILED);
                u->hooks->exited(u->hooks->arg, u);
                return;
        }
        if (!u->want_running) {
                bool idle = u->idling && !u->remove_when_stopped;
                unit_set_state(u, UNIT_STOPPED);
                if (idle)
                        unit_idle_enter(u);
                stopped(u); /* may free u, never when idle */
                if (idle)
                        unit_idle_stopped(u);
                return;
        }
        /* Its lease lost: it starts again only once this node holds it
         * again, with no backoff (the other node may run it meanwhile). */
        if (unit_lease_wait(u))
                return;
        /* A gadget killed for a hang (timeout) or a limit is not clean:
         * on-failure restarts it, no leaves it failed. */
        enum policy_restart r = u->policy->restart;
        if (!(r == POLICY_RESTART_ALWAYS || (r == POLICY_RESTART_ON_FAILURE && !clean))) {
                unit_set_state(u, clean ? UNIT_STOPPED : UNIT_FAILED);
                return;
        }
        int64_t delay = backoff_failed(&u->backoff, ran);
        if (delay < 0) {
                unit_set_state(u, UNIT_FAILED);
                char was[sizeof u->cause];
                memcpy(was, u->cause, sizeof was);
                snprintf(u->cause, sizeof u->cause, "keeps crashing (%u times in a row): %.200s",
                         u->backoff.quick, was);
                log_msg(L_ERR, u->policy->name, "parked as failed: %s", u->cause);
                return;
        }
        log_msg(L_INFO, u->policy->name, "restarting in %lld ms", (long long)delay);
        unit_set_state(u, UNIT_STARTING);
        /* The loop's cached time may be from before the end: count from now,
         * so the promised delay is a lower bound. */
        event_base_update_cache_time(u->core->base);
        timer_arm_ms(u->ev_timer, (uint64_t)delay);
        /* The next start only has to start the program. */
        unit_prewarm(u);
}

/* The report pipe: the program's wait status, then end of file when PID 1
 * of the sandbox is gone (and with it every process in it). A report
 * refused is a hostile sandbox: it is logged once and the worker killed,
 * so the wait for it below is short. */
static void worker_ended(struct unit *u);

static void report_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        int status = 0, pstatus = 0;
        char msg[256];
        int r = spawn_read_report(&u->child, &status, msg, sizeof msg);
        if (r == SPAWN_REPORT_STATUS) {
                u->program_status = status;
                u->have_program_status = true;
                return;
        }
        if (r > 0 || r == -EAGAIN)
                return;
        if (r == -EPROTO) {
                log_msg(L_ERR, u->policy->name, "sandbox report refused: %s", msg);
                unit_kill(u, "sandbox report refused");
        }
        while (waitpid(u->child.pid, &pstatus, 0) < 0 && errno == EINTR)
                ;
        if (!u->have_program_status)
                u->program_status = pstatus;
        u->have_program_status = false;
        /* The results it wrote before its end may still wait in its
         * link: they are read first (its end of file), within a bound. */
        if (u->peer && peer_state(u->peer) != PEER_CLOSED && peer_pending(u->peer)) {
                event_del(u->ev_report);
                u->ending = true;
                timer_arm_ms(u->ev_timer, UNIT_END_READ_MS);
                return;
        }
        worker_ended(u);
}

/* The worker is gone and its link read to the end: what follows its end. */
static void worker_ended(struct unit *u)
{
        char how[200], gone[400];
        u->ending = false;
        describe_status(u->program_status, how, sizeof how);
        /* The last limit hits, and whether a limit ended it. */
        limiter_check(&u->limits, u->policy, u->core->audit);
        if (!u->cause[0])
                limiter_cause(&u->limits, u->program_status, how, u->cause, sizeof u->cause);
        /* A call still in flight is told, never lost. */
        if (u->state == UNIT_STOPPING && u->stop_killed)
                snprintf(gone, sizeof gone, "gadget \"%s\" stopped while the call ran (%.200s: not answered "
                         "within the stop's grace of %u ms)", u->policy->name, u->cause[0] ? u->cause : how,
                         (unsigned)UNIT_STOP_GRACE_MS);
        else if (u->state == UNIT_STOPPING)
                snprintf(gone, sizeof gone, "gadget \"%s\" stopped while the call ran (%.200s)", u->policy->name,
                         u->cause[0] ? u->cause : how);
        else
                snprintf(gone, sizeof gone, "the gadget ended (%.300s)", u->cause[0] ? u->cause : how);
        u->stop_killed = false;
        drop_worker(u, gone);
        /* The calls that waited for its start, if it ended before its hello. */
        u->waking = false;
        unit_wake_done(u);
        if (u->state == UNIT_STARTING)
                calls_pending_fail(u, u->cause[0] ? u->cause : how);
        after_exit(u, u->program_status);
}

/* RequireTypes=: the policy's, else yes for a gatekeeper (whose narrow
 * methods are what stands between other gadgets and a credential), else
 * gadgetd's. */
static bool types_required(const struct unit *u)
{
        enum policy_types t = u->policy->require_types;
        return t == POLICY_TYPES_REQUIRED ||
               (t == POLICY_TYPES_DEFAULT && (u->policy->gatekeeper || u->core->cfg.require_types));
}

static void on_hello(struct peer *p, void *data)
{
        struct unit *u = data;
        size_t untyped = peer_untyped(p);
        /* Why: a gadget killed (RuntimeMax=, a limit) or stopped while it
         * started may still say hello before it dies; it must not become
         * ready, nor lose the cause its end will be reported with. */
        if (u->state != UNIT_STARTING || u->cause[0])
                return;
        if (untyped && types_required(u)) {
                char cause[160];
                char **names;
                size_t n = peer_methods(p, &names);
                snprintf(cause, sizeof cause, "untyped: %zu of its %zu methods declare no signature "
                         "(RequireTypes=yes)", untyped, n);
                limiter_record(u->core->audit, u->policy->name, "RequireTypes", "%s", cause);
                unit_kill(u, cause);
                return;
        }
        unit_set_state(u, UNIT_READY);
        u->cause[0] = '\0';
        u->start_us = monotime_since_us(&u->start_begin);
        event_del(u->ev_start);
        u->waking = false;
        unit_wake_done(u);
        if (!one_life(u)) /* gadgetd run is asked to run it: no IdleStop= */
                unit_idle_arm(u);
        /* The calls that waited go out first: the log line is written
         * while the gadget works on them. */
        calls_pending_flush(u);
        log_msg(L_INFO, u->policy->name, "ready");
        u->hooks->ready(u->hooks->arg, u);
}

static void on_binding_call(struct peer *p, const Gadget__BindingCall *bc, void *data)
{
        struct unit *u = data;
        unit_active(u, monotime_ms());
        bindings_handle(u->bind, bc);
}

/* A log message over the RPC (unit_output.c). */
static void on_log(struct peer *p, const Gadget__Log *l, void *data)
{
        unit_output_log(data, l);
}

static void on_closed(struct peer *p, const char *why, void *data)
{
        struct unit *u = data;
        /* A protocol violation ends this worker, and only it. */
        if (why)
                unit_kill(u, "protocol violation");
        /* Its end waited for this: it follows from the loop, out of the
         * link's callback. */
        if (u->ending)
                timer_arm_ms(u->ev_timer, 0);
}

static const struct peer_handlers handlers = {
        .hello = on_hello,
        .binding_call = on_binding_call,
        .log = on_log,
        .closed = on_closed,
};

static int make_cgroup(void *arg, const struct cgroup **cg, char *err, size_t errlen)
{
        struct unit *u = arg;
        int e = limiter_cgroup(&u->core->limiter, u->policy, &u->limits, err, errlen);
        *cg = u->limits.cg;
        return e;
}

/* While a start waits for its sandbox: the next start's shell. */
static void refill_spare(void *arg)
{
        spare_refill(arg);
}

/* Takes this run's resources (host uid, cgroup, output pipes) and spawns
 * the worker; pre-warmed, it waits in its finished sandbox for spawn_go.
 * 0, or -errno with err (the caller drops what was taken). */
static int unit_spawn(struct unit *u, bool prewarm, char *err, size_t errlen)
{
        struct spawn_shell shell = SPAWN_SHELL_NONE;
        int out_w = -1, err_w = -1, e;
        if ((e = uidpool_take(&u->core->uids, u->policy->name, &u->uid)) < 0) {
                if (e == -EUSERS)
                        snprintf(err, errlen, "no free host uid: all %u of %u..%u are held by gadgets of "
                                 "gadgetd processes on this host (see --uid-base, --uid-count)",
                                 u->core->uids.count, (unsigned)u->core->uids.base,
                                 (unsigned)(u->core->uids.base + u->core->uids.count - 1));
                else
                        snprintf(err, errlen, "no free host uid: %s", strerror(-e));
                return e;
        }
        u->have_uid = true;
        /* gadgetd run relays the program's output to its own (its hooks); the
         * daemon reads it line by line. */
        bool pass = one_life(u);
        if ((e = limiter_start(&u->core->limiter, u->policy, &u->limits, err, errlen)) < 0)
                return e;
        if (!pass && !u->lines && !(u->lines = calloc(2, sizeof *u->lines))) {
                snprintf(err, errlen, "output lines: out of memory");
                return -ENOMEM;
        }
        if (pass ? (e = u->hooks->output_pipes(u->hooks->arg, &out_w, &err_w)) < 0
                 : ((e = unit_output_pipe(u, &u->out_fd, &out_w, &u->ev_out)) < 0 ||
                    (e = unit_output_pipe(u, &u->err_fd, &err_w, &u->ev_err)) < 0)) {
                snprintf(err, errlen, "output pipes: %s", strerror(-e));
        } else {
                struct spawn_opts so = { .policy = u->policy, .args = u->args, .filter = &u->core->filter,
                                         .helper = &u->core->helper, .prewarm = prewarm,
                                         .host_uid = u->uid, .stdout_fd = out_w,
                                         .stderr_fd = err_w, .make_cgroup = make_cgroup,
                                         .make_cgroup_arg = u,
                                         .nproc = u->limits.nproc, .address_space = u->limits.address_space,
                                         .shell = &shell,
                                         .waiting = prewarm ? NULL : refill_spare,
                                         .waiting_arg = &u->core->spare };
                /* A pre-warmed start is not in a hurry: the spare is for one that is. */
                if (!prewarm)
                        spare_take(&u->core->spare, &shell);
                e = spawn_gadget(&so, &u->child, err, errlen);
                if (!prewarm)
                        spare_done(&u->core->spare);
                spawn_shell_drop(&shell); /* not taken if the start failed before it */
        }
        if (out_w >= 0)
                close(out_w);
        if (err_w >= 0)
                close(err_w);
        return e;
}

/* Ends a pre-warmed sandbox that will not be used, with its run's
 * resources. */
static void warm_drop(struct unit *u)
{
        if (u->child.go_fd < 0)
                return;
        if (u->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->child.pidfd, SIGKILL, NULL, 0);
        waitpid(u->child.pid, NULL, 0);
        drop_worker(u, "its pre-warmed sandbox was dropped");
}

int unit_prewarm(struct unit *u)
{
        char err[600];
        if (u->child.pid > 0 || one_life(u))
                return -EALREADY;
        /* A failure is not reported: the start goes cold and says why. */
        int e = unit_spawn(u, true, err, sizeof err);
        if (e < 0)
                drop_worker(u, "its sandbox could not be pre-warmed");
        return e;
}

void unit_start(struct unit *u)
{
        char err[600];
        int e;

        u->want_running = true;
        u->cause[0] = '\0';
        if (unit_lease_wait(u))
                return;
        bool warm = u->child.go_fd >= 0;
        if (u->child.pid > 0 && !warm)
                return;
        clock_gettime(CLOCK_MONOTONIC, &u->start_begin);
        u->start_us = 0;
        if ((e = bindings_load(u->bind, err, sizeof err)) < 0)
                goto fail;
        /* A sandbox pre-warmed for this start only needs its go; if it went
         * away meanwhile, the start goes cold. */
        if (warm && spawn_go(&u->child, err, sizeof err) < 0) {
                log_msg(L_WARN, u->policy->name, "pre-warmed sandbox lost (%s): starting cold", err);
                warm_drop(u);
                warm = false;
        }
        if (!warm && (e = unit_spawn(u, false, err, sizeof err)) < 0)
                goto fail;
        clock_gettime(CLOCK_MONOTONIC, &u->started);
        unit_set_state(u, UNIT_STARTING);
        u->peer = peer_new(u->core->base, u->child.rpc_fd, u->policy, &handlers, u);
        u->ev_report = event_new(u->core->base, u->child.report_fd, EV_READ | EV_PERSIST, report_cb, u);
        if (!u->peer || !u->ev_report || event_add(u->ev_report, NULL) < 0) {
                snprintf(err, sizeof err, "out of memory");
                unit_kill(u, NULL);
                waitpid(u->child.pid, NULL, 0);
                goto fail;
        }
        u->child.rpc_fd = -1; /* the peer owns it */
        bindings_attach(u->bind, u->peer);
        timer_arm_ms(u->ev_limits, LIMITS_CHECK_MS);
        if (u->policy->runtime_max_ms)
                timer_arm_ms(u->ev_runtime, u->policy->runtime_max_ms);
        /* gadgetd run runs any program, gadget or not: no hello is awaited. */
        if (!one_life(u))
                timer_arm_ms(u->ev_start, u->policy->start_timeout_ms);
        log_msg(L_INFO, u->policy->name, "started (pid %d)", (int)u->child.pid);
        return;
fail:
        warm_drop(u);
        drop_worker(u, "the gadget could not start");
        unit_set_state(u, UNIT_FAILED);
        u->waking = false;
        unit_wake_done(u);
        snprintf(u->cause, sizeof u->cause, "cannot start: %.240s", err);
        calls_pending_fail(u, u->cause);
        log_msg(one_life(u) ? L_INFO : L_ERR, u->policy->name, "%s", u->cause); /* run says it itself */
        u->hooks->exited(u->hooks->arg, u);
}

void unit_adopt_failed(struct unit *u, const char *why)
{
        if (u->child.pid > 0) {
                /* Without a pidfd, by pid: it is a child not reaped (unit_adopt.c
                 * looked), so the pid is still its own. */
                if (u->child.pidfd < 0)
                        kill(u->child.pid, SIGKILL);
                unit_kill(u, NULL);
                waitpid(u->child.pid, NULL, 0);
        }
        drop_worker(u, why);
        unit_set_state(u, UNIT_FAILED);
        snprintf(u->cause, sizeof u->cause, "%s", why);
        log_msg(L_ERR, u->policy->name, "%s", why);
}

int unit_adopt_worker(struct unit *u, const struct unit_saved *s, char *err, size_t errlen)
{
        u->want_running = true;
        u->restarts = s->restarts;
        u->calls = s->calls;
        u->start_us = s->start_us;
        u->started = (struct timespec){ .tv_sec = s->started_ms / 1000, .tv_nsec = s->started_ms % 1000 * 1000000 };
        u->start_begin = u->started;
        u->peer = peer_new(u->core->base, u->child.rpc_fd, u->policy, &handlers, u);
        if (!u->peer) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        u->child.rpc_fd = -1; /* the peer owns it */
        int e;
        if ((e = peer_adopt(u->peer, s->methods, s->sig_texts, s->n_methods, err, errlen)) < 0)
                return e;
        if (!(u->lines = calloc(2, sizeof *u->lines)) || unit_output_adopt(u, u->out_fd, &u->ev_out) < 0 ||
            unit_output_adopt(u, u->err_fd, &u->ev_err) < 0 ||
            !(u->ev_report = event_new(u->core->base, u->child.report_fd, EV_READ | EV_PERSIST, report_cb, u)) ||
            event_add(u->ev_report, NULL) < 0) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        bindings_attach(u->bind, u->peer);
        timer_arm_ms(u->ev_limits, LIMITS_CHECK_MS);
        if (u->policy->runtime_max_ms) {
                uint64_t ran = unit_uptime_ms(u);
                timer_arm_ms(u->ev_runtime, ran < u->policy->runtime_max_ms ? u->policy->runtime_max_ms - ran : 1);
        }
        unit_set_state(u, UNIT_READY);
        unit_idle_arm(u);
        log_msg(L_INFO, u->policy->name, "adopted after gadgetd's re-exec (pid %d)", (int)u->child.pid);
        u->hooks->ready(u->hooks->arg, u);
        return 0;
}

/* Stops u, to start it again once stopped (restart) or not: a stop asked
 * during a restart's stop calls the restart off. */
static void stop_for(struct unit *u, const char *why, bool restart)
{
        unit_lease_stop(u);
        u->restart_pending = restart;
        u->want_running = false;
        u->idling = false; /* an idle stop says so after this */
        event_del(u->ev_timer);
        if (u->ev_idle)
                event_del(u->ev_idle);
        warm_drop(u); /* a pre-warmed sandbox is not needed any more */
        /* It stays stopped (unless this is an idle stop), and calls that
         * waited for its start fail. */
        u->dormant = u->waking = false;
        unit_wake_done(u);
        /* A restart's calls wait on for the new process. */
        if (!restart)
                calls_pending_fail(u, why);
        if (u->child.pid <= 0) {
                if (u->state == UNIT_STARTING || u->state == UNIT_REMOTE || u->state == UNIT_IDLE)
                        unit_set_state(u, UNIT_STOPPED); /* waiting for a restart, its lease or a call */
                stopped(u);
                return;
        }
        snprintf(u->cause, sizeof u->cause, "%s", why);
        unit_set_state(u, UNIT_STOPPING);
        if (u->peer && peer_state(u->peer) == PEER_READY)
                peer_shutdown(u->peer);
        timer_arm_ms(u->ev_timer, UNIT_STOP_GRACE_MS);
}

void unit_stop(struct unit *u, const char *why)
{
        stop_for(u, why, false);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        if (u->ending) {
                worker_ended(u);     /* its link read to the end, or the bound is over */
        } else if (u->state == UNIT_STOPPING) {
                u->stop_killed = u->peer && peer_pending(u->peer);
                unit_kill(u, NULL);  /* the grace period is over */
        } else if (u->state == UNIT_STARTING && (u->child.pid <= 0 || u->child.go_fd >= 0)) {
                u->restarts++;
                unit_start(u);       /* the backoff is over */
        }
}

void unit_restart(struct unit *u, const char *why)
{
        /* An idle gadget stays idle (its new policy applies at its next
         * start). */
        if (u->state == UNIT_IDLE && u->child.pid <= 0)
                return;
        if (u->child.pid <= 0) {
                event_del(u->ev_timer);
                backoff_reset(&u->backoff);
                /* Not running, Start=on-demand: idle again, not started. */
                if (u->policy->start == POLICY_START_ON_DEMAND && !u->waking) {
                        unit_activate(u);
                        if (!TAILQ_EMPTY(&u->pending))
                                unit_wake(u, NULL); /* calls waited out its restart delay */
                } else
                        unit_start(u);
                return;
        }
        stop_for(u, why, true);
}

void unit_start_again(struct unit *u)
{
        if (u->child.pid > 0 || (u->state != UNIT_STOPPED && u->state != UNIT_FAILED))
                return;
        /* A restart backing off, or parked, starts now, with a fresh
         * backoff, as after a load. */
        event_del(u->ev_timer);
        backoff_reset(&u->backoff);
        unit_activate(u);
}

/* While it runs: new limit hits become audit records. */
static void limits_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        limiter_check(&u->limits, u->policy, u->core->audit);
}

/* StartTimeout: no hello in time. The gadget fails with that cause, and
 * Restart= decides what follows. */
static void start_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        char cause[128];
        if (u->state != UNIT_STARTING || u->child.pid <= 0)
                return;
        snprintf(cause, sizeof cause, "start timeout: no hello within StartTimeout=%llums",
                 (unsigned long long)u->policy->start_timeout_ms);
        limiter_record(u->core->audit, u->policy->name, "StartTimeout", "%s", cause);
        unit_kill(u, cause);
}

/* RuntimeMax: the gadget has run for as long as it may. */
static void runtime_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        limiter_record(u->core->audit, u->policy->name, "RuntimeMax", "killed after RuntimeMax=%llums",
                       (unsigned long long)u->policy->runtime_max_ms);
        unit_kill(u, "runtime limit");
}

void unit_replace_policy(struct unit *u, struct policy *p, const struct unit_origin *o)
{
        if (u->peer)
                peer_set_policy(u->peer, p);
        bindings_set_policy(u->bind, p);
        policy_free(u->policy);
        u->policy = p;
        u->policy_hash = o->hash;
        u->from_dir = u->from_dir || o->from_dir;
        unit_keep_policy(u, NULL, 0);
        unit_events_policy(u);
        unit_restart(u, o->why ? o->why : "policy changed");
}

void unit_keep_policy(struct unit *u, const char *errors, unsigned n)
{
        free(u->kept_errors);
        u->kept_errors = errors && n ? strdup(errors) : NULL;
        u->n_kept_errors = u->kept_errors ? n : 0;
}

void unit_signal(struct unit *u, int sig)
{
        if (u->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->child.pidfd, sig, NULL, 0);
}
