/* failshim: an LD_PRELOAD library for tests, never installed. Opening for
 * writing a file whose name ends in "/" FAILSHIM_OPEN fails with EPERM,
 * so a test can make one write of gadgetd's (an id map, a cgroup limit)
 * fail where the kernel would not, with no test switch in gadgetd. */
/* open and open64 are two symbols here, each shimmed: no redirection. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool refused(const char *path, int flags)
{
        const char *want = getenv("FAILSHIM_OPEN");
        if (!want || !*want || !path || (flags & O_ACCMODE) == O_RDONLY)
                return false;
        size_t lp = strlen(path), lw = strlen(want);
        return lp > lw && path[lp - lw - 1] == '/' && strcmp(path + lp - lw, want) == 0;
}

#define SHIM_OPEN(name)                                                                   \
        int name(const char *path, int flags, ...)                                        \
        {                                                                                 \
                static int (*real)(const char *, int, ...);                               \
                va_list ap;                                                               \
                va_start(ap, flags);                                                      \
                mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;   \
                va_end(ap);                                                               \
                if (refused(path, flags)) {                                               \
                        errno = EPERM;                                                    \
                        return -1;                                                        \
                }                                                                         \
                if (!real)                                                                \
                        *(void **)&real = dlsym(RTLD_NEXT, #name);                       \
                return real(path, flags, mode);                                           \
        }

#define SHIM_OPENAT(name)                                                                      \
        int name(int dir, const char *path, int flags, ...)                                    \
        {                                                                                      \
                static int (*real)(int, const char *, int, ...);                               \
                va_list ap;                                                                    \
                va_start(ap, flags);                                                           \
                mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;        \
                va_end(ap);                                                                    \
                if (refused(path, flags)) {                                                    \
                        errno = EPERM;                                                         \
                        return -1;                                                             \
                }                                                                              \
                if (!real)                                                                     \
                        *(void **)&real = dlsym(RTLD_NEXT, #name);                            \
                return real(dir, path, flags, mode);                                           \
        }

SHIM_OPEN(open)
SHIM_OPEN(open64)
SHIM_OPENAT(openat)
SHIM_OPENAT(openat64)
