/* unit_core: CoreDump=, the cores of a gadget's crashes. For each run of
 * a gadget with CoreDump=SIZE, gadgetd makes a memfd of SIZE bytes and
 * seals its size, and hands it to the sandbox (SANDBOX_FD_CORE); the
 * sandbox's init writes a crash's core into it (worker/sandbox/core.c)
 * and reports its length; gadgetd copies that many bytes, at most SIZE,
 * into STATE_DIR/cores/NAME/ and keeps the last UNIT_CORES_KEPT there,
 * within the gadget's state quota (StateMax=, with its kv store's files:
 * the oldest cores go to make room, and a core that does not fit beside
 * the kv store is not kept).
 * Why this is safe: the sandbox writes only into a memfd gadgetd made and
 * sealed (it cannot grow it, nor name any file); the file is gadgetd's own,
 * in a directory of root's only, named by gadgetd; reading a memfd never
 * blocks. Without CoreDump= no memfd is made and no core is written
 * anywhere (RLIMIT_CORE stays 0 in the sandbox). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core_int.h"
#include "policy.h"
#include "store/kvdb.h"
#include "system/log.h"

int unit_core_fd(const struct policy *p)
{
        if (!p->core_dump)
                return -1;
        int fd = memfd_create("gadget-core", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -1;
        if (ftruncate(fd, (off_t)p->core_dump) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* STATE_DIR/cores/NAME, made if need be (0700, root's). */
static int cores_dir(const struct unit *u, char *out, size_t len)
{
        const char *state = u->core->cfg.state_dir;
        if (!state || !state[0])
                return -ENOENT;
        snprintf(out, len, "%s/cores", state);
        if (mkdir(out, 0700) < 0 && errno != EEXIST)
                return -errno;
        snprintf(out, len, "%s/cores/%s", state, u->policy->name);
        if (mkdir(out, 0700) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of dir's cores, oldest first (their names begin with the
 * time, zero-padded); their number. */
static size_t core_names(const char *dir, char ***out)
{
        size_t n = 0, cap = 0;
        char **v = NULL;
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l < 6 || strcmp(de->d_name + l - 5, ".core") != 0)
                        continue;
                if (n == cap) {
                        char **nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof *nv);
                        if (!nv)
                                break;
                        v = nv;
                }
                if ((v[n] = strdup(de->d_name)))
                        n++;
        }
        if (d)
                closedir(d);
        if (n)
                qsort(v, n, sizeof *v, by_name);
        *out = v;
        return n;
}

static void names_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* Whether the host's core handler is systemd-coredump (core_pattern
 * pipes to it). */
static bool host_coredump(void)
{
        char pattern[256] = "";
        int fd = open("/proc/sys/kernel/core_pattern", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, pattern, sizeof pattern - 1);
        close(fd);
        pattern[n > 0 ? n : 0] = '\0';
        return pattern[0] == '|' && strstr(pattern, "systemd-coredump");
}

/* Where systemd-coredump is the host's core handler, the core shows in
 * coredumpctl too: a journal entry with its MESSAGE_ID and the
 * COREDUMP_* fields coredumpctl reads, the gadget's name as the command,
 * COREDUMP_FILENAME the core gadgetd kept. */
static void coredumpctl_entry(const struct unit *u, const struct unit_run *r, const char *path, int sig,
                              const struct timespec *at)
{
        char pid[16], uid[16], signo[16], signame[24], usec[32], line[200];
        const char *s = sigabbrev_np(sig);
        if (!host_coredump())
                return;
        snprintf(pid, sizeof pid, "%d", (int)r->program_pid);
        snprintf(uid, sizeof uid, "%u", (unsigned)r->uid);
        snprintf(signo, sizeof signo, "%d", sig);
        snprintf(signame, sizeof signame, "SIG%s", s ? s : "UNKNOWN");
        snprintf(usec, sizeof usec, "%lld", (long long)at->tv_sec * 1000000 + at->tv_nsec / 1000);
        const struct log_field f[] = {
                { "COREDUMP_PID", pid }, { "COREDUMP_UID", uid }, { "COREDUMP_GID", uid },
                { "COREDUMP_SIGNAL", signo }, { "COREDUMP_SIGNAL_NAME", signame }, { "COREDUMP_TIMESTAMP", usec },
                { "COREDUMP_COMM", u->policy->name }, { "COREDUMP_EXE", u->policy->exec },
                { "COREDUMP_FILENAME", path },
        };
        snprintf(line, sizeof line, "Process %s (%s) of user %s dumped core.", pid, u->policy->name, uid);
        log_fields(L_WARN, u->policy->name, "MESSAGE_ID=fc2e22bc6ee647b6b90729ab34a250b1", f, sizeof f / sizeof *f,
                   line);
}

/* What the gadget's state quota (StateMax=) leaves for its cores beside
 * its kv store's files now (UINT64_MAX: no quota). */
