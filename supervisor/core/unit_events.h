/* unit_events: a unit's state, written in one place (unit_set_state in
 * unit_events.c), and the listeners of the units' events — the parts
 * above the core that keep something of their own per unit and act when
 * it changes (alarms/, which the entry points install). The core calls
 * nothing of them but these callbacks, each optional. */
#pragma once

#include <stdbool.h>

#include "gadget.pb-c.h"
#include "unit.h"

struct trace_ctx;

struct core;

/* One call of a unit that ended, as a listener is told of it. */
struct unit_call_event {
        const char *method;
        int code;                /* 0, or the GADGET_E* code it failed with */
        uint64_t duration_us;    /* from calls_start to its end */
        const struct trace_ctx *trace; /* its span's context, NULL if not traced (written as
                                        * text by a listener that keeps it, never on every call) */
};

/* One frame on a unit's channel (its worker link), as a listener is
 * told of it while the unit's frames are watched (unit_frames_watch):
 * in, one the gadget sent (w, validated), else one gadgetd sent it (s);
 * bytes, its encoded size; run, which process of the unit. Nothing of w
 * or s outlives the call. */
struct unit_frame_event {
        bool in;
        const Gadget__WorkerMsg *w;
        const Gadget__SupervisorMsg *s;
        size_t bytes;
        uint32_t run;
};

/* Listeners one core takes. */
#define CORE_LISTENERS_MAX 4

struct unit_listener {
        /* u was made (core_add): what the listener keeps of it goes in its
         * slot (unit_set_slot). 0, or -errno: u is not made. */
        int (*created)(void *arg, struct unit *u);
        /* u's state was written; was is the one before (it may be the same). */
        void (*state)(void *arg, struct unit *u, enum unit_state was);
        /* Store=postgresql: this node took (held) or lost u's lease. */
        void (*lease)(void *arg, struct unit *u, bool held);
        /* u's policy was replaced (a reload), before its restart. */
        void (*policy)(void *arg, struct unit *u);
        /* u is being freed: nothing new may begin for it. */
        void (*going)(void *arg, struct unit *u);
        /* u's bindings are freed (its store answered everything): the slot
         * is the listener's to free. */
        void (*freed)(void *arg, struct unit *u);
        /* A call of u ended on this node (not a wake, nor one another
         * node answered, nor one made with call_req.untailed). On the
         * call's path: it must not wait, nor call u. */
        void (*called)(void *arg, struct unit *u, const struct unit_call_event *e);
        /* A line of u's log was kept (its log budget let it in): stream is
         * "stdout", "stderr" or "log" (a log message over the RPC). */
        void (*logged)(void *arg, struct unit *u, const char *stream, const char *line);
        /* A frame on u's channel, while a listener watches them
         * (unit_frames_watch). On the frame's path: it must not wait. */
        void (*framed)(void *arg, struct unit *u, const struct unit_frame_event *e);
        /* u's serving process ended: its wait status, and the cause as
         * gadgetctl status says it. */
        void (*exited)(void *arg, struct unit *u, int status, const char *cause);
        /* Adds what the listener knows of u to what gadgetctl status shows. */
        void (*info)(void *arg, const struct unit *u, struct unit_info *out);
        /* The core closes, its units freed: arg is the listener's to free. */
        void (*closed)(void *arg);
        void *arg;
};

/* Adds l (copied), before the first core_add: its id (its slot in every
 * unit) >= 0, or -ENOSPC. A listener with no created (that keeps no
 * slot: the control socket's) may come later. */
int core_listen(struct core *c, const struct unit_listener *l);
/* What listener id keeps of u (NULL: nothing yet). */
void *unit_slot(const struct unit *u, int id);
void unit_set_slot(struct unit *u, int id, void *data);
/* One more (on) or one fewer watcher of u's frames: while there is one,
 * each frame of each of its processes is told to the listeners' framed;
 * with none, a frame costs one test of a flag (link/peer.h). */
void unit_frames_watch(struct unit *u, bool on);
