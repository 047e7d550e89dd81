/* kv_job: a store operation of a type, and the rows a list or a look-up
 * brings back packed in the job. */
#include "kv_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kv_op_find(const char *const *names, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (names[i] && strcmp(names[i], name) == 0)
                        return (int)i;
        return -1;
}

bool kv_type_covered(const struct kv_type *type, const char *half, const char *const *names, size_t n, char *why,
                     size_t len)
{
        for (size_t i = 0; i < type->n_ops; i++)
                if (kv_op_find(names, n, type->ops[i].name) < 0) {
                        snprintf(why, len, "the %s half of the %s type has no operation \"%s\"", half, type->name,
                                 type->ops[i].name);
                        return false;
                }
        return true;
}

struct kv_job *kv_job_new(const struct kv_type *type, const char *op, const char *binding, kv_done_fn *done,
                          void *arg)
{
        const struct kv_op *o = NULL;
        for (size_t i = 0; i < type->n_ops && !o; i++)
                if (strcmp(type->ops[i].name, op) == 0)
                        o = &type->ops[i];
        struct kv_job *job = o ? calloc(1, sizeof *job) : NULL;
        if (!job)
                return NULL;
        job->type = type;
        job->op = o;
        snprintf(job->binding, sizeof job->binding, "%s", binding);
        job->done = done;
        job->arg = arg;
        job->failed = -1;
        return job;
}

bool kv_job_is(const struct kv_job *job, const char *op)
{
        return strcmp(job->op->name, op) == 0;
}

void kv_job_free(struct kv_job *job)
{
        if (!job)
                return;
        free(job->val);
        free(job->keys);
        free(job);
}

struct kv_job kv_job_stand_in(const struct kv_job *running)
{
        struct kv_job s = { .type = running->type, .op = running->op, .kv = running->kv, .done = running->done,
                            .arg = running->arg, .user_done = running->user_done, .err = -ECANCELED };
        snprintf(s.binding, sizeof s.binding, "%s", running->binding);
        return s;
}

/* n bytes of v, most significant first. */
static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

int kv_job_add_op(struct kv_job *job, const struct kv_batch_op *op)
{
        size_t need = 11 + op->klen + op->elen + op->vlen;
        if (op->klen > KV_MAX_KEY || op->elen > UINT32_MAX || op->vlen > UINT32_MAX)
                return -EINVAL;
        uint8_t *b = realloc(job->val, job->vlen + need);
        if (!b)
                return -ENOMEM;
        uint8_t *p = b + job->vlen;
        p[0] = (uint8_t)((op->cas ? 1 : 0) | (op->expect ? 2 : 0) | (op->value ? 4 : 0));
        put_be(p + 1, op->klen, 2);
        memcpy(p + 3, op->key, op->klen);
        p += 3 + op->klen;
        put_be(p, op->elen, 4);
        if (op->elen)
                memcpy(p + 4, op->expect, op->elen);
        p += 4 + op->elen;
        put_be(p, op->vlen, 4);
        if (op->vlen)
                memcpy(p + 4, op->value, op->vlen);
        job->val = b;
        job->vlen += need;
        return 0;
}

int kv_job_next_op(const struct kv_job *job, size_t *pos, struct kv_batch_op *op)
{
        const uint8_t *b = job->val;
        size_t end = job->vlen, p = *pos;
        if (p >= end)
                return 0;
        /* Why each length is checked against what is left: a reader
         * never goes past the job's bytes, whatever they hold. */
        if (end - p < 3)
                return -EIO;
        unsigned flags = b[p];
        size_t klen = (size_t)get_be(b + p + 1, 2);
        p += 3;
        if (flags > 7 || klen > KV_MAX_KEY || end - p < klen + 4)
                return -EIO;
        const uint8_t *key = b + p;
        p += klen;
        size_t elen = (size_t)get_be(b + p, 4);
        if (end - p - 4 < elen || end - p - 4 - elen < 4)
                return -EIO;
        const uint8_t *expect = b + p + 4;
        p += 4 + elen;
        size_t vlen = (size_t)get_be(b + p, 4);
        if (end - p - 4 < vlen)
                return -EIO;
        *op = (struct kv_batch_op){ .cas = flags & 1, .key = key, .klen = klen,
                                    .expect = flags & 2 ? expect : NULL, .elen = elen,
                                    .value = flags & 4 ? b + p + 4 : NULL, .vlen = vlen };
        *pos = p + 4 + vlen;
        return 1;
}

