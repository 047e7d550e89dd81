/* forward: calls and moves between the nodes that share a store, over the
 * link (nodelink.h). Out: a call to a gadget another node runs goes to
 * that node as a control Call carrying gadgetd's own record of where it
 * comes from (core/calls.h's core_remote). In: a call from another node
 * goes through the one door (calls_start) as if made here — typed
 * methods, admin methods, approvals and the chain's cycle check included
 * — but only to a gadget this node runs: a forwarded call is never
 * forwarded again. A wake (gadgetctl wake) goes the same way, as a call
 * without a method.
 *
 * A peer is bounded like a control-group member, never more: only a name
 * the store knows as a node, and not in PeerRevoked=, takes part; its
 * record of a call (caller, via, chain) is shown and checked, never
 * trusted for rights — an admin call never crosses the link, and a method
 * in the gadget's Approve= is asked of a person here, on the node that
 * runs it, whatever the peer says; its waiting approvals count against
 * the peer node (APPROVALS_PER_CALLER), whatever callers it names; and
 * every call it forwards is audited with its name. */
#include "forward.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "answer.h"
#include "contract.h"
#include "core/calls.h"
#include "core/core.h"
#include "core/unit.h"
#include "link/peer.h"
#include "nodelink.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/ratelog.h"
#include "system/ssl_dl.h"
#include "system/trace.h"
#include "system/trace_tree.h"
#include "validate.h"

/* One session from another node: its calls and moves in flight here. */
struct session {
        struct nodelink_in *in;
        char from[64];
        struct call_owner calls;
        LIST_HEAD(, move_in) moves;
        LIST_ENTRY(session) link;   /* in the forward's sessions */
};

/* A move asked by another node; it outlives its session if that ends. */
struct move_in {
        struct session *s;       /* NULL once the session is gone */
        uint64_t id;
        LIST_ENTRY(move_in) link; /* in its session's moves, while it has one */
};

/* PeerRevoked=: the nodes refused however valid their certificate,
 * read again whenever the file changes. */
#define REVOKED_MAX 256
struct revoked {
        char *path;                       /* NULL: none */
        struct stat seen;                 /* the file as last read */
        bool read;
        size_t n;
        char names[REVOKED_MAX][64];
};

struct forward {
        struct core *core;
        struct nodelink *link;
        LIST_HEAD(, session) sessions;
        struct revoked revoked;
        struct ratelog refused_log;       /* nodes refused: logged once a window */
        struct ratelog traces_log;        /* asks for spans refused: logged once a window */
        uint64_t traces_refused;          /* asks for spans past NODELINK_TRACES_PER_S */
};

static struct session *session_of(struct forward *f, struct nodelink_in *in, const char *from)
{
        struct session *s;
        LIST_FOREACH(s, &f->sessions, link)
                if (s->in == in)
                        return s;
        s = calloc(1, sizeof *s);
        if (!s)
                return NULL;
        s->in = in;
        snprintf(s->from, sizeof s->from, "%s", from);
        LIST_INSERT_HEAD(&f->sessions, s, link);
        return s;
}

/* An error answer to another node's request id. */
static void send_error(struct nodelink_in *in, uint64_t id, int code, const char *msg)
{
        struct answer a;
        nodelink_answer(in, answer_error(&a, id, code, msg));
}

/* A done answer to another node's request id. */
static void send_done(struct nodelink_in *in, uint64_t id, const char *msg)
{
        struct answer a;
        nodelink_answer(in, answer_done(&a, id, msg));
}

/* A call from another node ended here (struct call_owner: its session is
 * still there). */
static void in_call_done(void *arg, uint64_t id, const Gadget__Value *res, int code, const char *message)
{
        struct session *s = arg;
        if (!res) {
                send_error(s->in, id, code, message ? message : "the call failed");
                return;
        }
        struct answer a;
        nodelink_answer(s->in, answer_of(&a, id, &res->base));
}

/* The gadget called must run here: the caller's node saw it so, and a
 * call is forwarded once only (no loops between nodes that disagree). */
