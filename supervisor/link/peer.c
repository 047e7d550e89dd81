/* peer: validation and dispatch of one worker's messages, over a conn. */
#include "peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "system/log.h"
#include "policy.h"
#include "types.h"
#include "validate.h"
#include "value.h"
#include "wire.h"
#include "system/arena.h"
#include "system/conn.h"
#include "system/monotime.h"
#include "system/rate.h"
#include "system/timer.h"


struct peer {
        struct conn *conn;
        enum peer_state state;
        const struct policy *policy;
        const struct peer_handlers *h;
        void *data;
        bool yield_logged;            /* the first yield of this run is logged */
        /* FrameValuesPerSecond=: the values decoded; FrameBytesPerSecond=:
         * the bytes read of it and sent in answer to its binding calls. Past
         * either budget the input is held until both have drained to theirs
         * (ev_rate). */
        struct event *ev_rate;
        struct rate values, bytes;
        bool held_output, held_rate, values_logged, bytes_logged;
        bool watched;                 /* each frame told to h->frame (peer_watch) */
        struct timespec progress;     /* the last result, or the first call sent when idle */
        struct timespec frame_at;     /* when the frame being handled was taken (one reading a frame) */
        uint64_t next_id;
        TAILQ_HEAD(, peer_call) calls; /* in flight, oldest first */
        size_t n_pending;
        char **methods;               /* from the hello */
        struct type_sig **sigs;       /* each method's signature, NULL: untyped */
        char **sig_texts;             /* their canonical texts, "" for untyped */
        size_t n_methods;
};

/* One row per message kind: the states it may arrive in, and its handler.
 * Unknown or out-of-state messages are refused here, not in handlers. */
struct dispatch_row {
        Gadget__WorkerMsg__MsgCase kind;
        unsigned states;
        int (*handle)(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len);
};

static int on_hello(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len);
static int keep_methods(struct peer *p, const Gadget__Hello *h, char *why, size_t len);
static int on_result(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len);
static int on_binding_call(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len);
static int on_log(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len);

/* The hello may come only once: it is allowed only while awaiting it. */
static const struct dispatch_row dispatch_table[] = {
        { GADGET__WORKER_MSG__MSG_HELLO, PEER_AWAIT_HELLO, on_hello },
        { GADGET__WORKER_MSG__MSG_RESULT, PEER_READY, on_result },
        { GADGET__WORKER_MSG__MSG_BINDING_CALL, PEER_READY, on_binding_call },
        { GADGET__WORKER_MSG__MSG_LOG, PEER_AWAIT_HELLO | PEER_READY, on_log },
};

static const struct conn_ops conn_ops;

/* The input is held for the log's budget (peer_hold) or this second's
 * frame budget; either keeps it held. */
static void apply_hold(struct peer *p)
{
        conn_hold(p->conn, p->held_output || p->held_rate);
}

/* The ms until both buckets have drained to their budgets (0: within
 * both), the budgets as the policy says now. */
static uint64_t rate_wait(struct peer *p, size_t values, size_t bytes, uint64_t now)
{
        p->values.per_s = p->policy->frame_values_per_s;
        p->bytes.per_s = p->policy->frame_bytes_per_s;
        uint64_t wv = rate_add(&p->values, values, now), wb = rate_add(&p->bytes, bytes, now);
        return wv > wb ? wv : wb;
}

/* The wait is over: the input goes on, or waits again for what was sent
 * to it meanwhile (answers to calls it made before the hold). */
static void rate_cb(evutil_socket_t fd, short what, void *arg)
{
        struct peer *p = arg;
        uint64_t wait_ms = rate_wait(p, 0, 0, monotime_ms());
        if (wait_ms) {
                timer_arm_ms(p->ev_rate, wait_ms);
                return;
        }
        p->held_rate = false;
        apply_hold(p);
}

