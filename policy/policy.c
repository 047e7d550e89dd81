/* policy: reading a policy file. libinih splits KEY=VALUE lines and calls
 * policy_handler; the line reader in front of it (policy_reader) numbers
 * the lines and tracks the section headers, because Debian builds inih
 * without INI_HANDLER_LINENO and inih cuts section names at 50 bytes. */
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract.h"

static bool policy_blank(char c)
{
        return c == ' ' || c == '\t';
}


/* Ends the current section and opens the one in header, "[...]" with no
 * blanks at either end. */
static void policy_section(struct policy_ctx *c, char *header)
{
        size_t len = strlen(header);
        char *name = header + 1;

        if (c->sect == POLICY_SECT_BINDING)
                policy_binding_end(c);
        c->sect = POLICY_SECT_SKIP;
        if (header[len - 1] != ']') {
                policy_err(c, "section header %s does not end with ']'", POLICY_Q(header));
                return;
        }
        header[len - 1] = '\0';
        if (strcmp(name, "Gadget") == 0) {
                if (c->gadget_line)
                        policy_err(c, "duplicate [Gadget] section (first on line %u)",
                                   c->gadget_line);
                else
                        c->gadget_line = c->line;
                c->sect = c->gadget_line == c->line ? POLICY_SECT_GADGET : POLICY_SECT_SKIP;
        } else if (strcmp(name, "Binding") == 0) {
                policy_err(c, "[Binding] needs a name: [Binding NAME]");
        } else if (strncmp(name, "Binding", 7) == 0 && policy_blank(name[7])) {
                name += 7;
                while (policy_blank(*name))
                        name++;
                c->sect = policy_binding_begin(c, name);
        } else {
                policy_err(c, "unknown section %s (expected [Gadget] or [Binding NAME])",
                           POLICY_Q(name));
        }
        header[len - 1] = ']';
}

/* Whether line is KEY=VALUE with KEY made of letters, digits and '_'. This
 * also keeps inih from splitting at a ':' before the '='. */
static bool policy_key_line(const char *line)
{
        size_t n = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");

        while (policy_blank(line[n]))
                n++;
        return n > 0 && line[n] == '=';
}

/* Checks one line (no newline) in place: strips a comment, handles a section
 * header, reports what inih would misread. Empties the line if inih should
 * not see it. */
static void policy_line(struct policy_ctx *c, char *line)
{
        size_t n;

        if (policy_blank(line[0])) {
                n = strspn(line, " \t");
                if (line[n] && line[n] != '#' && line[n] != ';')
                        policy_err(c, "indented line: continuation lines are not supported "
                                   "(give each value on a line of its own)");
                line[0] = '\0';
                return;
        }
        if (line[0] == '#' || line[0] == ';') {
                line[0] = '\0';
                return;
        }
        /* A comment may also follow a value, after a blank. */
        for (n = 0; line[n]; n++) {
                if (policy_blank(line[n]) && (line[n + 1] == '#' || line[n + 1] == ';')) {
                        line[n] = '\0';
                        break;
                }
        }
        for (n = strlen(line); n > 0 && policy_blank(line[n - 1]); n--)
                line[n - 1] = '\0';
        if (line[0] == '[') {
                policy_section(c, line);
        } else if (line[0] && !policy_key_line(line)) {
                policy_err(c, "expected KEY=VALUE, [Section] or a comment, not %s",
                           POLICY_Q(line));
                line[0] = '\0';
        }
}

/* inih's fgets-style reader: hands it one line of c->text per call, and so
 * knows the number of the line whose keys the handler is about to see. */
