/* install: gadgetctl install BUNDLE and gadgetctl versions NAME
 * (docs/releases.md). The bundle comes as an fd the client opened with
 * its own rights (never a path gadgetd would open for it); a thread reads
 * it within BUNDLE_SIZE_MAX, parses it (proto/bundle.c), checks its
 * signature against TrustedKeys=, unpacks it into the store
 * (system/releases.c) and checks its policy; the loop then makes it the
 * current version and loads it as `gadgetctl load` would. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <event2/event.h>

#include "bundle.h"
#include "client.h"
#include "contract.h"
#include "control.h"
#include "deploy_state.h"
#include "policy.h"
#include "system/audit.h"
#include "system/loader.h"
#include "system/log.h"
#include "system/mailbox.h"
#include "system/thread.h"
#include "system/releases.h"
#include "system/ssl_dl.h"

struct install_job {
        struct control *ctl;
        unsigned slot;              /* control_install_begin's */
        const struct control_env *env; /* the loop's only: the thread uses rel */
        /* What the thread reads of the settings, its own copy (its
         * thread may outlive the control at gadgetd's end). */
        struct control_releases rel;
        char *state_dir, *conninfo, *node;
        uint8_t (*keys)[BUNDLE_KEY_LEN];
        struct client_load *ans;
        struct peercred cred;       /* who asked (recorded with the version) */
        int fd;                     /* the bundle */
        size_t size;                /* its size when the thread looked */
        struct mailbox *mb;         /* the thread's end, to the loop */
        struct mailbox_item end;
        pthread_t thread;
        bool running;               /* the thread runs (not joined yet) */
        bool abandoned;             /* the control went while its load was in flight */
        bool published;             /* its bundle is in the cluster's store (the thread's, then the loop's) */
        int64_t store_pruned;       /* the store's versions it pruned (-1: the prune failed), as published */
        /* Written by the thread before its post, read by the loop after. */
        int code;                   /* 0 or a GADGET_E* */
        char msg[4096];
        char name[64], version[BUNDLE_VERSION_MAX + 1], signer[2 * BUNDLE_KEY_LEN + 1];
        char prev[BUNDLE_VERSION_MAX + 2]; /* the current version before (the loop's) */
};

static bool trusted(const struct control_releases *r, const uint8_t key[BUNDLE_KEY_LEN])
{
        for (size_t i = 0; i < r->n_trusted; i++)
                if (memcmp(r->trusted[i], key, BUNDLE_KEY_LEN) == 0)
                        return true;
        return false;
}

/* Why this is safe: a bundle whose signature does not match its content
 * is refused whatever the settings (it was changed on its way); one
 * unsigned or signed by a key not in TrustedKeys= is taken only with
 * AllowUnsigned=yes and only from root: its policy is loaded with
 * gadgetd's rights, which only a trusted signer (or root) may vouch for. */
static int signature_check(struct install_job *j, struct bundle *b)
{
        const struct control_releases *r = &j->rel;
        int e = bundle_verify(b);
        char id[2 * BUNDLE_KEY_LEN + 1];
        if (b->is_signed)
                bundle_key_hex(b->key, id);
        if (e == -EIO) {
                snprintf(j->msg, sizeof j->msg, "cannot check the bundle's signature (libcrypto failed)");
                return GADGET_EINTERNAL;
        }
        if (b->is_signed && e < 0) {
                snprintf(j->msg, sizeof j->msg, "the bundle's signature does not match its content (changed after "
                         "it was signed, or not signed by key %.16s)", id);
                return GADGET_EDENIED;
        }
        if (b->is_signed)
                snprintf(j->signer, sizeof j->signer, "%s", id);
        if (b->is_signed && trusted(r, b->key))
                return 0;
        if (!r->allow_unsigned || j->cred.uid != 0) {
                if (b->is_signed)
                        snprintf(j->msg, sizeof j->msg, "the bundle is signed by key %.16s..., which is not in "
                                 "TrustedKeys= of gadgetd.conf", id);
                else
                        snprintf(j->msg, sizeof j->msg, "the bundle is unsigned (gadgetctl bundle --key KEY signs it)");
                if (r->allow_unsigned)
                        strncat(j->msg, "; AllowUnsigned=yes lets root alone install it",
                                sizeof j->msg - strlen(j->msg) - 1);
                return GADGET_EDENIED;
        }
        return 0;
}

