/* filterdump: writes gadgetd's compiled seccomp programs (the very ones
 * gadgetd installs, filter_compiled) as raw BPF, for bwrap --add-seccomp-fd:
 * DIR/init.bpf (the sandbox init's) and DIR/direct.bpf (the program's,
 * with its errnos in it: bwrap has no listener), which the kernel applies
 * in that order, as in a gadget's sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "filter.h"

static int dump(const char *dir, const char *name, const struct sock_fprog *p)
{
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t len = p->len * sizeof *p->filter;
        ssize_t w = write(fd, p->filter, len);
        int e = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
        close(fd);
        return e;
}

int main(int argc, char **argv)
{
        struct gadget_filter f;
        if (argc != 2) {
                fprintf(stderr, "usage: filterdump DIR\n");
                return 2;
        }
        filter_compiled(&f);
        int e = dump(argv[1], "init.bpf", &f.init);
        if (e >= 0)
                e = dump(argv[1], "direct.bpf", &f.direct);
        if (e < 0)
                fprintf(stderr, "filterdump: %s\n", strerror(-e));
        else
                printf("init %u direct %u instructions\n", f.init.len, f.direct.len);
        return e < 0;
}
