/* spare: the daemon's ready sandbox shell. */
#include "spare.h"

#include <errno.h>
#include <event2/event.h>

#include "system/log.h"
#include "system/monotime.h"
#include "system/timer.h"

int spare_fill(struct spare *s)
{
        char err[256];
        if (s->shell.pid > 0)
                return 0;
        /* Nothing is lost if this fails: the next start makes its own
         * shell, and says why if it cannot. */
        int e = spawn_shell_new(s->helper, s->shared_net, &s->shell, err, sizeof err);
        if (e < 0)
                log_msg(L_DEBUG, NULL, "spare sandbox shell: %s", err);
        return e < 0 ? e : 0;
}

void spare_refill(struct spare *s)
{
        /* gadgetd run starts one gadget: a second shell would go unused.
         * After a quiet spell the timer makes it: made here it competes
         * with the start for the CPUs (measured: the first call to an idle
         * gadget 3.6 -> 5.3 ms on a loaded two-CPU machine). If this fails,
         * the timer armed when the start is done tries again. */
        if (s->ev && s->burst)
                spare_fill(s);
}

static void fill_cb(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        spare_fill(arg);
}

int spare_open(struct spare *s, struct event_base *base, const struct spawn_helper *helper)
{
        *s = (struct spare){ .shell = SPAWN_SHELL_NONE, .helper = helper };
        if (!base)
                return 0;
        if (!(s->ev = evtimer_new(base, fill_cb, s)))
                return -ENOMEM;
        timer_arm_ms(s->ev, SPARE_DELAY_MS);
        return 0;
}

static void drop(struct spare *s)
{
        if (s->shell.pid > 0) /* else none was ever made, or it is all zeros */
                spawn_shell_drop(&s->shell);
}

void spare_drop(struct spare *s)
{
        drop(s);
        if (s->ev)
                event_del(s->ev);
}

void spare_close(struct spare *s)
{
        drop(s);
        if (s->ev)
                event_free(s->ev);
        s->ev = NULL;
}

void spare_take(struct spare *s, bool shared_net, struct spawn_shell *out)
{
        s->burst = s->last_done_us && monotime_us() - s->last_done_us < SPARE_DELAY_MS * 1000;
        *out = SPAWN_SHELL_NONE;
        /* One of the other kind is dropped: the next is made for the
         * kind of the starts now asking. */
        if (s->shell.pid > 0 && (!spawn_shell_fresh(&s->shell) || s->shell.shared_net != shared_net))
                drop(s);
        s->shared_net = shared_net;
        if (s->shell.pid > 0) {
                *out = s->shell;
                s->shell = SPAWN_SHELL_NONE;
        }
}

void spare_done(struct spare *s)
{
        s->last_done_us = monotime_us();
        if (s->ev)
                timer_arm_ms(s->ev, SPARE_DELAY_MS);
}
