/* deploy_state: a gadget's state kept with the version a deploy leaves,
 * and put back by gadgetctl rollback --with-state (deploy_state.h). The
 * backup is bindings_backup_file's: a thread of its own reads the store
 * in one read transaction (SQLite's WAL snapshot, PostgreSQL's
 * REPEATABLE READ) while the gadget runs, so the loop and the gadget's
 * calls never wait on it; the deploy waits for its end. It is written
 * beside its place and renamed there once whole, so a failed backup
 * leaves the one kept before. */
#include "deploy_state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup.h"
#include "bindings/bindings.h"
#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/core.h"
#include "system/log.h"
#include "system/releases.h"

struct state_job {
        struct core *core;
        char name[64], from[80], to[80];
        bool with_state;
        bool held;                  /* with_state: the gadget is held (unit_hold) */
        deploy_state_fn done;
        void *arg;
        char tmp[4400], kept[4400]; /* the backup being written (releases/NAME/.state-*.new), and its place */
        char restore[4400];         /* with_state: the backup restored */
        char said[300];             /* what the backup kept */
};

/* The gadget held by j, if it still is (a stop or an unload ends a hold). */
static struct unit *held_unit(const struct state_job *j)
{
        struct unit *u = core_find(j->core, j->name);
        return u && unit_held(u) ? u : NULL;
}

/* j ends with code: the hold ends if j's step failed (the deploy goes on
 * only with code 0, and releases it after its load). */
static void finish(struct state_job *j, int code, const char *msg)
{
        if (code && j->held) {
                /* Held or not any more (started meanwhile): its hold ends
                 * (deploys run one at a time: no other hold is there). */
                struct unit *u = core_find(j->core, j->name);
                if (u)
                        unit_release(u);
        }
        j->done(j->arg, code, msg);
        free(j);
}

static void restored(void *arg, int err, const char *why, const struct backup_info *info)
{
        struct state_job *j = arg;
        char msg[900];
        if (err < 0) {
                snprintf(msg, sizeof msg, "the state kept with %s %s was not restored: %.500s (nothing was changed; "
                         "%s serves on)", j->name, j->to, why ? why : strerror(-err), j->from);
                log_msg(L_WARN, j->name, "%s", msg);
                finish(j, err == -EAGAIN ? GADGET_EUNAVAILABLE : GADGET_EFAILED, msg);
                return;
        }
        snprintf(msg, sizeof msg, "%s; restored the state kept with %s (%" PRIu64 " keys, %" PRIu64 " alarms)", j->said,
                 j->to, info->n_kv, info->n_alarms);
        log_msg(L_INFO, j->name, "%s", msg);
        /* The alarms changed under the delivery: it looks again (as after
         * gadgetctl restore, backup.c). */
        struct unit *u = core_find(j->core, j->name);
        struct gadget_bindings *g = u ? unit_bindings(u) : NULL;
        if (g && g->alarms_changed)
                g->alarms_changed(g->alarms_arg);
        finish(j, 0, msg);
}

/* with_state: the state of j->from kept; j->to's goes back, the gadget
 * held (restore's rule: a stopped or idle gadget). */
static void restore_go(struct state_job *j)
{
        struct unit *u = held_unit(j);
        char why[600];
        if (!u) {
                snprintf(why, sizeof why, "%s was stopped, restarted or unloaded meanwhile: its state was not "
                         "restored (nothing was changed)", j->name);
                finish(j, GADGET_EFAILED, why);
                return;
        }
        int fd = open(j->restore, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                snprintf(why, sizeof why, "the state kept with %s %s: %s (nothing was changed)", j->name, j->to,
                         strerror(errno));
                finish(j, GADGET_EFAILED, why);
                return;
        }
        /* Checked against the running version's bindings and bounds: the
         * state was written under j->to's policy, which is that version's
         * for good (its directory is never changed), so it fits j->to's
         * own; a version that declares other bindings is refused here,
         * with the reason, before anything changed. */
        int code = bindings_snapshot(unit_bindings(u), true, fd, restored, j, why, sizeof why);
        if (code)
                finish(j, code, why);
}

static void backed_up(void *arg, int err, const char *why, const struct backup_info *info)
{
        struct state_job *j = arg;
        char msg[900];
        if (err == 0 && rename(j->tmp, j->kept) < 0) {
                err = -errno;
                why = NULL;
                unlink(j->tmp);
        }
        if (err < 0) {
                snprintf(msg, sizeof msg, "the backup of %s's state before the %s failed: %.500s (nothing was "
                         "changed)", j->name, j->with_state ? "rollback" : "deploy", why ? why : strerror(-err));
                log_msg(L_WARN, j->name, "%s", msg);
                finish(j, GADGET_EFAILED, msg);
                return;
        }
        snprintf(j->said, sizeof j->said, "kept the state of %s (%" PRIu64 " keys, %" PRIu64 " alarms)", j->from,
                 info->n_kv, info->n_alarms);
        log_msg(L_INFO, j->name, "%s in %s", j->said, j->kept);
        if (j->with_state)
                restore_go(j);
        else
                finish(j, 0, j->said);
}

/* The backup of the state j->from leaves, into its place. 0, or a
 * GADGET_E* code with why. */
static int backup_go(struct state_job *j, struct unit *u, char *why, size_t len)
{
        char e[400]; /* with the text around it, within the caller's 600 */
        int code = bindings_backup_file(unit_bindings(u), j->tmp, backed_up, j, e, sizeof e);
        if (code)
                snprintf(why, len, "the backup of %s's state before the %s failed: %s (nothing was changed)", j->name,
                         j->with_state ? "rollback" : "deploy", e);
        return code;
}

