/* alarms: delivering a gadget's durable alarms (alarms.h). */
#include "alarms.h"
#include "alarms_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>

#include "bindings/bindings.h"
#include "bindings/ops.h"
#include "core/core.h"
#include "policy.h"
#include "store/store.h"
#include "system/log.h"
#include "system/timer.h"

/* A read of the store and whom it is for. */
struct look {
        struct unit_alarms *a;
        bool deliver;         /* its first alarm is to be delivered if due */
};

static int slots_set(struct unit_alarms *a);
static void on_going(void *arg, struct unit *u);
static void on_freed(void *arg, struct unit *u);

static struct alarm_slot *slot_of(struct unit_alarms *a, const char *binding)
{
        for (size_t i = 0; i < a->n_slots; i++)
                if (strcmp(a->slots[i].binding, binding) == 0)
                        return &a->slots[i];
        return NULL;
}

/* Whether a may read its store now: it is open already, or one of the
 * ALARMS_OPEN_MAX turns is free (a takes it); else a waits in the core's
 * gate, in order, and reads when a turn is given back. */
static bool gate_enter(struct unit_alarms *a)
{
        struct alarms *g = a->al;
        if (a->gated || unit_bindings(a->u)->kv)
                return true;
        if (g->open < ALARMS_OPEN_MAX) {
                g->open++;
                a->gated = true;
                return true;
        }
        if (!a->queued) {
                if (!g->head)
                        g->tail = &g->head;
                a->gate_next = NULL;
                *g->tail = a;
                g->tail = &a->gate_next;
                a->queued = true;
        }
        return false;
}

static void gate_unlink(struct unit_alarms *a)
{
        struct alarms *g = a->al;
        struct unit_alarms **pp = &g->head;
        while (*pp && *pp != a)
                pp = &(*pp)->gate_next;
        if (*pp)
                *pp = a->gate_next;
        if (g->tail == &a->gate_next)
                g->tail = pp;
        a->queued = false;
}

/* a's turn ends: the first gadget waiting reads now. */
static void gate_leave(struct unit_alarms *a)
{
        struct alarms *g = a->al;
        if (a->queued)
                gate_unlink(a);
        if (!a->gated)
                return;
        a->gated = false;
        g->open--;
        struct unit_alarms *next = g->head;
        if (next && !core_stopping(g->core)) {
                gate_unlink(next);
                alarms_read(next);
        }
}

/* Whether this node delivers u's alarms now: on PostgreSQL only while it
 * holds the lease; to a gadget that is ready, or idle (the call starts it,
 * calls.c). Its hello kicks the delivery: the alarms of a gadget stopped
 * or starting wait for it. */
bool alarms_may_deliver(const struct unit *u)
{
        if (!unit_runs_here(u))
                return false;
        return unit_state_of(u) == UNIT_READY || unit_state_of(u) == UNIT_IDLE;
}

/* The first due alarm binding's slot (NULL: none), its time in *first
 * (-1: none); INT64_MAX if a slot is not read yet. */
static struct alarm_slot *first_alarm(const struct unit_alarms *a, int64_t *first)
{
        struct alarm_slot *found = NULL;
        *first = -1;
        for (size_t i = 0; i < a->n_slots; i++)
                if (a->slots[i].due >= 0 && (*first < 0 || a->slots[i].due < *first)) {
                        *first = a->slots[i].due;
                        found = &a->slots[i];
                }
        return found;
}

/* Sets the timer to the first due alarm or scheduled call (none: no timer). */
void alarms_arm(struct unit_alarms *a)
{
        int64_t first, sched;
        size_t which;
        event_del(a->timer);
        if (a->closing || a->delivering || a->looks)
                return;
        first_alarm(a, &first);
        sched = schedule_first(a, &which);
        if (sched >= 0 && (first < 0 || sched < first))
                first = sched;
        /* Why not at once: arm runs inside the store's callbacks. */
        event_active(a->release, 0, 0);
        if (first < 0 || !alarms_may_deliver(a->u))
                return;
        /* The timer runs on the monotonic clock, alarms on the wall
         * clock: waking at least every ALARMS_RECHECK_MS follows a change
         * of the time of day. */
        int64_t wait = first - bind_alarm_now_ms();
        if (wait < 0)
                wait = 0;
        if (wait > ALARMS_RECHECK_MS)
                wait = ALARMS_RECHECK_MS;
        timer_arm_ms(a->timer, (uint64_t)wait);
}

