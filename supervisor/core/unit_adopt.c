/* unit_adopt: gadgetctl daemon-reexec's side of the core — whether the
 * gadgets can be handed to gadgetd's next image now, what each is as
 * handed on, and the next image's taking over of its running workers. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_int.h"
#include "link/peer.h"
#include "policy.h"
#include "store/store.h"
#include "system/monotime.h"
#include "system/proc.h"
#include "sandbox_abi.h"

static void lease_marked(void *arg, const char *why)
{
        struct core *c = arg;
        c->reexec_marks_out--;
        if (why && !c->reexec_mark_err[0])
                snprintf(c->reexec_mark_err, sizeof c->reexec_mark_err, "%.190s", why);
}

/* Store=postgresql: each lease held is marked as moving to this very node
 * (gadgetd_owner.move_to, for KVPG_MOVE_MS): once the exec has ended the
 * lease session, and with it the advisory locks, no other node may take
 * them before the next image does (kvpg_sql.c's take obeys the mark). */
static int leases_marked(struct core *c, char *why, size_t len)
{
        struct kvpg_lease *l = c->bindings.lease;
        if (!l)
                return 0;
        if (!c->reexec_marking && !c->reexec_marks_out) {
                c->reexec_marking = true;
                c->reexec_mark_err[0] = '\0';
                c->reexec_mark_ms = monotime_ms();
                for (struct unit *u = c->units; u; u = u->next) {
                        if (!u->leased)
                                continue;
                        int e = kvpg_lease_move(l, u->policy->name, c->cfg.node, lease_marked, c);
                        if (e == 0) {
                                c->reexec_marks_out++;
                        } else if (!c->reexec_mark_err[0]) {
                                snprintf(c->reexec_mark_err, sizeof c->reexec_mark_err, "gadget %.64s: %s",
                                         u->policy->name, e == -EBUSY ? "a move of it is under way" : strerror(-e));
                        }
                }
        }
        if (c->reexec_marks_out) {
                snprintf(why, len, "the store is marking the leases for the next image");
                return -EBUSY;
        }
        if (c->reexec_mark_err[0]) {
                snprintf(why, len, "a lease could not be marked for the next image: %s", c->reexec_mark_err);
                return -EIO;
        }
        if (c->bindings.audit_store && kvpg_audit_queued(c->bindings.audit_store)) {
                snprintf(why, len, "audit lines are still being sent to the store");
                return -EBUSY;
        }
        return 0;
}

uint64_t core_reexec_lease_until(const struct core *c)
{
        /* Why the margin of a lease query's timeout: the store's mark
         * (its now() + KVPG_MOVE_MS) is made after reexec_mark_ms, and a
         * take sent just before this time may still be answered. */
        return c->bindings.lease ? c->reexec_mark_ms + KVPG_MOVE_MS - KVPG_LEASE_TIMEOUT_MS : 0;
}

void core_adopt_lease_until(struct core *c, uint64_t until_ms)
{
        /* Why the bound: no mark reaches further (a state that says more lies). */
        c->adopt_lease_until = until_ms <= monotime_ms() + KVPG_MOVE_MS ? until_ms : 0;
}

