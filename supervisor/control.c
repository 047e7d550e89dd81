/* control: gadgetd's control socket — who may connect, framing, checks of
 * every request before its handler runs. */
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

#include "client.h"
#include "control.pb-c.h"
#include "daemon.h"
#include "gadget.h"
#include "log.h"
#include "notify.h"
#include "stream.h"
#include "policy.h"
#include "unit.h"
#include "validate.h"
#include "value.h"
#include "wire.h"

#define MAX_CLIENTS 256
#define CLIENT_QUEUE (8u << 20) /* answers waiting for a slow client */

struct control {
        struct daemon *d;
        int fd;
        struct event *ev_accept;
        struct client *clients;
        size_t n_clients;
        bool activated;            /* the socket was passed by systemd (gadgetd.socket) */
};

struct daemon *client_daemon(const struct client *cl)
{
        return cl->ctl->d;
}

static void client_free(struct client *cl)
{
        struct control *c = cl->ctl;
        for (struct client **pp = &c->clients; *pp; pp = &(*pp)->next)
                if (*pp == cl) {
                        *pp = cl->next;
                        c->n_clients--;
                        break;
                }
        for (struct client_call *p = cl->calls; p; p = p->next)
                p->client = NULL; /* the answer will find no one */
        event_free(cl->ev_read);
        event_free(cl->ev_write);
        close(cl->fd);
        wire_reader_free(cl->rd);
        wire_writer_free(cl->wr);
        free(cl->rd);
        free(cl->wr);
        stream_free(cl->stream);
        free(cl);
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
        struct client *cl = arg;
        int e = wire_writer_flush(cl->wr, cl->fd);
        if (e == 1)
                event_add(cl->ev_write, NULL);
        else if (e == 0)
                stream_kick(cl->stream); /* the next part of a long answer */
}

int client_send(struct client *cl, Control__Response *r)
{
        /* A client that does not read loses answers; gadgetd loses nothing. */
        int e = wire_writer_put(cl->wr, &r->base, WIRE_MAX_FRAME);
        if (e < 0)
                return e;
        if (!event_pending(cl->ev_write, EV_WRITE, NULL))
                event_active(cl->ev_write, EV_WRITE, 0);
        return 0;
}

void client_error(struct client *cl, uint64_t id, int code, const char *fmt, ...)
{
        char msg[4096];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        Gadget__Error err = GADGET__ERROR__INIT;
        err.code = (uint32_t)code;
        err.message = msg;
        Control__Response r = CONTROL__RESPONSE__INIT;
        r.id = id;
        r.resp_case = CONTROL__RESPONSE__RESP_ERROR;
        r.error = &err;
        client_send(cl, &r);
}

void client_done(struct client *cl, uint64_t id, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        Control__Done done = CONTROL__DONE__INIT;
        done.message = msg;
        Control__Response r = CONTROL__RESPONSE__INIT;
        r.id = id;
        r.resp_case = CONTROL__RESPONSE__RESP_DONE;
        r.done = &done;
        client_send(cl, &r);
}

struct client_call *client_call_new(struct client *cl, uint64_t id)
{
        struct client_call *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        *c = (struct client_call){ .client = cl, .id = id, .next = cl->calls };
        cl->calls = c;
        return c;
}

struct client *client_call_end(struct client_call *c)
{
        struct client *cl = c->client;
        if (cl)
                for (struct client_call **pp = &cl->calls; *pp; pp = &(*pp)->next)
                        if (*pp == c) {
                                *pp = c->next;
                                break;
                        }
        free(c);
        return cl;
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
        struct client *cl = arg;
        ssize_t n = wire_reader_fill(cl->rd, cl->fd);
        if (n == -EAGAIN)
                return;
        for (;;) {
                const uint8_t *data;
                size_t len;
                char why[256];
                int r = wire_reader_next(cl->rd, &data, &len);
                if (r == 0)
                        break;
                if (r < 0 || value_packed_check(&control__request__descriptor, data, len, why, sizeof why) < 0) {
                        client_free(cl); /* not speaking the protocol */
                        return;
                }
                Control__Request *q = control__request__unpack(NULL, len, data);
                if (!q) {
                        client_free(cl);
                        return;
                }
                if (validate_control_request(q, why, sizeof why) < 0)
                        client_error(cl, q->id, GADGET_EINVAL, "bad request: %s", why);
                else
                        request_handle(cl, q);
                control__request__free_unpacked(q, NULL);
        }
        if (n <= 0)
                client_free(cl);
}

/* Only root and members of the control group may use the socket. Why this
 * is safe: the kernel reports the peer's credentials and groups, and the
 * socket file's own mode (0660, root:group) already keeps others out. */
static bool peer_allowed(int fd, gid_t group)
{
        struct ucred cred;
        socklen_t len = sizeof cred;
        gid_t groups[256];
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return false;
        if (cred.uid == 0)
                return true;
        if (group == (gid_t)-1)
                return false;
        if (cred.gid == group)
                return true;
        len = sizeof groups;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
                return false;
        for (size_t i = 0; i < len / sizeof *groups; i++)
                if (groups[i] == group)
                        return true;
        return false;
}

