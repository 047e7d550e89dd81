/* enter: gadgetd's side of gadgetctl exec's probe — gadgetd-sandbox
 * --enter started beside a running sandbox, its setup and fds, and its
 * place in the gadget's cgroups (worker/sandbox/enter.c does the rest). */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "limits/cgroup.h"
#include "sandbox_abi.h"
#include "spawn_int.h"

/* Puts the probe in the gadget's v2 cgroup and sends it the v1 "tasks"
 * files to join: its processes count against the gadget's limits. */
static int give_cgroups(struct cgroup *cg, pid_t pid, int sock, char *err, size_t errlen)
{
        int fds[SANDBOX_CGROUP_FDS_MAX], e = 0;
        size_t n = 0;
        if (cg && ((e = cgroup_attach(cg, pid, err, errlen)) < 0 ||
                   (e = cgroup_join_fds(cg, fds, SANDBOX_CGROUP_FDS_MAX, &n, err, errlen)) < 0))
                return e;
        if ((e = spawn_send_cgroups(sock, fds, n)) < 0)
                snprintf(err, errlen, "probe setup: %s", strerror(-e));
        while (n > 0)
                close(fds[--n]);
        return e;
}

int spawn_enter(const struct spawn_opts *o, int init_pidfd, struct cgroup *cg, const int *stdio,
                struct spawn_child *out, char *err, size_t errlen)
{
        struct spawn_child c = SPAWN_CHILD_NONE;
        struct spawn_opts so = *o;
        struct wire_writer msg = { 0 };
        int rep[2] = { -1, -1 }, setup = -1, e;

        so.enter = true;
        if ((e = spawn_setup_pack(&so, &msg, err, errlen)) < 0)
                goto out;
        /* gadgetd's end is non-blocking: the probe never makes it wait. */
        if (pipe2(rep, O_CLOEXEC) < 0 || fcntl(rep[0], F_SETFL, O_NONBLOCK) < 0) {
                e = -errno;
                snprintf(err, errlen, "cannot create channels: %s", strerror(errno));
                goto out;
        }
        /* No new namespace: the probe joins the sandbox's own. */
        if ((e = spawn_helper_start(o->helper, 0, SANDBOX_ENTER_ARG, &c.pid, &c.pidfd, &setup, err, errlen)) < 0)
                goto out;
        c.report_fd = rep[0];
        rep[0] = -1;
        wire_reader_init(&c.report, SANDBOX_REPORT_MAX);
        int fds[SANDBOX_ENTER_FDS_SENT] = { rep[1], stdio[0], stdio[1], stdio[2], init_pidfd };
        e = wire_writer_flush_fds(&msg, setup, fds, SANDBOX_ENTER_FDS_SENT);
        if (e != 0) {
                e = e > 0 ? -EAGAIN : e;
                snprintf(err, errlen, "probe setup: %s", strerror(-e));
                goto out;
        }
        if ((e = give_cgroups(cg, c.pid, setup, err, errlen)) < 0)
                goto out;
        *out = c;
        c = SPAWN_CHILD_NONE;
out:
        if (c.pid > 0) {
                /* Never a probe half set up. */
                kill(c.pid, SIGKILL);
                while (waitpid(c.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        spawn_child_close(&c);
        for (int i = 0; i < 2; i++)
                if (rep[i] >= 0)
                        close(rep[i]);
        if (setup >= 0)
                close(setup);
        wire_writer_free(&msg);
        return e;
}
