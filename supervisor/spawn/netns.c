/* netns: the one network namespace that the gadgets whose policy says
 * NetworkNamespace=shared share. gadgetd makes it at the first such start
 * and keeps it for its life: empty, lo down, owned by the host's user
 * namespace (docs/security.md, "The sandbox", point 4).
 *
 * A sandbox is cloned into it: gadgetd's loop thread moves into it for
 * the clone alone and back at once (spawn_helper_start), so the child is
 * born there and never needs a right over it. Why this is safe: only the
 * calling thread moves (network namespaces are per thread), gadgetd's
 * other threads and its sockets keep theirs (a socket belongs to the
 * namespace it was created in), and nothing runs on this thread between
 * the two moves but the clone, whose parent waits for the child's exec
 * (CLONE_VFORK); a move back that fails ends gadgetd rather than let it
 * go on in the empty namespace. */
#include "spawn_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "system/log.h"

static int host_fd = -1;   /* gadgetd's own network namespace */
static int shared_fd = -1; /* the shared one, once made */

int spawn_netns_enter_shared(char *err, size_t errlen)
{
        if (host_fd < 0 && (host_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
                int e = -errno;
                snprintf(err, errlen, "shared network namespace: %s", strerror(-e));
                return e;
        }
        if (shared_fd >= 0) {
                if (setns(shared_fd, CLONE_NEWNET) < 0) {
                        int e = -errno;
                        snprintf(err, errlen, "shared network namespace: %s", strerror(-e));
                        return e;
                }
                return 0;
        }
        if (unshare(CLONE_NEWNET) < 0) {
                int e = -errno;
                snprintf(err, errlen, "shared network namespace: %s", strerror(-e));
                return e;
        }
        if ((shared_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
                int e = -errno;
                snprintf(err, errlen, "shared network namespace: %s", strerror(-e));
                spawn_netns_leave();
                return e;
        }
        return 0;
}

void spawn_netns_leave(void)
{
        if (setns(host_fd, CLONE_NEWNET) < 0) {
                log_msg(L_ERR, NULL, "cannot return to gadgetd's network namespace: %s", strerror(errno));
                abort();
        }
}
