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
#include "sandbox_abi.h"
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
static void start_report(struct unit_run *r);

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
        TAILQ_INIT(&u->pending);
        logbuf_init(&u->log);
        u->run = unit_run_new(u);
        u->bind = bindings_new(&c->bindings, policy);
        logbuf_budget_init(&u->log_budget, setting(policy->log_lines, c->cfg.log_lines, LOGBUF_DEFAULT_LINES),
                           setting(policy->log_bytes, c->cfg.log_bytes, LOGBUF_DEFAULT_BYTES));
        if (!u->bind || !u->run || unit_events_created(u) < 0) {
                bindings_free(u->bind);
                unit_run_free(u->run);
                free(u);
                return NULL;
        }
        return u;
}

/* r's timers and its unit's (a restart's delay, the log budget's window),
 * made at its first worker (spawned or adopted): 10,000 declared gadgets
 * that were never called hold none. 0, or -ENOMEM with err. */
static int run_timers(struct unit_run *r, char *err, size_t errlen)
{
        struct unit *u = r->u;
        if (!u->ev_timer)
                u->ev_timer = evtimer_new(u->core->base, timer_cb, u);
        if (!u->ev_logwin)
                u->ev_logwin = evtimer_new(u->core->base, unit_output_window_cb, u);
        if (!u->ev_timer || !u->ev_logwin || unit_run_timers(r) < 0) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

/* Releases everything of the running worker (it is dead or being killed). */
static void drop_worker(struct unit *u, const char *gone)
{
        unit_run_drop(u->run, gone);
}

void unit_free(struct unit *u)
{
        if (!u)
                return;
        unit_hold_ended(u, -ESHUTDOWN);
        unit_switch_drop(u, "gadgetd is stopping");
        unit_starts_unqueue(u);
        if (u->old_run) {
                unit_run_reap(u->old_run, "gadgetd is stopping");
                unit_run_free(u->old_run);
                u->old_run = NULL;
        }
        if (u->run->child.pid > 0) {
                if (u->run->child.pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, u->run->child.pidfd, SIGKILL, NULL, 0);
                unit_run_wait(u->run);
        }
        unit_events_going(u);
        unit_denials_flush(u);
        unit_wake_done(u);
        drop_worker(u, "gadgetd is stopping");
        calls_unit_gone(u);
        unit_lease_gone(u);
        unit_output_end(u);
        bindings_free(u->bind);
        unit_events_freed(u);
        if (u->ev_timer)
                event_free(u->ev_timer);
        if (u->ev_logwin)
                event_free(u->ev_logwin);
        unit_run_free(u->run);
        if (u->ev_idle)
                event_free(u->ev_idle);
        logbuf_free(&u->log);
        unit_stats_clear(&u->stats);
        free(u->recent);
        policy_free(u->policy);
        free(u->kept_errors);
        free(u->ro_last_back);
        free(u->switch_why);
        if (u->ev_denials)
                event_free(u->ev_denials);
        free(u->denials);
        free(u->denial_window);
        free(u->learned.v);
        free(u->last_crash);
        free(u);
}

void unit_kill(struct unit *u, const char *why)
{
        unit_run_kill(u->run, why);
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
                unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_RESTARTED, .level = L_INFO,
                                                                .run = u->run->number, .delay_ms = 0 },
                               "restarting once stopped (%s)", u->cause);
                u->stats.restarts[UNIT_RESTART_REQUEST]++;
                unit_start(u);
        }
        c->hooks.stopped(c->hooks.arg, u);
}

/* Decides what follows an end: stopped, failed, parked or a restart. */
static void after_exit(struct unit *u, int status, pid_t pid, const struct spawn_crash *crash)
{
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !u->cause[0];
        uint64_t ran = unit_uptime_ms(u);
        char what[200];

        describe_status(status, what, sizeof what);
        if (crash)
                snprintf(what, sizeof what, "%s", crash->cause);
        if (!u->cause[0])
                snprintf(u->cause, sizeof u->cause, "%s", what);
        memcpy(u->last_cause, u->cause, sizeof u->last_cause);
        unit_events_exited(u, status, u->cause);
        bool quiet = clean || !u->want_running || one_life(u);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_EXITED, .level = quiet ? L_INFO : L_WARN,
                                                        .run = u->run->number, .pid = pid,
                                                        .has_status = true, .status = status, .crash = crash,
                                                        .failed = !clean && u->want_running }, "%s", u->cause);
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
                /* Calls that came while it was on its way out (unit_is_ready). */
                calls_pending_fail(u, u->cause);
                return;
        }
        int64_t delay = backoff_failed(&u->backoff, ran, u->core->cfg.quick_failure_ms);
        if (delay < 0) {
                unit_set_state(u, UNIT_FAILED);
                char was[sizeof u->cause];
                memcpy(was, u->cause, sizeof was);
                snprintf(u->cause, sizeof u->cause, "keeps crashing (%u times in a row): %.200s",
                         u->backoff.quick, was);
                calls_pending_fail(u, u->cause);
                unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_PARKED, .level = L_ERR,
                                                                .run = u->run->number, .failed = true },
                               "parked as failed: %s", u->cause);
                return;
        }
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_RESTARTED, .level = L_INFO, .run = u->run->number,
                                                        .delay_ms = delay }, "restarting in %lld ms", (long long)delay);
        unit_set_state(u, UNIT_STARTING);
        /* The loop's cached time may be from before the end: count from now,
         * so the promised delay is a lower bound. */
        event_base_update_cache_time(u->core->base);
        timer_arm_ms(u->ev_timer, (uint64_t)delay);
        /* The next start only has to start the program. */
        unit_prewarm(u);
}