static uint64_t cores_budget(const struct unit *u)
{
        const struct policy *p = u->policy;
        if (p->state_max == POLICY_UNLIMITED)
                return UINT64_MAX;
        uint64_t kv = kvdb_disk_bytes(u->core->cfg.state_dir, p->name);
        return kv < p->state_max ? p->state_max - kv : 0;
}

/* Makes room in dir for a core of size (0: none is added): the oldest
 * cores go until, with the new one, at most UNIT_CORES_KEPT are left and
 * they fit in budget.
 * Why before writing: the state never goes over its quota, not even for a
 * moment. */
static void cores_make_room(const char *dir, uint64_t size, uint64_t budget)
{
        char path[700];
        char **names;
        size_t n = core_names(dir, &names);
        uint64_t *bytes = n ? calloc(n, sizeof *bytes) : NULL, sum = 0;
        for (size_t i = 0; bytes && i < n; i++) {
                struct stat st;
                snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                bytes[i] = lstat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
                sum += bytes[i];
        }
        for (size_t i = 0; i < n && (n - i + (size > 0) > UNIT_CORES_KEPT || !bytes || sum + size > budget); i++) {
                snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                if (unlink(path) == 0 && bytes)
                        sum -= bytes[i];
        }
        free(bytes);
        names_free(names, n);
}

void unit_core_save(struct unit *u, const struct unit_run *r, uint64_t size, int sig)
{
        int fd = r->core_fd;
        uint32_t run = r->number;
        char dir[512], path[700], tmp[720];
        struct stat st;
        if (fd < 0 || size == 0 || fstat(fd, &st) < 0)
                return;
        /* The sandbox's word for its length, bounded by the memfd's. */
        if (size > (uint64_t)st.st_size)
                size = (uint64_t)st.st_size;
        uint64_t budget = cores_budget(u);
        int e = cores_dir(u, dir, sizeof dir);
        if (e < 0) {
                log_msg(L_WARN, u->policy->name, "core not kept: %s: %s", dir, strerror(-e));
                return;
        }
        if (size > budget) {
                /* The gadget's data comes first: a core never takes room its
                 * kv store holds, and older cores go as the store grows. */
                cores_make_room(dir, 0, budget);
                log_msg(L_WARN, u->policy->name,
                        "core not kept: its %llu bytes do not fit in StateMax=%llu beside the gadget's kv store "
                        "(%llu bytes left for cores)",
                        (unsigned long long)size, (unsigned long long)u->policy->state_max,
                        (unsigned long long)budget);
                return;
        }
        cores_make_room(dir, size, budget);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        const char *s = sigabbrev_np(sig);
        snprintf(path, sizeof path, "%s/%013lld-%u-SIG%s.core", dir,
                 (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, run, s ? s : "UNKNOWN");
        snprintf(tmp, sizeof tmp, "%s.new", path);
        int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) {
                log_msg(L_WARN, u->policy->name, "core not kept: %s: %s", tmp, strerror(errno));
                return;
        }
        static char buf[1 << 16];
        uint64_t done = 0;
        while (done < size) {
                size_t want = size - done > sizeof buf ? sizeof buf : (size_t)(size - done);
                ssize_t got = pread(fd, buf, want, (off_t)done);
                if (got <= 0 || write(out, buf, (size_t)got) != got)
                        break;
                done += (uint64_t)got;
        }
        if (close(out) < 0 || done != size || rename(tmp, path) < 0) {
                log_msg(L_WARN, u->policy->name, "core not kept: %s", path);
                unlink(tmp);
                return;
        }
        log_msg(L_INFO, u->policy->name, "core of its crash kept: %s (%llu bytes)", path, (unsigned long long)size);
        coredumpctl_entry(u, r, path, sig, &now);
}

size_t unit_cores(const struct unit *u, struct unit_core_file **out)
{
        char dir[512], path[700];
        const char *state = u->core->cfg.state_dir;
        *out = NULL;
        if (!state || !state[0])
                return 0;
        snprintf(dir, sizeof dir, "%s/cores/%s", state, u->policy->name);
        char **names;
        size_t n = core_names(dir, &names), k = 0;
        struct unit_core_file *f = n ? calloc(n, sizeof *f) : NULL;
        for (size_t i = 0; f && i < n; i++) {
                struct stat st;
                long long ms;
                unsigned run;
                char sig[16];
                snprintf(path, sizeof path, "%s/%s", dir, names[i]);
                if (sscanf(names[i], "%13lld-%u-SIG%15[A-Z0-9+]", &ms, &run, sig) != 3 || lstat(path, &st) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                char *dot = strchr(sig, '.');
                if (dot)
                        *dot = '\0';
                f[k] = (struct unit_core_file){ .time_ms = ms, .run = run, .size = (uint64_t)st.st_size };
                snprintf(f[k].signal, sizeof f[k].signal, "%s", sig);
                snprintf(f[k].path, sizeof f[k].path, "%s", path);
                k++;
        }
        names_free(names, n);
        *out = f;
        return k;
}
