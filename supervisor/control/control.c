/* control: gadgetd's control socket — who may connect, checks of every
 * request before its handler runs; each client is a conn (system/conn.h). */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <event2/event.h>

#include "answer.h"
#include "client.h"
#include "control.pb-c.h"
#include "contract.h"
#include "system/arena.h"
#include "system/log.h"
#include "system/notify.h"
#include "frames.h"
#include "stream.h"
#include "policy.h"
#include "system/ratelog.h"
#include "core/core.h"
#include "validate.h"
#include "value.h"
#include "wire.h"
#include "system/conn.h"
#include "system/monotime.h"
#include "system/rate.h"
#include "system/timer.h"

#define ACCEPT_BATCH 16          /* connections taken per wakeup */
#define BACKOFF_MS 500           /* listener paused after EMFILE and the like */
#define FLUSH_MS 2000            /* how often counted refusals are reported */

/* Refusals and accept failures: each logged once per window, with a count. */
enum control_refusal { REF_GROUP, REF_USER, REF_TOTAL, REF_ACCEPT, REF_SLOW, REF_N };

/* The bytes of requests a user sent and of the answers it was sent,
 * draining at CONTROL_USER_BYTES_PER_S (system/rate.h); a user past it is
 * held until until_ms. */
#define BUDGET_USERS 64
struct user_budget {
        uid_t uid;
        bool used, held;
        uint64_t until_ms;
        struct rate rate;
};

struct control {
        struct control_env env;
        struct frames *frames;     /* gadgetctl trace NAME's followers (frames.c) */
        int fd;
        struct event *ev_accept, *ev_resume, *ev_flush;
        LIST_HEAD(, client) clients;
        size_t n_root, n_users;    /* connections of root, of every other uid */
        struct control_limits lim;
        struct ratelog rl[REF_N];
        uint64_t refused[REF_N];   /* every refusal of each kind, for the metrics */
        bool activated;            /* the socket was passed by systemd (gadgetd.socket) */
        struct user_budget budgets[BUDGET_USERS]; /* the users seen lately, but root */
        struct event *ev_budget;   /* releases the users held at their second's end */
        struct client *reexec;     /* who asked for the re-exec under way, if still connected */
        uint64_t reexec_id;
        bool reexec_asked;
        unsigned installing;       /* gadgetctl installs running (install.c): root's, others' (bits 1, 2) */
        struct install_job *installs[2]; /* those two, once started */
        struct deploy_list deploys; /* deploys, rollbacks and installs waiting for their start (deploy.c) */
        struct deploy_store *store; /* the versions and rollouts in the store (deploy_store.c), or NULL */
};

static const char *const refusal_what[REF_N] = {
        [REF_GROUP] = "control connections refused from users outside the group",
        [REF_USER] = "control connections refused: a user at ControlMaxConnectionsPerUser",
        [REF_TOTAL] = "control connections refused: ControlMaxConnections reached",
        [REF_ACCEPT] = "control socket accept failures (listener paused each time)",
        [REF_SLOW] = "control clients dropped for not reading their answers",
};

/* The summary line of refusals of kind k counted in the window that ended. */
/* Logs one refusal now, or counts it for the window's summary line
 * (fmt NULL: only that summary, from the flush timer). */
