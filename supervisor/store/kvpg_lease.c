/* kvpg_lease: the lease session (kvpg_lease.h).
 *
 * States: DOWN (waiting to connect again, with backoff), CONNECTING
 * (PQconnectPoll on the socket's readiness), READY (one query at a time).
 * Each poll is a round: first the locks given back (one statement for up
 * to KVPG_LEASE_BATCH), then the gadgets wanted and not held, walked in
 * the order wanted from a cursor, KVPG_LEASE_BATCH to a statement of
 * gadgetd_lease_take_many, then one beat (every KVPG_LEASE_BEAT_MS: this
 * node's row, and the nodes read back) or else one ping if no take went
 * out. A move asked for goes first after the locks. The wants are found
 * by name through a hash table (kvpg_wants.c): every kv write asks for
 * its gadget's epoch, each row of a take's answer for its want. Nothing
 * waits: a query unanswered within KVPG_LEASE_TIMEOUT_MS counts as the
 * session lost, which ends every lease at once (hooks->lost) before the
 * next attempt. */
#include "kvpg_lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvpg_sql.h"
#include "kvpg_wants.h"
#include "pgconn.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/retry.h"
#include "system/strhash.h"
#include "system/timer.h"

#define CONNECT_TIMEOUT_MS 5000
/* Why sooner than the store's: a node without its lease session serves
 * nothing of the shared store, and others take its gadgets at their TTL. */
#define RECONNECT_MAX_MS 2000
/* After losing its session, a node lets healthy ones go first: for this
 * long it waits HUMBLE_POLLS more polls before taking a free lease. */
#define HUMBLE_MS 3000
/* At most one "lock table full" line this often. */
#define FULL_LOG_MS 60000
/* A node's lease count is taken as held for this long after its beat: a
 * few beats (a node that died gave its locks back at once, so this only
 * holds its gadgets' takeover back when the share is nearly used). */
#define LIVE_NODE_MS 3000
#define HUMBLE_POLLS 4
/* KVPG_MOVE_MS and KVPG_NODES_MAX as SQL text. */
#define KVPG_MOVE_INTERVAL "10 seconds"
#define KVPG_NODES_MAX_TEXT "256"

enum state { L_DOWN, L_CONNECTING, L_SETUP, L_READY };

struct unlock {
        char *gadget;
        struct unlock *next;
};

enum query { Q_OTHER, Q_TAKE, Q_MOVE, Q_BEAT, Q_FORGET };

struct kvpg_lease {
        char *node, *peer;
        struct pgconn *pc;        /* the session, its timeouts */
        enum state state;
        struct event *ev_timer, *ev_tick;   /* the backoff; the polls */
        unsigned backoff_ms;
        bool pinged;              /* this round's ping or beat is out */
        bool round_took;          /* this round sent takes: no ping needed */
        bool in_results;          /* a take's rows are being read: no query now */
        enum query query;         /* what the query in flight is */
        struct kvpg_want *asking; /* the move query's gadget (NULL: released meanwhile) */
        struct kvpg_want **sent;  /* the take statement's gadgets, by slot (NULL: released) */
        size_t n_sent;
        struct kvpg_array names, takes; /* its parameters */
        PGresult *last;
        char err[200], sqlstate[6];
        struct kvpg_wants wants;
        struct kvpg_want *cursor; /* the next want this round looks at */
        size_t moves;             /* wants with a move to send */
        struct unlock *unlocks, **unlocks_tail; /* locks to give back, in order */
        struct kvpg_lease_hooks hooks;
        bool down_logged;
        uint64_t full_logged_at;  /* monotime_ms: the last "lock table full" line */
        uint64_t lock_slots;      /* the server's lock table, nominal (0: not known) */
        size_t n_locks;           /* lease locks this session holds */
        char share_why[200];      /* why a take was held back (lock_share) */
        uint64_t humble_until;    /* monotime_ms: lost its session lately */
        uint64_t beat_at;         /* monotime_ms: the next beat is due */
        struct kvpg_node *nodes;  /* as read at the last beat, by name */
        uint64_t nodes_read_at;   /* monotime_ms: when */
        size_t n_nodes;
        uint64_t forget_ms;       /* NodeForget= */
        /* gadgetctl nodes forget: one at a time. */
        char forget[64];
        bool forget_sent;
        void (*forget_done)(void *arg, int code, const char *msg);
        void *forget_arg;
        /* Told each time the session connects (kvpg_lease_on_connect). */
        void (*connected)(void *arg);
        void *connected_arg;
};

