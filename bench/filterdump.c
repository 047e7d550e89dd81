/* filterdump: writes gadgetd's two compiled seccomp programs (the very
 * ones gadgetd installs, filter_compiled) as raw BPF, for bwrap --add-seccomp-fd:
 * DIR/list.bpf (the allowlist) and DIR/args.bpf (argument checks), which
 * the kernel applies in that order, as in a gadget's sandbox. */
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
        int e = dump(argv[1], "list.bpf", &f.list);
        if (e >= 0)
                e = dump(argv[1], "args.bpf", &f.args);
        if (e < 0)
                fprintf(stderr, "filterdump: %s\n", strerror(-e));
        else
                printf("list %u args %u instructions\n", f.list.len, f.args.len);
        return e < 0;
}