/* Counts what a frame in or an answer out cost: its values and bytes.
 * Past either budget the input waits until both buckets have drained to
 * them, so that over any span the values decoded and the bytes read and
 * answered are at most their budgets a second (plus one budget at once,
 * and the answers to calls already made). Its answers are never held: a
 * gadget that asks for big answers waits to ask again. */
static void rate_count(struct peer *p, size_t values, size_t bytes, uint64_t now)
{
        uint64_t wait_ms = rate_wait(p, values, bytes, now);
        if (!wait_ms || p->held_rate)
                return;
        p->held_rate = true;
        apply_hold(p);
        timer_arm_ms(p->ev_rate, wait_ms);
        bool over_values = p->values.per_s && rate_level(&p->values, now) > p->values.per_s;
        bool over_bytes = p->bytes.per_s && rate_level(&p->bytes, now) > p->bytes.per_s;
        if (p->h->waited) {
                if (over_values)
                        p->h->waited(p, PEER_BUDGET_VALUES, p->data);
                if (over_bytes)
                        p->h->waited(p, PEER_BUDGET_BYTES, p->data);
        }
        if (over_values && !p->values_logged) {
                p->values_logged = true;
                log_msg(L_INFO, p->policy->name, "its messages held %llu values in a second "
                        "(FrameValuesPerSecond=%llu): the rest wait for the next second (logged once)",
                        (unsigned long long)rate_level(&p->values, now), (unsigned long long)p->values.per_s);
        }
        if (over_bytes && !p->bytes_logged) {
                p->bytes_logged = true;
                log_msg(L_INFO, p->policy->name, "its messages and the answers to its binding calls came "
                        "to %llu bytes in a second (FrameBytesPerSecond=%llu): the rest wait for the next "
                        "second (logged once)",
                        (unsigned long long)rate_level(&p->bytes, now), (unsigned long long)p->bytes.per_s);
        }
}

/* The policy's turn budget, for the connection. */
static void set_budget(struct peer *p)
{
        const struct policy *pol = p->policy;
        struct conn_budget b = { pol->turn_frames_max, pol->turn_bytes_max, pol->frame_values_max };
        conn_set_budget(p->conn, &b);
}

struct peer *peer_new(struct event_base *base, int fd, const struct policy *policy,
                      const struct peer_handlers *h, void *data)
{
        struct peer *p = calloc(1, sizeof *p);
        if (!p)
                return NULL;
        p->state = PEER_AWAIT_HELLO;
        p->policy = policy;
        p->h = h;
        p->data = data;
        TAILQ_INIT(&p->calls);
        /* 0: unsent answers are bounded by the writer alone (four frames). */
        if (conn_new(base, fd, 0, &conn_ops, p, &p->conn) < 0) {
                free(p);
                return NULL;
        }
        if (!(p->ev_rate = evtimer_new(base, rate_cb, p))) {
                conn_free(p->conn);
                free(p);
                return NULL;
        }
        rate_init(&p->values, policy->frame_values_per_s, monotime_ms());
        rate_init(&p->bytes, policy->frame_bytes_per_s, monotime_ms());
        set_budget(p);
        return p;
}

void peer_chain_clear(struct peer_chain *chain)
{
        for (size_t i = 0; i < chain->n; i++)
                free(chain->names[i]);
        free(chain->names);
        *chain = (struct peer_chain){ 0 };
}

/* Unlinks c, a call in flight on p. */
static void unlink_call(struct peer *p, struct peer_call *c)
{
        TAILQ_REMOVE(&p->calls, c, link);
        c->on = NULL;
        p->n_pending--;
        peer_chain_clear(&c->chain);
}

static void fail_pending(struct peer *p, const char *gone)
{
        struct peer_call *c;
        while ((c = TAILQ_FIRST(&p->calls))) {
                unlink_call(p, c);
                c->done(c, NULL, gone);
        }
}

