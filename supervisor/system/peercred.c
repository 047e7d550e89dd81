/* peercred: peer credentials of a Unix socket, and opening a file with a
 * peer's rights. */
#include "peercred.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int peercred_get(int fd, struct peercred *out)
{
        struct ucred uc;
        socklen_t len = sizeof uc;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
                return -errno;
        out->pid = uc.pid;
        out->uid = uc.uid;
        out->gid = uc.gid;
        out->n_groups = 0;
        len = sizeof out->groups;
        /* More groups than fit (ERANGE): the peer is known by fewer of
         * them, which only ever grants less. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, out->groups, &len) == 0)
                out->n_groups = len / sizeof *out->groups;
        return 0;
}

bool peercred_in_group(const struct peercred *c, gid_t gid)
{
        if (c->gid == gid)
                return true;
        for (size_t i = 0; i < c->n_groups; i++)
                if (c->groups[i] == gid)
                        return true;
        return false;
}

/* Puts the thread's filesystem identity back; gadgetd cannot go on with
 * another user's rights, so it stops if that fails. */
static void restore(uid_t uid, gid_t gid, const gid_t *groups, int n)
{
        setfsuid(uid);
        setfsgid(gid);
        if ((uid_t)setfsuid((uid_t)-1) != uid || (gid_t)setfsgid((gid_t)-1) != gid ||
            syscall(SYS_setgroups, (size_t)n, groups) < 0)
                abort();
}

/* Why this is safe: setfsuid, setfsgid and the raw setgroups system call
 * change the calling thread only (glibc's setgroups() would change every
 * thread), so no other thread ever runs with the peer's identity. A
 * filesystem uid other than 0 drops CAP_DAC_OVERRIDE and the other
 * filesystem capabilities from the thread's effective set, so the kernel
 * checks the open exactly as for the user; they come back with uid 0. */
int peercred_open(const struct peercred *c, const char *path, int flags)
{
        uid_t uid = geteuid();
        gid_t gid = getegid();
        gid_t saved[PEERCRED_MAX_GROUPS];
        int n, fd, e;

        if (c->uid == uid) {
                fd = open(path, flags);
                return fd < 0 ? -errno : fd;
        }
        if ((n = getgroups(PEERCRED_MAX_GROUPS, saved)) < 0)
                return -errno;
        if (syscall(SYS_setgroups, c->n_groups, c->groups) < 0)
                return -errno;
        setfsgid(c->gid);
        setfsuid(c->uid);
        if ((uid_t)setfsuid((uid_t)-1) != c->uid || (gid_t)setfsgid((gid_t)-1) != c->gid) {
                restore(uid, gid, saved, n);
                return -EPERM;
        }
        fd = open(path, flags);
        e = errno;
        restore(uid, gid, saved, n);
        return fd < 0 ? -e : fd;
}
