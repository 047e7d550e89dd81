/* loads: the list of persisted gadgetctl loads (loads.h). */
#include "loads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "contract.h"

static int list_path(const char *state_dir, const char *suffix, char *buf, size_t len)
{
        if (snprintf(buf, len, "%s/%s%s", state_dir, LOADS_FILE, suffix) >= (int)len)
                return -ENAMETOOLONG;
        return 0;
}

void loads_free(struct loads_entry *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                free(v[i].path);
        }
        free(v);
}

/* One line "NAME UID GID PATH" into e; false if it is not a record. */
static bool parse_line(char *line, struct loads_entry *e)
{
        char *sp1 = strchr(line, ' ');
        if (!sp1)
                return false;
        *sp1 = '\0';
        char *end;
        errno = 0;
        unsigned long uid = strtoul(sp1 + 1, &end, 10);
        if (errno || *end != ' ')
                return false;
        unsigned long gid = strtoul(end + 1, &end, 10);
        if (errno || *end != ' ' || end[1] != '/' || uid > (uid_t)-1 - 1 || gid > (gid_t)-1 - 1 ||
            !gadget_name_ok(line))
                return false;
        e->uid = (uid_t)uid;
        e->gid = (gid_t)gid;
        e->name = strdup(line);
        e->path = strdup(end + 1);
        if (!e->name || !e->path) {
                free(e->name);
                free(e->path);
                return false;
        }
        return true;
}

int loads_read(const char *state_dir, struct loads_entry **out, size_t *n, size_t *bad)
{
        char path[4096];
        int e = list_path(state_dir, "", path, sizeof path);
        *out = NULL;
        *n = *bad = 0;
        if (e < 0)
                return e;
        FILE *f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;
        char *line = NULL;
        size_t cap = 0;
        ssize_t got;
        struct loads_entry *v = NULL;
        size_t k = 0;
        while ((got = getline(&line, &cap, f)) > 0) {
                if (line[got - 1] == '\n')
                        line[--got] = '\0';
                if (!got)
                        continue;
                struct loads_entry ent;
                if (!parse_line(line, &ent)) {
                        (*bad)++;
                        continue;
                }
                struct loads_entry *nv = realloc(v, (k + 1) * sizeof *v);
                if (!nv) {
                        free(ent.name);
                        free(ent.path);
                        e = -ENOMEM;
                        break;
                }
                v = nv;
                v[k++] = ent;
        }
        if (ferror(f) && !e)
                e = -EIO;
        free(line);
        fclose(f);
        if (e < 0) {
                loads_free(v, k);
                *bad = 0;
                return e;
        }
        *out = v;
        *n = k;
        return 0;
}

/* Writes v to a temporary file, syncs it, renames it over the list,
 * syncs the folder. */
static int write_list(const char *state_dir, const struct loads_entry *v, size_t n)
{
        char path[4096], tmp[4096];
        int e;
        if ((e = list_path(state_dir, "", path, sizeof path)) < 0 ||
            (e = list_path(state_dir, ".tmp", tmp, sizeof tmp)) < 0)
                return e;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        FILE *f = fdopen(fd, "w");
        if (!f) {
                e = -errno;
                close(fd);
                goto out;
        }
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s %lu %lu %s\n", v[i].name, (unsigned long)v[i].uid, (unsigned long)v[i].gid, v[i].path);
        if (fflush(f) == EOF || fsync(fileno(f)) < 0)
                e = -errno;
        if (fclose(f) == EOF && !e)
                e = -errno;
        if (!e && rename(tmp, path) < 0)
                e = -errno;
        if (!e) {
                int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0) {
                        fsync(dfd);
                        close(dfd);
                }
        }
out:
        if (e < 0)
                unlink(tmp);
        return e;
}

/* The index of name's record in v, or n. */
static size_t find(const struct loads_entry *v, size_t n, const char *name)
{
        size_t i = 0;
        while (i < n && strcmp(v[i].name, name) != 0)
                i++;
        return i;
}

/* Applies c to the list v (of *n records, room for *n + 1): true if it
 * changed, with c->result -ENOMEM if it could not be applied. */
static bool apply(struct loads_entry *v, size_t *n, struct loads_change *c)
{
        size_t i = find(v, *n, c->name);
        if (!c->path) { /* forget */
                if (i == *n)
                        return false;
                free(v[i].name);
                free(v[i].path);
                memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof *v);
                (*n)--;
                return true;
        }
        if (i < *n && v[i].uid == c->uid && v[i].gid == c->gid && strcmp(v[i].path, c->path) == 0)
                return false; /* the same record again */
        char *name = strdup(c->name), *path = strdup(c->path);
        if (!name || !path) {
                free(name);
                free(path);
                c->result = -ENOMEM;
                return false;
        }
        if (i < *n) { /* replaced where it was */
                free(v[i].name);
                free(v[i].path);
        } else {
                (*n)++;
        }
        v[i] = (struct loads_entry){ .name = name, .uid = c->uid, .gid = c->gid, .path = path };
        return true;
}

int loads_apply(const char *state_dir, struct loads_change *c, size_t nc)
{
        struct loads_entry *v, *grown;
        size_t n, bad;
        bool changed = false;
        int e = loads_read(state_dir, &v, &n, &bad);
        if (e < 0)
                return e;
        if (!(grown = realloc(v, (n + nc + 1) * sizeof *v))) {
                loads_free(v, n);
                return -ENOMEM;
        }
        v = grown;
        for (size_t k = 0; k < nc; k++) {
                c[k].result = 0;
                if (c[k].path && (strchr(c[k].path, '\n') || c[k].path[0] != '/'))
                        c[k].result = -EINVAL;
                else
                        changed = apply(v, &n, &c[k]) || changed;
        }
        /* One write and sync for them all: each change's result is its own
         * refusal, else the write's. */
        if (changed)
                e = write_list(state_dir, v, n);
        for (size_t k = 0; k < nc; k++)
                if (c[k].result == 0)
                        c[k].result = e;
        loads_free(v, n);
        return e;
}

int loads_record(const char *state_dir, const char *name, const char *path, uid_t uid, gid_t gid)
{
        struct loads_change c = { .name = name, .path = path, .uid = uid, .gid = gid };
        int e = loads_apply(state_dir, &c, 1);
        return e < 0 ? e : c.result;
}

int loads_forget(const char *state_dir, const char *name)
{
        struct loads_change c = { .name = name };
        int e = loads_apply(state_dir, &c, 1);
        return e < 0 ? e : c.result;
}
