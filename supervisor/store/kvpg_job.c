/* kvpg_job: jobs as PostgreSQL queries and their results, by type; the
 * kv operations' own queries, parameters and results. */
#include "kvpg_job.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_job.h"
#include "kvdb.h"
#include "system/pq_dl.h"
#include "wire.h"

KV_TYPE_HALVES(kv);

void kvpg_int8_be(uint64_t v, char out[8])
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                out[i] = (char)(v & 0xff);
}

void kvpg_quota_param(uint64_t v, char out[8])
{
        kvpg_int8_be(v > INT64_MAX ? (uint64_t)INT64_MAX : v, out);
}

void kvpg_param_text(struct kvpg_params *p, const char *s)
{
        p->v[p->n] = s;
        p->l[p->n] = 0;
        p->f[p->n++] = 0;
}

void kvpg_param_bin(struct kvpg_params *p, const void *b, size_t len)
{
        p->v[p->n] = b;
        p->l[p->n] = (int)len;
        p->f[p->n++] = 1;
}

int kvpg_scalar(const PGresult *res, int64_t *out)
{
        if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
                return -EIO;
        const uint8_t *p = (const uint8_t *)PQgetvalue(res, 0, 0);
        int len = PQgetlength(res, 0, 0);
        if (len == 1)
                *out = p[0];
        else if (len == 4)
                *out = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        else
                return -EIO;
        return 0;
}

int64_t kvpg_be(const char *p, int n)
{
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
                v = v << 8 | (uint8_t)p[i];
        return n == 4 ? (int32_t)v : (int64_t)v;
}

bool kvpg_job_types_ok(const struct kv_type *const *types, size_t n, char *why, size_t len)
{
        for (size_t t = 0; t < n; t++)
                if (!kv_type_covered(types[t], "PostgreSQL", types[t]->pg->ops, types[t]->pg->n_ops, why, len))
                        return false;
        return true;
}

size_t kvpg_job_n_queries(const struct kv_type *const *types, size_t n)
{
        size_t q = 0;
        for (size_t t = 0; t < n; t++)
                q += types[t]->pg->n_queries;
        return q;
}

void kvpg_job_query(const struct kv_type *const *types, size_t n, size_t i, const char **name, const char **sql)
{
        size_t t = 0;
        while (t + 1 < n && i >= types[t]->pg->n_queries)
                i -= types[t++]->pg->n_queries;
        *name = types[t]->pg->names[i];
        *sql = types[t]->pg->queries[i];
}

int kvpg_job_send(PGconn *c, const struct kv_job *job, const char *node, int64_t epoch)
{
        const struct kvpg_type *t = job->type->pg;
        int op = kv_op_find(t->ops, t->n_ops, job->op->name);
        struct kvpg_params p = { .n = 0 };
        if (op < 0)
                return 0;
        kvpg_int8_be((uint64_t)epoch, p.ep);
        kvpg_param_text(&p, job->gadget);
        kvpg_param_text(&p, job->binding);
        int q = t->params(&p, job, op, node);
        return PQsendQueryPrepared(c, t->names[q], p.n, p.v, p.l, p.f, 1);
}

void kvpg_job_result(struct kv_job *job, const PGresult *res)
{
        const struct kvpg_type *t = job->type->pg;
        int op = kv_op_find(t->ops, t->n_ops, job->op->name);
        int e = op < 0 ? -EIO : t->result(job, res, op);
        if (e == -EIO)
                snprintf(job->why, sizeof job->why, "storage error: the store answered an unexpected result");
        job->err = e;
}

/* The kv operations. */

enum { Q_GET, Q_PUT, Q_DELETE, Q_LIST_GE, Q_LIST_GT, Q_BATCH, Q_COUNT };

/* The largest value a read brings back, as SQL text: a frame's (no node
 * writes a larger value: MaxValueSize= is below it). The store is shared
 * with other nodes, which can write any row: a larger one comes back as
 * NULL and its length, never its bytes (libpq holds a whole result). */
#define STORED_MAX "2097152"
_Static_assert(WIRE_MAX_FRAME == 2097152, "STORED_MAX is WIRE_MAX_FRAME");
#define BOUNDED(col) "CASE WHEN octet_length(" col ") <= " STORED_MAX " THEN " col " END, octet_length(" col ")"

#define FROM_NS "FROM gadgetd_kv v JOIN gadgetd_kv_ns n ON n.id = v.ns WHERE n.gadget = $1 AND n.binding = $2 "