/* The whole file, size bytes as fstat said: a file that grows or shrinks
 * while read is refused (its signature would not be of what was read).
 * Why fstat here, in the thread, and a regular file only: a FIFO, socket
 * or device passed as the bundle could block a reader forever, and so
 * could a file on a stalled filesystem (FUSE) even for fstat: only this
 * thread waits, never the loop. */
static int read_bundle(struct install_job *j, uint8_t **out)
{
        struct stat st;
        if (fstat(j->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(j->msg, sizeof j->msg, "the bundle must be a regular file");
                return GADGET_EINVAL;
        }
        if (st.st_size > (off_t)BUNDLE_SIZE_MAX) {
                snprintf(j->msg, sizeof j->msg, "the bundle has %lld bytes, more than a bundle may hold (%u)",
                         (long long)st.st_size, BUNDLE_SIZE_MAX);
                return GADGET_ELIMIT;
        }
        j->size = (size_t)st.st_size;
        uint8_t *buf = malloc(j->size + 1);
        size_t got = 0;
        if (!buf) {
                snprintf(j->msg, sizeof j->msg, "out of memory for a bundle of %zu bytes", j->size);
                return GADGET_EINTERNAL;
        }
        while (got < j->size + 1) {
                ssize_t n = pread(j->fd, buf + got, j->size + 1 - got, (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        snprintf(j->msg, sizeof j->msg, "cannot read the bundle: %s", strerror(errno));
                        free(buf);
                        return GADGET_EINVAL;
                }
                if (n == 0)
                        break;
                got += (size_t)n;
        }
        if (got != j->size) {
                snprintf(j->msg, sizeof j->msg, "the bundle changed size while it was read");
                free(buf);
                return GADGET_EINVAL;
        }
        *out = buf;
        return 0;
}

/* The policy gadgetd will load (path: VERSION/policy), read as gadgetd's
 * own (the signer's). Why the paths are checked again on what was
 * parsed: whatever the template's text, the program and UIs that run or
 * are served are the version's own files, never a path outside it. */
static int policy_check(struct install_job *j, const char *path)
{
        struct policy *p = NULL;
        uint64_t hash;
        char msg[3072], files[4400];
        int code = 0;
        if (loader_read(path, NULL, false, &p, &hash, msg, sizeof msg) < 0) {
                snprintf(j->msg, sizeof j->msg, "the bundle's policy has errors:\n%s", msg);
                return GADGET_EINVAL;
        }
        snprintf(files, sizeof files, "%.*s/files", (int)(strrchr(path, '/') - path), path);
        if (!releases_path_within(p->exec, files) || (p->ui && !releases_path_within(p->ui, files)) ||
            (p->admin_ui && !releases_path_within(p->admin_ui, files))) {
                snprintf(j->msg, sizeof j->msg, "the bundle's policy names a program or UI outside the bundle");
                code = GADGET_EINVAL;
        }
        policy_free(p);
        return code;
}

/* buf (j->size bytes): parsed, its signature checked, unpacked and its
 * policy checked, as docs/releases.md's steps 1 to 4; j->code and j->msg
 * say how it went (a refusal leaves nothing on disk). b is parsed in
 * place (its members point into buf). */
static void install_bundle(struct install_job *j, const uint8_t *buf, struct bundle *b, bool *parsed)
{
        const struct control_releases *r = &j->rel;
        char path[4400];
        int e;
        if ((e = bundle_parse(buf, j->size, b, j->msg, sizeof j->msg)) < 0) {
                j->code = e == -E2BIG ? GADGET_ELIMIT : e == -ENOMEM ? GADGET_EINTERNAL : GADGET_EINVAL;
                return;
        }
        *parsed = true;
        snprintf(j->name, sizeof j->name, "%s", b->name);
        snprintf(j->version, sizeof j->version, "%s", b->version);
        if ((j->code = signature_check(j, b)) != 0)
                return;
        e = releases_unpack(r->state_dir, b, j->signer, j->cred.uid, path, sizeof path, j->msg, sizeof j->msg);
        j->code = e == 0 ? 0 : e == -EEXIST ? GADGET_EFAILED : e == -EINVAL ? GADGET_EINVAL : GADGET_EFAILED;
        /* Nothing of it runs before its policy is checked; a refused one
         * leaves nothing behind. */
        if (e == 0 && (j->code = policy_check(j, path)) != 0)
                releases_undo(r->state_dir, b->name, b->version, NULL, false);
}

static void *install_thread(void *arg)
{
        struct install_job *j = arg;
        struct bundle b;
        bool parsed = false;
        uint8_t *buf = NULL;
        if ((j->code = read_bundle(j, &buf)) == 0)
                install_bundle(j, buf, &b, &parsed);
        /* In a cluster the store holds it, for every other node to check
         * and unpack (deploy_store.c); a store that cannot take it
         * refuses the install here as well. */
        if (j->code == 0 && j->rel.conninfo &&
            (j->code = deploy_store_publish(&j->rel, buf, j->size, j->name, j->version, j->signer, j->cred.uid,
                                            j->msg, sizeof j->msg, &j->published, &j->store_pruned)) != 0)
                releases_undo(j->rel.state_dir, j->name, j->version, NULL, false);
        if (parsed)
                bundle_clear(&b);
        free(buf);
        /* Never blocks; refused (dropped: nothing) only once the control
         * went (install_abandon): the job is then this thread's. */
        mailbox_post(j->mb, &j->end);
        return NULL;
}

int install_from_store(const struct control_releases *rel, const uint8_t *buf, size_t len, uid_t uid, char *name,
                       char *version, char *signer, char *msg, size_t msglen)
{
        /* AllowUnsigned= never: it is for what root hands this node, and
         * another node is no one this node trusts (its uid is shown only). */
        struct install_job j = { .rel = *rel, .cred = { .uid = uid }, .size = len };
        struct bundle b;
        bool parsed = false;
        j.rel.allow_unsigned = false;
        install_bundle(&j, buf, &b, &parsed);
        if (parsed)
                bundle_clear(&b);
        snprintf(name, 64, "%s", j.name);
        snprintf(version, BUNDLE_VERSION_MAX + 1, "%s", j.version);
        snprintf(signer, 2 * BUNDLE_KEY_LEN + 1, "%s", j.signer);
        snprintf(msg, msglen, "%s", j.msg);
        return j.code;
}

static void job_free(struct install_job *j)
{
        free(j->state_dir);
        free(j->conninfo);
        free(j->node);
        free(j->keys);
        mailbox_free(j->mb);
        if (j->fd >= 0)
                close(j->fd);
        if (j->slot)
                control_install_end(j->ctl, j->slot);
        free(j);
}

/* The install's audit record, once its bundle named the gadget: who, which
 * version, signed by whom, and whether it was installed (the reason of a
 * refusal is the answer's; it may quote the policy, so not here). */
static void job_audit(const struct install_job *j, int code)
{
        char detail[200];
        if (!j->name[0])
                return;
        snprintf(detail, sizeof detail, "version %s, %s%.16s%s", j->version,
                 j->signer[0] ? "signed by key " : "unsigned", j->signer, code ? ": refused" : "");
        struct audit_record rec = { .gadget = j->name, .binding = "install", .op = "install",
                                    .outcome = audit_outcome_of(code), .detail = detail, .has_uid = true,
                                    .uid = (uint32_t)j->cred.uid };
        audit_write(core_audit(j->env->core), &rec);
}

static void job_answer(struct install_job *j, int code, const char *msg)
{
        job_audit(j, code);
        client_load_answer(j->ans, code, msg);
        job_free(j);
}

/* The load of the new current policy ended (the daemon's load). */
static void install_loaded(void *arg, int err, const char *name, const char *msg)
{
        struct install_job *j = arg;
        const struct control_releases *r = &j->rel;
        char out[8192];
        (void)name;
        if (j->abandoned) { /* gadgetd is ending: no control, no client left */
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                job_free(j);
                return;
        }
        if (err < 0) {
                releases_undo(r->state_dir, j->name, j->version, j->prev, true);
                snprintf(out, sizeof out, "%s %s was not installed: its load failed: %s", j->name, j->version, msg);
                job_answer(j, GADGET_EFAILED, out);
                return;
        }
        /* gadgetctl rollback goes back to the version before; set now so
         * that the pruning keeps it (a failed start puts it back). */
        char was_previous[80];
        releases_previous(r->state_dir, j->name, was_previous, sizeof was_previous);
        if (j->prev[0])
                releases_set_previous(r->state_dir, j->name, j->prev);
        size_t pruned = releases_prune(r->state_dir, j->name, r->keep);
        log_msg(L_INFO, j->name, "installed version \"%s\" (%s%.16s) for uid %u; %zu old versions removed",
                j->version, j->signer[0] ? "signed by key " : "unsigned", j->signer, (unsigned)j->cred.uid, pruned);
        if (j->store_pruned)
                log_msg(j->store_pruned < 0 ? L_ERR : L_INFO, j->name, j->store_pruned < 0 ? "its versions in the "
                        "store were not pruned (tried again at the next install)" : "%" PRId64 " old versions "
                        "removed from the store (VersionsKept=%u)", j->store_pruned, r->keep);
        /* "restarting NAME on its changed policy" (a running gadget):
         * the answer comes once the new process serves. */
        bool restart = strncmp(msg, "restarting ", 11) == 0;
        snprintf(out, sizeof out, "installed %s %s (%s%.16s); %s%s", j->name, j->version,
                 j->signer[0] ? "signed by key " : "unsigned", j->signer, restart ? "restarted " : "",
                 restart ? msg + 11 : msg);
        /* The answer waits for the new version's start; one that fails
         * it is rolled back to the version before (deploy.c). */
        job_audit(j, 0);
        deploy_after_install(j->ans, j->ctl, j->env, j->cred.uid, j->name, j->version, j->prev, was_previous, out);
        job_free(j);
}

static void install_commit(struct install_job *j);
static void install_stored(void *arg, int err, const char *why);

/* The state of the version it replaces kept with that version, as a
 * deploy keeps it (deploy_state.c), or the install refused: nothing of it
 * left, nothing changed. */
static void install_state_done(void *arg, int code, const char *msg)
{
        struct install_job *j = arg;
        int e;
        if (j->abandoned) { /* gadgetd is ending: no control, no client left */
                releases_undo(j->rel.state_dir, j->name, j->version, j->prev, false);
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                job_free(j);
                return;
        }
        if (code) {
                releases_undo(j->rel.state_dir, j->name, j->version, j->prev, false);
                snprintf(j->msg, sizeof j->msg, "%s %s was not installed: %.3000s", j->name, j->version, msg);
                job_answer(j, code, j->msg);
                return;
        }
        /* In a cluster the store says first which version is current
         * (a compare-and-set: an install or deploy of another node
         * meanwhile refuses this one); every node then makes it so. */
        if (j->published && control_deploy_store(j->ctl)) {
                if ((e = deploy_store_install(j->ctl, j->name, j->version, install_stored, j)) < 0)
                        install_stored(j, e, e == -EBUSY ? "too many deploys, rollbacks and installs of this "
                                       "node wait for the store; try again when they ended" : "out of memory");
                return;
        }
        install_commit(j);
}

static void install_read(void *arg, struct mailbox_item *item)
{
        struct install_job *j = arg;
        const struct control_releases *r = &j->rel;
        char msg[700];
        (void)item;
        pthread_join(j->thread, NULL); /* it has posted its end: it is returning */
        j->running = false;
        if (j->code) {
                job_answer(j, j->code, j->msg);
                return;
        }
        releases_current(r->state_dir, j->name, j->prev, sizeof j->prev);
        /* First the state of the version it replaces, kept with it; the
         * install waits for it, and is refused if it fails. */
        int e = deploy_state_begin(j->env->core, r->state_dir, j->name, j->prev, j->version, false,
                                   install_state_done, j, msg, sizeof msg);
        if (e == DEPLOY_STATE_NONE)
                install_state_done(j, 0, "");
        else if (e)
                install_state_done(j, e, msg);
}

/* Its version made current and loaded. */
static void install_commit(struct install_job *j)
{
        const struct control_releases *r = &j->rel;
        struct peercred root = { .pid = getpid(), .uid = 0, .gid = 0 };
        char path[4400];
        int e;
        if ((e = releases_commit(r->state_dir, j->name, j->version, path, sizeof path)) == 0)
                e = j->env->load(j->env->arg, path, false, &root, install_loaded, j);
        if (e < 0) {
                releases_undo(r->state_dir, j->name, j->version, j->prev, true);
                snprintf(j->msg, sizeof j->msg, "%s %s was not installed: %s", j->name, j->version,
                         e == -EBUSY ? "gadgetd is busy loading policies; try again" : strerror(-e));
                job_answer(j, e == -EBUSY ? GADGET_EBUSY : GADGET_EFAILED, j->msg);
        }
}

/* The store's word on the install's state row (deploy_store_install). */
static void install_stored(void *arg, int err, const char *why)
{
        struct install_job *j = arg;
        if (j->abandoned || !j->slot) {
                client_load_answer(j->ans, GADGET_EUNAVAILABLE, "gadgetd is stopping");
                job_free(j);
                return;
        }
        if (err < 0) {
                /* The bundle stays in the store and here, installed but
                 * not current, as on every other node. */
                snprintf(j->msg, sizeof j->msg, "%s %s was installed but is not current: %s", j->name, j->version,
                         why);
                job_answer(j, err == -EAGAIN || err == -EBUSY ? GADGET_EBUSY : GADGET_EFAILED, j->msg);
                return;
        }
        install_commit(j);
}

static const struct mailbox_owner install_box = { .take = install_read };

/* Starts j's thread. 0 or -errno. */
static int job_start(struct install_job *j)
{
        int e;
        if ((e = mailbox_new(j->env->base, &install_box, j, &j->mb)) < 0)
                return e;
        e = thread_start(&j->thread, install_thread, j, 0, false);
        j->running = e == 0;
        return e;
}

void install_abandon(struct install_job *j)
{
        j->slot = 0; /* the control is going */
        if (!j->running) { /* its load is in flight: install_loaded ends it */
                j->abandoned = true;
                return;
        }
        /* The thread ends on its own; its post is refused (or dropped,
         * if it came already: the box's drop is none), and the job stays
         * with it (gadgetd is ending). */
        mailbox_close(j->mb);
        pthread_detach(j->thread);
}

/* A job for cl's request, its settings copied. NULL: out of memory. */
static struct install_job *job_new(struct client *cl)
{
        const struct control_releases *r = &client_env(cl)->releases;
        struct install_job *j = calloc(1, sizeof *j);
        if (!j)
                return NULL;
        *j = (struct install_job){ .ctl = cl->ctl, .env = client_env(cl), .rel = *r, .cred = cl->cred, .fd = -1 };
        j->state_dir = strdup(r->state_dir);
        j->keys = malloc((r->n_trusted ? r->n_trusted : 1) * sizeof *j->keys);
        if (!j->state_dir || !j->keys) {
                job_free(j);
                return NULL;
        }
        if (r->n_trusted)
                memcpy(j->keys, r->trusted, r->n_trusted * sizeof *j->keys);
        j->rel.state_dir = j->state_dir;
        if (r->conninfo && (!(j->rel.conninfo = j->conninfo = strdup(r->conninfo)) ||
                            !(j->rel.node = j->node = strdup(r->node ? r->node : "")))) {
                job_free(j);
                return NULL;
        }
        j->rel.trusted = (const uint8_t (*)[BUNDLE_KEY_LEN])j->keys;
        return j;
}

void request_install(struct client *cl, const Control__Request *q)
{
        struct install_job *j;
        int e;
        if (!client_env(cl)->releases.state_dir) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "this gadgetd installs no bundles");
                return;
        }
        /* libcrypto, for the bundle's digest and signature: loaded here, on
         * the loop, before any thread can call it (system/ssl_dl.c). */
        char why[200];
        if (ssl_dl_load(why, sizeof why) < 0) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "cannot verify bundles: %s", why);
                return;
        }
        /* In a cluster whose store is not read yet, the install would
         * not know the row it changes: refused, never made here alone. */
        char gate[400];
        if (deploy_store_gate(cl->ctl, gate, sizeof gate) < 0) {
                client_error(cl, q->id, GADGET_EBUSY, "%s", gate);
                return;
        }
        if (!(j = job_new(cl))) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        if (!(j->slot = control_install_begin(cl, j))) {
                job_free(j);
                client_error(cl, q->id, GADGET_EBUSY, "another install is under way; try again when it ends");
                return;
        }
        j->fd = cl->fds[0];
        cl->n_fds = 0; /* taken */
        if (!(j->ans = client_load_begin(cl, q->id))) {
                job_free(j);
                return;
        }
        if ((e = job_start(j)) < 0) {
                snprintf(j->msg, sizeof j->msg, "cannot start reading the bundle: %s", strerror(-e));
                job_answer(j, GADGET_EINTERNAL, j->msg);
        }
}

