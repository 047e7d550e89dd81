/* core: the registry of gadgets and what their units share (core.h). */
#include "core_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "calls.h"
#include "contract.h"
#include "policy.h"
#include "system/fds.h"
#include "system/log.h"

/* Gadget bindings' calls (struct bindings_env): through the one door. */
static int call_gadget(void *arg, const struct bindings_call *bc, call_fn done, void *cbdata, char *msg,
                       size_t len)
{
        const char *target = bc->target;
        struct unit *t = core_find(arg, target);
        if (!t || (t->state != UNIT_READY && t->state != UNIT_REMOTE && !calls_wait_for_start(t))) {
                snprintf(msg, len, "gadget %s is unavailable (%s)", target,
                         t ? unit_state_name(t->state) : "not loaded");
                return GADGET_EUNAVAILABLE;
        }
        const struct call_req q = { .method = bc->method, .args = bc->args, .chain = bc->chain, .done = done,
                                    .cbdata = cbdata, .caller = bc->caller, .via = bc->via, .approved = true,
                                    .trace = bc->trace };
        return calls_start(t, &q, msg, len);
}

void core_set_remote(struct core *c, const struct core_remote *r)
{
        c->remote = *r;
}

const struct core_remote *core_remote_of(const struct core *c)
{
        return &c->remote;
}

/* Whether the target's own Approve= lists method (struct bindings_env). */
static bool approval_wanted(void *arg, const char *target, const char *method, uint64_t *timeout_ms)
{
        const struct unit *t = core_find(arg, target);
        /* A gadget another node runs: that node asks its own person. */
        if (!t || t->state == UNIT_REMOTE || !policy_listed(t->policy->approve, method))
                return false;
        *timeout_ms = t->policy->approve_timeout_ms;
        return true;
}

/* gadgetd run's core has one unit with one life (struct unit_hooks). */
static bool one_gadget(const struct core *c)
{
        return c->hooks.output_pipes != NULL;
}

_Static_assert(sizeof ((struct unit_stats *)0)->audit_dropped / sizeof (uint64_t) == AUDIT_N_DROPS,
               "a gadget's audit drops by enum audit_drop");

/* A record of gadget's not written one by one: counted in its metrics (a
 * gadget unloaded meanwhile is left out). */
static void audit_dropped(void *arg, const char *gadget, enum audit_drop why)
{
        struct unit *u = core_find(arg, gadget);
        if (u)
                u->stats.audit_dropped[why]++;
}

static int open_parts(struct core *c)
{
        char err[512];
        int e;
        /* First, while the lowest fd numbers are free (see spawn.h). */
        if ((e = spawn_helper_open(&c->helper, err, sizeof err)) < 0) {
                log_msg(L_ERR, NULL, "%s", err);
                return e;
        }
        if ((e = audit_open(c->cfg.state_dir, &c->cfg.audit, c->base, &c->audit)) < 0) {
                log_msg(L_ERR, NULL, "audit log in %s: %s", c->cfg.state_dir, strerror(-e));
                return e;
        }
        audit_on_drop(c->audit, audit_dropped, c);
        if ((e = approvals_new(c->base, c->audit, c->cfg.no_approver, &c->approvals)) < 0) {
                log_msg(L_ERR, NULL, "approvals: %s", strerror(-e));
                return e;
        }
        /* The store's copy of this node's records: the local log's budget. */
        uint64_t keep = c->cfg.audit.keep ? c->cfg.audit.keep : 1;
        const struct bindings_store store = { c->cfg.store_connection, c->cfg.node, c->cfg.peer_listen,
                                              c->cfg.audit.store_keep_days, c->cfg.audit.max_size * keep,
                                              c->cfg.node_forget_ms, c->cfg.lease_ttl_ms,
                                              c->cfg.lease_poll_ms };
        e = bindings_env_open(&c->bindings, c->base, c->cfg.state_dir, c->audit, c->cfg.http_requests_max,
                              &store);
        if (e < 0)
                return e;
        c->bindings.traces = c->cfg.traces;
        c->bindings.call = call_gadget;
        c->bindings.approval_wanted = approval_wanted;
        c->bindings.call_arg = c;
        core_lease_hooks(c);
        c->bindings.approvals = c->approvals;
        c->bindings.fake = c->cfg.fake;
        c->bindings.fake_arg = c->cfg.fake_arg;
        filter_compiled(&c->filter);
        /* Workers never see gadgetd's fds (see spawn.c), but nothing else
         * gadgetd might start should either. */
        fds_cloexec_all();
        /* gadgetd run's one start: its shell gets ready while gadgetd
         * takes its uid pool and limits (the shell's making is most of the
         * start's critical path: its network namespace, the helper's own
         * start). Under cgroup v2 only after the limiter (below): that may
         * move gadgetd into a child of its cgroup to enable controllers
         * there, which a process of ours still in that cgroup makes fail
         * (EBUSY). */
        bool shell_first = one_gadget(c) && !limiter_may_move(c->cfg.limits_want);
        if (spare_open(&c->spare, one_gadget(c) ? NULL : c->base, &c->helper) < 0) {
                log_msg(L_ERR, NULL, "spare sandbox: out of memory");
                return -ENOMEM;
        }
        if (shell_first)
                spare_fill(&c->spare);
        unsigned count = c->cfg.uid_count ? c->cfg.uid_count : UIDPOOL_DEFAULT_COUNT;
        if ((e = c->cfg.uid_lock_kept ? uidpool_open_kept(&c->uids, c->cfg.uid_lock_fd, c->cfg.uid_base, count)
                                      : uidpool_open(&c->uids, UIDPOOL_LOCK_FILE, c->cfg.uid_base, count)) < 0) {
                log_msg(L_ERR, NULL, "host uid pool %s: %s", UIDPOOL_LOCK_FILE,
                        e == -EPERM ? "not a regular file of gadgetd's own user" : strerror(-e));
                return e;
        }
        if ((e = limiter_open(&c->limiter, c->cfg.limits_want, c->cfg.allow_degraded_limits,
                              one_gadget(c) ? CGROUP_HOST_ONE : c->cfg.handoff_ms ? CGROUP_HOST_SCOPES : 0, err,
                              sizeof err)) < 0) {
                log_msg(L_ERR, NULL, "%s", err);
                return e;
        }
        limiter_log(&c->limiter);
        if (one_gadget(c) && !shell_first)
                spare_fill(&c->spare);
        return 0;
}

