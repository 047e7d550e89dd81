/* adopt: the next image's side of gadgetctl daemon-reexec (adopt.h). */
#include "adopt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "policy.h"
#include "system/loader.h"
#include "system/log.h"
#include "system/proc.h"

void adopt_read(int fd, struct reexec_state *s)
{
        char err[512];
        int e = reexec_state_read(fd, s, err, sizeof err), fds[1024];
        size_t n = 0;
        close(fd);
        if (e < 0) {
                log_msg(L_ERR, NULL, "the state handed on by gadgetd's re-exec (%s %d) cannot be read, so no gadget "
                        "is adopted and those of the previous image are ended: %s", REEXEC_OPTION, fd, err);
                reexec_state_free(s);
        }
        DIR *dp = opendir("/proc/self/fd");
        struct dirent *de;
        while (dp && (de = readdir(dp)) && n < sizeof fds / sizeof *fds) {
                int x = atoi(de->d_name);
                if (x > 2 && x != dirfd(dp) && !reexec_fd_kept(s, x))
                        fds[n++] = x;
        }
        if (dp)
                closedir(dp);
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
}

/* True if pid is one of the n in v. */
static bool pid_in(const pid_t *v, size_t n, pid_t pid)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] == pid)
                        return true;
        return false;
}

/* Ends every child of gadgetd but the n workers in kept: what the previous
 * image left that was not adopted (no sandbox lives on without a gadgetd
 * that watches it). Returns how many. */
static size_t end_orphans(const pid_t *kept, size_t n)
{
        DIR *dp = opendir("/proc");
        struct dirent *de;
        pid_t ended[4096];
        size_t k = 0;
        while (dp && (de = readdir(dp)) && k < sizeof ended / sizeof *ended) {
                pid_t pid = atoi(de->d_name);
                if (pid <= 1 || pid_in(kept, n, pid))
                        continue;
                /* Why a kill by pid is safe: a child is not reaped, so its
                 * pid cannot be another process's. */
                if (proc_is_child(pid) && kill(pid, SIGKILL) == 0)
                        ended[k++] = pid;
        }
        if (dp)
                closedir(dp);
        for (size_t i = 0; i < k; i++)
                waitpid(ended[i], NULL, 0);
        return k;
}

/* The policy s's gadget ran, from the text the previous image kept of its
 * file (parsed as a file is: it is one, in memory): 0 with *p, or -errno
 * with msg. Its hash must be the one it was loaded with. */
static int policy_kept(const struct unit_saved *s, struct policy **p, char *msg, size_t len)
{
        struct policy_errors errs = { 0 };
        uint64_t hash = 0;
        int fd = memfd_create("policy", MFD_CLOEXEC), e = 0;
        if (!s->text_len) {
                snprintf(msg, len, "its policy text was not kept");
                e = -ENOENT;
        } else if (fd < 0 || fchmod(fd, 0600) < 0 || write(fd, s->text, s->text_len) != (ssize_t)s->text_len ||
                   lseek(fd, 0, SEEK_SET) < 0) {
                e = -errno;
                snprintf(msg, len, "its kept policy: %s", strerror(-e));
        } else if ((e = policy_load_fd(fd, s->path, 0, p, &errs, &hash)) < 0) {
                snprintf(msg, len, "its kept policy does not parse: %s", errs.n ? errs.msgs[0] : strerror(-e));
        } else if (hash != s->policy_hash || strcmp((*p)->name, s->name) != 0) {
                snprintf(msg, len, "its kept policy is not the one it was loaded with");
                policy_free(*p);
                *p = NULL;
                e = -EINVAL;
        }
        policy_errors_clear(&errs);
        if (fd >= 0)
                close(fd);
        return e;
}

/* The policy to adopt s's gadget with: its file's if unchanged, else the
 * one it ran (*changed). 0, or -errno with msg. */
static int policy_for(const struct unit_saved *s, struct policy **p, bool *changed, char *msg, size_t len)
{
        uint64_t hash = 0;
        *changed = false;
        if (loader_read(s->path, NULL, s->from_dir, p, &hash, msg, len) >= 0) {
                if (hash == s->policy_hash && strcmp((*p)->name, s->name) == 0)
                        return 0;
                policy_free(*p);
                *p = NULL;
        }
        *changed = true;
        return policy_kept(s, p, msg, len);
}

static void close_fds(const struct unit_saved *s)
{
        const int fds[] = { s->rpc_fd, s->report_fd, s->out_fd, s->err_fd, s->pidfd, s->core_fd };
        for (size_t k = 0; k < 6; k++)
                if (fds[k] >= 0)
                        close(fds[k]);
}

bool adopt_units(struct core *c, struct reexec_state *s, char *out, size_t outlen)
{
        size_t running = 0, adopted = 0, nk = 0, nr = 0, remote = 0;
        pid_t *kept = calloc(s->n + 1, sizeof *kept);
        struct unit **restart = calloc(s->n + 1, sizeof *restart);
        char msg[8192];
        core_adopt_lease_until(c, s->lease_until_ms);
        for (size_t i = 0; i < s->n; i++) {
                struct unit_saved *u = &s->units[i];
                struct policy *p = NULL;
                bool changed;
                running += u->state == UNIT_READY;
                remote += u->state == UNIT_REMOTE;
                if (policy_for(u, &p, &changed, msg, sizeof msg) < 0) {
                        log_msg(L_ERR, u->name, "not adopted after gadgetd's re-exec, ended: %s", msg);
                        close_fds(u);
                        continue;
                }
                int e = core_adopt(c, p, u, msg, sizeof msg);
                struct unit *x = core_find(c, u->name);
                if (e >= 0 && u->state == UNIT_READY) {
                        adopted++;
                        if (kept)
                                kept[nk++] = u->pid;
                }
                if (x && changed) {
                        snprintf(msg, sizeof msg, "%s: changed since gadgetd loaded it; it runs the policy it was "
                                 "loaded with until gadgetctl restart or reload", u->path);
                        unit_keep_policy(x, msg, 1);
                        log_msg(L_WARN, u->name, "%s", msg);
                }
                /* Ended (killed by core_adopt): it starts afresh below. */
                if (e < 0 && x && u->state == UNIT_READY && restart)
                        restart[nr++] = x;
        }
        size_t ended = end_orphans(kept, nk);
        /* After the orphans' end, which would take their new workers. */
        for (size_t i = 0; i < nr; i++)
                unit_restart(restart[i], "not adopted after gadgetd's re-exec");
        free(kept);
        free(restart);
        snprintf(out, outlen, "gadgetd re-executed in place (pid %d): %zu of %zu running gadgets adopted",
                 (int)getpid(), adopted, running);
        if (remote) {
                size_t o = strlen(out);
                snprintf(out + o, outlen - o, ", %zu run by other nodes", remote);
        }
        if (ended) {
                size_t o = strlen(out);
                snprintf(out + o, outlen - o, "; %zu processes it could not adopt were ended (see its log)", ended);
        }
        log_msg(adopted == running && !ended ? L_INFO : L_WARN, NULL, "%s", out);
        return s->read;
}
