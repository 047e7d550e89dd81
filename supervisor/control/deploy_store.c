/* deploy_store: in a cluster (Store=postgresql, schema 15), the versions
 * and rollouts are the store's (docs/releases.md "In a cluster"). One
 * thread per gadgetd, with a connection of its own, LISTENs for the
 * store's notification of a change and looks at once, and every ROUND_MS
 * besides (two small statements: bounded cost whatever the number of
 * gadgets), and runs this node's writes, one at a time:
 *
 * - a bundle another node installed is read (at most BUNDLE_SIZE_MAX,
 *   checked by the server before it is sent), its signature checked
 *   against this node's own TrustedKeys= (never another node's verdict:
 *   every other node is hostile), unpacked and its policy checked, on
 *   this thread, as an install's thread does (install_from_store); a
 *   refusal leaves nothing on disk and is told (log, versions, status);
 * - a gadget's state row (current version, running rollout) that changed
 *   is handed to the loop, which applies it: deploys the version, starts
 *   or changes or ends the rollout (deploy.c's own paths, no client);
 * - deploy, rollback and install on this node write the row first, a
 *   compare-and-set on its generation (another node's change meanwhile
 *   refuses this one: "try again"), then apply it here as before; an
 *   automatic rollback decided by the owner is written too.
 *
 * Until the store's schema is 15 (a node of schema 12 migrated it last),
 * nothing of this runs: each node keeps its own versions, as before. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <event2/event.h>

#include "client.h"
#include "contract.h"
#include "core/core.h"
#include "deploy_store_int.h"
#include "system/log.h"
#include "system/releases.h"
#include "system/ssl_dl.h"
#include "system/thread.h"
#include "system/timer.h"

/* The one of this gadgetd's control, while it lives: a rollout's end
 * (core's callback) may come after the control went, at gadgetd's end. */
static struct deploy_store *live;


/* Whether this node has a policy or a release of name (a row of another
 * gadget is another node's word: bounded below). */
static bool known_here(struct deploy_store *ds, const char *name)
{
        char cur[80];
        if (core_find(ds->env->core, name))
                return true;
        releases_current(ds->rel.state_dir, name, cur, sizeof cur);
        return cur[0] != '\0';
}

/* name's entry (add: made if there is none). Entries of gadgets this node
 * neither has a policy nor a release of (a row before its bundle came,
 * or a hostile node's rows) are at most UNKNOWN_MAX: beyond, NULL, the
 * row ignored, counted and logged (at powers of two), so a node writing
 * any number of rows costs this node bounded memory. */
static struct ds_gadget *gadget_of(struct deploy_store *ds, const char *name, bool add)
{
        for (struct ds_gadget *g = ds->gadgets; g; g = g->next)
                if (strcmp(g->st.gadget, name) == 0)
                        return g;
        if (!add)
                return NULL;
        bool known = known_here(ds, name);
        if (!known && ds->n_unknown >= UNKNOWN_MAX) {
                uint64_t n = ++ds->rows_ignored;
                if ((n & (n - 1)) == 0)
                        log_msg(L_ERR, NULL, "ignored %" PRIu64 " release rows of the store for gadgets this node "
                                "has no policy for (at most %d such gadgets are kept; the last: \"%.63s\")", n,
                                UNKNOWN_MAX, name);
                return NULL;
        }
        struct ds_gadget *g = calloc(1, sizeof *g);
        if (!g)
                return NULL;
        snprintf(g->st.gadget, sizeof g->st.gadget, "%s", name);
        g->known = known;
        ds->n_unknown += !known;
        g->next = ds->gadgets;
        ds->gadgets = g;
        return g;
}

/* Applies g's row here, if it differs from what runs here: the version
 * deployed, the rollout begun, changed or ended. Stays pending while a
 * deploy runs here or the version's bundle is not here yet. */