static void worker_reaped(struct unit_run *r, int pstatus);
static int wait_pidfd(struct unit_run *r);

/* The report pipe: the program's wait status, then end of file when PID 1
 * of the sandbox is gone (and with it every process in it). A report
 * refused is a hostile sandbox: it is logged once and the worker killed,
 * so the wait for it below is short. */
static void report_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        int status = 0, pstatus = 0;
        char msg[256];
        struct spawn_report_out out;
        if (r->child.start_want) { /* its sandbox builds */
                start_report(r);
                return;
        }
        int e = spawn_read_report(&r->child, &status, &out, msg, sizeof msg);
        if (e == SPAWN_REPORT_DENIALS) {
                unit_denied(r, &out.denials);
                return;
        }
        if (e == SPAWN_REPORT_LEARNED) {
                unit_learned(r, &out.learned);
                return;
        }
        if (e == SPAWN_REPORT_CRASH) { /* its wait status follows */
                if (!r->crash)
                        r->crash = malloc(sizeof *r->crash);
                if (r->crash)
                        *r->crash = out.crash;
                return;
        }
        if (e == SPAWN_REPORT_STATUS) {
                r->program_status = status;
                r->have_program_status = true;
                /* FdStore= mode: its counters (an OOM kill) read while its
                 * sandbox still holds its cgroup, which systemd removes with
                 * its scope once empty; then the sandbox may end. */
                if (r->u->core->cfg.handoff_ms && r->child.pidfd >= 0) {
                        limiter_check(&r->limits, unit_run_policy(r), r->u->core->audit);
                        syscall(SYS_pidfd_send_signal, r->child.pidfd, SANDBOX_SIG_ADOPTED, NULL, 0);
                }
                return;
        }
        if (e > 0 || e == -EAGAIN)
                return;
        if (e == -EPROTO) {
                log_msg(L_ERR, r->u->policy->name, "sandbox report refused: %s", msg);
                unit_run_kill(r, "sandbox report refused");
        }
        /* One adopted through the fd store is systemd's to reap: it said
         * how its program ended, or it was killed. */
        pstatus = SIGKILL;
        if (!r->child.foreign && r->child.pidfd >= 0) {
                /* The end of file comes when PID 1 closes its files, before
                 * the kernel tears its namespaces down (an RCU grace
                 * period, 0.3-0.7 ms): the loop does not wait for that but
                 * for its pidfd, readable once it is a zombie. Safe: the
                 * uid and the cgroup are still released only after the
                 * reap (worker_reaped, then unit_run_drop). */
                pid_t w;
                while ((w = waitpid(r->child.pid, &pstatus, WNOHANG)) < 0 && errno == EINTR)
                        ;
                if (w == 0 && wait_pidfd(r) == 0)
                        return;
                if (w != 0) {
                        worker_reaped(r, pstatus);
                        return;
                }
        }
        while (!r->child.foreign && waitpid(r->child.pid, &pstatus, 0) < 0 && errno == EINTR)
                ;
        worker_reaped(r, pstatus);
}

/* Its pidfd readable: it is a zombie now, and the wait returns at once. */
static void reaped_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        int pstatus = SIGKILL;
        while (waitpid(r->child.pid, &pstatus, 0) < 0 && errno == EINTR)
                ;
        worker_reaped(r, pstatus);
}

/* The report's event becomes one on the worker's pidfd (its report is at
 * its end of file): 0, or -1 and the caller waits as before. */
static int wait_pidfd(struct unit_run *r)
{
        struct event *ev = event_new(r->u->core->base, r->child.pidfd, EV_READ, reaped_cb, r);
        if (!ev || event_add(ev, NULL) < 0) {
                if (ev)
                        event_free(ev);
                return -1;
        }
        event_free(r->ev_report);
        r->ev_report = ev;
        return 0;
}

