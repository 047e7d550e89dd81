/* deploy_rollout: a staged deploy (gadgetctl deploy --percent, a percent
 * below 100), the control's side. It arms a rollout on the unit first
 * (core/unit_rollout.c): its new process then serves that share beside
 * the old one, the store naming the old version meanwhile; the core tells
 * its end (rollout_ended), which the store, the log and the audit record.
 * A deploy of the same version while it runs sets its share (100:
 * completes it), a rollback ends it at once. */
#include "deploy_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "system/audit.h"
#include "system/log.h"
#include "system/releases.h"

void deploy_rollout_free(struct rollout_rec *rr)
{
        free(rr->state_dir);
        free(rr);
}

static void rollout_audit(const struct rollout_rec *rr, int code, const char *detail)
{
        struct audit_record rec = { .gadget = rr->name, .binding = "deploy", .op = "rollout",
                                    .outcome = audit_outcome_of(code), .detail = detail, .has_uid = true,
                                    .uid = (uint32_t)rr->uid };
        audit_write(core_audit(rr->core), &rec);
}

/* The core's word that a rollout that served ended. Completed: the new
 * version is the store's current one from now on (its policy copied, as
 * a deploy's), the old one its previous. Not: the store names the old
 * version already (ready_done put it back once the rollout began), so
 * nothing changes there; the operator is told why. */
static void rollout_ended(void *arg, struct unit *u, bool completed, const char *why)
{
        struct rollout_rec *rr = arg;
        char path[4400], detail[480];
        (void)u;
        if (rr->waiting) {
                rr->waiting->ro = NULL;
                rr->waiting->ro_completed = completed;
        }
        if (completed) {
                if (releases_commit(rr->state_dir, rr->name, rr->version, path, sizeof path) == 0 && rr->prev[0])
                        releases_set_previous(rr->state_dir, rr->name, rr->prev);
                log_msg(L_INFO, rr->name, "its rollout of version \"%s\" completed (%s): it serves every call",
                        rr->version, why);
                snprintf(detail, sizeof detail, "version %s (was %s): completed", rr->version, rr->prev);
                rollout_audit(rr, 0, detail);
        } else {
                log_msg(rr->by_request ? L_INFO : L_ERR, rr->name, "its rollout of version \"%s\" went back%s: %s",
                        rr->version, rr->by_request ? "" : " automatically", why);
                snprintf(detail, sizeof detail, "version %s (was %s): rolled back: %.200s", rr->version, rr->prev,
                         why);
                rollout_audit(rr, rr->by_request ? 0 : GADGET_EFAILED, detail);
                if (!rr->by_request) /* the owner's verdict, for every node */
                        deploy_store_went_back(NULL, rr->name, rr->version, NULL, NULL, why);
        }
        deploy_rollout_free(rr);
}

/* j's rollout record, once j no longer waits: the core's (it calls
 * rollout_ended at the end) if its rollout serves, else dropped (an armed
 * rollout that did not begin is disarmed first: the core keeps no arg). */
void deploy_rollout_release(struct deploy_job *j, struct unit *u)
{
        struct rollout_rec *rr = j->ro;
        struct unit_rollout_info in = { 0 };
        if (!rr)
                return;
        j->ro = NULL;
        rr->waiting = NULL;
        if (u)
                unit_rollout_info(u, &in);
        if (in.arg == rr && in.running)
                return;
        if (in.arg == rr)
                unit_rollout_disarm(u);
        deploy_rollout_free(rr);
}

/* A staged deploy's new process said hello: whether it serves its
 * share (then j is answered and freed), or the deploy is one at once
 * (the gadget was not running here, or its old process ended meanwhile:
 * the new one took over). */
bool deploy_rollout_ready(struct deploy_job *j)
{
        struct unit *u = core_find(j->core, j->name);
        struct unit_rollout_info in = { 0 };
        char path[4400], out[600];
        if (u)
                unit_rollout_info(u, &in);
        if (!j->ro && !j->ro_completed) {
                /* It went back before this answer: the store as before. */
                if (j->prev[0])
                        releases_commit(j->state_dir, j->name, j->prev, path, sizeof path);
                releases_set_previous(j->state_dir, j->name, j->previous);
                snprintf(out, sizeof out, "the rollout of %s %s went back as it began: %.300s", j->name, j->version,
                         in.last_back ? in.last_back : "");
                deploy_job_end(j, GADGET_EFAILED, out);
                return true;
        }
        if (!j->ro || !(in.running && in.arg == j->ro)) {
                deploy_rollout_release(j, u); /* the version serves every call */
                return false;
        }
        /* While it runs, the store names the version that serves every
         * call but the share: a gadgetd that starts again meanwhile runs
         * that one (the rollout is this gadgetd's), and a rollout that
         * goes back leaves the store as it was. */
        if (j->prev[0])
                releases_commit(j->state_dir, j->name, j->prev, path, sizeof path);
        releases_set_previous(j->state_dir, j->name, j->previous);
        deploy_rollout_release(j, u);
        log_msg(L_INFO, j->name, "rolling out version \"%s\" (was \"%s\") to %u%% of the call trees for uid %u",
                j->version, j->prev, j->percent, (unsigned)j->uid);
        snprintf(out, sizeof out, "rolling out %s %s to %u%% of the call trees (was %s): its new process serves "
                 "beside the old one", j->name, j->version, j->percent, j->prev[0] ? j->prev : "none");
        deploy_job_end(j, 0, out);
        return true;
}

