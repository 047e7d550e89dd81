/* bind_kv: the operations of a kv binding — get, put, delete, list; cas
 * and batch in bind_kv_batch.c — with their argument checks, queued to the
 * gadget's store (kv.c) and answered when the store's thread is done. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind_kv.h"
#include "bindings.h"
#include "contract.h"
#include "ops.h"
#include "store/store.h"
#include "policy.h"
#include "value.h"

/* Its operations on the store (kv_job.h), by their names, and their
 * halves: kvdb_kv.c (SQLite), kvpg_job.c (PostgreSQL). */
KV_TYPE_HALVES(kv);
static const struct kv_op store_ops[] = {
        { "get", false }, { "put", true }, { "delete", true }, { "list", false }, { "cas", true }, { "batch", true },
};
const struct kv_type bind_kv_store = { .name = "kv", .ops = store_ops, .n_ops = sizeof store_ops / sizeof *store_ops,
                                       .db = &kvdb_kv_type, .pg = &kvpg_kv_type };

#define LIST_DEFAULT 100
#define LIST_MAX 1000
#define KEY "string | bytes"

int bind_kv_key(const Gadget__Value *args, const char *field, bool optional, const void **key, size_t *len,
                char *why, size_t whylen)
{
        const Gadget__Value *k = value_map_get(args, field);
        if (!k && optional) {
                *key = "";
                *len = 0;
                return 0;
        }
        if (k && k->kind_case == GADGET__VALUE__KIND_STRING_VALUE) {
                *key = k->string_value;
                *len = strlen(k->string_value);
        } else if (k && k->kind_case == GADGET__VALUE__KIND_BYTES_VALUE) {
                *key = k->bytes_value.data;
                *len = k->bytes_value.len;
        } else {
                snprintf(why, whylen, "\"%s\" must be a string or bytes", field);
                return -EINVAL;
        }
        if ((*len == 0 && !optional) || *len > KV_MAX_KEY) {
                snprintf(why, whylen, "\"%s\" must be 1 to %d bytes", field, KV_MAX_KEY);
                return -EINVAL;
        }
        return 0;
}


/* Answers a store failure other than the operation's own outcomes. The
 * message says what went wrong, never where: the state directory's path
 * is the host's, not the gadget's (the operator finds the file from the
 * gadget's name, docs/bindings.md "kv"). */
void bind_kv_failed(struct binding_req *r, const struct kv_job *job)
{
        char msg[160];
        int err = job->err;
        if (err == KV_EUNAVAILABLE || err == KV_EUNKNOWN)
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, job->why, 0);
        else if (err == -ENOSPC)
                bindings_reply(r, NULL, GADGET_EFAILED, "storage full: the disk has no room for more data", 0);
        else if (err == -ECANCELED)
                bindings_reply(r, NULL, GADGET_EGONE, "the gadget's store was closed", 0);
        else if (err == -EBADMSG)
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error: the gadget's store is damaged "
                               "(not a sound SQLite database)", 0);
        else if (err == -EBUSY)
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error: the gadget's store is locked by another "
                               "process", 0);
        else if (job->open_failed) {
                snprintf(msg, sizeof msg, "storage error: cannot open the gadget's store: %s", strerror(-err));
                bindings_reply(r, NULL, GADGET_EFAILED, msg, 0);
        } else
                bindings_reply(r, NULL, GADGET_EFAILED, job->why[0] ? job->why : "storage error", 0);
}

static void get_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (job->err == -ENOENT) {
                bindings_reply(r, NULL, GADGET_ENOTFOUND, "no such key", 0);
                return;
        }
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        char why[120], msg[160];
        Gadget__Value *v = value_decode(job->val, job->vlen, why, sizeof why);
        if (!v) {
                snprintf(msg, sizeof msg, "the stored value is not a valid value (%s)", why);
                bindings_reply(r, NULL, GADGET_EFAILED, msg, 0);
                return;
        }
        bindings_reply(r, v, 0, NULL, job->vlen);
        value_free(v);
}

/* A MaxKeys=/MaxBytes= value as the policy would say it. */
static const char *limit_text(uint64_t v, char *buf, size_t len)
{
        if (v == POLICY_UNLIMITED)
                return "infinity";
        snprintf(buf, len, "%" PRIu64, v);
        return buf;
}

void bind_kv_over_quota(struct binding_req *r, const struct kv_job *job, const char *what)
{
        char msg[256], keys[24], bytes[24];
        snprintf(msg, sizeof msg, "quota of binding %s exceeded%s (MaxKeys=%s, MaxBytes=%s)", job->binding, what,
                 limit_text(job->quota.max_keys, keys, sizeof keys),
                 limit_text(job->quota.max_bytes, bytes, sizeof bytes));
        bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
}

