/* kvpg_lease: the lease session (kvpg_lease.h).
 *
 * States: DOWN (waiting to connect again, with backoff), CONNECTING
 * (PQconnectPoll on the socket's readiness), READY (one query at a time).
 * Each poll is a round: first the renewal of this node's lease (a join
 * while it has none: gadgetd_lease_renew, which also reads every node),
 * then the leases given back (one statement for up to KVPG_LEASE_BATCH),
 * a move asked for, then the gadgets wanted and not held that need a look
 * (never looked at, free, or owned by a node that died or gave leases back
 * since), walked in the order wanted from a cursor, KVPG_LEASE_BATCH to a
 * statement of gadgetd_lease_take_nodes. The wants are found by name
 * through a hash table (kvpg_wants.c): every kv write asks for its
 * gadget's epoch, each row of a take's answer for its want. Nothing
 * waits: a query unanswered within KVPG_LEASE_TIMEOUT_MS (a renewal: within
 * the node's part of LeaseTTL=, if longer) counts as the session lost; the session's end, a renewal refused, or no renewal
 * acknowledged within KVPG_LEASE_VALID_MS of its sending ends every lease
 * at once (hooks->lost), and the node joins again with a new incarnation
 * once its last lease has expired at the store (a new process: or once the
 * session that held it is gone). Each renewal tells the store to record
 * this session (schema 14): when it ends, the others read this node as
 * dead at their next round (kvpg_lease.h says why that is safe). */
#include "kvpg_lease.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "kvpg_sql.h"
#include "kvpg_wants.h"
#include "pgconn.h"
#include "system/log.h"
#include "system/monotime.h"
#include "system/ratelog.h"
#include "system/retry.h"
#include "system/timer.h"

#define CONNECT_TIMEOUT_MS 5000
/* Why sooner than the store's: a node without its lease session serves
 * nothing of the shared store, and others take its gadgets at their TTL. */
#define RECONNECT_MAX_MS 2000
/* After losing its session, a node lets healthy ones go first: for this
 * long it waits HUMBLE_POLLS more polls before taking a free lease. */
#define HUMBLE_MS 3000
#define HUMBLE_POLLS 4
/* KVPG_MOVE_MS as SQL text. */
#define KVPG_MOVE_INTERVAL "10 seconds"

enum state { L_DOWN, L_CONNECTING, L_SETUP, L_READY };

struct unlock {
        char *gadget;
        struct unlock *next;
};

enum query { Q_OTHER, Q_SCHEMA, Q_TAKE, Q_MOVE, Q_RENEW, Q_FORGET };

struct kvpg_lease {
        char *node, *peer;
        struct pgconn *pc;        /* the session, its timeouts */
        enum state state;
        struct event *ev_timer, *ev_tick;   /* the backoff; the polls */
        struct event *ev_expire;  /* at valid_until: every lease ends */
        unsigned backoff_ms;
        bool tick;                /* a round is due: its renewal first */
        bool in_results;          /* a take's rows are being read: no query now */
        /* This node's lease: its incarnation at the store (0: none, it
         * joins at the next round), and until when (monotime_ms) it may
         * serve: KVPG_LEASE_VALID_MS after sending the last renewal the
         * store acknowledged. */
        int64_t incarnation;
        uint64_t valid_until;
        uint64_t renew_sent_at;   /* the renewal in flight: when it was sent */
        int64_t renew_inc;        /* ... and the incarnation it named */
        int64_t sent_inc;         /* the take statement's incarnation */
        bool join_logged;         /* "waits for its last lease to expire" said */
        bool joined;              /* this process joined once (a later join is not fresh) */
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
        struct unlock *unlocks, **unlocks_tail; /* leases to give back, in order */
        struct kvpg_lease_hooks hooks;
        bool down_logged;
        size_t n_held;            /* leases this node holds */
        uint64_t humble_until;    /* monotime_ms: lost its lease lately */
        struct kvpg_node *nodes;  /* as read at the last renewal, by name */
        uint64_t nodes_read_at;   /* monotime_ms: when */
        size_t n_nodes;
        uint64_t forget_ms;       /* NodeForget= */
        unsigned ttl_ms, valid_ms; /* LeaseTTL=, and this node's part of it (kvpg_lease_set_ttl) */
        unsigned poll_ms;         /* LeasePoll=: a round every poll_ms */
        /* gadgetctl nodes forget: one at a time. */
        char forget[64];
        bool forget_sent;
        void (*forget_done)(void *arg, int code, const char *msg);
        void *forget_arg;
        /* Told each time the session connects (kvpg_lease_on_connect). */
        void (*connected)(void *arg, const char *server);
        void *connected_arg;
        char warning[KVPG_WARNING_MAX]; /* kvpg_lease_set_warning's */
        struct ratelog slow_log;  /* renewals acknowledged late */
};

