/* kvpg_lease: the lease session (kvpg_lease.h).
 *
 * States: DOWN (waiting to connect again, with backoff), CONNECTING
 * (PQconnectPoll on the socket's readiness), READY (one query at a time).
 * Each poll is a round: first the locks given back, then one
 * gadgetd_lease_take per gadget wanted and not held, then one beat
 * (every KVPG_LEASE_BEAT_MS: this node's row, and the nodes read back) or
 * else one ping. A move asked for goes first after the locks. Nothing
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
#include "pgconn.h"
#include "system/log.h"
#include "system/monotime.h"

#define CONNECT_TIMEOUT_MS 5000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
/* After losing its session, a node lets healthy ones go first: for this
 * long it waits HUMBLE_POLLS more polls before taking a free lease. */
#define HUMBLE_MS 3000
#define HUMBLE_POLLS 4
/* KVPG_MOVE_MS and KVPG_NODES_MAX as SQL text. */
#define KVPG_MOVE_INTERVAL "10 seconds"
#define KVPG_NODES_MAX_TEXT "256"

enum state { L_DOWN, L_CONNECTING, L_SETUP, L_READY };

struct want {
        char *gadget;
        unsigned rank;
        unsigned free_seen;       /* polls in a row that saw its lock free */
        bool held, tried;         /* tried: in this round */
        bool told;                /* hooks->owner was told of owner */
        int64_t epoch;            /* held: ours */
        char owner[64];           /* not held: who has it, as last read */
        int64_t owner_epoch;
        /* A move asked for (kvpg_lease_move): to, and whom to tell. */
        char move_to[64];
        void (*move_done)(void *arg, const char *why);
        void *move_arg;
        struct want *next;
};

struct unlock {
        char *gadget;
        struct unlock *next;
};

enum query { Q_OTHER, Q_TAKE, Q_MOVE, Q_BEAT };

struct kvpg_lease {
        char *node, *peer;
        struct pgconn *pc;        /* the session, its timeouts */
        enum state state;
        struct event *ev_timer, *ev_tick;   /* the backoff; the polls */
        unsigned backoff_ms;
        bool pinged;
        enum query query;         /* what the query in flight is */
        struct want *asking;      /* the take or move query's gadget (NULL: released meanwhile) */
        char *dropped;            /* the take query's gadget, released meanwhile */
        PGresult *last;
        char err[200], sqlstate[6];
        struct want *wants;
        struct unlock *unlocks;   /* locks to give back, in order */
        struct kvpg_lease_hooks hooks;
        bool down_logged;
        uint64_t humble_until;    /* monotime_ms: lost its session lately */
        uint64_t beat_at;         /* monotime_ms: the next beat is due */
        struct kvpg_node *nodes;  /* as read at the last beat, by name */
        uint64_t nodes_read_at;   /* monotime_ms: when */
        size_t n_nodes;
};

static void round_next(struct kvpg_lease *l);

static struct want *want_find(const struct kvpg_lease *l, const char *gadget)
{
        for (struct want *w = l->wants; w; w = w->next)
                if (strcmp(w->gadget, gadget) == 0)
                        return w;
        return NULL;
}

/* A query was handed to libpq (sent: its return): its results from now. */
static void query_begin(struct kvpg_lease *l, enum query kind, int sent)
{
        l->query = kind;
        l->err[0] = l->sqlstate[0] = '\0';
        PQclear(l->last);
        l->last = NULL;
        pgconn_sent(l->pc, sent);
}

/* Connected: the session's settings first. */
static void on_connected(void *arg)
{
        struct kvpg_lease *l = arg;
        l->state = L_SETUP;
        /* The node is a checked name (config.c): safe to quote as it is.
         * Why synchronous commits here too: an epoch bump the server lost
         * in a crash would let writes stamped with the epoch before it
         * pass the fence again. */
        char sql[200];
        snprintf(sql, sizeof sql, "SET synchronous_commit = on; SET application_name = 'gadgetd %s lease'",
                 l->node);
        query_begin(l, Q_OTHER, PQsendQuery(pgconn_pq(l->pc), sql));
}

/* A take's row: (got, free, owner, owner_epoch), in text. */
static void take_result(struct kvpg_lease *l, struct want *w)
{
        if (l->err[0] || !l->last || PQntuples(l->last) != 1) {
                /* The schema may not be migrated yet (the kv connection
                 * does it): tried again at the next poll. */
                return;
        }
        bool got = PQgetvalue(l->last, 0, 0)[0] == 't';
        bool free = PQgetvalue(l->last, 0, 1)[0] == 't';
        const char *node = PQgetisnull(l->last, 0, 2) ? "" : PQgetvalue(l->last, 0, 2);
        int64_t epoch = PQgetisnull(l->last, 0, 3) ? 0 : strtoll(PQgetvalue(l->last, 0, 3), NULL, 10);
        if (got) {
                w->held = true;
                w->epoch = epoch;
                w->free_seen = 0;
                w->told = false;
                log_msg(L_INFO, w->gadget, "took its lease in the store (epoch %" PRId64 ")", epoch);
                if (l->hooks.granted)
                        l->hooks.granted(l->hooks.arg, w->gadget, epoch);
                return;
        }
        w->free_seen = free ? w->free_seen + 1 : 0;
        /* A free lease has no owner, whatever the row says of the last. */
        if (free) {
                node = "";
                epoch = 0;
        }
        if (strcmp(w->owner, node) != 0 || w->owner_epoch != epoch || !w->told) {
                snprintf(w->owner, sizeof w->owner, "%s", node);
                w->owner_epoch = epoch;
                w->told = true;
                if (l->hooks.owner)
                        l->hooks.owner(l->hooks.arg, w->gadget, node, epoch);
        }
}

