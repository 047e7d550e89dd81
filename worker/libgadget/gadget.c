/* gadget: libgadget's connection to gadgetd — hello, the serve loop that
 * answers calls, and binding calls made from inside a method. */
#include "gadget.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "types.h"
#include "value.h"
#include "wire.h"

/* Answers of quick methods wait while more calls are already read, and
 * leave together; before a method that was slow last time (or never ran)
 * they leave first, so a slow or hanging method delays no earlier answer
 * by more than HOLD_MAX quick runs. */
#define QUICK_NS 20000
#define HOLD_MAX 64

struct method {
        char *name;
        char *signature;         /* as declared, NULL: untyped */
        struct type_sig *sig;    /* parsed by gadget_serve */
        gadget_method_fn fn;
        void *data;
        int64_t last_ns;         /* its last run, -1 before the first */
};

struct gadget {
        char *name;
        int fd;
        struct method *methods;
        size_t n_methods;
        struct wire_reader rd;
        struct wire_writer wr;   /* answers not yet written: they leave together */
        unsigned held;           /* answers queued in wr */
        uint32_t max_frame;
        uint64_t next_binding_id;
        Gadget__SupervisorMsg **queued; /* calls that came during a binding call */
        size_t n_queued;
        char error[512];
};

struct gadget_call {
        struct gadget *g;
        int code;
        char message[512];
};

static void set_error(struct gadget *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct gadget *g, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->error, sizeof g->error, fmt, ap);
        va_end(ap);
}

struct gadget *gadget_new(const char *name)
{
        struct gadget *g = calloc(1, sizeof *g);
        if (!g)
                return NULL;
        /* gadgetd sets GADGET_NAME to the policy's Name=, always. */
        const char *given = getenv("GADGET_NAME");
        g->name = strdup(name ? name : given ? given : "");
        if (!g->name) {
                free(g);
                return NULL;
        }
        const char *fd = getenv("GADGET_FD");
        g->fd = fd ? atoi(fd) : 3;
        g->max_frame = WIRE_MAX_FRAME;
        wire_reader_init(&g->rd, g->max_frame);
        wire_writer_init(&g->wr, 0);
        return g;
}

void gadget_free(struct gadget *g)
{
        if (!g)
                return;
        for (size_t i = 0; i < g->n_methods; i++) {
                free(g->methods[i].name);
                free(g->methods[i].signature);
                types_sig_free(g->methods[i].sig);
        }
        for (size_t i = 0; i < g->n_queued; i++)
                gadget__supervisor_msg__free_unpacked(g->queued[i], NULL);
        free(g->queued);
        free(g->methods);
        wire_reader_free(&g->rd);
        wire_writer_free(&g->wr);
        free(g->name);
        free(g);
}

static int add_method(struct gadget *g, const char *name, const char *signature, gadget_method_fn fn, void *data)
{
        struct method *n = realloc(g->methods, (g->n_methods + 1) * sizeof *n);
        if (!n)
                return -GADGET_EINTERNAL;
        g->methods = n;
        n[g->n_methods] = (struct method){ .name = strndup(name, GADGET_NAME_MAX), .fn = fn, .data = data,
                                           .last_ns = -1 };
        struct method *m = &n[g->n_methods++];
        if (!m->name || (signature && !(m->signature = strdup(signature))))
                return -GADGET_EINTERNAL;
        return 0;
}

int gadget_method(struct gadget *g, const char *name, gadget_method_fn fn, void *data)
{
        if (!gadget_method_name_ok(name) || !fn)
                return -GADGET_EINVAL;
        return add_method(g, name, NULL, fn, data);
}

int gadget_method_typed(struct gadget *g, const char *signature, gadget_method_fn fn, void *data)
{
        char name[GADGET_NAME_MAX + 1];
        size_t n = signature ? strcspn(signature, "( \t") : 0;
        if (!fn || n == 0 || n > GADGET_NAME_MAX)
                return -GADGET_EINVAL;
        memcpy(name, signature, n);
        name[n] = '\0';
        /* The whole signature is parsed by gadget_serve, which says what is wrong. */
        return add_method(g, name, signature, fn, data);
}

