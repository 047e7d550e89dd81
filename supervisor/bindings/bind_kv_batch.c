/* bind_kv_batch: a kv binding's cas and batch, the operations a gadget
 * retries safely: each is carried out by the store in one transaction,
 * all or nothing (kvdb_kv.c, gadgetd_kv_batch of kvpg_sql.c). A cas is a
 * batch of one conditional operation, answered as its own. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind_kv.h"
#include "bindings.h"
#include "contract.h"
#include "policy.h"
#include "value.h"

/* A field that is there and not null (expect, value of a cas). */
static const Gadget__Value *given(const Gadget__Value *args, const char *field)
{
        const Gadget__Value *v = value_map_get(args, field);
        return v && v->kind_case != GADGET__VALUE__KIND_NULL_VALUE ? v : NULL;
}

int bind_kv_check_cas(const Gadget__Value *args, char *why, size_t len)
{
        const void *key;
        size_t klen;
        return bind_kv_check_map(args, why, len) < 0 ? -EINVAL : bind_kv_key(args, "key", false, &key, &klen,
                                                                               why, len);
}

/* Operation i of a batch (a map, as its signature says): its name is one
 * of put, delete, cas; its key is a key; a put has a value and no
 * expect, a delete neither. */
static int check_op(const Gadget__Value *op, size_t i, char *why, size_t len)
{
        char sub[160];
        const void *key;
        size_t klen;
        const char *name = value_string(value_map_get(op, "op"));
        bool put = name && strcmp(name, "put") == 0, del = name && strcmp(name, "delete") == 0;
        if (!put && !del && !(name && strcmp(name, "cas") == 0)) {
                snprintf(why, len, "ops[%zu]: \"op\" must be \"put\", \"delete\" or \"cas\"", i);
                return -EINVAL;
        }
        if (bind_kv_key(op, "key", false, &key, &klen, sub, sizeof sub) < 0) {
                snprintf(why, len, "ops[%zu]: %s", i, sub);
                return -EINVAL;
        }
        if ((put || del) && value_map_get(op, "expect")) {
                snprintf(why, len, "ops[%zu]: a %s takes no \"expect\" (a cas does)", i, name);
                return -EINVAL;
        }
        bool has_value = value_map_get(op, "value") != NULL;
        if (put && !has_value) {
                snprintf(why, len, "ops[%zu]: a put needs a \"value\"", i);
                return -EINVAL;
        }
        if (del && has_value) {
                snprintf(why, len, "ops[%zu]: a delete takes no \"value\"", i);
                return -EINVAL;
        }
        return 0;
}

int bind_kv_check_batch(const Gadget__Value *args, char *why, size_t len)
{
        if (bind_kv_check_map(args, why, len) < 0)
                return -EINVAL;
        const Gadget__Value *ops = value_map_get(args, "ops");
        if (!ops || ops->kind_case != GADGET__VALUE__KIND_LIST_VALUE || !ops->list_value ||
            ops->list_value->n_items < 1 || ops->list_value->n_items > KV_BATCH_MAX) {
                snprintf(why, len, "\"ops\" must be a list of 1 to %d operations", KV_BATCH_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < ops->list_value->n_items; i++) {
                const Gadget__Value *op = ops->list_value->items[i];
                if (op->kind_case != GADGET__VALUE__KIND_MAP_VALUE) {
                        snprintf(why, len, "ops[%zu] must be a map", i);
                        return -EINVAL;
                }
                if (check_op(op, i, why, len) < 0)
                        return -EINVAL;
        }
        return 0;
}

/* v packed (NULL for none), into *out (malloc'd); false (r answered) if
 * over the binding's MaxValueSize or out of memory. what names it. */
static bool pack(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *v, const char *what,
                 uint8_t **out, size_t *len)
{
        char msg[192];
        *out = NULL;
        *len = 0;
        if (!v)
                return true;
        size_t n = gadget__value__get_packed_size(v);
        if (n > b->max_value_size) {
                snprintf(msg, sizeof msg, "%s of %zu bytes is over MaxValueSize (%" PRIu64 ")", what, n,
                         b->max_value_size);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                return false;
        }
        if (!(*out = malloc(n ? n : 1))) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return false;
        }
        gadget__value__pack(v, *out);
        *len = n;
        return true;
}

/* Adds operation op (checked) to job; i its index in a batch, -1 for a
 * cas. false if answered (a value over MaxValueSize). Why expect is
 * bounded too: it is compared in the store, as a value. */