void peer_free(struct peer *p, const char *gone)
{
        if (!p)
                return;
        fail_pending(p, gone ? gone : "the gadget stopped");
        conn_free(p->conn);
        if (p->ev_rate)
                event_free(p->ev_rate);
        for (size_t i = 0; i < p->n_methods; i++) {
                free(p->methods[i]);
                types_sig_free(p->sigs[i]);
                free(p->sig_texts[i]);
        }
        free(p->methods);
        free(p->sigs);
        free(p->sig_texts);
        free(p);
}

enum peer_state peer_state(const struct peer *p) { return p->state; }

uint64_t peer_stalled_ms(const struct peer *p)
{
        return monotime_since_ms(&p->progress);
}
size_t peer_pending(const struct peer *p) { return p->n_pending; }

bool peer_unread(const struct peer *p) { return conn_unread(p->conn); }

size_t peer_methods(const struct peer *p, char ***methods)
{
        *methods = p->methods;
        return p->n_methods;
}

size_t peer_signatures(const struct peer *p, char ***texts)
{
        *texts = p->sig_texts;
        return p->n_methods;
}

size_t peer_buffered(const struct peer *p)
{
        return conn_buffered(p->conn, NULL);
}

int peer_fd(const struct peer *p)
{
        return conn_fd(p->conn);
}

int peer_adopt(struct peer *p, char *const *methods, char *const *sig_texts, size_t n, char *why, size_t len)
{
        /* The same checks as a hello's: the state they come from is input too. */
        Gadget__Hello h = GADGET__HELLO__INIT;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        h.protocol_version = GADGET_PROTOCOL_VERSION;
        h.name = p->policy->name;
        h.n_methods = h.n_signatures = n;
        h.methods = (char **)methods;
        h.signatures = (char **)sig_texts;
        m.msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        m.hello = &h;
        if (p->state != PEER_AWAIT_HELLO) {
                snprintf(why, len, "its link is not new");
                return -EPROTO;
        }
        if (validate_worker_msg(&m, p->policy->name, why, len) < 0)
                return -EPROTO;
        int e = keep_methods(p, &h, why, len);
        if (e < 0)
                return e;
        p->state = PEER_READY;
        return 0;
}

bool peer_method(const struct peer *p, const char *method, const struct type_sig **sig)
{
        for (size_t i = 0; i < p->n_methods; i++)
                if (strcmp(p->methods[i], method) == 0) {
                        *sig = p->sigs[i];
                        return true;
                }
        return false;
}

size_t peer_untyped(const struct peer *p)
{
        size_t n = 0;
        for (size_t i = 0; i < p->n_methods; i++)
                n += p->sigs[i] == NULL;
        return n;
}

/* Ends the conversation: nothing more is read; the owner ends the worker. */
static void close_peer(struct peer *p, const char *why)
{
        if (p->state == PEER_CLOSED)
                return;
        p->state = PEER_CLOSED;
        conn_close(p->conn);
        if (why) {
                char esc[600];
                log_msg(L_ERR, p->policy->name, "protocol violation: %s",
                        log_escape(why, strlen(why), esc, sizeof esc));
        }
        /* After a violation calls fail now; after an end of file they fail
         * when the owner learns how the gadget ended (peer_free). */
        if (why)
                fail_pending(p, "the gadget broke the protocol");
        p->h->closed(p, why, p->data);
}

/* Sends m; *bytes (if not NULL) what it put on the wire. */
static int send_counted(struct peer *p, const Gadget__SupervisorMsg *m, size_t *bytes)
{
        size_t n = 0;
        int e = conn_send_counted(p->conn, &m->base, &n);
        if (e == 0 && p->watched)
                p->h->frame(p, false, NULL, m, n - WIRE_HEADER_SIZE, p->data);
        if (bytes)
                *bytes = n;
        return e;
}

static int send_msg(struct peer *p, const Gadget__SupervisorMsg *m)
{
        return send_counted(p, m, NULL);
}

