/* kvpg: kv bindings on PostgreSQL, one non-blocking connection on the loop.
 *
 * States: CONNECTING (PQconnectPoll driven by the socket's readiness),
 * SETUP (the session's settings, the schema's migrations, this node's
 * row: one query at a time), READY (jobs, one query at a time in arrival
 * order), DOWN (waiting to try again, with backoff). Nothing here waits:
 * every libpq call is made non-blocking, and a connect or a query that
 * takes too long counts as a lost connection.
 *
 * Durability: the session runs with synchronous_commit=on, set at connect
 * (a server or role default cannot turn it off), and each job is one
 * statement followed by Sync, so the server commits it before it reports
 * ready; a job is answered only once PQgetResult returns NULL, which is
 * after that report. A write whose connection is lost before is answered
 * "outcome unknown", never ok.
 *
 * With a standby: a commit the server reported is on the standby too only
 * if the server replicates synchronously (synchronous_standby_names);
 * SETUP reads that setting and warns when the store looks replicated
 * without it (several hosts, or standbys streaming), since a failover
 * may then lose the last acknowledged writes. A server that refuses
 * writes (SQLSTATE 25006: a standby) is unavailable: the job is answered
 * so (nothing was written) and the session goes, so the next attempt
 * looks for a server that takes writes. */
#include "kvpg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_backend.h"
#include "kv_job.h"
#include "kvpg_audit.h"
#include "kvpg_job.h"
#include "kvpg_lanes.h"
#include "kvpg_lease.h"
#include "kvpg_sql.h"
#include "pgconn.h"
#include "system/log.h"
#include "system/retry.h"
#include "system/timer.h"

#define CONNECT_TIMEOUT_S 5
#define QUERY_TIMEOUT_S 10
#define RECONNECT_MAX_MS 5000

enum state { PG_DOWN, PG_CONNECTING, PG_SETUP, PG_READY };
enum step { STEP_SESSION, STEP_REPLICATION, STEP_MIGRATE_READ, STEP_MIGRATE_APPLY, STEP_NODE, STEP_PREPARE };

struct kvpg {
        struct kv_backend be;         /* first: what the gadgets' stores open on */
        struct event_base *base;
        char *node;
        char where[256];              /* conninfo without passwords, for logs */
        bool hosts;                   /* conninfo names several hosts */
        bool async_warned;            /* "commits without a synchronous standby" logged */
        char warning[KVPG_WARNING_MAX]; /* ... and its text for gadgetctl nodes ("" if none) */
        struct pgconn *pc;            /* the connection, its timeouts */
        enum state state;
        enum step step;
        struct event *ev_timer;       /* the backoff */
        unsigned backoff_ms;
        PGresult *last;               /* the query's last tuples result */
        char err[200], sqlstate[6];   /* its first error */
        int version;                  /* the schema's, as read in SETUP */
        int compatible;               /* ... and the oldest whose nodes may use it */
        int beside_logged;            /* the newer schema whose use was logged (0: none) */
        int prepared;                 /* queries prepared on this connection */
        const struct kv_type *types[KV_TYPES_MAX]; /* kvpg_new's: their queries are prepared */
        size_t n_types;
        struct kvpg_lanes queued;     /* the jobs not sent yet, gadgets in turn */
        struct kv_job *running;       /* its query is out; done NULL: its caller left */
        bool down_logged;             /* this failure to connect is logged */
        char reason[200];             /* why the store is down */
        struct kvpg_lease *lease;     /* the epochs of writes; NULL: unfenced */
        struct kvpg_audit *audit;     /* told the lease session's server too; NULL: none */
};

/* A gadget's store on the connection: its lane (kvpg_lanes.c) is keyed
 * by owner, the jobs' job->kv. */
struct kvpg_queue {
        struct kv_queue q;
        struct kvpg *pg;
        const struct kv *owner;
};

static void send_next(struct kvpg *pg);
static void kvpg_free(struct kvpg *pg);
static const struct kv_backend_ops kvpg_ops;

/* Answers job with err and why, and frees it (unless its caller left). */
static void answer(struct kv_job *job, int err, const char *why)
{
        job->err = err;
        if (why) {
                /* Cut to fit: the reason is the last part of every message. */
                size_t n = strnlen(why, sizeof job->why - 1);
                memcpy(job->why, why, n);
                job->why[n] = '\0';
        }
        if (job->done)
                job->done(job);
        kv_job_free(job);
}

