/* unit_hold: a gadget held idle while gadgetd changes its state under it
 * (gadgetctl rollback --with-state: control/deploy_state.c). It stops as
 * an idle stop does (IdleStop=, unit_idle.c): its process is asked to
 * shut down after its calls, and calls that come meanwhile wait in
 * u->pending as for an idle gadget's start. Once no process of it is
 * left (nor a restart's old one draining) it is held: idle, its calls
 * still waiting but starting nothing, until unit_release, which starts it
 * as a call to an idle gadget would. So a caller waits through the hold
 * (within its CallTimeout) and is never refused for it. */
#include "core_int.h"

#include <errno.h>
#include <stdlib.h>

#include "policy.h"
#include "system/log.h"

struct unit_hold {
        unit_hold_fn fn;
        void *arg;
        bool held;                  /* fn was told: u is idle, no process of it left */
        struct event *ev;           /* fn told from the loop, never from inside a process's end */
};

static void hold_free(struct unit *u)
{
        struct unit_hold *h = u->hold;
        u->hold = NULL;
        if (h->ev)
                event_free(h->ev);
        free(h);
}

/* Nothing of u runs: idle, no process, none draining. */
static bool quiet(const struct unit *u)
{
        return u->state == UNIT_IDLE && u->run->child.pid <= 0 && !u->old_run && !u->next_run;
}

static void hold_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        struct unit_hold *h = u->hold;
        (void)fd;
        (void)what;
        if (!h || h->held || !quiet(u))
                return;
        h->held = true;
        h->fn(h->arg, u, 0);
}

void unit_hold_check(struct unit *u)
{
        if (u->hold && !u->hold->held && quiet(u))
                event_active(u->hold->ev, EV_TIMEOUT, 0);
}

int unit_hold(struct unit *u, unit_hold_fn fn, void *arg, const char *why)
{
        /* Ready or idle here, and nothing else changing its process: a
         * restart's new process, a rollout, another hold. */
        bool ready = unit_switch_can(u) && !u->ro;
        if (u->hold || u->next_run || u->ro || (!ready && !(u->state == UNIT_IDLE && !u->wake_queued)))
                return -EBUSY;
        struct unit_hold *h = calloc(1, sizeof *h);
        if (!h || !(h->ev = event_new(u->core->base, -1, 0, hold_cb, u))) {
                free(h);
                return -ENOMEM;
        }
        h->fn = fn;
        h->arg = arg;
        if (ready) {
                /* As idle_cb's stop: it ends idle (unit_idle_enter), its
                 * lease kept on a shared store (stopped). The hold is set
                 * after it: any other stop calls the hold off (stop_for). */
                unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_IDLE, .level = L_INFO,
                                                                .run = u->run->number, .pid = u->run->child.pid },
                               "%s: stopping it, calls wait", why);
                unit_stop(u, why);
                u->idling = true;
        }
        u->hold = h;
        unit_hold_check(u);
        return 0;
}

bool unit_held(const struct unit *u)
{
        /* Held and still quiet: nothing of it started meanwhile. */
        return u->hold && u->hold->held && quiet(u);
}

void unit_hold_ended(struct unit *u, int err)
{
        struct unit_hold *h = u->hold;
        if (!h)
                return;
        bool told = h->held;
        unit_hold_fn fn = h->fn;
        void *arg = h->arg;
        hold_free(u);
        if (!told)
                fn(arg, u, err);
}

void unit_release(struct unit *u)
{
        if (!u->hold)
                return;
        hold_free(u);
        /* Its waiting calls start it, and a Start=always gadget starts
         * whatever waits: as an idle one woken (unit_idle.c). */
        if (u->state == UNIT_IDLE && (!TAILQ_EMPTY(&u->pending) || u->policy->start != POLICY_START_ON_DEMAND))
                unit_wake(u, u->wake_party);
}