/* A signature's canonical text ("" for none), malloc'd. */
static char *sig_text(const struct type_sig *sig)
{
        char buf[TYPES_MAX_TEXT + 1] = "";
        if (sig)
                types_sig_print(sig, buf, sizeof buf);
        return strdup(buf);
}

/* The methods of a hello (validated), kept in p. */
static int keep_methods(struct peer *p, const Gadget__Hello *h, char *why, size_t len)
{
        size_t n = h->n_methods;
        p->methods = calloc(n + 1, sizeof *p->methods);
        p->sigs = calloc(n + 1, sizeof *p->sigs);
        p->sig_texts = calloc(n + 1, sizeof *p->sig_texts);
        if (!p->methods || !p->sigs || !p->sig_texts)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                /* The validator parsed each signature once: this one keeps it. */
                const char *text = i < h->n_signatures ? h->signatures[i] : "";
                if (text[0] && types_sig_parse(text, &p->sigs[i], why, len) < 0)
                        return -EPROTO;
                p->n_methods++; /* from here peer_free frees the row */
                if (!(p->methods[i] = strdup(h->methods[i])) || !(p->sig_texts[i] = sig_text(p->sigs[i])))
                        return -ENOMEM;
        }
        return 0;
}

static int on_hello(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len)
{
        int e = keep_methods(p, m->hello, why, len);
        if (e < 0)
                return e;
        Gadget__Welcome w = GADGET__WELCOME__INIT;
        w.protocol_version = GADGET_PROTOCOL_VERSION;
        w.max_frame = WIRE_MAX_FRAME;
        Gadget__SupervisorMsg out = GADGET__SUPERVISOR_MSG__INIT;
        out.msg_case = GADGET__SUPERVISOR_MSG__MSG_WELCOME;
        out.welcome = &w;
        if ((e = send_msg(p, &out)) < 0)
                return e;
        p->state = PEER_READY;
        p->h->hello(p, p->data);
        return 0;
}

static int on_result(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len)
{
        const Gadget__CallResult *r = m->result;
        /* Any result is progress, even one for a call already timed out. */
        if (r->id != 0 && r->id <= p->next_id)
                p->progress = p->frame_at;
        struct peer_call *c;
        TAILQ_FOREACH(c, &p->calls, link) {
                if (c->id != r->id)
                        continue;
                unlink_call(p, c);
                c->done(c, r, NULL);
                return 0;
        }
        /* Ids are never reused, so an unknown id is a reply to a call never
         * made (or one forgotten after its timeout, which is below next_id). */
        if (r->id == 0 || r->id > p->next_id) {
                snprintf(why, len, "result for call %llu, which was never made",
                         (unsigned long long)r->id);
                return -EPROTO;
        }
        return 0;
}

static int on_binding_call(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len)
{
        p->h->binding_call(p, m->binding_call, p->data);
        return 0;
}

static int on_log(struct peer *p, const Gadget__WorkerMsg *m, char *why, size_t len)
{
        p->h->log(p, m->log, p->data);
        return 0;
}

/* What each frame is unpacked into (peers are driven by the loop alone). */
static struct arena frame_arena;

/* Decodes, validates and dispatches one frame; adds the values it held to
 * *values (what decoding it cost). */
