/* proc: what /proc says of a process (proc.h). */
#include "proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

/* pid's innermost pid (the last of its status's NSpid: line), 0 if unknown. */
static long proc_inner_pid(long pid)
{
        char path[64], buf[2048];
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        /* Why this is safe to read: the kernel writes the lines; only Name:
         * comes from the process, and it ends at its newline. */
        char *line = strstr(buf, "\nNSpid:");
        if (!line)
                return 0;
        char *end = strchr(line + 1, '\n'), *last = NULL;
        if (end)
                *end = '\0';
        for (char *t = strtok(line + 7, " \t"); t; t = strtok(NULL, " \t"))
                last = t;
        return last ? strtol(last, NULL, 10) : 0;
}

pid_t proc_child_inner(pid_t parent, pid_t inner)
{
        char path[80], buf[512];
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        int tries = 0;
        for (char *t = strtok(buf, " \n"); t && tries < PROC_CHILDREN_TRIED; t = strtok(NULL, " \n"), tries++) {
                long pid = strtol(t, NULL, 10);
                if (pid > 0 && proc_inner_pid(pid) == (long)inner)
                        return (pid_t)pid;
        }
        return 0;
}