/* Its worker reaped (pstatus: its wait status, SIGKILL if unknown). */
static void worker_reaped(struct unit_run *r, int pstatus)
{
        if (!r->have_program_status)
                r->program_status = pstatus;
        r->have_program_status = false;
        /* The results it wrote before its end may still wait in its
         * link, and so may a last frame that breaks the protocol (a
         * truncated one, whose end of file says so): they are read first
         * (its end of file), within a bound. Its end came first in a loop
         * turn now and then, and a worker that sent a truncated frame and
         * exited 0 went unreported as a violation (hostile_truncated). */
        if (r->peer && peer_state(r->peer) != PEER_CLOSED &&
            (peer_pending(r->peer) || peer_unread(r->peer))) {
                event_del(r->ev_report);
                r->ending = true;
                timer_arm_ms(r->ev_end, UNIT_END_READ_MS);
                return;
        }
        unit_run_ended(r);
}

/* A restart's process other than the one serving (u->next_run, u->old_run)
 * ended: its calls in flight are told, and unit_switch.c goes on. */
static void other_ended(struct unit_run *r, const char *how)
{
        struct unit *u = r->u;
        char gone[400], why[300];
        limiter_check(&r->limits, unit_run_policy(r), u->core->audit);
        if (!r->cause[0])
                limiter_cause(&r->limits, r->program_status, how, r->cause, sizeof r->cause);
        const char *cause = r->cause[0] ? r->cause : how;
        if (r == u->old_run) {
                snprintf(gone, sizeof gone, "gadget \"%s\" restarted while the call ran on its previous process "
                         "(%.200s%s)", u->policy->name, cause, r->stop_killed ? ": not answered within the stop's "
                         "grace" : "");
                unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_EXITED, .level = L_INFO, .run = r->number,
                                                                .pid = r->child.pid,
                                                                .has_status = r->have_program_status,
                                                                .status = r->program_status },
                               "its previous process (pid %d) ended: %s", (int)r->child.pid, cause);
                unit_run_drop(r, gone);
                unit_switch_old_ended(u);
                return;
        }
        snprintf(why, sizeof why, "its new process did not start (%.250s)", cause);
        unit_run_drop(r, why);
        unit_switch_failed(u, why);
}

void unit_run_ended(struct unit_run *r)
{
        struct unit *u = r->u;
        char how[200], gone[400];
        r->ending = false;
        describe_status(r->program_status, how, sizeof how);
        /* A crash the sandbox saw, if the program died of it: its cause
         * names the signal's code, the address and the function. */
        struct spawn_crash *crash = r->crash;
        r->crash = NULL;
        if (crash && !(WIFSIGNALED(r->program_status) && WTERMSIG(r->program_status) == crash->signal)) {
                free(crash);
                crash = NULL;
        }
        if (crash)
                snprintf(how, sizeof how, "%s", crash->cause);
        if (crash && crash->core_size)
                unit_core_save(u, r, crash->core_size, crash->signal);
        if (r != u->run) {
                free(crash);
                other_ended(r, how);
                return;
        }
        if (crash) {
                free(u->last_crash);
                u->last_crash = crash;
        }
        /* The last limit hits, and whether a limit ended it. */
        limiter_check(&u->run->limits, u->policy, u->core->audit);
        if (!u->cause[0])
                limiter_cause(&u->run->limits, u->run->program_status, how, u->cause, sizeof u->cause);
        /* A call still in flight is told, never lost. */
        if (u->state == UNIT_STOPPING && u->run->stop_killed)
                snprintf(gone, sizeof gone, "gadget \"%s\" stopped while the call ran (%.200s: not answered "
                         "within the stop's grace of %u ms)", u->policy->name, u->cause[0] ? u->cause : how,
                         (unsigned)UNIT_STOP_GRACE_MS);
        else if (u->state == UNIT_STOPPING)
                snprintf(gone, sizeof gone, "gadget \"%s\" stopped while the call ran (%.200s)", u->policy->name,
                         u->cause[0] ? u->cause : how);
        else
                snprintf(gone, sizeof gone, "the gadget ended (%.300s)", u->cause[0] ? u->cause : how);
        u->run->stop_killed = false;
        int status = u->run->program_status;
        pid_t pid = u->run->child.pid;
        drop_worker(u, gone);
        /* A crash while a restart's new process starts beside it: an
         * ordinary crash of the serving process, and the new one serves
         * once it said hello. */
        if (u->next_run && unit_switch_promote(u) == 0)
                return;
        /* The calls that waited for its start, if it ended before its hello. */
        u->waking = false;
        unit_wake_done(u);
        if (u->state == UNIT_STARTING)
                calls_pending_fail(u, u->cause[0] ? u->cause : how);
        after_exit(u, status, pid, crash);
}