static void round_next(struct kvpg_lease *l);

/* A query was handed to libpq (sent: its return): its results from now. */
static void query_begin(struct kvpg_lease *l, enum query kind, int sent)
{
        l->query = kind;
        l->err[0] = l->sqlstate[0] = '\0';
        PQclear(l->last);
        l->last = NULL;
        pgconn_sent(l->pc, sent, STORE_OP_LEASE);
}

/* Connected: the session's settings first. */
static void on_connected(void *arg)
{
        struct kvpg_lease *l = arg;
        l->state = L_SETUP;
        if (l->connected)
                l->connected(l->connected_arg);
        /* The node is a checked name (config.c): safe to quote as it is.
         * Why synchronous commits here too: an epoch bump the server lost
         * in a crash would let writes stamped with the epoch before it
         * pass the fence again. */
        char sql[400];
        snprintf(sql, sizeof sql, "SET synchronous_commit = on; SET application_name = 'gadgetd %s lease';"
                 " SELECT current_setting('max_locks_per_transaction')::bigint *"
                 " (current_setting('max_connections')::bigint + current_setting('max_prepared_transactions')::bigint)",
                 l->node);
        query_begin(l, Q_OTHER, PQsendQuery(pgconn_pq(l->pc), sql));
}

/* A lock to give back at the round's start (gadget: taken). */
static void unlock_add(struct kvpg_lease *l, char *gadget)
{
        struct unlock *u = calloc(1, sizeof *u);
        if (!u) {
                /* Kept until the session ends: only a lease no one here
                 * wants, which another node then takes later. */
                free(gadget);
                return;
        }
        u->gadget = gadget;
        *l->unlocks_tail = u;
        l->unlocks_tail = &u->next;
}

static void unlocks_clear(struct kvpg_lease *l)
{
        while (l->unlocks) {
                struct unlock *u = l->unlocks;
                l->unlocks = u->next;
                free(u->gadget);
                free(u);
        }
        l->unlocks_tail = &l->unlocks;
}

/* One take's row for w: (got, free, owner, owner_epoch); full: its lock
 * could not be tried, PostgreSQL's lock table being full (free unknown).
 * Whether the row leaves w waiting for a reason the owner is told
 * (hooks->full): the table full, or a free lease this node's share kept
 * it from taking. */
static bool take_row(struct kvpg_lease *l, struct kvpg_want *w, bool got, bool free, bool full, const char *node,
                     int64_t epoch)
{
        if (got) {
                l->n_locks++;
                w->held = true;
                w->epoch = epoch;
                w->free_seen = 0;
                w->told = false;
                w->full = false;
                log_msg(L_INFO, w->gadget, "took its lease in the store (epoch %" PRId64 ")", epoch);
                if (l->hooks.granted)
                        l->hooks.granted(l->hooks.arg, w->gadget, epoch);
                return false;
        }
        /* Full: not known whether free, so no poll in a row is counted or
         * broken; the owner is the row's, as last recorded. */
        if (!full)
                w->free_seen = free ? w->free_seen + 1 : 0;
        /* A free lease has no owner, whatever the row says of the last. */
        if (free) {
                node = "";
                epoch = 0;
        }
        const char *why = full ? "PostgreSQL's lock table is full (raise max_locks_per_transaction)"
                        : free && w->capped ? l->share_why : NULL;
        /* Told again when the reason's text changes too (the other nodes'
         * leases it counts), not only its owner: a cause is never stale. */
        size_t why_hash = why ? strhash(why) : 0;
        if (strcmp(w->owner, node) != 0 || w->owner_epoch != epoch || !w->told || w->full != (why != NULL) ||
            w->why_hash != why_hash) {
                snprintf(w->owner, sizeof w->owner, "%s", node);
                w->owner_epoch = epoch;
                w->told = true;
                w->full = why != NULL;
                w->why_hash = why_hash;
                if (l->hooks.owner)
                        l->hooks.owner(l->hooks.arg, w->gadget, node, epoch);
                if (why && l->hooks.full)
                        l->hooks.full(l->hooks.arg, w->gadget, node, why);
        }
        return why != NULL;
}

/* The take statement's gadgets are out of it (answered, or the session
 * lost). */
