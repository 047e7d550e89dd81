/* releases_policy: the pure parts of the store (releases.h): a bundle's
 * policy template made into the policy gadgetd loads, and what a policy's
 * paths say of the store. No syscalls. */
#include "releases.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

/* Whether path is one of b's members. */
static bool is_member(const struct bundle *b, const char *path)
{
        for (size_t i = 0; i < b->n; i++)
                if (strcmp(b->m[i].path, path) == 0)
                        return true;
        return false;
}

static char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
                s[--n] = '\0';
        return s;
}

/* One template line into out (a FILE in memory): in [Gadget], the paths
 * of Exec=, UI= and AdminUI= must name members, and become files/PATH;
 * Name= must be the manifest's. The line is read as the policy's reader
 * reads it (policy/policy.c): a byte-order mark on the first line, a
 * comment after a blank, blanks at the end and around '=' dropped, a
 * section header the whole line. Why this is safe beyond that: install
 * also checks the parsed policy's paths lie in the version's files/. */
static int policy_line(const struct bundle *b, const char *files, char *line, bool *gadget, FILE *out, unsigned no,
                       char *why, size_t wlen)
{
        char copy[1024], *t = copy;
        size_t n;
        if (strlen(line) >= sizeof copy) {
                snprintf(why, wlen, "policy line %u: longer than %zu bytes", no, sizeof copy - 1);
                return -EINVAL;
        }
        strcpy(copy, line);
        if (no == 1 && memcmp(t, "\xef\xbb\xbf", 3) == 0)
                t += 3;
        /* Why: a line that begins with a blank is refused by the policy's
         * reader unless a comment; here too, whatever it holds. */
        if ((t[0] == ' ' || t[0] == '\t') && trim(t)[0] && trim(t)[0] != '#' && trim(t)[0] != ';') {
                snprintf(why, wlen, "policy line %u: begins with a blank", no);
                return -EINVAL;
        }
        if (t[0] == '#' || t[0] == ';' || t[0] == ' ' || t[0] == '\t') {
                fprintf(out, "%s\n", line);
                return 0;
        }
        for (n = 0; t[n]; n++)
                if ((t[n] == ' ' || t[n] == '\t') && (t[n + 1] == '#' || t[n + 1] == ';')) {
                        t[n] = '\0';
                        break;
                }
        t = trim(t);
        if (t[0] == '[')
                *gadget = strcmp(t, "[Gadget]") == 0;
        n = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
        char *key = t, *eq = t + n;
        while (*eq == ' ' || *eq == '\t')
                eq++;
        if (*gadget && n > 0 && *eq == '=') {
                key[n] = '\0';
                char *v = trim(eq + 1);
                bool path = strcmp(key, "Exec") == 0 || strcmp(key, "UI") == 0 || strcmp(key, "AdminUI") == 0;
                if (strcmp(key, "Name") == 0 && strcmp(v, b->name) != 0) {
                        snprintf(why, wlen, "policy line %u: Name= is not the manifest's %s", no, b->name);
                        return -EINVAL;
                }
                if (path) {
                        char pw[200];
                        if (!bundle_path_ok(v, pw, sizeof pw) || !is_member(b, v)) {
                                snprintf(why, wlen, "policy line %u: %s= must name a file of the bundle, relative to "
                                         "its top", no, key);
                                return -EINVAL;
                        }
                        fprintf(out, "%s=%s/%s\n", key, files, v);
                        return 0;
                }
        }
        fprintf(out, "%s\n", line);
        return 0;
}

int releases_policy_text(const struct bundle *b, const char *files, char **out, char *why, size_t wlen)
{
        const struct bundle_member *m = b->policy;
        char *text = NULL, *res = NULL;
        size_t rlen = 0;
        bool gadget = false;
        unsigned no = 0;
        int e = -EINVAL;
        if (m->size > RELEASES_POLICY_MAX || memchr(m->data, '\0', (size_t)m->size)) {
                snprintf(why, wlen, "policy: larger than %u bytes or holds a NUL byte", RELEASES_POLICY_MAX);
                return -EINVAL;
        }
        FILE *f = open_memstream(&res, &rlen);
        if (!f || !(text = strndup((const char *)m->data, (size_t)m->size))) {
                e = -ENOMEM;
                goto out;
        }
        for (char *s = text, *next; s && *s; s = next) {
                next = strchr(s, '\n');
                if (next)
                        *next++ = '\0';
                if ((e = policy_line(b, files, s, &gadget, f, ++no, why, wlen)) < 0)
                        goto out;
        }
        e = 0;
out:
        free(text);
        if (f && fclose(f) != 0 && e == 0)
                e = -ENOMEM;
        if (e == 0)
                *out = res;
        else
                free(res);
        return e;
}

bool releases_path_within(const char *path, const char *dir)
{
        char norm[4400];
        size_t o = 0;
        for (const char *p = dir; *p;) {
                while (*p == '/')
                        p++;
                size_t len = strcspn(p, "/");
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return false; /* not normalized alike: fail closed */
                if (len && !(len == 1 && p[0] == '.')) {
                        if (o + len + 2 >= sizeof norm)
                                return false;
                        norm[o++] = '/';
                        memcpy(norm + o, p, len);
                        o += len;
                }
                p += len;
        }
        norm[o] = '\0';
        return path && o > 0 && strncmp(path, norm, o) == 0 && path[o] == '/';
}

void releases_version_of(const char *state_dir, const char *name, const char *policy_path, const char *exec,
                         char *out, size_t len)
{
        char top[4200], pol[4300];
        int n = snprintf(top, sizeof top, "%s/%s/%s/", state_dir, RELEASES_DIR, name);
        snprintf(pol, sizeof pol, "%spolicy", top);
        out[0] = '\0';
        if (n <= 0 || (size_t)n >= sizeof top || !policy_path || !exec || strcmp(policy_path, pol) != 0 ||
            strncmp(exec, top, (size_t)n) != 0)
                return;
        const char *v = exec + n, *slash = strchr(v, '/');
        if (slash && (size_t)(slash - v) < len && strncmp(slash, "/files/", 7) == 0) {
                snprintf(out, len, "%.*s", (int)(slash - v), v);
                if (!bundle_version_ok(out))
                        out[0] = '\0';
        }
}
