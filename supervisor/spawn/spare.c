/* spare: the daemon's ready sandbox shell. */
#include "spare.h"

#include <event2/event.h>

#include "daemon.h"
#include "system/log.h"

static void fill_cb(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        spare_fill(arg);
}

int spare_open(struct daemon *d)
{
        struct spare *s = &d->spare;
        s->shell = SPAWN_SHELL_NONE;
        if (!(s->ev = evtimer_new(d->base, fill_cb, d)))
                return -1;
        evtimer_add(s->ev, &(struct timeval){ .tv_usec = SPARE_DELAY_MS * 1000 });
        return 0;
}

void spare_close(struct daemon *d)
{
        spare_drop(d);
        if (d->spare.ev)
                event_free(d->spare.ev);
        d->spare.ev = NULL;
}

void spare_fill(struct daemon *d)
{
        struct spare *s = &d->spare;
        char err[256];
        if (s->shell.pid > 0)
                return;
        /* Nothing is lost if this fails: the next start makes its own
         * shell, and says why if it cannot. */
        if (spawn_shell_new(&d->helper, &s->shell, err, sizeof err) < 0)
                log_msg(L_DEBUG, NULL, "spare sandbox shell: %s", err);
}

void spare_drop(struct daemon *d)
{
        struct spare *s = &d->spare;
        if (s->shell.pid > 0) /* else none was ever made, or it is all zeros */
                spawn_shell_drop(&s->shell);
}

void spare_take(struct daemon *d, struct spawn_shell *out)
{
        struct spare *s = &d->spare;
        *out = SPAWN_SHELL_NONE;
        if (s->shell.pid > 0 && !spawn_shell_fresh(&s->shell))
                spare_drop(d);
        if (s->shell.pid > 0) {
                *out = s->shell;
                s->shell = SPAWN_SHELL_NONE;
        }
        if (s->ev)
                evtimer_add(s->ev, &(struct timeval){ .tv_usec = SPARE_DELAY_MS * 1000 });
}
