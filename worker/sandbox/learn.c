/* learn: a learning run (gadgetd run --learn). The program runs under the
 * filter's `learn` variant, which also holds every call that looks a path
 * up (open, stat, access, execve, chdir ...) for the init: the init reads
 * the path from the program's memory, follows it as the kernel would
 * (symlinks, the program's working directory or dirfd) in the sandbox's
 * root, and reports each path it could not find once, and the interpreter
 * of a program it execs that is not there; then it lets the call go on
 * exactly as the program's filter allows it. Refused calls are counted as
 * in every run (denials.c). gadgetd writes the policy the program would
 * need from these (supervisor/learn.c). Why this cannot widen anything:
 * only a call the filter allows anyway goes on (filter_verdict on
 * `direct` says so for each), and the lookup is the program's own, in its
 * own world: the init only looks. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "policy.h"
#include "sandbox.pb-c.h"
#include "wire.h"

/* Distinct paths reported in a run, at most. */
#define LEARN_SEEN_MAX 1024

struct seen {
        char *path, *of;
        uint32_t nr;
};
static struct seen *seen;
static size_t n_seen, n_sent;
static bool started;                   /* gadgetd was told the start is done (learn_started) */

/* The path argument of a lookup, and its dirfd argument (-1: none). */
static bool lookup_args(int nr, int *path, int *dirfd, int *flags)
{
        *dirfd = -1;
        *flags = -1;
        switch (nr) {
        case SYS_open: *path = 0; *flags = 1; return true;
        case SYS_creat: case SYS_stat: case SYS_lstat: case SYS_access: case SYS_readlink: case SYS_execve:
        case SYS_chdir:
                *path = 0;
                return true;
        case SYS_openat: *path = 1; *dirfd = 0; *flags = 2; return true;
        case SYS_openat2: case SYS_newfstatat: case SYS_statx: case SYS_faccessat: case SYS_faccessat2:
        case SYS_readlinkat: case SYS_execveat:
                *path = 1;
                *dirfd = 0;
                return true;
        default: return false;
        }
}

/* Reads a NUL-ended string of the program's memory at addr into buf
 * (size bytes at most); 0, or -1 if it cannot be read whole. */
static int read_string(pid_t pid, uint64_t addr, char *buf, size_t size)
{
        ssize_t r = sandbox_read_mem(pid, addr, buf, size);
        if (r <= 0)
                return -1;
        return strlen(buf) < (size_t)r || r < (ssize_t)size - 1 ? 0 : -1;
}

/* Where a relative path starts: the program's working directory, or the
 * directory its dirfd names, as a path of the sandbox's root. */
static int base_dir(pid_t pid, int dirfd, char *buf, size_t size)
{
        char link[64];
        if (dirfd == AT_FDCWD || dirfd < 0)
                snprintf(link, sizeof link, "/proc/%d/cwd", (int)pid);
        else
                snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, dirfd);
        ssize_t n = readlink(link, buf, size - 1);
        if (n <= 0 || buf[0] != '/')
                return -1;
        buf[n] = '\0';
        return 0;
}

/* Follows path (absolute) in this root as a lookup would, symlinks
 * included (at most 16), and writes to out the path from the first name
 * that is not there on, its symlinks followed; 1 if a name is missing, 0
 * if the path is there (or cannot be told). */
static int first_missing(const char *path, char *out, size_t size)
{
        char cur[PATH_MAX], rest[PATH_MAX];
        int hops = 0;
        snprintf(rest, sizeof rest, "%s", path);
        snprintf(cur, sizeof cur, "/");
        char *p = rest;
        while (*p) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                char *end = strchr(p, '/');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                char name[NAME_MAX + 1], next[PATH_MAX];
                if (len > NAME_MAX)
                        return 0;
                memcpy(name, p, len);
                name[len] = '\0';
                p += len;
                if (strcmp(name, ".") == 0)
                        continue;
                if (strcmp(name, "..") == 0) {
                        char *slash = strrchr(cur, '/');
                        if (slash && slash != cur)
                                *slash = '\0';
                        else
                                snprintf(cur, sizeof cur, "/");
                        continue;
                }
                if (snprintf(next, sizeof next, "%s%s%s", cur, strcmp(cur, "/") ? "/" : "", name) >= (int)sizeof next)
                        return 0;
                struct stat st;
                if (lstat(next, &st) < 0) {
                        if (errno != ENOENT && errno != ENOTDIR)
                                return 0;
                        /* The whole path, from the name missing on. */
                        snprintf(out, size, "%s%s", next, p);
                        return 1;
                }
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX], joined[PATH_MAX];
                        ssize_t n = readlink(next, target, sizeof target - 1);
                        if (n <= 0 || ++hops > 16)
                                return 0;
                        target[n] = '\0';
                        /* The link's target, then what was left of the path. */
                        if (snprintf(joined, sizeof joined, "%s%s%s", target[0] == '/' ? "" : cur,
                                     target[0] == '/' || strcmp(cur, "/") == 0 ? "" : "/", target) >= (int)sizeof joined ||
                            snprintf(next, sizeof next, "%s%s", joined, p) >= (int)sizeof next)
                                return 0;
                        snprintf(rest, sizeof rest, "%s", next);
                        p = rest;
                        snprintf(cur, sizeof cur, "/");
                        continue;
                }
                snprintf(cur, sizeof cur, "%s", next);
        }
        return 0;
}