/* Answers every job of list with err (and why), in order. */
static void answer_all(struct kv_job *list, int err, const char *why)
{
        while (list) {
                struct kv_job *job = list;
                list = job->next;
                answer(job, err, why);
        }
}

/* Every queued job fails as unavailable. */
static void fail_queued(struct kvpg *pg)
{
        char why[256];
        snprintf(why, sizeof why, "store unavailable: %s", pg->reason);
        answer_all(kvpg_lanes_take(&pg->queued, NULL), KV_EUNAVAILABLE, why);
}

/* The running job's connection is gone: a read did nothing, a write may
 * or may not have committed. */
static void fail_running(struct kvpg *pg)
{
        struct kv_job *job = pg->running;
        char why[512];
        if (!job)
                return;
        pg->running = NULL;
        if (job->op->writes) {
                snprintf(why, sizeof why, "store unavailable: the connection was lost during the %s, whose "
                         "outcome is unknown: %s", job->op->name, pg->reason);
                answer(job, KV_EUNKNOWN, why);
        } else {
                snprintf(why, sizeof why, "store unavailable: %s", pg->reason);
                answer(job, KV_EUNAVAILABLE, why);
        }
}

static void setup_send(struct kvpg *pg, const char *sql, enum step step);

/* Connected: the session's settings first. */
static void on_connected(void *arg)
{
        struct kvpg *pg = arg;
        pg->state = PG_SETUP;
        /* Why every answered write is durable: the session commits
         * synchronously whatever the server's or role's default says. The
         * node is a checked name (config.c): safe to quote as it is. */
        char sql[256];
        snprintf(sql, sizeof sql, "SET synchronous_commit = on; SET client_min_messages = warning;"
                 " SET application_name = 'gadgetd %s'", pg->node);
        setup_send(pg, sql, STEP_SESSION);
}

/* Starts a connection attempt. */
static void connect_start(struct kvpg *pg)
{
        pg->state = PG_CONNECTING;
        pgconn_connect(pg->pc);
}

/* A query was handed to libpq (sent: its return): its results from now. */
static void query_begin(struct kvpg *pg, int sent, enum store_op op)
{
        pg->err[0] = pg->sqlstate[0] = '\0';
        PQclear(pg->last);
        pg->last = NULL;
        pgconn_sent(pg->pc, sent, op);
}

/* A job's kind, for the store's latency: a kv get or put, or another. */
static enum store_op job_op(const struct kv_job *job)
{
        if (strcmp(job->type->name, "kv") != 0)
                return STORE_OP_OTHER;
        return strcmp(job->op->name, "get") == 0 ? STORE_OP_KV_GET
               : strcmp(job->op->name, "put") == 0 ? STORE_OP_KV_PUT : STORE_OP_OTHER;
}

static void setup_send(struct kvpg *pg, const char *sql, enum step step)
{
        pg->step = step;
        query_begin(pg, PQsendQuery(pgconn_pq(pg->pc), sql), STORE_OP_OTHER);
}

/* The next migration, or this node's row once the schema is current. */
static void setup_migrate(struct kvpg *pg)
{
        char why[300];
        int ours = kvpg_sql_version();
        /* A store a newer node migrated: used as this node's version if
         * every migration past ours left it usable by ours (its floor),
         * never migrated (there is nothing to run) nor migrated back.
         * Why this is safe: each of those migrations only added what this
         * node's queries neither read nor call, and the functions it calls
         * are still there with the fencing it expects (the floor's
         * promise, kvpg_sql.c). */
        int compat = kvpg_sql_schema_check(pg->version, pg->compatible, why, sizeof why);
        if (compat < 0) {
                pgconn_fail(pg->pc, why);
                return;
        }
        if (compat > 0 && pg->beside_logged != pg->version) {
                log_msg(L_INFO, NULL, "store: the PostgreSQL schema is version %d, newer than this gadgetd's (%d), "
                        "which it may use (nodes of schema %d or later may): this node runs beside it as "
                        "version %d until it is upgraded", pg->version, ours, pg->compatible, ours);
                pg->beside_logged = pg->version;
        }
        if (pg->version >= ours) {
                char sql[400];
                snprintf(sql, sizeof sql, "COMMIT; INSERT INTO gadgetd_node (name) VALUES ('%s')"
                         " ON CONFLICT (name) DO UPDATE SET last_seen = now()", pg->node);
                setup_send(pg, sql, STEP_NODE);
                return;
        }
        const char *m = kvpg_sql_migration(pg->version + 1);
        size_t len = strlen(m) + 128;
        char *sql = malloc(len);
        if (!sql) {
                pgconn_fail(pg->pc, "out of memory");
                return;
        }
        int next = pg->version + 1;
        if (next >= KVPG_SCHEMA_COMPATIBLE)
                snprintf(sql, len, "%s;UPDATE gadgetd_schema SET version = %d, compatible = %d; COMMIT", m, next,
                         kvpg_sql_compatible(next));
        else
                snprintf(sql, len, "%s;UPDATE gadgetd_schema SET version = %d; COMMIT", m, next);
        setup_send(pg, sql, STEP_MIGRATE_APPLY);
        free(sql);
}

