/* control: the control socket — who may connect, framing, and one handler
 * per request kind (load, stop, restart, list, status, call, logs, reload). */
#pragma once

#include <stddef.h>

struct daemon;
struct unit;
struct control;

/* Listens on d->socket_path (mode 0660, group d->group). 0 or -errno. */
int control_open(struct daemon *d, struct control **out);
void control_free(struct control *c);
/* New log lines of u for clients following its log. */
void control_log_added(struct control *c, struct unit *u, size_t lines);
/* A new audit record of gadget, for clients following its audit log. */
void control_audit_added(struct control *c, const char *gadget, const char *line);
