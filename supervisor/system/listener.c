/* listener: pausing a listener that cannot accept. */
#include "listener.h"

#include <string.h>

#include "log.h"
#include "timer.h"

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
        evconnlistener_enable(arg);
}

struct event *listener_resume_new(struct evconnlistener *lev)
{
        return evtimer_new(evconnlistener_get_base(lev), resume_cb, lev);
}

void listener_pause(struct evconnlistener *lev, struct event *resume, const char *who, unsigned ms)
{
        int err = EVUTIL_SOCKET_ERROR();
        struct timeval tv = timer_tv_ms(ms);
        evconnlistener_disable(lev);
        log_msg(L_WARN, NULL, "%s: cannot accept: %s; not accepting for %u ms", who, strerror(err), ms);
        int e = resume ? event_add(resume, &tv)
                       : event_base_once(evconnlistener_get_base(lev), -1, EV_TIMEOUT, resume_cb, lev, &tv);
        if (e < 0)
                evconnlistener_enable(lev);
}
