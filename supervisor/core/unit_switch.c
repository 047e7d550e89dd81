/* unit_switch: a restart without a gap. A ready gadget's restart
 * (gadgetctl restart, a changed policy, a binary upgrade) starts the new
 * process beside the one that serves (u->next_run: its own host uid, cgroup,
 * limits run, from the spare shell like any start); calls go on to the
 * old one until the new one said hello, then new calls go to the new one
 * (u->run) while the old one (u->old_run) finishes the calls it has and is
 * shut down as a graceful stop does. If the new one does not start, the
 * old one serves on, on its policy, and the restart's waits are told why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "link/peer.h"
#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"

bool unit_switch_can(const struct unit *u)
{
        /* Not gadgetd run's one life; not while its lease is in doubt. */
        return !u->hooks->output_pipes && u->state == UNIT_READY && u->run->peer && u->want_running &&
               unit_runs_here(u);
}

/* The new process's run: released and freed. */
static void next_free(struct unit *u, const char *gone)
{
        struct unit_run *r = u->next_run;
        u->next_run = NULL;
        unit_run_reap(r, gone);
        unit_run_free(r);
}

/* Starts u->next_run's worker: 0, or -errno with err. */
static int next_spawn(struct unit *u, char *err, size_t len)
{
        struct unit_run *r = u->next_run;
        int e;
        /* What its bindings keep (its secret files) is read for its own
         * policy now, beside the old process's; the gadget's at the switch. */
        if (!(r->bind = bindings_new(&u->core->bindings, unit_run_policy(r)))) {
                snprintf(err, len, "out of memory");
                return -ENOMEM;
        }
        if ((e = bindings_load(r->bind, err, len)) < 0)
                return e;
        return unit_run_go(r, false, err, len);
}

void unit_switch_start_failed(struct unit *u, const char *err)
{
        struct unit_run *r = u->next_run;
        snprintf(r->cause, sizeof r->cause, "cannot start: %.200s", err);
        unit_run_drop(r, r->cause);
        r->ending = true;
        timer_arm_ms(r->ev_end, 0);
}

/* Starts u->next_run, or fails it from the loop, as a start that fails
 * later is: the restart's answer waits for it (calls_wake). */
static void next_start(struct unit *u)
{
        struct unit_run *r = u->next_run;
        char err[600];
        r->spawn_deferred = false;
        if (next_spawn(u, err, sizeof err) < 0) {
                unit_switch_start_failed(u, err);
                return;
        }
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_RESTARTED, .level = L_INFO, .run = r->number,
                                                        .pid = r->child.pid, .delay_ms = -1 },
                       "%s: restarting without a gap: its new process (pid %d) starts beside pid %d", u->switch_why ? u->switch_why : "restart",
                       (int)r->child.pid, (int)u->run->child.pid);
}

void unit_switch_begin(struct unit *u, struct policy *p, const struct unit_origin *o, const char *why)
{
        /* A rollout's new process drains as an old one (it may have
         * calls): this restart's starts once it ended, on its own. */
        if (unit_rollout_running(u))
                unit_rollout_back(u, why);
        uint64_t hash = o ? o->hash : 0;
        bool from_dir = o && o->from_dir;
        /* A restart while the last one's new process starts: that one is
         * dropped (it served nothing), and a changed policy it carried is
         * this restart's unless this one brings its own. */
        if (u->next_run) {
                struct unit_run *was = u->next_run;
                if (!p && was->policy) {
                        p = was->policy;
                        was->policy = NULL;
                        hash = was->policy_hash;
                        from_dir = was->from_dir;
                }
                next_free(u, "restarted again before its hello");
        }
        /* Its timers now: a start that fails before its spawn (its
         * bindings) ends it through ev_end (unit_switch_start_failed). */
        struct unit_run *r = unit_run_new(u);
        char *why_kept = r ? strdup(why) : NULL;
        if (!r || unit_run_timers(r) < 0 || !why_kept) {
                free(why_kept);
                unit_run_free(r);
                policy_free(p);
                unit_switch_failed(u, "out of memory");
                return;
        }
        r->policy = p;
        r->policy_hash = hash;
        r->from_dir = from_dir;
        free(u->switch_why);
        u->switch_why = why_kept;
        u->next_run = r;
        /* Two runs at most beside each other: the last switch's old process
         * (whose cgroup name, the other of two, the new one would take) ends
         * first, within its stop's grace (unit_switch_old_ended). */
        if (u->old_run) {
                r->spawn_deferred = true;
                log_msg(L_INFO, u->policy->name, "%s: its new process starts once the previous one (pid %d) "
                        "ended", why, (int)u->old_run->child.pid);
                return;
        }
        next_start(u);
}

/* The new policy, which the new process runs, becomes the gadget's: the
 * old process is judged by it too from now on, as its bindings are. */
static void policy_take(struct unit *u, struct unit_run *r)
{
        struct policy *p = r->policy;
        r->policy = NULL;
        if (u->old_run && u->old_run->peer)
                peer_set_policy(u->old_run->peer, p);
        bindings_set_policy(u->bind, p);
        policy_free(u->policy);
        u->policy = p;
        u->policy_hash = r->policy_hash;
        u->from_dir = u->from_dir || r->from_dir;
        unit_keep_policy(u, NULL, 0);
        unit_events_policy(u);
}

/* u->next_run takes u->run's place (which becomes u->old_run, or is already
 * gone: old NULL) with its policy and its binding states. */
