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

/* A query's parameters, added in order: text, or binary of a length. */
struct params {
        const char *v[8];
        int l[8], f[8], n;
};

static void text(struct params *p, const char *s)
{
        p->v[p->n] = s;
        p->l[p->n] = 0;
        p->f[p->n++] = 0;
}

static void bin(struct params *p, const void *b, size_t len)
{
        p->v[p->n] = b;
        p->l[p->n] = (int)len;
        p->f[p->n++] = 1;
}

/* An alarm job's parameters after $1 gadget, $2 binding (ep: the epoch
 * as a binary bigint); texts is room for the numbers as text. Its query. */
static enum kvpg_query alarm_params(struct params *p, const struct kv_job *job, const char *ep, char texts[4][24])
{
        const void *val = job->val ? job->val : "";
        switch (job->op) {
        case KV_ALARM_SET:
                snprintf(texts[0], 24, "%" PRId64, job->at);
                quota_param(job->quota.max_keys, texts[1]);
                bin(p, job->key, job->klen);
                text(p, texts[0]);
                bin(p, val, job->vlen);
                bin(p, texts[1], 8);
                bin(p, ep, 8);
                return KVPG_ALARM_SET;
        case KV_ALARM_CANCEL:
                bin(p, job->key, job->klen);
                bin(p, ep, 8);
                return KVPG_ALARM_CANCEL;
        case KV_ALARM_LIST:
                snprintf(texts[0], 24, "%u", job->limit + 1);
                bin(p, job->after, job->alen);
                text(p, texts[0]);
                return KVPG_ALARM_LIST;
        case KV_ALARM_SETTLE:
                snprintf(texts[0], 24, "%" PRId64, job->at);
                snprintf(texts[1], 24, "%" PRId64, job->due);
                snprintf(texts[2], 24, "%" PRId64, job->retry_due);
                bin(p, job->key, job->klen);
                text(p, texts[0]);
                text(p, texts[1]);
                bin(p, val, job->vlen);
                text(p, texts[2]);
                bin(p, ep, 8);
                return KVPG_ALARM_SETTLE;
        default: return KVPG_ALARM_NEXT;
        }
}

/* A list's parameters after $1 gadget, $2 binding: from the prefix or
 * the cursor, the range's end, the limit (end, limit: room for them). */
static enum kvpg_query list_params(struct params *p, const struct kv_job *job, uint8_t end[KV_MAX_KEY + 1],
                                   char limit[24])
{
        /* Why a list reads a bounded range: [start, end) of the primary
         * key, end being the prefix's successor or, without one, past
         * every key (KV_MAX_KEY + 1 bytes of 0xff). */
        size_t elen = kvdb_prefix_end(job->key, job->klen, end);
        if (elen == 0)
                memset(end, 0xff, elen = KV_MAX_KEY + 1);
        /* After the cursor when it lies within the range, else from
         * the prefix itself (as kvdb_list). */
        size_t n_cmp = job->alen < job->klen ? job->alen : job->klen;
        int cmp = memcmp(job->after, job->key, n_cmp);
        bool from_cursor = job->alen > 0 && (cmp > 0 || (cmp == 0 && job->alen >= job->klen));
        if (from_cursor)
                bin(p, job->after, job->alen);
        else
                bin(p, job->key, job->klen);
        snprintf(limit, 24, "%u", job->limit + 1);
        bin(p, end, elen);
        text(p, limit);
        return from_cursor ? KVPG_LIST_GT : KVPG_LIST_GE;
}

int kvpg_job_send(PGconn *c, const struct kv_job *job, const char *node, int64_t epoch)
{
        uint8_t end[KV_MAX_KEY + 1];
        char texts[4][24], ep[8];
        struct params p = { .n = 0 };
        enum kvpg_query q;
        int8_be((uint64_t)epoch, ep);
        text(&p, job->gadget);
        text(&p, job->binding);

        switch (job->op) {
        case KV_GET:
                bin(&p, job->key, job->klen);
                q = KVPG_GET;
                break;
        case KV_DELETE:
                bin(&p, job->key, job->klen);
                bin(&p, ep, 8);
                q = KVPG_DELETE;
                break;
        case KV_PUT:
                quota_param(job->quota.max_keys, texts[0]);
                quota_param(job->quota.max_bytes, texts[1]);
                bin(&p, job->key, job->klen);
                bin(&p, job->val ? job->val : "", job->vlen);
                bin(&p, texts[0], 8);
                bin(&p, texts[1], 8);
                text(&p, node);
                bin(&p, ep, 8);
                q = KVPG_PUT;
                break;
        case KV_LIST: q = list_params(&p, job, end, texts[0]); break;
        default: q = alarm_params(&p, job, ep, texts); break;
        }
        return PQsendQueryPrepared(c, kvpg_query_names[q], p.n, p.v, p.l, p.f, 1);
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