static void hold_done(void *arg, struct unit *u, int err)
{
        struct state_job *j = arg;
        char why[600];
        if (err < 0) {
                snprintf(why, sizeof why, "%s was stopped, restarted or unloaded before it was idle: nothing was "
                         "changed", j->name);
                finish(j, GADGET_EFAILED, why);
                return;
        }
        j->held = true;
        int code = backup_go(j, u, why, sizeof why);
        if (code)
                finish(j, code, why);
}

int deploy_state_begin(struct core *core, const char *state_dir, const char *name, const char *from, const char *to,
                       bool with_state, deploy_state_fn done, void *arg, char *msg, size_t len)
{
        struct unit *u = core_find(core, name);
        if (!from || !from[0] || !u || !unit_bindings(u)) {
                if (with_state) {
                        snprintf(msg, len, "%s: no version is current, or the gadget is not loaded: its state "
                                 "cannot be restored", name);
                        return GADGET_EINVAL;
                }
                return DEPLOY_STATE_NONE;
        }
        struct state_job *j = calloc(1, sizeof *j);
        if (!j) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        *j = (struct state_job){ .core = core, .with_state = with_state, .done = done, .arg = arg };
        snprintf(j->name, sizeof j->name, "%s", name);
        snprintf(j->from, sizeof j->from, "%s", from);
        snprintf(j->to, sizeof j->to, "%s", to);
        /* Written beside the versions, under a name of its own (an install
         * and a deploy may keep the same version's state at once; the last
         * rename wins, each file whole), ".*.new": what gadgetd's end
         * leaves of one is removed at its next start (releases_sweep). */
        static unsigned long seq;
        snprintf(j->tmp, sizeof j->tmp, "%s/%s/%s/.state-%s-%lu.new", state_dir, RELEASES_DIR, name, from, ++seq);
        snprintf(j->kept, sizeof j->kept, "%s/%s/%s/%s/" DEPLOY_STATE_FILE, state_dir, RELEASES_DIR, name, from);
        snprintf(j->restore, sizeof j->restore, "%s/%s/%s/%s/" DEPLOY_STATE_FILE, state_dir, RELEASES_DIR, name, to);
        int code, e;
        if (!with_state) {
                code = backup_go(j, u, msg, len);
        } else if ((e = unit_hold(u, hold_done, j, "gadgetctl rollback --with-state")) < 0) {
                snprintf(msg, len, "%s must be ready or idle here, with no restart or rollout under way, for its "
                         "state to be restored (nothing was changed)", name);
                code = e == -ENOMEM ? GADGET_EINTERNAL : GADGET_EBUSY;
        } else {
                code = 0;
        }
        if (code)
                free(j);
        return code;
}

bool deploy_state_ok(struct client *cl, uint64_t id, const char *state_dir, const char *name)
{
        struct unit *u = core_find(client_env(cl)->core, name);
        struct unit_rollout_info in = { 0 };
        unsigned long long bytes;
        long long ms;
        char prev[80];
        /* Why root only: it replaces the gadget's data, as gadgetctl
         * restore does (a member may deploy and roll back versions, whose
         * programs see the data as it is). */
        if (cl->cred.uid != 0) {
                client_error(cl, id, GADGET_EDENIED, "rollback --with-state is root's only (it replaces %s's data, "
                             "as restore does)", name);
                return false;
        }
        /* In a cluster the state is restored under the gadget's lease,
         * from what its owner kept: only the node that runs it (or may
         * start it: idle here) can. Asked of another, refused with that
         * node's name (nothing changed). */
        if (u && control_deploy_store(cl->ctl) && unit_state_of(u) == UNIT_REMOTE) {
                const char *owner = unit_owner(u);
                if (owner[0])
                        client_error(cl, id, GADGET_EUNAVAILABLE, "rollback --with-state of %s restores its state "
                                     "under its lease, on the node that runs it: ask node %s, which runs it "
                                     "(nothing was changed)", name, owner);
                else
                        client_error(cl, id, GADGET_EUNAVAILABLE, "rollback --with-state of %s restores its state "
                                     "under its lease, on the node that runs it, and no node runs it now: ask the "
                                     "node it runs on once started (nothing was changed)", name);
                return false;
        }
        if (u)
                unit_rollout_info(u, &in);
        if (in.running) {
                client_error(cl, id, GADGET_EBUSY, "a rollout of %s %s runs, on the current version's state: end it "
                             "with gadgetctl rollback %s (nothing was changed)", name, in.version, name);
                return false;
        }
        releases_previous(state_dir, name, prev, sizeof prev);
        if (prev[0] && releases_has(state_dir, name, prev) && !deploy_state_kept(state_dir, name, prev, &bytes, &ms)) {
                client_error(cl, id, GADGET_ENOTFOUND, "no state is kept with %s %s (one is kept with a version when "
                             "a deploy leaves it): gadgetctl rollback %s goes back without it", name, prev, name);
                return false;
        }
        return true; /* no version before: rollback says so */
}

void deploy_state_release(struct core *core, const char *name)
{
        struct unit *u = core_find(core, name);
        if (u)
                unit_release(u); /* nothing if it holds none */
}

bool deploy_state_kept(const char *state_dir, const char *name, const char *version, unsigned long long *bytes,
                       long long *ms)
{
        char p[4400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s/%s/%s/" DEPLOY_STATE_FILE, state_dir, RELEASES_DIR, name, version);
        if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        *bytes = (unsigned long long)st.st_size;
        *ms = (long long)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        return true;
}