static struct unit *runs_here(struct forward *f, struct session *s, uint64_t id, const char *name)
{
        struct unit *u = core_find(f->core, name);
        char msg[300];
        /* One this node takes back after its re-exec: the call waits here
         * for it, as a local one does. */
        if (u && (unit_leased(u) || unit_lease_adopting(u)))
                return u;
        if (!u)
                snprintf(msg, sizeof msg, "no gadget named \"%s\" on node %s", name, core_node(f->core));
        else if (unit_owner(u)[0])
                snprintf(msg, sizeof msg, "gadget %s does not run on node %s (it runs on %s now)", name,
                         core_node(f->core), unit_owner(u));
        else
                snprintf(msg, sizeof msg, "gadget %s does not run on node %s", name, core_node(f->core));
        send_error(s->in, id, u ? GADGET_EUNAVAILABLE : GADGET_ENOTFOUND, msg);
        return NULL;
}

/* runs_here for a call: a refusal counted with the calls from other nodes. */
static struct unit *call_runs_here(struct forward *f, struct session *s, uint64_t id, const char *name)
{
        struct unit *u = runs_here(f, s, id, name);
        if (!u)
                core_forwarded_refused(f->core, core_find(f->core, name) ? GADGET_EUNAVAILABLE : GADGET_ENOTFOUND);
        return u;
}

/* One audit record per call another node forwards, naming that node
 * and what it says of the call's origin, and the call's trace (t: its
 * span here, zero if none). */
static void audit_in(struct forward *f, struct session *s, const Control__Call *call, int code, const char *msg,
                     const struct trace_ctx *t)
{
        char trace[2 * TRACE_ID_LEN + 1];
        bool traced = t && !trace_id_zero(t->trace_id, TRACE_ID_LEN);
        if (traced)
                trace_hex(t->trace_id, TRACE_ID_LEN, trace);
        char detail[700];
        snprintf(detail, sizeof detail, "forwarded by node %s for %.200s through %.200s%s%.200s", s->from,
                 call->caller[0] ? call->caller : "a caller", call->via[0] ? call->via : "another node",
                 code ? ": " : "", code ? msg : "");
        struct audit_record rec = { .gadget = call->name, .binding = "node", .op = call->method,
                                    .outcome = !code ? AUDIT_OK : code == GADGET_EDENIED ? AUDIT_DENIED : AUDIT_ERROR,
                                    .detail = detail, .trace = traced ? trace : NULL };
        audit_write(core_audit(f->core), &rec);
}

static void in_call(struct forward *f, struct session *s, const Control__Request *q)
{
        const Control__Call *call = q->call;
        struct unit *u = call_runs_here(f, s, q->id, call->name);
        char msg[400];
        if (!u)
                return;
        /* Why this is safe: the admin UI is the gateway's of the node that
         * runs the gadget; no peer's word makes a call an admin call. */
        if (call->admin) {
                snprintf(msg, sizeof msg, "admin methods of %s are called on the node that runs it (%s): an admin "
                         "call never crosses the link", call->name, core_node(f->core));
                audit_in(f, s, call, GADGET_EDENIED, msg, NULL);
                core_forwarded_refused(f->core, GADGET_EDENIED);
                send_error(s->in, q->id, GADGET_EDENIED, msg);
                return;
        }
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        char caller[300], party[80];
        snprintf(caller, sizeof caller, "%s on node %s", call->caller[0] ? call->caller : "a caller", s->from);
        snprintf(party, sizeof party, "node %s", s->from);
        const struct peer_chain chain = { .names = call->chain, .n = call->n_chain, .depth = call->depth };
        /* Why this is safe: the peer's traceparent is read strictly and
         * used only as the parent of this call's span (its trace id, its
         * flags); an invalid one is ignored, and the call goes on. */
        struct trace_ctx parent;
        bool traced = traceparent_parse(call->traceparent, strlen(call->traceparent), &parent) == 0;
        struct trace_ctx span = { 0 };
        /* Why this is safe: call->approved is never read: a method in
         * Approve= waits here for a person of this node. */
        const struct call_req cq = { .method = call->method, .args = call->args ? call->args : &null,
                                     .chain = call->n_chain ? &chain : NULL, .done = in_call_done, .cbdata = s,
                                     .tag = q->id, .owner = &s->calls, .caller = caller, .party = party,
                                     .via = call->via[0] ? call->via : "another node",
                                     .trace = traced ? &parent : NULL, .peer_node = s->from, .trace_out = &span,
                                     .left_ms = call->timeout_ms };
        int code = calls_start(u, &cq, msg, sizeof msg);
        audit_in(f, s, call, code, msg, code ? NULL : &span);
        if (code)
                send_error(s->in, q->id, code, msg);
}

