/* secret_file: the one reader of files whose content only gadgetd may
 * see. */
#include "secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"

/* Whether st's mode and owner keep rule. */
static bool mode_kept(const struct stat *st, enum secret_rule rule)
{
        switch (rule) {
        case SECRET_NOT_WORLD:
                return !(st->st_mode & (S_IROTH | S_IWOTH));
        case SECRET_PRIVATE: {
                bool root = st->st_uid == 0 && st->st_gid == 0;
                return !(st->st_mode & (root ? (S_IWGRP | S_IXGRP | S_IRWXO) : (S_IRWXG | S_IRWXO)));
        }
        case SECRET_ANY_MODE:
                break;
        }
        return true;
}

/* Why this is safe: gadgetd alone reads the file (the policy names it; it
 * is never mounted into a sandbox), it is found as a listed path is
 * (paths.h: no symlink in a directory others may write, none swapped in
 * since), opened without blocking and taken only if it is a regular file
 * whose mode (of the open file: no window between a check and the open)
 * keeps the caller's rule;
 * neither its contents nor a part of them ever goes into a message or
 * log. A regular file of bounded size is read at once. */
int secret_file_read(const char *path, uint64_t max, enum secret_rule rule, struct stat *stp, char **out,
                     size_t *len)
{
        struct stat st;
        char *buf = NULL;
        ssize_t n = 0;
        int e = 0;
        int fd = paths_open_trusted(path, O_RDONLY);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0) {
                e = -errno;
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                e = -EINVAL;
                goto out;
        }
        if (!mode_kept(&st, rule)) {
                if (stp)
                        *stp = st;
                e = -EPERM;
                goto out;
        }
        if ((uint64_t)st.st_size > max) {
                e = -EFBIG;
                goto out;
        }
        if (!(buf = malloc(max + 1))) {
                e = -ENOMEM;
                goto out;
        }
        /* One read past max tells a file that grew since the fstat. */
        do
                n = read(fd, buf, max + 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                e = -errno;
        else if ((uint64_t)n > max)
                e = -EFBIG;
out:
        close(fd);
        if (e < 0) {
                if (buf)
                        explicit_bzero(buf, max + 1);
                free(buf);
                return e;
        }
        /* One trailing newline (as editors write) is not part of it. */
        if (n > 0 && buf[n - 1] == '\n')
                n--;
        buf[n] = '\0';
        *out = buf;
        *len = (size_t)n;
        return 0;
}

void secret_file_free(char *s, size_t len)
{
        if (!s)
                return;
        explicit_bzero(s, len);
        free(s);
}

const char *secret_file_why(int e)
{
        switch (e) {
        case -ELOOP:
                return "a symlink in a directory others may write, or one swapped in";
        case -EINVAL:
                return "not a regular file";
        case -EPERM:
                return "others may read or change it";
        default:
                return strerror(-e);
        }
}
