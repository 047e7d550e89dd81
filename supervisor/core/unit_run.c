/* unit_run: one process of a unit (struct unit_run, core_int.h) — what
 * it holds while it lives, its timers, its kill and its release. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_int.h"
#include "link/peer.h"
#include "policy.h"

const struct policy *unit_run_policy(const struct unit_run *r)
{
        return r->policy ? r->policy : r->u->policy;
}

/* While it runs: new limit hits become audit records. */
static void limits_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        limiter_check(&r->limits, unit_run_policy(r), r->u->core->audit);
}

/* RuntimeMax: the gadget has run for as long as it may. */
static void runtime_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        const struct policy *p = unit_run_policy(r);
        limiter_record(r->u->core->audit, p->name, "RuntimeMax", "killed after RuntimeMax=%llums",
                       (unsigned long long)p->runtime_max_ms);
        unit_run_kill(r, "runtime limit");
}

/* While its sandbox builds, the bound on that (SPAWN_START_TIMEOUT_MS);
 * then StartTimeout: no hello in time. It fails with that cause: the unit's
 * own run as Restart= says, a restart's new process leaves the old one
 * serving (unit_switch.c). */
static void start_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        struct unit *u = r->u;
        const struct policy *p = unit_run_policy(r);
        char cause[128];
        /* Its sandbox not built in time: the start fails as spawn_gadget's
         * would. */
        if (r->child.pid > 0 && r->child.start_want) {
                unit_run_start_failed(r, "sandbox setup timed out");
                return;
        }
        if (r->child.pid <= 0 || (r == u->run && u->state != UNIT_STARTING))
                return;
        snprintf(cause, sizeof cause, "start timeout: no hello within StartTimeout=%llums",
                 (unsigned long long)p->start_timeout_ms);
        limiter_record(u->core->audit, p->name, "StartTimeout", "%s", cause);
        unit_run_kill(r, cause);
}

/* Its end's timer: its link read to the end (or the bound is over), or
 * its stop's grace is over. */
static void end_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_run *r = arg;
        if (r->ending) {
                unit_run_ended(r);
                return;
        }
        r->stop_killed = r->peer && peer_pending(r->peer);
        unit_run_kill(r, NULL);
}

struct unit_run *unit_run_new(struct unit *u)
{
        struct unit_run *r = calloc(1, sizeof *r);
        if (!r)
                return NULL;
        r->u = u;
        r->child = SPAWN_CHILD_NONE;
        r->out_fd = r->err_fd = r->core_fd = -1;
        limiter_run_init(&r->limits);
        return r;
}

int unit_run_timers(struct unit_run *r)
{
        struct event_base *base = r->u->core->base;
        if (!r->ev_limits)
                r->ev_limits = event_new(base, -1, EV_PERSIST, limits_cb, r);
        if (!r->ev_runtime)
                r->ev_runtime = evtimer_new(base, runtime_cb, r);
        if (!r->ev_start)
                r->ev_start = evtimer_new(base, start_timeout_cb, r);
        if (!r->ev_end)
                r->ev_end = evtimer_new(base, end_cb, r);
        return r->ev_limits && r->ev_runtime && r->ev_start && r->ev_end ? 0 : -ENOMEM;
}

void unit_run_free(struct unit_run *r)
{
        if (!r)
                return;
        struct event *evs[] = { r->ev_limits, r->ev_runtime, r->ev_start, r->ev_end };
        for (size_t i = 0; i < 4; i++)
                if (evs[i])
                        event_free(evs[i]);
        bindings_free(r->bind);
        policy_free(r->policy);
        limiter_run_free(&r->limits);
        free(r->crash);
        if (r->core_fd >= 0)
                close(r->core_fd);
        free(r);
}

void unit_run_drop(struct unit_run *r, const char *gone)
{
        struct unit *u = r->u;
        if (r->peer) {
                bindings_orphan(u->bind, r->peer);
                /* Callbacks of failing calls run inside peer_free: they must
                 * not see the peer any more. */
                struct peer *p = r->peer;
                r->peer = NULL;
                peer_free(p, gone);
        }
        struct event **evs[] = { &r->ev_report, &r->ev_out, &r->ev_err };
        for (size_t i = 0; i < 3; i++)
                if (*evs[i]) {
                        event_free(*evs[i]);
                        *evs[i] = NULL;
                }
        if (r->out_fd >= 0)
                close(r->out_fd);
        if (r->err_fd >= 0)
                close(r->err_fd);
        r->out_fd = r->err_fd = -1;
        /* Why apart from the unit: 4 KiB that only a running gadget needs
         * (a declared, idle one costs little). */
        free(r->lines);
        r->lines = NULL;
        unit_starts_end(r);
        r->hello_early = false;
        spawn_child_close(&r->child);
        r->child.pid = -1;
        core_count_running(r->u);
        timer_stop(r->ev_limits);
        timer_stop(r->ev_runtime);
        timer_stop(r->ev_start);
        timer_stop(r->ev_end);
        r->ending = false;
        /* Its limit hits stay the unit's. */
        for (int k = 0; k < LIMITER_HITS_N; k++) {
                r->u->stats.limit_hits[k] += r->limits.hits[k];
                r->limits.hits[k] = 0;
        }
        limiter_end(&r->limits);
        if (r->have_uid) {
                uidpool_release(&u->core->uids, r->uid);
                r->have_uid = false;
        }
}

void unit_run_kill(struct unit_run *r, const char *why)
{
        char *cause = r == r->u->run ? r->u->cause : r->cause;
        if (why && !cause[0])
                snprintf(cause, sizeof r->cause, "%s", why);
        if (r->child.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, r->child.pidfd, SIGKILL, NULL, 0);
        limiter_kill(&r->limits);
}

void unit_run_wait(struct unit_run *r)
{
        if (r->child.pid > 0 && !r->child.foreign)
                waitpid(r->child.pid, NULL, 0);
}

void unit_run_reap(struct unit_run *r, const char *gone)
{
        if (r->child.pid > 0) {
                if (r->child.pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, r->child.pidfd, SIGKILL, NULL, 0);
                limiter_kill(&r->limits);
                unit_run_wait(r);
        }
        unit_run_drop(r, gone);
}