static void refusal(struct control *c, enum control_refusal k, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void refusal(struct control *c, enum control_refusal k, const char *fmt, ...)
{
        va_list ap;
        if (fmt)
                c->refused[k]++;
        va_start(ap, fmt);
        ratelog_vwarn(&c->rl[k], monotime_ms(), NULL, refusal_what[k], fmt, ap);
        va_end(ap);
}

void control_stats(const struct control *c, uint64_t *connections, uint64_t *refused, uint64_t *slow)
{
        *connections = c->n_root + c->n_users;
        *refused = c->refused[REF_GROUP] + c->refused[REF_USER] + c->refused[REF_TOTAL];
        *slow = c->refused[REF_SLOW];
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        for (int k = 0; k < REF_N; k++)
                refusal(c, (enum control_refusal)k, NULL);
}

const struct control_env *client_env(const struct client *cl)
{
        return &cl->ctl->env;
}

struct frames *client_frames(const struct client *cl)
{
        return cl->ctl->frames;
}

static void client_free(struct client *cl)
{
        struct control *c = cl->ctl;
        LIST_REMOVE(cl, link);
        if (c->reexec == cl)
                c->reexec = NULL;
        if (cl->cred.uid == 0)
                c->n_root--;
        else
                c->n_users--;
        struct client_load *p;
        while ((p = LIST_FIRST(&cl->loads))) {
                LIST_REMOVE(p, link);
                p->client = NULL;
        }
        /* Their answers will find no one (its waits for a start end now,
         * through their loads, which know it is gone). */
        calls_owner_gone(&cl->calls);
        exec_client_gone(cl);
        frames_client_gone(cl);
        conn_free(cl->conn);
        stream_free(cl->stream);
        free(cl);
}

/* Every answer was read: the next part of a long answer. */
static void on_drained(void *arg)
{
        struct client *cl = arg;
        stream_kick(cl->stream);
        frames_kick(cl->frames);
}

/* The connection ended (end of file, bytes that are not requests, or
 * dropped): the client goes. */
static void on_closed(void *arg, int why)
{
        client_free(arg);
}

static void budget_count(struct client *cl, size_t bytes);

int client_send(struct client *cl, Control__Response *r)
{
        /* Why this bounds memory: answers wait only while no more than
         * queue_bytes are unsent (the conn's bound); a client with more has
         * stopped reading and is closed, from the loop, once the code that
         * holds it has returned. Long answers come in parts made only once
         * the last was read. */
        size_t sent = 0;
        int e = conn_send_counted(cl->conn, &r->base, &sent);
        if (e == 0)
                budget_count(cl, sent);
        if (e == -ENOBUFS) {
                refusal(cl->ctl, REF_SLOW, "dropped the control client of uid %u (pid %d): more than %zu bytes "
                        "of answers unread (ControlQueueSize)", (unsigned)cl->cred.uid, (int)cl->cred.pid,
                        cl->ctl->lim.queue_bytes);
                conn_drop(cl->conn, e);
        }
        return e;
}

int client_answer(struct client *cl, uint64_t id, const ProtobufCMessage *body)
{
        struct answer a;
        return client_send(cl, answer_of(&a, id, body));
}

/* One answer of id with a formatted text: Done (done), else Error of code.
 * The text is cut at len bytes (at most 4096). */
static void send_text(struct client *cl, uint64_t id, bool done, int code, size_t len, const char *fmt,
                      va_list ap)
{
        char msg[4096];
        struct answer a;
        vsnprintf(msg, len < sizeof msg ? len : sizeof msg, fmt, ap);
        client_send(cl, done ? answer_done(&a, id, msg) : answer_error(&a, id, code, msg));
}

void client_error(struct client *cl, uint64_t id, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        send_text(cl, id, false, code, 4096, fmt, ap);
        va_end(ap);
}

void client_done(struct client *cl, uint64_t id, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        send_text(cl, id, true, 0, 1024, fmt, ap);
        va_end(ap);
}

struct client_load *client_load_new(struct client *cl, uint64_t id)
{
        if (cl->n_loads >= CONTROL_WAITING_MAX) {
                errno = EAGAIN;
                return NULL;
        }
        struct client_load *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        *c = (struct client_load){ .client = cl, .id = id };
        LIST_INSERT_HEAD(&cl->loads, c, link);
        cl->n_loads++;
        return c;
}

struct client *client_load_end(struct client_load *c)
{
        struct client *cl = c->client;
        if (cl) {
                LIST_REMOVE(c, link);
                cl->n_loads--;
        }
        free(c);
        return cl;
}

void client_load_refused(struct client *cl, uint64_t id, int e)
{
        if (e == EAGAIN)
                client_error(cl, id, GADGET_EBUSY, "busy: this connection awaits %d answers already (loads, "
                             "restarts, moves, and starts waiting until ready); send more once they come, or "
                             "use --no-block", CONTROL_WAITING_MAX);
        else
                client_error(cl, id, GADGET_EINTERNAL, "out of memory");
}

struct client_load *client_load_begin(struct client *cl, uint64_t id)
{
        struct client_load *c = client_load_new(cl, id);
        if (!c)
                client_load_refused(cl, id, errno);
        return c;
}

void client_load_answer(void *arg, int code, const char *msg)
{
        struct client_load *c = arg;
        if (!c) /* no one waits (a change applied from the store) */
                return;
        uint64_t id = c->id;
        struct client *cl = client_load_end(c);
        if (!cl)
                return;
        if (code)
                client_error(cl, id, code, "%s", msg);
        else
                client_done(cl, id, "%s", msg);
}

/* uid's budget: its slot, or the slot of the user not held seen longest
 * ago; NULL if every slot holds a user held now (64 users at once). */
static struct user_budget *budget_of(struct control *c, uid_t uid, uint64_t now)
{
        struct user_budget *oldest = NULL;
        for (size_t i = 0; i < BUDGET_USERS; i++) {
                struct user_budget *b = &c->budgets[i];
                if (b->used && b->uid == uid)
                        return b;
                if (!b->held && (!oldest || b->rate.at_ms < oldest->rate.at_ms))
                        oldest = b;
        }
        if (oldest) {
                *oldest = (struct user_budget){ .uid = uid, .used = true };
                rate_init(&oldest->rate, CONTROL_USER_BYTES_PER_S, now);
        }
        return oldest;
}

static void hold_user(struct control *c, uid_t uid, bool hold)
{
        struct client *cl;
        LIST_FOREACH(cl, &c->clients, link)
                if (cl->cred.uid == uid)
                        conn_hold(cl->conn, hold);
}

/* Releases the users whose bytes have drained back to the budget, and
 * sets the timer for the next one. */
static void budget_release(struct control *c, uint64_t now)
{
        uint64_t next = 0;
        for (size_t i = 0; i < BUDGET_USERS; i++) {
                struct user_budget *b = &c->budgets[i];
                if (!b->held)
                        continue;
                if (now >= b->until_ms) {
                        b->held = false;
                        hold_user(c, b->uid, false);
                } else if (!next || b->until_ms - now < next) {
                        next = b->until_ms - now;
                }
        }
        if (next) {
                timer_arm_ms(c->ev_budget, next);
        }
}

static void budget_cb(evutil_socket_t fd, short what, void *arg)
{
        budget_release(arg, monotime_ms());
}

/* Counts a request's or an answer's bytes (its frame's) against its
 * user's budget (root's are not counted: root has connections of its own).
 * Why this is safe: a member resending big requests, reconnecting for
 * each, or asking a gadget for big results, costs gadgetd the reading and
 * sending of at most CONTROL_USER_BYTES_PER_S a second (and one budget at
 * once, and the answers to requests already read). */
static void budget_count(struct client *cl, size_t bytes)
{
        struct control *c = cl->ctl;
        if (cl->cred.uid == 0)
                return;
        uint64_t now = monotime_ms();
        struct user_budget *b = budget_of(c, cl->cred.uid, now);
        if (!b)
                return;
        uint64_t wait_ms = rate_add(&b->rate, bytes, now);
        if (!wait_ms || b->held)
                return;
        b->held = true;
        b->until_ms = now + wait_ms;
        hold_user(c, cl->cred.uid, true);
        budget_release(c, now);
}

/* The fds sent with request q, into cl->fds: exactly CONTROL_EXEC_FDS
 * with exec, one with install (the bundle), CONTROL_SNAPSHOT_FDS with
 * backup and restore, none with any other request. Why this is safe: any
 * other number is refused (the request does not run) and every fd closed;
 * a handler takes only what it was given here. -EINVAL, the client told. */
static int take_fds(struct client *cl, const Control__Request *q)
{
        bool exec = q->req_case == CONTROL__REQUEST__REQ_EXEC, install = q->req_case == CONTROL__REQUEST__REQ_INSTALL;
        bool file = q->req_case == CONTROL__REQUEST__REQ_BACKUP || q->req_case == CONTROL__REQUEST__REQ_RESTORE;
        int n = conn_take_fds(cl->conn, cl->fds, CONTROL_EXEC_FDS);
        if (n >= 0)
                cl->n_fds = (size_t)n;
        if (exec && n != CONTROL_EXEC_FDS) {
                client_error(cl, q->id, GADGET_EINVAL, "exec needs exactly %d file descriptors with its request "
                             "(stdin, stdout, stderr)", CONTROL_EXEC_FDS);
                return -EINVAL;
        }
        if (install && n != 1) {
                client_error(cl, q->id, GADGET_EINVAL, "install needs exactly 1 file descriptor with its request "
                             "(the bundle, opened by the client)");
                return -EINVAL;
        }
        if (file && n != CONTROL_SNAPSHOT_FDS) {
                client_error(cl, q->id, GADGET_EINVAL, "backup and restore need exactly %d file descriptor with "
                             "the request (the file)", CONTROL_SNAPSHOT_FDS);
                return -EINVAL;
        }
        if (!exec && !install && !file && n != 0) {
                client_error(cl, q->id, GADGET_EINVAL, "file descriptors go with exec, install, backup and restore only");
                return -EINVAL;
        }
        return 0;
}

void client_close_fds(struct client *cl)
{
        while (cl->n_fds > 0)
                close(cl->fds[--cl->n_fds]);
}

/* What control calls are unpacked into (clients are driven by the loop alone). */
static struct arena call_arena;

static void free_request(Control__Request *q, ProtobufCAllocator *alloc)
{
        if (alloc)
                arena_reset(&call_arena);
        else
                control__request__free_unpacked(q, NULL);
}

/* One request: bytes that are not one end the connection (-EPROTO). */
static int on_frame(void *arg, const uint8_t *data, size_t len, size_t *cost)
{
        struct client *cl = arg;
        char why[256];
        budget_count(cl, WIRE_HEADER_SIZE + len);
        /* Why this is safe: nesting and width are bounded on the packed
         * bytes (one linear walk) before protobuf-c recurses and allocates. */
        if (value_packed_cost(&control__request__descriptor, data, len, CONTROL_FRAME_VALUES_MAX, cost, why,
                              sizeof why) < 0)
                return -EPROTO; /* not speaking the protocol, or more than a request may hold */
        /* A call, the one request on a hot path, is unpacked into the
         * arena (no malloc and free per part); any other is unpacked again
         * with malloc, as its handler may keep parts of it (a load's later
         * answer). Why this is safe for a call: nothing of it outlives
         * on_call (its method, arguments and caller are copied or packed
         * on at once; under AddressSanitizer a part kept would be caught). */
        if (!call_arena.pb.alloc)
                arena_init(&call_arena);
        Control__Request *q = control__request__unpack(&call_arena.pb, len, data);
        ProtobufCAllocator *alloc = &call_arena.pb;
        if (q && q->req_case != CONTROL__REQUEST__REQ_CALL) {
                arena_reset(&call_arena);
                q = control__request__unpack(NULL, len, data);
                alloc = NULL;
        }
        if (!q) {
                arena_reset(&call_arena);
                return -EPROTO;
        }
        if (cl->refused) {
                free_request(q, alloc);
                return 0;
        }
        if (!cl->spoke && q->version != CONTROL_PROTOCOL_VERSION) {
                /* The client hears why before gadgetd stops reading it. */
                client_error(cl, q->id, GADGET_EPROTO, "this client speaks control protocol %u, gadgetd "
                             "speaks %u: use the gadgetctl of gadgetd's release", (unsigned)q->version,
                             CONTROL_PROTOCOL_VERSION);
                cl->refused = true;
        } else {
                cl->spoke = true;
                if (validate_control_request(q, why, sizeof why) < 0)
                        client_error(cl, q->id, GADGET_EINVAL, "bad request: %s", why);
                else if (take_fds(cl, q) == 0)
                        request_handle(cl, q);
        }
        client_close_fds(cl);
        free_request(q, alloc);
        return 0;
}

static const struct conn_ops conn_ops = {
        .frame = on_frame,
        .closed = on_closed,
        .drained = on_drained,
};

/* Only root and members of the control group may use the socket. Why this
 * is safe: the kernel reports the peer's credentials and groups, and the
 * socket file's own mode (0660, root:group) already keeps others out. */
static bool peer_allowed(const struct peercred *pc, gid_t group)
{
        if (pc->uid == 0)
                return true;
        return group != (gid_t)-1 && peercred_in_group(pc, group);
}

/* One error frame, then the connection closes. */
static void refuse(int fd, int code, const char *msg)
{
        struct answer a;
        wire_send(fd, &answer_error(&a, 0, code, msg)->base, WIRE_MAX_FRAME); /* small: fits the socket buffer */
        close(fd);
}

static size_t conns_of(const struct control *c, uid_t uid)
{
        size_t n = 0;
        const struct client *cl;
        LIST_FOREACH(cl, &c->clients, link)
                n += cl->cred.uid == uid;
        return n;
}

/* Why root always gets in: root's connections are counted apart from
 * everyone else's, so no user can use up the slots root needs to stop
 * her. Every other uid has max_per_user, and all of them together
 * max_connections. 0 to admit, or the refusal sent and logged. */
static int admit(struct control *c, int fd, const struct peercred *pc)
{
        char msg[512];
        if (!peer_allowed(pc, c->env.group_gid)) {
                refusal(c, REF_GROUP, "refused a control connection from uid %u (pid %d): not in group %s",
                        (unsigned)pc->uid, (int)pc->pid, c->env.group);
                snprintf(msg, sizeof msg, "permission denied on %s: run as root or as a member of the %s group",
                         c->env.socket_path, c->env.group);
                refuse(fd, GADGET_EDENIED, msg);
                return -EPERM;
        }
        if (pc->uid == 0 ? c->n_root >= c->lim.max_connections : c->n_users >= c->lim.max_connections) {
                refusal(c, REF_TOTAL, "refused a control connection from uid %u (pid %d): %u connections open "
                        "(ControlMaxConnections)", (unsigned)pc->uid, (int)pc->pid, c->lim.max_connections);
                refuse(fd, GADGET_EBUSY, "gadgetd is busy: too many control connections, try again later");
                return -EBUSY;
        }
        if (pc->uid != 0 && conns_of(c, pc->uid) >= c->lim.max_per_user) {
                refusal(c, REF_USER, "refused a control connection from uid %u (pid %d): it has %u open "
                        "(ControlMaxConnectionsPerUser)", (unsigned)pc->uid, (int)pc->pid, c->lim.max_per_user);
                snprintf(msg, sizeof msg, "busy: uid %u has %u control connections open, the most one user "
                         "may have; close one", (unsigned)pc->uid, c->lim.max_per_user);
                refuse(fd, GADGET_EBUSY, msg);
                return -EBUSY;
        }
        return 0;
}

/* Whether uid is held past its second's bytes (never root). */
static bool budget_held(const struct control *c, uid_t uid)
{
        for (size_t i = 0; uid != 0 && i < BUDGET_USERS; i++)
                if (c->budgets[i].held && c->budgets[i].uid == uid)
                        return true;
        return false;
}

static void add_client(struct control *c, int fd, const struct peercred *pc)
{
        struct client *cl = calloc(1, sizeof *cl);
        if (!cl || conn_new(c->env.base, fd, c->lim.queue_bytes, &conn_ops, cl, &cl->conn) < 0) {
                free(cl);
                close(fd);
                return;
        }
        cl->ctl = c;
        cl->cred = *pc;
        snprintf(cl->caller, sizeof cl->caller, "gadgetctl (uid %u)", (unsigned)pc->uid);
        conn_accept_fds(cl->conn, CONTROL_EXEC_FDS);
        LIST_INSERT_HEAD(&c->clients, cl, link);
        /* A user past its second's bytes is not read on a new connection
         * either. */
        if (budget_held(c, pc->uid))
                conn_hold(cl->conn, true);
        if (pc->uid == 0)
                c->n_root++;
        else
                c->n_users++;
}

/* Removes a socket left at path by a gadgetd that ended, and only that:
 * 0 if nothing is left there, -EADDRINUSE if something still accepts
 * connections on it, -EEXIST if it is not a socket, else -errno. */
static int remove_stale(const struct sockaddr_un *sa)
{
        struct stat st;
        int e;
        if (lstat(sa->sun_path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        /* Non-blocking: a listener whose backlog is full answers EAGAIN,
         * and it is alive all the same. */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0 || errno == EAGAIN || errno == EINPROGRESS)
                e = -EADDRINUSE;
        else if (errno == ECONNREFUSED)
                e = unlink(sa->sun_path) < 0 && errno != ENOENT ? -errno : 0;
        else
                e = -errno;
        close(fd);
        return e;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
        struct control *c = arg;
        event_add(c->ev_accept, NULL);
}

/* Why a pause: at the fd limit (EMFILE) the pending connection stays in
 * the queue and the socket stays readable, so accepting again at once
 * would spin; the listener sleeps BACKOFF_MS instead. */
static void accept_failed(struct control *c, int err)
{
        refusal(c, REF_ACCEPT, "control socket: cannot accept: %s; not accepting for %d ms", strerror(err),
                BACKOFF_MS);
        event_del(c->ev_accept);
        timer_arm_ms(c->ev_resume, BACKOFF_MS);
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
        struct control *c = arg;
        for (int i = 0; i < ACCEPT_BATCH; i++) {
                struct peercred pc;
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                accept_failed(c, errno);
                        return;
                }
                if (peercred_get(fd, &pc) < 0) {
                        close(fd);
                        continue;
                }
                if (admit(c, fd, &pc) == 0)
                        add_client(c, fd, &pc);
        }
}

/* Frees the listener's events (those made so far). */
static void control_events_free(struct control *c)
{
        if (c->ev_accept)
                event_free(c->ev_accept);
        if (c->ev_resume)
                event_free(c->ev_resume);
        if (c->ev_flush)
                event_free(c->ev_flush);
        if (c->ev_budget)
                event_free(c->ev_budget);
}

int control_open(const struct control_env *env, struct control **out)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct control *c = calloc(1, sizeof *c);
        int e;

        if (!c)
                return -ENOMEM;
        c->env = *env;
        c->lim = env->limits;
        /* Socket activation: systemd made the socket (mode and group from
         * gadgetd.socket) and keeps it across restarts of gadgetd. */
        if (env->adopt) {
                c->fd = env->adopt_fd;
                c->activated = env->adopt_activated;
                /* Non-blocking as it was, but for a socket unit's after a
                 * restart through the fd store: systemd passes it blocking
                 * (NonBlocking=no), and accept_cb's last accept would wait. */
                int fl = fcntl(c->fd, F_GETFL);
                if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
                        e = -errno;
                        free(c);
                        return e;
                }
                log_msg(L_INFO, NULL, "control socket kept from the previous gadgetd image");
                goto listening;
        }
        if ((c->fd = notify_listen_fd()) >= 0) {
                c->activated = true;
                log_msg(L_INFO, NULL, "control socket passed by systemd");
                goto listening;
        }
        if (strlen(env->socket_path) >= sizeof sa.sun_path) {
                free(c);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, env->socket_path);
        /* A socket left by a gadgetd that ended goes; a live one stays
         * (the socket's lock file, daemon.c, keeps out another gadgetd,
         * this keeps out anything else listening there). */
        if ((e = remove_stale(&sa)) < 0) {
                if (e == -EADDRINUSE)
                        log_msg(L_ERR, NULL, "control socket %s: another process accepts connections on it: "
                                "not starting", env->socket_path);
                else if (e == -EEXIST)
                        log_msg(L_ERR, NULL, "control socket %s: something else than a socket is there: "
                                "not starting", env->socket_path);
                free(c);
                return e;
        }
        /* Why a second name: the socket appears at its path only once it
         * has its mode and owner and listens, so no client ever finds it
         * too open, nor refuses to connect (the rename is atomic). */
        struct sockaddr_un tmp = { .sun_family = AF_UNIX };
        if ((size_t)snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s.%d", env->socket_path, (int)getpid()) >=
            sizeof tmp.sun_path) {
                free(c);
                return -ENAMETOOLONG;
        }
        unlink(tmp.sun_path);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fd < 0)
                goto fail;
        if (bind(c->fd, (struct sockaddr *)&tmp, sizeof tmp) < 0)
                goto fail;
        if (chmod(tmp.sun_path, 0660) < 0 || chown(tmp.sun_path, 0, env->group_gid) < 0 ||
            listen(c->fd, 128) < 0 || rename(tmp.sun_path, sa.sun_path) < 0) {
                e = -errno;
                unlink(tmp.sun_path);
                errno = -e;
                goto fail;
        }
