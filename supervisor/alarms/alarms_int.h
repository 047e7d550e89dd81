/* What alarms.c and alarms_deliver.c (alarm bindings) and schedule.c
 * (Schedule=) share: one timer and one delivery at a time per gadget. For
 * those files only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "system/ratelog.h"

#define ALARMS_ATTEMPTS_MAX 20
/* The longest the timer waits before it looks at the clock again. */
#define ALARMS_RECHECK_MS 60000
/* After a store error, how long before the store is read again. */
#define ALARMS_STORE_RETRY_MS 5000

/* How many gadgets' stores the delivery opens at once to read when
 * their alarms are due (beyond: they wait their turn), so that loading
 * many idle gadgets with alarm bindings does not start as many store
 * threads at once. */
#define ALARMS_OPEN_MAX 16

struct core;
struct unit;
struct unit_alarms;

/* The alarms of one core's units (alarms_listen): the turns of reading
 * closed stores. */
struct alarms {
        struct core *core;
        int id;                               /* its listener's slot in each unit */
        unsigned open;                        /* stores opened for reading now */
        struct unit_alarms *head, **tail;     /* waiting their turn, in order */
};

/* What is known of one alarm binding: when its first alarm is due. */
struct alarm_slot {
        char binding[KV_BINDING_MAX];
        int64_t due;          /* ms since the epoch; -1: none; INT64_MAX: not read yet */
};

/* One Schedule= line: its next time and, while it fails, its retries. */
struct sched_slot {
        int64_t at;           /* the occurrence being delivered or awaited (ms); -1: never again */
        int64_t due;          /* when it is next tried: at, or later after failures */
        unsigned attempts;    /* failed attempts of this occurrence */
};

/* The alarm side of one unit (its slot), when its policy has an alarm
 * binding or a Schedule= line. */
struct unit_alarms {
        struct alarms *al;
        struct unit *u;
        struct event *timer;
        struct event *release;  /* closes an idle gadget's store, after the callback that asked */
        struct alarm_slot *slots;
        size_t n_slots;
        struct sched_slot *sched;     /* per the policy's schedules[i] */
        size_t n_sched;
        bool sched_made;      /* sched made for the policy (schedule_slots) */
        bool sched_stale;     /* the policy was replaced since: made again at the next read */
        unsigned looks;       /* reads of the store in flight */
        bool delivering;      /* an alarm read, called or settled, or a scheduled call: one per gadget */
        bool again;           /* changed meanwhile: read everything again after */
        bool closing;
        bool gated;           /* holds one of ALARMS_OPEN_MAX turns (its store opened to read) */
        bool queued;          /* waits for a turn in the core's gate */
        struct unit_alarms *gate_next;
        /* The alarm being delivered (the store's row, for settling it). */
        struct kv_job *row;
        size_t sched_cur;     /* the schedule being called, while !row */
        char caller[96], via[96];
        struct ratelog fail_log;  /* failed deliveries: one line per window */
};

/* Logs a failed delivery (line: what failed, why, what happens next) at
 * most once per RATELOG_WINDOW_MS, with the count of those left out: a
 * gadget whose methods keep failing cannot flood gadgetd's log (each is
 * audited, under the audit's own budget). */
void alarms_log_failure(struct unit_alarms *a, const char *line);

/* Whether this node delivers to the gadget now (alarms.c). */
bool alarms_may_deliver(const struct unit *u);
/* Sets the timer to the first due alarm or scheduled call (alarms.c). */
void alarms_arm(struct unit_alarms *a);
/* A delivery ended: what changed meanwhile is read now, the timer set
 * again (alarms.c). */
void alarms_delivered(struct unit_alarms *a);
/* Reads every alarm binding's first alarm from the store, then sets the
 * timer (unless a delivery is on its way: then after it) (alarms.c). */
void alarms_read(struct unit_alarms *a);
/* Calls the binding's Method= with the alarm read (a->row; a->delivering
 * set), and records its end in the store (alarms_deliver.c). */
void alarms_deliver(struct unit_alarms *a);

/* schedule.c: the slots of u's Schedule= lines (made again only when its
 * policy was replaced, sched_stale; occurrences that passed while nothing could be
 * delivered are skipped, never replayed). 0 or -ENOMEM. */
int schedule_slots(struct unit_alarms *a);
/* The first scheduled call's due time, or -1. */
int64_t schedule_first(const struct unit_alarms *a, size_t *which);
/* Calls schedule i's method (a->delivering set; alarms_delivered at its end). */
void schedule_deliver(struct unit_alarms *a, size_t i);
