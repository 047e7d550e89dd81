/* priority: gadgetd's event loop ahead of its gadgets on a busy CPU. */
#include "priority.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr's first version (<linux/sched/types.h>; glibc 2.36
 * has no sched_setattr). */
struct attr_v0 {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
};
#define RESET_ON_FORK 0x01 /* SCHED_FLAG_RESET_ON_FORK */

static int set(int nice)
{
        struct attr_v0 a = { .size = sizeof a, .policy = 0 /* SCHED_OTHER */, .flags = RESET_ON_FORK, .nice = nice };
        return syscall(SYS_sched_setattr, 0, &a, 0) < 0 ? -errno : 0;
}

int priority_loop(char *why, unsigned why_len)
{
        errno = 0;
        /* PRIO_PROCESS with 0 is the calling thread on Linux. */
        int now = getpriority(PRIO_PROCESS, 0);
        if (now == -1 && errno)
                return -errno;
        why[0] = 0;
        if (now > 0) {
                /* Someone ran gadgetd below the default on purpose; its
                 * gadgets inherit the same (the flag resets only a nice
                 * below 0), as they would without this. */
                snprintf(why, why_len, "nice %d kept: gadgetd was started at it", now);
                return 0;
        }
        int e;
        if (now == 0 && (e = set(PRIORITY_LOOP_NICE)) < 0)
                snprintf(why, why_len, "nice 0 kept: %s (the unit's Nice= sets it)", strerror(-e));
        /* Below 0 already (the unit's Nice=): kept, and not passed on.
         * Raising nothing, this needs no privilege. */
        return now < 0 ? set(now) : 0;
}