listening:
        c->ev_accept = event_new(env->base, c->fd, EV_READ | EV_PERSIST, accept_cb, c);
        c->ev_resume = evtimer_new(env->base, resume_cb, c);
        c->ev_flush = event_new(env->base, -1, EV_PERSIST, flush_cb, c);
        c->ev_budget = evtimer_new(env->base, budget_cb, c);
        if (!c->ev_accept || !c->ev_resume || !c->ev_flush || !c->ev_budget || event_add(c->ev_accept, NULL) < 0 ||
            timer_arm_ms(c->ev_flush, FLUSH_MS) < 0) {
                errno = ENOMEM;
                goto fail;
        }
        /* Last: a listener cannot be taken back from the core. */
        if ((e = frames_open(env->core, &c->frames)) < 0)
                log_msg(L_WARN, NULL, "gadgetctl trace NAME is off: %s", strerror(-e));
        if (deploy_store_new(c, &c->env, &c->store) < 0)
                log_msg(L_ERR, NULL, "the store's releases: out of memory; each node keeps its own versions");
        *out = c;
        return 0;
fail:
        e = -errno;
        if (c->fd >= 0)
                close(c->fd);
        control_events_free(c);
        free(c);
        return e;
}

void control_free(struct control *c)
{
        if (!c)
                return;
        while (!LIST_EMPTY(&c->clients))
                client_free(LIST_FIRST(&c->clients));
        for (int i = 0; i < 2; i++)
                if (c->installs[i])
                        install_abandon(c->installs[i]);
        deploy_abandon_all(&c->deploys);
        deploy_store_free(c->store);
        control_events_free(c);
        frames_free(c->frames);
        close(c->fd);
        if (!c->activated)
                unlink(c->env.socket_path);
        free(c);
}