static void apply(struct deploy_store *ds, struct ds_gadget *g)
{
        const struct kvpg_release_state *st = &g->st;
        const char *sd = ds->rel.state_dir;
        char cur[80];
        g->pending = g->busy = false;
        if (!gadget_name_ok(st->gadget) || !bundle_version_ok(st->current) ||
            (st->rollout[0] && !bundle_version_ok(st->rollout))) {
                log_msg(L_ERR, NULL, "the store's release row of \"%.63s\" names no version: ignored", st->gadget);
                return;
        }
        struct unit *u = core_find(ds->env->core, st->gadget);
        struct unit_rollout_info in = { 0 };
        if (u)
                unit_rollout_info(u, &in);
        releases_current(sd, st->gadget, cur, sizeof cur);
        bool rolling = st->rollout[0] && st->percent >= 1 && st->percent <= 99;
        if (in.running) {
                if (rolling && strcmp(in.version, st->rollout) == 0) {
                        if (in.percent != st->percent)
                                unit_rollout_set(u, st->percent);
                } else if (strcmp(in.version, st->current) == 0) {
                        unit_rollout_set(u, 100); /* completed: rollout_ended makes it current here */
                } else {
                        deploy_rollout_back(u, st->why[0] ? st->why : "ended through another node");
                        g->busy = rolling; /* another version's rollout: begun after this one */
                }
                g->applied = st->gen;
                return;
        }
        const char *want = rolling ? st->rollout : st->current;
        if (!releases_has(sd, st->gadget, want) || !releases_has(sd, st->gadget, st->current)) {
                g->pending = true; /* its bundle comes at a later round (or was refused: told then) */
                return;
        }
        if (rolling && !(u && unit_state_of(u) == UNIT_READY && strcmp(cur, st->current) == 0)) {
                /* Not run here (another node's), or its current version
                 * first: a rollout begins from the row's current one. */
                if (strcmp(cur, st->current) != 0)
                        want = st->current, rolling = false;
                else {
                        g->applied = st->gen;
                        return;
                }
        }
        if (!rolling && strcmp(cur, st->current) == 0) {
                if (st->previous[0] && bundle_version_ok(st->previous))
                        releases_set_previous(sd, st->gadget, st->previous);
                g->applied = st->gen;
                return;
        }
        const struct unit_rollout_bound b = { .max_error_pct = st->max_errors, .min_calls = st->min_calls };
        int e = deploy_start(ds->ctl, ds->env, 0, NULL, st->gadget, want, false, false, rolling ? st->percent : 0, &b);
        if (e == -EBUSY) {
                g->busy = true;
                return;
        }
        log_msg(L_INFO, st->gadget, "the store's %s %s (generation %" PRId64 ", by node %s)%s",
                rolling ? "rollout of version" : "version", want, st->gen, st->node,
                e < 0 ? ": not applied here" : rolling ? " begun here, which runs it" : " applied here");
        g->applied = st->gen;
        g->settle = !rolling;
        if (rolling)
                g->armed = st->gen;
        if (rolling && e < 0) {
                /* The row names a rollout nothing runs: written back. */
                char why[120];
                snprintf(why, sizeof why, "its rollout could not begin here: %s", strerror(-e));
                deploy_store_went_back(ds->ctl, st->gadget, st->rollout, NULL, NULL, why);
        }
}

/* The row's rollout runs where the gadget runs: a node that became its
 * owner (took its lease, as at a restart or the owner's death) while the
 * row names a rollout begins it itself, once its current version is
 * ready here (apply; a start that fails writes the row back), so the
 * row and what runs agree. Once per gen and ownership: a rollout that
 * ended here (went back, its row being written) is not begun again. */
static void own_rollouts(struct deploy_store *ds)
{
        for (struct ds_gadget *g = ds->gadgets; g; g = g->next) {
                const struct kvpg_release_state *st = &g->st;
                struct unit *u = g->known ? core_find(ds->env->core, st->gadget) : NULL;
                struct unit_rollout_info in = { 0 };
                if (!st->rollout[0] || st->percent < 1 || st->percent > 99 || !u || unit_state_of(u) != UNIT_READY) {
                        g->armed = 0; /* not its owner (or no rollout): begun again once it is */
                        continue;
                }
                unit_rollout_info(u, &in);
                if (in.running)
                        g->armed = st->gen;
                /* A write of this node waits: the row may be about to
                 * change (an automatic rollback queued behind it). */
                if (g->armed == st->gen || g->pending || g->busy || ds->writes ||
                    !LIST_EMPTY(control_deploys(ds->ctl)))
                        continue;
                log_msg(L_INFO, st->gadget, "runs here, and the store names a rollout of version %s (%u%%, generation "
                        "%" PRId64 ") nothing runs: beginning it", st->rollout, st->percent, st->gen);
                g->applied = 0;
                apply(ds, g);
        }
}

