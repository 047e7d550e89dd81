/* mounts: the gadget's root filesystem. A fresh tmpfs becomes the root,
 * holding only the program, the policy's paths (read-only), a minimal /dev
 * with a private /dev/shm, a private /tmp, /proc of the gadget's PID
 * namespace, a generated /etc/passwd and /etc/group (etcfiles.c) and the
 * mount point of its cgroups, /sys/fs/cgroup (cgroupfs.c). */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>


#define BASE "/tmp" /* where the new root is built before pivot_root */

/* One thing to place in the new root: a cloned mount tree or a symlink. */
struct mount_item {
        char *dst;          /* absolute path inside the sandbox */
        char *link;         /* symlink target, or NULL for a mount */
        int tree_fd;        /* detached clone from open_tree, or -1 */
        bool is_dir;
};

/* On the setup's mapping (sandbox_setup_alloc), as its strings: gone
 * with it, where the heap would keep the pages its small blocks were on. */
struct mount_plan {
        struct mount_item *items;
        size_t n, cap;
};

/* The failing step's description, on the setup's mapping as the plan
 * (helper.c): it outlives mounts_plan_free, and the child is
 * single-threaded and ends soon after a failure. */
#define STEP_MAX (PATH_MAX + 64)

static const char *const system_dirs[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
/* What the system's libraries and commands read from /etc: the loader's
 * cache, the Debian alternatives (awk, which, pager, java... are links
 * through /etc/alternatives), the local time zone and glibc's locale
 * aliases. Why this is safe: each is public system configuration that
 * every user of the host may read, holds no secret, and comes read-only;
 * the rest of /etc (shadow, ssh keys, credentials of services) never
 * enters. Where one is missing it is left out. */
static const char *const system_etc[] = { "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime",
                                          "/etc/locale.alias" };
static const char *const dev_nodes[] = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom" };

static const char *set_step(struct mount_plan *plan, const char *what, const char *path)
{
        (void)plan;
        static char *buf;
        if (!buf && !(buf = sandbox_setup_alloc(STEP_MAX)))
                return what;
        snprintf(buf, STEP_MAX, "%s %s", what, path);
        return buf;
}

static char *plan_strdup(const char *s)
{
        char *d = sandbox_setup_alloc(strlen(s) + 1);
        return d ? strcpy(d, s) : NULL;
}

static struct mount_item *plan_add(struct mount_plan *plan, const char *dst)
{
        if (plan->n == plan->cap) {
                size_t cap = plan->cap ? 2 * plan->cap : 16;
                struct mount_item *n = sandbox_setup_alloc(cap * sizeof *n);
                if (!n)
                        return NULL;
                if (plan->n)
                        memcpy(n, plan->items, plan->n * sizeof *n);
                plan->items = n;
                plan->cap = cap;
        }
        struct mount_item *it = &plan->items[plan->n];
        *it = (struct mount_item){ .dst = plan_strdup(dst), .tree_fd = -1 };
        if (!it->dst)
                return NULL;
        plan->n++;
        return it;
}

/* True if path is dir or lies below it. */
static bool path_within(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* True if an earlier item already shows path in the sandbox. */
static bool plan_covers(const struct mount_plan *plan, const char *path)
{
        for (size_t i = 0; i < plan->n; i++)
                if (!plan->items[i].link && plan->items[i].is_dir && path_within(path, plan->items[i].dst))
                        return true;
        return false;
}

/* Clones the host mount tree at src (a detached copy, all submounts
 * included) and sets attr on it. Why this is safe: the clone is made with
 * the identity gadgetd gave the child, and the attributes only add
 * restrictions; locked host flags cannot be cleared from a user namespace. */
/* Clones the host mount tree at real (a path gadgetd resolved, see
 * supervisor/system/paths.c) to appear at dst in the sandbox. */
static int plan_clone_at(struct mount_plan *plan, const char *dst, const char *real, uint64_t attr,
                         const char **step)
{
        struct stat st;
        struct mount_item *it;

        *step = set_step(plan, "bind", dst);
        /* Why this is safe: real has no symlink left, and this open follows
         * none, so one planted since gadgetd resolved it cannot redirect it. */
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof how);
        if (fd < 0)
                return -errno;
        int e = fstat(fd, &st) < 0 ? -errno : 0;
        it = e < 0 ? NULL : plan_add(plan, dst);
        if (it) {
                it->is_dir = S_ISDIR(st.st_mode);
                it->tree_fd = (int)syscall(SYS_open_tree, fd, "",
                                           OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
                if (it->tree_fd < 0)
                        e = -errno;
        } else if (e == 0) {
                e = -ENOMEM;
        }
        close(fd);
        if (e < 0)
                return e;
        struct mount_attr ma = { .attr_set = attr };
        if (syscall(SYS_mount_setattr, it->tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof ma) < 0)
                return -errno;
        return 0;
}

static int plan_clone(struct mount_plan *plan, const char *src, uint64_t attr, const char **step)
{
        return plan_clone_at(plan, src, src, attr, step);
}

/* Adds a system directory or file: a symlink (merged /usr, /etc/localtime)
 * is recreated, a directory or file is cloned read-only, a missing one is
 * skipped. */
static int plan_system_dir(struct mount_plan *plan, const char *dir, const char **step)
{
        struct stat st;
        char target[PATH_MAX];

        if (lstat(dir, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlink(dir, target, sizeof target - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                struct mount_item *it = plan_add(plan, dir);
                if (!it || !(it->link = plan_strdup(target)))
                        return -ENOMEM;
                return 0;
        }
        return plan_clone(plan, dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, step);
}

int mounts_early(struct mount_plan **out, const char **step)
{
        struct mount_plan *plan = sandbox_setup_alloc(sizeof *plan);
        int e = 0;

        *step = "mount plan";
        if (!plan)
                return -ENOMEM;
        /* Device nodes stay writable (/dev/null must take writes) but
         * nothing on them can be executed or gain set-uid. */
        for (size_t i = 0; e == 0 && i < sizeof dev_nodes / sizeof *dev_nodes; i++)
                e = plan_clone(plan, dev_nodes[i], MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, step);
        /* Above the numbers the setup's fds are put at (helper.c), which
         * would otherwise replace these. */
        for (size_t i = 0; e == 0 && i < plan->n; i++) {
                int fd = fcntl(plan->items[i].tree_fd, F_DUPFD_CLOEXEC, SANDBOX_FD_CORE + 1);
                if (fd < 0) {
                        e = -errno;
                        break;
                }
                close(plan->items[i].tree_fd);
                plan->items[i].tree_fd = fd;
        }
        if (e < 0) {
                mounts_plan_free(plan);
                return e;
        }
        *out = plan;
        return 0;
}

int mounts_prepare(const struct sandbox_config *cfg, struct mount_plan *plan, const char **step)
{
        char *const *ro_real = cfg->ro_real;
        const char *exec_real = cfg->exec_real;
        const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        int e = 0;

        for (size_t i = 0; cfg->system_libraries && i < sizeof system_dirs / sizeof *system_dirs; i++)
                if ((e = plan_system_dir(plan, system_dirs[i], step)) < 0)
                        goto out;
        for (size_t i = 0; cfg->system_libraries && i < sizeof system_etc / sizeof *system_etc; i++)
                if ((e = plan_system_dir(plan, system_etc[i], step)) < 0)
                        goto out;
        for (size_t i = 0; i < cfg->n_ro_paths; i++)
                if ((e = plan_clone_at(plan, cfg->ro_paths[i], ro_real[i], ro, step)) < 0)
                        goto out;
        /* The program is already visible if its real path lies in a cloned
         * directory (/bin/sh is /usr/bin/dash on a merged-/usr system). */
        if (!plan_covers(plan, exec_real) && (e = plan_clone_at(plan, cfg->exec, exec_real, ro, step)) < 0)
                goto out;
out:
        return e;
}

void mounts_plan_free(struct mount_plan *plan)
{
        if (!plan)
                return;
        /* The memory goes with the setup's (sandbox_setup_release). */
        for (size_t i = 0; i < plan->n; i++)
                if (plan->items[i].tree_fd >= 0)
                        close(plan->items[i].tree_fd);
}

/* mkdir -p of path's parents (path is below BASE). */
static int make_parents(char *path)
{
        for (char *s = path + strlen(BASE) + 1; (s = strchr(s, '/')); s++) {
                *s = '\0';
                int r = mkdir(path, 0755);
                *s = '/';
                if (r < 0 && errno != EEXIST)
                        return -errno;
        }
        return 0;
}

/* Creates the mount point (or symlink) for one item and attaches it. */
static int place_item(const struct mount_item *it)
{
        char path[PATH_MAX];
        struct stat st;

        if (snprintf(path, sizeof path, "%s%s", BASE, it->dst) >= (int)sizeof path)
                return -ENAMETOOLONG;
        int e = make_parents(path);
        if (e < 0)
                return e;
        if (it->link)
                return symlink(it->link, path) < 0 ? -errno : 0;
        if (lstat(path, &st) < 0) {
                if (errno != ENOENT)
                        return -errno;
                if (it->is_dir ? mkdir(path, 0755) < 0 : mknod(path, S_IFREG | 0444, 0) < 0)
                        return -errno;
        }
        if (syscall(SYS_move_mount, it->tree_fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

static int cmp_items(const void *a, const void *b)
{
        return strcmp(((const struct mount_item *)a)->dst, ((const struct mount_item *)b)->dst);
}

/* Room for the root's own entries (mount points, links, /etc/passwd and
 * /etc/group) while it is built; mounts_seal then sizes the tmpfs to what
 * they took plus the gadget's TmpSize. */
#define ROOT_BYTES (1024u * 1024u)
#define ROOT_INODES 4096u

/* TmpSize's inodes: size/4K, at least 256. */
static uint64_t tmp_inodes(const struct sandbox_config *cfg)
{
        return cfg->tmp_size / 4096 < 256 ? 256 : cfg->tmp_size / 4096;
}

/* The root tmpfs. It is also the gadget's /tmp and /dev/shm (POSIX shared
 * memory and semaphores: Python's multiprocessing), two directories of it
 * mounted again on themselves (private_dir): one superblock, not three.
 * Why that matters: every superblock registers a memory-cgroup-aware
 * shrinker, and every memory cgroup made after it holds a slot for it, so
 * each superblock a sandbox has makes every later gadget's cgroup larger
 * (bench/notes.md, "Issue 36: one tmpfs a sandbox"). The bound is
 * TmpSize for /tmp and /dev/shm together (size; inodes size/4K, at least
 * 256), plus the root's few files. Why this is safe: the tmpfs is new,
 * empty and the gadget's alone; its pages are charged to the memory cgroup
 * of the process that writes them, so they count in MemoryMax; the root
 * mount turns read-only before the gadget runs (mounts_seal), /tmp and
 * /dev/shm are mounts of their own that stay writable, none of them gains
 * set-uid or device rights, and /dev/shm is not executable. */
static int mount_root(const struct sandbox_config *cfg)
{
        char opts[128];
        snprintf(opts, sizeof opts, "mode=0755,size=%llu,nr_inodes=%llu",
                 (unsigned long long)(cfg->tmp_size + ROOT_BYTES), (unsigned long long)(tmp_inodes(cfg) + ROOT_INODES));
        return mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0 ? -errno : 0;
}

/* The root tmpfs (at "/") sized to what its own entries took plus
 * TmpSize, in bytes and in inodes: what the gadget may write in /tmp and
 * /dev/shm together is TmpSize, whatever the policy's paths made. */
static int size_root(const struct sandbox_config *cfg)
{
        struct statfs st;
        if (statfs("/", &st) < 0)
                return -errno;
        uint64_t used = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
        uint64_t files = (uint64_t)(st.f_files - st.f_ffree);
        char size[32], inodes[32];
        snprintf(size, sizeof size, "%llu", (unsigned long long)(used + cfg->tmp_size));
        snprintf(inodes, sizeof inodes, "%llu", (unsigned long long)(files + tmp_inodes(cfg)));
        int fd = fspick(AT_FDCWD, "/", FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT);
        if (fd < 0)
                return -errno;
        int e = fsconfig(fd, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
                                fsconfig(fd, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
                                fsconfig(fd, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0
                        ? -errno
                        : 0;
        close(fd);
        return e;
}

/* dir (on the root tmpfs) as a writable mount of its own, mode 1777: the
 * root's read-only flag, set later on the root mount alone, does not reach
 * it. */
static int private_dir(const char *dir, unsigned long flags)
{
        if (mkdir(dir, 01777) < 0 || chmod(dir, 01777) < 0 || mount(dir, dir, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | flags, NULL) < 0)
                return -errno;
        return 0;
}

static int make_dev_links(void)
{
        static const char *const links[][2] = {
                { "/proc/self/fd", BASE "/dev/fd" },
                { "/proc/self/fd/0", BASE "/dev/stdin" },
                { "/proc/self/fd/1", BASE "/dev/stdout" },
                { "/proc/self/fd/2", BASE "/dev/stderr" },
        };
        for (size_t i = 0; i < sizeof links / sizeof *links; i++)
                if (symlink(links[i][0], links[i][1]) < 0)
                        return -errno;
        return 0;
}

int mounts_build(const struct mount_plan *cplan, const struct sandbox_config *cfg, const char **step)
{
        struct mount_plan *plan = (struct mount_plan *)cplan;
        int e = 0;

        umask(022);
        *step = "mount root tmpfs";
        if ((e = mount_root(cfg)) < 0)
                return e;
        /* /dev, /tmp and /proc first, so that a listed path below /tmp is
         * mounted on the gadget's /tmp instead of being hidden by it. */
        *step = "make /dev";
        if (mkdir(BASE "/dev", 0755) < 0 || (e = make_dev_links()) < 0)
                return e < 0 ? e : -errno;
        *step = "mount /tmp";
        if ((e = private_dir(BASE "/tmp", 0)) < 0)
                return e;
        *step = "mount /dev/shm";
        if ((e = private_dir(BASE "/dev/shm", MS_NOEXEC)) < 0)
                return e;
        *step = "mount /proc";
        if (mkdir(BASE "/proc", 0555) < 0)
                return -errno;
        if (mount("proc", BASE "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return -errno;
        /* Filled once the cgroup namespace is made (cgroupfs.c). */
        *step = "make /sys/fs/cgroup";
        if (mkdir(BASE "/sys", 0555) < 0 || mkdir(BASE "/sys/fs", 0555) < 0 || mkdir(BASE "/sys/fs/cgroup", 0555) < 0)
                return -errno;
        /* Before the listed paths: one listing /etc/passwd hides this one. */
        *step = "write /etc/passwd";
        if ((e = etcfiles_write(BASE "/etc", cfg->name)) < 0)
                return e;
        /* Shorter paths first, so a parent is in place before its children. */
        qsort(plan->items, plan->n, sizeof *plan->items, cmp_items);
        for (size_t i = 0; i < plan->n; i++) {
                *step = set_step(plan, "mount", plan->items[i].dst);
                if ((e = place_item(&plan->items[i])) < 0)
                        return e;
        }
        /* Swap roots and drop the host's tree: nothing of it stays reachable. */
        *step = "pivot_root";
        if (chdir(BASE) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
            umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
                return -errno;
        return 0;
}

/* After cgroupfs_mount, which makes its v1 mount points on the root
 * tmpfs itself (one superblock less than a tmpfs of their own), and
 * before anything of the gadget's runs. */
int mounts_seal(const struct sandbox_config *cfg, const char **step)
{
        int e;
        *step = "size the root tmpfs";
        if ((e = size_root(cfg)) < 0)
                return e;
        *step = "make root read-only";
        struct mount_attr ma = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        if (syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &ma, sizeof ma) < 0)
                return -errno;
        return 0;
}
