/* sandbox_gcov: linked into gadgetd-sandbox in coverage builds only
 * (-Db_coverage=true), so that the sandbox side's line counts reach the
 * build tree. Without it they are lost: gadgetd-sandbox ends with _exit(),
 * which writes no .gcda file, and once its root is swapped the build tree
 * is not in its file system.
 *
 * At start, while the host's file system is still its root, it keeps a
 * directory fd of the build tree (close-on-exec, far above the fds the
 * sandbox places, and closed in the gadget's process before its exec) and
 * points libgcov there (GCOV_PREFIX=/proc/self/fd/N; at _exit, the fd as
 * the working directory). Every _exit() of
 * gadgetd-sandbox writes the counts first (-Wl,--wrap=_exit); the dump
 * that libgcov makes before an exec is skipped (-Wl,--wrap=__gcov_execve),
 * because the gadget's process no longer holds the fd. The .gcda files
 * must be writable by the gadgets' uids (scripts/test opens them up).
 * A measuring aid only: never part of a build that is installed, nor of
 * build/ (scripts/test measures in build-cov/). Why the gadget cannot use
 * the fd: its process closes it before the exec, and it cannot reach
 * PID 1's (PID 1 is not dumpable, and ptrace is refused by seccomp). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SANDBOX_GCOV_FD 1000

void __gcov_dump(void);
void __real__exit(int status) __attribute__((noreturn));
void __wrap__exit(int status) __attribute__((noreturn));
int __wrap___gcov_execve(const char *path, char *const argv[], char *const envp[]);

__attribute__((constructor)) static void sandbox_gcov_init(void)
{
        char prefix[64], strip[16];
        int n = 0;
        int fd = open(GCOV_BUILD_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return;
        if (fd != SANDBOX_GCOV_FD) {
                if (dup3(fd, SANDBOX_GCOV_FD, O_CLOEXEC) < 0)
                        return;
                close(fd);
        }
        for (const char *p = GCOV_BUILD_ROOT; *p; p++)
                n += *p == '/';
        snprintf(prefix, sizeof prefix, "/proc/self/fd/%d", SANDBOX_GCOV_FD);
        snprintf(strip, sizeof strip, "%d", n);
        setenv("GCOV_PREFIX", prefix, 1);
        setenv("GCOV_PREFIX_STRIP", strip, 1);
}

void __wrap__exit(int status)
{
        /* The counts go under the build tree's fd as the working directory:
         * /proc/self/fd/N does not resolve in a process that joined the
         * gadget's namespaces from outside (gadgetctl exec's probe: it has
         * no pid in the gadget's /proc), a directory fd does. */
        if (fcntl(SANDBOX_GCOV_FD, F_GETFD) >= 0 && fchdir(SANDBOX_GCOV_FD) == 0) {
                setenv("GCOV_PREFIX", ".", 1);
                __gcov_dump();
        }
        __real__exit(status);
}

/* The exec itself, as a plain system call: a call of execve() here would
 * be turned into __gcov_execve() again by the coverage build. */
int __wrap___gcov_execve(const char *path, char *const argv[], char *const envp[])
{
        return (int)syscall(SYS_execve, path, argv, envp);
}