static bool add_op(struct binding_req *r, const struct policy_binding *b, struct kv_job *job,
                   const Gadget__Value *op, int i)
{
        char why[128], what[48];
        const char *name = i < 0 ? "cas" : value_string(value_map_get(op, "op"));
        bool cas = strcmp(name, "cas") == 0;
        struct kv_batch_op o = { .cas = cas };
        uint8_t *expect = NULL, *value = NULL;
        bind_kv_key(op, "key", false, &o.key, &o.klen, why, sizeof why);
        const Gadget__Value *e = cas ? given(op, "expect") : NULL;
        const Gadget__Value *v = cas ? given(op, "value") : value_map_get(op, "value");
        snprintf(what, sizeof what, i < 0 ? "expect" : "ops[%d]: expect", i);
        bool ok = pack(r, b, e, what, &expect, &o.elen);
        snprintf(what, sizeof what, i < 0 ? "value" : "ops[%d]: value", i);
        ok = ok && pack(r, b, v, what, &value, &o.vlen);
        if (ok) {
                o.expect = expect ? (const void *)expect : e ? "" : NULL;
                o.value = value ? (const void *)value : v ? "" : NULL;
                if (kv_job_add_op(job, &o) < 0) {
                        bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                        ok = false;
                }
        }
        free(expect);
        free(value);
        return ok;
}

/* The job of a cas or a batch (checked); NULL (answered) if refused. */
static struct kv_job *make_job(struct binding_req *r, const struct policy_binding *b, const char *op,
                               kv_done_fn *done, const Gadget__Value *args)
{
        struct kv_job *job = kv_job_new(&bind_kv_store, op, b->name, done, r);
        if (!job) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return NULL;
        }
        job->quota = (struct kvdb_quota){ .max_keys = b->max_keys, .max_bytes = b->max_bytes };
        if (kv_job_is(job, "cas")) {
                if (add_op(r, b, job, args, -1))
                        return job;
        } else {
                const Gadget__List *ops = value_map_get(args, "ops")->list_value;
                size_t i = 0;
                while (i < ops->n_items && add_op(r, b, job, ops->items[i], (int)i))
                        i++;
                if (i == ops->n_items)
                        return job;
        }
        kv_job_free(job);
        return NULL;
}

/* The stored value a cas that did not match found, decoded; NULL if
 * the key has none or it does not decode. */
static Gadget__Value *current(const struct kv_job *job)
{
        char why[120];
        return job->existed ? value_decode(job->val, job->vlen, why, sizeof why) : NULL;
}

/* Notes why nothing was written, for the audit (its outcome is ok: an
 * answer, not a failure). */
static void note(struct binding_req *r, const struct kv_job *job, bool batch)
{
        if (batch ? asprintf(&r->audit_note, "not applied: ops[%d]'s cas did not match", job->failed) < 0
                  : !(r->audit_note = strdup("not written: the stored value differs")))
                r->audit_note = NULL;
}

/* Answers a cas or a batch that did not match (the map res, taken). */
static void answer_mismatch(struct binding_req *r, const struct kv_job *job, Gadget__Value *res, bool batch)
{
        Gadget__Value *cur = current(job);
        if (job->existed && !cur) {
                value_free(res);
                bindings_reply(r, NULL, GADGET_EFAILED, "the stored value is not a valid value", 0);
                return;
        }
        if (batch)
                value_map_set(res, "failed", value_new_int(job->failed));
        if (cur)
                value_map_set(res, "current", cur);
        note(r, job, batch);
        bindings_reply(r, res, 0, NULL, gadget__value__get_packed_size(res));
        value_free(res);
}

static void cas_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        if (bind_kv_write_failed(r, job, ""))
                return;
        Gadget__Value *res = value_new_map();
        if (!res || value_map_set(res, "written", value_new_bool(job->failed < 0)) < 0) {
                value_free(res);
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        if (job->failed >= 0) {
                answer_mismatch(r, job, res, false);
                return;
        }
        bindings_reply(r, res, 0, NULL, 0);
        value_free(res);
}

/* {applied: true, results: [whether each op's key existed]}. */
static Gadget__Value *applied(const struct kv_job *job)
{
        Gadget__Value *res = value_new_map(), *results = value_new_list();
        struct kv_batch_op op;
        size_t pos = 0;
        unsigned i = 0;
        if (!res || !results)
                goto fail;
        while (kv_job_next_op(job, &pos, &op) > 0 && i < KV_BATCH_MAX)
                if (value_list_append(results, value_new_bool(job->existed_ops >> i++ & 1)) < 0)
                        goto fail;
        value_map_set(res, "applied", value_new_bool(true));
        value_map_set(res, "results", results);
        return res;
fail:
        value_free(res);
        value_free(results);
        return NULL;
}

static void batch_done(struct kv_job *job)
{
        struct binding_req *r = job->arg;
        char what[64];
        snprintf(what, sizeof what, " by ops[%d], so nothing was written", job->failed);
        if (bind_kv_write_failed(r, job, what))
                return;
        Gadget__Value *res = job->failed < 0 ? applied(job) : value_new_map();
        if (!res) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        if (job->failed >= 0) {
                value_map_set(res, "applied", value_new_bool(false));
                answer_mismatch(r, job, res, true);
                return;
        }
        bindings_reply(r, res, 0, NULL, gadget__value__get_packed_size(res));
        value_free(res);
}

void bind_kv_cas(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "cas", cas_done, args, make_job);
}

void bind_kv_batch(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        bind_kv_start(r, b, "batch", batch_done, args, make_job);
}