/* RequireTypes=: the policy's, else yes for a gatekeeper (whose narrow
 * methods are what stands between other gadgets and a credential), else
 * gadgetd's. */
static bool types_required(const struct unit_run *r)
{
        const struct policy *p = unit_run_policy(r);
        enum policy_types t = p->require_types;
        return t == POLICY_TYPES_REQUIRED ||
               (t == POLICY_TYPES_DEFAULT && (p->gatekeeper || r->u->core->cfg.require_types));
}

static void on_hello(struct peer *p, void *data)
{
        struct unit_run *r = data;
        struct unit *u = r->u;
        /* The program ran before init reported its exec: the hello is
         * taken once the report was (start_report), which ends the start. */
        if (r->child.start_want) {
                r->hello_early = true;
                return;
        }
        size_t untyped = peer_untyped(p);
        /* Why: a gadget killed (RuntimeMax=, a limit) or stopped while it
         * started may still say hello before it dies; it must not become
         * ready, nor lose the cause its end will be reported with. */
        if (r == u->old_run || (r == u->run && (u->state != UNIT_STARTING || u->cause[0])) ||
            (r == u->next_run && r->cause[0]))
                return;
        if (untyped && types_required(r)) {
                char cause[160];
                char **names;
                size_t n = peer_methods(p, &names);
                snprintf(cause, sizeof cause, "untyped: %zu of its %zu methods declare no signature "
                         "(RequireTypes=yes)", untyped, n);
                limiter_record(u->core->audit, u->policy->name, "RequireTypes", "%s", cause);
                unit_run_kill(r, cause);
                return;
        }
        if (r == u->next_run) {
                unit_switch_hello(r);
                return;
        }
        unit_set_state(u, UNIT_READY);
        u->cause[0] = '\0';
        u->run->start_us = monotime_since_us(&u->run->start_begin);
        timer_stop(u->run->ev_start);
        u->waking = false;
        unit_wake_done(u);
        if (!one_life(u)) /* gadgetd run is asked to run it: no IdleStop= */
                unit_idle_arm(u);
        /* The calls that waited go out first: the log line is written
         * while the gadget works on them. */
        calls_pending_flush(u);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_READY, .level = L_INFO, .run = u->run->number,
                                                        .pid = u->run->child.pid }, "ready");
        u->hooks->ready(u->hooks->arg, u);
}

/* A binding call of any of its processes (the old one draining too):
 * answered on the link it came from. Store=postgresql: only while this
 * node holds the gadget's lease and its own lease is valid by its clock
 * (kvpg_lease_valid, read now: a pause counts), else refused, not run
 * (fail closed). Why at each call and not only by the lease's end: a
 * node resumed after a pause finds what its gadget asked meanwhile in
 * the worker's socket, and another node runs the gadget by then. Its
 * lease may end first in that turn of the loop (on_lost kills the worker,
 * whose socket is still read until it is reaped: lease_pg_test.py saw
 * the http request go out), or the request may be read first; the kv
 * store's fence stops a write either way, nothing else would stop an
 * http request, a call to another gadget or an alarm set. A refusal
 * leaves the lease's end to the loop's next turn (kvpg_lease_valid),
 * which kills the worker as for any lost lease. */
static void on_binding_call(struct peer *p, const Gadget__BindingCall *bc, void *data)
{
        struct unit_run *r = data;
        struct unit *u = r->u;
        unit_active(u, monotime_ms());
        if (!unit_runs_here(u) || unit_lease_expired(u)) {
                char why[256];
                snprintf(why, sizeof why, "gadget \"%.64s\" lost its lease in the store (node %.64s): the binding "
                         "call was not run", u->policy->name, u->core->cfg.node);
                bindings_handle_or_refuse(u->bind, p, bc, why);
                return;
        }
        bindings_handle(u->bind, p, bc);
}

/* A log message over the RPC (unit_output.c). */
static void on_log(struct peer *p, const Gadget__Log *l, void *data)
{
        struct unit_run *r = data;
        unit_output_log(r, l);
}

/* A frame on one of its processes' links, while watched. */
static void on_frame(struct peer *p, bool in, const Gadget__WorkerMsg *w, const Gadget__SupervisorMsg *s,
                     size_t bytes, void *data)
{
        struct unit_run *r = data;
        const struct unit_frame_event e = { .in = in, .w = w, .s = s, .bytes = bytes, .run = r->number };
        unit_events_framed(r->u, &e);
}

