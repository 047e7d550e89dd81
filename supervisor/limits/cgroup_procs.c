/* cgroup_procs: what /proc/cgroups says of the controllers gadgetd uses
 * (cgroup.h), apart so that a unit test can give it any table. */
#include "cgroup.h"

#include <stdio.h>
#include <string.h>

bool cgroup_v2_may_serve_in(const char *text)
{
        static const char *const ours[] = { [CGROUP_MEMORY] = "memory", [CGROUP_PIDS] = "pids", [CGROUP_CPU] = "cpu" };
        unsigned not_v2 = 0;
        /* #subsys_name hierarchy num_cgroups enabled; a v1 controller's
         * hierarchy is not 0, a disabled one is in no hierarchy at all. */
        for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                char name[64];
                unsigned hier, groups, enabled;
                if (sscanf(line, "%63s %u %u %u", name, &hier, &groups, &enabled) != 4 || (hier == 0 && enabled))
                        continue;
                for (int c = CGROUP_MEMORY; c <= CGROUP_CPU; c++)
                        if (strcmp(name, ours[c]) == 0)
                                not_v2 |= 1u << c;
        }
        return not_v2 != ((1u << CGROUP_MEMORY) | (1u << CGROUP_PIDS) | (1u << CGROUP_CPU));
}