/* A deploy from the store ended here: the version before is the row's
 * (the deploy set this node's own), if the row's version is current. */
static void settle(struct deploy_store *ds, struct ds_gadget *g)
{
        char cur[80];
        g->settle = false;
        releases_current(ds->rel.state_dir, g->st.gadget, cur, sizeof cur);
        if (strcmp(cur, g->st.current) == 0 && bundle_version_ok(g->st.previous))
                releases_set_previous(ds->rel.state_dir, g->st.gadget, g->st.previous);
}

static void refusal(struct deploy_store *ds, const struct ds_msg *m)
{
        struct refusal *r = &ds->refused[ds->n_refused++ % REFUSALS];
        snprintf(r->gadget, sizeof r->gadget, "%s", m->gadget);
        snprintf(r->version, sizeof r->version, "%s", m->version);
        snprintf(r->node, sizeof r->node, "%s", m->node);
        snprintf(r->why, sizeof r->why, "%.299s", m->why);
        log_msg(L_ERR, gadget_name_ok(m->gadget) ? m->gadget : NULL, "refused version \"%.79s\" of \"%.63s\" from the "
                "store (put there by node %.63s): %s", m->version, m->gadget, m->node, m->why);
        struct ds_gadget *g = gadget_name_ok(m->gadget) ? gadget_of(ds, m->gadget, true) : NULL;
        if (g)
                snprintf(g->refused, sizeof g->refused, "version %.79s: %.200s", m->version, m->why);
}

static void retry_soon(struct deploy_store *ds);
static bool back_row(struct deploy_store *ds, const struct ds_write *w, struct kvpg_release_state *st);

/* Hands the first of this node's writes to the thread, if none is out.
 * An automatic rollback's row is made now, from the row as it stands
 * after the writes before it (nothing to write: done at once). */
static struct ds_write *pop_first(struct deploy_store *ds)
{
        struct ds_write *w = ds->writes;
        ds->writes = w->next;
        if (!ds->writes)
                ds->writes_last = NULL;
        ds->n_writes--;
        return w;
}

static void send_first(struct deploy_store *ds)
{
        while (!ds->writing && ds->writes) {
                struct ds_write *w = ds->writes;
                struct ds_gadget *g = gadget_of(ds, w->st.gadget, true);
                if (w->back && g && back_row(ds, w, &w->st))
                        w->gen = g->st.gen;
                else if (w->back || !g) {
                        pop_first(ds);
                        if (w->done)
                                w->done(w->arg, g ? 0 : -ENOMEM, g ? "" : "out of memory");
                        free(w);
                        continue;
                }
                snprintf(w->st.node, sizeof w->st.node, "%s", ds->node);
                ds->writing = true;
                pthread_mutex_lock(&ds->mu);
                ds->w = w->st;
                ds->w_gen = w->gen;
                ds->has_write = true;
                pthread_mutex_unlock(&ds->mu);
                ds_wake(ds);
        }
}

static void written(struct deploy_store *ds, const struct ds_msg *m)
{
        if (!ds->writing || !ds->writes)
                return;
        struct ds_write *w = pop_first(ds);
        ds->writing = false;
        if (m->gen > 0) {
                struct ds_gadget *g = gadget_of(ds, w->st.gadget, true);
                if (g) {
                        g->st = w->st;
                        g->st.gen = g->applied = m->gen;
                        g->pending = false;
                }
        }
        if (w->done)
                w->done(w->arg, m->gen > 0 ? 0 : m->gen == 0 ? -EAGAIN : -EIO,
                        m->gen > 0 ? "" : m->gen == 0 ? "the store's release state of the gadget changed meanwhile "
                        "(a deploy, rollback or install through another node): try again" : m->why);
        free(w);
        send_first(ds);
}

