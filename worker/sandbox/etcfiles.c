/* etcfiles: the few files of /etc the sandbox makes itself rather than
 * takes from the host: a passwd and a group naming the gadget's user, so
 * that whoami, id -un, getpwuid() and the programs that need a user name
 * (ssh-keygen, Python's getpass, a JVM's user.name) find one. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


/* Writes text into a new file dir/name, read-only for everyone. */
static int write_new(const char *dir, const char *name, const char *text)
{
        char path[256];
        size_t len = strlen(text);
        int e = 0;

        if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
                return -ENAMETOOLONG;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return -errno;
        if (write(fd, text, len) != (ssize_t)len)
                e = -EIO;
        if (close(fd) < 0 && e == 0)
                e = -errno;
        return e;
}

/* Why this is safe: nothing of the host's user database enters the
 * sandbox (its /etc/passwd and /etc/group are never mounted unless a
 * policy lists them, and then they hide these); the files name only the
 * gadget's own uid/gid and the overflow id that stands for every
 * unmapped owner. The gadget's name is checked by gadgetd (a-z, 0-9, _
 * and -), so it cannot add a field or a line; checked again here. */
int etcfiles_write(const char *etc, const char *name)
{
        char text[512];
        int e;

        if (strcspn(name, ":\n") != strlen(name))
                return -EINVAL;
        if (mkdir(etc, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(text, sizeof text,
                 "%s:x:%d:%d:gadget %s:/tmp:/usr/sbin/nologin\n"
                 "nobody:x:65534:65534:owner outside the sandbox:/nonexistent:/usr/sbin/nologin\n",
                 name, SANDBOX_INNER_ID, SANDBOX_INNER_ID, name);
        if ((e = write_new(etc, "passwd", text)) < 0)
                return e;
        snprintf(text, sizeof text, "%s:x:%d:\nnogroup:x:65534:\n", name, SANDBOX_INNER_ID);
        return write_new(etc, "group", text);
}
