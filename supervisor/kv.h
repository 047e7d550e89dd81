/* kv: the durable key-value store behind `kv` bindings — one SQLite
 * database per gadget in gadgetd's state directory (never visible inside a
 * sandbox), each binding its own namespace in it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_MAX_KEY 512

struct kv;

struct kv_quota {
        uint64_t max_keys;   /* UINT64_MAX = no limit */
        uint64_t max_bytes;  /* keys + values */
};

/* Opens (creating, mode 0600) STATE_DIR/kv/GADGET.sqlite. 0 or -errno. */
int kv_open(const char *state_dir, const char *gadget, struct kv **out);
void kv_close(struct kv *kv);
/* The value stored under key, malloc'd. -ENOENT if there is none. */
int kv_get(struct kv *kv, const char *binding, const void *key, size_t klen, void **val, size_t *vlen);
/* Stores key = val, durably committed before it returns 0. -EDQUOT when the
 * binding's quota would be exceeded (nothing is written then). */
int kv_put(struct kv *kv, const char *binding, const void *key, size_t klen, const void *val, size_t vlen,
           const struct kv_quota *q);
int kv_delete(struct kv *kv, const char *binding, const void *key, size_t klen, bool *existed);
/* Keys starting with prefix and greater than after (if alen > 0), in byte
 * order, at most limit; each passed to fn. *more tells if keys remain. */
int kv_list(struct kv *kv, const char *binding, const void *prefix, size_t plen, const void *after,
            size_t alen, unsigned limit, void (*fn)(void *arg, const void *key, size_t klen), void *arg,
            bool *more);
const char *kv_error(const struct kv *kv);
