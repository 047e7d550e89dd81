/* unit_rollout: a staged rollout (unit.h, docs/releases.md). It is a
 * restart without a gap (unit_switch.c) held after its new process's
 * hello: u->next_run serves a share of the call trees beside u->run, each
 * on its own policy, until the rollout completes (unit_switch_now: the
 * old one drains) or goes back (the new one drains as an old one does:
 * u->old_run, the shutdown after its calls, SIGKILL after the grace).
 * Two runs at most beside each other, as a restart's: a rollout begins
 * only with no old process draining, and a restart during one first
 * sends it back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_int.h"
#include "link/peer.h"
#include "system/log.h"
#include "system/monotime.h"
#include "traceparent.h"

int unit_rollout_arm(struct unit *u, unsigned percent, const struct unit_rollout_bound *bound, const char *version,
                     unit_rollout_fn fn, void *arg)
{
        /* An old process that drains (the last restart's) may be there:
         * the switch's new process then starts once it ended, as any
         * restart's does (unit_switch_begin), and serves its share from
         * its hello on (unit_switch_old_ended). */
        if (u->ro || u->next_run || !unit_switch_can(u) || percent < 1 || percent > 99)
                return -EBUSY;
        struct unit_rollout *ro = calloc(1, sizeof *ro);
        if (!ro)
                return -ENOMEM;
        *ro = (struct unit_rollout){ .percent = percent, .bound = *bound, .fn = fn, .arg = arg };
        snprintf(ro->version, sizeof ro->version, "%s", version);
        u->ro = ro;
        return 0;
}

static void ro_free(struct unit *u)
{
        struct unit_rollout *ro = u->ro;
        u->ro = NULL;
        if (ro->ev_back)
                event_free(ro->ev_back);
        free(ro);
}

void unit_rollout_disarm(struct unit *u)
{
        if (u->ro && !u->ro->running)
                ro_free(u);
}

void unit_rollout_over(struct unit *u, bool completed, const char *why)
{
        struct unit_rollout *ro = u->ro;
        unit_rollout_fn fn = ro->running ? ro->fn : NULL;
        void *arg = ro->arg;
        if (ro->running && !completed) {
                char *back;
                if (asprintf(&back, "%.190s", why) >= 0) {
                        free(u->ro_last_back);
                        u->ro_last_back = back;
                }
        }
        ro_free(u);
        if (fn)
                fn(arg, u, completed, why);
}

/* Its bound was passed (unit_rollout_answered): back, from the loop. */
static void back_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        (void)fd;
        (void)what;
        if (unit_rollout_running(u))
                unit_rollout_back(u, u->ro->back_why);
}

bool unit_rollout_hello(struct unit *u)
{
        struct unit_rollout *ro = u->ro;
        struct unit_run *r = u->next_run;
        if (!ro || ro->running || u->old_run)
                return false;
        if (!(ro->ev_back = evtimer_new(u->core->base, back_cb, u))) {
                unit_rollout_over(u, false, "out of memory");
                return false; /* an ordinary switch then */
        }
        ro->running = true;
        r->start_us = monotime_since_us(&r->start_begin);
        timer_stop(r->ev_start);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_READY, .level = L_INFO, .run = r->number,
                                                        .pid = r->child.pid },
                       "ready: its new process (pid %d, version %s) serves %u%% of the call trees beside pid %d",
                       (int)r->child.pid, ro->version[0] ? ro->version : "new", ro->percent, (int)u->run->child.pid);
        /* The waits for this start (the deploy's) are answered. */
        calls_pending_flush(u);
        return true;
}

/* Which share a trace falls in: 0..99, from its id (random: a new trace's
 * is drawn by trace_begin; one named by a caller is that caller's). */
static unsigned share_of(const struct trace_ctx *t)
{
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (size_t i = 0; i < sizeof t->trace_id; i++)
                h = (h ^ t->trace_id[i]) * 1099511628211ull;
        return (unsigned)(h % 100);
}

struct unit_run *unit_rollout_route(struct unit *u, const struct trace_ctx *t)
{
        struct unit_run *r = u->next_run;
        /* Why only then: a new process not serving, or already ending
         * (its cause set), gets no call. */
        if (!unit_rollout_running(u) || !r || !r->peer || peer_state(r->peer) != PEER_READY || r->cause[0])
                return u->run;
        /* With traces off a call has no trace id: the split holds (in
         * turn), but a tree's calls are not tied to one version. */
        unsigned share = t && !trace_id_zero(t->trace_id, sizeof t->trace_id) ? share_of(t)
                                                                              : (unsigned)(u->ro->seq++ % 100);
        return share < u->ro->percent ? r : u->run;
}

void unit_rollout_answered(struct unit *u, const struct unit_run *r, int code)
{
        struct unit_rollout *ro = u->ro;
        if (!unit_rollout_running(u) || r != u->next_run)
                return;
        ro->calls++;
        ro->errors += code != 0;
        if (ro->calls < ro->bound.min_calls || ro->errors * 100 <= ro->calls * ro->bound.max_error_pct ||
            ro->back_why[0])
                return;
        snprintf(ro->back_why, sizeof ro->back_why, "its error rate passed the bound: %llu errors of %llu calls "
                 "(more than %u%%, over at least %llu calls)", (unsigned long long)ro->errors,
                 (unsigned long long)ro->calls, ro->bound.max_error_pct, (unsigned long long)ro->bound.min_calls);
        timer_arm_ms(ro->ev_back, 0);
}

int unit_rollout_set(struct unit *u, unsigned percent)
{
        if (!unit_rollout_running(u) || percent < 1 || percent > 100)
                return -ENOENT;
        if (percent < 100) {
                u->ro->percent = percent;
                u->ro->calls = u->ro->errors = 0;
                log_msg(L_INFO, u->policy->name, "its rollout of version %s: %u%% of the call trees", u->ro->version,
                        percent);
                return 0;
        }
        unit_switch_now(u);
        unit_rollout_over(u, true, "completed");
        return 0;
}

int unit_rollout_back(struct unit *u, const char *why)
{
        struct unit_run *r = u->next_run;
        if (!unit_rollout_running(u) || !r || u->old_run)
                return -ENOENT;
        char text[220];
        snprintf(text, sizeof text, "%.200s", why);
        u->next_run = NULL;
        u->old_run = r;
        /* Its own binding states go: its binding calls were the gadget's
         * (u->bind), which it keeps until its end. */
        bindings_free(r->bind);
        r->bind = NULL;
        if (r->peer && peer_state(r->peer) == PEER_READY)
                peer_shutdown(r->peer);
        timer_arm_ms(r->ev_end, UNIT_STOP_GRACE_MS);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_RESTARTED, .level = L_WARN, .run = r->number,
                                                        .pid = r->child.pid, .delay_ms = -1 },
                       "its rollout of version %s went back (%s): pid %d serves every call; the new one (pid %d) "
                       "drains", u->ro->version[0] ? u->ro->version : "new", text, (int)u->run->child.pid,
                       (int)r->child.pid);
        unit_rollout_over(u, false, text);
        return 0;
}

void unit_rollout_info(const struct unit *u, struct unit_rollout_info *out)
{
        const struct unit_rollout *ro = u->ro;
        *out = (struct unit_rollout_info){ .last_back = u->ro_last_back ? u->ro_last_back : "", .version = "" };
        if (!ro)
                return;
        *out = (struct unit_rollout_info){ .armed = true, .running = ro->running, .percent = ro->percent,
                                           .version = ro->version, .calls = ro->calls, .errors = ro->errors,
                                           .last_back = u->ro_last_back ? u->ro_last_back : "", .arg = ro->arg };
}
