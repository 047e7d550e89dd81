/* deploy: gadgetctl deploy NAME VERSION and gadgetctl rollback NAME
 * (docs/releases.md). Every installed version stays whole in the store
 * and the loaded policy is a copy of one version's, so a deploy is a copy
 * (releases_commit) and a load: a running gadget restarts on it without a
 * gap (core/unit_switch.c), its old process draining its calls. The
 * answer waits for the new process's hello; a version whose start fails
 * is rolled back at once (the version before copied back and loaded: the
 * old process serves on meanwhile), and the operator is told why in the
 * answer, the log and an audit record. An install's answer waits the
 * same way (deploy_after_install). One at a time in gadgetd (a deploy
 * while another or an install's waits is answered busy): each reads and
 * writes the store's current and previous versions of its gadget.
 * Before its copy, a deploy keeps the gadget's state with the version it
 * leaves, and a rollback --with-state restores the one kept with the
 * version it goes to (deploy_state.c); either waits for that, and is
 * refused, nothing changed, if it fails.
 * A staged deploy (a percent below 100): deploy_rollout.c. */
#include "deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "contract.h"
#include "control.h"
#include "core/calls.h"
#include "core/core.h"
#include "deploy_state.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/releases.h"

void deploy_job_free(struct deploy_job *j)
{
        /* Without its control gadgetd is ending, its core closed already
         * (no rollout armed left there): the record is only freed. */
        if (j->ro && j->ctl)
                deploy_rollout_release(j, core_find(j->core, j->name));
        else if (j->ro)
                deploy_rollout_free(j->ro);
        if (j->ctl)
                LIST_REMOVE(j, link);
        free(j->text);
        free(j->state_dir);
        free(j);
}

static void job_audit(const struct deploy_job *j, int code, const char *detail)
{
        struct audit_record rec = { .gadget = j->name, .binding = "deploy", .op = j->rollback ? "rollback" : "deploy",
                                    .outcome = audit_outcome_of(code), .detail = detail, .has_uid = true,
                                    .uid = (uint32_t)j->uid };
        audit_write(core_audit(j->core), &rec);
}

/* The answer, the audit record, and j freed. */
void deploy_job_end(struct deploy_job *j, int code, const char *msg)
{
        char detail[300];
        snprintf(detail, sizeof detail, "version %s (was %s)%s%s", j->version, j->prev[0] ? j->prev : "none",
                 j->with_state ? ", its state restored" : "", code ? ": rolled back" : "");
        if (!j->text) /* an install is audited as one (install.c) */
                job_audit(j, code, detail);
        client_load_answer(j->ans, code, msg);
        deploy_job_free(j);
}

/* The reload of the version before, after a failed deploy: only logged
 * (the deploy's answer said why already). */
static void revert_loaded(void *arg, int err, const char *name, const char *msg)
{
        char *gadget = arg;
        (void)name;
        if (err < 0)
                log_msg(L_ERR, gadget, "its rollback's load failed: %s", msg);
        free(gadget);
}

/* Back to j->prev: its policy copied back and loaded. Why a load and not
 * only the copy: a gadget that was not running took the new policy with
 * its failed start; one that was keeps its old process and policy (the
 * switch failed), and loading the same file again changes nothing. */
static void revert(struct deploy_job *j, const char *why)
{
        struct peercred root = { .pid = getpid(), .uid = 0, .gid = 0 };
        char path[4400];
        char *arg = strdup(j->name);
        log_msg(L_ERR, j->name, "version \"%s\" rolled back automatically to \"%s\": %s", j->version,
                j->prev[0] ? j->prev : "none", why);
        releases_set_previous(j->state_dir, j->name, j->previous);
        deploy_store_went_back(j->ctl, j->name, j->version, j->prev, j->previous, why);
        if (!j->prev[0] || releases_commit(j->state_dir, j->name, j->prev, path, sizeof path) < 0 || !arg ||
            !j->ctl || j->env->load(j->env->arg, path, false, &root, revert_loaded, arg) < 0)
                free(arg);
}