int core_reexec_quiet(struct core *c, char *why, size_t len)
{
        if (c->stopping) {
                snprintf(why, len, "gadgetd is stopping");
                return -ESHUTDOWN;
        }
        for (struct unit *u = c->units; u; u = u->next) {
                const char *busy = NULL;
                /* In any state: calls waiting for a start (a restart's
                 * delay, a wake) and gadgetctl's waits until ready. */
                if (!TAILQ_EMPTY(&u->pending))
                        busy = "has calls waiting for its start";
                /* Why refused: one process of each is handed on. */
                else if (u->next_run)
                        busy = "is restarting: its new process starts beside the old one";
                else if (u->old_run)
                        busy = "is restarting: its previous process drains";
                else if (u->state == UNIT_READY) {
                        if (peer_pending(u->run->peer) || u->n_pending)
                                busy = "has calls in flight";
                        else if (bindings_busy(u->bind))
                                busy = "has binding calls in flight";
                        else if (peer_buffered(u->run->peer))
                                busy = "has a message half read";
                        else if (!LIST_EMPTY(&u->waiting))
                                busy = "has calls waiting for approval";
                } else if (u->state == UNIT_STARTING || u->state == UNIT_STOPPING) {
                        /* A restart's backoff is a start too (unit.c's timer). */
                        busy = u->state == UNIT_STARTING ? "is starting" : "is stopping";
                } else if (u->run->child.pid > 0) {
                        busy = "has a pre-warmed sandbox";
                }
                /* In any state (a takeover may leave some): calls this node
                 * sent to another node and not answered yet. */
                if (!busy && !LIST_EMPTY(&u->forwarded))
                        busy = "has calls forwarded to another node in flight";
                if (busy) {
                        snprintf(why, len, "gadget %s %s", u->policy->name, busy);
                        return -EBUSY;
                }
        }
        return leases_marked(c, why, len);
}

void core_reexec_hold(struct core *c, bool hold)
{
        if (!hold)
                c->reexec_marking = false; /* a re-exec asked again marks again */
        for (struct unit *u = c->units; u; u = u->next)
                if (u->run->peer)
                        peer_hold(u->run->peer, hold);
}

int core_uid_lock_fd(const struct core *c)
{
        return uidpool_lock_fd(&c->uids);
}

void core_reexec_drop_spare(struct core *c)
{
        spare_drop(&c->spare);
}

/* Whether fd, handed on as a run's core memfd, is one unit_core_fd made
 * for p: sealed against growing and shrinking, at most CoreDump= long.
 * Why check: the state is read as hostile input, and a file of any other
 * kind would have the next crash's copy read from it. */
static bool core_memfd_ok(int fd, const struct policy *p)
{
        struct stat st;
        int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
        return seals >= 0 && (seals & (F_SEAL_GROW | F_SEAL_SHRINK)) == (F_SEAL_GROW | F_SEAL_SHRINK) &&
               fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && p->core_dump && (uint64_t)st.st_size <= p->core_dump;
}

void unit_save(struct unit *u, struct unit_saved *s)
{
        char **methods = NULL, **sigs = NULL;
        *s = (struct unit_saved){ .name = u->policy->name, .path = u->policy->path, .policy_hash = u->policy_hash,
                                  .from_dir = u->from_dir, .state = (int)u->state, .cause = u->cause,
                                  .restarts = u->restarts, .runs = u->runs, .calls = u->calls, .pid = -1, .rpc_fd = -1,
                                  .report_fd = -1, .out_fd = -1, .err_fd = -1, .pidfd = -1, .core_fd = -1,
                                  .text = u->policy->text,
                                  .text_len = u->policy->text ? u->policy->text_len : 0 };
        const struct logbuf *log = unit_log(u);
        if ((s->log = calloc(log->count + 1, sizeof *s->log)))
                for (size_t i = 0; i < log->count; i++) {
                        const struct logbuf_entry *l = logbuf_line(log, log->count, i);
                        s->log[s->n_log++] = (struct unit_saved_line){
                                .meta = { .time_ms = l->time_ms, .run = l->run, .source = l->source, .prio = l->prio },
                                .text = l->text };
                }
        if (u->state == UNIT_REMOTE) {
                s->owner = u->owner;
                s->owner_epoch = u->owner[0] ? u->owner_epoch : 0;
                s->dormant = !u->want_running && u->dormant;
        }
        if (u->state != UNIT_READY || !u->run->peer)
                return;
        s->pid = u->run->child.pid;
        s->rpc_fd = peer_fd(u->run->peer);
        s->report_fd = u->run->child.report_fd;
        s->out_fd = u->run->out_fd;
        s->err_fd = u->run->err_fd;
        s->pidfd = u->run->child.pidfd;
        s->core_fd = u->run->core_fd;
        s->uid = u->run->uid;
        s->started_ms = (int64_t)u->run->started.tv_sec * 1000 + u->run->started.tv_nsec / 1000000;
        s->start_us = u->run->start_us;
        s->n_methods = peer_methods(u->run->peer, &methods);
        peer_signatures(u->run->peer, &sigs);
        s->methods = methods;
        s->sig_texts = sigs;
}