/* Parses every declared signature once, before the hello. */
static int parse_signatures(struct gadget *g)
{
        char err[200];
        for (size_t i = 0; i < g->n_methods; i++) {
                struct method *m = &g->methods[i];
                if (!m->signature || m->sig)
                        continue;
                int e = types_sig_parse(m->signature, &m->sig, err, sizeof err);
                if (e == -ENOMEM)
                        return -GADGET_EINTERNAL;
                if (e < 0) {
                        set_error(g, "signature of %s: %s", m->name, err);
                        return -GADGET_EINVAL;
                }
                if (strcmp(types_sig_name(m->sig), m->name) != 0 || !gadget_method_name_ok(m->name)) {
                        set_error(g, "signature \"%.80s\": not a valid method name", m->signature);
                        return -GADGET_EINVAL;
                }
        }
        return 0;
}

struct gadget *gadget_call_gadget(struct gadget_call *call)
{
        return call->g;
}

const char *gadget_last_error(const struct gadget *g)
{
        return g->error;
}

gadget_value *gadget_fail(struct gadget_call *call, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(call->message, sizeof call->message, fmt, ap);
        va_end(ap);
        call->code = code ? code : GADGET_EFAILED;
        return NULL;
}

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Writes every queued message (the fd blocks, so all of it). */
static int flush(struct gadget *g)
{
        g->held = 0;
        int e = wire_writer_flush(&g->wr, g->fd);
        if (e != 0) {
                set_error(g, "cannot write to gadgetd: %s", strerror(e < 0 ? -e : EAGAIN));
                return -GADGET_EPROTO;
        }
        return 0;
}

/* Queues one message. Answers to calls wait until nothing more is to be
 * read (recv_msg), so a batch of calls is answered in one write; anything
 * else (hello, log lines, binding calls) leaves at once. */
static int queue_worker_msg(struct gadget *g, Gadget__WorkerMsg *msg, bool now)
{
        int e = wire_writer_put(&g->wr, &msg->base, g->max_frame);
        if (e == -ENOBUFS && (e = flush(g)) == 0)
                e = wire_writer_put(&g->wr, &msg->base, g->max_frame);
        if (e < 0) {
                if (e != -GADGET_EPROTO)
                        set_error(g, "cannot send to gadgetd: %s", strerror(-e));
                return -GADGET_EPROTO;
        }
        return now ? flush(g) : 0;
}

static int send_worker_msg(struct gadget *g, Gadget__WorkerMsg *msg)
{
        return queue_worker_msg(g, msg, true);
}

/* Waits until gadgetd's connection has input (or an error or hang-up,
 * which the read then reports). Why not a blocking read at once: a
 * task blocked in read on a Unix socket is woken each time gadgetd reads
 * from the other end (the freed room wakes every sleeper of the socket),
 * so after every request the gadget would be scheduled in for nothing,
 * in the middle of gadgetd's turn; poll sleeps until input only. */
static int wait_input(struct gadget *g)
{
        struct pollfd p = { .fd = g->fd, .events = POLLIN };
        int n;
        do
                n = poll(&p, 1, -1);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : 0;
}

/* Reads the next message from gadgetd; NULL at end or on error. Before
 * waiting for more input, the answers queued so far are written. */
static Gadget__SupervisorMsg *recv_msg(struct gadget *g)
{
        const uint8_t *data;
        size_t len;
        int e = wire_reader_next(&g->rd, &data, &len);
        if (e == 0 && flush(g) < 0)
                return NULL;
        if (e == 0 && (e = wait_input(g)) == 0)
                e = wire_recv(&g->rd, g->fd, &data, &len);
        if (e <= 0) {
                set_error(g, "%s", e == 0 ? "gadgetd closed the connection" : strerror(-e));
                return NULL;
        }
        char why[128];
        if (value_packed_check(&gadget__supervisor_msg__descriptor, data, len, why, sizeof why) < 0) {
                set_error(g, "gadgetd sent a message nested too deeply: %s", why);
                return NULL;
        }
        Gadget__SupervisorMsg *m = gadget__supervisor_msg__unpack(NULL, len, data);
        if (!m)
                set_error(g, "gadgetd sent a message that does not decode");
        return m;
}