/* What waited for a deploy here to end, tried again once it did (on
 * the loop alone: no statement). */
static void retry(evutil_socket_t fd, short what, void *arg)
{
        struct deploy_store *ds = arg;
        (void)fd;
        (void)what;
        for (struct ds_gadget *g = ds->gadgets; g && LIST_EMPTY(control_deploys(ds->ctl)); g = g->next) {
                if (g->busy)
                        apply(ds, g);
                else if (g->settle)
                        settle(ds, g);
        }
        retry_soon(ds);
}

static void retry_soon(struct deploy_store *ds)
{
        for (struct ds_gadget *g = ds->gadgets; g; g = g->next)
                if (g->busy || g->settle) {
                        timer_arm_ms(ds->ev_retry, RETRY_MS);
                        return;
                }
}

/* The store's rows read a first time: the node's deploys, rollbacks and
 * installs go through it from now on (refused "try again" until then). */
static void became_ready(struct deploy_store *ds)
{
        if (!ds->ready)
                log_msg(L_INFO, NULL, "the releases in the store are read: deploys, rollbacks and installs go "
                        "through it");
        ds->ready = true;
}

/* The thread's word, on the loop (its mailbox's drain). */
static void on_msg(void *arg, struct mailbox_item *item)
{
        struct deploy_store *ds = arg;
        struct ds_msg *m = mailbox_entry(item, struct ds_msg, link);
        struct ds_gadget *g;
        switch (m->kind) {
        case M_STATE:
                became_ready(ds);
                if (!gadget_name_ok(m->st.gadget) || !(g = gadget_of(ds, m->st.gadget, true)))
                        break;
                if (m->st.gen <= g->applied)
                        break; /* this node's own write, applied already */
                char refused[300];
                snprintf(refused, sizeof refused, "%s", g->refused);
                g->st = m->st;
                snprintf(g->refused, sizeof g->refused, "%s", refused);
                apply(ds, g);
                break;
        case M_INSTALLED:
                log_msg(L_INFO, m->gadget, "installed version \"%s\" from the store (put there by node %s; "
                        "%s, checked here)", m->version, m->node, m->why);
                break;
        case M_REFUSED:
                refusal(ds, m);
                break;
        case M_WRITTEN:
                written(ds, m);
                break;
        case M_ROUND:
                became_ready(ds);
                ds->old = false;
                /* Gadgets that came here since (their bundle, a
                 * policy) are no longer counted as unknown. */
                for (g = ds->gadgets; g; g = g->next)
                        if (!g->known && known_here(ds, g->st.gadget)) {
                                g->known = true;
                                ds->n_unknown--;
                        }
                /* Rows whose bundle had not come are tried again. */
                for (g = ds->gadgets; g && LIST_EMPTY(control_deploys(ds->ctl)); g = g->next)
                        if (g->pending)
                                apply(ds, g);
                own_rollouts(ds);
                break;
        case M_OLD:
                ds->old = !ds->ready;
                ds->unusable[0] = '\0';
                break;
        case M_UNUSABLE:
                snprintf(ds->unusable, sizeof ds->unusable, "%.299s", m->why);
                break;
        }
        free(m);
}

static void on_msgs_end(void *arg)
{
        retry_soon(arg);
}

static void msg_drop(struct mailbox_item *item)
{
        free(mailbox_entry(item, struct ds_msg, link));
}

static const struct mailbox_owner ds_box = { .take = on_msg, .end = on_msgs_end, .drop = msg_drop };

