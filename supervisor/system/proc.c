/* proc: what /proc says of a process (proc.h). */
#include "proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool proc_is_child(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        /* PID (COMM) STATE PPID ...: COMM may hold anything, so after its last ')' */
        char *p = strrchr(buf, ')');
        long ppid;
        return p && sscanf(p + 1, " %*c %ld", &ppid) == 1 && ppid == (long)getpid();
}