static void on_closed(struct peer *p, const char *why, void *data)
{
        struct unit_run *r = data;
        /* A protocol violation ends this worker, and only it. */
        if (why)
                unit_run_kill(r, "protocol violation");
        /* Its end waited for this: it follows from the loop, out of the
         * link's callback. */
        if (r->ending)
                timer_arm_ms(r->ev_end, 0);
}

_Static_assert(sizeof ((struct unit_stats *)0)->budget_waits / sizeof(uint64_t) == PEER_BUDGETS_N,
               "a count per budget a peer waits for");

/* Its input began to wait for a budget a second: counted for the metrics. */
static void on_waited(struct peer *p, int which, void *data)
{
        struct unit_run *r = data;
        if (which >= 0 && which < PEER_BUDGETS_N)
                r->u->stats.budget_waits[which]++;
}

static const struct peer_handlers handlers = {
        .hello = on_hello,
        .binding_call = on_binding_call,
        .log = on_log,
        .frame = on_frame,
        .closed = on_closed,
        .waited = on_waited,
};

static int make_cgroup(void *arg, struct cgroup **cg, char *err, size_t errlen)
{
        struct unit_run *r = arg;
        int e = limiter_cgroup(&r->u->core->limiter, unit_run_policy(r), &r->limits, err, errlen);
        *cg = r->limits.cg;
        return e;
}

/* While a start waits for its sandbox: the next start's shell. */
/* While a start's sandbox builds (struct spawn_opts' waiting): the
 * daemon's spare shell refilled in a burst; gadgetd run's stale cgroups
 * of gadgetds gone removed (limiter_tidy), off its start's path. */
static void start_waiting(void *arg)
{
        struct core *c = arg;
        spare_refill(&c->spare);
        limiter_tidy(&c->limiter);
}

/* StartTimeout: from the program's exec, as the hello's bound (gadgetd
 * run's program need not say hello unless it is called). */
static void arm_hello(struct unit_run *r)
{
        if (!one_life(r->u) || r->u->hooks->await_hello)
                timer_arm_ms(r->ev_start, unit_run_policy(r)->start_timeout_ms);
}

/* r's program was exec'd: its uptime, RuntimeMax= and StartTimeout
 * count from now. */
static void run_exec(struct unit_run *r)
{
        const struct policy *p = unit_run_policy(r);
        clock_gettime(CLOCK_MONOTONIC, &r->started);
        if (p->runtime_max_ms)
                timer_arm_ms(r->ev_runtime, p->runtime_max_ms);
        arm_hello(r);
}

/* u's program was exec'd in its sandbox. */
static void run_started(struct unit *u)
{
        u->stats.starts++;
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_STARTED, .level = L_INFO, .run = u->run->number,
                                                        .pid = u->run->child.pid }, "started (pid %d)",
                       (int)u->run->child.pid);
}

/* Its sandbox's start report came (or part of it): the start goes on as
 * after spawn_gadget, or fails as if spawn_gadget had. */
static void start_report(struct unit_run *r)
{
        struct unit *u = r->u;
        char err[600];
        int e = spawn_started(&r->child, err, sizeof err);
        if (e == -EAGAIN)
                return;
        if (e < 0) {
                unit_run_start_failed(r, err);
                return;
        }
        unit_starts_end(r);
        timer_stop(r->ev_start);
        run_exec(r);
        if (r == u->run && u->state == UNIT_STARTING)
                run_started(u);
        if (r->hello_early) {
                r->hello_early = false;
                if (r->peer)
                        on_hello(r->peer, r);
        }
}

static void start_failed(struct unit *u, const char *err);

void unit_run_start_failed(struct unit_run *r, const char *err)
{
        struct unit *u = r->u;
        unit_starts_end(r);
        /* Its child must not outlive its start, as spawn_gadget's. */
        unit_run_kill(r, NULL);
        if (r == u->next_run && !r->cause[0]) {
                unit_run_wait(r);
                unit_switch_start_failed(u, err);
                return;
        }
        if (r == u->run && u->state == UNIT_STARTING && u->want_running && !u->cause[0]) {
                unit_run_wait(r);
                start_failed(u, err);
                return;
        }
        /* Stopped, or killed with a cause (a limit), while it built: its
         * end follows as any end's (report_cb reads its end of file). */
        r->child.start_want = 0;
}

/* Takes r's resources (host uid, cgroup, output pipes) and spawns its
 * worker; pre-warmed, it waits in its finished sandbox for spawn_go.
 * 0, or -errno with err (the caller drops what was taken). */