/* The take of a gadget released meanwhile ended: a lock it got is given
 * back. */
static void dropped_result(struct kvpg_lease *l)
{
        char *gadget = l->dropped;
        l->dropped = NULL;
        struct unlock *u = NULL;
        if (!l->err[0] && l->last && PQntuples(l->last) == 1 && PQgetvalue(l->last, 0, 0)[0] == 't')
                u = calloc(1, sizeof *u);
        if (!u) {
                free(gadget);
                return;
        }
        u->gadget = gadget;
        u->next = l->unlocks;
        l->unlocks = u;
}

/* A move's update ended: its gadget's owner is told. */
static void move_result(struct kvpg_lease *l, struct want *w)
{
        char why[260];
        void (*done)(void *, const char *) = w->move_done;
        w->move_done = NULL;
        w->move_to[0] = '\0';
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
static void move_fail(struct want *w, const char *why)
{
        void (*done)(void *, const char *) = w->move_done;
        w->move_done = NULL;
        w->move_to[0] = '\0';
        if (done)
                done(w->move_arg, why);
}

/* A beat's rows: (name, peer, age in ms) of every node, by name. */
static void beat_result(struct kvpg_lease *l)
{
        if (l->err[0] || !l->last || PQnfields(l->last) != 3)
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
        }
        free(l->nodes);
        l->nodes = nodes;
        l->nodes_read_at = monotime_ms();
        l->n_nodes = n;
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
                l->down_logged = false;
                round_next(l);
                return;
        }
        struct want *w = l->asking;
        l->asking = NULL;
        if (w && l->query == Q_TAKE)
                take_result(l, w);
        else if (w && l->query == Q_MOVE)
                move_result(l, w);
        else if (l->query == Q_BEAT)
                beat_result(l);
        if (l->dropped)
                dropped_result(l);
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

/* Sends the round's next query: a lock given back, a take, or one ping. */
static void round_next(struct kvpg_lease *l)
{
        if (l->state != L_READY || pgconn_busy(l->pc))
                return;
        if (l->unlocks) {
                struct unlock *u = l->unlocks;
                l->unlocks = u->next;
                const char *v[1] = { u->gadget };
                int sent = PQsendQueryParams(pgconn_pq(l->pc), "SELECT pg_advisory_unlock(" KVPG_LEASE_SPACE ", hashtext($1))", 1,
                                             NULL, v, NULL, NULL, 0);
                free(u->gadget);
                free(u);
                query_begin(l, Q_OTHER, sent);
                return;
        }
        for (struct want *w = l->wants; w; w = w->next) {
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
                w->move_to[0] = '\0'; /* sent: once */
                return;
        }
        for (struct want *w = l->wants; w; w = w->next) {
                if (w->held || w->tried)
                        continue;
                w->tried = true;
                l->asking = w;
                unsigned wait = 2 * w->rank + (monotime_ms() < l->humble_until ? HUMBLE_POLLS : 0);
                bool take = w->rank != KVPG_LEASE_NEVER && w->free_seen >= wait;
                const char *v[3] = { w->gadget, l->node, take ? "t" : "f" };
                query_begin(l, Q_TAKE, PQsendQueryParams(pgconn_pq(l->pc), "SELECT * FROM gadgetd_lease_take($1, $2, $3)", 3,
                                                         NULL, v, NULL, NULL, 0));
                return;
        }
        if (l->pinged)
                return;
        l->pinged = true;
        uint64_t now = monotime_ms();
        if (now < l->beat_at) {
                query_begin(l, Q_OTHER, PQsendQuery(pgconn_pq(l->pc), "SELECT 1"));
                return;
        }
        l->beat_at = now + KVPG_LEASE_BEAT_MS;
        /* This node's own age is 0: its row was just written (the CTE's
         * select does not see the update). */
        const char *v[2] = { l->node, l->peer };
        query_begin(l, Q_BEAT, PQsendQueryParams(pgconn_pq(l->pc),
                    "WITH beat AS (INSERT INTO gadgetd_node (name, peer) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE"
                    " SET last_seen = now(), peer = excluded.peer RETURNING name)"
                    " SELECT n.name, CASE WHEN n.name = $1 THEN $2 ELSE n.peer END,"
                    " CASE WHEN n.name = $1 THEN 0 ELSE (extract(epoch FROM now() - n.last_seen) * 1000)::bigint END"
                    " FROM gadgetd_node n UNION SELECT $1, $2, 0 ORDER BY 1 LIMIT " KVPG_NODES_MAX_TEXT,
                    2, NULL, v, NULL, NULL, 0));
}