/* Reads again after a store error, in ALARMS_STORE_RETRY_MS. */
static void arm_retry(struct unit_alarms *a)
{
        for (size_t i = 0; i < a->n_slots; i++)
                a->slots[i].due = INT64_MAX;
        timer_arm_ms(a->timer, ALARMS_STORE_RETRY_MS);
        event_active(a->release, 0, 0);  /* its turn goes to another meanwhile */
}

void alarms_delivered(struct unit_alarms *a)
{
        a->delivering = false;
        if (a->again) {
                alarms_read(a);
                return;
        }
        alarms_arm(a);
}

/* A read of binding's alarms failed (logged once per window). */
static void store_failed(struct unit_alarms *a, const char *binding, const char *why)
{
        char line[400];
        snprintf(line, sizeof line, "alarm binding %s: reading the store failed: %s", binding, why);
        alarms_log_failure(a, line);
}

static void look_done(struct kv_job *job)
{
        struct look *l = job->arg;
        struct unit_alarms *a = l->a;
        bool deliver_it = l->deliver;
        free(l);
        a->looks--;
        if (a->closing)
                return;
        struct alarm_slot *s = slot_of(a, job->binding);
        if (job->err < 0 && job->err != -ENOENT) {
                store_failed(a, job->binding, job->why[0] ? job->why : strerror(-job->err));
                if (deliver_it)
                        a->delivering = false;
                arm_retry(a);
                return;
        }
        if (s)
                s->due = job->err == -ENOENT ? -1 : job->due;
        if (deliver_it && s && s->due >= 0 && s->due <= bind_alarm_now_ms() && alarms_may_deliver(a->u)) {
                /* The finished job is freed by the store: keep a copy. */
                struct kv_job *row = kv_job_new(job->type, "alarm look-up", job->binding, NULL, NULL);
                if (row && (row->val = malloc(job->vlen ? job->vlen : 1))) {
                        memcpy(row->key, job->key, row->klen = job->klen);
                        memcpy(row->val, job->val, row->vlen = job->vlen);
                        row->at = job->at;
                        row->due = job->due;
                        row->attempts = job->attempts;
                        a->row = row;
                        alarms_deliver(a);
                        return;
                }
                kv_job_free(row);
        }
        if (deliver_it) {
                a->delivering = false;
                if (a->again) {
                        alarms_read(a);
                        return;
                }
        }
        alarms_arm(a);
}

/* Reads binding's first alarm from the store. */
static int look(struct unit_alarms *a, const char *binding, bool deliver_it)
{
        struct kv *kv = bindings_kv(unit_bindings(a->u));
        struct look *l = calloc(1, sizeof *l);
        const struct kv_type *type = binding_type_find(BINDING_ALARM)->store;
        struct kv_job *job = l && kv ? kv_job_new(type, "alarm look-up", binding, look_done, l) : NULL;
        if (!job) {
                free(l);
                return -ENOMEM;
        }
        *l = (struct look){ .a = a, .deliver = deliver_it };
        a->looks++;
        int e = kv_submit(kv, job, UINT32_MAX);
        if (e < 0) {
                a->looks--;
                store_failed(a, binding, job->why[0] ? job->why : strerror(-e));
                kv_job_free(job);
                free(l);
                return e;
        }
        return 0;
}

