/* notify: sd_notify and socket activation (libsystemd where available). */
#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "log.h"

struct notify {
        struct event *ev_watchdog;
        char status[128];          /* the last STATUS= sent */
};

#ifdef HAVE_LIBSYSTEMD
static void send_state(const char *state)
{
        /* 0: not under systemd; <0: the manager went away. Neither stops gadgetd. */
        int e = sd_notify(0, state);
        if (e < 0)
                log_msg(L_WARN, NULL, "sd_notify %s: %s", state, strerror(-e));
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
        /* Sent from the event loop: a stalled loop stops the pings and
         * systemd restarts gadgetd. */
        send_state("WATCHDOG=1");
}

/* Pings at half the watchdog interval when WatchdogSec= is set. */
static int watchdog_start(struct event_base *base, struct notify *n)
{
        uint64_t usec = 0;
        int e = sd_watchdog_enabled(0, &usec);
        if (e < 0)
                log_msg(L_WARN, NULL, "watchdog: %s (no pings)", strerror(-e));
        if (e <= 0)
                return 0;
        uint64_t half = usec / 2;
        struct timeval tv = { .tv_sec = (time_t)(half / 1000000), .tv_usec = (suseconds_t)(half % 1000000) };
        n->ev_watchdog = event_new(base, -1, EV_PERSIST, watchdog_cb, n);
        if (!n->ev_watchdog || event_add(n->ev_watchdog, &tv) < 0)
                return -ENOMEM;
        log_msg(L_INFO, NULL, "watchdog: pinging systemd every %llu ms", (unsigned long long)(half / 1000));
        return 0;
}
#else
static void send_state(const char *state)
{
        (void)state;
}

static int watchdog_start(struct event_base *base, struct notify *n)
{
        return 0;
}
#endif

int notify_open(struct event_base *base, struct notify **out)
{
        struct notify *n = calloc(1, sizeof *n);
        int e;
        if (!n)
                return -ENOMEM;
        if ((e = watchdog_start(base, n)) < 0) {
                notify_free(n);
                return e;
        }
        *out = n;
        return 0;
}

void notify_free(struct notify *n)
{
        if (!n)
                return;
        if (n->ev_watchdog)
                event_free(n->ev_watchdog);
        free(n);
}

void notify_ready(struct notify *n)
{
        if (n)
                send_state("READY=1");
}

void notify_status(struct notify *n, size_t gadgets, size_t ready, size_t failed)
{
        char s[sizeof n->status];
        if (!n)
                return;
        snprintf(s, sizeof s, "STATUS=%zu gadget%s: %zu ready, %zu failed", gadgets, gadgets == 1 ? "" : "s",
                 ready, failed);
        if (strcmp(s, n->status) == 0)
                return;
        memcpy(n->status, s, sizeof s);
        send_state(s);
}

void notify_reloading(struct notify *n)
{
        if (n)
                send_state("RELOADING=1");
}

void notify_stopping(struct notify *n)
{
        if (n)
                send_state("STOPPING=1");
}

int notify_listen_fd(void)
{
#ifdef HAVE_LIBSYSTEMD
        /* Unsets LISTEN_FDS/LISTEN_PID: the sockets are for gadgetd only. */
        int count = sd_listen_fds(1);
        if (count <= 0)
                return -ENOENT;
        int fd = SD_LISTEN_FDS_START;
        if (count > 1)
                log_msg(L_WARN, NULL, "socket activation passed %d sockets: using the first", count);
        for (int i = 1; i < count; i++)
                close(fd + i); /* passed without O_CLOEXEC: no worker may inherit them */
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
                log_msg(L_WARN, NULL, "socket activation: fd %d is not a listening Unix stream socket", fd);
                return -ENOENT;
        }
        /* Passed sockets come without O_CLOEXEC: no worker may inherit it. */
        int fl = fcntl(fd, F_GETFL);
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return fd;
#else
        return -ENOENT;
#endif
}