/* Prepares the next of the kv queries on this connection (parsed once,
 * not at each operation). */
static void prepare_next(struct kvpg *pg)
{
        pg->step = STEP_PREPARE;
        const char *name, *sql;
        kvpg_job_query(pg->types, pg->n_types, (size_t)pg->prepared, &name, &sql);
        query_begin(pg, PQsendPrepare(pgconn_pq(pg->pc), name, sql, 0, NULL), STORE_OP_OTHER);
}

/* The server's replication as read at connect: synchronous_standby_names
 * and the standbys streaming from it. Warned once while it lasts: without
 * a synchronous standby, what this node was told committed may be missing
 * on a standby promoted after the server's loss. */
#define ASYNC_WARNING(why)                                                                                             \
        "the store commits without a synchronous standby (synchronous_standby_names is empty) while " why              \
        ": a failover to a standby may lose the last writes and leases it acknowledged"
#define ASYNC_HOSTS ASYNC_WARNING("StoreConnection= names several hosts")
#define ASYNC_STANDBYS ASYNC_WARNING("standbys stream from it")
_Static_assert(sizeof ASYNC_HOSTS <= KVPG_WARNING_MAX && sizeof ASYNC_STANDBYS <= KVPG_WARNING_MAX,
               "the warning fits whole (it was cut at 200 bytes)");

static void replication_check(struct kvpg *pg)
{
        if (!pg->last || PQntuples(pg->last) != 1 || PQnfields(pg->last) != 2)
                return;
        const char *sync = PQgetvalue(pg->last, 0, 0);
        long standbys = strtol(PQgetvalue(pg->last, 0, 1), NULL, 10);
        bool async = !sync[0] && (pg->hosts || standbys > 0);
        pg->warning[0] = '\0';
        if (async)
                snprintf(pg->warning, sizeof pg->warning, "%s", pg->hosts ? ASYNC_HOSTS : ASYNC_STANDBYS);
        if (async && !pg->async_warned)
                log_msg(L_WARN, NULL, "store: PostgreSQL (%s): %s; set synchronous_standby_names on the primary",
                        pg->where, pg->warning);
        pg->async_warned = async;
        if (pg->lease)
                kvpg_lease_set_warning(pg->lease, pg->warning);
}

/* A setup query ended (without error). */
static void setup_next(struct kvpg *pg)
{
        switch (pg->step) {
        case STEP_SESSION: setup_send(pg, kvpg_sql_replication, STEP_REPLICATION); break;
        case STEP_REPLICATION:
                replication_check(pg);
                setup_send(pg, kvpg_sql_migrate_begin, STEP_MIGRATE_READ);
                break;
        case STEP_MIGRATE_READ:
                if (!pg->last || PQntuples(pg->last) != 1 || PQnfields(pg->last) != 2) {
                        pgconn_fail(pg->pc, "gadgetd_schema does not hold one row");
                        return;
                }
                pg->version = atoi(PQgetvalue(pg->last, 0, 0));
                pg->compatible = atoi(PQgetvalue(pg->last, 0, 1));
                setup_migrate(pg);
                break;
        case STEP_MIGRATE_APPLY:
                log_msg(L_INFO, NULL, "store: migrated the PostgreSQL schema to version %d", pg->version + 1);
                setup_send(pg, kvpg_sql_migrate_begin, STEP_MIGRATE_READ);
                break;
        case STEP_NODE:
                pg->prepared = 0;
                prepare_next(pg);
                break;
        case STEP_PREPARE:
                if ((size_t)++pg->prepared < kvpg_job_n_queries(pg->types, pg->n_types)) {
                        prepare_next(pg);
                        break;
                }
                pg->state = PG_READY;
                pg->backoff_ms = 0;
                pg->down_logged = false;
                log_msg(L_INFO, NULL, "store: connected to PostgreSQL (%s) as node %s, schema version %d",
                        pg->where, pg->node, pg->version < kvpg_sql_version() ? pg->version : kvpg_sql_version());
                send_next(pg);
                break;
        }
}