static void round_next(struct kvpg_lease *l);
static void leases_end(struct kvpg_lease *l, const char *why);

/* A query was handed to libpq (sent: its return): its results from now. */
static void query_begin(struct kvpg_lease *l, enum query kind, int sent)
{
        l->query = kind;
        l->err[0] = l->sqlstate[0] = '\0';
        PQclear(l->last);
        l->last = NULL;
        /* A renewal may wait as long as the node may serve without one
         * (LeaseTTL='s 92%): ending the session sooner would end the
         * leases a longer TTL was set to keep through a slow store. The
         * other queries keep the session's timeout, which
         * core_reexec_lease_until counts on. */
        unsigned ms = kind == Q_RENEW && l->valid_ms > KVPG_LEASE_TIMEOUT_MS ? l->valid_ms : KVPG_LEASE_TIMEOUT_MS;
        pgconn_sent_within(l->pc, sent, STORE_OP_LEASE, ms);
}

/* Connected: the session's settings first. */
static void on_connected(void *arg)
{
        struct kvpg_lease *l = arg;
        l->state = L_SETUP;
        if (l->connected) {
                char server[300];
                pgconn_server(l->pc, server, sizeof server);
                l->connected(l->connected_arg, server);
        }
        /* The node is a checked name (config.c): safe to quote as it is.
         * Why synchronous commits here too: an epoch bump the server lost
         * in a crash would let writes stamped with the epoch before it
         * pass the fence again. */
        /* Why the TCP settings: the store counts this node dead the
         * moment this session's backend ends (schema 14), which is safe
         * only if this node then knows it too: it closed the session
         * itself (then ended every lease, on_lost), or died. The server
         * must not end it over a silent network first (a partition: its
         * word would not come through), so neither its keepalives nor its
         * unacknowledged answers end the session within twice the TTL,
         * whatever the host's defaults; by then this node stopped serving
         * by its own clock (KVPG_LEASE_VALID_MS). Nor may it end an idle
         * session (idle_session_timeout). On a Unix socket they are
         * accepted and mean nothing (no network between). */
        char sql[400];
        unsigned keep_s = 2 * l->ttl_ms / 1000 + 10;
        snprintf(sql, sizeof sql, "SET synchronous_commit = on; SET application_name = 'gadgetd %s lease';"
                 " SET idle_session_timeout = 0; SET tcp_user_timeout = %u; SET tcp_keepalives_idle = %u;"
                 " SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3",
                 l->node, 2 * l->ttl_ms + 1000, keep_s);
        query_begin(l, Q_OTHER, PQsendQuery(pgconn_pq(l->pc), sql));
}