static void sent_clear(struct kvpg_lease *l)
{
        for (size_t i = 0; i < l->n_sent; i++)
                if (l->sent[i])
                        l->sent[i]->sent = -1;
        l->n_sent = 0;
}

/* The take statement's rows: (gadget, got, free, owner, owner_epoch), in
 * text, one per gadget it reached (the rest wait for the next round). A
 * lock got for a gadget released meanwhile is given back. The hooks may
 * want or release gadgets: each row finds its want by name. */
static void takes_result(struct kvpg_lease *l)
{
        PGresult *r = l->last;
        l->last = NULL;
        /* The schema may not be migrated yet (the kv connection does it):
         * tried again at the next poll. */
        int n = !l->err[0] && r && PQnfields(r) == 5 ? PQntuples(r) : 0, n_full = 0, n_waiting = 0;
        l->in_results = true;
        /* The table too full for the statement itself (before any lock
         * was taken: see kvpg_sql.c, version 7): every gadget of it says
         * so. */
        if (strcmp(l->sqlstate, "53200") == 0)
                for (size_t i = 0; i < l->n_sent; i++) {
                        struct kvpg_want *w = l->sent[i];
                        if (!w)
                                continue;
                        l->sent[i] = NULL;
                        w->sent = -1;
                        n_full++;
                        char owner[sizeof w->owner];
                        snprintf(owner, sizeof owner, "%s", w->owner);
                        n_waiting += take_row(l, w, false, false, true, owner, w->owner_epoch);
                }
        for (int i = 0; i < n; i++) {
                const char *gadget = PQgetvalue(r, i, 0);
                bool got = PQgetvalue(r, i, 1)[0] == 't';
                bool full = PQgetisnull(r, i, 2);
                bool free = !full && PQgetvalue(r, i, 2)[0] == 't';
                const char *node = PQgetisnull(r, i, 3) ? "" : PQgetvalue(r, i, 3);
                int64_t epoch = PQgetisnull(r, i, 4) ? 0 : strtoll(PQgetvalue(r, i, 4), NULL, 10);
                struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
                n_full += full;
                if (w && w->sent >= 0) {
                        l->sent[w->sent] = NULL;
                        w->sent = -1;
                        n_waiting += take_row(l, w, got, free, full, node, epoch);
                } else if (got) {
                        l->n_locks++;
                        char *g = strdup(gadget);
                        if (g)
                                unlock_add(l, g);
                }
        }
        l->in_results = false;
        sent_clear(l);
        PQclear(r);
        uint64_t now = monotime_ms();
        if (n_waiting && (!l->full_logged_at || now - l->full_logged_at >= FULL_LOG_MS)) {
                l->full_logged_at = now;
                if (n_full)
                        log_msg(L_WARN, NULL, "store: PostgreSQL's lock table is full: %d gadget%s of this round "
                                "cannot take or check their lease (each lease held is one entry of it, as is every "
                                "other lock of every session; raise max_locks_per_transaction, see README \"Running "
                                "on several hosts\")", n_full, n_full == 1 ? "" : "s");
                else
                        log_msg(L_WARN, NULL, "store: %d free lease%s of this round left untaken: %s; see README "
                                "\"Running on several hosts\"", n_waiting, n_waiting == 1 ? "" : "s", l->share_why);
        }
}

/* Clears w's move to send (sent, or ended). */
static void move_unmark(struct kvpg_lease *l, struct kvpg_want *w)
{
        if (w->move_to[0] && l->moves)
                l->moves--;
        w->move_to[0] = '\0';
}

/* A move's update ended: its gadget's owner is told. */
static void move_result(struct kvpg_lease *l, struct kvpg_want *w)
{
        char why[260];
        void (*done)(void *, const char *) = w->move_done;
        w->move_done = NULL;
        move_unmark(l, w);
        if (l->err[0])
                snprintf(why, sizeof why, "the store refused the move: %s", l->err);
        else if (!l->last || PQntuples(l->last) != 1)
                snprintf(why, sizeof why, "this node no longer owns it in the store");
        else
                why[0] = '\0';
        if (done)
                done(w->move_arg, why[0] ? why : NULL);
}

/* A move asked for ends unmade (its gadget's lease is gone). */
static void move_fail(struct kvpg_lease *l, struct kvpg_want *w, const char *why)
{
        void (*done)(void *, const char *) = w->move_done;
        w->move_done = NULL;
        move_unmark(l, w);
        if (done)
                done(w->move_arg, why);
}