static char *policy_reader(char *buf, int size, void *stream)
{
        struct policy_ctx *c = stream;
        const char *s = c->text + c->pos, *nl;
        size_t n = c->len - c->pos;

        if (c->stop || c->pos >= c->len || size < 3)
                return NULL;
        nl = memchr(s, '\n', n);
        if (nl)
                n = (size_t)(nl - s);
        c->pos += n + (nl ? 1 : 0);
        c->line++;
        if (n > 0 && s[n - 1] == '\r')
                n--;
        if (c->line == 1 && n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
                s += 3;
                n -= 3;
        }
        buf[0] = '\0';
        if (memchr(s, '\0', n)) {
                policy_err(c, "line contains a NUL byte");
        } else if (n > (size_t)size - 2) {
                policy_err(c, "line is longer than %d bytes", size - 2);
        } else {
                memcpy(buf, s, n);
                buf[n] = '\0';
                policy_line(c, buf);
        }
        strcat(buf, "\n");
        return buf;
}

/* Called by inih for each KEY=VALUE (both trimmed); c->sect, not inih's
 * section, says where it belongs. Always 1: errors are collected in c. */
static int policy_handler(void *user, const char *section, const char *key, const char *value)
{
        struct policy_ctx *c = user;

        (void)section;
        if (c->stop)
                return 1;
        switch (c->sect) {
        case POLICY_SECT_NONE:
                policy_err(c, "%s= comes before any section", key);
                break;
        case POLICY_SECT_GADGET:
                policy_gadget_key(c, key, value);
                policy_written_add(c, key, value);
                break;
        case POLICY_SECT_BINDING:
                policy_binding_key(c, key, value);
                policy_written_add(c, key, value);
                break;
        case POLICY_SECT_SKIP:
                break;
        }
        return 1;
}

