/* client: the control-socket connection of gadgetctl. */
#include "client.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "contract.h"
#include "validate.h"
#include "value.h"

/* The one request gadgetctl sends per connection. */
#define CLIENT_REQUEST_ID 1

#define REFUSE(...) do { snprintf(why, whylen, __VA_ARGS__); return -EPROTO; } while (0)

int client_dial(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strlen(path);
        int fd;

        if (len >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, len + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

int client_connect(struct client *c, const char *path)
{
        int fd = client_dial(path);

        if (fd < 0)
                return fd;
        c->fd = fd;
        c->id = 0;
        wire_reader_init(&c->reader, 0);
        return 0;
}

int client_send(struct client *c, Control__Request *req)
{
        /* wire_send writes with MSG_NOSIGNAL: a gadgetd that went away
         * gives -EPIPE here, not a SIGPIPE. */
        c->id = req->id = CLIENT_REQUEST_ID;
        req->version = CONTROL_PROTOCOL_VERSION;
        if (!c->n_fds)
                return wire_send(c->fd, &req->base, 0);
        /* The fds go with the request's first bytes: gadgetd takes them as
         * that request's. */
        struct wire_writer w;
        wire_writer_init(&w, 0);
        int e = wire_writer_put(&w, &req->base, WIRE_MAX_FRAME);
        if (e == 0)
                e = wire_writer_flush_fds(&w, c->fd, c->fds, c->n_fds);
        while (e == 1)
                e = wire_writer_flush(&w, c->fd);
        wire_writer_free(&w);
        return e;
}

int client_recv(struct client *c, Control__Response **out, char *why, size_t whylen)
{
        const uint8_t *data;
        size_t len;
        Control__Response *r;
        int e;

        snprintf(why, whylen, "invalid answer");
        e = wire_recv(&c->reader, c->fd, &data, &len);
        if (e == -EMSGSIZE)
                REFUSE("answer larger than %u bytes", WIRE_MAX_FRAME);
        if (e == -EPROTO)
                REFUSE("connection closed in the middle of an answer");
        if (e <= 0)
                return e;
        /* Why this is safe: the nesting of the raw bytes is bounded before
         * protobuf-c's recursive unpacker sees them. */
        if (value_packed_check(&control__response__descriptor, data, len, why, whylen) < 0)
                return -EPROTO;
        r = control__response__unpack(NULL, len, data);
        if (!r)
                REFUSE("answer that does not decode");
        if (r->id != c->id && !(r->id == 0 && r->resp_case == CONTROL__RESPONSE__RESP_ERROR)) {
                control__response__free_unpacked(r, NULL);
                REFUSE("answer to another request");
        }
        e = validate_control_response(r, why, whylen);
        if (e < 0) {
                control__response__free_unpacked(r, NULL);
                return e;
        }
        *out = r;
        return 1;
}

void client_close(struct client *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        wire_reader_free(&c->reader);
}
