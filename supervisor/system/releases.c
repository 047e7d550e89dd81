/* releases: the versioned store of installed bundles (releases.h). */
#include "releases.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle.h"

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Removes name in at and, for a directory, everything under it. Why
 * this is safe: unlinkat never follows a link, and a directory is opened
 * with O_NOFOLLOW, so nothing outside the store is removed; the store's
 * depth is bounded (BUNDLE_DEPTH_MAX and a few of its own). */
static void rm_at(int at, const char *name, unsigned depth)
{
        if (unlinkat(at, name, 0) == 0 || errno == ENOENT || depth > BUNDLE_DEPTH_MAX + 4)
                return;
        int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        rm_at(dirfd(d), de->d_name, depth + 1);
        closedir(d);
        unlinkat(at, name, AT_REMOVEDIR);
}

/* Removes the tree at path (gadgetd's own store: never follows a link). */
static void rm_tree(const char *path)
{
        rm_at(AT_FDCWD, path, 0);
}

static int write_all(int fd, const void *p, size_t n)
{
        const uint8_t *b = p;
        while (n > 0) {
                ssize_t w = write(fd, b, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                b += w;
                n -= (size_t)w;
        }
        return 0;
}

/* A new file name in dirfd with exactly mode, holding data. Why this is
 * safe: O_EXCL and O_NOFOLLOW create a file anew, never through a link
 * or into one found there; fchmod sets the mode whatever the umask. */
static int file_new(int dirfd, const char *name, mode_t mode, const void *data, size_t len)
{
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600), e;
        if (fd < 0)
                return -errno;
        e = write_all(fd, data, len);
        if (e == 0 && fchmod(fd, mode) < 0)
                e = -errno;
        if (close(fd) < 0 && e == 0)
                e = -errno;
        return e;
}

/* The directory name in dirfd, made (0755) if missing: an fd, or -errno. */
static int dir_open(int dirfd, const char *name)
{
        if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, 0755) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

/* One member under files (an fd): its directories, then the file. */
static int member_put(int files, const struct bundle_member *m)
{
        char path[BUNDLE_PATH_MAX + 1], *s = path, *slash;
        int dir = dup(files), e = 0;
        if (dir < 0)
                return -errno;
        snprintf(path, sizeof path, "%s", m->path);
        while ((slash = strchr(s, '/'))) {
                *slash = '\0';
                int sub = dir_open(dir, s);
                close(dir);
                if (sub < 0)
                        return sub;
                dir = sub;
                s = slash + 1;
        }
        e = file_new(dir, s, m->exec ? 0755 : 0644, m->data, (size_t)m->size);
        close(dir);
        return e;
}

static int release_text(const struct bundle *b, const char *signer, uid_t uid, char *out, size_t len)
{
        return snprintf(out, len, "Version=%s\nSigner=%s\nInstalled=%" PRId64 "\nUid=%u\nSDK=%s\n", b->version,
                        signer, now_ms(), (unsigned)uid, b->sdk);
}

/* Everything of the version into staging (an fd): files/, policy, release. */
static int stage(int staging, const char *final, const struct bundle *b, const char *signer, uid_t uid, char *why,
                 size_t wlen)
{
        char files[4300], rel[512], *policy = NULL;
        int fd = dir_open(staging, "files"), e = 0;
        if (fd < 0) {
                snprintf(why, wlen, "cannot make its directory: %s", strerror(-fd));
                return fd;
        }
        for (size_t i = 0; i < b->n && e == 0; i++)
                if ((e = member_put(fd, &b->m[i])) < 0)
                        snprintf(why, wlen, "cannot write member \"%.64s\": %s", b->m[i].path, strerror(-e));
        close(fd);
        if (e < 0)
                return e;
        snprintf(files, sizeof files, "%s/files", final);
        if ((e = releases_policy_text(b, files, &policy, why, wlen)) < 0)
                return e;
        e = file_new(staging, "policy", 0644, policy, strlen(policy));
        free(policy);
        int n = release_text(b, signer, uid, rel, sizeof rel);
        if (e == 0)
                e = file_new(staging, "release", 0644, rel, (size_t)n);
        if (e < 0)
                snprintf(why, wlen, "cannot write its policy: %s", strerror(-e));
        return e;
}