int deploy_store_new(struct control *ctl, const struct control_env *env, struct deploy_store **out)
{
        const struct control_releases *r = &env->releases;
        char why[200];
        *out = NULL;
        if (!r->conninfo || !r->state_dir)
                return 0;
        if (pq_dl_load(why, sizeof why) < 0 || ssl_dl_load(why, sizeof why) < 0) {
                log_msg(L_ERR, NULL, "the store's releases: %s; each node keeps its own versions", why);
                return 0;
        }
        struct deploy_store *ds = calloc(1, sizeof *ds);
        if (!ds)
                return -ENOMEM;
        ds->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ds->conninfo = strdup(r->conninfo);
        ds->node = strdup(r->node ? r->node : "");
        ds->state_dir = strdup(r->state_dir);
        ds->keys = malloc((r->n_trusted ? r->n_trusted : 1) * sizeof *ds->keys);
        pthread_mutex_init(&ds->mu, NULL);
        ds->ctl = ctl;
        ds->env = env;
        if (ds->wake_fd < 0 || !ds->conninfo || !ds->node || !ds->state_dir || !ds->keys ||
            mailbox_new(env->base, &ds_box, ds, &ds->mb) < 0 || !(ds->ev_retry = evtimer_new(env->base, retry, ds))) {
                if (ds->ev_retry)
                        event_free(ds->ev_retry);
                ds_free_shared(ds);
                return -ENOMEM;
        }
        if (r->n_trusted)
                memcpy(ds->keys, r->trusted, r->n_trusted * sizeof *ds->keys);
        ds->rel = *r;
        ds->rel.state_dir = ds->state_dir;
        ds->rel.conninfo = ds->conninfo;
        ds->rel.node = ds->node;
        ds->rel.trusted = (const uint8_t (*)[BUNDLE_KEY_LEN])ds->keys;
        /* Never joined: a store that stalls holds only this thread, which
         * frees what is left once it sees stop. */
        pthread_t t;
        int e = thread_start(&t, ds_thread, ds, 0, true);
        if (e < 0) {
                event_free(ds->ev_retry);
                ds_free_shared(ds);
                return e;
        }
        *out = live = ds;
        return 0;
}

void deploy_store_free(struct deploy_store *ds)
{
        if (!ds)
                return;
        /* Kept named after its free here: the thread frees it once it
         * sees stop, which may be after gadgetd's exit (a leak checker
         * then still sees it held). Never used through this name. */
        static struct deploy_store *volatile stopping;
        stopping = ds;
        (void)stopping;
        if (live == ds)
                live = NULL;
        while (ds->writes) {
                struct ds_write *w = ds->writes;
                ds->writes = w->next;
                if (w->done)
                        w->done(w->arg, -ECANCELED, "gadgetd is stopping");
                free(w);
        }
        /* The thread's words from now on are dropped (freed) as it posts
         * them: nothing of the loop's is left to take them. */
        mailbox_close(ds->mb);
        event_free(ds->ev_retry);
        while (ds->gadgets) {
                struct ds_gadget *g = ds->gadgets;
                ds->gadgets = g->next;
                free(g);
        }
        pthread_mutex_lock(&ds->mu);
        ds->stop = true;
        pthread_mutex_unlock(&ds->mu);
        ds_wake(ds);
}

int deploy_store_gate(struct control *ctl, char *why, size_t len)
{
        struct deploy_store *ds = control_deploy_store(ctl);
        if (!ds || (!ds->ready && ds->old))
                return 0;
        if (ds->ready)
                return 1;
        if (ds->unusable[0])
                snprintf(why, len, "this node may not use the cluster's store: %s", ds->unusable);
        else
                snprintf(why, len, "the cluster's release state is not read from the store yet (gadgetd started a "
                         "moment ago, or cannot reach the store): try again");
        return -EAGAIN;
}

bool deploy_store_active(struct control *ctl)
{
        char why[400];
        return deploy_store_gate(ctl, why, sizeof why) > 0;
}

/* Queues st as the gadget's next row (a compare-and-set on the gen this
 * node last read, now): done(arg, 0 | -EAGAIN another came first |
 * -errno, why) later, on the loop. The thread sends them one at a time,
 * in order; at most WRITES_MAX wait (beyond: -EBUSY, counted). */
static int queue_write(struct deploy_store *ds, const struct kvpg_release_state *st, const struct ds_write *back,
                       void (*done)(void *, int, const char *), void *arg)
{
        struct ds_gadget *g = gadget_of(ds, st->gadget, true);
        struct ds_write *w;
        if (ds->n_writes >= WRITES_MAX) {
                ds->writes_refused++;
                return -EBUSY;
        }
        if (!g || !(w = calloc(1, sizeof *w)))
                return -ENOMEM;
        if (back)
                *w = *back;
        w->st = *st;
        w->gen = g->st.gen;
        w->done = done;
        w->arg = arg;
        w->next = NULL;
        if (ds->writes_last)
                ds->writes_last->next = w;
        else
                ds->writes = w;
        ds->writes_last = w;
        ds->n_writes++;
        send_first(ds);
        return 0;
}