/* Parameters: $1 gadget, $2 binding (text); $3 key or list start (bytea);
 * put: $4 value, $5 max keys, $6 max bytes, $7 node, $8 the writer's epoch;
 * delete: $4 the writer's epoch; list: $4 the end of the prefix's range
 * (bytea), $5 limit + 1; cas, batch: $3 the operations (kv_job_add_op's
 * bytes), $4 max keys, $5 max bytes, $6 node, $7 the writer's epoch. */
static const char *const queries[Q_COUNT] = {
        [Q_GET] = "SELECT " BOUNDED("v.value") " " FROM_NS "AND v.key = $3",
        [Q_PUT] = "SELECT gadgetd_kv_put($1, $2, $3, $4, $5, $6, $7, $8)",
        [Q_DELETE] = "SELECT gadgetd_kv_delete($1, $2, $3, $4)",
        [Q_LIST_GE] = "SELECT v.key " FROM_NS "AND v.key >= $3 AND v.key < $4 ORDER BY v.key LIMIT $5",
        [Q_LIST_GT] = "SELECT v.key " FROM_NS "AND v.key > $3 AND v.key < $4 ORDER BY v.key LIMIT $5",
        [Q_BATCH] = "SELECT failed, why, existed, " BOUNDED("cur") " FROM gadgetd_kv_batch($1, $2, $3, $4, $5, $6, $7)",
};

static const char *const names[Q_COUNT] = {
        [Q_GET] = "gadgetd_get", [Q_PUT] = "gadgetd_put", [Q_DELETE] = "gadgetd_delete",
        [Q_LIST_GE] = "gadgetd_list_ge", [Q_LIST_GT] = "gadgetd_list_gt", [Q_BATCH] = "gadgetd_batch",
};

/* A list's parameters after $1 gadget, $2 binding: from the prefix or
 * the cursor, the range's end, the limit. */
static int list_params(struct kvpg_params *p, const struct kv_job *job)
{
        /* Why a list reads a bounded range: [start, end) of the primary
         * key, end being the prefix's successor or, without one, past
         * every key (KV_MAX_KEY + 1 bytes of 0xff). */
        size_t elen = kvdb_prefix_end(job->key, job->klen, p->end);
        if (elen == 0)
                memset(p->end, 0xff, elen = KV_MAX_KEY + 1);
        /* After the cursor when it lies within the range, else from
         * the prefix itself (as kvdb_list). */
        size_t n_cmp = job->alen < job->klen ? job->alen : job->klen;
        int cmp = memcmp(job->after, job->key, n_cmp);
        bool from_cursor = job->alen > 0 && (cmp > 0 || (cmp == 0 && job->alen >= job->klen));
        if (from_cursor)
                kvpg_param_bin(p, job->after, job->alen);
        else
                kvpg_param_bin(p, job->key, job->klen);
        snprintf(p->texts[0], 24, "%u", job->limit + 1);
        kvpg_param_bin(p, p->end, elen);
        kvpg_param_text(p, p->texts[0]);
        return from_cursor ? Q_LIST_GT : Q_LIST_GE;
}

/* The operations it carries out, by their names (bind_kv.c's kv_type). */
enum { OP_GET, OP_PUT, OP_DELETE, OP_LIST, OP_CAS, OP_BATCH, OP_COUNT };
static const char *const ops[OP_COUNT] = {
        [OP_GET] = "get", [OP_PUT] = "put", [OP_DELETE] = "delete", [OP_LIST] = "list",
        [OP_CAS] = "cas", [OP_BATCH] = "batch",
};

static int kv_params(struct kvpg_params *p, const struct kv_job *job, int op, const char *node)
{
        switch (op) {
        case OP_GET:
                kvpg_param_bin(p, job->key, job->klen);
                return Q_GET;
        case OP_DELETE:
                kvpg_param_bin(p, job->key, job->klen);
                kvpg_param_bin(p, p->ep, 8);
                return Q_DELETE;
        case OP_PUT:
        case OP_CAS:
        case OP_BATCH:
                /* A put's key, then what a write carries: the value (a
                 * batch's: its packed operations), the quota, the node and
                 * the epoch. */
                kvpg_quota_param(job->quota.max_keys, p->texts[0]);
                kvpg_quota_param(job->quota.max_bytes, p->texts[1]);
                if (op == OP_PUT)
                        kvpg_param_bin(p, job->key, job->klen);
                kvpg_param_bin(p, job->val ? job->val : "", job->vlen);
                kvpg_param_bin(p, p->texts[0], 8);
                kvpg_param_bin(p, p->texts[1], 8);
                kvpg_param_text(p, node);
                kvpg_param_bin(p, p->ep, 8);
                return op == OP_PUT ? Q_PUT : Q_BATCH;
        default: return list_params(p, job);
        }
}

