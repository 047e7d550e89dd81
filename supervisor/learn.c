/* learn: the policy a learning run writes (gadgetd run --learn FILE
 * POLICY): the policy it ran with, every key as in effect (policy_format),
 * and for what the program tried and could not do, the key that would let
 * it, or a comment saying why no key can. Each line it adds or changes has
 * a comment above it saying why. What it never does: widen the seccomp
 * filter (no key can; a refused call gets a comment only), list a path
 * others may not read on this host, or a directory directly under the
 * root (/etc, /home ...): what the program looked for is its own word,
 * and the operator reads the result before using it. */
#include "learn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/denials.h"
#include "policy.h"
#include "spawn/spawn.h"

/* What SystemLibraries=yes shows (worker/sandbox/mounts.c). */
static const char *const system_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                                           "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime",
                                           "/etc/locale.alias" };
/* The sandbox's own trees: nothing of the host's goes there. */
static const char *const own_dirs[] = { "/proc", "/sys", "/dev", "/tmp", "/run" };

static bool under(const char *path, const char *const *dirs, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(dirs[i]);
                if (strncmp(path, dirs[i], len) == 0 && (path[len] == '\0' || path[len] == '/'))
                        return true;
        }
        return false;
}

/* Others may read it (a directory: and search it), and search every
 * directory on the way to it. */
static bool public_path(const char *path)
{
        char p[4096];
        struct stat st;
        snprintf(p, sizeof p, "%s", path);
        if (stat(p, &st) < 0 || !(st.st_mode & S_IROTH) || (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH)))
                return false;
        for (char *s = strrchr(p, '/'); s && s != p; s = strrchr(p, '/')) {
                *s = '\0';
                if (stat(p, &st) < 0 || !(st.st_mode & S_IXOTH))
                        return false;
        }
        return true;
}

/* path's directory into dir if it is two levels deep at least
 * ("/etc/java-17-openjdk"); false for the root and what is under it. */
static bool parent_dir(const char *path, char *dir, size_t len)
{
        const char *s = strrchr(path, '/');
        if (!s || s == path)
                return false;
        snprintf(dir, len, "%.*s", (int)(s - path), path);
        return strchr(dir + 1, '/') != NULL;
}

struct line {
        char *key;                   /* "ReadOnlyPaths=/etc/x", or NULL for a comment alone */
        char *why;
};

