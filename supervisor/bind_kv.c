/* bind_kv: the operations of a kv binding — get, put, delete, list —
 * with their argument checks, on the gadget's SQLite store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings.h"
#include "daemon.h"
#include "gadget.h"
#include "kv.h"
#include "policy.h"
#include "unit.h"
#include "value.h"

#define LIST_DEFAULT 100
#define LIST_MAX 1000

/* A key is a non-empty string or bytes of at most KV_MAX_KEY bytes. */
static int get_key(const Gadget__Value *args, const char *field, bool optional, const void **key,
                   size_t *len, char *why, size_t whylen)
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

static struct kv *store(struct binding_req *r)
{
        struct unit *u = r->u;
        if (!u->kv && kv_open(u->d->state_dir, u->policy->name, &u->kv) < 0)
                return NULL;
        return u->kv;
}

static void kv_get_op(struct binding_req *r, struct kv *kv, const struct policy_binding *b, const void *key,
                      size_t klen)
{
        void *data;
        size_t len;
        int e = kv_get(kv, b->name, key, klen, &data, &len);
        if (e == -ENOENT) {
                bindings_reply(r, NULL, GADGET_ENOTFOUND, "no such key", 0);
                return;
        }
        if (e < 0) {
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error", 0);
                return;
        }
        Gadget__Value *v = gadget__value__unpack(NULL, len, data);
        free(data);
        if (!v) {
                bindings_reply(r, NULL, GADGET_EFAILED, "stored value does not decode", 0);
                return;
        }
        bindings_reply(r, v, 0, NULL, len);
        gadget__value__free_unpacked(v, NULL);
}

static void kv_put_op(struct binding_req *r, struct kv *kv, const struct policy_binding *b, const void *key,
                      size_t klen, const Gadget__Value *val)
{
        char msg[160];
        if (!val) {
                bindings_reply(r, NULL, GADGET_EINVAL, "put needs {\"key\": K, \"value\": V}", 0);
                return;
        }
        size_t len = gadget__value__get_packed_size(val);
        if (len > b->max_value_size) {
                snprintf(msg, sizeof msg, "value of %zu bytes is over MaxValueSize (%llu)", len,
                         (unsigned long long)b->max_value_size);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                return;
        }
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        gadget__value__pack(val, buf);
        struct kv_quota q = { .max_keys = b->max_keys, .max_bytes = b->max_bytes };
        int e = kv_put(kv, b->name, key, klen, buf, len, &q);
        free(buf);
        if (e == -EDQUOT) {
                snprintf(msg, sizeof msg, "quota of binding %s exceeded (MaxKeys/MaxBytes)", b->name);
                bindings_reply(r, NULL, GADGET_ELIMIT, msg, 0);
                return;
        }
        if (e < 0) {
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error", 0);
                return;
        }
        Gadget__Value *null = value_new_null();
        bindings_reply(r, null, 0, NULL, 0);
        value_free(null);
}

static void kv_delete_op(struct binding_req *r, struct kv *kv, const struct policy_binding *b,
                         const void *key, size_t klen)
{
        bool existed;
        if (kv_delete(kv, b->name, key, klen, &existed) < 0) {
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error", 0);
                return;
        }
        Gadget__Value *v = value_new_bool(existed);
        bindings_reply(r, v, 0, NULL, 0);
        value_free(v);
}

struct list_acc {
        Gadget__Value *keys;
        const void *last;
        size_t last_len;
        int err;
};

static void list_one(void *arg, const void *key, size_t klen)
{
        struct list_acc *a = arg;
        Gadget__Value *k = value_utf8_valid(key, klen) && !memchr(key, 0, klen)
                                   ? value_new_string_len(key, klen)
                                   : value_new_bytes(key, klen);
        if (!k || value_list_append(a->keys, k) < 0)
                a->err = -ENOMEM;
}

static void kv_list_op(struct binding_req *r, struct kv *kv, const struct policy_binding *b,
                       const Gadget__Value *args)
{
        char why[128];
        const void *prefix, *after;
        size_t plen, alen;
        int64_t limit = LIST_DEFAULT;
        const Gadget__Value *lim = value_map_get(args, "limit");
        if (get_key(args, "prefix", true, &prefix, &plen, why, sizeof why) < 0 ||
            get_key(args, "cursor", true, &after, &alen, why, sizeof why) < 0) {
                bindings_reply(r, NULL, GADGET_EINVAL, why, 0);
                return;
        }
        if (lim && (lim->kind_case != GADGET__VALUE__KIND_INT_VALUE || lim->int_value < 1 ||
                    lim->int_value > LIST_MAX)) {
                bindings_reply(r, NULL, GADGET_EINVAL, "\"limit\" must be an int from 1 to 1000", 0);
                return;
        }
        if (lim)
                limit = lim->int_value;
        struct list_acc a = { .keys = value_new_list() };
        bool more = false;
        int e = a.keys ? kv_list(kv, b->name, prefix, plen, after, alen, (unsigned)limit, list_one, &a, &more)
                       : -ENOMEM;
        Gadget__Value *res = value_new_map();
        if (e < 0 || a.err < 0 || !res) {
                value_free(a.keys);
                value_free(res);
                bindings_reply(r, NULL, GADGET_EFAILED, "storage error", 0);
                return;
        }
        /* The cursor is the last key returned; list again with it to go on. */
        const Gadget__List *l = a.keys->list_value;
        Gadget__Value *cursor = more && l->n_items ? value_dup(l->items[l->n_items - 1]) : value_new_null();
        value_map_set(res, "keys", a.keys);
        value_map_set(res, "cursor", cursor);
        bindings_reply(r, res, 0, NULL, gadget__value__get_packed_size(res));
        value_free(res);
}

void bind_kv(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        char why[128];
        const void *key = NULL;
        size_t klen = 0;
        bool is_get = strcmp(r->op, "get") == 0, is_put = strcmp(r->op, "put") == 0;
        bool is_del = strcmp(r->op, "delete") == 0, is_list = strcmp(r->op, "list") == 0;

        if (!is_get && !is_put && !is_del && !is_list) {
                bindings_bad_op(r, b);
                return;
        }
        if (args->kind_case != GADGET__VALUE__KIND_MAP_VALUE) {
                bindings_reply(r, NULL, GADGET_EINVAL, "kv arguments must be a map", 0);
                return;
        }
        if (!is_list && get_key(args, "key", false, &key, &klen, why, sizeof why) < 0) {
                bindings_reply(r, NULL, GADGET_EINVAL, why, 0);
                return;
        }
        struct kv *kv = store(r);
        if (!kv) {
                bindings_reply(r, NULL, GADGET_EFAILED, "cannot open the gadget's store", 0);
                return;
        }
        if (is_get)
                kv_get_op(r, kv, b, key, klen);
        else if (is_put)
                kv_put_op(r, kv, b, key, klen, value_map_get(args, "value"));
        else if (is_del)
                kv_delete_op(r, kv, b, key, klen);
        else
                kv_list_op(r, kv, b, args);
}
