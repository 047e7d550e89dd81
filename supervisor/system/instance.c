/* instance: the lock files that keep a second gadgetd from serving the
 * same state directory or socket as a running one. */
#include "instance.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

uint64_t instance_pid_byte(pid_t pid)
{
        return 1 + (uint64_t)(uint32_t)pid % INSTANCE_PID_SPAN;
}

pid_t instance_byte_pid(uint64_t off)
{
        return off >= 1 && off <= INSTANCE_PID_SPAN ? (pid_t)(off - 1) : 0;
}

static int ofd_lock(int fd, short type, uint64_t start, uint64_t len)
{
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)start, .l_len = (off_t)len };
        return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* A holder of the file, from the pid bytes it locked; 0 if none. */
static pid_t find_holder(int fd)
{
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = INSTANCE_PID_SPAN };
        if (fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type == F_UNLCK)
                return 0;
        return instance_byte_pid((uint64_t)fl.l_start);
}

/* For people reading the file: the exclusive holder's pid as text. */
static void write_pid(int fd)
{
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n)
                return; /* the lock is what counts, not the text */
}

int instance_lock(const char *path, bool shared, pid_t *holder)
{
        struct stat st;
        int e;
        *holder = 0;
        /* Why this is safe: never a symlink, never a FIFO to block on, and
         * only a regular file of our own with one link, so a file planted
         * in a directory others may write (a socket under /tmp) is neither
         * truncated nor written. */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                e = -errno;
                goto fail;
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
                e = -EPERM;
                goto fail;
        }
        if ((e = ofd_lock(fd, shared ? F_RDLCK : F_WRLCK, 0, 1)) < 0) {
                if (e == -EAGAIN || e == -EACCES) {
                        *holder = find_holder(fd);
                        e = -EBUSY;
                }
                goto fail;
        }
        /* Best effort: a pid of another pid namespace may hold the byte. */
        (void)ofd_lock(fd, F_WRLCK, instance_pid_byte(getpid()), 1);
        if (!shared)
                write_pid(fd);
        return fd;
fail:
        close(fd);
        return e;
}

static void refused(const char *what, const char *subject, const char *lock, int e, pid_t holder)
{
        if (e == -EBUSY && holder > 0)
                log_msg(L_ERR, NULL, "%s %s is in use by another gadgetd (pid %d): not starting", what, subject,
                        (int)holder);
        else if (e == -EBUSY)
                log_msg(L_ERR, NULL, "%s %s is in use by another gadgetd (its pid is not visible from here): "
                        "not starting", what, subject);
        else if (e == -EPERM)
                log_msg(L_ERR, NULL, "%s %s: lock file %s is not a regular file of gadgetd's own user with "
                        "one link: not starting", what, subject, lock);
        else
                log_msg(L_ERR, NULL, "%s %s: lock file %s: %s", what, subject, lock, strerror(-e));
}

int instance_take(const char *what, const char *subject, const char *path, bool shared)
{
        pid_t holder;
        int fd = instance_lock(path, shared, &holder);
        if (fd < 0)
                refused(what, subject, path, fd, holder);
        return fd;
}

int instance_lock_state(const char *state_dir, bool shared)
{
        char path[4096];
        if (mkdir(state_dir, 0700) < 0 && errno != EEXIST) {
                int e = -errno;
                log_msg(L_ERR, NULL, "state directory %s: %s", state_dir, strerror(-e));
                return e;
        }
        if (snprintf(path, sizeof path, "%s/gadgetd.lock", state_dir) >= (int)sizeof path)
                return -ENAMETOOLONG;
        return instance_take("state directory", state_dir, path, shared);
}
