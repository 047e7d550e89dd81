/* filter_gen: runs at build time. Compiles the two seccomp programs with
 * libseccomp (filter.c) and writes them as C source (filter_bpf.c), so
 * gadgetd carries them ready-made: it compiles nothing at run time and
 * needs no libseccomp, and every worker installs exactly these programs.
 *
 *   filter_gen OUTPUT.c */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "filter.h"

static void emit(FILE *f, const char *name, const struct sock_fprog *p)
{
        fprintf(f, "static struct sock_filter %s[%u] = {\n", name, p->len);
        for (unsigned i = 0; i < p->len; i++) {
                const struct sock_filter *k = &p->filter[i];
                fprintf(f, "        { 0x%04x, %3u, %3u, 0x%08x },\n", k->code, k->jt, k->jf, k->k);
        }
        fprintf(f, "};\n\n");
}

int main(int argc, char **argv)
{
        struct gadget_filter g;
        if (argc != 2) {
                fprintf(stderr, "usage: filter_gen OUTPUT.c\n");
                return 2;
        }
        int e = filter_build(&g);
        if (e < 0) {
                fprintf(stderr, "filter_gen: %s\n", strerror(-e));
                return 1;
        }
        FILE *f = fopen(argv[1], "we");
        if (!f) {
                fprintf(stderr, "filter_gen: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        fprintf(f, "/* Generated at build time by worker/filter/filter_gen.c from worker/filter/filter.c:\n"
                   " * the seccomp programs of every gadget, compiled by libseccomp. */\n"
                   "#include \"filter.h\"\n\n");
        emit(f, "list", &g.list);
        emit(f, "args", &g.args);
        emit(f, "init", &g.init);
        fprintf(f, "void filter_compiled(struct gadget_filter *f)\n{\n"
                   "        f->list = (struct sock_fprog){ .len = %u, .filter = list };\n"
                   "        f->args = (struct sock_fprog){ .len = %u, .filter = args };\n"
                   "        f->init = (struct sock_fprog){ .len = %u, .filter = init };\n}\n",
                g.list.len, g.args.len, g.init.len);
        filter_free(&g);
        if (fclose(f) != 0) {
                fprintf(stderr, "filter_gen: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        return 0;
}