/* A wake from another node: answered once the gadget is ready here. */
static void in_wake_done(void *arg, uint64_t id, const Gadget__Value *res, int code, const char *message)
{
        struct session *s = arg;
        if (res)
                send_done(s->in, id, "ready");
        else
                send_error(s->in, id, code, message ? message : "the gadget did not start");
}

static void in_wake(struct forward *f, struct session *s, const Control__Request *q)
{
        struct unit *u = runs_here(f, s, q->id, q->wake->name);
        if (!u)
                return;
        const struct call_req cq = { .done = in_wake_done, .cbdata = s, .tag = q->id, .owner = &s->calls };
        char msg[400];
        int code = calls_wake(u, &cq, msg, sizeof msg);
        if (code == 1)
                send_done(s->in, q->id, "ready");
        else if (code)
                send_error(s->in, q->id, code, msg);
}

/* Values a span costs in an answer, as the node's budget counts them
 * (its fields, ids and strings). */
#define SPAN_VALUES 12

/* Another node asks for this node's spans of a trace (gadgetctl trace
 * there): this node's only, never gathered further. Why this is safe: a
 * node asks at most NODELINK_TRACES_PER_S times a second, each ask finds
 * its spans through the index by trace id (never a walk of TraceKeep=
 * spans), and the spans answered are charged to the node's values a
 * second — a node asking in a loop waits, alone. */
static void in_trace(struct forward *f, struct session *s, const Control__Request *q)
{
        enum { MAX = CONTROL_TRACE_SPANS_MAX };
        if (!nodelink_in_may_trace(s->in)) {
                char msg[200];
                f->traces_refused++;
                ratelog_warn(&f->traces_log, monotime_ms(), NULL, "asks for traces refused as busy",
                             "node %s asks for traces more than %d times a second: refused as busy", s->from,
                             NODELINK_TRACES_PER_S);
                snprintf(msg, sizeof msg, "node %s asks for traces more than %d times a second", s->from,
                         NODELINK_TRACES_PER_S);
                send_error(s->in, q->id, GADGET_EBUSY, msg);
                return;
        }
        uint8_t id[TRACE_ID_LEN];
        const struct span **spans = calloc(MAX, sizeof *spans);
        struct trace_tree tt;
        trace_unhex(q->trace->trace_id, TRACE_ID_LEN, id);
        size_t n = spans ? traces_find(core_traces(f->core), id, spans, MAX) : 0;
        nodelink_in_charge(s->in, n * SPAN_VALUES);
        if (!spans || trace_tree_fill(&tt, id, spans, n, NULL, 0) < 0) {
                send_error(s->in, q->id, GADGET_EINTERNAL, "out of memory");
                free(spans);
                return;
        }
        struct answer a;
        nodelink_answer(s->in, answer_of(&a, q->id, &tt.msg.base));
        trace_tree_clear(&tt);
        free(spans);
}

uint64_t forward_traces_refused(const struct forward *f)
{
        return f->traces_refused;
}

static void move_unlink(struct move_in *m)
{
        if (!m->s)
                return;
        LIST_REMOVE(m, link);
        m->s = NULL;
}

/* A session ends: its calls' answers and its moves' go nowhere. */
static void session_free(struct session *s)
{
        LIST_REMOVE(s, link);
        calls_owner_gone(&s->calls);
        while (!LIST_EMPTY(&s->moves))
                move_unlink(LIST_FIRST(&s->moves));
        free(s);
}

