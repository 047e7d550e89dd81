/* kvpg_job: kv operations as PostgreSQL queries and their results. */
#include "kvpg_job.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_job.h"
#include "kvpg_sql.h"
#include "system/pq_dl.h"

/* v as a binary bigint parameter (8 bytes, most significant first):
 * neither side formats or parses a number. */
static void int8_be(uint64_t v, char out[8])
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                out[i] = (char)(v & 0xff);
}

/* A quota as a bigint parameter: "no limit" is the largest bigint. */
static void quota_param(uint64_t v, char out[8])
{
        int8_be(v > INT64_MAX ? (uint64_t)INT64_MAX : v, out);
}

/* An alarm job's query: its parameters after $1 gadget, $2 binding (ep:
 * the epoch as a binary bigint). */
static int alarm_send(PGconn *c, const struct kv_job *job, const char *ep)
{
        char at[24], due[24], n[24], retry[24];
        const char *v[8] = { job->gadget, job->binding, (const char *)job->key };
        int l[8] = { 0, 0, (int)job->klen }, f[8] = { 0, 0, 1 }, np = 3;
        enum kvpg_query q = KVPG_ALARM_NEXT;
        snprintf(at, sizeof at, "%" PRId64, job->at);
        snprintf(due, sizeof due, "%" PRId64, job->due);
        snprintf(retry, sizeof retry, "%" PRId64, job->retry_due);

        switch (job->op) {
        case KV_ALARM_SET:
                q = KVPG_ALARM_SET;
                quota_param(job->quota.max_keys, n);
                v[3] = at;
                v[4] = job->val ? job->val : "";
                l[4] = (int)job->vlen;
                f[4] = 1;
                v[5] = n;
                v[6] = ep;
                l[5] = l[6] = 8;
                f[5] = f[6] = 1;
                np = 7;
                break;
        case KV_ALARM_CANCEL:
                q = KVPG_ALARM_CANCEL;
                v[3] = ep;
                l[3] = 8;
                f[3] = 1;
                np = 4;
                break;
        case KV_ALARM_LIST:
                q = KVPG_ALARM_LIST;
                v[2] = (const char *)job->after;
                l[2] = (int)job->alen;
                snprintf(n, sizeof n, "%u", job->limit + 1);
                v[3] = n;
                np = 4;
                break;
        case KV_ALARM_SETTLE:
                q = KVPG_ALARM_SETTLE;
                v[3] = at;
                v[4] = due;
                v[5] = job->val ? job->val : "";
                l[5] = (int)job->vlen;
                f[5] = 1;
                v[6] = retry;
                v[7] = ep;
                l[7] = 8;
                f[7] = 1;
                np = 8;
                break;
        default:
                np = 2;
                break;
        }
        return PQsendQueryPrepared(c, kvpg_query_names[q], np, v, l, f, 1);
}

int kvpg_job_send(PGconn *c, const struct kv_job *job, const char *node, int64_t epoch)
{
        /* Why a list reads a bounded range: [start, end) of the primary
         * key, end being the prefix's successor or, without one, past
         * every key (KV_MAX_KEY + 1 bytes of 0xff). */
        uint8_t end[KV_MAX_KEY + 1];
        char n1[24], n2[24], ep[8];
        const char *v[8] = { job->gadget, job->binding, (const char *)job->key };
        int l[8] = { 0, 0, (int)job->klen }, f[8] = { 0, 0, 1 }, n = 3;
        int8_be((uint64_t)epoch, ep);
        enum kvpg_query q = KVPG_GET;
        if (job->op >= KV_ALARM_SET)
                return alarm_send(c, job, ep);

        switch (job->op) {
        case KV_GET: q = KVPG_GET; break;
        case KV_DELETE:
                q = KVPG_DELETE;
                v[3] = ep;
                l[3] = 8;
                f[3] = 1;
                n = 4;
                break;
        case KV_PUT:
                q = KVPG_PUT;
                quota_param(job->quota.max_keys, n1);
                quota_param(job->quota.max_bytes, n2);
                v[3] = job->val ? job->val : "";
                l[3] = (int)job->vlen;
                v[4] = n1;
                v[5] = n2;
                v[6] = node;
                v[7] = ep;
                l[4] = l[5] = l[7] = 8;
                f[3] = f[4] = f[5] = f[7] = 1;
                n = 8;
                break;
        case KV_LIST: {
                size_t elen = kvdb_prefix_end(job->key, job->klen, end);
                if (elen == 0)
                        memset(end, 0xff, elen = sizeof end);
                /* After the cursor when it lies within the range, else from
                 * the prefix itself (as kvdb_list). */
                size_t n_cmp = job->alen < job->klen ? job->alen : job->klen;
                int cmp = memcmp(job->after, job->key, n_cmp);
                bool from_cursor = job->alen > 0 && (cmp > 0 || (cmp == 0 && job->alen >= job->klen));
                q = from_cursor ? KVPG_LIST_GT : KVPG_LIST_GE;
                if (from_cursor) {
                        v[2] = (const char *)job->after;
                        l[2] = (int)job->alen;
                }
                snprintf(n1, sizeof n1, "%u", job->limit + 1);
                v[3] = (const char *)end;
                l[3] = (int)elen;
                f[3] = 1;
                v[4] = n1;
                n = 5;
                break;
        }
        default: break;
        }
        return PQsendQueryPrepared(c, kvpg_query_names[q], n, v, l, f, 1);
}