struct plan {
        char system_why[1200];       /* SystemLibraries=yes wanted: the first path that wants it ("" none) */
        size_t n_system;             /* how many */
        struct line *lines;
        size_t n;
};

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
        char *s = NULL;
        va_list ap;
        va_start(ap, f);
        if (vasprintf(&s, f, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

static int add(struct plan *pl, char *key, char *why)
{
        struct line *v = why ? realloc(pl->lines, (pl->n + 1) * sizeof *v) : NULL;
        if (!v) {
                free(key);
                free(why);
                return -ENOMEM;
        }
        pl->lines = v;
        v[pl->n++] = (struct line){ key, why };
        return 0;
}

static bool listed(const struct policy *p, const struct plan *pl, const char *key)
{
        for (size_t i = 0; i < p->n_ro_paths; i++)
                if (strcmp(key + strlen("ReadOnlyPaths="), p->ro_paths[i]) == 0)
                        return true;
        for (size_t i = 0; i < pl->n; i++)
                if (pl->lines[i].key && strcmp(pl->lines[i].key, key) == 0)
                        return true;
        return false;
}

/* What one path the program could not find asks for. */
static int classify(const struct policy *p, const struct learned *l, size_t i, struct plan *pl)
{
        const struct spawn_learned *x = &l->v[i];
        const char *call = denials_call_name(x->nr);
        char how[1200], dir[4096], other[4096];
        if (x->interpreter_of[0])
                snprintf(how, sizeof how, "%s, the interpreter of %s", x->path, x->interpreter_of);
        else
                snprintf(how, sizeof how, "%s (%s)", x->path, call ? call : "a lookup");
        if (under(x->path, own_dirs, sizeof own_dirs / sizeof *own_dirs))
                return add(pl, NULL, fmt("it looked for %s, in a tree the sandbox has of its own: no key adds a "
                                         "host file there", how));
        if (under(x->path, system_dirs, sizeof system_dirs / sizeof *system_dirs)) {
                if (!pl->system_why[0])
                        snprintf(pl->system_why, sizeof pl->system_why, "%s", how);
                pl->n_system++;
                return 0;
        }
        struct stat st;
        if (stat(x->path, &st) < 0)
                return add(pl, NULL, fmt("it looked for %s, which this host has not either (it may have gone on "
                                         "without it)", how));
        /* A directory on the way to another path it looked for: there
         * once that one is. */
        size_t len = strlen(x->path);
        for (size_t j = 0; j < l->n; j++)
                if (strncmp(l->v[j].path, x->path, len) == 0 && l->v[j].path[len] == '/')
                        return 0;
        if (!strchr(x->path + 1, '/'))
                return add(pl, NULL, fmt("it looked for %s, a directory of the host's root: list what in it the "
                                         "gadget needs", how));
        if (!public_path(x->path))
                return add(pl, NULL, fmt("it looked for %s: left out, others may not read it on this host (list "
                                         "it in ReadOnlyPaths= if the gadget must read it)", how));
        /* Two or more under one public directory (two levels deep at
         * least): the directory. */
        size_t siblings = 0;
        bool grouped = parent_dir(x->path, dir, sizeof dir) && public_path(dir);
        for (size_t j = 0; grouped && j < l->n; j++)
                siblings += parent_dir(l->v[j].path, other, sizeof other) && strcmp(other, dir) == 0;
        grouped &= siblings >= 2;
        char *key = fmt("ReadOnlyPaths=%s", grouped ? dir : x->path);
        if (!key)
                return -ENOMEM;
        if (listed(p, pl, key)) {
                free(key);
                return 0;
        }
        return add(pl, key, grouped ? fmt("it looked for %zu paths in %s, the first %s", siblings, dir, how)
                                    : fmt("it looked for %s, a path of this host", how));
}

/* Why a refused call stays refused, in a word for the operator. */
static char *refusal(const struct denial *d)
{
        const char *call = denial_call(d), *answer = denial_answer(d);
        unsigned long long n = (unsigned long long)d->count;
        if (d->error == 0)
                return fmt("refused: %s, %llu time%s: the program was killed (build it for x86-64)", call, n,
                           n == 1 ? "" : "s");
        if (strcmp(call, "socket") == 0 || strcmp(call, "socketpair") == 0)
                return fmt("refused: %s (%s), %llu time%s: a gadget has no socket; it reaches HTTP through an "
                           "http binding and other gadgets through gadget bindings ([Binding NAME] Type=)",
                           call, answer, n, n == 1 ? "" : "s");
        if (d->error == ENOSYS)
                return fmt("refused: %s (ENOSYS), %llu time%s: a call the filter does not know, answered as an "
                           "older kernel would (a libc falls back)", call, n, n == 1 ? "" : "s");
        return fmt("refused: %s (%s), %llu time%s%s%s: the filter refuses it to every gadget, no key changes that",
                   call, answer, n, n == 1 ? "" : "s", d->path[0] ? ", " : "", d->path);
}

/* Writes s's text with the plan: SystemLibraries= and the new
 * ReadOnlyPaths= after the old line, the comments before the first
 * [Binding]. */
static void write_policy(FILE *f, const char *text, const struct policy *p, const struct plan *pl,
                         const struct denials *d)
{
        bool done = false;
        for (const char *s = text; *s;) {
                const char *end = strchr(s, '\n');
                size_t len = end ? (size_t)(end - s) : strlen(s);
                bool sys = strncmp(s, "SystemLibraries=", 16) == 0;
                if (!done && strncmp(s, "[Binding ", 9) == 0) {
                        for (size_t i = 0; d && i < d->n; i++) {
                                char *w = refusal(&d->d[i]);
                                fprintf(f, "# %s\n", w ? w : "a refused call");
                                free(w);
                        }
                        for (size_t i = 0; i < pl->n; i++)
                                if (!pl->lines[i].key)
                                        fprintf(f, "# %s\n", pl->lines[i].why);
                        done = true;
                        fputc('\n', f);
                }
                if (sys && pl->system_why[0] && !p->system_libraries) {
                        fprintf(f, "# it looked for %s%s%s: the system's libraries and commands\n",
                                pl->system_why, pl->n_system > 1 ? " and more under" : "",
                                pl->n_system > 1 ? " /usr, /bin, /lib ..." : "");
                        fputs("SystemLibraries=yes\n", f);
                } else {
                        fprintf(f, "%.*s\n", (int)len, s);
                }
                if (sys)
                        for (size_t i = 0; i < pl->n; i++)
                                if (pl->lines[i].key)
                                        fprintf(f, "# %s\n%s\n", pl->lines[i].why, pl->lines[i].key);
                s += len + (end ? 1 : 0);
        }
        for (size_t i = 0; !done && d && i < d->n; i++) {
                char *w = refusal(&d->d[i]);
                fprintf(f, "# %s\n", w ? w : "a refused call");
                free(w);
        }
        for (size_t i = 0; !done && i < pl->n; i++)
                if (!pl->lines[i].key)
                        fprintf(f, "# %s\n", pl->lines[i].why);
}

int learn_write(const char *out, const char *policy_path, const struct policy *p, const struct learned *l,
                const struct denials *d, char *err, size_t errlen)
{
        struct plan pl = { 0 };
        char *text = NULL;
        int e = 0;
        for (size_t i = 0; l && i < l->n && e == 0; i++)
                e = classify(p, l, i, &pl);
        if (e == 0)
                e = policy_format(p, &text);
        FILE *f = e == 0 ? fopen(out, "we") : NULL;
        if (e == 0 && !f)
                e = -errno;
        if (f) {
                fprintf(f, "# Written by gadgetd run --learn from %s: every key as in effect, and what\n"
                           "# the program looked for and could not find or do, each with the key that\n"
                           "# would let it (or why none can). Read it before you use it: a path the\n"
                           "# program looked for is not always one it needs.\n",
                        policy_path);
                write_policy(f, text, p, &pl, d);
                if (fclose(f) != 0)
                        e = -errno;
        }
        if (e < 0)
                snprintf(err, errlen, "%s: %s", out, strerror(-e));
        for (size_t i = 0; i < pl.n; i++) {
                free(pl.lines[i].key);
                free(pl.lines[i].why);
        }
        free(pl.lines);
        free(text);
        return e;
}