static int run_spawn(struct unit_run *r, bool prewarm, char *err, size_t errlen)
{
        struct unit *u = r->u;
        const struct policy *p = unit_run_policy(r);
        struct spawn_shell shell = SPAWN_SHELL_NONE;
        int out_w = -1, err_w = -1, e;
        if ((e = run_timers(r, err, errlen)) < 0)
                return e;
        if ((e = uidpool_take(&u->core->uids, p->name, &r->uid)) < 0) {
                if (e == -EUSERS)
                        snprintf(err, errlen, "no free host uid: all %u of %u..%u are held by gadgets of "
                                 "gadgetd processes on this host (see --uid-base, --uid-count)",
                                 u->core->uids.count, (unsigned)u->core->uids.base,
                                 (unsigned)(u->core->uids.base + u->core->uids.count - 1));
                else
                        snprintf(err, errlen, "no free host uid: %s", strerror(-e));
                return e;
        }
        r->have_uid = true;
        /* gadgetd run relays the program's output to its own (its hooks); the
         * daemon reads it line by line. */
        bool pass = one_life(u);
        if ((e = limiter_start(&u->core->limiter, p, &r->limits, err, errlen)) < 0)
                return e;
        /* A restart's new process beside the old one: the other cgroup name. */
        r->limits.second = r == u->next_run && !u->run->limits.second;
        if (!pass && !r->lines && !(r->lines = calloc(2, sizeof *r->lines))) {
                snprintf(err, errlen, "output lines: out of memory");
                return -ENOMEM;
        }
        if (pass ? (e = u->hooks->output_pipes(u->hooks->arg, &out_w, &err_w)) < 0
                 : ((e = unit_output_pipe(r, &r->out_fd, &out_w, &r->ev_out)) < 0 ||
                    (e = unit_output_pipe(r, &r->err_fd, &err_w, &r->ev_err)) < 0)) {
                snprintf(err, errlen, "output pipes: %s", strerror(-e));
        } else {
                /* CoreDump=: a fresh memfd each run, for its crash's core. */
                if (r->core_fd >= 0)
                        close(r->core_fd);
                r->core_fd = unit_core_fd(p);
                struct spawn_opts so = { .policy = p, .args = u->args, .filter = &u->core->filter,
                                         .core_fd = r->core_fd,
                                         .helper = &u->core->helper, .prewarm = prewarm,
                                         .handoff_ms = u->core->cfg.handoff_ms, .learn = u->core->cfg.learn,
                                         .host_uid = r->uid, .stdout_fd = out_w,
                                         .stderr_fd = err_w, .make_cgroup = make_cgroup,
                                         .make_cgroup_arg = r,
                                         .nproc = r->limits.nproc, .address_space = r->limits.address_space,
                                         .shell = &shell,
                                         .waiting = prewarm ? NULL : start_waiting,
                                         .waiting_arg = u->core };
                /* A pre-warmed start is not in a hurry: the spare is for one that is. */
                if (!prewarm)
                        spare_take(&u->core->spare, p->netns == POLICY_NETNS_SHARED, &shell);
                /* The daemon's start goes on from the loop while its sandbox
                 * builds (start_report); gadgetd run has nothing else to do
                 * meanwhile, and a pre-warmed sandbox is for a restart's
                 * delay, which it waits out. */
                e = prewarm || one_life(u) ? spawn_gadget(&so, &r->child, err, errlen)
                                           : spawn_launch(&so, &r->child, err, errlen);
                if (!prewarm)
                        spare_done(&u->core->spare);
                spawn_shell_drop(&shell); /* not taken if the start failed before it */
        }
        if (out_w >= 0)
                close(out_w);
        if (err_w >= 0)
                close(err_w);
        core_count_running(u); /* a process now, if it spawned (r may be the next run: then no change) */
        return e;
}

/* Ends a pre-warmed sandbox that will not be used, with its run's
 * resources. */
static void warm_end(struct unit *u, const char *gone)
{
        if (u->run->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->run->child.pidfd, SIGKILL, NULL, 0);
        unit_run_wait(u->run);
        drop_worker(u, gone);
}

static void warm_drop(struct unit *u)
{
        if (u->run->child.go_fd >= 0)
                warm_end(u, "its pre-warmed sandbox was dropped");
}