static int write_row(struct deploy_store *ds, const struct kvpg_release_state *st,
                     void (*done)(void *, int, const char *), void *arg)
{
        return queue_write(ds, st, NULL, done, arg);
}

/* The row as it stands (this node's own files where the store has none
 * yet: the first change of a gadget installed before the cluster's). */
static struct kvpg_release_state row_now(struct deploy_store *ds, const char *name)
{
        struct ds_gadget *g = gadget_of(ds, name, false);
        struct kvpg_release_state st = { .max_errors = 5, .min_calls = 100 };
        if (g && g->st.gen)
                return g->st;
        snprintf(st.gadget, sizeof st.gadget, "%s", name);
        releases_current(ds->rel.state_dir, name, st.current, sizeof st.current);
        releases_previous(ds->rel.state_dir, name, st.previous, sizeof st.previous);
        return st;
}

int deploy_store_install(struct control *ctl, const char *name, const char *version,
                         void (*done)(void *, int, const char *), void *arg)
{
        struct deploy_store *ds = control_deploy_store(ctl);
        struct kvpg_release_state st = row_now(ds, name);
        if (strcmp(st.current, version) != 0)
                snprintf(st.previous, sizeof st.previous, "%s", st.current);
        snprintf(st.current, sizeof st.current, "%s", version);
        st.rollout[0] = st.why[0] = '\0';
        st.percent = 0;
        return write_row(ds, &st, done, arg);
}


/* A deploy or rollback's row written: the request goes on here. */
struct ds_req {
        struct control *ctl;
        const struct control_env *env;
        struct client_load *ans;
        uid_t uid;
        char name[64], version[80];
        bool rollback, with_state;
        unsigned percent;
        struct unit_rollout_bound bound;
        enum { R_DEPLOY, R_SHARE, R_COMPLETE, R_BACK } what;
        char why[120];
};

static void req_written(void *arg, int err, const char *why)
{
        struct ds_req *q = arg;
        if (err < 0) {
                client_load_answer(q->ans, err == -EAGAIN ? GADGET_EBUSY : GADGET_EUNAVAILABLE, why);
                free(q);
                return;
        }
        struct unit *u = core_find(q->env->core, q->name);
        struct unit_rollout_info in = { 0 };
        char out[400];
        if (u)
                unit_rollout_info(u, &in);
        switch (q->what) {
        case R_DEPLOY:
                /* A rollout runs where the gadget runs: another node's
                 * (its owner) begins it from the row. */
                if (q->percent && !(u && unit_state_of(u) == UNIT_READY)) {
                        snprintf(out, sizeof out, "rolling out %s %s to %u%% of the call trees: in the store, for the "
                                 "node that runs it", q->name, q->version, q->percent);
                        break;
                }
                /* Here as before: the answer waits for the start where it
                 * runs; on another node's gadget, for the load here. */
                int e = deploy_start(q->ctl, q->env, q->uid, q->ans, q->name, q->version, q->rollback,
                                     q->with_state, q->percent, &q->bound);
                struct deploy_store *ds = control_deploy_store(q->ctl);
                struct ds_gadget *g = ds ? gadget_of(ds, q->name, false) : NULL;
                if (e == 0) {
                        if (g && q->percent)
                                g->armed = g->st.gen; /* begun here, its owner */
                        free(q);
                        return;
                }
                /* Another deploy began here meanwhile (one applied from
                 * the store): this row is applied here after it. */
                if (g)
                        g->busy = true;
                retry_soon(ds);
                snprintf(out, sizeof out, "%s %s is the store's; this node applies it once the deploy under way here "
                         "ended (%s)", q->name, q->version, strerror(-e));
                break;
        case R_SHARE:
                if (in.running)
                        unit_rollout_set(u, q->percent);
                snprintf(out, sizeof out, "rolling out %s %s to %u%% of the call trees", q->name, q->version,
                         q->percent);
                break;
        case R_COMPLETE:
                if (in.running)
                        unit_rollout_set(u, 100);
                snprintf(out, sizeof out, "deployed %s %s: its rollout completed, every call goes to it; the "
                         "previous version's process drains", q->name, q->version);
                break;
        case R_BACK:
                if (in.running)
                        deploy_rollout_back(u, q->why);
                snprintf(out, sizeof out, "rolled back %s: version %s gets no more calls and drains; the current "
                         "version serves every call", q->name, q->version);
                break;
        }
        client_load_answer(q->ans, 0, out);
        free(q);
}

