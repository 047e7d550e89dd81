/* filter_gen: runs at build time. Compiles the seccomp programs with
 * libseccomp (filter.c) and writes them as C source (filter_bpf.c), with
 * the names of this architecture's system calls, so
 * gadgetd carries them ready-made: it compiles nothing at run time and
 * needs no libseccomp, and every worker installs exactly these programs.
 *
 *   filter_gen OUTPUT.c */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
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
                   "#include \"filter.h\"\n\n#include <stddef.h>\n\n");
        emit(f, "program", &g.program);
        emit(f, "direct", &g.direct);
        emit(f, "init", &g.init);
        emit(f, "learn", &g.learn);
        fprintf(f, "void filter_compiled(struct gadget_filter *f)\n{\n"
                   "        f->program = (struct sock_fprog){ .len = %u, .filter = program };\n"
                   "        f->direct = (struct sock_fprog){ .len = %u, .filter = direct };\n"
                   "        f->init = (struct sock_fprog){ .len = %u, .filter = init };\n"
                   "        f->learn = (struct sock_fprog){ .len = %u, .filter = learn };\n}\n\n",
                g.program.len, g.direct.len, g.init.len, g.learn.len);
        /* The names libseccomp knows for this architecture, by number. */
        int top = -1;
        for (int nr = 0; nr < FILTER_CALLS_MAX; nr++) {
                char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
                if (name)
                        top = nr;
                free(name);
        }
        fprintf(f, "static const char *const names[%d] = {\n", top + 1);
        for (int nr = 0; nr <= top; nr++) {
                char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
                if (name)
                        fprintf(f, "        [%d] = \"%s\",\n", nr, name);
                free(name);
        }
        fprintf(f, "};\n\nconst char *filter_call_name(int nr)\n{\n"
                   "        return nr >= 0 && nr < %d ? names[nr] : NULL;\n}\n", top + 1);
        filter_free(&g);
        if (fclose(f) != 0) {
                fprintf(stderr, "filter_gen: %s: %s\n", argv[1], strerror(errno));
                return 1;
        }
        return 0;
}
