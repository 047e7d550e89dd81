/* spawn: clone(), id maps and the start handshake with the child. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "policy.h"
#include "paths.h"
#include "sandbox.h"

#define CHILD_STACK (256u * 1024u)
#define START_TIMEOUT_MS 10000

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | \
                  CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static int write_file(pid_t pid, const char *name, const char *text)
{
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int e = n < 0 ? -errno : (size_t)n != strlen(text) ? -EIO : 0;
        close(fd);
        return e;
}

/* Maps the gadget's inner id to its own host id, nothing else. Why this is
 * safe: a one-line map cannot name host uid 0 (the pool never hands it
 * out), and setgroups is denied before the gid map is written. */
static int write_id_maps(pid_t pid, uid_t host)
{
        char map[64];
        int e;
        snprintf(map, sizeof map, "%d %u 1\n", SANDBOX_INNER_ID, (unsigned)host);
        if ((e = write_file(pid, "uid_map", map)) < 0 ||
            (e = write_file(pid, "setgroups", "deny")) < 0 ||
            (e = write_file(pid, "gid_map", map)) < 0)
                return e;
        return 0;
}

/* argv[0] is the program path; then the arguments. */
static char **build_argv(const struct spawn_opts *o)
{
        const struct policy *p = o->policy;
        size_t n = 0;
        if (o->args)
                while (o->args[n])
                        n++;
        else
                n = p->argc;
        char **argv = calloc(n + 2, sizeof *argv);
        if (!argv)
                return NULL;
        argv[0] = p->exec;
        for (size_t i = 0; i < n; i++)
                argv[i + 1] = o->args ? o->args[i] : p->argv[i];
        return argv;
}

/* The program's environment: the fixed entries, then the policy's own
 * (which may override PATH or HOME, never GADGET_FD/GADGET_NAME). */
static char **build_envp(const struct policy *p)
{
        char **envp = calloc(p->n_env + 6, sizeof *envp);
        size_t n = 0;
        if (!envp)
                return NULL;
        if (asprintf(&envp[n++], "GADGET_FD=%d", SANDBOX_RPC_FD) < 0 ||
            asprintf(&envp[n++], "GADGET_NAME=%s", p->name) < 0 ||
            !(envp[n++] = strdup("PATH=/usr/local/bin:/usr/bin:/bin")) ||
            !(envp[n++] = strdup("HOME=/tmp")))
                goto fail;
        for (size_t i = 0; i < p->n_env; i++) {
                if (strncmp(p->env[i], "GADGET_", 7) == 0)
                        continue;
                if (!(envp[n++] = strdup(p->env[i])))
                        goto fail;
        }
        return envp;
fail:
        for (size_t i = 0; i < n; i++)
                free(envp[i]);
        free(envp);
        return NULL;
}