/* The server's error as a job's: a full disk, a read-only server, or
 * another storage error with the server's message. */
static void job_error(struct kvpg *pg, struct kv_job *job)
{
        char why[320];
        if (strcmp(pg->sqlstate, KVPG_SQLSTATE_FENCED) == 0) {
                snprintf(why, sizeof why, "%s", pg->err);
                answer(job, KV_EUNAVAILABLE, why);
        } else if (strcmp(pg->sqlstate, "53100") == 0) {
                answer(job, -ENOSPC, NULL);
        } else if (strcmp(pg->sqlstate, KVPG_SQLSTATE_READ_ONLY) == 0) {
                snprintf(why, sizeof why, "store unavailable: the server takes no writes (a standby?): %s", pg->err);
                answer(job, KV_EUNAVAILABLE, why);
        } else {
                snprintf(why, sizeof why, "storage error: %s", pg->err);
                answer(job, -EIO, why);
        }
}

/* The query that was out has ended (PQgetResult gave NULL). */
static void on_end(void *arg)
{
        struct kvpg *pg = arg;
        if (PQstatus(pgconn_pq(pg->pc)) == CONNECTION_BAD) {
                pgconn_fail(pg->pc, pg->err[0] ? pg->err : NULL);
                return;
        }
        if (pg->state == PG_SETUP) {
                if (pg->err[0])
                        pgconn_fail(pg->pc, pg->err);
                else
                        setup_next(pg);
                return;
        }
        struct kv_job *job = pg->running;
        pg->running = NULL;
        bool read_only = strcmp(pg->sqlstate, KVPG_SQLSTATE_READ_ONLY) == 0;
        if (job && pg->err[0])
                job_error(pg, job);
        else if (job && !pg->last)
                answer(job, -EIO, "storage error: the store answered no result");
        else if (job) {
                kvpg_job_result(job, pg->last);
                answer(job, job->err, NULL);
        }
        /* A standby (or a server set read-only): the queued jobs are not
         * sent to it; the next attempt looks for one that takes writes. */
        if (read_only) {
                pgconn_fail(pg->pc, "the server takes no writes (a standby?)");
                return;
        }
        send_next(pg);
}

/* Keeps the last tuples result and the first error of the query. */
static void on_result(void *arg, PGresult *r)
{
        struct kvpg *pg = arg;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK) {
                PQclear(pg->last);
                pg->last = r;
                return;
        }
        if ((st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR || st == PGRES_BAD_RESPONSE) &&
            !pg->err[0]) {
                const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                const char *msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
                pgconn_one_line(pg->err, sizeof pg->err, msg ? msg : PQresultErrorMessage(r));
                snprintf(pg->sqlstate, sizeof pg->sqlstate, "%s", state ? state : "");
        }
        PQclear(r);
}

static void send_next(struct kvpg *pg)
{
        if (pg->state != PG_READY || pgconn_busy(pg->pc) || kvpg_lanes_empty(&pg->queued))
                return;
        struct kv_job *job = kvpg_lanes_next(&pg->queued);
        pg->running = job;
        int sent = kvpg_job_send(pgconn_pq(pg->pc), job, pg->node, job->epoch);
        /* The store of the job's gadget may close before the answer. */
        if (sent)
                job->gadget = NULL;
        query_begin(pg, sent, job_op(job));
}

/* The connection failed or was lost (closed already; why on one line):
 * everything waiting is answered, and the next attempt is scheduled.
 * Logged once per change of state. */
static void on_lost(void *arg, const char *why)
{
        struct kvpg *pg = arg;
        snprintf(pg->reason, sizeof pg->reason, "%s", why);
        if (pg->state == PG_READY)
                log_msg(L_WARN, NULL, "store: lost the connection to PostgreSQL (%s): %s; reconnecting", pg->where,
                        pg->reason);
        else if (!pg->down_logged)
                log_msg(L_WARN, NULL, "store: cannot connect to PostgreSQL (%s): %s; retrying", pg->where,
                        pg->reason);
        pg->down_logged = true;
        PQclear(pg->last);
        pg->last = NULL;
        pg->state = PG_DOWN;
        fail_running(pg);
        fail_queued(pg);
        pg->backoff_ms = retry_next_ms(pg->backoff_ms, RECONNECT_MAX_MS);
        timer_arm_ms(pg->ev_timer, pg->backoff_ms);
}