/* A beat's rows: (name, peer, age in ms) of every node, by name. */
static void beat_result(struct kvpg_lease *l)
{
        if (l->err[0] || !l->last || PQnfields(l->last) != 4)
                return; /* the schema may not be migrated yet: at the next beat */
        size_t n = (size_t)PQntuples(l->last);
        if (n > KVPG_NODES_MAX)
                n = KVPG_NODES_MAX;
        struct kvpg_node *nodes = n ? calloc(n, sizeof *nodes) : NULL;
        if (n && !nodes)
                return;
        for (size_t i = 0; i < n; i++) {
                snprintf(nodes[i].name, sizeof nodes[i].name, "%s", PQgetvalue(l->last, (int)i, 0));
                snprintf(nodes[i].peer, sizeof nodes[i].peer, "%s", PQgetvalue(l->last, (int)i, 1));
                long long age = strtoll(PQgetvalue(l->last, (int)i, 2), NULL, 10);
                nodes[i].age_ms = age > 0 ? (uint64_t)age : 0;
                long long leases = strtoll(PQgetvalue(l->last, (int)i, 3), NULL, 10);
                nodes[i].leases = leases > 0 ? (uint64_t)leases : 0;
        }
        free(l->nodes);
        l->nodes = nodes;
        l->nodes_read_at = monotime_ms();
        l->n_nodes = n;
}

/* The forget's end, told once. */
static void forget_end(struct kvpg_lease *l, int code, const char *msg)
{
        void (*done)(void *, int, const char *) = l->forget_done;
        l->forget_done = NULL;
        l->forget_sent = false;
        if (done)
                done(l->forget_arg, code, msg);
}

/* The forget's row: (deleted, known) counts. */
static void forget_result(struct kvpg_lease *l)
{
        char msg[300];
        bool gone = !l->err[0] && l->last && PQntuples(l->last) == 1 && PQnfields(l->last) == 2;
        if (!gone) {
                snprintf(msg, sizeof msg, "the store could not forget node %s: %s", l->forget,
                         l->err[0] ? l->err : "no answer");
                forget_end(l, GADGET_EUNAVAILABLE, msg);
                return;
        }
        if (strcmp(PQgetvalue(l->last, 0, 0), "1") == 0) {
                log_msg(L_INFO, NULL, "store: node %s forgotten (gadgetctl nodes forget)", l->forget);
                /* Off this node's list now, not at the next beat. */
                for (size_t i = 0; i < l->n_nodes; i++)
                        if (strcmp(l->nodes[i].name, l->forget) == 0) {
                                memmove(&l->nodes[i], &l->nodes[i + 1], (l->n_nodes - i - 1) * sizeof *l->nodes);
                                l->n_nodes--;
                                break;
                        }
                snprintf(msg, sizeof msg, "forgot node %s", l->forget);
                forget_end(l, 0, msg);
        } else if (strcmp(PQgetvalue(l->last, 0, 1), "0") == 0) {
                snprintf(msg, sizeof msg, "no node %s in the store", l->forget);
                forget_end(l, GADGET_ENOTFOUND, msg);
        } else {
                snprintf(msg, sizeof msg, "node %s is live: the store saw it within the last %d s (a node is "
                         "forgotten only once it is down)", l->forget, KVPG_NODE_DOWN_MS / 1000);
                forget_end(l, GADGET_EBUSY, msg);
        }
}

/* Sends the forget asked for, if one waits; whether it did. Why the
 * store's clock decides: this node's last read may be a beat old. */
static bool send_forget(struct kvpg_lease *l)
{
        if (!l->forget_done || l->forget_sent)
                return false;
        char down[24];
        snprintf(down, sizeof down, "%d", KVPG_NODE_DOWN_MS);
        const char *v[2] = { l->forget, down };
        l->forget_sent = true;
        query_begin(l, Q_FORGET, PQsendQueryParams(pgconn_pq(l->pc),
                    "WITH gone AS (DELETE FROM gadgetd_node WHERE name = $1 AND"
                    " last_seen < now() - $2::bigint * interval '1 millisecond' RETURNING name)"
                    " SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM gadgetd_node WHERE name = $1)",
                    2, NULL, v, NULL, NULL, 0));
        return true;
}