int unit_run_go(struct unit_run *r, bool warm, char *err, size_t errlen)
{
        struct unit *u = r->u;
        const struct policy *p = unit_run_policy(r);
        int e;
        clock_gettime(CLOCK_MONOTONIC, &r->start_begin);
        r->start_us = 0;
        if (!warm && (e = run_spawn(r, false, err, errlen)) < 0)
                return e;
        if (r->child.start_want)
                unit_starts_begin(r);
        clock_gettime(CLOCK_MONOTONIC, &r->started); /* again at its exec (run_exec) */
        r->number = ++u->runs;
        r->peer = peer_new(u->core->base, r->child.rpc_fd, p, &handlers, r);
        if (r->peer)
                peer_watch(r->peer, u->frame_watchers > 0);
        r->ev_report = event_new(u->core->base, r->child.report_fd, EV_READ | EV_PERSIST, report_cb, r);
        if (!r->peer || !r->ev_report || event_add(r->ev_report, NULL) < 0) {
                snprintf(err, errlen, "out of memory");
                unit_run_kill(r, NULL);
                unit_run_wait(r);
                return -ENOMEM;
        }
        r->child.rpc_fd = -1; /* the peer owns it */
        timer_arm_ms(r->ev_limits, LIMITS_CHECK_MS);
        /* Its sandbox builds: bounded as spawn_gadget's wait; the program's
         * clocks start at its exec (start_report). */
        if (r->child.start_want)
                timer_arm_ms(r->ev_start, SPAWN_START_TIMEOUT_MS);
        else
                run_exec(r);
        return 0;
}

int unit_prewarm(struct unit *u)
{
        char err[600];
        if (u->run->child.pid > 0 || one_life(u))
                return -EALREADY;
        /* A failure is not reported: the start goes cold and says why. */
        int e = run_spawn(u->run, true, err, sizeof err);
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
        bool warm = u->run->child.go_fd >= 0;
        if ((u->run->child.pid > 0 && !warm) || u->start_queued)
                return;
        /* Too many sandboxes build already: it starts when one is done. */
        if (!warm && !one_life(u) && !unit_starts_room(u->core) && unit_starts_queue(u)) {
                unit_set_state(u, UNIT_STARTING);
                return;
        }
        if ((e = bindings_load(u->bind, err, sizeof err)) < 0)
                goto fail;
        /* A sandbox pre-warmed for this start only needs its go; if it went
         * away meanwhile, the start goes cold. */
        if (warm && spawn_go(&u->run->child, err, sizeof err) < 0) {
                log_msg(L_WARN, u->policy->name, "pre-warmed sandbox lost (%s): starting cold", err);
                /* Why not warm_drop: spawn_go closed the go fd, and the
                 * sandbox's uid, cgroup and pipes must go before the cold
                 * start takes new ones (LeakSanitizer saw its cgroup lost). */
                warm_end(u, "its pre-warmed sandbox was lost");
                warm = false;
        }
        if ((e = unit_run_go(u->run, warm, err, sizeof err)) < 0)
                goto fail;
        unit_set_state(u, UNIT_STARTING);
        bindings_attach(u->bind, u->run->peer);
        if (!u->run->child.start_want) /* else once its sandbox says so */
                run_started(u);
        return;
fail:
        start_failed(u, err);
}

/* u's start failed (err: why): its worker is released, it is failed, and
 * the calls that waited are told. */
static void start_failed(struct unit *u, const char *err)
{
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
        if (u->run->child.pid > 0) {
                /* Without a pidfd, by pid: it is a child not reaped (unit_adopt.c
                 * looked), so the pid is still its own. */
                if (u->run->child.pidfd < 0)
                        kill(u->run->child.pid, SIGKILL);
                unit_kill(u, NULL);
                unit_run_wait(u->run);
        }
        drop_worker(u, why);
        unit_set_state(u, UNIT_FAILED);
        snprintf(u->cause, sizeof u->cause, "%s", why);
        log_msg(L_ERR, u->policy->name, "%s", why);
}

int unit_adopt_worker(struct unit *u, const struct unit_saved *s, char *err, size_t errlen)
{
        int e;
        if ((e = run_timers(u->run, err, errlen)) < 0)
                return e;
        u->want_running = true;
        u->restarts = s->restarts;
        u->calls = s->calls;
        u->runs = s->runs;
        u->run->number = s->runs;
        u->run->start_us = s->start_us;
        u->run->started = (struct timespec){ .tv_sec = s->started_ms / 1000, .tv_nsec = s->started_ms % 1000 * 1000000 };
        u->run->start_begin = u->run->started;
        u->run->peer = peer_new(u->core->base, u->run->child.rpc_fd, u->policy, &handlers, u->run);
        if (!u->run->peer) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        u->run->child.rpc_fd = -1; /* the peer owns it */
        if ((e = peer_adopt(u->run->peer, s->methods, s->sig_texts, s->n_methods, err, errlen)) < 0)
                return e;
        if (!(u->run->lines = calloc(2, sizeof *u->run->lines)) || unit_output_adopt(u->run, u->run->out_fd, &u->run->ev_out) < 0 ||
            unit_output_adopt(u->run, u->run->err_fd, &u->run->ev_err) < 0 ||
            !(u->run->ev_report = event_new(u->core->base, u->run->child.report_fd, EV_READ | EV_PERSIST, report_cb, u->run)) ||
            event_add(u->run->ev_report, NULL) < 0) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        bindings_attach(u->bind, u->run->peer);
        timer_arm_ms(u->run->ev_limits, LIMITS_CHECK_MS);
        if (u->policy->runtime_max_ms) {
                uint64_t ran = unit_uptime_ms(u);
                timer_arm_ms(u->run->ev_runtime, ran < u->policy->runtime_max_ms ? u->policy->runtime_max_ms - ran : 1);
        }
        unit_set_state(u, UNIT_READY);
        unit_idle_arm(u);
        log_msg(L_INFO, u->policy->name, "adopted after gadgetd's re-exec (pid %d)", (int)u->run->child.pid);
        u->hooks->ready(u->hooks->arg, u);
        return 0;
}

