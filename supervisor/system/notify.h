/* notify: gadgetd and its service manager — readiness, status and watchdog
 * pings (sd_notify), and the control socket passed by socket activation.
 * Without libsystemd, or when systemd did not start gadgetd, every call
 * does nothing and notify_listen_fd finds no socket. */
#pragma once

#include <stddef.h>
#include <event2/event.h>

struct notify;

/* Prepares notifications; starts the watchdog pings on base when the
 * service has WatchdogSec=. 0 or -errno. */
int notify_open(struct event_base *base, struct notify **out);
void notify_free(struct notify *n);
/* READY=1, once the policy directory is loaded and the socket listens. */
void notify_ready(struct notify *n);
/* STATUS= with the number of gadgets; sent only when it changed. */
void notify_status(struct notify *n, size_t gadgets, size_t ready, size_t failed);
void notify_reloading(struct notify *n);
void notify_stopping(struct notify *n);
/* The listening Unix stream socket passed by socket activation (made
 * close-on-exec and non-blocking), or -ENOENT if none was passed. */
int notify_listen_fd(void);
