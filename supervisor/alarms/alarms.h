/* alarms: the delivery of a gadget's durable alarms (alarm bindings,
 * bindings/bind_alarm.c) and of its Schedule= calls. It listens to the
 * core's units (core/unit_events.h): their start, idle spells, leases,
 * reloads and ends; the core calls nothing of it. The store is the truth:
 * gadgetd keeps in memory only when each alarm binding's first alarm is
 * due and one timer per gadget. When one is due it is read from the store
 * and delivered to the binding's Method= through the one door for calls
 * (core/calls.h), caller "alarm NAME", one delivery at a time per gadget;
 * once the method succeeds the alarm is deleted, durably. A failed
 * delivery (an error, a timeout, the gadget not running) is tried again
 * after backoff_delay_ms of its attempts, the next try's time kept in the
 * store, until ALARMS_ATTEMPTS_MAX attempts: then the alarm is dropped.
 * Every failure and drop is logged and audited. With Store=postgresql only
 * the node holding the gadget's lease delivers its alarms. */
#pragma once

struct core;

/* From now on the alarms and schedules of c's units are delivered (the
 * entry points call it once, after core_open, before the first core_add;
 * what it keeps is freed by core_close). 0 or -errno. */
int alarms_listen(struct core *c);
