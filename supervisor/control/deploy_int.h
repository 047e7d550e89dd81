/* deploy_int: what deploy.c (deploys, rollbacks and an install's wait)
 * and deploy_rollout.c (a staged deploy's rollout) share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"
#include "control.h"
#include "core/core.h"

/* A staged rollout, the control's side: what its end (rollout_ended,
 * the core's callback) does to the store. Lives from its arming until
 * that callback, or until the core dropped it unarmed (deploy_rollout_release). */
struct rollout_rec {
        struct core *core;
        char *state_dir;
        char name[64], version[80], prev[80];
        uid_t uid;
        bool by_request;            /* sent back by gadgetctl, not by its bound or an end */
        struct deploy_job *waiting; /* the deploy that began it, until answered */
};

struct deploy_job {
        LIST_ENTRY(deploy_job) link; /* in its control's deploys, while it has one */
        struct control *ctl;        /* NULL once the control went (gadgetd is ending) */
        struct core *core;
        const struct control_env *env;
        struct client_load *ans;
        char *state_dir;
        uid_t uid;                  /* who asked (audited) */
        bool rollback;
        bool with_state;            /* a rollback restoring the state kept with its version (deploy_state.c) */
        char *text;                 /* an install's: what it did; NULL: a deploy's or rollback's */
        char name[64], version[80], prev[80];
        char previous[80];          /* the store's previous before, put back by a rollback of j */
        char said[400];             /* what its state's step did (deploy_state.c), "" if nothing */
        unsigned percent;           /* 1 to 99: a staged rollout; else at once */
        struct unit_rollout_bound bound; /* its error bound */
        struct rollout_rec *ro;     /* its rollout's record, until that rollout ended */
        bool ro_completed;          /* it ended before the answer: completed, or not */
};

/* deploy.c's. */
/* The answer, the audit record, and j freed. */
void deploy_job_end(struct deploy_job *j, int code, const char *msg);
void deploy_job_free(struct deploy_job *j);

/* deploy_rollout.c's. */
void deploy_rollout_free(struct rollout_rec *rr);
/* j's rollout record, once j no longer waits (see there). */
void deploy_rollout_release(struct deploy_job *j, struct unit *u);
/* A staged deploy's new process said hello: true if j was answered and
 * freed (it serves its share, or went back), false if the deploy is one
 * at once. */
bool deploy_rollout_ready(struct deploy_job *j);
/* j's version did not start: a rollout of it that began meanwhile goes
 * back (why), its record released. */
void deploy_rollout_abort(struct deploy_job *j, const char *why);
/* Arms j's staged rollout (j->percent) on its gadget. 0, or a GADGET_E*
 * code with msg. */
int deploy_rollout_arm(struct deploy_job *j, const struct unit_rollout_bound *bound, char *msg, size_t len);
/* gadgetctl deploy of name while a rollout of it runs: its share set to
 * percent (0: 100, completing it), or refused for another version;
 * answered (cl's id), true. false: none runs. */
bool deploy_rollout_change(struct client *cl, uint64_t id, const char *name, const char *version, unsigned percent);
/* gadgetctl rollback of name while a rollout of it runs: it goes back,
 * answered, true. false: none runs. */
bool deploy_rollout_stop(struct client *cl, uint64_t id, const char *name);