/* Stops u, to start it again once stopped (restart) or not: a stop asked
 * during a restart's stop calls the restart off. */
static void stop_for(struct unit *u, const char *why, bool restart)
{
        unit_lease_stop(u);
        /* A hold is called off: this stop (or restart) is the one that
         * happens (unit_hold sets its own after its stop). */
        unit_hold_ended(u, -ECANCELED);
        /* A restart without a gap under way is called off: this stop
         * (or restart) is the one that happens. */
        unit_switch_drop(u, why);
        unit_starts_unqueue(u);
        u->restart_pending = restart;
        u->want_running = false;
        u->idling = false; /* an idle stop says so after this */
        timer_stop(u->ev_timer);
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
        if (u->run->child.pid <= 0) {
                if (u->state == UNIT_STARTING || u->state == UNIT_REMOTE || u->state == UNIT_IDLE)
                        unit_set_state(u, UNIT_STOPPED); /* waiting for a restart, its lease or a call */
                stopped(u);
                return;
        }
        snprintf(u->cause, sizeof u->cause, "%s", why);
        unit_set_state(u, UNIT_STOPPING);
        /* Its sandbox still builds: nothing to drain (start_report). */
        if (u->run->child.start_want)
                unit_run_kill(u->run, NULL);
        if (u->run->peer && peer_state(u->run->peer) == PEER_READY)
                peer_shutdown(u->run->peer);
        timer_arm_ms(u->run->ev_end, UNIT_STOP_GRACE_MS);
}

void unit_stop(struct unit *u, const char *why)
{
        stop_for(u, why, false);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        if (u->state == UNIT_STARTING && (u->run->child.pid <= 0 || u->run->child.go_fd >= 0)) {
                u->restarts++;
                u->stats.restarts[UNIT_RESTART_EXIT]++;
                unit_start(u);       /* the backoff is over */
        }
}

void unit_restart(struct unit *u, const char *why)
{
        /* An idle gadget stays idle (its new policy applies at its next
         * start). */
        if (u->state == UNIT_IDLE && u->run->child.pid <= 0)
                return;
        if (u->run->child.pid <= 0) {
                timer_stop(u->ev_timer);
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
        /* Ready: the new process starts beside the one that serves. */
        if (unit_switch_can(u)) {
                unit_switch_begin(u, NULL, NULL, why);
                return;
        }
        stop_for(u, why, true);
}

void unit_start_again(struct unit *u)
{
        if (u->run->child.pid > 0 || (u->state != UNIT_STOPPED && u->state != UNIT_FAILED))
                return;
        /* A restart backing off, or parked, starts now, with a fresh
         * backoff, as after a load. */
        timer_stop(u->ev_timer);
        backoff_reset(&u->backoff);
        unit_activate(u);
}

void unit_replace_policy(struct unit *u, struct policy *p, const struct unit_origin *o)
{
        /* Ready: its new process starts on p beside the old one, which
         * keeps its policy until the switch (or for good if the new one
         * does not start). */
        if (unit_switch_can(u)) {
                unit_switch_begin(u, p, o, o->why ? o->why : "policy changed");
                return;
        }
        /* Another restart's new process was starting: p replaces it. */
        unit_switch_drop(u, "its policy changed again");
        if (u->run->peer)
                peer_set_policy(u->run->peer, p);
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

int unit_debug(struct unit *u)
{
        if (u->run->child.pidfd < 0)
                return -ESRCH;
        return syscall(SYS_pidfd_send_signal, u->run->child.pidfd, SANDBOX_SIG_DETACH, NULL, 0) < 0 ? -errno : 0;
}

void unit_signal(struct unit *u, int sig)
{
        if (u->run->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, u->run->child.pidfd, sig, NULL, 0);
}