void control_log_added(struct control *c, struct unit *u, size_t lines)
{
        const struct logbuf *log = unit_log(u);
        if (lines > log->count)
                lines = log->count;
        struct client *cl;
        LIST_FOREACH(cl, &c->clients, link)
                for (size_t i = 0; i < lines && cl->stream; i++) {
                        const struct logbuf_entry *l = logbuf_line(log, lines, i);
                        struct stream_entry e = { .gadget = unit_name(u), .text = l->text, .time_ms = l->time_ms,
                                                  .run = l->run, .source = l->source, .prio = l->prio };
                        stream_push_entry(cl->stream, &e);
                }
}

void control_audit_added(struct control *c, const char *gadget, const char *line)
{
        struct client *cl;
        LIST_FOREACH(cl, &c->clients, link)
                stream_push(cl->stream, STREAM_FOLLOW_AUDIT, gadget, line);
}

/* Why one at a time: an install holds a thread and a bundle's bytes (up
 * to BUNDLE_SIZE_MAX). Root's apart from the group's: a member whose
 * bundle never ends reading (a file on a stalled filesystem) holds only
 * the members' install, never root's. The bit taken, or 0 (busy). */
unsigned control_install_begin(struct client *cl, struct install_job *j)
{
        unsigned bit = cl->cred.uid == 0 ? 1 : 2;
        if (cl->ctl->installing & bit)
                return 0;
        cl->ctl->installing |= bit;
        cl->ctl->installs[bit - 1] = j;
        return bit;
}