/* Sends what was seen and not sent yet, once the start was reported
 * (gadgetd reads the start's reports first, then these). */
static void send_seen(int report_fd)
{
        for (; started && n_sent < n_seen; n_sent++) {
                Sandbox__Learned l = SANDBOX__LEARNED__INIT;
                Sandbox__Report rep = SANDBOX__REPORT__INIT;
                l.path = seen[n_sent].path;
                l.nr = seen[n_sent].nr;
                l.interpreter_of = seen[n_sent].of ? seen[n_sent].of : "";
                rep.kind_case = SANDBOX__REPORT__KIND_LEARNED;
                rep.learned = &l;
                (void)wire_send_atomic(report_fd, &rep.base);
        }
}

void learn_started(int report_fd)
{
        started = true;
        send_seen(report_fd);
}

/* Reports path (once a run) as missing, or as the missing interpreter of
 * of when of is not NULL. */
static void report(int report_fd, const char *path, uint32_t nr, const char *of)
{
        if (strlen(path) > SANDBOX_REPORT_TEXT_MAX || (of && strlen(of) > SANDBOX_REPORT_TEXT_MAX))
                return;
        for (size_t i = 0; i < n_seen; i++)
                if (strcmp(seen[i].path, path) == 0)
                        return;
        if (!seen && !(seen = calloc(LEARN_SEEN_MAX, sizeof *seen)))
                return;
        if (n_seen == LEARN_SEEN_MAX || !(seen[n_seen].path = strdup(path)))
                return;
        seen[n_seen].of = of ? strdup(of) : NULL;
        seen[n_seen++].nr = nr;
        send_seen(report_fd);
}

/* Looks at one held lookup: what of it is missing, reported. */
static void look(const struct seccomp_notif *n, int report_fd)
{
        int pa, da, fa;
        char path[PATH_MAX], base[PATH_MAX], abs[PATH_MAX], missing[PATH_MAX];
        if (!lookup_args(n->data.nr, &pa, &da, &fa) || read_string((pid_t)n->pid, n->data.args[pa], path, sizeof path) < 0 ||
            !path[0])
                return;
        /* Creating a file that is not there yet is no lookup that failed. */
        if ((fa >= 0 && (n->data.args[fa] & O_CREAT)) || n->data.nr == SYS_creat)
                return;
        if (path[0] == '/')
                snprintf(abs, sizeof abs, "%s", path);
        else if (base_dir((pid_t)n->pid, da >= 0 ? (int)n->data.args[da] : AT_FDCWD, base, sizeof base) < 0 ||
                 snprintf(abs, sizeof abs, "%s/%s", base, path) >= (int)sizeof abs)
                return;
        /* The kernel's own trees: their links lead into other worlds (the
         * host's paths of /proc/1/exe), and no key adds to them. */
        if (strncmp(abs, "/proc/", 6) == 0 || strncmp(abs, "/sys/", 5) == 0 || strncmp(abs, "/dev/", 5) == 0)
                return;
        if (first_missing(abs, missing, sizeof missing) == 1) {
                report(report_fd, missing, (uint32_t)n->data.nr, NULL);
                return;
        }
        /* A program it execs that is there: is its interpreter? */
        char interp[PATH_MAX];
        if ((n->data.nr == SYS_execve || n->data.nr == SYS_execveat) &&
            policy_interpreter(abs, interp, sizeof interp) > 0 && first_missing(interp, missing, sizeof missing) == 1)
                report(report_fd, missing, (uint32_t)n->data.nr, abs);
}

int learn_lookup(int listener, const struct seccomp_notif *n, int report_fd)
{
        look(n, report_fd);
        struct seccomp_notif_resp resp;
        memset(&resp, 0, sizeof resp);
        resp.id = n->id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT && errno != EINTR)
                return -errno;
        return 0;
}