/* A query ended (its NULL result came). */
static void on_end(void *arg)
{
        struct kvpg_lease *l = arg;
        if (l->state == L_SETUP) {
                if (l->err[0]) {
                        pgconn_fail(l->pc, l->err);
                        return;
                }
                l->state = L_READY;
                l->backoff_ms = 0;
                l->lock_slots = l->last && PQntuples(l->last) == 1 ? strtoull(PQgetvalue(l->last, 0, 0), NULL, 10) : 0;
                l->down_logged = false;
                round_next(l);
                return;
        }
        struct kvpg_want *w = l->asking;
        l->asking = NULL;
        if (l->query == Q_TAKE)
                takes_result(l);
        else if (w && l->query == Q_MOVE)
                move_result(l, w);
        else if (l->query == Q_BEAT)
                beat_result(l);
        else if (l->query == Q_FORGET)
                forget_result(l);
        round_next(l);
}

/* Keeps the last tuples result and the first error of the query. */
static void on_result(void *arg, PGresult *r)
{
        struct kvpg_lease *l = arg;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK) {
                PQclear(l->last);
                l->last = r;
                return;
        }
        if ((st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) && !l->err[0]) {
                const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                pgconn_one_line(l->err, sizeof l->err, PQresultErrorMessage(r));
                snprintf(l->sqlstate, sizeof l->sqlstate, "%s", state ? state : "");
        }
        PQclear(r);
}

/* Gives back the queued locks, up to KVPG_LEASE_BATCH in one statement. */
static void send_unlocks(struct kvpg_lease *l)
{
        kvpg_array_reset(&l->names);
        while (l->unlocks && l->names.n < KVPG_LEASE_BATCH) {
                struct unlock *u = l->unlocks;
                if (kvpg_array_add(&l->names, u->gadget) < 0)
                        break;
                l->unlocks = u->next;
                free(u->gadget);
                free(u);
        }
        if (!l->unlocks)
                l->unlocks_tail = &l->unlocks;
        if (!l->names.n) {
                /* Out of memory: kept until the session ends (unlock_add). */
                unlocks_clear(l);
                return;
        }
        l->n_locks -= l->names.n < l->n_locks ? l->names.n : l->n_locks;
        const char *v[1] = { l->names.text };
        query_begin(l, Q_OTHER, PQsendQueryParams(pgconn_pq(l->pc),
                    "SELECT count(pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext(g))) FROM unnest($1::text[]) AS g",
                    1, NULL, v, NULL, NULL, 0));
}

/* Sends the first move asked for of a held gadget; whether it did. */
static bool send_move(struct kvpg_lease *l)
{
        for (struct kvpg_want *w = l->wants.first; w; w = w->next) {
                if (!w->move_done || w->move_to[0] == '\0' || !w->held)
                        continue;
                char epoch[24];
                snprintf(epoch, sizeof epoch, "%" PRId64, w->epoch);
                const char *v[4] = { w->gadget, w->move_to, l->node, epoch };
                l->asking = w;
                query_begin(l, Q_MOVE, PQsendQueryParams(pgconn_pq(l->pc),
                            "UPDATE gadgetd_owner SET move_to = $2, move_until = now() + interval '"
                            KVPG_MOVE_INTERVAL "' WHERE gadget = $1 AND node = $3 AND epoch = $4 RETURNING epoch",
                            4, NULL, v, NULL, NULL, 0));
                move_unmark(l, w); /* sent: once */
                return true;
        }
        return false;
}

/* How many lease locks this node may hold: the nodes hold at most half
 * of the server's lock table's slots in leases between them (the other
 * half is left to every other lock of the server, among them each writing
 * transaction's own), so this node's share is that half less what the
 * other nodes held at their last beats, those of the last LIVE_NODE_MS
 * (SIZE_MAX: the slots not known). Two nodes taking at once may pass the
 * half by one round's takes, never the table's slots. share_why says so,
 * for a take it holds back. */
static size_t lock_share(struct kvpg_lease *l)
{
        if (!l->lock_slots)
                return SIZE_MAX;
        uint64_t since = monotime_ms() - l->nodes_read_at, others = 0, half = l->lock_slots / 2;
        for (size_t i = 0; i < l->n_nodes; i++)
                if (strcmp(l->nodes[i].name, l->node) != 0 && l->nodes[i].age_ms + since < LIVE_NODE_MS)
                        others += l->nodes[i].leases;
        snprintf(l->share_why, sizeof l->share_why, "the nodes hold at most %" PRIu64 " leases, half of "
                 "PostgreSQL's %" PRIu64 " lock slots, %" PRIu64 " of them on other nodes; raise "
                 "max_locks_per_transaction", half, l->lock_slots, others);
        return others < half ? (size_t)(half - others) : 0;
}