void control_install_end(struct control *c, unsigned bit)
{
        c->installing &= ~bit;
        c->installs[bit - 1] = NULL;
}

struct deploy_list *control_deploys(struct control *c)
{
        return &c->deploys;
}

struct deploy_store *control_deploy_store(struct control *c)
{
        return c->store;
}

/* gadgetctl daemon-reexec (requests.c's handler): root only, one at a time. */
void control_reexec_ask(struct client *cl, uint64_t id)
{
        struct control *c = cl->ctl;
        if (cl->cred.uid != 0) {
                client_error(cl, id, GADGET_EDENIED, "daemon-reexec is root's only");
                return;
        }
        if (!c->env.reexec) {
                client_error(cl, id, GADGET_EUNAVAILABLE, "this gadgetd cannot re-execute itself");
                return;
        }
        if (c->reexec_asked) {
                client_error(cl, id, GADGET_EBUSY, "a re-exec of gadgetd is already under way");
                return;
        }
        c->reexec = cl;
        c->reexec_id = id;
        c->reexec_asked = true;
        c->env.reexec(c->env.arg);
}

void control_reexec_info(const struct control *c, int *listen_fd, bool *activated, int *answer_fd,
                         uint64_t *answer_id)
{
        *listen_fd = c->fd;
        *activated = c->activated;
        *answer_fd = c->reexec ? conn_fd(c->reexec->conn) : -1;
        *answer_id = c->reexec_id;
}