/* The backoff is over: the next attempt. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
        struct kvpg *pg = arg;
        (void)fd;
        (void)what;
        connect_start(pg);
}

/* Whether conninfo parses; if not, err says why (libpq's reason, unless
 * the string holds a password the reason might quote). */
static int conninfo_check(const char *conninfo, char *err, size_t errlen)
{
        char *why = NULL;
        PQconninfoOption *o = PQconninfoParse(conninfo, &why);
        if (o) {
                PQconninfoFree(o);
                return 0;
        }
        char line[200];
        pgconn_one_line(line, sizeof line, why ? why : "out of memory");
        bool secret = strcasestr(conninfo, "password") || strchr(conninfo, '@');
        snprintf(err, errlen, "StoreConnection= is not a libpq connection string%s%s", secret ? "" : ": ",
                 secret ? "" : line);
        PQfreemem(why);
        return -EINVAL;
}

/* How many hosts conninfo names (host=a,b: libpq tries each in turn). */
static size_t conninfo_hosts(const char *conninfo)
{
        size_t n = 1;
        PQconninfoOption *o = PQconninfoParse(conninfo, NULL);
        for (PQconninfoOption *p = o; p && p->keyword; p++) {
                if ((strcmp(p->keyword, "host") != 0 && strcmp(p->keyword, "hostaddr") != 0) || !p->val)
                        continue;
                size_t k = 1;
                for (const char *c = p->val; *c; c++)
                        k += *c == ',';
                if (k > n)
                        n = k;
        }
        PQconninfoFree(o);
        return n;
}

int kvpg_new(struct event_base *base, const char *conninfo, const char *node, const struct kv_type *const *types,
             size_t n, struct store_latency *latency, struct kvpg **out, char *err, size_t errlen)
{
        if (n < 1 || n > KV_TYPES_MAX) {
                snprintf(err, errlen, "%zu types of binding on the store, not 1 to %d", n, KV_TYPES_MAX);
                return -EINVAL;
        }
        if (!kvpg_job_types_ok(types, n, err, errlen))
                return -EINVAL;
        int e = pq_dl_load(err, errlen);
        if (e < 0 || (e = conninfo_check(conninfo, err, errlen)) < 0)
                return e;
        struct kvpg *pg = calloc(1, sizeof *pg);
        struct pgconn_ops ops = { .connected = on_connected, .result = on_result, .end = on_end, .lost = on_lost,
                                  .arg = pg, .connect_timeout_ms = CONNECT_TIMEOUT_S * 1000,
                                  .query_timeout_ms = QUERY_TIMEOUT_S * 1000, .latency = latency };
        if (!pg || !(pg->node = strdup(node)) ||
            !(pg->ev_timer = evtimer_new(base, on_timer, pg)) || pgconn_new(base, conninfo, &ops, &pg->pc) < 0) {
                snprintf(err, errlen, "out of memory");
                kvpg_free(pg);
                return -ENOMEM;
        }
        pg->be.ops = &kvpg_ops;
        pg->base = base;
        memcpy(pg->types, types, n * sizeof *types);
        pg->n_types = n;
        kvpg_lanes_init(&pg->queued);
        kvpg_redact(conninfo, pg->where, sizeof pg->where);
        pg->hosts = conninfo_hosts(conninfo) > 1;
        connect_start(pg);
        *out = pg;
        return 0;
}

static void kvpg_free(struct kvpg *pg)
{
        if (!pg)
                return;
        if (pg->lease)
                kvpg_lease_on_connect(pg->lease, NULL, NULL);
        pgconn_free(pg->pc);
        if (pg->ev_timer)
                event_free(pg->ev_timer);
        PQclear(pg->last);
        snprintf(pg->reason, sizeof pg->reason, "gadgetd is stopping");
        if (pg->running)
                answer(pg->running, -ECANCELED, NULL);
        answer_all(kvpg_lanes_take(&pg->queued, NULL), -ECANCELED, NULL);
        free(pg->node);
        free(pg);
}

/* Whether type's queries are prepared on pg's connections. */
static bool has_type(const struct kvpg *pg, const struct kv_type *type)
{
        for (size_t t = 0; t < pg->n_types; t++)
                if (pg->types[t] == type)
                        return true;
        return false;
}

