/* unit_starts: the bound on sandboxes building at once. The daemon
 * launches a start (spawn_launch) and reads its sandbox's report from the
 * loop, so many sandboxes build side by side while the loop serves calls;
 * a burst of loads (1,000 at once) must not fork 1,000 of them at once:
 * each holds a host uid, a cgroup, pipes and the kernel's namespaces while
 * it builds, and more builds than the CPUs can run only queue in the
 * scheduler (and the loop with them). Starts past the bound wait here, in
 * order, and go as builds end. */
#include <sched.h>

#include "core_int.h"

/* Builds in flight per CPU of gadgetd's. A build is mostly the kernel's
 * work in the sandbox's processes (namespaces, mounts, cgroups: ~5-15 ms
 * of CPU) with hand-offs between them (gadgetd -> helper -> PID 2 ->
 * init) where a CPU would idle: a few per CPU keep every CPU busy through
 * those waits, while gadgetd's own part of each start (the clone, the id
 * maps, the cgroups: ~2 ms on the loop) keeps the loop's share. */
#define BUILDS_PER_CPU 4

static unsigned builds_max(struct core *c)
{
        if (!c->builds_max) {
                cpu_set_t cpus;
                int n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
                c->builds_max = BUILDS_PER_CPU * (unsigned)(n > 0 ? n : 1);
        }
        return c->builds_max;
}

bool unit_starts_room(struct core *c)
{
        return c->builds < builds_max(c);
}

static void starts_cb(evutil_socket_t fd, short what, void *arg)
{
        struct core *c = arg;
        while (c->start_head && unit_starts_room(c)) {
                struct unit *u = c->start_head;
                unit_starts_unqueue(u);
                unit_start(u);
        }
}

bool unit_starts_queue(struct unit *u)
{
        struct core *c = u->core;
        if (u->start_queued)
                return true;
        if (!c->ev_starts && !(c->ev_starts = evtimer_new(c->base, starts_cb, c)))
                return false; /* out of memory: it starts now rather than never */
        if (!c->start_tail)
                c->start_tail = &c->start_head;
        u->start_queued = true;
        u->start_next = NULL;
        *c->start_tail = u;
        c->start_tail = &u->start_next;
        return true;
}

void unit_starts_unqueue(struct unit *u)
{
        struct core *c = u->core;
        if (!u->start_queued)
                return;
        struct unit **pp = &c->start_head;
        while (*pp && *pp != u)
                pp = &(*pp)->start_next;
        if (*pp)
                *pp = u->start_next;
        if (c->start_tail == &u->start_next)
                c->start_tail = pp;
        u->start_next = NULL;
        u->start_queued = false;
}

void unit_starts_begin(struct unit_run *r)
{
        if (r->building)
                return;
        r->building = true;
        r->u->core->builds++;
}

void unit_starts_end(struct unit_run *r)
{
        struct core *c = r->u->core;
        if (!r->building)
                return;
        r->building = false;
        c->builds--;
        /* From the loop: this runs inside a unit's callbacks. */
        if (c->start_head && c->ev_starts && !c->stopping)
                timer_arm_ms(c->ev_starts, 0);
}