bool bind_kv_write_failed(struct binding_req *r, const struct kv_job *job, const char *what)
{
        if (job->err == -EDQUOT)
                bind_kv_over_quota(r, job, what);
        else if (job->err < 0)
                bind_kv_failed(r, job);
        return job->err < 0;
}

static void put_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (bind_kv_write_failed(r, job, ""))
                return;
        Gadget__Value *null = value_new_null();
        bindings_reply(r, null, 0, NULL, 0);
        value_free(null);
}

static void delete_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        Gadget__Value *v = value_new_bool(job->existed);
        bindings_reply(r, v, 0, NULL, 0);
        value_free(v);
}

static Gadget__Value *key_value(const void *key, size_t klen)
{
        return value_utf8_valid(key, klen) && !memchr(key, 0, klen) ? value_new_string_len(key, klen)
                                                                     : value_new_bytes(key, klen);
}

/* {"keys": [...], "cursor": last key or null}; NULL if out of memory. */
static Gadget__Value *list_result(const struct kv_job *job)
{
        Gadget__Value *keys = value_new_list(), *res = value_new_map(), *last = NULL;
        const void *key;
        size_t klen, pos = 0;
        if (!keys || !res)
                goto fail;
        while (kv_job_next_key(job, &pos, &key, &klen)) {
                Gadget__Value *k = key_value(key, klen);
                if (!k || value_list_append(keys, k) < 0)
                        goto fail;
                last = k;
        }
        /* The cursor is the last key returned; list again with it to go on. */
        Gadget__Value *cursor = job->more && last ? value_dup(last) : value_new_null();
        value_map_set(res, "keys", keys);
        value_map_set(res, "cursor", cursor);
        return res;
fail:
        value_free(keys);
        value_free(res);
        return NULL;
}

static void list_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (job->err < 0) {
                bind_kv_failed(r, job);
                return;
        }
        Gadget__Value *res = list_result(job);
        if (!res) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        bindings_reply(r, res, 0, NULL, gadget__value__get_packed_size(res));
        value_free(res);
}

/* The value of a put (checked: check_put), packed into the job;
 * false (answered) if over the binding's MaxValueSize. */
static bool put_value(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *val,
                      struct kv_job *job)
{
        char msg[160];
        size_t len = gadget__value__get_packed_size(val);
        if (len > b->max_value_size) {
                snprintf(msg, sizeof msg, "value of %zu bytes is over MaxValueSize (%" PRIu64 ")", len,
                         b->max_value_size);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                return false;
        }
        if (!(job->val = malloc(len ? len : 1))) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return false;
        }
        gadget__value__pack(val, job->val);
        job->vlen = len;
        job->quota = (struct kvdb_quota){ .max_keys = b->max_keys, .max_bytes = b->max_bytes };
        return true;
}

/* The checks of ops.c's table: the shape of each operation's arguments. */
int bind_kv_check_map(const Gadget__Value *args, char *why, size_t len)
{
        if (args->kind_case == GADGET__VALUE__KIND_MAP_VALUE)
                return 0;
        snprintf(why, len, "kv arguments must be a map");
        return -EINVAL;
}

static int check_key(const Gadget__Value *args, char *why, size_t len)
{
        const void *key;
        size_t klen;
        return bind_kv_check_map(args, why, len) < 0 ? -EINVAL
                                                      : bind_kv_key(args, "key", false, &key, &klen, why, len);
}

static int check_put(const Gadget__Value *args, char *why, size_t len)
{
        if (check_key(args, why, len) < 0)
                return -EINVAL;
        if (!value_map_get(args, "value")) {
                snprintf(why, len, "put needs {\"key\": K, \"value\": V}");
                return -EINVAL;
        }
        return 0;
}

static int check_list(const Gadget__Value *args, char *why, size_t len)
{
        const void *key;
        size_t klen;
        const Gadget__Value *lim = value_map_get(args, "limit");
        if (bind_kv_check_map(args, why, len) < 0 || bind_kv_key(args, "prefix", true, &key, &klen, why, len) < 0 ||
            bind_kv_key(args, "cursor", true, &key, &klen, why, len) < 0)
                return -EINVAL;
        if (lim && (lim->kind_case != GADGET__VALUE__KIND_INT_VALUE || lim->int_value < 1 ||
                    lim->int_value > LIST_MAX)) {
                snprintf(why, len, "\"limit\" must be an int from 1 to %d", LIST_MAX);
                return -EINVAL;
        }
        return 0;
}