void deploy_store_request(struct client *cl, uint64_t id, const char *name, const char *version, bool rollback,
                          bool with_state, unsigned percent, const struct unit_rollout_bound *bound)
{
        struct deploy_store *ds = control_deploy_store(cl->ctl);
        struct kvpg_release_state st = row_now(ds, name);
        struct ds_req *q = calloc(1, sizeof *q);
        if (!q) {
                client_error(cl, id, GADGET_EINTERNAL, "out of memory");
                return;
        }
        *q = (struct ds_req){ .ctl = cl->ctl, .env = client_env(cl), .uid = cl->cred.uid, .rollback = rollback,
                              .with_state = with_state, .percent = percent > 0 && percent < 100 ? percent : 0, .what = R_DEPLOY };
        if (bound)
                q->bound = *bound;
        snprintf(q->name, sizeof q->name, "%s", name);
        st.why[0] = '\0';
        if (rollback && st.rollout[0]) {
                q->what = R_BACK;
                snprintf(q->version, sizeof q->version, "%s", st.rollout);
                snprintf(q->why, sizeof q->why, "gadgetctl rollback by uid %u on node %s", (unsigned)cl->cred.uid,
                         ds->node);
                snprintf(st.why, sizeof st.why, "%s", q->why);
                st.rollout[0] = '\0';
                st.percent = 0;
        } else if (rollback) {
                if (!st.previous[0] || !releases_has(ds->rel.state_dir, name, st.previous)) {
                        client_error(cl, id, GADGET_ENOTFOUND, "%s has no version before the current one", name);
                        free(q);
                        return;
                }
                snprintf(q->version, sizeof q->version, "%s", st.previous);
                snprintf(st.previous, sizeof st.previous, "%s", st.current);
                snprintf(st.current, sizeof st.current, "%s", q->version);
        } else if (st.rollout[0] && strcmp(st.rollout, version) != 0) {
                client_error(cl, id, GADGET_EBUSY, "a rollout of %s %s runs: complete it (gadgetctl deploy %s %s) or "
                             "end it (gadgetctl rollback %s) first", name, st.rollout, name, st.rollout, name);
                free(q);
                return;
        } else {
                snprintf(q->version, sizeof q->version, "%s", version);
                if (st.rollout[0] && q->percent) {
                        q->what = R_SHARE;
                        st.percent = q->percent;
                } else if (st.rollout[0]) {
                        q->what = R_COMPLETE;
                        snprintf(st.previous, sizeof st.previous, "%s", st.current);
                        snprintf(st.current, sizeof st.current, "%s", version);
                        st.rollout[0] = '\0';
                        st.percent = 0;
                } else if (q->percent) {
                        snprintf(st.rollout, sizeof st.rollout, "%s", version);
                        st.percent = q->percent;
                        st.max_errors = q->bound.max_error_pct;
                        st.min_calls = q->bound.min_calls;
                } else {
                        if (strcmp(st.current, version) != 0)
                                snprintf(st.previous, sizeof st.previous, "%s", st.current);
                        snprintf(st.current, sizeof st.current, "%s", version);
                }
        }
        if (!(q->ans = client_load_begin(cl, id))) {
                free(q);
                return;
        }
        int e = write_row(ds, &st, req_written, q);
        if (e < 0) {
                client_load_answer(q->ans, GADGET_EBUSY, "too many deploys, rollbacks and installs of this node "
                                   "wait for the store; try again when they ended");
                free(q);
        }
}