void control_reexec_hold(struct control *c, bool hold)
{
        struct client *cl;
        /* Released: a user past its budget stays held until its second ends. */
        LIST_FOREACH(cl, &c->clients, link)
                conn_hold(cl->conn, hold || budget_held(c, cl->cred.uid));
        if (hold)
                event_del(c->ev_accept);
        else
                event_add(c->ev_accept, NULL);
}

void control_reexec_failed(struct control *c, int code, const char *msg)
{
        if (c->reexec)
                client_error(c->reexec, c->reexec_id, code, "%s", msg);
        c->reexec = NULL;
        c->reexec_asked = false;
}

int control_reexec_quiet(const struct control *c, char *why, size_t len)
{
        const struct client *cl;
        /* Its thread and answer are this image's. */
        if (c->installing) {
                snprintf(why, len, "a gadgetctl install is in flight");
                return -EBUSY;
        }
        LIST_FOREACH(cl, &c->clients, link) {
                if (!LIST_EMPTY(&cl->loads)) {
                        snprintf(why, len, "a load, move, backup or restore of uid %u is in flight",
                                 (unsigned)cl->cred.uid);
                        return -EBUSY;
                }
                /* Its probe is this image's child, its answer this
                 * image's to give: the next one would know neither. */
                if (cl->exec) {
                        snprintf(why, len, "a gadgetctl exec (pid %d) runs", (int)cl->cred.pid);
                        return -EBUSY;
                }
                if (conn_pending(cl->conn) && !cl->stream && !cl->frames) {
                        snprintf(why, len, "answers to uid %u (pid %d) are still being sent", (unsigned)cl->cred.uid,
                                 (int)cl->cred.pid);
                        return -EBUSY;
                }
        }
        return 0;
}

