/* secret_file: the one reader of files whose content only gadgetd may
 * see. */
#include "secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "system/paths.h"

/* Why this is safe: gadgetd alone reads the file (the policy names it; it
 * is never mounted into a sandbox), it is found as a listed path is
 * (paths.h: no symlink in a directory others may write, none swapped in
 * since), opened without blocking and taken only if it is a regular file;
 * neither its contents nor a part of them ever goes into a message or
 * log. A regular file of bounded size is read at once. */
int secret_file_read(const char *path, uint64_t max, char **out, size_t *len)
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
        default:
                return strerror(-e);
        }
}