/* prefix, cursor and limit of a list (checked: check_list). */
static void list_args(const Gadget__Value *args, struct kv_job *job)
{
        char why[128];
        const void *prefix, *after;
        const Gadget__Value *lim = value_map_get(args, "limit");
        bind_kv_key(args, "prefix", true, &prefix, &job->klen, why, sizeof why);
        bind_kv_key(args, "cursor", true, &after, &job->alen, why, sizeof why);
        memcpy(job->key, prefix, job->klen);
        memcpy(job->after, after, job->alen);
        job->limit = lim ? (unsigned)lim->int_value : LIST_DEFAULT;
}

/* The job of r's operation with its checked arguments; NULL (answered)
 * if the call is refused. */
static struct kv_job *make_job(struct binding_req *r, const struct policy_binding *b, const char *op,
                               kv_done_fn *done, const Gadget__Value *args)
{
        char why[128];
        const void *key;
        struct kv_job *job = kv_job_new(&bind_kv_store, op, b->name, done, r);
        if (!job) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return NULL;
        }
        if (kv_job_is(job, "list")) {
                list_args(args, job);
                return job;
        }
        bind_kv_key(args, "key", false, &key, &job->klen, why, sizeof why);
        memcpy(job->key, key, job->klen);
        if (kv_job_is(job, "put") && !put_value(r, b, value_map_get(args, "value"), job)) {
                kv_job_free(job);
                return NULL;
        }
        return job;
}

static void kv_busy(struct binding_req *r, const struct policy_binding *b)
{
        char msg[192];
        snprintf(msg, sizeof msg, "%s binding %s is busy: %" PRIu64 " operations already queued (CallsMax=%" PRIu64
                 ")", policy_binding_type_name(b->type), b->name, b->calls_max, b->calls_max);
        bindings_reply(r, NULL, GADGET_EBUSY, msg, 0);
}

static void kv_queue(struct binding_req *r, const struct policy_binding *b, struct kv *kv, struct kv_job *job)
{
        int e = kv_submit(kv, job, (unsigned)b->calls_max);
        if (e == KV_EUNAVAILABLE)
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, job->why, 0);
        if (e < 0) {
                kv_job_free(job);
                if (e == -EBUSY)
                        kv_busy(r, b);
                else if (e != KV_EUNAVAILABLE)
                        bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
        }
}

void bind_kv_start(struct binding_req *r, const struct policy_binding *b, const char *op, kv_done_fn *done,
                   const Gadget__Value *args, bind_kv_make_fn *make)
{
        struct kv *kv = bindings_kv(r->g);
        if (!kv) {
                bindings_reply(r, NULL, GADGET_EFAILED, "cannot open the gadget's store", 0);
                return;
        }
        /* Why this bounds the gadget's cost: at most CallsMax operations
         * of this binding wait for its thread, each holding its value; the
         * rest are refused now, before their value is copied. */
        if (kv_full(kv, b->name, (unsigned)b->calls_max)) {
                kv_busy(r, b);
                return;
        }
        struct kv_job *job = make(r, b, op, done, args);
        if (job)
                kv_queue(r, b, kv, job);
}

static void get(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "get", get_done, args, make_job);
}

static void put(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "put", put_done, args, make_job);
}

static void delete(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "delete", delete_done, args, make_job);
}

static void list(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "list", list_done, args, make_job);
}

/* Each signature is checked first (as a gadget's method signatures are),
 * then the row's check for what a type cannot say (a key's length in
 * bytes). */
static struct binding_op ops[] = {
        BINDING_OP("get(key: " KEY ") -> any", check_key, get),
        BINDING_OP("put(key: " KEY ", value: any) -> null", check_put, put),
        BINDING_OP("delete(key: " KEY ") -> bool", check_key, delete),
        BINDING_OP("list(prefix?: " KEY ", cursor?: " KEY ", limit?: int(1..1000)) -> "
                   "{keys: list<" KEY ">, cursor: (" KEY ")?}", check_list, list),
        BINDING_OP("cas(key: " KEY ", expect?: any, value?: any) -> {written: bool, current?: any}",
                   bind_kv_check_cas, bind_kv_cas),
        BINDING_OP("batch(ops: list<{op: string, key: " KEY ", expect?: any, value?: any}>(1..64)) -> "
                   "{applied: bool, results?: list<bool>, failed?: int, current?: any}",
                   bind_kv_check_batch, bind_kv_batch),
};

const struct binding_type_ops bind_kv_type = {
        .type = BINDING_KV, .ops = ops, .n_ops = sizeof ops / sizeof *ops, .store = &bind_kv_store,
};