/* The new version's process said hello, or why it did not. */
static void ready_done(void *arg, uint64_t tag, const Gadget__Value *res, int code, const char *message)
{
        struct deploy_job *j = arg;
        char out[1200];
        (void)tag;
        if (!j->ctl) { /* gadgetd is ending: the store names the new version, loaded at its next start */
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                deploy_job_free(j);
                return;
        }
        if (res && j->percent && deploy_rollout_ready(j))
                return;
        if (res) {
                if (j->prev[0] && strcmp(j->prev, j->version) != 0)
                        releases_set_previous(j->state_dir, j->name, j->prev);
                if (j->text) {
                        snprintf(out, sizeof out, "%.1100s: ready", j->text);
                        deploy_job_end(j, 0, out);
                        return;
                }
                log_msg(L_INFO, j->name, "%s version \"%s\" (was \"%s\") for uid %u", j->rollback ? "rolled back to" :
                        "deployed", j->version, j->prev, (unsigned)j->uid);
                snprintf(out, sizeof out, "%s %s %s (was %s): ready%s%.400s", j->rollback ? "rolled back" : "deployed",
                         j->name, j->version, j->prev[0] ? j->prev : "none", j->said[0] ? "; " : "", j->said);
                deploy_job_end(j, 0, out);
                return;
        }
        /* Unloaded meanwhile, or gadgetd is ending (core_close answers
         * the waits before the control goes): no failure of the version,
         * nothing to roll back, nothing loaded again. */
        if (code == GADGET_EGONE) {
                snprintf(out, sizeof out, "the deploy of %s %s was called off: %.600s", j->name, j->version, message);
                deploy_job_end(j, code, out);
                return;
        }
        deploy_rollout_abort(j, message); /* a rollout that began meanwhile goes back with the deploy */
        if (j->prev[0])
                snprintf(out, sizeof out, "version %s of %s did not start: %.600s; rolled back to %s", j->version,
                         j->name, message, j->prev);
        else
                snprintf(out, sizeof out, "version %s of %s did not start: %.600s (no version before to roll "
                         "back to)", j->version, j->name, message);
        revert(j, message);
        deploy_job_end(j, code ? code : GADGET_EFAILED, out);
}

static void wait_ready(struct deploy_job *j);

/* The load of the version's policy ended (the daemon's load). */
static void deploy_loaded(void *arg, int err, const char *name, const char *msg)
{
        struct deploy_job *j = arg;
        char out[8192];
        (void)name;
        if (!j->ctl) {
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                deploy_job_free(j);
                return;
        }
        if (j->with_state) /* its state restored: its calls start it now */
                deploy_state_release(j->core, j->name);
        if (err < 0) {
                char path[4400];
                if (j->prev[0])
                        releases_commit(j->state_dir, j->name, j->prev, path, sizeof path);
                snprintf(out, sizeof out, "%s %s was not deployed: its load failed: %s", j->name, j->version, msg);
                deploy_job_end(j, GADGET_EFAILED, out);
                return;
        }
        wait_ready(j);
}

/* Waits for j's gadget's start, or its restart's switch, whoever the
 * client is: no owner, so that a client that leaves does not end the
 * wait (a failed start is rolled back all the same). */
static void wait_ready(struct deploy_job *j)
{
        struct unit *u = core_find(j->core, j->name);
        /* A rollback with its state: its hold's end started it as an idle
         * gadget woken (deploy_state_release): that start is waited for. */
        bool woken = j->with_state && u && unit_state_of(u) == UNIT_STARTING;
        const struct call_req cq = { .done = ready_done, .cbdata = j, .until_ready = !woken };
        char why[400];
        int code = u ? calls_wake(u, &cq, why, sizeof why) : 1;
        if (code == 0)
                return;
        if (code == 1 || (u && unit_state_of(u) == UNIT_IDLE)) {
                static const Gadget__Value none = GADGET__VALUE__INIT;
                ready_done(j, 0, &none, 0, NULL);
                return;
        }
        ready_done(j, 0, NULL, code, why);
}


