/* filter_install: the worker's side of the seccomp filters — it installs
 * the programs gadgetd compiled (filter.c), in gadgetd-sandbox. */
#include "filter.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

/* Installs p in this process; no_new_privs must be set. The kernel applies
 * every filter installed to every call and keeps the strictest verdict, so
 * none can loosen another. Why the listener is asked for here and nowhere
 * else: the kernel allows one listener in a process's filters, and it
 * must be the sandbox init's, never the program's. */
int filter_install(const struct sock_fprog *p, bool listen)
{
        long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, listen ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, p);
        return r < 0 ? -errno : (int)r;
}