void request_versions(struct client *cl, const Control__Request *q)
{
        const struct control_env *env = client_env(cl);
        struct release_info *v = NULL;
        size_t n = 0;
        int e = env->releases.state_dir ? releases_list(env->releases.state_dir, q->versions->name, &v, &n) : 0;
        if (e < 0) {
                client_error(cl, q->id, GADGET_EINTERNAL, "cannot read the store: %s", strerror(-e));
                return;
        }
        /* In a cluster, the store's bundles this node refused, listed with
         * why (nothing of them is here). */
        const char *rv[16], *rn[16], *rw[16];
        size_t nr = deploy_store_refused(cl->ctl, q->versions->name, rv, rn, rw, 16);
        Control__VersionInfo *info = calloc(n + nr ? n + nr : 1, sizeof *info);
        Control__VersionInfo **pv = calloc(n + nr ? n + nr : 1, sizeof *pv);
        Control__VersionList list = CONTROL__VERSION_LIST__INIT;
        if (!info || !pv) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                control__version_info__init(&info[i]);
                info[i].version = v[i].version;
                info[i].signer = v[i].signer;
                info[i].installed_ms = v[i].installed_ms;
                info[i].uid = (uint32_t)v[i].uid;
                info[i].sdk = v[i].sdk;
                info[i].current = v[i].current;
                unsigned long long bytes;
                long long ms;
                if (deploy_state_kept(env->releases.state_dir, q->versions->name, v[i].version, &bytes, &ms)) {
                        info[i].state_ms = ms;
                        info[i].state_bytes = bytes;
                }
                pv[i] = &info[i];
        }
        for (size_t i = 0; i < nr; i++) {
                control__version_info__init(&info[n + i]);
                info[n + i].version = (char *)rv[i];
                info[n + i].node = (char *)rn[i];
                info[n + i].refused = (char *)rw[i];
                pv[n + i] = &info[n + i];
        }
        list.versions = pv;
        list.n_versions = n + nr;
        client_answer(cl, q->id, &list.base);
out:
        free(pv);
        free(info);
        free(v);
}