/* The version's policy made current and loaded (j's state kept first). */
static void deploy_go(struct deploy_job *j)
{
        struct peercred root = { .pid = getpid(), .uid = 0, .gid = 0 };
        char path[4400], msg[300];
        int e;
        if (j->percent && (e = deploy_rollout_arm(j, &j->bound, msg, sizeof msg)) != 0) {
                client_load_answer(j->ans, e, msg);
                j->ans = NULL;
                deploy_job_free(j);
                return;
        }
        if ((e = releases_commit(j->state_dir, j->name, j->version, path, sizeof path)) == 0)
                e = j->env->load(j->env->arg, path, false, &root, deploy_loaded, j);
        if (e < 0) {
                if (j->with_state)
                        deploy_state_release(j->core, j->name);
                if (j->prev[0])
                        releases_commit(j->state_dir, j->name, j->prev, path, sizeof path);
                char out[400];
                snprintf(out, sizeof out, "%s %s was not deployed: %s", j->name, j->version,
                         e == -EBUSY ? "gadgetd is busy loading policies; try again" : strerror(-e));
                deploy_job_end(j, e == -EBUSY ? GADGET_EBUSY : GADGET_EFAILED, out);
        }
}

/* The state's step ended (deploy_state.c): on, or refused with nothing
 * changed. */
static void state_done(void *arg, int code, const char *msg)
{
        struct deploy_job *j = arg;
        char detail[500];
        if (!j->ctl) {
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                deploy_job_free(j);
                return;
        }
        if (code == 0) {
                snprintf(j->said, sizeof j->said, "%s", msg);
                deploy_go(j);
                return;
        }
        snprintf(detail, sizeof detail, "version %s (was %s): refused: %.200s", j->version, j->prev[0] ? j->prev :
                 "none", msg);
        job_audit(j, code, detail);
        client_load_answer(j->ans, code, msg);
        deploy_job_free(j);
}

int deploy_start(struct control *ctl, const struct control_env *env, uid_t uid, struct client_load *ans,
                 const char *name, const char *version, bool rollback, bool with_state, unsigned percent,
                 const struct unit_rollout_bound *bound)
{
        int e;
        if (!LIST_EMPTY(control_deploys(ctl)))
                return -EBUSY;
        struct deploy_job *j = calloc(1, sizeof *j);
        if (!j || !(j->state_dir = strdup(env->releases.state_dir))) {
                free(j);
                return -ENOMEM;
        }
        *j = (struct deploy_job){ .core = env->core, .env = env, .state_dir = j->state_dir, .uid = uid,
                                  .rollback = rollback, .with_state = with_state,
                                  .percent = percent > 0 && percent < 100 ? percent : 0, .ans = ans };
        if (bound)
                j->bound = *bound;
        snprintf(j->name, sizeof j->name, "%s", name);
        snprintf(j->version, sizeof j->version, "%s", version);
        j->ctl = ctl;
        LIST_INSERT_HEAD(control_deploys(j->ctl), j, link);
        releases_current(j->state_dir, name, j->prev, sizeof j->prev);
        releases_previous(j->state_dir, name, j->previous, sizeof j->previous);
        /* First the state of the version it leaves, kept with that
         * version; the deploy waits for it, and is refused if it fails.
         * Not before a plain rollback: the way back stays as it was, and
         * is never refused for a backup. */
        char msg[700];
        e = rollback && !with_state ? DEPLOY_STATE_NONE
                                    : deploy_state_begin(j->core, j->state_dir, name, j->prev, version, with_state,
                                                         state_done, j, msg, sizeof msg);
        if (e == DEPLOY_STATE_NONE)
                deploy_go(j);
        else if (e)
                state_done(j, e, msg);
        return 0;
}

/* Deploys version of name for cl's request id (rollback: the one before). */
static void deploy(struct client *cl, uint64_t id, const char *name, const char *version, bool rollback,
                   bool with_state, unsigned percent, const struct unit_rollout_bound *bound)
{
        struct client_load *ans;
        if (!LIST_EMPTY(control_deploys(cl->ctl))) {
                client_error(cl, id, GADGET_EBUSY, "another deploy, rollback or install is under way; try again "
                             "when it ends");
                return;
        }
        /* In a cluster the store's row first (deploy_store.c). */
        if (deploy_store_active(cl->ctl)) {
                deploy_store_request(cl, id, name, version, rollback, with_state, percent, bound);
                return;
        }
        if (!(ans = client_load_begin(cl, id)))
                return;
        int e = deploy_start(cl->ctl, client_env(cl), cl->cred.uid, ans, name, version, rollback, with_state, percent,
                             bound);
        if (e < 0)
                client_load_answer(ans, GADGET_EINTERNAL, strerror(-e));
}


