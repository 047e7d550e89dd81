/* tail: tail bindings ([Binding NAME] Type=tail, Of=GADGET..., Method=).
 * It listens to the core's units (core/unit_events.h): each call that
 * ends on this node, each log line kept, each exit of a gadget named by
 * a tail binding's Of= becomes an event in that binding's queue (at most
 * QueueMax=; past it the event is dropped and counted). The queue goes to
 * the tail gadget's Method= in batches, later, through the one door for
 * calls (core/calls.h, caller "tail NAME"), at most one batch in flight
 * per binding, each batch saying how many events were dropped since the
 * last. Recording an event copies it and nothing more: the observed
 * gadget never waits for its tail. Only tail gadgets that run on this
 * node get this node's events. */
#pragma once

struct core;

/* From now on the tail bindings of c's units get their events (the entry
 * points call it once, after core_open, before the first core_add; what
 * it keeps is freed by core_close). 0 or -errno. */
int tail_listen(struct core *c);
