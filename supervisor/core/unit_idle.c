/* unit_idle: gadgets that run only while they are used — Start=on-demand
 * (idle until the first call) and IdleStop= (stopped gracefully after a
 * quiet spell, idle until the next call). The calls that arrive while an
 * idle gadget starts wait in calls.c's queue for its hello. */
#include "core_int.h"

#include <errno.h>
#include <stdio.h>
#include <event2/event.h>

#include "bindings/bindings.h"
#include "link/peer.h"
#include "policy.h"
#include "system/log.h"
#include "system/monotime.h"

/* While a call or binding call is in flight the quiet spell has not
 * begun: it is looked at again this often (and counts from then). */
#define IDLE_BUSY_RECHECK_MS 1000

/* Idle from now: not running, started by its next call. */
static void go_idle(struct unit *u)
{
        u->dormant = true;
        unit_set_state(u, UNIT_IDLE); /* listeners told: its due alarms start it */
}

void unit_activate(struct unit *u)
{
        if (u->policy->start != POLICY_START_ON_DEMAND) {
                unit_start(u);
                return;
        }
        /* On a shared store it still takes its lease: the node that holds
         * it keeps it idle and is the one other nodes forward calls to. */
        u->dormant = true;
        if (unit_lease_wait(u))
                return;
        go_idle(u);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_IDLE, .level = L_INFO },
                       "idle: starts at its first call (Start=on-demand)");
}

bool unit_wakeable(const struct unit *u)
{
        return u->state == UNIT_IDLE || (u->state == UNIT_STARTING && u->waking) ||
               (u->state == UNIT_STOPPING && u->idling);
}

/* The starts in flight, of everyone (party NULL and all true) or of party. */
static unsigned wakes_of(const struct core *c, const void *party, bool all)
{
        unsigned n = 0;
        for (size_t i = 0; i < CORE_WAKES_MAX; i++)
                n += c->waking[i] && (all || c->waking[i]->wake_party == party);
        return n;
}

/* Whether a start for party may begin now: a free slot, and party below
 * its half. */
static bool wake_room(const struct core *c, const void *party)
{
        return wakes_of(c, NULL, true) < CORE_WAKES_MAX && wakes_of(c, party, false) < CORE_WAKES_PER_PARTY;
}

static void wake_now(struct unit *u)
{
        struct core *c = u->core;
        for (size_t i = 0; i < CORE_WAKES_MAX; i++)
                if (!c->waking[i]) {
                        c->waking[i] = u;
                        break;
                }
        u->dormant = false;
        u->waking = true;
        u->wake_counted = true;
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_WOKEN, .level = L_INFO }, "woken: starting");
        unit_start(u);
}

/* Takes u out of the wake queue, if it is there. */
static void wake_unqueue(struct unit *u)
{
        struct core *c = u->core;
        if (!u->wake_queued)
                return;
        struct unit **pp = &c->wake_head;
        while (*pp && *pp != u)
                pp = &(*pp)->wake_next;
        if (*pp)
                *pp = u->wake_next;
        if (c->wake_tail == &u->wake_next)
                c->wake_tail = pp;
        u->wake_next = NULL;
        u->wake_queued = false;
}

/* From the loop: the queued wakes that fit start, oldest first, each
 * caller within its half (a flood's later wakes let others pass). */
static void wakes_cb(evutil_socket_t fd, short what, void *arg)
{
        struct core *c = arg;
        struct unit *u = c->wake_head;
        while (u && wakes_of(c, NULL, true) < CORE_WAKES_MAX) {
                struct unit *next = u->wake_next;
                if (u->state != UNIT_IDLE) {
                        wake_unqueue(u);
                } else if (wake_room(c, u->wake_party)) {
                        wake_unqueue(u);
                        wake_now(u);
                }
                u = next;
        }
}

void unit_wake_done(struct unit *u)
{
        struct core *c = u->core;
        wake_unqueue(u);
        if (!u->wake_counted)
                return;
        u->wake_counted = false;
        for (size_t i = 0; i < CORE_WAKES_MAX; i++)
                if (c->waking[i] == u)
                        c->waking[i] = NULL;
        if (c->wake_head && c->ev_wakes)
                timer_arm_ms(c->ev_wakes, 0);
}

int unit_wake(struct unit *u, const void *party)
{
        struct core *c = u->core;
        if (u->state == UNIT_READY && u->run->peer)
                return 0;
        if (u->state == UNIT_STARTING && u->waking)
                return 0;
        if (u->state == UNIT_STOPPING && u->idling)
                return 0; /* it starts again once stopped (calls wait, or a wake was asked) */
        if (u->state != UNIT_IDLE)
                return -EINVAL;
        if (u->hold)
                return 0; /* held (unit_hold.c): its calls wait for unit_release */
        if (u->wake_queued)
                return 0;
        if (!c->ev_wakes)
                c->ev_wakes = evtimer_new(c->base, wakes_cb, c);
        /* Why this is safe: a flood of wakes costs at most CORE_WAKES_MAX
         * starts at once, and one caller's at most half of them; the rest
         * wait their turn (and, if the event could not be made, start now
         * as before). */
        u->wake_party = party;
        if (!wake_room(c, party) && c->ev_wakes) {
                if (!c->wake_tail)
                        c->wake_tail = &c->wake_head;
                u->wake_queued = true;
                u->wake_next = NULL;
                *c->wake_tail = u;
                c->wake_tail = &u->wake_next;
                return 0;
        }
        wake_now(u);
        return 0;
}

/* IdleStop=: stopped once nothing was in flight for that long. */
static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit *u = arg;
        uint64_t limit = u->policy->idle_stop_ms, now = monotime_ms();
        if (u->state != UNIT_READY || !u->run->peer || !limit)
                return;
        /* A restart under way (its new or old process) is no quiet. */
        if (peer_pending(u->run->peer) || bindings_busy(u->bind) || u->next_run || u->old_run) {
                unit_active(u, now);
                timer_arm_ms(u->ev_idle, limit < IDLE_BUSY_RECHECK_MS ? limit : IDLE_BUSY_RECHECK_MS);
                return;
        }
        uint64_t quiet = now - u->last_active_ms;
        if (quiet < limit) {
                timer_arm_ms(u->ev_idle, limit - quiet);
                return;
        }
        char why[96];
        snprintf(why, sizeof why, "idle: nothing to do for IdleStop=%llums", (unsigned long long)limit);
        unit_lifecycle(u, &(struct unit_lifecycle_info){ .event = LC_IDLE, .level = L_INFO, .run = u->run->number,
                                                        .pid = u->run->child.pid }, "%s: stopping it", why);
        unit_stop(u, why);
        u->idling = true;
}

void unit_idle_arm(struct unit *u)
{
        if (!u->policy->idle_stop_ms)
                return;
        if (!u->ev_idle && !(u->ev_idle = evtimer_new(u->core->base, idle_cb, u))) {
                log_msg(L_WARN, u->policy->name, "IdleStop=: out of memory: it keeps running");
                return;
        }
        unit_active(u, monotime_ms());
        timer_arm_ms(u->ev_idle, u->policy->idle_stop_ms);
}

void unit_idle_enter(struct unit *u)
{
        u->idling = false;
        go_idle(u);
}

void unit_idle_stopped(struct unit *u)
{
        if (u->hold) {
                unit_hold_check(u);
                return;
        }
        if (u->state == UNIT_IDLE && !TAILQ_EMPTY(&u->pending))
                unit_wake(u, u->wake_party); /* as the call that woke it last */
}
