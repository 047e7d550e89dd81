/* alarms: the delivery of a gadget's durable alarms (alarm bindings,
 * bindings/bind_alarm.c). The store is the truth: gadgetd keeps in memory
 * only when each alarm binding's first alarm is due and one timer per
 * gadget. When one is due it is read from the store and delivered to the
 * binding's Method= through the one door for calls (calls.c), caller
 * "alarm NAME", one delivery at a time per gadget; once the method
 * succeeds the alarm is deleted, durably. A failed delivery (an error, a
 * timeout, the gadget not running) is tried again after backoff_delay_ms
 * of its attempts, the next try's time kept in the store, until
 * ALARMS_ATTEMPTS_MAX attempts: then the alarm is dropped. Every failure
 * and drop is logged and audited. With Store=postgresql only the node
 * holding the gadget's lease delivers its alarms. */
#pragma once

#include <stdint.h>

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

struct unit;
struct unit_alarms;

/* The turns of reading closed stores, one per core (struct core). */
struct alarms_gate {
        unsigned open;                        /* stores opened for reading now */
        struct unit_alarms *head, **tail;     /* waiting their turn, in order */
};

/* The alarm side of u (when its policy has an alarm binding; else
 * nothing is kept): reads when its alarms are due. 0 or -ENOMEM. */
int alarms_new(struct unit *u);
/* u is going: nothing new is started (what ends now is dropped). */
void alarms_close(struct unit *u);
/* After u's bindings are freed (their store answered everything). */
void alarms_free(struct unit *u);
/* u's policy was replaced, it became ready, or this node took its lease:
 * its alarms are read again and what is due is delivered. */
void alarms_kick(struct unit *u);
/* u's policy was replaced (a reload): its alarm bindings and schedules
 * are taken from it, its schedules start over. */
void alarms_policy(struct unit *u);
/* When u's next alarm is due (ms since the epoch), or -1 if none is known. */
int64_t alarms_next_ms(const struct unit *u);