void deploy_rollout_abort(struct deploy_job *j, const char *why)
{
        if (!j->ro)
                return;
        struct unit *u = core_find(j->core, j->name);
        struct unit_rollout_info in = { 0 };
        if (u)
                unit_rollout_info(u, &in);
        if (in.running && in.arg == j->ro)
                unit_rollout_back(u, why);
        deploy_rollout_release(j, u);
}

/* Arms j's staged rollout (j->percent) on its gadget, which must run
 * here, ready, with no restart under way. 0, or a GADGET_E* code with
 * msg. */
int deploy_rollout_arm(struct deploy_job *j, const struct unit_rollout_bound *bound, char *msg, size_t len)
{
        struct unit *u = core_find(j->core, j->name);
        struct rollout_rec *rr = calloc(1, sizeof *rr);
        if (!rr || !(rr->state_dir = strdup(j->state_dir))) {
                free(rr);
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        rr->core = j->core;
        rr->uid = j->uid;
        rr->waiting = j;
        snprintf(rr->name, sizeof rr->name, "%s", j->name);
        snprintf(rr->version, sizeof rr->version, "%s", j->version);
        snprintf(rr->prev, sizeof rr->prev, "%s", j->prev);
        int e = u ? unit_rollout_arm(u, j->percent, bound, j->version, rollout_ended, rr) : -ENOENT;
        if (e < 0) {
                deploy_rollout_free(rr);
                snprintf(msg, len, "a staged rollout needs %s loaded, ready and running here, with no rollout or "
                         "restart's new process starting (deploy at once without --percent)", j->name);
                return e == -ENOMEM ? GADGET_EINTERNAL : GADGET_EINVAL;
        }
        j->ro = rr;
        return 0;
}

void deploy_rollout_back(struct unit *u, const char *why)
{
        struct unit_rollout_info in = { 0 };
        unit_rollout_info(u, &in);
        if (!in.running)
                return;
        ((struct rollout_rec *)in.arg)->by_request = true;
        unit_rollout_back(u, why);
}

bool deploy_rollout_change(struct client *cl, uint64_t id, const char *name, const char *version, unsigned percent)
{
        struct unit *u = core_find(client_env(cl)->core, name);
        struct unit_rollout_info in = { 0 };
        if (u)
                unit_rollout_info(u, &in);
        if (!in.running)
                return false;
        if (strcmp(in.version, version) != 0) {
                client_error(cl, id, GADGET_EBUSY, "a rollout of %s %s runs: complete it (gadgetctl deploy %s %s) "
                             "or end it (gadgetctl rollback %s) first", name, in.version, name, in.version, name);
                return true;
        }
        unsigned p = percent ? percent : 100;
        unit_rollout_set(u, p); /* 100: rollout_ended commits it */
        if (p == 100)
                client_done(cl, id, "deployed %s %s: its rollout completed, every call goes to it; the previous "
                            "version's process drains", name, version);
        else
                client_done(cl, id, "rolling out %s %s to %u%% of the call trees", name, version, p);
        return true;
}

bool deploy_rollout_stop(struct client *cl, uint64_t id, const char *name)
{
        struct unit *u = core_find(client_env(cl)->core, name);
        struct unit_rollout_info in = { 0 };
        char why[80], version[80];
        if (u)
                unit_rollout_info(u, &in);
        if (!in.running)
                return false;
        snprintf(version, sizeof version, "%s", in.version);
        snprintf(why, sizeof why, "gadgetctl rollback by uid %u", (unsigned)cl->cred.uid);
        ((struct rollout_rec *)in.arg)->by_request = true;
        unit_rollout_back(u, why);
        client_done(cl, id, "rolled back %s: version %s gets no more calls and drains; the current version serves "
                    "every call", name, version);
        return true;
}
