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

/* Writes v (without name if skip, with name's new record if add) to a
 * temporary file, syncs it, renames it over the list, syncs the folder. */
static int write_list(const char *state_dir, const struct loads_entry *v, size_t n, const char *skip,
                      const struct loads_entry *add)
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
        bool added = false;
        for (size_t i = 0; i < n; i++) {
                const struct loads_entry *r = &v[i];
                if (skip && strcmp(r->name, skip) == 0) {
                        if (!add || added)
                                continue;
                        r = add;    /* replaced where it was */
                        added = true;
                }
                fprintf(f, "%s %lu %lu %s\n", r->name, (unsigned long)r->uid, (unsigned long)r->gid, r->path);
        }
        if (add && !added)
                fprintf(f, "%s %lu %lu %s\n", add->name, (unsigned long)add->uid, (unsigned long)add->gid,
                        add->path);
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

int loads_record(const char *state_dir, const char *name, const char *path, uid_t uid, gid_t gid)
{
        struct loads_entry *v;
        size_t n, bad;
        if (strchr(path, '\n') || path[0] != '/')
                return -EINVAL;
        int e = loads_read(state_dir, &v, &n, &bad);
        if (e < 0)
                return e;
        /* The same record again (a load of an unchanged file, which may
         * come as often as the caller likes) writes and syncs nothing. */
        bool same = false;
        for (size_t i = 0; i < n; i++)
                same = same || (strcmp(v[i].name, name) == 0 && v[i].uid == uid && v[i].gid == gid &&
                                strcmp(v[i].path, path) == 0);
        const struct loads_entry add = { .name = (char *)name, .uid = uid, .gid = gid, .path = (char *)path };
        if (!same)
                e = write_list(state_dir, v, n, name, &add);
        loads_free(v, n);
        return e;
}

int loads_forget(const char *state_dir, const char *name)
{
        struct loads_entry *v;
        size_t n, bad;
        int e = loads_read(state_dir, &v, &n, &bad);
        if (e < 0)
                return e;
        bool had = false;
        for (size_t i = 0; i < n; i++)
                had = had || strcmp(v[i].name, name) == 0;
        if (had)
                e = write_list(state_dir, v, n, name, NULL);
        loads_free(v, n);
        return e;
}