/* Sends the round's next KVPG_LEASE_BATCH wanted gadgets not held, from
 * the cursor, in one statement; whether it did. Each says whether to take
 * a free lock: rank 0 at once, rank r after seeing it free 2 r polls in a
 * row, HUMBLE_POLLS more for a while after this node lost its session. */
static bool send_takes(struct kvpg_lease *l)
{
        if (!l->sent && !(l->sent = calloc(KVPG_LEASE_BATCH, sizeof *l->sent)))
                return false;
        kvpg_array_reset(&l->names);
        kvpg_array_reset(&l->takes);
        unsigned humble = monotime_ms() < l->humble_until ? HUMBLE_POLLS : 0;
        size_t share = lock_share(l), takes = 0;
        while (l->cursor && l->n_sent < KVPG_LEASE_BATCH) {
                struct kvpg_want *w = l->cursor;
                if (w->held) {
                        l->cursor = w->next;
                        continue;
                }
                bool take = w->rank != KVPG_LEASE_NEVER && w->free_seen >= 2 * w->rank + humble;
                /* Held back, it is only looked at (and told why if free). */
                w->capped = take && l->n_locks + takes >= share;
                take = take && !w->capped;
                takes += take;
                if (kvpg_array_add(&l->names, w->gadget) < 0 || kvpg_array_add(&l->takes, take ? "t" : "f") < 0)
                        break; /* out of memory: these at the next poll */
                l->cursor = w->next;
                w->sent = (long)l->n_sent;
                l->sent[l->n_sent++] = w;
        }
        if (l->names.n != l->n_sent || l->takes.n != l->n_sent) {
                sent_clear(l);
                l->cursor = NULL;
                return false;
        }
        if (!l->n_sent)
                return false;
        l->round_took = true;
        const char *v[3] = { l->names.text, l->takes.text, l->node };
        query_begin(l, Q_TAKE, PQsendQueryParams(pgconn_pq(l->pc),
                    "SELECT * FROM gadgetd_lease_take_many($1::text[], $2::boolean[], $3)", 3, NULL, v, NULL, NULL, 0));
        return true;
}

/* This node's row written, and every node's read back (beat_result). */
static void send_beat(struct kvpg_lease *l)
{
        l->pinged = true;
        l->beat_at = monotime_ms() + KVPG_LEASE_BEAT_MS;
        /* This node's own age is 0: its row was just written (the CTE's
         * select does not see the update). A node unseen for NodeForget=
         * leaves: its row is deleted, and not read (nor seen by this
         * statement's select). Only its row: the owner rows keep their
         * epochs (fencing), the audit its records. */
        char leases[24], forget[24];
        snprintf(leases, sizeof leases, "%zu", l->n_locks);
        snprintf(forget, sizeof forget, "%llu", (unsigned long long)(l->forget_ms ? l->forget_ms : KVPG_NODE_FORGET_MS));
        const char *v[4] = { l->node, l->peer, leases, forget };
        query_begin(l, Q_BEAT, PQsendQueryParams(pgconn_pq(l->pc),
                    "WITH beat AS (INSERT INTO gadgetd_node (name, peer, leases) VALUES ($1, $2, $3)"
                    " ON CONFLICT (name) DO UPDATE SET last_seen = now(), peer = excluded.peer,"
                    " leases = excluded.leases RETURNING name),"
                    " gone AS (DELETE FROM gadgetd_node WHERE name <> $1 AND"
                    " last_seen < now() - $4::bigint * interval '1 millisecond')"
                    " SELECT n.name, CASE WHEN n.name = $1 THEN $2 ELSE n.peer END,"
                    " CASE WHEN n.name = $1 THEN 0 ELSE (extract(epoch FROM now() - n.last_seen) * 1000)::bigint END,"
                    " CASE WHEN n.name = $1 THEN $3::bigint ELSE n.leases END"
                    " FROM gadgetd_node n WHERE n.name = $1 OR n.last_seen >= now() - $4::bigint * interval '1 millisecond'"
                    " UNION SELECT $1, $2, 0, $3::bigint ORDER BY 1 LIMIT " KVPG_NODES_MAX_TEXT,
                    4, NULL, v, NULL, NULL, 0));
}

