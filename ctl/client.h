/* client: one connection to gadgetd's control socket: connect, send a
 * Request, receive the Responses to it, each checked before use. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"
#include "wire.h"

struct client {
        int fd;
        uint64_t id; /* id of the request sent */
        struct wire_reader reader;
        const int *fds; /* passed with the request (SCM_RIGHTS): exec's stdin, stdout, stderr */
        size_t n_fds;
};

/* Connects a stream socket (close-on-exec) to the Unix socket at path: the
 * fd, or -errno (-ENAMETOOLONG if path does not fit a socket address). The
 * benchmarks' client connects with it too. */
int client_dial(const char *path);
/* client_dial, and c ready to send one request. 0 or -errno. */
int client_connect(struct client *c, const char *path);
/* Sends req (its id is set here), with c->fds if any. 0 or -errno. */
int client_send(struct client *c, Control__Request *req);
/* Receives the next Response to the request sent, or one with id 0 (gadgetd
 * refusing the connection itself). Returns 1 with *out set (free with
 * control__response__free_unpacked), 0 when gadgetd closed the connection,
 * -EPROTO for an answer that does not decode or fails the checks (reason in
 * why), or another -errno. */
int client_recv(struct client *c, Control__Response **out, char *why, size_t whylen);
void client_close(struct client *c);
