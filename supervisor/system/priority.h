/* priority: gadgetd's event loop ahead of its gadgets on a busy CPU. */
#pragma once

/* The nice value gadgetd's loop takes when it was started at 0 (the
 * default) and may lower its own: with 1,000 sandboxes building, a loop at
 * the gadgets' own weight waited longer for a CPU than it worked, and a
 * gadget spinning on every CPU delayed every other gadget's answers. */
#define PRIORITY_LOOP_NICE (-10)

/* For the calling thread (the loop): nice PRIORITY_LOOP_NICE where it
 * was 0 (the unit's Nice= or a caller's nice other than 0 is kept), and,
 * where the nice is below 0, SCHED_RESET_ON_FORK, so that every process
 * and thread it starts from then on (a sandbox, a store's thread) starts
 * at nice 0: a gadget never runs ahead of gadgetd's other work or of the
 * host's. Returns 0 (why: what was kept and why, for the log; empty when
 * the nice was set), or -errno where the nice is below 0 and could not be
 * kept from the gadgets: gadgetd then must not start them. A
 * loop left at 0 is as safe, only slower under load. */
int priority_loop(char *why, unsigned why_len);
