/* uidpool: one open-file-description lock per byte of one host-wide lock
 * file, so a uid is held exactly as long as its holder lives (the kernel
 * drops the locks when gadgetd exits, however it exits), and no two
 * gadgetd processes of the host hand out the same uid. */
#include "uidpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int uidpool_check_range(uid_t base, unsigned long long count)
{
        /* Host uid 0 is never handed out, nor the overflow uid 65534's
         * 32-bit cousins at the top. */
        if (base == 0 || count == 0 || count > UIDPOOL_MAX_COUNT || (uint64_t)base + count > 0xfffffffeu)
                return -EINVAL;
        return 0;
}

/* The pool on lock file fd (taken over, closed on failure). */
static int open_on(struct uidpool *pool, int fd, uid_t base, unsigned count)
{
        struct stat st;
        unsigned char *taken = NULL;
        int e = 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                e = -errno;
        /* Why this is safe: only a regular file of gadgetd's own user with
         * no other link: one a user planted could be locked by that user
         * to take the pool. */
        else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 || (st.st_mode & 022))
                e = -EPERM;
        else if (!(taken = calloc((count + 7) / 8, 1)))
                e = -ENOMEM;
        if (e < 0) {
                if (fd >= 0)
                        close(fd);
                return e;
        }
        *pool = (struct uidpool){ .lock_fd = fd, .base = base, .count = count, .taken = taken };
        return 0;
}

int uidpool_open(struct uidpool *pool, const char *lock_path, uid_t base, unsigned count)
{
        int e;
        if ((e = uidpool_check_range(base, count)) < 0)
                return e;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", lock_path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        return -errno;
        }
        /* Never a symlink (open_on checks the rest). */
        return open_on(pool, open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600), base,
                       count);
}

int uidpool_open_kept(struct uidpool *pool, int fd, uid_t base, unsigned count)
{
        int e = uidpool_check_range(base, count);
        if (e < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
                close(fd);
                return e < 0 ? e : -EBADF;
        }
        return open_on(pool, fd, base, count);
}

void uidpool_close(struct uidpool *pool)
{
        if (pool && pool->lock_fd >= 0) {
                close(pool->lock_fd);
                pool->lock_fd = -1;
        }
        if (pool) {
                free(pool->taken);
                pool->taken = NULL;
        }
}

/* Byte uid of the lock file: the same byte for the same uid in every
 * gadgetd, whatever its range. */
static int lock_byte(int fd, uid_t uid, short type)
{
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)uid, .l_len = 1 };
        return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

int uidpool_take(struct uidpool *pool, const char *name, uid_t *uid)
{
        uint32_t h = 2166136261u; /* FNV-1a of the name */
        for (const char *s = name; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        for (unsigned k = 0; k < pool->count; k++) {
                unsigned i = (h + k) % pool->count;
                if (pool->taken[i / 8] & (1u << (i % 8)))
                        continue;
                int e = lock_byte(pool->lock_fd, pool->base + i, F_WRLCK);
                if (e == 0) {
                        pool->taken[i / 8] |= (unsigned char)(1u << (i % 8));
                        *uid = pool->base + i;
                        return 0;
                }
                if (e != -EAGAIN && e != -EACCES)
                        return e;
        }
        return -EUSERS;
}

void uidpool_release(struct uidpool *pool, uid_t uid)
{
        if (uid < pool->base || uid - pool->base >= pool->count)
                return;
        unsigned i = uid - pool->base;
        pool->taken[i / 8] &= (unsigned char)~(1u << (i % 8));
        lock_byte(pool->lock_fd, uid, F_UNLCK);
}

int uidpool_adopt(struct uidpool *pool, uid_t uid)
{
        if (uid < pool->base || uid - pool->base >= pool->count)
                return -ERANGE;
        unsigned i = uid - pool->base;
        if (pool->taken[i / 8] & (1u << (i % 8)))
                return -EBUSY;
        int e = lock_byte(pool->lock_fd, uid, F_WRLCK);
        if (e < 0)
                return e == -EAGAIN || e == -EACCES ? -EBUSY : e;
        pool->taken[i / 8] |= (unsigned char)(1u << (i % 8));
        return 0;
}

int uidpool_lock_fd(const struct uidpool *pool)
{
        return pool->lock_fd;
}