void kv_job_add_key(void *arg, const void *key, size_t klen)
{
        struct kv_job *job = arg;
        uint8_t *k = realloc(job->keys, job->keys_len + 2 + klen);
        if (!k) {
                job->err = -ENOMEM;
                return;
        }
        k[job->keys_len] = (uint8_t)klen;
        k[job->keys_len + 1] = (uint8_t)(klen >> 8);
        memcpy(k + job->keys_len + 2, key, klen);
        job->keys = k;
        job->keys_len += 2 + klen;
        job->n_keys++;
}

int kv_job_next_key(const struct kv_job *job, size_t *pos, const void **key, size_t *klen)
{
        if (*pos + 2 > job->keys_len)
                return 0;
        size_t n = (size_t)job->keys[*pos] | (size_t)job->keys[*pos + 1] << 8;
        *key = job->keys + *pos + 2;
        *klen = n;
        *pos += 2 + n;
        return 1;
}

static void put_bytes(uint8_t *p, uint64_t v, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_bytes(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

/* A row: id length (2), id, at (8), payload length (4), payload. */
void kv_job_add_row(void *arg, const struct kv_row *a)
{
        struct kv_job *job = arg;
        size_t need = 14 + a->idlen + a->plen;
        if (job->err || job->more)
                return;
        if (job->n_keys > 0 && job->keys_len + need > KV_ROWS_BYTES) {
                job->more = true;
                return;
        }
        uint8_t *k = realloc(job->keys, job->keys_len + need);
        if (!k) {
                job->err = -ENOMEM;
                return;
        }
        uint8_t *p = k + job->keys_len;
        put_bytes(p, a->idlen, 2);
        memcpy(p + 2, a->id, a->idlen);
        put_bytes(p + 2 + a->idlen, (uint64_t)a->at, 8);
        put_bytes(p + 10 + a->idlen, a->plen, 4);
        if (a->plen)
                memcpy(p + 14 + a->idlen, a->payload, a->plen);
        job->keys = k;
        job->keys_len += need;
        job->n_keys++;
}

int kv_job_next_row(const struct kv_job *job, size_t *pos, struct kv_row *a)
{
        const uint8_t *p = job->keys + *pos;
        if (*pos + 14 > job->keys_len)
                return 0;
        a->idlen = (size_t)get_bytes(p, 2);
        a->id = p + 2;
        a->at = (int64_t)get_bytes(p + 2 + a->idlen, 8);
        a->plen = (size_t)get_bytes(p + 10 + a->idlen, 4);
        a->payload = p + 14 + a->idlen;
        *pos += 14 + a->idlen + a->plen;
        return 1;
}

void kv_job_take_row(void *arg, const struct kv_row *a)
{
        struct kv_job *job = arg;
        void *copy = malloc(a->plen ? a->plen : 1);
        if (!copy || a->idlen > sizeof job->key) {
                free(copy);
                job->err = copy ? -EIO : -ENOMEM;
                return;
        }
        memcpy(job->key, a->id, a->idlen);
        job->klen = a->idlen;
        job->at = a->at;
        job->due = a->due;
        job->attempts = a->attempts;
        if (a->plen)
                memcpy(copy, a->payload, a->plen);
        free(job->val);
        job->val = copy;
        job->vlen = a->plen;
}