int gadget_log(struct gadget *g, int priority, const char *fmt, ...)
{
        char text[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        Gadget__Log log = GADGET__LOG__INIT;
        log.level = priority < 0 ? 0 : priority > 7 ? 7 : (uint32_t)priority;
        log.text = text;
        Gadget__WorkerMsg msg = GADGET__WORKER_MSG__INIT;
        msg.msg_case = GADGET__WORKER_MSG__MSG_LOG;
        msg.log = &log;
        return send_worker_msg(g, &msg);
}

static struct method *find_method(struct gadget *g, const char *name)
{
        for (size_t i = 0; i < g->n_methods; i++)
                if (strcmp(g->methods[i].name, name) == 0)
                        return &g->methods[i];
        return NULL;
}

/* Runs one call and sends its answer. */
static int serve_call(struct gadget *g, const Gadget__Call *c)
{
        struct gadget_call call = { .g = g };
        struct method *m = find_method(g, c->method);
        gadget_value *result = NULL;
        gadget_value *noargs = NULL;

        if (g->held && (g->held >= HOLD_MAX || (m && (m->last_ns < 0 || m->last_ns > QUICK_NS))) && flush(g) < 0)
                return -GADGET_EPROTO;
        int64_t t0 = m ? now_ns() : 0; /* one reading for the deadline and the method's time */
        if (!m) {
                gadget_fail(&call, GADGET_ENOMETHOD, "no method \"%s\"", c->method);
        } else if (c->deadline_us && (uint64_t)t0 / 1000 > c->deadline_us) {
                /* Its caller may have been answered already: a call never
                 * starts after that (gadget.proto, Call.deadline_us). */
                gadget_fail(&call, GADGET_ETIMEOUT, "%s: not run: read after its deadline", c->method);
        } else {
                const gadget_value *args = c->args;
                char why[400];
                if (!args)
                        args = noargs = value_new_null();
                /* gadgetd checked them too; a method gets only what its
                 * signature allows, whoever sent the call. */
                if (m->sig && types_check_args(m->sig, args, why, sizeof why) < 0) {
                        gadget_fail(&call, GADGET_EINVAL, "%s: %s", c->method, why);
                } else {
                        result = m->fn(&call, args, m->data);
                        m->last_ns = now_ns() - t0;
                        if (!result && !call.code)
                                gadget_fail(&call, GADGET_EFAILED, "method \"%s\" failed", c->method);
                }
        }
        Gadget__Error err = GADGET__ERROR__INIT;
        Gadget__CallResult res = GADGET__CALL_RESULT__INIT;
        res.id = c->id;
        if (result) {
                res.outcome_case = GADGET__CALL_RESULT__OUTCOME_VALUE;
                res.value = result;
        } else {
                err.code = (uint32_t)call.code;
                err.message = call.message;
                res.outcome_case = GADGET__CALL_RESULT__OUTCOME_ERROR;
                res.error = &err;
        }
        Gadget__WorkerMsg msg = GADGET__WORKER_MSG__INIT;
        msg.msg_case = GADGET__WORKER_MSG__MSG_RESULT;
        msg.result = &res;
        int e = queue_worker_msg(g, &msg, false);
        g->held++;
        value_free(result);
        value_free(noargs);
        return e;
}

static int say_hello(struct gadget *g)
{
        Gadget__Hello hello = GADGET__HELLO__INIT;
        char **names = calloc(g->n_methods + 1, sizeof *names);
        char **sigs = calloc(g->n_methods + 1, sizeof *sigs);
        if (!names || !sigs) {
                free(names);
                free(sigs);
                return -GADGET_EINTERNAL;
        }
        for (size_t i = 0; i < g->n_methods; i++) {
                names[i] = g->methods[i].name;
                sigs[i] = g->methods[i].signature ? g->methods[i].signature : "";
        }
        hello.name = g->name;
        hello.protocol_version = GADGET_PROTOCOL_VERSION;
        hello.n_methods = g->n_methods;
        hello.methods = names;
        hello.n_signatures = g->n_methods;
        hello.signatures = sigs;
        Gadget__WorkerMsg msg = GADGET__WORKER_MSG__INIT;
        msg.msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        msg.hello = &hello;
        int e = send_worker_msg(g, &msg);
        free(names);
        free(sigs);
        if (e < 0)
                return e;
        Gadget__SupervisorMsg *m = recv_msg(g);
        if (!m || m->msg_case != GADGET__SUPERVISOR_MSG__MSG_WELCOME) {
                if (m)
                        set_error(g, "gadgetd did not welcome the gadget");
                gadget__supervisor_msg__free_unpacked(m, NULL);
                return -GADGET_EPROTO;
        }
        if (m->welcome->max_frame >= 4096 && m->welcome->max_frame < g->max_frame)
                g->max_frame = m->welcome->max_frame;
        gadget__supervisor_msg__free_unpacked(m, NULL);
        return 0;
}

/* Handles one message in the serve loop: 1 to go on, 0 to stop, <0 error. */
static int dispatch(struct gadget *g, Gadget__SupervisorMsg *m)
{
        switch (m->msg_case) {
        case GADGET__SUPERVISOR_MSG__MSG_CALL:
                return serve_call(g, m->call) < 0 ? -GADGET_EPROTO : 1;
        case GADGET__SUPERVISOR_MSG__MSG_SHUTDOWN:
                return 0;
        default:
                /* A stray binding result or welcome: nothing waits for it. */
                return 1;
        }
}

int gadget_serve(struct gadget *g)
{
        int e = parse_signatures(g);
        if (e == 0)
                e = say_hello(g);
        if (e < 0)
                return e;
        for (;;) {
                Gadget__SupervisorMsg *m;
                if (g->n_queued > 0) {
                        m = g->queued[0];
                        memmove(g->queued, g->queued + 1, --g->n_queued * sizeof *g->queued);
                } else if (!(m = recv_msg(g))) {
                        /* gadgetd went away: a clean end for the gadget. */
                        return 0;
                }
                e = dispatch(g, m);
                gadget__supervisor_msg__free_unpacked(m, NULL);
                if (e <= 0) {
                        /* Answers still queued leave before the end. */
                        int f = flush(g);
                        return e < 0 ? e : f;
                }
        }
}

static int queue_msg(struct gadget *g, Gadget__SupervisorMsg *m)
{
        Gadget__SupervisorMsg **n = realloc(g->queued, (g->n_queued + 1) * sizeof *n);
        if (!n)
                return -GADGET_EINTERNAL;
        g->queued = n;
        n[g->n_queued++] = m;
        return 0;
}

int gadget_binding_call(struct gadget *g, const char *binding, const char *op,
                        gadget_value *args, gadget_value **result)
{
        Gadget__BindingCall bc = GADGET__BINDING_CALL__INIT;
        Gadget__WorkerMsg msg = GADGET__WORKER_MSG__INIT;
        int e;

        g->error[0] = '\0';
        bc.id = ++g->next_binding_id;
        bc.binding = (char *)binding;
        bc.op = (char *)op;
        bc.args = args;
        msg.msg_case = GADGET__WORKER_MSG__MSG_BINDING_CALL;
        msg.binding_call = &bc;
        e = send_worker_msg(g, &msg);
        value_free(args);
        if (e < 0)
                return e;
        for (;;) {
                Gadget__SupervisorMsg *m = recv_msg(g);
                if (!m)
                        return -GADGET_EPROTO;
                if (m->msg_case != GADGET__SUPERVISOR_MSG__MSG_BINDING_RESULT) {
                        if (queue_msg(g, m) < 0) {
                                gadget__supervisor_msg__free_unpacked(m, NULL);
                                return -GADGET_EINTERNAL;
                        }
                        continue;
                }
                Gadget__BindingResult *r = m->binding_result;
                if (r->id != bc.id) {
                        gadget__supervisor_msg__free_unpacked(m, NULL);
                        continue;
                }
                if (r->outcome_case == GADGET__BINDING_RESULT__OUTCOME_VALUE) {
                        if (result) {
                                *result = r->value;
                                r->value = NULL;
                                r->outcome_case = GADGET__BINDING_RESULT__OUTCOME__NOT_SET;
                        }
                        e = 0;
                } else {
                        const Gadget__Error *err = r->error;
                        set_error(g, "%s", err && err->message ? err->message : "binding call failed");
                        e = -(int)(err && err->code ? err->code : GADGET_EFAILED);
                }
                gadget__supervisor_msg__free_unpacked(m, NULL);
                return e;
        }
}
