/* backup: gadgetctl backup and restore — root's only, each with the file
 * as the one fd of its request (control.c's take_fds), carried out by the
 * gadget's binding side (bindings_snapshot: store/snapshot.h) off the
 * loop; the answer comes when the file is written, or the restore
 * committed or refused. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backup.h"
#include "bindings/bindings.h"
#include "client.h"
#include "control.h"
#include "contract.h"
#include "system/audit.h"
#include "system/log.h"

struct snapshot_wait {
        struct client_load *load;   /* the answer, which outlives its client */
        struct core *core;
        bool restore;
        uint64_t uid;
        char gadget[64];
};

static void audit_snapshot(struct core *core, const char *gadget, bool restore, uint32_t uid, int code,
                           const char *detail)
{
        struct audit_record rec = { .gadget = gadget, .binding = restore ? "restore" : "backup",
                                    .op = restore ? "restore" : "backup", .outcome = audit_outcome_of(code),
                                    .detail = detail, .has_uid = true, .uid = uid };
        audit_write(core_audit(core), &rec);
}

static void snapshot_done(void *arg, int err, const char *why, const struct backup_info *info)
{
        struct snapshot_wait *w = arg;
        char msg[700], sum[65];
        int code = 0;
        for (int i = 0; i < 32; i++)
                snprintf(sum + 2 * i, 3, "%02x", info->sha256[i]);
        if (err < 0) {
                code = err == -EINVAL || err == -EBADMSG || err == -ENODATA || err == -ENOTSUP || err == -EDQUOT
                               ? GADGET_EINVAL
                               : err == -EAGAIN ? GADGET_EUNAVAILABLE : GADGET_EFAILED;
                snprintf(msg, sizeof msg, "%s %s refused: %s%s", w->restore ? "restore of" : "backup of", w->gadget,
                         why ? why : "failed", w->restore ? " (nothing was changed)" : "");
        } else {
                snprintf(msg, sizeof msg, "%s %s: %" PRIu64 " keys, %" PRIu64 " alarms, sha256 %s",
                         w->restore ? "restored" : "backup of", w->gadget, info->n_kv, info->n_alarms, sum);
        }
        log_msg(err < 0 ? L_WARN : L_INFO, w->gadget, "%s", msg);
        audit_snapshot(w->core, w->gadget, w->restore, (uint32_t)w->uid, code, msg);
        if (err == 0 && w->restore) {
                /* The alarms changed under the delivery: it looks again. */
                struct unit *u = core_find(w->core, w->gadget);
                struct gadget_bindings *g = u ? unit_bindings(u) : NULL;
                if (g && g->alarms_changed)
                        g->alarms_changed(g->alarms_arg);
        }
        client_load_answer(w->load, code, msg);
        free(w);
}

/* Why a restore waits for a stopped (or idle) gadget: its program would
 * otherwise go on from a state that is no longer there. A call that wakes
 * an idle one meanwhile reads the state before or after the restore's one
 * transaction, never a mix. */
static bool restorable(enum unit_state s)
{
        return s == UNIT_STOPPED || s == UNIT_FAILED || s == UNIT_IDLE;
}

static void request_snapshot(struct client *cl, const Control__Request *q, bool restore)
{
        const char *name = restore ? q->restore->name : q->backup->name;
        const char *verb = restore ? "restore" : "backup";
        struct core *core = client_env(cl)->core;
        char why[400];
        struct unit *u = core_find(core, name);
        if (cl->cred.uid != 0) {
                /* Why root only: a backup reads all of the gadget's data,
                 * a restore replaces it; a member may only call methods. */
                snprintf(why, sizeof why, "gadgetctl %s by uid %u refused: root only", verb, (unsigned)cl->cred.uid);
                client_error(cl, q->id, GADGET_EDENIED, "%s is root's only", verb);
                if (u) {
                        log_msg(L_WARN, name, "%s", why);
                        audit_snapshot(core, name, restore, (uint32_t)cl->cred.uid, GADGET_EDENIED, why);
                }
                return;
        }
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", name);
                return;
        }
        if (restore && !restorable(unit_state_of(u))) {
                struct unit_info in;
                unit_info(u, &in);
                client_error(cl, q->id, GADGET_EBUSY, "%s is %s: restore only a stopped or idle gadget "
                             "(gadgetctl stop %s first); nothing was changed", name, in.state, name);
                return;
        }
        struct gadget_bindings *g = unit_bindings(u);
        struct snapshot_wait *w = g ? calloc(1, sizeof *w) : NULL;
        if (!w) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        struct client_load *load = client_load_begin(cl, q->id); /* NULL: refused already */
        if (!load) {
                free(w);
                return;
        }
        *w = (struct snapshot_wait){ .load = load, .core = core, .restore = restore, .uid = cl->cred.uid };
        snprintf(w->gadget, sizeof w->gadget, "%s", name);
        int fd = cl->fds[0];
        cl->n_fds = 0; /* taken: bindings_snapshot closes it */
        int code = bindings_snapshot(g, restore, fd, snapshot_done, w, why, sizeof why);
        if (code) {
                client_load_answer(load, code, why);
                free(w);
        }
}

void request_backup(struct client *cl, const Control__Request *q)
{
        request_snapshot(cl, q, false);
}

void request_restore(struct client *cl, const Control__Request *q)
{
        request_snapshot(cl, q, true);
}