void alarms_read(struct unit_alarms *a)
{
        if (a->closing)
                return;
        if (a->delivering) {
                a->again = true;
                return;
        }
        a->again = false;
        event_del(a->timer);
        /* The policy may have changed (a reload): its alarm bindings now. */
        if (slots_set(a) < 0) {
                arm_retry(a);
                return;
        }
        if (a->n_slots && !gate_enter(a))
                return;
        for (size_t i = 0; i < a->n_slots; i++)
                if (look(a, a->slots[i].binding, false) < 0) {
                        arm_retry(a);
                        return;
                }
        /* Without alarm bindings (Schedule= only) nothing is read. */
        if (!a->looks)
                alarms_arm(a);
}

/* The timer: the first due alarm is read again and delivered (or, after
 * a store error, everything is read again). */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct unit_alarms *a = arg;
        int64_t due;
        size_t which;
        (void)fd;
        (void)what;
        if (a->delivering || a->looks || !alarms_may_deliver(a->u))
                return;
        for (size_t i = 0; i < a->n_slots; i++)
                if (a->slots[i].due == INT64_MAX) {
                        alarms_read(a);
                        return;
                }
        struct alarm_slot *first = first_alarm(a, &due);
        int64_t sched = schedule_first(a, &which);
        if (sched >= 0 && (due < 0 || sched < due)) {
                if (sched > bind_alarm_now_ms()) {
                        alarms_arm(a);
                        return;
                }
                a->delivering = true;
                schedule_deliver(a, which);
                return;
        }
        if (!first)
                return;
        if (due > bind_alarm_now_ms()) {
                alarms_arm(a);  /* woken early (ALARMS_RECHECK_MS) */
                return;
        }
        if (!gate_enter(a))
                return;
        a->delivering = true;
        if (look(a, first->binding, true) < 0) {
                a->delivering = false;
                arm_retry(a);
        }
}

/* Closes the store of a gadget that does not run once nothing is read. */
static void on_release(evutil_socket_t fd, short what, void *arg)
{
        struct unit_alarms *a = arg;
        (void)fd;
        (void)what;
        int64_t first;
        if (a->closing || a->looks || a->delivering)
                return;
        /* An alarm due now keeps the store and the turn: the timer
         * delivers it next (giving them back would only read it again). */
        first_alarm(a, &first);
        if (first >= 0 && first != INT64_MAX && first <= bind_alarm_now_ms() && alarms_may_deliver(a->u))
                return;
        bindings_kv_release(unit_bindings(a->u));
        gate_leave(a);
}

static void changed(void *arg)
{
        alarms_read(arg);
}

/* The slots of the policy's alarm bindings. */
static int slots_set(struct unit_alarms *a)
{
        const struct policy *p = unit_policy(a->u);
        size_t n = 0;
        for (size_t i = 0; i < p->n_bindings; i++)
                n += p->bindings[i].type == BINDING_ALARM;
        struct alarm_slot *s = calloc(n ? n : 1, sizeof *s);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0, j = 0; i < p->n_bindings; i++)
                if (p->bindings[i].type == BINDING_ALARM) {
                        snprintf(s[j].binding, sizeof s[j].binding, "%s", p->bindings[i].name);
                        s[j++].due = INT64_MAX;
                }
        free(a->slots);
        a->slots = s;
        a->n_slots = n;
        return schedule_slots(a);
}

/* Whether p has an alarm binding or a Schedule= line. */
static bool has_alarms(const struct policy *p)
{
        if (p->n_schedules)
                return true;
        for (size_t i = 0; i < p->n_bindings; i++)
                if (p->bindings[i].type == BINDING_ALARM)
                        return true;
        return false;
}

/* The alarm side of u, if its policy has an alarm binding or a
 * Schedule= line (else nothing is kept): reads when its alarms are due.
 * 0 or -ENOMEM. */
static int alarms_new(struct alarms *al, struct unit *u)
{
        if (!has_alarms(unit_policy(u)))
                return 0;
        struct event_base *base = core_base(al->core);
        struct unit_alarms *a = calloc(1, sizeof *a);
        if (!a || !(a->timer = evtimer_new(base, on_timer, a)) ||
            !(a->release = event_new(base, -1, 0, on_release, a))) {
                if (a && a->timer)
                        event_free(a->timer);
                free(a);
                return -ENOMEM;
        }
        a->al = al;
        a->u = u;
        unit_set_slot(u, al->id, a);
        if (slots_set(a) < 0) {
                on_going(al, u);
                on_freed(al, u);
                return -ENOMEM;
        }
        struct gadget_bindings *g = unit_bindings(u);
        g->alarms_changed = changed;
        g->alarms_arg = a;
        alarms_read(a);
        return 0;
}

