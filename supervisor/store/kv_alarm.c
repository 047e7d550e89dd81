/* kv_alarm: alarm jobs on the gadget's store — the rows a list or a
 * look-up brings back, packed in the job, and an alarm job carried out
 * on the SQLite thread (kvdb_alarm.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

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
void kv_job_add_alarm(void *arg, const struct kvdb_alarm *a)
{
        struct kv_job *job = arg;
        size_t need = 14 + a->idlen + a->plen;
        if (job->err || job->more)
                return;
        if (job->n_keys > 0 && job->keys_len + need > KV_ALARM_LIST_BYTES) {
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

int kv_job_next_alarm(const struct kv_job *job, size_t *pos, struct kvdb_alarm *a)
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

void kv_job_take_alarm(void *arg, const struct kvdb_alarm *a)
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

/* The delivered alarm a settle job names. */
static struct kvdb_alarm settled(const struct kv_job *job)
{
        return (struct kvdb_alarm){ .id = job->key, .idlen = job->klen, .at = job->at, .due = job->due,
                                    .payload = job->val, .plen = job->vlen };
}

int kv_alarm_run(struct kvdb *db, struct kv_job *job)
{
        struct kvdb_alarm a = settled(job);
        switch (job->op) {
        case KV_ALARM_SET: return kvdb_alarm_set(db, job->binding, &a, job->quota.max_keys);
        case KV_ALARM_CANCEL: return kvdb_alarm_cancel(db, job->binding, job->key, job->klen, &job->existed);
        case KV_ALARM_LIST:
                return kvdb_alarm_list(db, job->binding, job->after, job->alen, job->limit, kv_job_add_alarm,
                                       job, &job->more);
        case KV_ALARM_NEXT: return kvdb_alarm_next(db, job->binding, kv_job_take_alarm, job);
        case KV_ALARM_SETTLE: return kvdb_alarm_settle(db, job->binding, &a, job->retry_due);
        default: return -EINVAL;
        }
}