/* A lease to give back in the round (gadget: taken). */
static void unlock_add(struct kvpg_lease *l, char *gadget)
{
        struct unlock *u = calloc(1, sizeof *u);
        if (!u) {
                /* Kept until this node's lease ends: only a lease no one
                 * here wants, which another node then takes later. */
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

/* Why a name or address read from the store is checked: other nodes can
 * write any row of it, and what is read here is shown by gadgetctl (which
 * refuses a list holding a name that is not a node's, validate_response.c)
 * and dialled. A node name: as Node= is (gadget_name_ok). A peer: printable
 * ASCII without spaces, as PeerListen= (a numeric ADDRESS:PORT) is, that
 * fits struct kvpg_node. */
static bool peer_ok(const char *s)
{
        size_t n = strlen(s);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
                        return false;
        return n < sizeof(((struct kvpg_node *)0)->peer);
}

/* One take's row for w: (got, free, owner, its epoch, its incarnation);
 * changes: the owner node's as read before the look. */
static void take_row(struct kvpg_lease *l, struct kvpg_want *w, bool got, bool free, const char *node, int64_t epoch,
                     int64_t inc)
{
        w->looked = true;
        w->owner_inc = inc;
        const struct kvpg_node *n = node[0] ? kvpg_lease_node(l, node) : NULL;
        w->owner_changes = n ? n->changes : -1;
        if (got) {
                l->n_held++;
                w->held = true;
                w->epoch = epoch;
                /* The owner it knows is this node now, of this incarnation:
                 * never another node's name beside this node's incarnation
                 * (a look would be skipped as if that node still owned it). */
                snprintf(w->owner, sizeof w->owner, "%s", l->node);
                w->owner_epoch = epoch;
                w->free_seen = 0;
                w->told = false;
                log_msg(L_INFO, w->gadget, "took its lease in the store (epoch %" PRId64 ")", epoch);
                if (l->hooks.granted)
                        l->hooks.granted(l->hooks.arg, w->gadget, epoch);
                return;
        }
        /* Seen free only by a node that could have taken it (it had a
         * lease of its own at the look): a node waiting to join again
         * counts nothing, so that once it joins it still lets the others
         * go first (its rank's and HUMBLE_POLLS's polls), as when the
         * store read a dead node only at its lease's end. */
        w->free_seen = free && l->sent_inc ? w->free_seen + 1 : 0;
        /* A free lease has no owner, whatever the row says of the last;
         * nor has this node's own, not held here: of an incarnation it no
         * longer has (it lost its lease, restarted), which expires at the
         * store by itself (no other node runs it meanwhile; counted free
         * only then, so that the others' turns come first). */
        if (free || strcmp(node, l->node) == 0) {
                node = "";
                epoch = 0;
                w->owner_inc = 0;
        }
        if (strcmp(w->owner, node) != 0 || w->owner_epoch != epoch || !w->told) {
                snprintf(w->owner, sizeof w->owner, "%s", node);
                w->owner_epoch = epoch;
                w->told = true;
                if (l->hooks.owner)
                        l->hooks.owner(l->hooks.arg, w->gadget, node, epoch);
        }
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

/* The take statement's rows: (gadget, got, free, owner, owner_epoch,
 * owner_inc), in text, one per gadget it reached (the rest wait for the
 * next round). A lease got for a gadget released meanwhile is given back;
 * one got under an incarnation this node no longer has is not held (the
 * store names a dead lease: any node may take it). The hooks may want or
 * release gadgets: each row finds its want by name. */
static void takes_result(struct kvpg_lease *l)
{
        PGresult *r = l->last;
        l->last = NULL;
        /* The schema may not be migrated yet (the kv connection does it):
         * tried again at the next poll. */
        int n = !l->err[0] && r && PQnfields(r) == 6 ? PQntuples(r) : 0;
        l->in_results = true;
        bool current = l->sent_inc && l->sent_inc == l->incarnation && kvpg_lease_valid(l);
        for (int i = 0; i < n; i++) {
                const char *gadget = PQgetvalue(r, i, 0);
                bool got = PQgetvalue(r, i, 1)[0] == 't';
                bool free = PQgetvalue(r, i, 2)[0] == 't';
                const char *node = PQgetisnull(r, i, 3) ? "" : PQgetvalue(r, i, 3);
                /* An owner of a name no node can have: none known (the
                 * lease is still not free: the store says whether it is). */
                if (node[0] && !gadget_name_ok(node))
                        node = "";
                int64_t epoch = PQgetisnull(r, i, 4) ? 0 : strtoll(PQgetvalue(r, i, 4), NULL, 10);
                int64_t inc = PQgetisnull(r, i, 5) ? 0 : strtoll(PQgetvalue(r, i, 5), NULL, 10);
                struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
                if (got && !current) {
                        got = false;
                        free = true;
                }
                if (w && w->sent >= 0) {
                        l->sent[w->sent] = NULL;
                        w->sent = -1;
                        take_row(l, w, got, free, node, epoch, inc);
                } else if (got) {
                        char *g = strdup(gadget);
                        if (g)
                                unlock_add(l, g);
                }
        }
        l->in_results = false;
        sent_clear(l);
        PQclear(r);
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

/* A renewal's rows: (name, peer, age in ms, leases, incarnation, live,
 * changes) of every node, by name; this node's incarnation is its lease's
 * (0: not renewed, or not joined yet). */
static void renew_result(struct kvpg_lease *l)
{
        if (l->err[0] || !l->last || PQnfields(l->last) != 7)
                return; /* the schema may not be migrated yet: at the next round */
        size_t n = (size_t)PQntuples(l->last);
        if (n > KVPG_NODES_MAX)
                n = KVPG_NODES_MAX;
        struct kvpg_node *nodes = n ? calloc(n, sizeof *nodes) : NULL;
        if (n && !nodes)
                return;
        int64_t mine = 0;
        size_t kept = 0;
        for (size_t row = 0; row < n; row++) {
                /* A row of a name no node can have is no node's: left out. */
                const char *name = PQgetvalue(l->last, (int)row, 0), *peer = PQgetvalue(l->last, (int)row, 1);
                if (!gadget_name_ok(name))
                        continue;
                int i = (int)kept++;
                snprintf(nodes[i].name, sizeof nodes[i].name, "%s", name);
                snprintf(nodes[i].peer, sizeof nodes[i].peer, "%s", peer_ok(peer) ? peer : "");
                long long age = strtoll(PQgetvalue(l->last, (int)row, 2), NULL, 10);
                nodes[i].age_ms = age > 0 ? (uint64_t)age : 0;
                long long leases = strtoll(PQgetvalue(l->last, (int)row, 3), NULL, 10);
                nodes[i].leases = leases > 0 ? (uint64_t)leases : 0;
                nodes[i].incarnation = strtoll(PQgetvalue(l->last, (int)row, 4), NULL, 10);
                nodes[i].live = PQgetvalue(l->last, (int)row, 5)[0] == 't';
                nodes[i].changes = strtoll(PQgetvalue(l->last, (int)row, 6), NULL, 10);
                if (strcmp(nodes[i].name, l->node) == 0) {
                        mine = nodes[i].incarnation;
                        nodes[i].leases = l->n_held;
                }
        }
        free(l->nodes);
        l->nodes = nodes;
        l->nodes_read_at = monotime_ms();
        l->n_nodes = kept;
        /* An answer to a renewal of a lease this node no longer counts on
         * (it ended meanwhile) changes nothing: it joins again. */
        if (l->renew_inc != l->incarnation)
                return;
        if (!l->incarnation && mine) {
                l->incarnation = mine;
                l->joined = true;
                l->join_logged = false;
                log_msg(L_INFO, NULL, "store: this node's lease taken (incarnation %" PRId64 ", %u ms, renewed every "
                        "%u ms)", mine, l->ttl_ms, l->poll_ms);
        } else if (!l->incarnation) {
                if (!l->join_logged)
                        log_msg(L_INFO, NULL, "store: this node waits for its last lease in the store to expire "
                                "(at most %u ms) before it takes one again", l->ttl_ms);
                l->join_logged = true;
                return;
        } else if (mine != l->incarnation) {
                leases_end(l, "lost its store lease: the store ended this node's lease (it expired, and another node "
                              "may have taken its gadgets)");
                return;
        }
        /* Why from the sending: the store's now() for this renewal came
         * after it, so its lease_until is later than this in real time. */
        l->valid_until = l->renew_sent_at + l->valid_ms;
        uint64_t now = monotime_ms();
        timer_arm_ms(l->ev_expire, l->valid_until > now ? l->valid_until - now : 0);
        /* Acknowledged after half of what the node may wait for one: said
         * before a slower one ends every lease, with what to look at. */
        if ((now - l->renew_sent_at) * 2 > l->valid_ms)
                ratelog_warn(&l->slow_log, now, NULL, "renewals acknowledged late",
                             "store: a renewal of this node's lease was acknowledged %llu ms after its sending; "
                             "without one for %u ms it stops serving its gadgets (LeaseTTL=%u ms): the store "
                             "answers slowly or this node's loop is busy",
                             (unsigned long long)(now - l->renew_sent_at), l->valid_ms, l->ttl_ms);
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
                /* Off this node's list now, not at the next renewal. */
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
 * store's clock decides: this node's last read may be a round old. */
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
                if (l->query == Q_SCHEMA && strcmp(l->sqlstate, "42P01") == 0)
                        l->err[0] = '\0'; /* no schema yet: the kv connection makes it */
                if (l->err[0]) {
                        pgconn_fail(l->pc, l->err);
                        return;
                }
                /* The session's settings, then the store's schema, in a
                 * query of its own: an error (no schema yet) would roll
                 * back the settings sent with it. */
                if (l->query == Q_OTHER) {
                        query_begin(l, Q_SCHEMA, PQsendQuery(pgconn_pq(l->pc), KVPG_SQL_SCHEMA));
                        return;
                }
                /* A store a newer node migrated past this node's schema:
                 * no lease taken, so no gadget runs here that its kv
                 * connection (refused too) could not serve. Logged once,
                 * as a failed connect is; tried again with backoff. */
                char why[300];
                bool row = l->last && PQntuples(l->last) == 1 && PQnfields(l->last) == 2;
                if (row && kvpg_sql_schema_check(atoi(PQgetvalue(l->last, 0, 0)), atoi(PQgetvalue(l->last, 0, 1)),
                                                 why, sizeof why) < 0) {
                        l->state = L_CONNECTING;
                        pgconn_fail(l->pc, why);
                        return;
                }
                l->state = L_READY;
                l->backoff_ms = 0;
                l->tick = true; /* the renewal (a join) first */
                l->down_logged = false;
                round_next(l);
                return;
        }
        /* A server that takes no writes (a standby: SQLSTATE 25006) can
         * renew nothing: the session goes at once, and the next attempt
         * looks for one that does (another host, or this one promoted),
         * rather than staying on it until the lease runs out. */
        if (strcmp(l->sqlstate, KVPG_SQLSTATE_READ_ONLY) == 0) {
                char why[260];
                snprintf(why, sizeof why, "the server takes no writes (a standby?): %s", l->err);
                pgconn_fail(l->pc, why);
                return;
        }
        struct kvpg_want *w = l->asking;
        l->asking = NULL;
        if (l->query == Q_TAKE)
                takes_result(l);
        else if (w && l->query == Q_MOVE)
                move_result(l, w);
        else if (l->query == Q_RENEW)
                renew_result(l);
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

/* Gives back the queued leases, up to KVPG_LEASE_BATCH in one statement. */
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
        char inc[24];
        snprintf(inc, sizeof inc, "%" PRId64, l->incarnation);
        const char *v[3] = { l->names.text, l->node, inc };
        query_begin(l, Q_OTHER, PQsendQueryParams(pgconn_pq(l->pc),
                    "SELECT gadgetd_lease_release($1::text[], $2, $3)", 3, NULL, v, NULL, NULL, 0));
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

/* Whether w, wanted and not held, needs a look this round: never looked
 * at, free, or its owner's node is not read as live with the same
 * incarnation and changes as at the last look. Why this is enough: a
 * live lease of another node ends only when that node's lease does (its
 * incarnation changes, or it is read as expired) or it gives it back
 * (its changes grow), and the renewal reads every node each round. */
static bool needs_look(const struct kvpg_lease *l, const struct kvpg_want *w)
{
        if (!w->looked || !w->owner[0] || !w->owner_inc)
                return true;
        const struct kvpg_node *n = kvpg_lease_node(l, w->owner);
        return !n || !n->live || n->incarnation != w->owner_inc || n->changes != w->owner_changes;
}

/* How many polls w waits seeing its lease free before taking it: 2 per
 * rank, none if every node ahead of this one had a lease and has it no
 * more (it died: its session ended, or its lease expired), so that a node
 * of rank 1 takes over from a dead node of rank 0 at its first look. A
 * node listed without ever having had a lease (incarnation 0: it is
 * starting, its kv session wrote its row first) is waited for. */
static unsigned rank_polls(const struct kvpg_lease *l, const struct kvpg_want *w)
{
        if (!w->ahead)
                return 2 * w->rank;
        for (unsigned i = 0; i < w->rank; i++) {
                const struct kvpg_node *n = kvpg_lease_node(l, w->ahead[i]);
                if (!n || n->live || n->incarnation <= 0)
                        return 2 * w->rank;
        }
        return 0;
}

/* Sends the round's next KVPG_LEASE_BATCH wanted gadgets not held that
 * need a look, from the cursor, in one statement; whether it did. Each
 * says whether to take a free lease: rank 0 at once, rank r after seeing
 * it free 2 r polls in a row, HUMBLE_POLLS more for a while after this
 * node lost its lease; none without a lease of this node's. */
static bool send_takes(struct kvpg_lease *l)
{
        if (!l->sent && !(l->sent = calloc(KVPG_LEASE_BATCH, sizeof *l->sent)))
                return false;
        kvpg_array_reset(&l->names);
        kvpg_array_reset(&l->takes);
        unsigned humble = monotime_ms() < l->humble_until ? HUMBLE_POLLS : 0;
        bool leased = kvpg_lease_valid(l);
        while (l->cursor && l->n_sent < KVPG_LEASE_BATCH) {
                struct kvpg_want *w = l->cursor;
                if (w->held || !needs_look(l, w)) {
                        if (!w->held)
                                w->free_seen = 0;
                        l->cursor = w->next;
                        continue;
                }
                bool take = leased && w->rank != KVPG_LEASE_NEVER && w->free_seen >= rank_polls(l, w) + humble;
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
        char inc[24];
        snprintf(inc, sizeof inc, "%" PRId64, l->incarnation);
        l->sent_inc = l->incarnation;
        const char *v[4] = { l->names.text, l->takes.text, l->node, inc };
        query_begin(l, Q_TAKE, PQsendQueryParams(pgconn_pq(l->pc),
                    "SELECT * FROM gadgetd_lease_take_nodes($1::text[], $2::boolean[], $3, $4)", 4, NULL, v, NULL,
                    NULL, 0));
        return true;
}

/* This node's lease renewed (or, without one, joined), and every node's
 * row read back (renew_result): the round's first statement. A node
 * unseen for NodeForget= leaves: its row is deleted (the owner rows keep
 * their epochs for fencing, the audit its records). */
static void send_renew(struct kvpg_lease *l)
{
        char inc[24], leases[24], ttl[24], forget[24];
        snprintf(inc, sizeof inc, "%" PRId64, l->incarnation);
        snprintf(leases, sizeof leases, "%zu", l->n_held);
        snprintf(ttl, sizeof ttl, "%u", l->ttl_ms);
        snprintf(forget, sizeof forget, "%llu", (unsigned long long)(l->forget_ms ? l->forget_ms : KVPG_NODE_FORGET_MS));
        /* Fresh: this process never joined, so the session that held its
         * node's last lease, if gone, was a dead process's. */
        const char *v[7] = { l->node, l->peer, inc, leases, ttl, forget, l->joined ? "f" : "t" };
        l->renew_inc = l->incarnation;
        l->renew_sent_at = monotime_ms();
        /* true: the store may end this node's lease when this session
         * ends (on_connected says why that is safe). */
        query_begin(l, Q_RENEW, PQsendQueryParams(pgconn_pq(l->pc),
                    "SELECT * FROM gadgetd_lease_renew($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint, true, $7)",
                    7, NULL, v, NULL, NULL, 0));
}

/* Sends the round's next query: the renewal first, then leases given
 * back, a move, a forget, takes. */
static void round_next(struct kvpg_lease *l)
{
        if (l->state != L_READY || pgconn_busy(l->pc) || l->in_results)
                return;
        if (l->tick) {
                l->tick = false;
                l->cursor = l->wants.first;
                send_renew(l);
                return;
        }
        if (l->unlocks) {
                /* Without a lease of this node's they are dead already. */
                if (l->incarnation) {
                        send_unlocks(l);
                        return;
                }
                unlocks_clear(l);
        }
        if (l->moves && send_move(l))
                return;
        if (send_forget(l))
                return;
        send_takes(l);
}

/* Every poll period: a new round over every want, its renewal first
 * (after the query in flight, if one is). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_lease *l = arg;
        (void)fd;
        (void)what;
        l->tick = true;
        round_next(l);
}

/* Every lease ends now (why): this node's own is no longer counted on,
 * and it joins again at the next round with a new incarnation, which the
 * store gives only once the last one expired there. */
static void leases_end(struct kvpg_lease *l, const char *why)
{
        bool had = l->incarnation != 0;
        l->incarnation = 0;
        l->valid_until = 0;
        event_del(l->ev_expire);
        if (had)
                l->humble_until = monotime_ms() + HUMBLE_MS;
        if (had && l->n_held)
                log_msg(L_WARN, NULL, "store: %s", why);
        /* Given back with the lease. */
        unlocks_clear(l);
        l->n_held = 0;
        for (struct kvpg_want *w = l->wants.first, *next; w; w = next) {
                next = w->next;
                move_fail(l, w, why);
                /* Looked at again, each told its owner anew: what this node
                 * knew of the others' leases dates from before the end. */
                w->looked = false;
                w->told = false;
                if (!w->held)
                        continue;
                w->held = false;
                w->epoch = 0;
                if (l->hooks.lost)
                        l->hooks.lost(l->hooks.arg, w->gadget, why);
        }
}

/* No renewal acknowledged in time: this node's lease may have expired. */
static void on_expire(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_lease *l = arg;
        (void)fd;
        (void)what;
        /* A timer may fire a little early (whole milliseconds): again then. */
        if (kvpg_lease_check(l)) {
                uint64_t now = monotime_ms();
                timer_arm_ms(l->ev_expire, l->valid_until > now ? l->valid_until - now + 1 : 1);
        }
}

bool kvpg_lease_valid(struct kvpg_lease *l)
{
        if (!l->incarnation)
                return false;
        if (monotime_ms() < l->valid_until)
                return true;
        /* Ended from the loop, at once: not from inside the caller (a kv
         * write, a gadget's call), whose gadget the end kills. */
        event_active(l->ev_expire, EV_TIMEOUT, 0);
        return false;
}

bool kvpg_lease_check(struct kvpg_lease *l)
{
        if (!l->incarnation)
                return false;
        if (monotime_ms() < l->valid_until)
                return true;
        char why[200];
        snprintf(why, sizeof why, "lost its store lease: no renewal of this node's lease was acknowledged within %u ms "
                 "(it may have expired at the store)", l->valid_ms);
        leases_end(l, why);
        return false;
}

/* The session is gone (closed already; why on one line): every lease
 * with it, at once. */
static void on_lost(void *arg, const char *reason)
{
        struct kvpg_lease *l = arg;
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
        /* Why every lease ends now though the store keeps this node's
         * for the TTL: no renewal can be acknowledged without the session
         * (a new one joins again once it expired). */
        char lost_why[260];
        snprintf(lost_why, sizeof lost_why, "lost its store lease: %s", reason);
        leases_end(l, lost_why);
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
            !(l->ev_expire = evtimer_new(base, on_expire, l)) ||
            pgconn_new(base, conninfo, &ops, &l->pc) < 0) {
                kvpg_lease_free(l);
                return -ENOMEM;
        }
        l->poll_ms = KVPG_LEASE_POLL_MS;
        timer_arm_ms(l->ev_tick, l->poll_ms);
        kvpg_lease_set_ttl(l, KVPG_LEASE_TTL_MS);
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
        if (l->ev_expire)
                event_free(l->ev_expire);
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

void kvpg_lease_set_ttl(struct kvpg_lease *l, unsigned ms)
{
        if (ms < KVPG_LEASE_TTL_MS)
                ms = KVPG_LEASE_TTL_MS;
        if (ms > KVPG_LEASE_TTL_MAX_MS)
                ms = KVPG_LEASE_TTL_MAX_MS;
        l->ttl_ms = ms;
        /* The drift margin scales with the TTL: the clocks' rates may
         * differ by ~8% (KVPG_LEASE_MARGIN_MS of the default). */
        l->valid_ms = ms - (unsigned)((uint64_t)ms * KVPG_LEASE_MARGIN_MS / KVPG_LEASE_TTL_MS);
}

void kvpg_lease_set_poll(struct kvpg_lease *l, unsigned ms)
{
        /* Why at most a quarter of the TTL: a lease is renewed several
         * times within its node's part of it, a slow answer or two
         * included. */
        if (ms < KVPG_LEASE_POLL_MIN_MS)
                ms = KVPG_LEASE_POLL_MIN_MS;
        if (ms > l->ttl_ms / 4)
                ms = l->ttl_ms / 4;
        l->poll_ms = ms;
        timer_arm_ms(l->ev_tick, ms);
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
        return kvpg_lease_want_after(l, gadget, NULL, rank);
}

int kvpg_lease_want_after(struct kvpg_lease *l, const char *gadget, char *const *ahead, unsigned rank)
{
        char **names = NULL;
        if (ahead && rank && rank != KVPG_LEASE_NEVER) {
                if (!(names = calloc(rank, sizeof *names)))
                        return -ENOMEM;
                for (unsigned i = 0; i < rank; i++)
                        if (!(names[i] = strdup(ahead[i]))) {
                                while (i-- > 0)
                                        free(names[i]);
                                free(names);
                                return -ENOMEM;
                        }
        }
        struct kvpg_want *w = kvpg_wants_find(&l->wants, gadget);
        if (w) {
                kvpg_want_ahead_free(w);
                w->rank = rank;
                w->ahead = names;
                return 0;
        }
        if (!(w = kvpg_wants_add(&l->wants, gadget))) {
                struct kvpg_want tmp = { .rank = rank, .ahead = names };
                kvpg_want_ahead_free(&tmp);
                return -ENOMEM;
        }
        w->rank = rank;
        w->ahead = names;
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
        /* In the take statement out: a lease it gets is given back
         * (takes_result finds no want for it). */
        if (w->sent >= 0)
                l->sent[w->sent] = NULL;
        if (w->held) {
                l->n_held -= l->n_held > 0;
        }
        if (w->held && l->state == L_READY && l->incarnation) {
                unlock_add(l, w->gadget);
                w->gadget = NULL;
                log_msg(L_INFO, gadget, "gives back its lease in the store");
        }
        kvpg_want_free(w);
        round_next(l);
}

int64_t kvpg_lease_epoch(struct kvpg_lease *l, const char *gadget)
{
        if (!kvpg_lease_valid(l))
                return 0;
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

void kvpg_lease_set_warning(struct kvpg_lease *l, const char *warning)
{
        snprintf(l->warning, sizeof l->warning, "%s", warning);
}

const char *kvpg_lease_warning(const struct kvpg_lease *l)
{
        return l->warning;
}

void kvpg_lease_on_connect(struct kvpg_lease *l, void (*fn)(void *arg, const char *server), void *arg)
{
        l->connected = fn;
        l->connected_arg = arg;
}
