#include "thread.h"

#include <errno.h>
#include <signal.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg, size_t stack, bool detached)
{
        pthread_attr_t attr;
        sigset_t all, old;
        int e;

        if ((e = pthread_attr_init(&attr)) != 0)
                return -e;
        if (stack && (e = pthread_attr_setstacksize(&attr, stack)) != 0)
                goto out;
        if (detached && (e = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) != 0)
                goto out;
        /* A new thread inherits the creating thread's mask: blocked here
         * for the moment of the create, so that no signal can reach the
         * new thread before it could block it itself. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        e = pthread_create(t, &attr, fn, arg);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
        pthread_attr_destroy(&attr);
        return -e;
}
