/* deploy_store_thread: the thread of deploy_store.c, with a connection of
 * its own to the store: LISTENs for the store's notification of a change
 * and looks then, and every ROUND_MS besides; sends this node's write of a
 * row if one waits; reads each bundle another node put in the store and
 * checks it itself, as an install's thread does (install_from_store):
 * the signature against this node's own TrustedKeys=, never another
 * node's word; and hands what it saw to the loop. Also an install's
 * publication of its bundle, on that install's thread. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "contract.h"
#include "deploy_store_int.h"
#include "store/kvpg_sql.h"
#include "system/releases.h"

void ds_post(struct deploy_store *ds, struct ds_msg *m)
{
        mailbox_post(ds->mb, &m->link);
}

void ds_free_shared(struct deploy_store *ds)
{
        /* The thread's call comes after the loop closed the box
         * (deploy_store_free, before stop); the loop's, if the thread
         * never started. */
        mailbox_free(ds->mb);
        if (ds->wake_fd >= 0)
                close(ds->wake_fd);
        free(ds->conninfo);
        free(ds->node);
        free(ds->state_dir);
        free(ds->keys);
        pthread_mutex_destroy(&ds->mu);
        free(ds);
}

/* A bundle another node put in the store: read, checked by this node,
 * unpacked (or refused: nothing of it stays). */
static void take_bundle(struct deploy_store *ds, PGconn *c, const struct kvpg_release_row *row)
{
        struct ds_msg *m = calloc(1, sizeof *m);
        uint8_t *buf = NULL;
        size_t len = 0;
        char name[64] = "", version[BUNDLE_VERSION_MAX + 1] = "", signer[2 * BUNDLE_KEY_LEN + 1] = "";
        if (!m)
                return;
        snprintf(m->gadget, sizeof m->gadget, "%s", row->gadget);
        snprintf(m->version, sizeof m->version, "%s", row->version);
        snprintf(m->node, sizeof m->node, "%s", row->node);
        /* This node's own, or one it took already (its directory is
         * there): nothing to do. The names are checked before they name
         * a path. */
        if (gadget_name_ok(row->gadget) && bundle_version_ok(row->version) &&
            releases_has(ds->state_dir, row->gadget, row->version)) {
                free(m);
                return;
        }
        int e = kvpg_releases_bundle(c, row->seq, BUNDLE_SIZE_MAX, &buf, &len, m->why, sizeof m->why);
        if (e == -EIO) { /* the store's failure: tried again at the next round */
                free(m);
                return;
        }
        int code = e < 0 ? GADGET_ELIMIT
                         : install_from_store(&ds->rel, buf, len, (uid_t)row->uid, name, version, signer, m->why,
                                              sizeof m->why);
        free(buf);
        /* The row's names are another node's word: the bundle's own
         * (signed) ones are what was installed. */
        if (code == 0 && (strcmp(name, row->gadget) != 0 || strcmp(version, row->version) != 0)) {
                releases_undo(ds->state_dir, name, version, NULL, false);
                snprintf(m->why, sizeof m->why, "the store's row names %.63s %.79s, the bundle %s %s", row->gadget,
                         row->version, name, version);
                code = GADGET_EINVAL;
        }
        m->kind = code == 0 ? M_INSTALLED : M_REFUSED;
        if (code == 0)
                snprintf(m->why, sizeof m->why, "signed by key %.16s", signer);
        ds_post(ds, m);
}

/* One round: this node's write if one waits, the bundles and states
 * since the last seen. -1: the connection is to be made again; 1: a
 * batch was full (more wait: the next round comes at once, CATCHUP a
 * second at most). */
