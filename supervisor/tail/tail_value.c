/* tail_value: a batch as the tail's method gets it, {binding, dropped,
 * events: [{gadget, kind, seq, time, ...}]}, laid out in one allocation
 * whose strings point into the events. Why not value.c's builders: they
 * allocate each value, entry and key apart, some forty a call event, on
 * the loop that serves every gadget's calls. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tail_int.h"

#define EVENT_FIELDS 9

/* One event's map and its entries. */
struct ev_value {
        Gadget__Value v;
        Gadget__Map map;
        Gadget__MapEntry entries[EVENT_FIELDS];
        Gadget__MapEntry *eptr[EVENT_FIELDS];
        Gadget__Value vals[EVENT_FIELDS];
};

/* The batch: its top map first (what the caller frees), then the list. */
struct batch_value {
        struct ev_value top;                /* binding, dropped, events */
        Gadget__Value list_v;
        Gadget__List list;
        Gadget__Value *items[TAIL_BATCH_MAX];
        struct ev_value ev[];
};

static struct ev_value *map_init(struct ev_value *m)
{
        m->v = (Gadget__Value)GADGET__VALUE__INIT;
        m->map = (Gadget__Map)GADGET__MAP__INIT;
        m->v.kind_case = GADGET__VALUE__KIND_MAP_VALUE;
        m->v.map_value = &m->map;
        m->map.entries = m->eptr;
        return m;
}

/* The next entry of m: key (a constant) and a value of kind, returned to be set. */
static Gadget__Value *put(struct ev_value *m, const char *key, Gadget__Value__KindCase kind)
{
        size_t i = m->map.n_entries++;
        m->entries[i] = (Gadget__MapEntry)GADGET__MAP_ENTRY__INIT;
        m->entries[i].key = (char *)key;
        m->vals[i] = (Gadget__Value)GADGET__VALUE__INIT;
        m->vals[i].kind_case = kind;
        m->entries[i].value = &m->vals[i];
        m->eptr[i] = &m->entries[i];
        return &m->vals[i];
}

static void put_str(struct ev_value *m, const char *key, const char *s)
{
        put(m, key, GADGET__VALUE__KIND_STRING_VALUE)->string_value = (char *)s;
}

static void put_int(struct ev_value *m, const char *key, int64_t n)
{
        put(m, key, GADGET__VALUE__KIND_INT_VALUE)->int_value = n;
}

static void put_null(struct ev_value *m, const char *key)
{
        put(m, key, GADGET__VALUE__KIND_NULL_VALUE)->null_value = true;
}

/* An exit's status (null if it was killed) and signal (null if it exited). */
static void exit_fields(struct ev_value *m, const struct tail_event *e)
{
        const char *sig = WIFSIGNALED(e->status) ? sigabbrev_np(WTERMSIG(e->status)) : NULL;
        if (WIFEXITED(e->status))
                put_int(m, "status", WEXITSTATUS(e->status));
        else
                put_null(m, "status");
        if (sig)
                put_str(m, "signal", sig);
        else if (WIFSIGNALED(e->status))
                put_int(m, "signal", WTERMSIG(e->status));
        else
                put_null(m, "signal");
        put_str(m, "cause", e->text);
}

static void event_fields(struct ev_value *m, const struct tail_event *e)
{
        static const char *const kinds[] = { [TAIL_CALL] = "call", [TAIL_LOG] = "log", [TAIL_EXIT] = "exit" };
        put_str(m, "gadget", e->gadget);
        put_str(m, "kind", kinds[e->kind]);
        put_int(m, "seq", (int64_t)e->seq);
        put_int(m, "time", e->time_ms);
        if (e->kind == TAIL_CALL) {
                put_str(m, "method", e->method);
                put_str(m, "outcome", e->code ? gadget_error_name((unsigned)e->code) : "ok");
                put_int(m, "duration_us", (int64_t)e->duration_us);
                put_str(m, "trace", e->trace);
        } else if (e->kind == TAIL_EXIT) {
                exit_fields(m, e);
        } else {
                put_str(m, "stream", e->stream);
                put_str(m, "line", e->text);
        }
}

Gadget__Value *tail_batch_value(const char *binding, uint64_t dropped, struct tail_event *const *ev, size_t n)
{
        struct batch_value *b = malloc(sizeof *b + n * sizeof *b->ev);
        if (!b)
                return NULL;
        struct ev_value *top = map_init(&b->top);
        put_str(top, "binding", binding);
        put_int(top, "dropped", (int64_t)dropped);
        Gadget__Value *events = put(top, "events", GADGET__VALUE__KIND_LIST_VALUE);
        b->list = (Gadget__List)GADGET__LIST__INIT;
        b->list.items = b->items;
        b->list.n_items = n;
        events->list_value = &b->list;
        for (size_t i = 0; i < n; i++) {
                b->items[i] = &map_init(&b->ev[i])->v;
                event_fields(&b->ev[i], ev[i]);
        }
        return &top->v; /* the start of b: free() frees it all */
}