static int queue_submit(struct kv_queue *q, struct kv_job *job)
{
        struct kvpg *pg = ((struct kvpg_queue *)q)->pg;
        if (!has_type(pg, job->type)) {
                snprintf(job->why, sizeof job->why, "storage error: the store does not hold %s bindings",
                         job->type->name);
                return -EINVAL;
        }
        /* Why a caller never waits on a store that is down: between
         * attempts operations fail at once; during an attempt they wait at
         * most its CONNECT_TIMEOUT_S, and a query at most QUERY_TIMEOUT_S. */
        if (pg->state == PG_DOWN) {
                snprintf(job->why, sizeof job->why, "store unavailable: %s", pg->reason);
                return KV_EUNAVAILABLE;
        }
        /* Why a node writes only for the gadgets it owns: each write
         * carries the epoch of the gadget's lease as it was when the write
         * was queued, which the store checks in the write's transaction (a
         * write queued before a loss of the lease is refused even if this
         * node takes it again meanwhile); without a lease nothing is sent. */
        bool write = job->op->writes;
        job->epoch = pg->lease && write ? kvpg_lease_epoch(pg->lease, job->gadget) : 0;
        if (pg->lease && write && !job->epoch) {
                snprintf(job->why, sizeof job->why, "fenced: this node no longer owns gadget %s", job->gadget);
                return KV_EUNAVAILABLE;
        }
        int e = kvpg_lanes_put(&pg->queued, job);
        if (e < 0) {
                snprintf(job->why, sizeof job->why, "out of memory");
                return e;
        }
        send_next(pg);
        return 0;
}

/* The store of the queue's owner closes: its queued jobs are answered
 * cancelled now; its running one is answered cancelled now by a stand-in
 * and dropped when its query ends. */
static void queue_close(struct kv_queue *q)
{
        struct kvpg_queue *kq = (struct kvpg_queue *)q;
        struct kvpg *pg = kq->pg;
        struct kv_job *gone = kvpg_lanes_take(&pg->queued, kq->owner);
        struct kv_job *run = pg->running;
        if (run && run->kv == kq->owner && run->done) {
                struct kv_job stand_in = kv_job_stand_in(run);
                run->done = NULL;
                stand_in.done(&stand_in);
        }
        answer_all(gone, -ECANCELED, NULL);
        free(kq);
}

static int queue_open(struct kv_backend *be, const struct kv *kv, const char *gadget, struct kv_queue **out)
{
        struct kvpg_queue *kq = calloc(1, sizeof *kq);
        (void)gadget;
        if (!kq)
                return -ENOMEM;
        *kq = (struct kvpg_queue){ .q.ops = be->ops, .pg = (struct kvpg *)be, .owner = kv };
        *out = &kq->q;
        return 0;
}

static void backend_free(struct kv_backend *be)
{
        kvpg_free((struct kvpg *)be);
}

static const struct kv_backend_ops kvpg_ops = {
        .open = queue_open, .submit = queue_submit, .close = queue_close, .free = backend_free,
};

struct kv_backend *kvpg_backend(struct kvpg *pg)
{
        return &pg->be;
}

/* The lease session connected: the server is reachable again, so a kv
 * connection waiting out its backoff tries now (after gadgetd's re-exec
 * or an outage both come back together, not the kv one seconds later).
 * And it is server: a kv connection to another one is to a server that
 * was the store before a failover (the lease session, whose queries time
 * out in 2 s, found the new one first), which may not answer for its 10 s
 * query timeout (a host gone silent): it goes now, its write in flight
 * answered "outcome unknown" (the old server may have committed it). */
static void lease_connected(void *arg, const char *server)
{
        struct kvpg *pg = arg;
        if (pg->audit)
                kvpg_audit_follow(pg->audit, server);
        if (pg->state == PG_READY || pg->state == PG_SETUP) {
                char mine[300];
                pgconn_server(pg->pc, mine, sizeof mine);
                if (server[0] && mine[0] && strcmp(server, mine) != 0) {
                        char why[700];
                        snprintf(why, sizeof why, "the lease session found the store at %s, not at %s (a failover)",
                                 server, mine);
                        pgconn_fail(pg->pc, why);
                }
                return;
        }
        if (pg->state != PG_DOWN || !evtimer_pending(pg->ev_timer, NULL))
                return;
        event_del(pg->ev_timer);
        connect_start(pg);
}

void kvpg_set_audit(struct kvpg *pg, struct kvpg_audit *au)
{
        pg->audit = au;
}

void kvpg_set_lease(struct kvpg *pg, struct kvpg_lease *lease)
{
        pg->lease = lease;
        if (lease)
                kvpg_lease_on_connect(lease, lease_connected, pg);
}