/* Another node's gadget, as it was: it wants its lease again (at its rank
 * in Nodes=, from its policy, which is the one it was loaded with), to run
 * it or to hold it idle, so that it takes the gadget over if its owner
 * goes. Its owner is not taken from s for calls: the owner's address
 * comes with the store's list of nodes, which the lease session reads
 * first, then tells the owner (unit_lease.c's on_owner); the calls that
 * come meanwhile wait for it as for a node to run it. Without a shared
 * store in this image it starts here, as at a load. */
static void adopt_remote(struct unit *u, const struct unit_saved *s)
{
        if (!s->dormant) {
                unit_start(u);
        } else {
                u->dormant = true;
                if (!unit_lease_wait(u))
                        unit_idle_enter(u);
        }
        if (u->state == UNIT_REMOTE && s->owner[0])
                snprintf(u->cause, sizeof u->cause, "runs on node %s (epoch %" PRId64 ") as read before gadgetd's "
                         "re-exec; calls wait for the store to name it again", s->owner, s->owner_epoch);
}

/* The pid a pidfd refers to (its fdinfo's Pid:), or -1. */
static pid_t pidfd_pid(int pidfd)
{
        char path[64], line[128];
        pid_t pid = -1;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "Pid:", 4) == 0)
                        pid = (pid_t)strtol(line + 4, NULL, 10);
        if (f)
                fclose(f);
        return pid;
}

/* A running worker's uid, cgroups, bindings and link, taken over. */
static int adopt_rest(struct core *c, struct unit *u, const struct unit_saved *s, char *err, size_t len)
{
        int e;
        if ((e = uidpool_adopt(&c->uids, s->uid)) < 0) {
                snprintf(err, len, "its host uid %u: %s", (unsigned)s->uid,
                         e == -EBUSY ? "held by another gadget" : strerror(-e));
                return e;
        }
        u->run->uid = s->uid;
        u->run->have_uid = true;
        if ((e = limiter_adopt(&c->limiter, u->policy, &u->run->limits, s->pid, err, len)) < 0 ||
            (e = bindings_load(u->bind, err, len)) < 0)
                return e;
        if (c->bindings.lease && c->adopt_lease_until <= monotime_ms()) {
                /* Why: past that time another node may hold its lease. */
                snprintf(err, len, "its lease was not marked for this image, or the time to take it back is over");
                return -ETIME;
        }
        if ((e = unit_adopt_worker(u, s, err, len)) >= 0 && c->bindings.lease)
                unit_lease_adopted(u);
        return e;
}

const char *core_handoff_refused(const struct core *c)
{
        /* Why: below gadgetd's cgroup, they would keep systemd from starting
         * the next gadgetd there (cgroup_scope.h), and their directories
         * are named after this gadgetd's pid. */
        if (strcmp(c->limiter.mode, "rlimits") != 0 && !c->limiter.cg.scopes)
                return "the gadgets' cgroups are below gadgetd's own (no scope of its own for each from systemd: "
                       "see the limits lines at gadgetd's start)";
        return NULL;
}

void core_handoff_signal(struct core *c, bool adopted)
{
        for (struct unit *u = c->units; u; u = u->next)
                if (u->state == UNIT_READY && u->run->child.pidfd >= 0)
                        syscall(SYS_pidfd_send_signal, u->run->child.pidfd,
                                adopted ? SANDBOX_SIG_ADOPTED : SANDBOX_SIG_HANDOFF, NULL, 0);
}