/* u became ready or idle, this node took or lost its lease, or its policy
 * was replaced: its alarms are read again and what is due is delivered. */
static void kick(struct alarms *al, struct unit *u)
{
        struct unit_alarms *a = unit_slot(u, al->id);
        if (!a) {
                /* A reload gave it its first alarm binding. */
                if (alarms_new(al, u) < 0)
                        log_msg(L_ERR, unit_name(u), "alarms: out of memory: none are delivered");
                return;
        }
        if (!a->closing)
                alarms_read(a);
}

static int on_created(void *arg, struct unit *u)
{
        return alarms_new(arg, u);
}

/* Ready, or idle (its due alarms start it): what is due is delivered.
 * From remote to idle is the grant of its lease, whose event (on_lease)
 * reads them. */
static void on_state(void *arg, struct unit *u, enum unit_state was)
{
        enum unit_state s = unit_state_of(u);
        if (s == UNIT_READY || (s == UNIT_IDLE && was != UNIT_REMOTE))
                kick(arg, u);
}

static void on_lease(void *arg, struct unit *u, bool held)
{
        (void)held;
        kick(arg, u);
}

/* A reload: its alarm bindings and schedules are taken from the new
 * policy, its schedules start over. */
static void on_policy(void *arg, struct unit *u)
{
        struct alarms *al = arg;
        struct unit_alarms *a = unit_slot(u, al->id);
        if (a)
                a->sched_stale = true;
        kick(al, u);
}

/* When u's next alarm is due (ms since the epoch), or -1 if none is known. */
static int64_t next_ms(const struct unit_alarms *a)
{
        int64_t first = -1, sched;
        size_t which;
        if (!a)
                return -1;
        for (size_t i = 0; i < a->n_slots; i++)
                if (a->slots[i].due >= 0 && a->slots[i].due != INT64_MAX && (first < 0 || a->slots[i].due < first))
                        first = a->slots[i].due;
        sched = schedule_first(a, &which);
        return sched >= 0 && (first < 0 || sched < first) ? sched : first;
}

static void on_info(void *arg, const struct unit *u, struct unit_info *out)
{
        struct alarms *al = arg;
        int64_t next = next_ms(unit_slot(u, al->id));
        out->next_alarm_ms = next > 0 ? next : 0;
}

/* u is going: nothing new is started (what ends now is dropped). */
static void on_going(void *arg, struct unit *u)
{
        struct alarms *al = arg;
        struct unit_alarms *a = unit_slot(u, al->id);
        if (a) {
                a->closing = true;
                event_del(a->timer);
                event_del(a->release);
                gate_leave(a);
        }
}

/* After u's bindings are freed (their store answered everything). */
static void on_freed(void *arg, struct unit *u)
{
        struct alarms *al = arg;
        struct unit_alarms *a = unit_slot(u, al->id);
        if (!a)
                return;
        event_free(a->timer);
        event_free(a->release);
        kv_job_free(a->row);
        free(a->slots);
        free(a->sched);
        free(a);
        unit_set_slot(u, al->id, NULL);
}

int alarms_listen(struct core *c)
{
        struct alarms *al = calloc(1, sizeof *al);
        if (!al)
                return -ENOMEM;
        al->core = c;
        const struct unit_listener l = { .created = on_created, .state = on_state, .lease = on_lease,
                                         .policy = on_policy, .going = on_going, .freed = on_freed,
                                         .info = on_info, .closed = free, .arg = al };
        if ((al->id = core_listen(c, &l)) < 0) {
                int e = al->id;
                free(al);
                return e;
        }
        return 0;
}
