/* Unit tests of supervisor/system/thread.c: a thread it starts has every
 * signal blocked from its first instruction (the loop's thread keeps them:
 * a process-directed SIGTERM must never land on a store's thread), gets
 * the stack it was given, and is joinable or detached as asked. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "system/thread.h"
#include "tap.h"

struct seen {
        sigset_t mask;
        size_t stack;
        int detached;
        atomic_int done;
};

static void *look(void *arg)
{
        struct seen *s = arg;
        pthread_attr_t attr;
        pthread_sigmask(SIG_BLOCK, NULL, &s->mask);
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
                pthread_attr_getstacksize(&attr, &s->stack);
                pthread_attr_getdetachstate(&attr, &s->detached);
                pthread_attr_destroy(&attr);
        }
        atomic_store(&s->done, 1);
        return s;
}

int main(void)
{
        /* The creating thread's own mask is left as it was. */
        sigset_t none, after;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, NULL);

        struct seen s;
        memset(&s, 0, sizeof s);
        pthread_t t;
        CHECK(thread_start(&t, look, &s, 0, false) == 0, "a joinable thread started");
        void *ret = NULL;
        CHECK(pthread_join(t, &ret) == 0 && ret == &s, "and joined");
        int blocked = 1;
        /* The standard signals and the real-time ones (the C library keeps
         * the two between for itself: sigfillset leaves them out). */
        for (int sig = 1; sig <= SIGRTMAX; sig++)
                if (sig != SIGKILL && sig != SIGSTOP && (sig < 32 || sig >= SIGRTMIN) && !sigismember(&s.mask, sig)) {
                        printf("# signal %d (%s) not blocked in the thread\n", sig, strsignal(sig));
                        blocked = 0;
                }
        CHECK(blocked, "every signal blocked in the thread from its start");
        CHECK(s.detached == PTHREAD_CREATE_JOINABLE, "joinable as asked");
        pthread_sigmask(SIG_BLOCK, NULL, &after);
        CHECK(!sigismember(&after, SIGTERM) && !sigismember(&after, SIGINT), "the caller's mask left as it was");

        struct seen d;
        memset(&d, 0, sizeof d);
        CHECK(thread_start(&t, look, &d, 256 * 1024, true) == 0, "a detached thread with its own stack started");
        while (!atomic_load(&d.done))
                sched_yield();
        CHECK(d.detached == PTHREAD_CREATE_DETACHED, "detached as asked");
        CHECK(d.stack >= 256 * 1024 && d.stack < 512 * 1024, "its stack as given: %zu", d.stack);
        CHECK(sigismember(&d.mask, SIGTERM) && sigismember(&d.mask, SIGCHLD), "its signals blocked too");
        return tap_done();
}