static void free_strv(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

int spawn_read_report(int report_fd, int *status, char *msg, size_t msglen)
{
        uint8_t hdr[3];
        char buf[512];
        ssize_t n = read(report_fd, hdr, sizeof hdr);
        if (n == 0)
                return 0;
        if (n < 0)
                return -errno;
        if (n != 3)
                return -EPROTO;
        size_t len = (size_t)hdr[1] | (size_t)hdr[2] << 8;
        if (len > sizeof buf || (len > 0 && read(report_fd, buf, len) != (ssize_t)len))
                return -EPROTO;
        if (hdr[0] == SANDBOX_REPORT_STATUS && len == sizeof(int) && status)
                memcpy(status, buf, sizeof(int));
        if (msg && msglen)
                snprintf(msg, msglen, "%.*s", (int)len, buf);
        return hdr[0];
}

/* Waits for the child's first report: READY, or ERROR with the reason. */
static int await_start(const struct spawn_child *c, char *err, size_t errlen)
{
        struct pollfd pfd = { .fd = c->report_fd, .events = POLLIN };
        int r = poll(&pfd, 1, START_TIMEOUT_MS);
        if (r == 0) {
                snprintf(err, errlen, "sandbox setup timed out");
                return -ETIMEDOUT;
        }
        char msg[512] = "";
        r = spawn_read_report(c->report_fd, NULL, msg, sizeof msg);
        if (r == SANDBOX_REPORT_READY)
                return 0;
        if (r == SANDBOX_REPORT_ERROR) {
                snprintf(err, errlen, "%s", msg);
                return -ECHILD;
        }
        snprintf(err, errlen, "sandbox setup ended without a report");
        return r < 0 ? r : -ECHILD;
}

/* The policy's host paths with symlinks resolved where that is safe; see
 * supervisor/paths.c. Sets err and returns -errno on the first refusal. */
static int resolve_paths(const struct policy *p, char ***ro_real, char *exec_real, char *err, size_t errlen)
{
        char real[PATH_MAX];
        const char *what = NULL;
        char **v = calloc(p->n_ro_paths + 1, sizeof *v);
        int e = v ? 0 : -ENOMEM;
        for (size_t i = 0; e == 0 && i < p->n_ro_paths; i++) {
                if ((e = paths_resolve_trusted(p->ro_paths[i], real)) < 0)
                        what = p->ro_paths[i];
                else if (!(v[i] = strdup(real)))
                        e = -ENOMEM;
        }
        if (e == 0 && (e = paths_resolve_trusted(p->exec, exec_real)) < 0)
                what = p->exec;
        if (e < 0) {
                if (e == -ELOOP)
                        snprintf(err, errlen, "bind (a symlink in a directory others may write) %s", what);
                else if (what)
                        snprintf(err, errlen, "resolve %s: %s", what, strerror(-e));
                for (size_t i = 0; v && i < p->n_ro_paths; i++)
                        free(v[i]);
                free(v);
                return e;
        }
        *ro_real = v;
        return 0;
}

int spawn_gadget(const struct spawn_opts *o, struct spawn_child *out, char *err, size_t errlen)
{
        struct spawn_child c = { .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = -1 };
        int sv[2] = { -1, -1 }, go[2] = { -1, -1 }, rep[2] = { -1, -1 };
        int devnull = -1, self = -1, e;
        char **argv = build_argv(o), **envp = build_envp(o->policy), **ro_real = NULL;
        char exec_real[PATH_MAX];
        void *stack = MAP_FAILED;

        snprintf(err, errlen, "out of memory");
        if (!argv || !envp) {
                e = -ENOMEM;
                goto out;
        }
        if ((e = resolve_paths(o->policy, &ro_real, exec_real, err, errlen)) < 0)
                goto out;
        snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
            pipe2(go, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
            (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
            (self = (int)syscall(SYS_pidfd_open, getpid(), 0)) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
                goto out;
        }
        stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (stack == MAP_FAILED) {
                e = -errno;
                goto out;
        }
        struct sandbox_config cfg = {
                .policy = o->policy, .argv = argv, .envp = envp, .filter = o->filter,
                .ro_real = ro_real, .exec_real = exec_real,
                .go_fd = go[0], .parent_pidfd = self, .report_fd = rep[1], .rpc_fd = sv[1],
                .stdout_fd = o->stdout_fd, .stderr_fd = o->stderr_fd, .devnull_fd = devnull,
                .nproc = o->nproc, .address_space = o->address_space,
        };
        c.pid = clone(sandbox_main, (char *)stack + CHILD_STACK, NS_FLAGS | CLONE_PIDFD | SIGCHLD,
                      &cfg, &c.pidfd);
        if (c.pid < 0) {
                e = -errno;
                snprintf(err, errlen, "namespaces: %s", strerror(errno));
                goto out;
        }
        close(go[0]);
        go[0] = -1;
        close(rep[1]);
        rep[1] = -1;
        close(sv[1]);
        sv[1] = -1;
        c.report_fd = rep[0];
        rep[0] = -1;
        c.rpc_fd = sv[0];
        sv[0] = -1;
        e = write_id_maps(c.pid, o->host_uid);
        if (e < 0) {
                snprintf(err, errlen, "user namespace id map: %s", strerror(-e));
                goto out;
        }
        /* Into the gadget's cgroup while the child still waits for the go
         * byte: its whole setup and the program count against the limits. */
        if (o->cgroup && (e = cgroup_attach(o->cgroup, c.pid, err, errlen)) < 0)
                goto out;
        if (write(go[1], "g", 1) != 1) {
                e = -errno;
                snprintf(err, errlen, "start signal: %s", strerror(errno));
                goto out;
        }
        e = await_start(&c, err, errlen);
        if (e < 0)
                goto out;
        if (fcntl(c.rpc_fd, F_SETFL, O_NONBLOCK) < 0) {
                e = -errno;
                goto out;
        }
        *out = c;
        c = (struct spawn_child){ .pid = -1, .pidfd = -1, .rpc_fd = -1, .report_fd = -1 };
        e = 0;
out:
        if (c.pid > 0) {
                /* The start failed: the child must not outlive it. */
                kill(c.pid, SIGKILL);
                waitpid(c.pid, NULL, 0);
        }
        spawn_child_close(&c);
        for (int i = 0; i < 2; i++) {
                if (sv[i] >= 0) close(sv[i]);
                if (go[i] >= 0) close(go[i]);
                if (rep[i] >= 0) close(rep[i]);
        }
        if (devnull >= 0)
                close(devnull);
        if (self >= 0)
                close(self);
        if (stack != MAP_FAILED)
                munmap(stack, CHILD_STACK);
        free(argv);
        for (size_t i = 0; ro_real && i < o->policy->n_ro_paths; i++)
                free(ro_real[i]);
        free(ro_real);
        free_strv(envp);
        return e;
}

void spawn_child_close(struct spawn_child *c)
{
        if (c->pidfd >= 0)
                close(c->pidfd);
        if (c->rpc_fd >= 0)
                close(c->rpc_fd);
        if (c->report_fd >= 0)
                close(c->report_fd);
        c->pidfd = c->rpc_fd = c->report_fd = -1;
}