static int get_result(struct kv_job *job, const PGresult *res)
{
        if (PQntuples(res) < 1)
                return -ENOENT;
        size_t n = (size_t)PQgetlength(res, 0, 0);
        void *copy = malloc(n ? n : 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, PQgetvalue(res, 0, 0), n);
        job->val = copy;
        job->vlen = n;
        return 0;
}

/* The one int4 (put) or bool (delete) a write function returned. */
static int scalar(const PGresult *res, int64_t *out)
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

static int list_result(struct kv_job *job, const PGresult *res)
{
        int rows = PQntuples(res);
        job->more = (unsigned)rows > job->limit;
        for (int i = 0; i < rows && (unsigned)i < job->limit && !job->err; i++)
                kv_job_add_key(job, PQgetvalue(res, i, 0), (size_t)PQgetlength(res, i, 0));
        return job->err;
}

/* A big-endian integer of n bytes (int4, int8 in binary). */
static int64_t be(const char *p, int n)
{
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
                v = v << 8 | (uint8_t)p[i];
        return n == 4 ? (int32_t)v : (int64_t)v;
}

/* Row i of an alarm query (id, at, due, attempts, payload); false if the
 * store answered another shape. */
static bool alarm_row(const PGresult *res, int i, struct kvdb_alarm *a)
{
        if (PQnfields(res) != 5 || PQgetlength(res, i, 1) != 8 || PQgetlength(res, i, 2) != 8 ||
            PQgetlength(res, i, 3) != 4)
                return false;
        *a = (struct kvdb_alarm){
                .id = PQgetvalue(res, i, 0), .idlen = (size_t)PQgetlength(res, i, 0),
                .at = be(PQgetvalue(res, i, 1), 8), .due = be(PQgetvalue(res, i, 2), 8),
                .attempts = (unsigned)be(PQgetvalue(res, i, 3), 4),
                .payload = PQgetvalue(res, i, 4), .plen = (size_t)PQgetlength(res, i, 4),
        };
        return a->idlen <= KV_MAX_KEY;
}

static int alarm_result(struct kv_job *job, const PGresult *res)
{
        struct kvdb_alarm a;
        int64_t v = 0;
        int e = 0, rows = PQntuples(res);
        switch (job->op) {
        case KV_ALARM_SET:
                if ((e = scalar(res, &v)) == 0 && v != 0)
                        e = -EDQUOT;
                return e;
        case KV_ALARM_CANCEL:
                if ((e = scalar(res, &v)) == 0)
                        job->existed = v != 0;
                return e;
        case KV_ALARM_SETTLE: return scalar(res, &v);
        case KV_ALARM_LIST:
                for (int i = 0; i < rows && (unsigned)i < job->limit && !job->err; i++) {
                        if (!alarm_row(res, i, &a))
                                return -EIO;
                        kv_job_add_alarm(job, &a);
                }
                job->more = job->more || (unsigned)rows > job->limit;
                return job->err;
        case KV_ALARM_NEXT:
                if (rows < 1)
                        return -ENOENT;
                if (!alarm_row(res, 0, &a))
                        return -EIO;
                kv_job_take_alarm(job, &a);
                return job->err;
        default: return -EIO;
        }
}

void kvpg_job_result(struct kv_job *job, const PGresult *res)
{
        int64_t v = 0;
        int e = 0;
        switch (job->op) {
        case KV_GET: e = get_result(job, res); break;
        case KV_PUT:
                if ((e = scalar(res, &v)) == 0 && v != 0)
                        e = -EDQUOT;
                break;
        case KV_DELETE:
                if ((e = scalar(res, &v)) == 0)
                        job->existed = v != 0;
                break;
        case KV_LIST: e = list_result(job, res); break;
        default: e = alarm_result(job, res); break;
        }
        if (e == -EIO)
                snprintf(job->why, sizeof job->why, "storage error: the store answered an unexpected result");
        job->err = e;
}
