/* uidpool: one open-file-description lock per byte of a lock file, so a
 * uid is held exactly as long as its holder lives (the kernel drops the
 * locks when gadgetd exits, however it exits). */
#include "uidpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int uidpool_open(struct uidpool *pool, const char *run_dir, uid_t base, unsigned count)
{
        char path[4096];
        if (base == 0 || count == 0 || (uint64_t)base + count > 0xfffffffeu)
                return -EINVAL; /* host uid 0 is never handed out */
        if (mkdir(run_dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        snprintf(path, sizeof path, "%s/uids.lock", run_dir);
        unsigned char *taken = calloc((count + 7) / 8, 1);
        if (!taken)
                return -ENOMEM;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                free(taken);
                return -errno;
        }
        *pool = (struct uidpool){ .lock_fd = fd, .base = base, .count = count, .taken = taken };
        return 0;
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

static int lock_byte(int fd, unsigned i, short type)
{
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)i, .l_len = 1 };
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
                int e = lock_byte(pool->lock_fd, i, F_WRLCK);
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
        lock_byte(pool->lock_fd, i, F_UNLCK);
}