/* Sends the round's next query: locks given back, a move, takes, then
 * one beat or else one ping unless takes went out. The first round of a
 * process beats before its takes: the nodes it reads share the lock
 * table with it (lock_share). */
static void round_next(struct kvpg_lease *l)
{
        if (l->state != L_READY || pgconn_busy(l->pc) || l->in_results)
                return;
        if (l->unlocks) {
                send_unlocks(l);
                return;
        }
        if (l->moves && send_move(l))
                return;
        if (send_forget(l))
                return;
        if (!l->nodes_read_at && !l->pinged) {
                send_beat(l);
                return;
        }
        if (send_takes(l))
                return;
        if (l->pinged)
                return;
        if (monotime_ms() < l->beat_at) {
                l->pinged = true;
                /* The takes' answers said the session is alive. */
                if (!l->round_took)
                        query_begin(l, Q_OTHER, PQsendQuery(pgconn_pq(l->pc), "SELECT 1"));
                return;
        }
        send_beat(l);
}

/* Every poll period: a new round over every want. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_lease *l = arg;
        (void)fd;
        (void)what;
        if (l->state != L_READY || pgconn_busy(l->pc))
                return;
        l->cursor = l->wants.first;
        l->pinged = l->round_took = false;
        round_next(l);
}

/* The session is gone (closed already; why on one line): every lease
 * with it, at once. */
static void on_lost(void *arg, const char *reason)
{
        struct kvpg_lease *l = arg;
        if (l->state == L_READY)
                l->humble_until = monotime_ms() + HUMBLE_MS;
        if (l->state == L_READY || l->state == L_SETUP || !l->down_logged)
                log_msg(L_WARN, NULL, "store: the lease session to PostgreSQL ended: %s; reconnecting", reason);
        l->down_logged = true;
        PQclear(l->last);
        l->last = NULL;
        l->asking = NULL;
        sent_clear(l);
        l->state = L_DOWN;
        if (l->forget_done) {
                char why[300];
                snprintf(why, sizeof why, "the store's session ended before node %s was forgotten: %s", l->forget,
                         reason);
                forget_end(l, GADGET_EUNAVAILABLE, why);
        }
        /* The server gave back every lock with the session. */
        unlocks_clear(l);
        l->n_locks = 0;
        char lost_why[260];
        snprintf(lost_why, sizeof lost_why, "lost its store lease: %s", reason);
        for (struct kvpg_want *w = l->wants.first, *next; w; w = next) {
                next = w->next;
                move_fail(l, w, lost_why);
                if (!w->held)
                        continue;
                w->held = false;
                w->epoch = 0;
                if (l->hooks.lost)
                        l->hooks.lost(l->hooks.arg, w->gadget, lost_why);
        }
        l->backoff_ms = retry_next_ms(l->backoff_ms, RECONNECT_MAX_MS);
        timer_arm_ms(l->ev_timer, l->backoff_ms);
}