static int handle_frame(struct peer *p, const uint8_t *data, size_t n, size_t *values, char *why,
                        size_t len)
{
        Gadget__WorkerMsg *m = NULL;
        int e = -EPROTO;
        size_t cost = 0;
        /* Why this is safe: the values are counted on the packed bytes, so a
         * frame of more than FrameValuesMax costs gadgetd one linear walk,
         * never the allocations of unpacking it. */
        if (value_packed_cost(&gadget__worker_msg__descriptor, data, n, (size_t)p->policy->frame_values_max,
                              &cost, why, len) < 0) {
                if (strstr(why, "more than"))
                        snprintf(why, len, "a frame of more than FrameValuesMax=%llu values",
                                 (unsigned long long)p->policy->frame_values_max);
                return -EPROTO;
        }
        *values += cost;
        if (!frame_arena.pb.alloc)
                arena_init(&frame_arena);
        m = gadget__worker_msg__unpack(&frame_arena.pb, n, data);
        if (!m) {
                arena_reset(&frame_arena);
                snprintf(why, len, "a frame of %zu bytes that does not decode", n);
                return -EPROTO;
        }
        if (validate_worker_msg(m, p->policy->name, why, len) < 0)
                goto out;
        const struct dispatch_row *row = NULL;
        for (size_t i = 0; i < sizeof dispatch_table / sizeof *dispatch_table; i++)
                if (dispatch_table[i].kind == m->msg_case)
                        row = &dispatch_table[i];
        if (!row || !(row->states & p->state)) {
                snprintf(why, len, "message kind %d not allowed %s", (int)m->msg_case,
                         p->state == PEER_AWAIT_HELLO ? "before hello" : "after hello");
                goto out;
        }
        /* Told before its handler: a binding call before its answer. */
        if (p->watched)
                p->h->frame(p, true, m, NULL, n, p->data);
        e = row->handle(p, m, why, len);
out:
        /* Nothing of m outlives its handler: every part is copied. */
        arena_reset(&frame_arena);
        return e;
}

/* One frame of the worker: a violation ends it here, with why. */
static int on_frame(void *arg, const uint8_t *data, size_t len, size_t *values)
{
        struct peer *p = arg;
        char why[256] = "";
        size_t before = *values;
        p->frame_at = monotime_turn();
        int e = handle_frame(p, data, len, values, why, sizeof why);
        if (e < 0)
                close_peer(p, why[0] ? why : "out of memory");
        else
                rate_count(p, *values - before ? *values - before : 1, len,
                           (uint64_t)p->frame_at.tv_sec * 1000u + (uint64_t)p->frame_at.tv_nsec / 1000000u);
        return e;
}

/* The input ended by itself (end of file, a bad frame, a read error). */
static void on_conn_closed(void *arg, int end)
{
        struct peer *p = arg;
        char why[256];
        if (end == CONN_EOF)
                close_peer(p, NULL);
        else if (end == CONN_TRUNCATED)
                close_peer(p, "a truncated frame");
        else if (end == CONN_TOO_BIG)
                close_peer(p, "a frame larger than the maximum");
        else {
                snprintf(why, sizeof why, "read error: %s", strerror(-end));
                close_peer(p, why);
        }
}

/* The turn's budget ran out: said once per run, the first time. */
static void on_yielded(void *arg, size_t frames, size_t bytes, size_t values)
{
        struct peer *p = arg;
        const struct policy *pol = p->policy;
        if (p->yield_logged)
                return;
        p->yield_logged = true;
        log_msg(L_INFO, pol->name, "handled %zu frames, %zu bytes, %zu values in one loop "
                "turn (TurnFramesMax=%llu, TurnBytesMax=%llu, FrameValuesMax=%llu): "
                "the rest wait for the next turn (logged once)", frames, bytes, values,
                (unsigned long long)pol->turn_frames_max,
                (unsigned long long)pol->turn_bytes_max,
                (unsigned long long)pol->frame_values_max);
}

static const struct conn_ops conn_ops = {
        .frame = on_frame,
        .closed = on_conn_closed,
        .yielded = on_yielded,
};

void peer_set_policy(struct peer *p, const struct policy *policy)
{
        p->policy = policy;
        set_budget(p);
}

void peer_watch(struct peer *p, bool on)
{
        p->watched = on && p->h->frame;
}

void peer_hold(struct peer *p, bool hold)
{
        p->held_output = hold;
        apply_hold(p);
}

int peer_chain_copy(struct peer_chain *to, const struct peer_chain *from)
{
        *to = (struct peer_chain){ .depth = from ? from->depth : 0 };
        if (!from || !from->n)
                return 0;
        if (!(to->names = calloc(from->n, sizeof *to->names)))
                return -ENOMEM;
        for (; to->n < from->n; to->n++)
                if (!(to->names[to->n] = strdup(from->names[to->n]))) {
                        peer_chain_clear(to);
                        return -ENOMEM;
                }
        return 0;
}