/* Every poll period: a new round. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg_lease *l = arg;
        (void)fd;
        (void)what;
        if (l->state != L_READY || pgconn_busy(l->pc))
                return;
        for (struct want *w = l->wants; w; w = w->next)
                w->tried = false;
        l->pinged = false;
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
        free(l->dropped);
        l->dropped = NULL;
        l->state = L_DOWN;
        /* The server gave back every lock with the session. */
        while (l->unlocks) {
                struct unlock *u = l->unlocks;
                l->unlocks = u->next;
                free(u->gadget);
                free(u);
        }
        char lost_why[260];
        snprintf(lost_why, sizeof lost_why, "lost its store lease: %s", reason);
        for (struct want *w = l->wants; w; w = w->next) {
                move_fail(w, lost_why);
                if (!w->held)
                        continue;
                w->held = false;
                w->epoch = 0;
                if (l->hooks.lost)
                        l->hooks.lost(l->hooks.arg, w->gadget, lost_why);
        }
        l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (l->backoff_ms > BACKOFF_MAX_MS)
                l->backoff_ms = BACKOFF_MAX_MS;
        struct timeval tv = { .tv_sec = l->backoff_ms / 1000, .tv_usec = (l->backoff_ms % 1000) * 1000 };
        evtimer_add(l->ev_timer, &tv);
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
                   struct kvpg_lease **out)
{
        struct kvpg_lease *l = calloc(1, sizeof *l);
        struct pgconn_ops ops = { .connected = on_connected, .result = on_result, .end = on_end, .lost = on_lost,
                                  .arg = l, .connect_timeout_ms = CONNECT_TIMEOUT_MS,
                                  .query_timeout_ms = KVPG_LEASE_TIMEOUT_MS, .notice_in_query = true };
        if (!l || !(l->node = strdup(node)) || !(l->peer = strdup(peer)) || !(l->ev_timer = evtimer_new(base, on_timer, l)) ||
            !(l->ev_tick = event_new(base, -1, EV_PERSIST, on_tick, l)) ||
            pgconn_new(base, conninfo, &ops, &l->pc) < 0) {
                kvpg_lease_free(l);
                return -ENOMEM;
        }
        struct timeval tv = { .tv_sec = 0, .tv_usec = KVPG_LEASE_POLL_MS * 1000 };
        event_add(l->ev_tick, &tv);
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
        while (l->wants) {
                struct want *w = l->wants;
                l->wants = w->next;
                free(w->gadget);
                free(w);
        }
        while (l->unlocks) {
                struct unlock *u = l->unlocks;
                l->unlocks = u->next;
                free(u->gadget);
                free(u);
        }
        free(l->dropped);
        free(l->nodes);
        free(l->node);
        free(l->peer);
        free(l);
}

void kvpg_lease_set_hooks(struct kvpg_lease *l, const struct kvpg_lease_hooks *hooks)
{
        l->hooks = *hooks;
}

int kvpg_lease_want(struct kvpg_lease *l, const char *gadget, unsigned rank)
{
        struct want *w = want_find(l, gadget);
        if (w) {
                w->rank = rank;
                return 0;
        }
        w = calloc(1, sizeof *w);
        if (!w || !(w->gadget = strdup(gadget))) {
                free(w);
                return -ENOMEM;
        }
        w->rank = rank;
        w->next = l->wants;
        l->wants = w;
        /* A free lease is taken now rather than at the next poll. */
        round_next(l);
        return 0;
}

void kvpg_lease_release(struct kvpg_lease *l, const char *gadget)
{
        for (struct want **pp = &l->wants; *pp; pp = &(*pp)->next) {
                struct want *w = *pp;
                if (strcmp(w->gadget, gadget) != 0)
                        continue;
                *pp = w->next;
                move_fail(w, "it was given back before the move was made");
                if (l->asking == w && l->query == Q_MOVE) {
                        l->asking = NULL;
                } else if (l->asking == w) {
                        l->asking = NULL;
                        free(l->dropped);
                        l->dropped = w->gadget;
                        w->gadget = NULL;
                }
                struct unlock *u = w->held && l->state == L_READY ? calloc(1, sizeof *u) : NULL;
                if (u) {
                        u->gadget = w->gadget;
                        w->gadget = NULL;
                        struct unlock **tail = &l->unlocks;
                        while (*tail)
                                tail = &(*tail)->next;
                        *tail = u;
                        log_msg(L_INFO, gadget, "gives back its lease in the store");
                }
                free(w->gadget);
                free(w);
                round_next(l);
                return;
        }
}

int64_t kvpg_lease_epoch(const struct kvpg_lease *l, const char *gadget)
{
        const struct want *w = want_find(l, gadget);
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
        struct want *w = want_find(l, gadget);
        if (!w || !w->held)
                return -ENOENT;
        if (w->move_done)
                return -EBUSY;
        snprintf(w->move_to, sizeof w->move_to, "%s", node);
        w->move_done = done;
        w->move_arg = arg;
        round_next(l);
        return 0;
}
