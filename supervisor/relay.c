/* relay: gadgetd run's copy of one output stream of the program. */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define RELAY_CHUNK 65536 /* read per loop turn, so the bindings keep being served */

struct relay {
        int rd;                    /* read end of the program's pipe, -1 once closed */
        int to;                    /* gadgetd run's own stdout or stderr */
        struct event *ev;
        relay_closed_fn *closed;
        void *arg;
};

static void relay_close(struct relay *r)
{
        if (r->rd < 0)
                return;
        event_del(r->ev);
        close(r->rd);
        r->rd = -1;
        r->closed(r->arg);
}

/* Writes all of buf to fd. The caller's fd is left as the caller set it
 * (blocking, usually): a slow reader slows gadgetd run, as it would slow
 * the program writing to it directly. */
static int write_all(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                buf += w;
                n -= (size_t)w;
        }
        return 0;
}

static void relay_cb(evutil_socket_t fd, short what, void *arg)
{
        struct relay *r = arg;
        char buf[RELAY_CHUNK];
        ssize_t n = read(r->rd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        /* End of file, or the caller's fd is gone (EPIPE: SIGPIPE is
         * ignored in gadgetd): closing our end gives the program EPIPE
         * (or SIGPIPE) at its next write, as a closed stdout would. */
        if (n <= 0 || write_all(r->to, buf, (size_t)n) < 0)
                relay_close(r);
}

int relay_open(struct event_base *base, int to_fd, relay_closed_fn *closed, void *arg, struct relay **out,
               int *write_end)
{
        int fds[2] = { -1, -1 }, e;
        struct relay *r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
                e = -errno;
                goto fail;
        }
        *r = (struct relay){ .rd = fds[0], .to = to_fd, .closed = closed, .arg = arg };
        r->ev = event_new(base, fds[0], EV_READ | EV_PERSIST, relay_cb, r);
        if (!r->ev || event_add(r->ev, NULL) < 0) {
                e = -ENOMEM;
                goto fail;
        }
        *out = r;
        *write_end = fds[1];
        return 0;
fail:
        if (r->ev)
                event_free(r->ev);
        if (fds[0] >= 0)
                close(fds[0]);
        if (fds[1] >= 0)
                close(fds[1]);
        free(r);
        return e;
}

bool relay_is_open(const struct relay *r)
{
        return r && r->rd >= 0;
}

void relay_free(struct relay *r)
{
        if (!r)
                return;
        if (r->rd >= 0)
                close(r->rd);
        if (r->ev)
                event_free(r->ev);
        free(r);
}