int peer_call(struct peer *p, struct peer_call *c, const char *method, const Gadget__Value *args,
              const struct peer_chain *chain, uint64_t deadline_us)
{
        if (p->state != PEER_READY)
                return -ENOTCONN;
        if (p->n_pending >= p->policy->calls_queued_max)
                return -ENOBUFS;
        Gadget__Call call = GADGET__CALL__INIT;
        call.id = ++p->next_id;
        call.method = (char *)method;
        call.args = (Gadget__Value *)args;
        call.chain = chain ? chain->names : NULL;
        call.n_chain = chain ? chain->n : 0;
        call.deadline_us = deadline_us;
        Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_CALL;
        m.call = &call;
        int e = peer_chain_copy(&c->chain, chain);
        if (e == 0 && (e = send_msg(p, &m)) < 0)
                peer_chain_clear(&c->chain);
        if (e < 0) {
                p->next_id--; /* the id was never used */
                return e;
        }
        /* The clock of progress starts when the gadget gets work. */
        if (p->n_pending == 0)
                clock_gettime(CLOCK_MONOTONIC, &p->progress);
        c->id = call.id;
        TAILQ_INSERT_TAIL(&p->calls, c, link);
        c->on = p;
        p->n_pending++;
        return 0;
}

void peer_forget(struct peer *p, struct peer_call *pc)
{
        if (pc->on == p) /* not linked when it ended first */
                unlink_call(p, pc);
}

void peer_each_chain(const struct peer *p, void (*fn)(void *arg, const struct peer_chain *chain), void *arg)
{
        const struct peer_call *c;
        TAILQ_FOREACH(c, &p->calls, link)
                fn(arg, &c->chain);
}

const struct trace_ctx *peer_current_trace(const struct peer *p)
{
        const struct peer_call *c = TAILQ_FIRST(&p->calls);
        return c && !trace_id_zero(c->trace.trace_id, TRACE_ID_LEN) ? &c->trace : NULL;
}

int peer_binding_reply(struct peer *p, uint64_t id, const Gadget__Value *value, int code,
                       const char *message)
{
        if (p->state == PEER_CLOSED)
                return -ENOTCONN;
        Gadget__BindingResult r = GADGET__BINDING_RESULT__INIT;
        Gadget__Error err = GADGET__ERROR__INIT;
        r.id = id;
        if (value) {
                r.outcome_case = GADGET__BINDING_RESULT__OUTCOME_VALUE;
                r.value = (Gadget__Value *)value;
        } else {
                err.code = (uint32_t)code;
                err.message = (char *)message;
                r.outcome_case = GADGET__BINDING_RESULT__OUTCOME_ERROR;
                r.error = &err;
        }
        Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT;
        m.binding_result = &r;
        size_t sent = 0;
        int e = send_counted(p, &m, &sent);
        /* What the answer cost the loop is the gadget's: nothing else
         * bounds the bytes a gadget may ask gadgetd to send it. */
        if (e == 0)
                rate_count(p, 0, sent, monotime_ms());
        /* Why this is safe: a gadget that keeps asking without reading the
         * answers would make gadgetd hold them without bound; it is ended
         * instead, once its queue of unsent answers is full. */
        if (e == -ENOBUFS)
                close_peer(p, "binding calls without reading the answers (queue full)");
        return e;
}

int peer_shutdown(struct peer *p)
{
        Gadget__Shutdown s = GADGET__SHUTDOWN__INIT;
        Gadget__SupervisorMsg m = GADGET__SUPERVISOR_MSG__INIT;
        m.msg_case = GADGET__SUPERVISOR_MSG__MSG_SHUTDOWN;
        m.shutdown = &s;
        return send_msg(p, &m);
}