static void refuse(int fd, const char *socket_path, const char *group)
{
        char msg[512];
        snprintf(msg, sizeof msg, "permission denied on %s: run as root or as a member of the %s group",
                 socket_path, group);
        Gadget__Error err = GADGET__ERROR__INIT;
        err.code = GADGET_EDENIED;
        err.message = msg;
        Control__Response r = CONTROL__RESPONSE__INIT;
        r.resp_case = CONTROL__RESPONSE__RESP_ERROR;
        r.error = &err;
        wire_send(fd, &r.base, WIRE_MAX_FRAME); /* small: fits the socket buffer */
        close(fd);
}

static void accept_cb(evutil_socket_t lfd, short what, void *arg)
{
        struct control *c = arg;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return;
        if (!peer_allowed(fd, c->d->group_gid)) {
                log_msg(L_WARN, NULL, "refused a control connection from a user outside group %s", c->d->group);
                refuse(fd, c->d->socket_path, c->d->group);
                return;
        }
        struct client *cl = calloc(1, sizeof *cl);
        if (!cl || c->n_clients >= MAX_CLIENTS || !(cl->rd = malloc(sizeof *cl->rd)) ||
            !(cl->wr = malloc(sizeof *cl->wr))) {
                if (cl) {
                        free(cl->rd);
                        free(cl);
                }
                close(fd);
                return;
        }
        cl->ctl = c;
        cl->fd = fd;
        wire_reader_init(cl->rd, WIRE_MAX_FRAME);
        wire_writer_init(cl->wr, CLIENT_QUEUE);
        cl->ev_read = event_new(c->d->base, fd, EV_READ | EV_PERSIST, read_cb, cl);
        cl->ev_write = event_new(c->d->base, fd, EV_WRITE, flush_cb, cl);
        cl->next = c->clients;
        c->clients = cl;
        c->n_clients++;
        if (!cl->ev_read || !cl->ev_write || event_add(cl->ev_read, NULL) < 0)
                client_free(cl);
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

int control_open(struct daemon *d, struct control **out)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct control *c = calloc(1, sizeof *c);
        int e;

        if (!c)
                return -ENOMEM;
        c->d = d;
        /* Socket activation: systemd made the socket (mode and group from
         * gadgetd.socket) and keeps it across restarts of gadgetd. */
        if ((c->fd = notify_listen_fd()) >= 0) {
                c->activated = true;
                log_msg(L_INFO, NULL, "control socket passed by systemd");
                goto listening;
        }
        if (strlen(d->socket_path) >= sizeof sa.sun_path) {
                free(c);
                return -ENAMETOOLONG;
        }
        strcpy(sa.sun_path, d->socket_path);
        /* A socket left by a gadgetd that ended goes; a live one stays
         * (the socket's lock file, daemon.c, keeps out another gadgetd,
         * this keeps out anything else listening there). */
        if ((e = remove_stale(&sa)) < 0) {
                if (e == -EADDRINUSE)
                        log_msg(L_ERR, NULL, "control socket %s: another process accepts connections on it: "
                                "not starting", d->socket_path);
                else if (e == -EEXIST)
                        log_msg(L_ERR, NULL, "control socket %s: something else than a socket is there: "
                                "not starting", d->socket_path);
                free(c);
                return e;
        }
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fd < 0)
                goto fail;
        if (bind(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            chmod(d->socket_path, 0660) < 0 ||
            chown(d->socket_path, 0, d->group_gid) < 0 ||
            listen(c->fd, 128) < 0)
                goto fail;
listening:
        c->ev_accept = event_new(d->base, c->fd, EV_READ | EV_PERSIST, accept_cb, c);
        if (!c->ev_accept || event_add(c->ev_accept, NULL) < 0) {
                errno = ENOMEM;
                goto fail;
        }
        *out = c;
        return 0;
fail:
        e = -errno;
        if (c->fd >= 0)
                close(c->fd);
        free(c);
        return e;
}

void control_free(struct control *c)
{
        if (!c)
                return;
        while (c->clients)
                client_free(c->clients);
        if (c->ev_accept)
                event_free(c->ev_accept);
        close(c->fd);
        if (!c->activated)
                unlink(c->d->socket_path);
        free(c);
}

void control_log_added(struct control *c, struct unit *u, size_t lines)
{
        if (lines > u->log.count)
                lines = u->log.count;
        for (struct client *cl = c->clients; cl; cl = cl->next)
                for (size_t i = 0; i < lines && cl->stream; i++)
                        stream_push(cl->stream, STREAM_FOLLOW_LOGS, u->policy->name,
                                    logbuf_line(&u->log, lines, i));
}

void control_audit_added(struct control *c, const char *gadget, const char *line)
{
        for (struct client *cl = c->clients; cl; cl = cl->next)
                stream_push(cl->stream, STREAM_FOLLOW_AUDIT, gadget, line);
}
