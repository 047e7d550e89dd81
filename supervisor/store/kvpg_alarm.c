/* kvpg_alarm: the alarm operations as PostgreSQL queries on gadgetd_alarm
 * (made by kvpg_sql.c's migration 5), their parameters and results. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "kv_job.h"
#include "kvpg_job.h"
#include "system/pq_dl.h"
#include "wire.h"

enum { Q_SET, Q_CANCEL, Q_LIST, Q_NEXT, Q_SETTLE, Q_COUNT };

/* Parameters: $1 gadget, $2 binding (text), $3 the id; set: $4 at, $5
 * payload, $6 MaxAlarms, $7 epoch; cancel: $4 epoch; list: $3 the cursor,
 * $4 limit + 1; next: $1, $2 only; settle: $4 at, $5 due, $6 payload, $7
 * retry, $8 epoch. */
/* An alarm's row, its id and payload only if within what any node
 * writes (KV_MAX_KEY, a frame): the store is shared with other nodes,
 * which can write any row, and libpq holds a whole result; a larger one
 * comes back as NULLs, which alarm_row refuses. */
#define ROW_FITS "octet_length(id) <= 512 AND octet_length(payload) <= 2097152"
_Static_assert(KV_MAX_KEY == 512 && WIRE_MAX_FRAME == 2097152, "ROW_FITS's numbers");
#define ROW_COLS "CASE WHEN " ROW_FITS " THEN id END, at, due, attempts, CASE WHEN " ROW_FITS " THEN payload END"

static const char *const queries[Q_COUNT] = {
        [Q_SET] = "SELECT gadgetd_alarm_set($1, $2, $3, $4, $5, $6, $7)",
        [Q_CANCEL] = "SELECT gadgetd_alarm_cancel($1, $2, $3, $4)",
        [Q_LIST] = "SELECT " ROW_COLS " FROM gadgetd_alarm WHERE gadget = $1"
                   " AND binding = $2 AND id > $3 ORDER BY id LIMIT $4",
        [Q_NEXT] = "SELECT " ROW_COLS " FROM gadgetd_alarm WHERE gadget = $1"
                   " AND binding = $2 ORDER BY due, id LIMIT 1",
        [Q_SETTLE] = "SELECT gadgetd_alarm_settle($1, $2, $3, $4, $5, $6, $7, $8)",
};

static const char *const names[Q_COUNT] = {
        [Q_SET] = "gadgetd_alarm_set", [Q_CANCEL] = "gadgetd_alarm_cancel", [Q_LIST] = "gadgetd_alarm_list",
        [Q_NEXT] = "gadgetd_alarm_next", [Q_SETTLE] = "gadgetd_alarm_settle",
};

static void set_params(struct kvpg_params *p, const struct kv_job *job)
{
        snprintf(p->texts[0], 24, "%" PRId64, job->at);
        kvpg_quota_param(job->quota.max_keys, p->texts[1]);
        kvpg_param_bin(p, job->key, job->klen);
        kvpg_param_text(p, p->texts[0]);
        kvpg_param_bin(p, job->val ? job->val : "", job->vlen);
        kvpg_param_bin(p, p->texts[1], 8);
        kvpg_param_bin(p, p->ep, 8);
}

static void settle_params(struct kvpg_params *p, const struct kv_job *job)
{
        snprintf(p->texts[0], 24, "%" PRId64, job->at);
        snprintf(p->texts[1], 24, "%" PRId64, job->due);
        snprintf(p->texts[2], 24, "%" PRId64, job->retry_due);
        kvpg_param_bin(p, job->key, job->klen);
        kvpg_param_text(p, p->texts[0]);
        kvpg_param_text(p, p->texts[1]);
        kvpg_param_bin(p, job->val ? job->val : "", job->vlen);
        kvpg_param_text(p, p->texts[2]);
        kvpg_param_bin(p, p->ep, 8);
}

/* The operations it carries out, by their names (bind_alarm.c's kv_type). */
enum { OP_SET, OP_CANCEL, OP_LIST, OP_NEXT, OP_SETTLE, OP_COUNT };
static const char *const ops[OP_COUNT] = {
        [OP_SET] = "alarm set", [OP_CANCEL] = "alarm cancel", [OP_LIST] = "alarm list",
        [OP_NEXT] = "alarm look-up", [OP_SETTLE] = "alarm delivery's record",
};

static int params(struct kvpg_params *p, const struct kv_job *job, int op, const char *node)
{
        (void)node;
        switch (op) {
        case OP_SET: set_params(p, job); return Q_SET;
        case OP_CANCEL:
                kvpg_param_bin(p, job->key, job->klen);
                kvpg_param_bin(p, p->ep, 8);
                return Q_CANCEL;
        case OP_LIST:
                snprintf(p->texts[0], 24, "%u", job->limit + 1);
                kvpg_param_bin(p, job->after, job->alen);
                kvpg_param_text(p, p->texts[0]);
                return Q_LIST;
        case OP_NEXT: return Q_NEXT;
        default: settle_params(p, job); return Q_SETTLE;
        }
}

/* Row i of an alarm query (id, at, due, attempts, payload); false if the
 * store answered another shape. */
static bool alarm_row(const PGresult *res, int i, struct kv_row *a)
{
        if (PQnfields(res) != 5 || PQgetisnull(res, i, 0) || PQgetisnull(res, i, 4) ||
            PQgetlength(res, i, 1) != 8 || PQgetlength(res, i, 2) != 8 || PQgetlength(res, i, 3) != 4)
                return false;
        *a = (struct kv_row){
                .id = PQgetvalue(res, i, 0), .idlen = (size_t)PQgetlength(res, i, 0),
                .at = kvpg_be(PQgetvalue(res, i, 1), 8), .due = kvpg_be(PQgetvalue(res, i, 2), 8),
                .attempts = (unsigned)kvpg_be(PQgetvalue(res, i, 3), 4),
                .payload = PQgetvalue(res, i, 4), .plen = (size_t)PQgetlength(res, i, 4),
        };
        return a->idlen <= KV_MAX_KEY;
}

static int list_result(struct kv_job *job, const PGresult *res)
{
        struct kv_row a;
        int rows = PQntuples(res);
        for (int i = 0; i < rows && (unsigned)i < job->limit && !job->err; i++) {
                if (!alarm_row(res, i, &a))
                        return -EIO;
                kv_job_add_row(job, &a);
        }
        job->more = job->more || (unsigned)rows > job->limit;
        return job->err;
}

static int next_result(struct kv_job *job, const PGresult *res)
{
        struct kv_row a;
        if (PQntuples(res) < 1)
                return -ENOENT;
        if (!alarm_row(res, 0, &a))
                return -EIO;
        kv_job_take_row(job, &a);
        return job->err;
}

static int result(struct kv_job *job, const PGresult *res, int op)
{
        int64_t v = 0;
        int e;
        switch (op) {
        case OP_SET:
                if ((e = kvpg_scalar(res, &v)) == 0 && v != 0)
                        e = -EDQUOT;
                return e;
        case OP_CANCEL:
                if ((e = kvpg_scalar(res, &v)) == 0)
                        job->existed = v != 0;
                return e;
        case OP_LIST: return list_result(job, res);
        case OP_NEXT: return next_result(job, res);
        default: return kvpg_scalar(res, &v);
        }
}

KV_TYPE_HALVES(alarm);

const struct kvpg_type kvpg_alarm_type = { .queries = queries, .names = names, .n_queries = Q_COUNT, .ops = ops,
                                           .n_ops = OP_COUNT, .params = params, .result = result };