static void take_place(struct unit *u, struct unit_run *old)
{
        struct unit_run *r = u->next_run;
        u->next_run = NULL;
        u->run = r;
        u->old_run = old;
        core_count_running(u);
        if (r->policy)
                policy_take(u, r);
        bindings_swap_states(u->bind, r->bind);
        bindings_free(r->bind);
        r->bind = NULL;
        bindings_attach(u->bind, r->peer);
        u->restarts++;
        u->stats.restarts[UNIT_RESTART_REQUEST]++;
        u->stats.starts++;
        backoff_reset(&u->backoff);
        snprintf(u->last_cause, sizeof u->last_cause, "%s", u->switch_why ? u->switch_why : "restart");
}

/* The switch: new calls go to the new process from now on; the old one
 * gets no new call, answers those it has, then is shut down (a graceful
 * stop: the shutdown message follows its calls, SIGKILL after the grace). */
void unit_switch_now(struct unit *u)
{
        struct unit_run *old = u->run, *r = u->next_run;
        take_place(u, old);
        r->start_us = monotime_since_us(&r->start_begin);
        timer_stop(r->ev_start);
        u->cause[0] = '\0';
        if (old->peer && peer_state(old->peer) == PEER_READY)
                peer_shutdown(old->peer);
        timer_arm_ms(old->ev_end, UNIT_STOP_GRACE_MS);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_READY, .level = L_INFO, .run = r->number,
                                                        .pid = r->child.pid },
                       "ready: its new process (pid %d) serves; the previous one (pid %d) drains", (int)r->child.pid,
                       (int)old->child.pid);
        unit_idle_arm(u);
        /* The restart's waits (gadgetctl restart) are answered. */
        calls_pending_flush(u);
        u->hooks->ready(u->hooks->arg, u);
}

void unit_switch_hello(struct unit_run *r)
{
        struct unit *u = r->u;
        /* The last switch's old process still drains: this one waits
         * for its end (two runs at most beside each other). */
        if (u->old_run) {
                timer_stop(r->ev_start);
                log_msg(L_INFO, u->policy->name, "its new process (pid %d) said hello: it serves once the "
                        "previous one (pid %d) ended", (int)r->child.pid, (int)u->old_run->child.pid);
                return;
        }
        if (unit_rollout_hello(u))
                return;
        unit_switch_now(u);
}

void unit_switch_failed(struct unit *u, const char *why)
{
        bool changed = u->next_run && u->next_run->policy;
        if (u->ro)
                unit_rollout_over(u, false, why);
        if (u->next_run) {
                unit_run_free(u->next_run); /* dropped by the caller */
                u->next_run = NULL;
        }
        snprintf(u->last_cause, sizeof u->last_cause, "restart failed: %.180s; it serves on with its previous "
                 "process (pid %d)%s", why, (int)u->run->child.pid, changed ? " and policy" : "");
        log_msg(L_ERR, u->policy->name, "%s", u->last_cause);
        /* Only the restart's waits wait while it is ready. */
        calls_pending_fail(u, u->last_cause);
}

void unit_switch_old_ended(struct unit *u)
{
        unit_run_free(u->old_run);
        u->old_run = NULL;
        unit_hold_check(u); /* a hold waited for it to end */
        if (u->next_run && u->next_run->spawn_deferred) {
                next_start(u);
                return;
        }
        if (u->next_run && u->next_run->peer && peer_state(u->next_run->peer) == PEER_READY && !u->next_run->cause[0] &&
            !unit_rollout_hello(u))
                unit_switch_now(u);
}

void unit_switch_drop(struct unit *u, const char *why)
{
        if (u->ro)
                unit_rollout_over(u, false, why);
        if (!u->next_run)
                return;
        char gone[300];
        snprintf(gone, sizeof gone, "its restart was called off: %.200s", why);
        next_free(u, gone);
        calls_pending_fail(u, gone);
}

int unit_switch_promote(struct unit *u)
{
        struct unit_run *r = u->next_run, *dead = u->run;
        /* Not if its lease went: another node may run it now. */
        if (!r || !r->peer || r->cause[0] || !unit_runs_here(u)) {
                if (r)
                        unit_switch_drop(u, u->cause[0] ? u->cause : "its process ended");
                return -ENOENT;
        }
        bool said_hello = peer_state(r->peer) == PEER_READY;
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_EXITED, .level = L_WARN, .run = dead->number,
                                                        .has_status = dead->have_program_status,
                                                        .status = dead->program_status, .failed = true },
                       "%s while its restart's new process (pid %d) started: that one serves%s", u->cause,
                       (int)r->child.pid, said_hello ? " now" : " once it said hello");
        take_place(u, u->old_run); /* an old one still draining drains on */
        unit_run_free(dead);
        /* A rollout's new process serves every call now. */
        if (u->ro)
                unit_rollout_over(u, unit_rollout_running(u), "its previous process ended: the new one serves "
                                  "every call");
        memcpy(u->last_cause, u->cause, sizeof u->last_cause);
        u->cause[0] = '\0';
        if (!said_hello) {
                /* Calls wait for its hello as for any start (on_hello). */
                unit_set_state(u, UNIT_STARTING);
                return 0;
        }
        u->run->start_us = monotime_since_us(&u->run->start_begin);
        timer_stop(u->run->ev_start);
        unit_idle_arm(u);
        calls_pending_flush(u);
        u->hooks->ready(u->hooks->arg, u);
        return 0;
}
