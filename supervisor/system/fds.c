/* fds: close-on-exec for every fd gadgetd holds. */
#include "fds.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>

void fds_cloexec_all(void)
{
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
