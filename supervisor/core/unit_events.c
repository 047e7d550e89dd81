/* unit_events: the one writer of a unit's state, and the events the core
 * tells its listeners (unit_events.h). */
#include "unit_events.h"

#include <errno.h>

#include "core_int.h"
#include "link/peer.h"
#include "system/monotime.h"

/* Every listener of core c, in the order they came (n: the first n). */
#define EACH_FIRST(c, l, n) for (const struct unit_listener *l = (c)->listeners; l < (c)->listeners + (n); l++)
#define EACH(c, l) EACH_FIRST(c, l, (c)->n_listeners)

int core_listen(struct core *c, const struct unit_listener *l)
{
        if (c->n_listeners >= CORE_LISTENERS_MAX)
                return -ENOSPC;
        c->listeners[c->n_listeners] = *l;
        return (int)c->n_listeners++;
}

void *unit_slot(const struct unit *u, int id)
{
        return u->slots[id];
}

void unit_set_slot(struct unit *u, int id, void *data)
{
        u->slots[id] = data;
}

void unit_frames_watch(struct unit *u, bool on)
{
        if (on)
                u->frame_watchers++;
        else if (u->frame_watchers)
                u->frame_watchers--;
        struct unit_run *runs[] = { u->run, u->next_run, u->old_run };
        for (size_t i = 0; i < sizeof runs / sizeof *runs; i++)
                if (runs[i] && runs[i]->peer)
                        peer_watch(runs[i]->peer, u->frame_watchers > 0);
}

void unit_events_framed(struct unit *u, const struct unit_frame_event *e)
{
        EACH(u->core, l)
                if (l->framed)
                        l->framed(l->arg, u, e);
}

/* The phase whose time a state counts in (unit_stats.h). */
static enum unit_phase phase_of(enum unit_state s)
{
        return s == UNIT_IDLE ? UNIT_PHASE_IDLE
               : s == UNIT_STARTING || s == UNIT_READY || s == UNIT_STOPPING ? UNIT_PHASE_AWAKE
                                                                              : UNIT_PHASE_NONE;
}

void unit_set_state(struct unit *u, enum unit_state s)
{
        enum unit_state was = u->state;
        u->state = s;
        if (u->indexed) {
                core_count_state(u->core, was, -1);
                core_count_state(u->core, s, 1);
        }
        unit_stats_phase(&u->stats, phase_of(s), monotime_ms());
        EACH(u->core, l)
                if (l->state)
                        l->state(l->arg, u, was);
}

/* The first n listeners are told u is going, then that it is freed. */
static void unwind(struct unit *u, size_t n)
{
        EACH_FIRST(u->core, l, n)
                if (l->going)
                        l->going(l->arg, u);
        EACH_FIRST(u->core, l, n)
                if (l->freed)
                        l->freed(l->arg, u);
}

int unit_events_created(struct unit *u)
{
        size_t n = 0;
        EACH(u->core, l) {
                int e = l->created ? l->created(l->arg, u) : 0;
                n++;
                if (e < 0) {
                        unwind(u, n);
                        return e;
                }
        }
        return 0;
}

void unit_events_lease(struct unit *u, bool held)
{
        EACH(u->core, l)
                if (l->lease)
                        l->lease(l->arg, u, held);
}

void unit_events_policy(struct unit *u)
{
        EACH(u->core, l)
                if (l->policy)
                        l->policy(l->arg, u);
}

void unit_events_going(struct unit *u)
{
        EACH(u->core, l)
                if (l->going)
                        l->going(l->arg, u);
}

void unit_events_freed(struct unit *u)
{
        EACH(u->core, l)
                if (l->freed)
                        l->freed(l->arg, u);
}

void unit_events_called(struct unit *u, const struct unit_call_event *e)
{
        EACH(u->core, l)
                if (l->called)
                        l->called(l->arg, u, e);
}

void unit_events_logged(struct unit *u, const char *stream, const char *line)
{
        EACH(u->core, l)
                if (l->logged)
                        l->logged(l->arg, u, stream, line);
}

void unit_events_exited(struct unit *u, int status, const char *cause)
{
        EACH(u->core, l)
                if (l->exited)
                        l->exited(l->arg, u, status, cause);
}

void unit_events_info(const struct unit *u, struct unit_info *out)
{
        EACH(u->core, l)
                if (l->info)
                        l->info(l->arg, u, out);
}

void core_events_closed(struct core *c)
{
        EACH(c, l)
                if (l->closed)
                        l->closed(l->arg);
        c->n_listeners = 0;
}
