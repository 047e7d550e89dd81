/* fds: close-on-exec for every fd gadgetd holds. */
#include "fds.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>

void fds_cloexec_all(void)
{
        /* One system call where the kernel has it (5.11 on); the scan of
         * /proc/self/fd below (an open, two reads, a fcntl or two per fd,
         * a close: 16 in a gadgetd run) only where it has not. */
        if (syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) == 0)
                return;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                int fd = atoi(de->d_name);
                if (fd > 2 && fd != dirfd(d)) {
                        int fl = fcntl(fd, F_GETFD);
                        if (fl >= 0 && !(fl & FD_CLOEXEC))
                                fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
                }
        }
        if (d)
                closedir(d);
}