/* The store's word on where a deploy or rollback goes (deploy_store_gate):
 * one that cannot yet be the store's is refused, never applied here
 * alone (the other nodes would not know it). */
static int store_gate(struct client *cl, uint64_t id)
{
        char why[400];
        int g = deploy_store_gate(cl->ctl, why, sizeof why);
        if (g < 0)
                client_error(cl, id, GADGET_EBUSY, "%s", why);
        return g;
}

void request_deploy(struct client *cl, const Control__Request *q)
{
        const Control__Deploy *d = q->deploy;
        const char *sd = client_env(cl)->releases.state_dir;
        if (!sd) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "this gadgetd installs no bundles");
                return;
        }
        if (!releases_has(sd, d->name, d->version)) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "%s has no installed version \"%s\" (gadgetctl versions "
                             "%s lists them)", d->name, d->version, d->name);
                return;
        }
        struct unit_rollout_bound b = { .max_error_pct = d->max_error_percent ? d->max_error_percent : 5,
                                        .min_calls = d->min_calls ? d->min_calls : 100 };
        int gate = store_gate(cl, q->id);
        if (gate < 0)
                return;
        if (gate > 0) {
                deploy(cl, q->id, d->name, d->version, false, false, d->percent, &b);
                return;
        }
        /* A rollout of it runs: its share changed, or it completes. */
        if (deploy_rollout_change(cl, q->id, d->name, d->version, d->percent))
                return;
        deploy(cl, q->id, d->name, d->version, false, false, d->percent, &b);
}

void request_rollback(struct client *cl, const Control__Request *q)
{
        bool with_state = q->req_case == CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE;
        const char *sd = client_env(cl)->releases.state_dir;
        const char *name = with_state ? q->rollback_with_state->name : q->rollback->name;
        char prev[80];
        if (!sd) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "this gadgetd installs no bundles");
                return;
        }
        if (with_state && !deploy_state_ok(cl, q->id, sd, name))
                return;
        int gate = store_gate(cl, q->id);
        if (gate < 0)
                return;
        if (gate > 0) {
                deploy(cl, q->id, name, "", true, with_state, 0, NULL);
                return;
        }
        /* A rollout runs: its new version gets no more calls, at once. */
        if (deploy_rollout_stop(cl, q->id, name))
                return;
        releases_previous(sd, name, prev, sizeof prev);
        if (!prev[0] || !releases_has(sd, name, prev)) {
                client_error(cl, q->id, GADGET_ENOTFOUND, prev[0] ? "%s: the version before, \"%s\", is no longer "
                             "in the store" : "%s has no version before the current one", name, prev);
                return;
        }
        deploy(cl, q->id, name, prev, true, with_state, 0, NULL);
}

void deploy_after_install(struct client_load *ans, struct control *ctl, const struct control_env *env, uid_t uid,
                          const char *name, const char *version, const char *prev, const char *previous,
                          const char *text)
{
        struct deploy_job *j = calloc(1, sizeof *j);
        if (!j || !(j->state_dir = strdup(env->releases.state_dir)) || !(j->text = strdup(text))) {
                if (j)
                        free(j->state_dir);
                free(j);
                client_load_answer(ans, GADGET_EINTERNAL, "out of memory");
                return;
        }
        j->ctl = ctl;
        j->core = env->core;
        j->env = env;
        j->ans = ans;
        j->uid = uid;
        snprintf(j->name, sizeof j->name, "%s", name);
        snprintf(j->version, sizeof j->version, "%s", version);
        snprintf(j->prev, sizeof j->prev, "%s", prev);
        snprintf(j->previous, sizeof j->previous, "%s", previous);
        LIST_INSERT_HEAD(control_deploys(ctl), j, link);
        wait_ready(j);
}

void deploy_abandon_all(struct deploy_list *l)
{
        /* Their load or wait in flight ends each (ctl NULL). */
        while (!LIST_EMPTY(l)) {
                struct deploy_job *j = LIST_FIRST(l);
                LIST_REMOVE(j, link);
                j->ctl = NULL;
        }
}
