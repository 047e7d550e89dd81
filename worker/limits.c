/* limits: per-process resource limits set before the gadget starts. */
#include "sandbox.h"

#include <errno.h>
#include <sys/resource.h>

#include "policy.h"

static int set_limit(int resource, rlim_t value)
{
        struct rlimit rl = { .rlim_cur = value, .rlim_max = value };
        if (setrlimit(resource, &rl) < 0)
                return -errno;
        return 0;
}

/* Core dumps off and the open-files limit from LimitNOFILE. Soft and hard
 * limits are equal, and the gadget lacks CAP_SYS_RESOURCE to raise them. */
int limits_apply(const struct policy *p, const char **step)
{
        int e;

        *step = "limit core dumps";
        if ((e = set_limit(RLIMIT_CORE, 0)) < 0)
                return e;
        *step = "limit open files";
        if ((e = set_limit(RLIMIT_NOFILE, (rlim_t)p->limit_nofile)) < 0)
                return e;
        return 0;
}