/* An automatic rollback here is written for every node (no one waits). */
static void note_written(void *arg, int err, const char *why)
{
        char *name = arg;
        if (err < 0)
                log_msg(L_ERR, name, "its automatic rollback was not written to the store: %s", why);
        free(name);
}

/* The row an automatic rollback w writes, from the row as it stands:
 * false if it says something else already (nothing to write). */
static bool back_row(struct deploy_store *ds, const struct ds_write *w, struct kvpg_release_state *out)
{
        struct kvpg_release_state st = row_now(ds, w->st.gadget);
        if (st.rollout[0] && strcmp(st.rollout, w->version) == 0) {
                st.rollout[0] = '\0'; /* a rollout that went back by itself */
                st.percent = 0;
        } else if (!w->to[0] && strcmp(st.current, w->version) == 0) {
                return false; /* the row's own version: no rollout */
        } else if (w->to[0] && strcmp(st.current, w->version) == 0) {
                snprintf(st.current, sizeof st.current, "%s", w->to);
                snprintf(st.previous, sizeof st.previous, "%s", w->previous);
        } else {
                return false; /* the row says something else already */
        }
        snprintf(st.why, sizeof st.why, "version %.40s went back automatically on node %.40s: %.60s", w->version,
                 ds->node, w->why);
        *out = st;
        return true;
}

void deploy_store_went_back(struct control *ctl, const char *name, const char *version, const char *to,
                            const char *previous, const char *why)
{
        struct deploy_store *ds = live;
        struct ds_write b = { 0 };
        (void)ctl;
        if (!ds || !ds->ready)
                return;
        /* The owner's verdict only: a rollout that ends as gadgetd stops,
         * or as this node lost the lease, goes on at the next owner
         * (own_rollouts there), so the row keeps it. */
        struct unit *u = core_find(ds->env->core, name);
        if (core_stopping(ds->env->core) || !u || !unit_leased(u))
                return;
        snprintf(b.st.gadget, sizeof b.st.gadget, "%s", name);
        snprintf(b.version, sizeof b.version, "%s", version);
        snprintf(b.to, sizeof b.to, "%s", to ? to : "");
        snprintf(b.previous, sizeof b.previous, "%s", previous ? previous : "");
        snprintf(b.why, sizeof b.why, "%s", why);
        b.back = true;
        struct kvpg_release_state st;
        if (!back_row(ds, &b, &st))
                return;
        /* Queued behind this node's writes under way: its row is made
         * again when sent (send_first). */
        char *arg = strdup(name);
        int e = arg ? queue_write(ds, &st, &b, note_written, arg) : -ENOMEM;
        if (e < 0) {
                log_msg(L_ERR, name, "its automatic rollback was not written to the store: %s (%" PRIu64 " writes "
                        "refused so)", e == -EBUSY ? "too many writes of this node wait" : strerror(-e),
                        ds->writes_refused);
                free(arg);
        }
}

void deploy_store_status(struct control *ctl, const char *name, struct deploy_store_info *out)
{
        struct deploy_store *ds = ctl ? control_deploy_store(ctl) : NULL;
        struct ds_gadget *g = ds ? gadget_of(ds, name, false) : NULL;
        *out = (struct deploy_store_info){ 0 };
        if (!g)
                return;
        out->gen = (uint64_t)(g->st.gen > 0 ? g->st.gen : 0);
        out->node = g->st.node;
        out->refused = g->refused;
        out->rollout = g->st.rollout;
        out->percent = g->st.percent;
        out->why = g->st.why;
}

size_t deploy_store_refused(struct control *ctl, const char *name, const char **version, const char **node,
                            const char **why, size_t max)
{
        struct deploy_store *ds = ctl ? control_deploy_store(ctl) : NULL;
        size_t n = 0;
        if (!ds)
                return 0;
        size_t have = ds->n_refused < REFUSALS ? ds->n_refused : REFUSALS;
        for (size_t i = 0; i < have && n < max; i++) {
                const struct refusal *r = &ds->refused[i];
                if (strcmp(r->gadget, name) != 0)
                        continue;
                version[n] = r->version;
                node[n] = r->node;
                why[n++] = r->why;
        }
        return n;
}
