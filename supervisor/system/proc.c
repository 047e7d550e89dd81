/* proc: what /proc says of a process (proc.h). */
#include "proc.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The start of a file of /proc (at most len - 1 bytes, one read), as a
 * string in buf; false if it cannot be opened. */
static bool read_start(const char *path, char *buf, size_t len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, len - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return true;
}

bool proc_is_child(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        if (!read_start(path, buf, sizeof buf))
                return false;
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
        if (!read_start(path, buf, sizeof buf))
                return 0;
        /* Why this is safe to read: the kernel writes the lines; only Name:
         * comes from the process, its newlines escaped. */
        char *line = strstr(buf, "\nNSpid:");
        if (!line)
                return 0;
        char *end = strchr(line + 1, '\n'), *last = NULL;
        if (end)
                *end = '\0';
        char *save;
        for (char *t = strtok_r(line + 7, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
                last = t;
        return last ? strtol(last, NULL, 10) : 0;
}

pid_t proc_child_inner(pid_t parent, pid_t inner)
{
        char path[80], buf[512];
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
        if (!read_start(path, buf, sizeof buf))
                return 0;
        int tries = 0;
        char *save;
        for (char *t = strtok_r(buf, " \n", &save); t && tries < PROC_CHILDREN_TRIED;
             t = strtok_r(NULL, " \n", &save), tries++) {
                long pid = strtol(t, NULL, 10);
                if (pid > 0 && proc_inner_pid(pid) == (long)inner)
                        return (pid_t)pid;
        }
        return 0;
}