size_t control_reexec_clients(const struct control *c, struct control_handoff *out, size_t max)
{
        size_t n = 0;
        const struct client *cl;
        LIST_FOREACH(cl, &c->clients, link) {
                if (n == max || cl->stream || cl->frames || cl->refused || conn_input_ended(cl->conn) || conn_fd(cl->conn) < 0)
                        continue;
                if (out) {
                        out[n] = (struct control_handoff){ .fd = conn_fd(cl->conn), .spoke = cl->spoke };
                        out[n].input_len = conn_buffered(cl->conn, &out[n].input);
                }
                n++;
        }
        return n;
}

int control_adopt_client(struct control *c, const struct control_handoff *h)
{
        struct peercred pc;
        int fl = fcntl(h->fd, F_GETFL);
        if (fl < 0 || fcntl(h->fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(h->fd, F_SETFD, FD_CLOEXEC) < 0 ||
            peercred_get(h->fd, &pc) < 0) {
                close(h->fd);
                return -errno;
        }
        /* Admitted by the image before, held to the same limits. */
        if (admit(c, h->fd, &pc) < 0)
                return -EPERM;
        add_client(c, h->fd, &pc);
        struct client *cl = LIST_FIRST(&c->clients);
        if (!cl || conn_fd(cl->conn) != h->fd)
                return -ENOMEM;
        cl->spoke = h->spoke;
        if (conn_preload(cl->conn, h->input, h->input_len) < 0) {
                conn_drop(cl->conn, -ENOMEM);
                return -ENOMEM;
        }
        return 0;
}

void control_reexec_done(struct control *c, int fd, uint64_t id, const char *msg)
{
        struct client *cl;
        LIST_FOREACH(cl, &c->clients, link)
                if (conn_fd(cl->conn) == fd) {
                        client_done(cl, id, "%s", msg);
                        return;
                }
}