static int round_once(struct deploy_store *ds, PGconn *c, int64_t *bundle_seq, int64_t *state_seq, bool *ready,
                      bool *old)
{
        char why[300] = "";
        if (!*ready) {
                int v = kvpg_releases_schema(c, why, sizeof why);
                if (v == -1)
                        return -1;
                /* A store a newer node migrated past this node's schema
                 * (-2): looked at again next round, this node's deploys
                 * refused meanwhile (deploy_store_gate: not read yet). */
                if (v == -2) {
                        struct ds_msg *m = calloc(1, sizeof *m);
                        if (m) {
                                m->kind = M_UNUSABLE;
                                snprintf(m->why, sizeof m->why, "%s", why);
                                ds_post(ds, m);
                        }
                        return 0;
                }
                if (v < KVPG_SCHEMA_RELEASES) {
                        *old = true;
                        /* Each node's own versions, as before: the
                         * loop's deploys stay local meanwhile. */
                        struct ds_msg *m = calloc(1, sizeof *m);
                        if (m) {
                                m->kind = M_OLD;
                                ds_post(ds, m);
                        }
                        return 0;
                }
                *ready = true;
        }
        pthread_mutex_lock(&ds->mu);
        bool has = ds->has_write;
        struct kvpg_release_state w = ds->w;
        int64_t gen = ds->w_gen;
        ds->has_write = false;
        pthread_mutex_unlock(&ds->mu);
        if (has) {
                struct ds_msg *m = calloc(1, sizeof *m);
                int64_t g = kvpg_releases_set(c, &w, gen, why, sizeof why);
                if (m) {
                        m->kind = M_WRITTEN;
                        m->gen = g;
                        snprintf(m->why, sizeof m->why, "%s", why);
                        ds_post(ds, m);
                }
                /* A failed write (a server that went read-only, a lost
                 * session): the connection is made again. */
                if (g < 0)
                        return -1;
        }
        struct kvpg_release_row rows[BUNDLES_PER_ROUND];
        size_t n = 0;
        if (kvpg_releases_new(c, *bundle_seq, rows, BUNDLES_PER_ROUND, &n, why, sizeof why) < 0)
                return -1;
        for (size_t i = 0; i < n; i++) {
                take_bundle(ds, c, &rows[i]);
                *bundle_seq = rows[i].seq;
        }
        bool full = n == BUNDLES_PER_ROUND;
        static __thread struct kvpg_release_state st[STATES_PER_ROUND];
        if (kvpg_releases_states(c, *state_seq, st, STATES_PER_ROUND, &n, why, sizeof why) < 0)
                return -1;
        full = full || n == STATES_PER_ROUND;
        for (size_t i = 0; i < n; i++) {
                struct ds_msg *m = calloc(1, sizeof *m);
                *state_seq = st[i].seq;
                if (!m)
                        continue;
                m->kind = M_STATE;
                m->st = st[i];
                ds_post(ds, m);
        }
        struct ds_msg *m = calloc(1, sizeof *m);
        if (m) {
                m->kind = M_ROUND;
                ds_post(ds, m);
        }
        return full ? 1 : 0;
}

/* Wakes the thread (a write to send, or its stop): an eventfd's
 * counter, the write cannot block. */
void ds_wake(struct deploy_store *ds)
{
        uint64_t one = 1;
        if (write(ds->wake_fd, &one, sizeof one) < 0)
                (void)0;
}

/* Until the next round: a notification of the store (a change), a wake
 * from the loop, or ROUND_MS (a row written by other means notifies no
 * one; a lost connection is tried again then). */
static void wait_round(struct deploy_store *ds, PGconn *c, int ms)
{
        if (c && kvpg_releases_notified(c))
                return; /* one came during the round */
        struct pollfd p[2] = { { .fd = ds->wake_fd, .events = POLLIN }, { .fd = c ? PQsocket(c) : -1,
                                                                          .events = POLLIN } };
        if (poll(p, 2, ms) > 0 && (p[0].revents & POLLIN)) {
                uint64_t n;
                if (read(ds->wake_fd, &n, sizeof n) < 0)
                        (void)0;
        }
        if (c)
                kvpg_releases_notified(c);
}