/* A stored value's BOUNDED columns in row 0 from col: 0, or -EFBIG
 * saying so when it is larger than any node writes. */
static int stored_size_ok(struct kv_job *job, const PGresult *res, int col)
{
        if (!PQgetisnull(res, 0, col) || PQgetlength(res, 0, col + 1) != 4)
                return 0;
        snprintf(job->why, sizeof job->why, "the stored value is not a valid value (%lld bytes, more than the "
                 STORED_MAX " a value can have)", (long long)kvpg_be(PQgetvalue(res, 0, col + 1), 4));
        return -EFBIG;
}

static int get_result(struct kv_job *job, const PGresult *res)
{
        if (PQntuples(res) < 1)
                return -ENOENT;
        if (PQntuples(res) != 1 || PQnfields(res) != 2)
                return -EIO;
        int e = stored_size_ok(job, res, 0);
        if (e < 0)
                return e;
        size_t n = (size_t)PQgetlength(res, 0, 0);
        void *copy = malloc(n ? n : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, PQgetvalue(res, 0, 0), n);
        job->val = copy;
        job->vlen = n;
        return 0;
}

static int list_result(struct kv_job *job, const PGresult *res)
{
        int rows = PQntuples(res);
        job->more = (unsigned)rows > job->limit;
        for (int i = 0; i < rows && (unsigned)i < job->limit && !job->err; i++) {
                /* The schema's CHECK, again: a key's length is kept in
                 * two bytes (kv_job_add_key). */
                size_t n = (size_t)PQgetlength(res, i, 0);
                if (n < 1 || n > KV_MAX_KEY)
                        return -EIO;
                kv_job_add_key(job, PQgetvalue(res, i, 0), n);
        }
        return job->err;
}

/* gadgetd_kv_batch's one row (failed, why, existed, cur), kvdb_kv.c's
 * outcome: a cas that did not match leaves its key's stored value in
 * job->val; a write past the quota is -EDQUOT; either names its op. */
static int batch_result(struct kv_job *job, const PGresult *res)
{
        if (PQntuples(res) != 1 || PQnfields(res) != 5 || PQgetlength(res, 0, 0) != 4 ||
            PQgetlength(res, 0, 1) != 4 || PQgetlength(res, 0, 2) != 8)
                return -EIO;
        int64_t failed = kvpg_be(PQgetvalue(res, 0, 0), 4), why = kvpg_be(PQgetvalue(res, 0, 1), 4);
        if (failed < -1 || failed >= KV_BATCH_MAX || why < 0 || why > 2 || (failed < 0) != (why == 0))
                return -EIO;
        job->failed = (int)failed;
        job->existed_ops = why == 0 ? (uint64_t)kvpg_be(PQgetvalue(res, 0, 2), 8) : 0;
        if (why == 2)
                return -EDQUOT;
        if (why == 1) {
                int e = stored_size_ok(job, res, 3);
                if (e < 0)
                        return e;
                size_t n = PQgetisnull(res, 0, 3) ? 0 : (size_t)PQgetlength(res, 0, 3);
                void *copy = malloc(n ? n : 1);
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, PQgetvalue(res, 0, 3), n);
                free(job->val);
                job->val = copy;
                job->vlen = n;
                job->existed = !PQgetisnull(res, 0, 3);
        }
        return 0;
}

static int kv_result(struct kv_job *job, const PGresult *res, int op)
{
        int64_t v = 0;
        int e;
        switch (op) {
        case OP_GET: return get_result(job, res);
        case OP_PUT:
                if ((e = kvpg_scalar(res, &v)) == 0 && v != 0)
                        e = -EDQUOT;
                return e;
        case OP_DELETE:
                if ((e = kvpg_scalar(res, &v)) == 0)
                        job->existed = v != 0;
                return e;
        case OP_CAS:
        case OP_BATCH: return batch_result(job, res);
        default: return list_result(job, res);
        }
}

const struct kvpg_type kvpg_kv_type = { .queries = queries, .names = names, .n_queries = Q_COUNT, .ops = ops,
                                        .n_ops = OP_COUNT, .params = kv_params, .result = kv_result };