/* The backoff is over: the next attempt. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_lease *l = arg;
        (void)fd;
        (void)what;
        l->state = L_CONNECTING;
        pgconn_connect(l->pc);
}

int kvpg_lease_new(struct event_base *base, const char *conninfo, const char *node, const char *peer,
                   struct store_latency *latency, struct kvpg_lease **out)
{
        struct kvpg_lease *l = calloc(1, sizeof *l);
        struct pgconn_ops ops = { .connected = on_connected, .result = on_result, .end = on_end, .lost = on_lost,
                                  .arg = l, .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                                  .query_timeout_ms = KVPG_LEASE_TIMEOUT_MS, .notice_in_query = true,
                                  .latency = latency };
        if (!l || !(l->node = strdup(node)) || !(l->peer = strdup(peer)) || !(l->ev_timer = evtimer_new(base, on_timer, l)) ||
            !(l->ev_tick = event_new(base, -1, EV_PERSIST, on_tick, l)) ||
            pgconn_new(base, conninfo, &ops, &l->pc) < 0) {
                kvpg_lease_free(l);
                return -ENOMEM;
        }
        timer_arm_ms(l->ev_tick, KVPG_LEASE_POLL_MS);
        l->unlocks_tail = &l->unlocks;
        l->state = L_CONNECTING;
        pgconn_connect(l->pc);
        *out = l;
        return 0;
}

void kvpg_lease_free(struct kvpg_lease *l)
{
        if (!l)
                return;
        pgconn_free(l->pc);
        if (l->ev_timer)
                event_free(l->ev_timer);
        if (l->ev_tick)
                event_free(l->ev_tick);
        PQclear(l->last);
        kvpg_wants_clear(&l->wants);
        unlocks_clear(l);
        free(l->sent);
        kvpg_array_free(&l->names);
        kvpg_array_free(&l->takes);
        free(l->nodes);
        free(l->node);
        free(l->peer);
        free(l);
}

void kvpg_lease_set_hooks(struct kvpg_lease *l, const struct kvpg_lease_hooks *hooks)
{
        l->hooks = *hooks;
}

void kvpg_lease_set_forget(struct kvpg_lease *l, uint64_t ms)
{
        l->forget_ms = ms < KVPG_NODE_DOWN_MS ? KVPG_NODE_DOWN_MS : ms;
}

int kvpg_lease_forget(struct kvpg_lease *l, const char *node, void (*done)(void *arg, int code, const char *msg),
                      void *arg)
{
        if (strcmp(node, l->node) == 0)
                return -EINVAL;
        if (l->forget_done)
                return -EBUSY;
        if (l->state != L_READY)
                return -ENOTCONN;
        snprintf(l->forget, sizeof l->forget, "%s", node);
        l->forget_done = done;
        l->forget_arg = arg;
        l->forget_sent = false;
        round_next(l);
        return 0;
}

int kvpg_lease_want(struct kvpg_lease *l, const char *gadget, unsigned rank)
{
        struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
        if (w) {
                w->rank = rank;
                return 0;
        }
        if (!(w = kvpg_wants_add(&l->wants, gadget)))
                return -ENOMEM;
        w->rank = rank;
        /* A free lease is taken now rather than at the next poll: last in
         * the order, the round reaches it, or a new round starts at it. */
        if (!l->cursor)
                l->cursor = w;
        round_next(l);
        return 0;
}

void kvpg_lease_release(struct kvpg_lease *l, const char *gadget)
{
        struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
        if (!w)
                return;
        if (l->cursor == w)
                l->cursor = w->next;
        kvpg_wants_remove(&l->wants, w);
        move_fail(l, w, "it was given back before the move was made");
        if (l->asking == w)
                l->asking = NULL;
        /* In the take statement out: a lock it gets is given back
         * (takes_result finds no want for it). */
        if (w->sent >= 0)
                l->sent[w->sent] = NULL;
        if (w->held && l->state == L_READY) {
                unlock_add(l, w->gadget);
                w->gadget = NULL;
                log_msg(L_INFO, gadget, "gives back its lease in the store");
        }
        kvpg_want_free(w);
        round_next(l);
}

int64_t kvpg_lease_epoch(const struct kvpg_lease *l, const char *gadget)
{
        const struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
        return w && w->held ? w->epoch : 0;
}

size_t kvpg_lease_nodes(const struct kvpg_lease *l, const struct kvpg_node **nodes)
{
        *nodes = l->nodes;
        return l->n_nodes;
}

uint64_t kvpg_lease_nodes_age(const struct kvpg_lease *l)
{
        uint64_t now = monotime_ms();
        return l->n_nodes && now > l->nodes_read_at ? now - l->nodes_read_at : 0;
}

const struct kvpg_node *kvpg_lease_node(const struct kvpg_lease *l, const char *name)
{
        for (size_t i = 0; i < l->n_nodes; i++)
                if (strcmp(l->nodes[i].name, name) == 0)
                        return &l->nodes[i];
        return NULL;
}

int kvpg_lease_move(struct kvpg_lease *l, const char *gadget, const char *node,
                    void (*done)(void *arg, const char *why), void *arg)
{
        struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
        if (!w || !w->held)
                return -ENOENT;
        if (w->move_done)
                return -EBUSY;
        snprintf(w->move_to, sizeof w->move_to, "%s", node);
        if (w->move_to[0])
                l->moves++;
        w->move_done = done;
        w->move_arg = arg;
        round_next(l);
        return 0;
}

void kvpg_lease_on_connect(struct kvpg_lease *l, void (*fn)(void *arg), void *arg)
{
        l->connected = fn;
        l->connected_arg = arg;
}