/* True if path is dir or lies below it. */
static bool policy_path_within(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Exec='s interpreter (ELF loader or #! line) must be in the sandbox, or
 * the exec fails with ENOENT for a file that plainly exists: a warning
 * names it and the key that adds it (the start then fails, naming it
 * again, worker/sandbox/init.c). A warning, not an error: the path may still be
 * reached some other way (a listed directory holding a link to it). The
 * directories SystemLibraries=yes adds are those of worker/sandbox/mounts.c. */
static void policy_check_interpreter(struct policy_ctx *c)
{
        static const char *const sys[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
        struct policy *p = c->p;
        char interp[256];

        if (!p->exec || policy_interpreter(p->exec, interp, sizeof interp) <= 0)
                return;
        for (size_t i = 0; p->system_libraries && i < sizeof sys / sizeof *sys; i++)
                if (policy_path_within(interp, sys[i]))
                        return;
        for (size_t i = 0; i < p->n_ro_paths; i++)
                if (policy_path_within(interp, p->ro_paths[i]))
                        return;
        c->line = c->gadget_seen[POLICY_KEY_EXEC];
        policy_warn(c, "Exec=%s needs its interpreter %s, which is not in the sandbox: %s", POLICY_Q(p->exec),
                   POLICY_Q(interp), p->system_libraries ? "list it in ReadOnlyPaths="
                                                         : "add SystemLibraries=yes (or list it in ReadOnlyPaths=)");
}

/* The checks that need the whole file. */
static void policy_finish(struct policy_ctx *c)
{
        struct policy *p = c->p;

        if (c->sect == POLICY_SECT_BINDING)
                policy_binding_end(c);
        c->sect = POLICY_SECT_NONE;
        if (!c->gadget_line) {
                c->line = 1;
                policy_err(c, "no [Gadget] section");
                return;
        }
        c->line = c->gadget_line;
        if (!p->name && !c->gadget_seen[POLICY_KEY_NAME])
                policy_err(c, "[Gadget] has no Name=");
        if (!p->exec && !c->gadget_seen[POLICY_KEY_EXEC])
                policy_err(c, "[Gadget] has no Exec=");
        policy_check_interpreter(c);
        policy_gadget_end(c);
        for (size_t i = 0; i < p->n_bindings && p->name; i++) {
                c->line = p->bindings[i].line;
                if (p->bindings[i].target && strcmp(p->bindings[i].target, p->name) == 0)
                        policy_err(c, "binding %s: Target=%s is this gadget itself",
                                   p->bindings[i].name, p->name);
                /* Why refused: its own batches would log lines it observes,
                 * a loop that feeds itself. */
                if (policy_listed(p->bindings[i].of, p->name))
                        policy_err(c, "binding %s: Of= names this gadget itself (%s)", p->bindings[i].name, p->name);
        }
}

static struct policy *policy_new(const char *path)
{
        struct policy *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        /* The numbers' defaults are in the key table, beside their bounds;
         * MemoryMax= (a key of its own setter) has its default here. */
        *p = (struct policy){ .memory_max = POLICY_UNLIMITED, .restart = POLICY_RESTART_NO };
        policy_gadget_defaults(p);
        p->record_denials = true;
        p->path = strdup(path);
        if (!p->path) {
                free(p);
                return NULL;
        }
        return p;
}

/* The line of an error "NAME:LINE: ...", 0 if it names none. */
static unsigned long policy_error_line(const char *name, const char *msg)
{
        size_t n = strlen(name);
        if (strncmp(msg, name, n) != 0 || msg[n] != ':' || msg[n + 1] < '0' || msg[n + 1] > '9')
                return 0;
        return strtoul(msg + n + 1, NULL, 10);
}

/* Puts the errors from index from on in line order: the checks that need
 * a whole section or the whole file report earlier lines after later ones.
 * Stable (an insertion sort; a file has at most POLICY_MAX_ERRORS + 1). */
static void policy_errors_sort(const char *name, struct policy_errors *errs, size_t from)
{
        for (size_t i = from + 1; errs && i < errs->n; i++) {
                char *m = errs->msgs[i];
                unsigned long line = policy_error_line(name, m);
                size_t j = i;
                for (; j > from && policy_error_line(name, errs->msgs[j - 1]) > line; j--)
                        errs->msgs[j] = errs->msgs[j - 1];
                errs->msgs[j] = m;
        }
}

static int policy_parse_flags(const char *name, const char *text, size_t len, unsigned flags,
                              struct policy **out, struct policy_errors *errs)
{
        size_t first_error = errs ? errs->n : 0;
        struct policy_ctx c = { .name = name, .text = text, .len = len, .errs = errs,
                                .redact = flags & POLICY_REDACT };
        int r;

        if (!name || !out || (!text && len))
                return -EINVAL;
        c.p = policy_new(name);
        if (!c.p)
                return -ENOMEM;
        r = ini_parse_stream(policy_reader, &c, policy_handler, &c);
        if (r < 0)
                policy_oom(&c);
        if (r > 0 && c.n_errors == 0) {
                c.line = (unsigned)r;
                policy_err(&c, "syntax error");
        }
        if (!c.stop)
                policy_finish(&c);
        if (c.oom) {
                r = -ENOMEM;
                goto out;
        }
        if (c.n_errors) {
                policy_errors_sort(name, errs, first_error);
                r = -EINVAL;
                goto out;
        }
        *out = c.p;
        c.p = NULL;
        r = 0;
out:
        policy_pending_clear(&c);
        policy_free(c.p);
        return r;
}

int policy_parse(const char *name, const char *text, size_t len, struct policy **out,
                 struct policy_errors *errs)
{
        return policy_parse_flags(name, text, len, 0, out, errs);
}

/* Reads all of fd into *text, refusing more than POLICY_MAX_FILE bytes. */
static int policy_read(int fd, char **text, size_t *len)
{
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap), *nb;
        int r;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (n == cap) {
                        if (cap > POLICY_MAX_FILE) {
                                r = -EFBIG;
                                goto out;
                        }
                        nb = realloc(buf, cap * 2);
                        if (!nb) {
                                r = -ENOMEM;
                                goto out;
                        }
                        buf = nb;
                        cap *= 2;
                }
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        goto out;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        if (n > POLICY_MAX_FILE) {
                r = -EFBIG;
                goto out;
        }
        *text = buf;
        *len = n;
        buf = NULL;
        r = 0;
out:
        free(buf);
        return r;
}

static uint64_t policy_hash(const char *text, size_t len)
{
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
        return h;
}

int policy_load_fd(int fd, const char *path, unsigned flags, struct policy **out,
                   struct policy_errors *errs, uint64_t *hash)
{
        char prefix[4096 + 3], *text = NULL;
        const char *why = NULL;
        struct stat st;
        size_t len = 0;
        int r;

        if (!path || !out || fd < 0)
                return -EINVAL;
        snprintf(prefix, sizeof(prefix), "%s: ", path);
        if (fstat(fd, &st) < 0) {
                r = -errno;
                why = "cannot open";
                goto out;
        }
        /* Why before any read: a FIFO, a device (/dev/zero) or a huge
         * file would hold gadgetd reading; only a regular file of at most
         * POLICY_MAX_FILE bytes is read at all. */
        if (!S_ISREG(st.st_mode)) {
                r = -EINVAL;
                why = "not a regular file";
                goto out;
        }
        if (st.st_size > POLICY_MAX_FILE) {
                r = -EFBIG;
                why = "larger than 1 MiB";
                goto out;
        }
        /* Why this is safe: a policy decides what a gadget may do, so when
         * root reads one, nobody but root may have been able to change it. */
        if (geteuid() == 0 && (st.st_uid != 0 || (st.st_mode & 022))) {
                r = -EINVAL;
                why = st.st_uid != 0 ? "owned by a user other than root; refused"
                                     : "writable by group or others; refused (chmod go-w)";
                goto out;
        }
        r = policy_read(fd, &text, &len);
        if (r < 0) {
                why = r == -EFBIG ? "larger than 1 MiB" : "cannot read";
                goto out;
        }
        r = policy_parse_flags(path, text, len, flags, out, errs);
        if (r == 0 && hash)
                *hash = policy_hash(text, len);
        if (r == 0) {
                /* Kept as read, NUL-ended, for gadgetctl cat. */
                char *kept = realloc(text, len + 1);
                if (kept) {
                        kept[len] = '\0';
                        (*out)->text = kept;
                        (*out)->text_len = len;
                        text = NULL;
                }
        }
out:
        if (why && policy_errors_add(errs, prefix, "%s%s%s", why, r == -EINVAL ? "" : ": ",
                                     r == -EINVAL ? "" : strerror(-r)) < 0)
                r = -ENOMEM;
        free(text);
        return r;
}

int policy_load(const char *path, struct policy **out, struct policy_errors *errs)
{
        char prefix[4096 + 3];
        int fd, r;

        if (!path || !out)
                return -EINVAL;
        fd = open(path, POLICY_OPEN_FLAGS);
        if (fd < 0) {
                r = -errno;
                snprintf(prefix, sizeof(prefix), "%s: ", path);
                if (policy_errors_add(errs, prefix, "cannot open: %s", strerror(-r)) < 0)
                        r = -ENOMEM;
                return r;
        }
        r = policy_load_fd(fd, path, 0, out, errs, NULL);
        close(fd);
        return r;
}

void policy_free(struct policy *p)
{
        if (!p)
                return;
        free(p->path);
        free(p->text);
        free(p->name);
        free(p->exec);
        free(p->ui);
        free(p->admin_ui);
        policy_strv_free(p->admin_methods);
        policy_strv_free(p->approve);
        policy_strv_free(p->nodes);
        policy_schedules_free(p->schedules, p->n_schedules);
        policy_strv_free(p->argv);
        policy_strv_free(p->env);
        policy_strv_free(p->ro_paths);
        policy_strv_free(p->warnings);
        policy_written_free(p);
        for (size_t i = 0; i < p->n_bindings; i++)
                policy_binding_clear(&p->bindings[i]);
        free(p->bindings);
        free(p);
}

bool policy_listed(char *const *v, const char *name)
{
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], name) == 0)
                        return true;
        return false;
}

const struct policy_binding *policy_binding_find(const struct policy *p, const char *name)
{
        for (size_t i = 0; p && name && i < p->n_bindings; i++) {
                if (strcmp(p->bindings[i].name, name) == 0)
                        return &p->bindings[i];
        }
        return NULL;
}

bool policy_binding_private(const struct policy *p, const char *name)
{
        const struct policy_binding *b = policy_binding_find(p, name);
        return !b || b->type == BINDING_SECRET;
}