int releases_unpack(const char *state_dir, const struct bundle *b, const char *signer, uid_t uid, char *path,
                    size_t plen, char *why, size_t wlen)
{
        char dir[4096], staging[4300], final[4200];
        const char *sname;
        bool staged = false;
        int top = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rel = -1, name = -1, st = -1, e;
        if (top < 0) {
                e = -errno;
                snprintf(why, wlen, "cannot open the state directory: %s", strerror(-e));
                return e;
        }
        if ((rel = dir_open(top, RELEASES_DIR)) < 0 || (name = dir_open(rel, b->name)) < 0) {
                e = rel < 0 ? rel : name;
                snprintf(why, wlen, "cannot make the store's directory: %s", strerror(-e));
                goto out;
        }
        snprintf(dir, sizeof dir, "%s/%s/%s", state_dir, RELEASES_DIR, b->name);
        snprintf(final, sizeof final, "%s/%s", dir, b->version);
        /* A name of its own: two installs (root's and a member's) may run
         * at once; a dot keeps it out of the versions listed. */
        snprintf(staging, sizeof staging, "%s/.staging-%s-XXXXXX", dir, b->version);
        sname = staging + strlen(dir) + 1;
        if (faccessat(name, b->version, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
                snprintf(why, wlen, "%s %s is installed already", b->name, b->version);
                e = -EEXIST;
                goto out;
        }
        if (!mkdtemp(staging)) {
                e = -errno;
                snprintf(why, wlen, "cannot make its directory: %s", strerror(-e));
                goto out;
        }
        staged = true;
        if ((st = openat(name, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fchmod(st, 0755) < 0) {
                e = -errno;
                snprintf(why, wlen, "cannot make its directory: %s", strerror(-e));
                goto out;
        }
        e = stage(st, final, b, signer, uid, why, wlen);
        /* Why syncfs before the rename: a version in place is whole, its
         * files on disk, even after a crash (one call for all of them; in
         * install's thread). Why RENAME_NOREPLACE: the version's directory
         * is never replaced, even by an install of the same version at once. */
        if (e == 0 && (syncfs(st) < 0 || renameat2(name, sname, name, b->version, RENAME_NOREPLACE) < 0)) {
                e = -errno;
                if (e == -EEXIST)
                        snprintf(why, wlen, "%s %s is installed already", b->name, b->version);
                else
                        snprintf(why, wlen, "cannot move it into place: %s", strerror(-e));
        }
        if (e == 0) {
                snprintf(path, plen, "%s/policy", final);
                staged = false;
        }
out:
        if (staged)
                rm_tree(staging);
        if (e < 0 && rel >= 0)
                unlinkat(rel, b->name, AT_REMOVEDIR); /* only if empty: its other versions stay */
        if (st >= 0)
                close(st);
        if (name >= 0)
                close(name);
        if (rel >= 0)
                close(rel);
        close(top);
        return e;
}

/* Replaces dir/name by a file holding data (written beside, synced, renamed). */
static int file_replace(const char *dir, const char *name, const void *data, size_t len)
{
        char tmp[4300], dst[4300];
        snprintf(tmp, sizeof tmp, "%s/.%s.new", dir, name);
        snprintf(dst, sizeof dst, "%s/%s", dir, name);
        unlink(tmp);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644), e;
        if (fd < 0)
                return -errno;
        e = write_all(fd, data, len);
        if (e == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
                e = -errno;
        close(fd);
        if (e == 0 && rename(tmp, dst) < 0)
                e = -errno;
        if (e < 0)
                unlink(tmp);
        return e;
}

/* At most max bytes of path into buf (NUL-terminated): the length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t max)
{
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n, got = 0;
        if (fd < 0)
                return -errno;
        while ((size_t)got < max - 1 && (n = read(fd, buf + got, max - 1 - (size_t)got)) > 0)
                got += n;
        close(fd);
        buf[got] = '\0';
        return got;
}

int releases_commit(const char *state_dir, const char *name, const char *version, char *path, size_t plen)
{
        char dir[4096], src[4300];
        char *text = malloc(RELEASES_POLICY_MAX + 4096);
        int e;
        if (!text)
                return -ENOMEM;
        snprintf(dir, sizeof dir, "%s/%s/%s", state_dir, RELEASES_DIR, name);
        snprintf(src, sizeof src, "%s/%s/policy", dir, version);
        ssize_t n = read_small(src, text, RELEASES_POLICY_MAX + 4096);
        e = n < 0 ? (int)n : file_replace(dir, "policy", text, (size_t)n);
        free(text);
        if (e == 0)
                e = file_replace(dir, "current", version, strlen(version));
        if (e == 0)
                snprintf(path, plen, "%s/policy", dir);
        return e;
}

void releases_undo(const char *state_dir, const char *name, const char *version, const char *prev, bool committed)
{
        char dir[4096], p[4300];
        snprintf(dir, sizeof dir, "%s/%s/%s", state_dir, RELEASES_DIR, name);
        if (!committed || (prev && prev[0] && releases_commit(state_dir, name, prev, p, sizeof p) == 0)) {
                /* as it was before */
        } else {
                snprintf(p, sizeof p, "%s/policy", dir);
                unlink(p);
                snprintf(p, sizeof p, "%s/current", dir);
                unlink(p);
        }
        snprintf(p, sizeof p, "%s/%s", dir, version);
        rm_tree(p);
        rmdir(dir);
}

/* NAME/file of the store (current, previous): a version's name, or "". */
static void version_file(const char *state_dir, const char *name, const char *file, char *out, size_t len)
{
        char p[4300];
        snprintf(p, sizeof p, "%s/%s/%s/%s", state_dir, RELEASES_DIR, name, file);
        if (read_small(p, out, len) < 0 || !bundle_version_ok(out))
                out[0] = '\0';
}

void releases_current(const char *state_dir, const char *name, char *out, size_t len)
{
        version_file(state_dir, name, "current", out, len);
}

void releases_previous(const char *state_dir, const char *name, char *out, size_t len)
{
        version_file(state_dir, name, "previous", out, len);
}

int releases_set_previous(const char *state_dir, const char *name, const char *version)
{
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s/%s", state_dir, RELEASES_DIR, name);
        if (!version || !version[0]) {
                char p[4200];
                snprintf(p, sizeof p, "%s/previous", dir);
                return unlink(p) < 0 && errno != ENOENT ? -errno : 0;
        }
        return file_replace(dir, "previous", version, strlen(version));
}

bool releases_has(const char *state_dir, const char *name, const char *version)
{
        char p[4400];
        struct stat st;
        if (!bundle_version_ok(version))
                return false;
        snprintf(p, sizeof p, "%s/%s/%s/%s/policy", state_dir, RELEASES_DIR, name, version);
        return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The release file of dir/version into r. */
static int info_read(const char *dir, const char *version, struct release_info *r)
{
        char p[4400], text[1024];
        snprintf(p, sizeof p, "%s/%s/release", dir, version);
        if (read_small(p, text, sizeof text) < 0)
                return -ENOENT;
        *r = (struct release_info){ 0 };
        snprintf(r->version, sizeof r->version, "%.64s", version);
        for (char *s = text, *next; s && *s; s = next) {
                next = strchr(s, '\n');
                if (next)
                        *next++ = '\0';
                unsigned u;
                long long ms;
                if (sscanf(s, "Installed=%lld", &ms) == 1)
                        r->installed_ms = ms;
                else if (sscanf(s, "Uid=%u", &u) == 1)
                        r->uid = u;
                else if (strncmp(s, "Signer=", 7) == 0)
                        snprintf(r->signer, sizeof r->signer, "%s", s + 7);
                else if (strncmp(s, "SDK=", 4) == 0)
                        snprintf(r->sdk, sizeof r->sdk, "%s", s + 4);
        }
        return 0;
}

static int newest_first(const void *a, const void *b)
{
        const struct release_info *x = a, *y = b;
        return x->installed_ms < y->installed_ms ? 1 : x->installed_ms > y->installed_ms ? -1 : 0;
}

int releases_list(const char *state_dir, const char *name, struct release_info **out, size_t *n)
{
        char dir[4096], cur[BUNDLE_VERSION_MAX + 2];
        struct release_info *v = NULL;
        size_t k = 0, cap = 0;
        struct dirent *de;
        snprintf(dir, sizeof dir, "%s/%s/%s", state_dir, RELEASES_DIR, name);
        *out = NULL;
        *n = 0;
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        releases_current(state_dir, name, cur, sizeof cur);
        while ((de = readdir(d))) {
                struct release_info r;
                if (!bundle_version_ok(de->d_name) || info_read(dir, de->d_name, &r) < 0)
                        continue;
                r.current = strcmp(cur, de->d_name) == 0;
                if (k == cap) {
                        struct release_info *nv = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
                        if (!nv) {
                                free(v);
                                closedir(d);
                                return -ENOMEM;
                        }
                        v = nv;
                }
                v[k++] = r;
        }
        closedir(d);
        if (k)
                qsort(v, k, sizeof *v, newest_first);
        *out = v;
        *n = k;
        return 0;
}

/* One gadget's directory (an fd): its leftovers removed. */
static size_t sweep_one(int dir)
{
        DIR *d = fdopendir(dir);
        struct dirent *de;
        size_t n = 0;
        if (!d) {
                close(dir);
                return 0;
        }
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (strncmp(de->d_name, ".staging-", 9) == 0 ||
                    (de->d_name[0] == '.' && len > 4 && strcmp(de->d_name + len - 4, ".new") == 0)) {
                        rm_at(dirfd(d), de->d_name, 0);
                        n++;
                }
        }
        closedir(d);
        return n;
}

size_t releases_sweep(const char *state_dir)
{
        char top[4200];
        size_t n = 0;
        struct dirent *de;
        snprintf(top, sizeof top, "%s/%s", state_dir, RELEASES_DIR);
        int fd = open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                int one = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (one >= 0)
                        n += sweep_one(one);
                unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR); /* only if empty */
        }
        closedir(d);
        return n;
}

size_t releases_prune(const char *state_dir, const char *name, unsigned keep)
{
        struct release_info *v;
        size_t n, removed = 0;
        char p[4300], prev[80];
        if (releases_list(state_dir, name, &v, &n) < 0)
                return 0;
        /* The version rollback goes back to stays, as the current one. */
        releases_previous(state_dir, name, prev, sizeof prev);
        for (size_t i = n; i-- > 0 && n - removed > keep;) {
                if (v[i].current || strcmp(v[i].version, prev) == 0)
                        continue;
                snprintf(p, sizeof p, "%s/%s/%s/%s", state_dir, RELEASES_DIR, name, v[i].version);
                rm_tree(p);
                removed++;
        }
        free(v);
        return removed;
}