int core_open(const struct core_config *cfg, const struct unit_hooks *hooks, struct core **out)
{
        struct core *c = calloc(1, sizeof *c);
        *out = NULL;
        if (!c)
                return -ENOMEM;
        *c = (struct core){ .base = cfg->base, .cfg = *cfg, .hooks = *hooks, .uids = { .lock_fd = -1 },
                            .helper = { -1, -1 }, .spare = { .shell = SPAWN_SHELL_NONE } };
        signal(SIGPIPE, SIG_IGN);
        int e = open_parts(c);
        if (e < 0) {
                core_close(c);
                return e;
        }
        *out = c;
        return 0;
}

void core_close(struct core *c)
{
        if (!c)
                return;
        spare_close(&c->spare);
        /* First, while the units they would go on to call are there. */
        approvals_free(c->approvals);
        c->approvals = NULL;
        while (c->units) {
                struct unit *u = c->units;
                core_unlink(c, u);
                unit_free(u);
        }
        nametab_free(&c->by_name);
        core_events_closed(c);
        if (c->ev_wakes)
                event_free(c->ev_wakes);
        if (c->ev_starts)
                event_free(c->ev_starts);
        audit_close(c->audit);
        bindings_env_close(&c->bindings);
        uidpool_close(&c->uids);
        spawn_helper_close(&c->helper);
        limiter_close(&c->limiter);
        free(c);
}

struct unit *core_add(struct core *c, struct policy *p, const struct unit_origin *o)
{
        struct unit *u = unit_new(c, p);
        if (!u || core_index(c, u) < 0) {
                if (u)
                        unit_free(u); /* frees p */
                else
                        policy_free(p);
                return NULL;
        }
        u->policy_hash = o->hash;
        u->from_dir = o->from_dir;
        u->args = o->args;
        return u;
}

void core_unload(struct core *c, struct unit *u, const char *why)
{
        u->remove_when_stopped = true;
        unit_stop(u, why);
}

void core_stop_all(struct core *c, const char *why)
{
        c->stopping = true;
        /* A unit being unloaded is freed by its stop: next is taken first. */
        for (struct unit *u = c->units, *next; u; u = next) {
                next = u->next;
                unit_stop(u, why);
        }
}

void core_kill_all(struct core *c, const char *why)
{
        for (struct unit *u = c->units; u; u = u->next)
                unit_kill(u, why);
}

bool core_stopping(const struct core *c)
{
        return c->stopping;
}

/* A count kept as units start and end, not a walk of every unit: the
 * daemon asks at each unit's end during a stop, which was quadratic in
 * the units at shutdown. */
size_t core_running(const struct core *c)
{
        return c->n_running;
}

void core_count_running(struct unit *u)
{
        bool now = u->indexed && u->run && u->run->child.pid > 0;
        if (now == u->counted_running)
                return;
        u->counted_running = now;
        if (now)
                u->core->n_running++;
        else
                u->core->n_running--;
}

void core_count_state(struct core *c, enum unit_state s, int d)
{
        if (s == UNIT_READY)
                c->n_ready += (size_t)d;
        else if (s == UNIT_FAILED)
                c->n_failed += (size_t)d;
}

/* From counts kept as units change, not a walk of every unit: the daemon
 * asks at each change of any unit's state (its status line), which made
 * the 1,000th of a burst of starts walk 1,000 units several times. */
void core_count(const struct core *c, size_t *all, size_t *ready, size_t *failed)
{
        *all = c->by_name.n;
        *ready = c->n_ready;
        *failed = c->n_failed;
}

struct event_base *core_base(const struct core *c)
{
        return c->base;
}

const char *core_state_dir(const struct core *c)
{
        return c->cfg.state_dir;
}

struct approvals *core_approvals(const struct core *c)
{
        return c->approvals;
}

struct audit *core_audit(const struct core *c)
{
        return c->audit;
}

struct traces *core_traces(const struct core *c)
{
        return c->cfg.traces;
}

struct kvpg_audit *core_audit_store(const struct core *c)
{
        return c->bindings.audit_store;
}

int core_spare(struct core *c, bool ready)
{
        if (ready)
                return spare_fill(&c->spare);
        spare_drop(&c->spare);
        return 0;
}