void *ds_thread(void *arg)
{
        struct deploy_store *ds = arg;
        PGconn *c = NULL;
        int64_t bundle_seq = 0, state_seq = 0;
        bool ready = false, old = false;
        char why[300];
        time_t second = 0;
        unsigned quick = 0;
        for (;;) {
                pthread_mutex_lock(&ds->mu);
                bool stop = ds->stop;
                pthread_mutex_unlock(&ds->mu);
                if (stop)
                        break;
                if (!c && (c = kvpg_releases_connect(ds->conninfo, ds->node, CONNECT_MS, why, sizeof why)) &&
                    kvpg_releases_listen(c, why, sizeof why) < 0) {
                        PQfinish(c);
                        c = NULL;
                }
                int r = c ? round_once(ds, c, &bundle_seq, &state_seq, &ready, &old) : 0;
                if (r < 0) {
                        PQfinish(c);
                        c = NULL;
                }
                /* Rows behind (a node that starts late, or a hostile one
                 * that wrote many): read at once, at most CATCHUP rounds
                 * (CATCHUP * STATES_PER_ROUND rows) a second, so a flood
                 * costs bounded CPU and delays the rows after it only. */
                time_t now = time(NULL);
                if (now != second)
                        second = now, quick = 0;
                if (r > 0 && quick++ < CATCHUP)
                        continue;
                /* Until the store answered once (its rows, or a schema
                 * before 15), the loop refuses deploys: looked at again
                 * soon (a connection, two statements, START_MS apart). */
                bundle_thread_idle();
                wait_round(ds, c, ready || old ? ROUND_MS : START_MS);
        }
        if (c)
                PQfinish(c);
        ds_free_shared(ds);
        return NULL;
}

int deploy_store_publish(const struct control_releases *rel, const uint8_t *buf, size_t len, const char *name,
                         const char *version, const char *signer, uid_t uid, char *msg, size_t msglen,
                         bool *published, int64_t *pruned)
{
        struct kvpg_release_row row = { .installed_ms = (int64_t)time(NULL) * 1000, .uid = uid };
        char why[400];
        snprintf(row.gadget, sizeof row.gadget, "%s", name);
        snprintf(row.version, sizeof row.version, "%s", version);
        snprintf(row.signer, sizeof row.signer, "%s", signer);
        snprintf(row.node, sizeof row.node, "%s", rel->node ? rel->node : "");
        PGconn *c = kvpg_releases_connect(rel->conninfo, rel->node ? rel->node : "", CONNECT_MS, why, sizeof why);
        int v = c ? kvpg_releases_schema(c, why, sizeof why) : -1;
        int e = 0;
        if (c && v >= KVPG_SCHEMA_RELEASES)
                e = kvpg_releases_add(c, &row, buf, len, why, sizeof why);
        /* The store keeps VersionsKept= of each gadget as a node does,
         * pruned by the node that installs (its failure changes nothing
         * of the install: the next one prunes again). On this thread:
         * the loop logs it. */
        *pruned = 0;
        if (c && v >= KVPG_SCHEMA_RELEASES && e == 0 && rel->keep) {
                char pwhy[300];
                int64_t n = kvpg_releases_prune(c, name, rel->keep, pwhy, sizeof pwhy);
                *pruned = n < 0 ? -1 : n; /* logged by the loop (install_loaded) */
        }
        if (c)
                PQfinish(c);
        if (c && v >= 0 && v < KVPG_SCHEMA_RELEASES)
                return 0; /* a store of schema 12: this node's own versions, as before */
        if (!c || v < 0 || e < 0) {
                snprintf(msg, msglen, "%s %s was not installed: the store did not take it%s: %s", name, version,
                         c && v == -1 ? " (its schema is being made: try again)" : "", why);
                return e == -EEXIST ? GADGET_EFAILED : GADGET_EUNAVAILABLE;
        }
        *published = true;
        return 0;
}