int core_adopt(struct core *c, struct policy *p, const struct unit_saved *s, char *err, size_t len)
{
        const struct unit_origin o = { .hash = s->policy_hash, .from_dir = s->from_dir };
        struct unit *u = core_add(c, p, &o);
        int e = 0;
        if (!u) {
                snprintf(err, len, "out of memory");
                return -ENOMEM;
        }
        u->restarts = s->restarts;
        u->calls = s->calls;
        u->runs = s->runs;
        for (size_t i = 0; i < s->n_log; i++)
                logbuf_add_kept(&u->log, &s->log[i].meta, s->log[i].text);
        if (s->state == UNIT_IDLE) {
                /* Idle as it was (IdleStop= too): its next call starts it. */
                unit_idle_enter(u);
                return 0;
        }
        if (s->state == UNIT_REMOTE) {
                adopt_remote(u, s);
                return 0;
        }
        if (s->state != UNIT_READY) {
                unit_set_state(u, s->state == UNIT_FAILED ? UNIT_FAILED : UNIT_STOPPED);
                snprintf(u->cause, sizeof u->cause, "%s", s->cause);
                return 0;
        }
        /* From here its fds are u's: a failure closes them with the rest. */
        u->run->child.pid = s->pid;
        core_count_running(u);
        u->run->child.rpc_fd = s->rpc_fd;
        u->run->child.report_fd = s->report_fd;
        /* As spawn's: a report of the adopted run (its end, its crash, its
         * denials) is read within the same bound, not refused as too long. */
        wire_reader_init(&u->run->child.report, SANDBOX_REPORT_MAX);
        u->run->out_fd = s->out_fd;
        u->run->err_fd = s->err_fd;
        u->run->core_fd = core_memfd_ok(s->core_fd, u->policy) ? s->core_fd : -1;
        if (s->core_fd >= 0 && u->run->core_fd < 0)
                close(s->core_fd);
        else if (s->core_fd >= 0)
                fcntl(s->core_fd, F_SETFD, FD_CLOEXEC);
        int fds[] = { s->rpc_fd, s->report_fd };
        for (size_t i = 0; i < 2; i++) {
                fcntl(fds[i], F_SETFD, FD_CLOEXEC);
                fcntl(fds[i], F_SETFL, O_NONBLOCK);
        }
        /* A re-exec keeps gadgetd's pid, and its workers stay its children;
         * through the fd store they are systemd's, and the pidfd handed on
         * is how this gadgetd knows the worker (never by a pid alone). */
        bool child = proc_is_child(s->pid);
        if (!child && s->pidfd >= 0 && pidfd_pid(s->pidfd) == s->pid) {
                u->run->child.pidfd = s->pidfd;
                u->run->child.foreign = true;
                fcntl(s->pidfd, F_SETFD, FD_CLOEXEC);
                e = adopt_rest(c, u, s, err, len);
        } else {
                if (s->pidfd >= 0)
                        close(s->pidfd);
                if (!child) {
                        /* Not ours to kill: a pid reused, or a state file that lies. */
                        u->run->child.pid = -1;
                        core_count_running(u);
                        snprintf(err, len, "its worker (pid %d) is not a child of this gadgetd", (int)s->pid);
                        e = -ESRCH;
                } else if ((u->run->child.pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0)) < 0) {
                        e = -errno;
                        snprintf(err, len, "pidfd of its worker (pid %d): %s", (int)s->pid, strerror(-e));
                } else {
                        e = adopt_rest(c, u, s, err, len);
                }
        }
        if (e < 0) {
                char why[600];
                snprintf(why, sizeof why, "not adopted after gadgetd's re-exec, ended: %.500s", err);
                unit_adopt_failed(u, why);
        }
        return e;
}