static void in_move_done(void *arg, int code, const char *msg)
{
        struct move_in *m = arg;
        struct session *s = m->s;
        move_unlink(m);
        if (s && code)
                send_error(s->in, m->id, code, msg);
        else if (s)
                send_done(s->in, m->id, msg);
        free(m);
}

static void in_move(struct forward *f, struct session *s, const Control__Request *q)
{
        struct unit *u = runs_here(f, s, q->id, q->move->name);
        if (!u)
                return;
        struct move_in *m = calloc(1, sizeof *m);
        if (!m) {
                send_error(s->in, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        *m = (struct move_in){ .s = s, .id = q->id };
        LIST_INSERT_HEAD(&s->moves, m, link);
        log_msg(L_INFO, q->move->name, "node %s asks to move it to node %s", s->from, q->move->node);
        char msg[400];
        int code = unit_move(u, q->move->node, in_move_done, m, msg, sizeof msg);
        if (!code)
                return;
        move_unlink(m);
        free(m);
        send_error(s->in, q->id, code, msg);
}

/* What another node may ask, as control/requests.c's table: anything
 * else is answered with an error. */
static const struct {
        Control__Request__ReqCase kind;
        void (*handle)(struct forward *f, struct session *s, const Control__Request *q);
} handlers[] = {
        { CONTROL__REQUEST__REQ_CALL, in_call },
        { CONTROL__REQUEST__REQ_MOVE, in_move },
        { CONTROL__REQUEST__REQ_WAKE, in_wake },
        { CONTROL__REQUEST__REQ_TRACE, in_trace },
};

static void on_request(void *arg, struct nodelink_in *in, const char *from, const Control__Request *q)
{
        struct forward *f = arg;
        struct session *s = session_of(f, in, from);
        char why[200];
        if (!s) {
                send_error(in, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        /* As any control request: its form is checked (names, values,
         * bounds) before anything uses it; what it claims is the handler's
         * to doubt. */
        if (validate_control_request(q, why, sizeof why) < 0) {
                send_error(in, q->id, GADGET_EINVAL, why);
                return;
        }
        for (size_t i = 0; i < sizeof handlers / sizeof *handlers; i++)
                if (handlers[i].kind == q->req_case) {
                        handlers[i].handle(f, s, q);
                        return;
                }
        send_error(in, q->id, GADGET_EINVAL, "a node may ask another only for calls, wakes, moves and spans");
}

/* PeerRevoked=: one node name a line ('#' starts a comment), read again
 * when the file changes; one that cannot be read keeps the last list (a
 * revocation is never undone by a file gone missing), and is logged. */
static void revoked_refresh(struct forward *f)
{
        struct revoked *r = &f->revoked;
        struct stat st;
        if (!r->path)
                return;
        if (stat(r->path, &st) < 0) {
                if (r->read)
                        return;
                log_msg(L_WARN, NULL, "PeerRevoked=%s: %s (no node is revoked until it can be read)", r->path,
                        strerror(errno));
                r->read = true;
                return;
        }
        if (r->read && st.st_ino == r->seen.st_ino && st.st_size == r->seen.st_size &&
            st.st_mtim.tv_sec == r->seen.st_mtim.tv_sec && st.st_mtim.tv_nsec == r->seen.st_mtim.tv_nsec)
                return;
        FILE *fp = fopen(r->path, "re");
        if (!fp) {
                log_msg(L_WARN, NULL, "PeerRevoked=%s: %s (the last list read stays)", r->path, strerror(errno));
                return;
        }
        char line[256];
        size_t n = 0;
        while (fgets(line, sizeof line, fp)) {
                char *hash = strchr(line, '#');
                if (hash)
                        *hash = '\0';
                char name[64];
                if (sscanf(line, "%63s", name) != 1)
                        continue;
                if (n < REVOKED_MAX)
                        snprintf(r->names[n++], sizeof r->names[0], "%s", name);
        }
        fclose(fp);
        r->n = n;
        r->seen = st;
        r->read = true;
        log_msg(L_INFO, NULL, "PeerRevoked=%s: %zu node%s revoked", r->path, n, n == 1 ? "" : "s");
}

/* Whether node may take part: 0, -EPERM revoked, -EAGAIN no node of the
 * store (yet), with why. */
static int refused(struct forward *f, const char *node, char *why, size_t len)
{
        revoked_refresh(f);
        for (size_t i = 0; i < f->revoked.n; i++)
                if (strcmp(f->revoked.names[i], node) == 0) {
                        snprintf(why, len, "node %s is revoked (PeerRevoked=)", node);
                        return -EPERM;
                }
        const struct kvpg_node *nodes;
        const char *self;
        uint64_t since;
        size_t n = core_nodes(f->core, &nodes, &self, &since);
        if (self && strcmp(self, node) == 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (strcmp(nodes[i].name, node) == 0)
                        return 0;
        snprintf(why, len, "%s is not a node in the store: its certificate is the cluster CA's, but no node of that "
                 "name shares the store", node);
        return -EAGAIN;
}

/* Whether node may take part (struct nodelink_server_ops): a node the
 * store lists, not revoked. A name the store does not list may be a node
 * that joined since it was last read: not refused until the last asking.
 * A refusal is logged once a window. */
static int admit(void *arg, const char *node, bool last, char *why, size_t len)
{
        struct forward *f = arg;
        int e = refused(f, node, why, len);
        if (e == 0 || (e == -EAGAIN && !last))
                return e;
        ratelog_warn(&f->refused_log, monotime_ms(), NULL, "sessions or requests refused by the peer link",
                     "the peer link refused a session or request: %s", why);
        return -EPERM;
}

static void on_gone(void *arg, struct nodelink_in *in)
{
        struct forward *f = arg;
        struct session *s;
        LIST_FOREACH(s, &f->sessions, link)
                if (s->in == in) {
                        session_free(s);
                        return;
                }
}

/* Where node listens, from the store's nodes: NULL with msg if unknown. */
static const char *peer_of(struct forward *f, const char *node, char *msg, size_t len)
{
        const struct kvpg_node *nodes;
        const char *self;
        uint64_t since;
        size_t n = core_nodes(f->core, &nodes, &self, &since);
        for (size_t i = 0; i < n; i++) {
                if (strcmp(nodes[i].name, node) != 0)
                        continue;
                if (nodes[i].peer[0])
                        return nodes[i].peer;
                snprintf(msg, len, "node %s has no peer address in the store (no PeerListen=, or it started "
                         "less than a second ago): it cannot be reached", node);
                return NULL;
        }
        snprintf(msg, len, "node %s is not known in the store yet", node);
        return NULL;
}

/* A forwarded call's answer from its node (a wake's is a done: a null
 * result here, as a local wake's). */
static void out_call_done(void *arg, const Control__Response *r, int code, const char *msg)
{
        struct call *c = arg;
        Gadget__Value ready = GADGET__VALUE__INIT;
        /* The link says whether any of it left (nodelink.h): one that did
         * may have run there, and is never sent again. */
        if (!r && code == NODELINK_UNREAD)
                calls_remote_unread(c, msg);
        else if (!r && code == GADGET_EUNAVAILABLE)
                calls_remote_unsent(c, msg);
        else if (!r)
                calls_remote_end(c, NULL, code, msg);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_RESULT)
                calls_remote_end(c, r->result, 0, NULL);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_DONE && calls_is_wake(c))
                calls_remote_end(c, &ready, 0, NULL);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                calls_remote_end(c, NULL, r->error->code ? (int)r->error->code : GADGET_EFAILED, r->error->message);
        else
                calls_remote_end(c, NULL, GADGET_EINTERNAL, "the other node answered the call with something else");
}

static int out_send(struct forward *f, const char *node, Control__Request *req, nodelink_done done, void *arg,
                    struct nodelink_send **handle, char *msg, size_t len)
{
        const char *addr = peer_of(f, node, msg, len);
        if (!addr)
                return GADGET_EUNAVAILABLE;
        int e = nodelink_send(f->link, node, addr, req, done, arg, handle);
        if (e == -ENOBUFS) {
                snprintf(msg, len, "the link to node %s is busy: too many calls in flight", node);
                return GADGET_EBUSY;
        }
        if (e == -E2BIG) {
                snprintf(msg, len, "the call holds more than %d values, more than the link between nodes carries",
                         NODELINK_FRAME_VALUES_MAX);
                return GADGET_ELIMIT;
        }
        if (e < 0) {
                snprintf(msg, len, "cannot send to node %s: %s", node, strerror(-e));
                return e == -EMSGSIZE ? GADGET_ELIMIT : GADGET_EUNAVAILABLE;
        }
        return 0;
}

static int out_call(void *arg, struct call *c, const char *node, const char *gadget, const struct call_req *q,
                    void **handle, char *msg, size_t len)
{
        struct forward *f = arg;
        Control__Request req = CONTROL__REQUEST__INIT;
        req.version = CONTROL_PROTOCOL_VERSION;
        if (!q->method) {
                Control__Name wake = CONTROL__NAME__INIT;
                wake.name = (char *)gadget;
                req.req_case = CONTROL__REQUEST__REQ_WAKE;
                req.wake = &wake;
                return out_send(f, node, &req, out_call_done, c, (struct nodelink_send **)handle, msg, len);
        }
        Control__Call call = CONTROL__CALL__INIT;
        call.name = (char *)gadget;
        call.method = (char *)q->method;
        call.args = (Gadget__Value *)q->args;
        if (q->chain) {
                call.chain = q->chain->names;
                call.n_chain = q->chain->n;
                call.depth = q->chain->depth;
        }
        char tp[TRACEPARENT_LEN + 1] = "";
        const struct trace_ctx *t = call_trace(c);
        if (t)
                traceparent_format(t, tp);
        call.traceparent = tp;
        call.caller = (char *)(q->caller ? q->caller : "");
        call.via = (char *)(q->via ? q->via : "");
        call.timeout_ms = q->left_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)q->left_ms;
        /* admin and approved never cross: the owner decides both (and
         * calls_start refuses an admin call to a gadget of another node). */
        req.req_case = CONTROL__REQUEST__REQ_CALL;
        req.call = &call;
        return out_send(f, node, &req, out_call_done, c, (struct nodelink_send **)handle, msg, len);
}

static void out_cancel(void *arg, void *handle, bool timed_out)
{
        if (handle && timed_out)
                nodelink_abandon(handle);
        else if (handle)
                nodelink_cancel(handle);
}

/* Sends req to node, its answer to done(m): m, the caller's record of
 * what waits for it (NULL: out of memory), is freed here if nothing was
 * sent. 0, or a GADGET_E* code with msg. */
static int out_ask(struct forward *f, const char *node, Control__Request *req, nodelink_done done, void *m, char *msg,
                   size_t len)
{
        struct nodelink_send *h;
        req->version = CONTROL_PROTOCOL_VERSION;
        int code = GADGET_EINTERNAL;
        if (!m)
                snprintf(msg, len, "out of memory");
        else
                code = out_send(f, node, req, done, m, &h, msg, len);
        if (code)
                free(m);
        return code;
}

struct move_out {
        void (*done)(void *arg, int code, const char *msg);
        void *arg;
};

static void out_move_done(void *arg, const Control__Response *r, int code, const char *msg)
{
        struct move_out *m = arg;
        if (!r)
                m->done(m->arg, code == NODELINK_UNREAD ? GADGET_EUNAVAILABLE : code, msg);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_DONE)
                m->done(m->arg, 0, r->done->message);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                m->done(m->arg, r->error->code ? (int)r->error->code : GADGET_EFAILED, r->error->message);
        else
                m->done(m->arg, GADGET_EINTERNAL, "the other node answered the move with something else");
        free(m);
}

static int out_move(void *arg, const char *node, const char *gadget, const char *to,
                    void (*done)(void *darg, int code, const char *msg), void *darg, char *msg, size_t len)
{
        struct move_out *m = calloc(1, sizeof *m);
        if (m)
                *m = (struct move_out){ .done = done, .arg = darg };
        Control__Move mv = CONTROL__MOVE__INIT;
        mv.name = (char *)gadget;
        mv.node = (char *)to;
        Control__Request req = CONTROL__REQUEST__INIT;
        req.req_case = CONTROL__REQUEST__REQ_MOVE;
        req.move = &mv;
        return out_ask(arg, node, &req, out_move_done, m, msg, len);
}

struct trace_out {
        void (*done)(void *darg, const Control__TraceTree *t, int code, const char *msg);
        void *arg;
};

static void out_trace_done(void *arg, const Control__Response *r, int code, const char *msg)
{
        struct trace_out *t = arg;
        if (!r)
                t->done(t->arg, NULL, code == NODELINK_UNREAD ? GADGET_EUNAVAILABLE : code, msg);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_TRACE)
                t->done(t->arg, r->trace, 0, NULL);
        else if (r->resp_case == CONTROL__RESPONSE__RESP_ERROR)
                t->done(t->arg, NULL, r->error->code ? (int)r->error->code : GADGET_EFAILED, r->error->message);
        else
                t->done(t->arg, NULL, GADGET_EINTERNAL, "the other node answered with something else");
        free(t);
}

