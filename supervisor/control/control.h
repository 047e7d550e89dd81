/* control: the control socket — who may connect, framing, and one handler
 * per request kind (load, stop, restart, list, status, call, logs, reload). */
#pragma once

#include <stddef.h>

struct daemon;
struct unit;
struct control;

/* What the control socket's clients may cost gadgetd (daemon settings). */
#define CONTROL_MAX_CONNECTIONS 64     /* ControlMaxConnections= */
#define CONTROL_MAX_PER_USER 8         /* ControlMaxConnectionsPerUser= */
#define CONTROL_QUEUE_BYTES (256u << 10) /* ControlQueueSize= */
struct control_limits {
        unsigned max_connections;  /* of all users but root together; root has as many of its own */
        unsigned max_per_user;     /* of one uid other than root */
        size_t queue_bytes;        /* unsent answers before a client counts as not reading */
};

/* Listens on d->socket_path (mode 0660, group d->group), clients held to
 * lim. 0 or -errno. */
int control_open(struct daemon *d, const struct control_limits *lim, struct control **out);
void control_free(struct control *c);
/* New log lines of u for clients following its log. */
void control_log_added(struct control *c, struct unit *u, size_t lines);
/* A new audit record of gadget, for clients following its audit log. */
void control_audit_added(struct control *c, const char *gadget, const char *line);