static int out_trace(void *arg, const char *node, const char *trace_id,
                     void (*done)(void *darg, const Control__TraceTree *t, int code, const char *msg), void *darg,
                     char *msg, size_t len)
{
        struct trace_out *t = calloc(1, sizeof *t);
        if (t)
                *t = (struct trace_out){ .done = done, .arg = darg };
        Control__Trace tr = CONTROL__TRACE__INIT;
        tr.trace_id = (char *)trace_id;
        tr.here = true;
        Control__Request req = CONTROL__REQUEST__INIT;
        req.req_case = CONTROL__REQUEST__REQ_TRACE;
        req.trace = &tr;
        return out_ask(arg, node, &req, out_trace_done, t, msg, len);
}

int forward_new(struct event_base *base, struct core *core, const struct nodelink_config *cfg,
                const char *revoked, struct forward **out, char *err, size_t len)
{
        struct forward *f = calloc(1, sizeof *f);
        if (!f) {
                snprintf(err, len, "out of memory");
                return -ENOMEM;
        }
        f->core = core;
        if (revoked && !(f->revoked.path = strdup(revoked))) {
                free(f);
                snprintf(err, len, "out of memory");
                return -ENOMEM;
        }
        if (revoked && access(revoked, R_OK) < 0) {
                int e = errno;
                snprintf(err, len, "PeerRevoked=%s: %s", revoked, strerror(e));
                free(f->revoked.path);
                free(f);
                return -e;
        }
        revoked_refresh(f);
        const struct nodelink_server_ops ops = { .request = on_request, .gone = on_gone, .admit = admit, .arg = f };
        /* TLS is loaded only by a node that has a peer link. */
        int e = ssl_dl_load(err, len);
        if (e == 0)
                e = nodelink_new(base, cfg, &ops, &f->link, err, len);
        if (e < 0) {
                free(f->revoked.path);
                free(f);
                return e;
        }
        const struct core_remote r = { .call = out_call, .cancel = out_cancel, .move = out_move, .trace = out_trace,
                                       .arg = f };
        core_set_remote(core, &r);
        *out = f;
        return 0;
}

void forward_reexec_hold(struct forward *f, bool hold)
{
        nodelink_reexec_hold(f->link, hold);
}

int forward_reexec_quiet(struct forward *f, char *why, size_t len)
{
        return nodelink_reexec_quiet(f->link, why, len);
}

int forward_listen_fd(const struct forward *f)
{
        return nodelink_listen_fd(f->link);
}

void forward_sessions(const struct forward *f, unsigned *in, unsigned *out)
{
        nodelink_sessions(f->link, in, out);
}

void forward_free(struct forward *f)
{
        if (!f)
                return;
        const struct core_remote none = { 0 };
        core_set_remote(f->core, &none);
        nodelink_free(f->link);
        while (!LIST_EMPTY(&f->sessions))
                session_free(LIST_FIRST(&f->sessions));
        free(f->revoked.path);
        free(f);
}
