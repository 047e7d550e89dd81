/* bind_kv: what the users of a gadget's store (its kv and alarm
 * bindings) share. */
#pragma once

#include "bindings.h"
#include "store/store.h"

/* Makes the job of op (an operation of the binding's struct kv_type,
 * by its name) for r (answers r and returns NULL if it cannot). */
typedef struct kv_job *bind_kv_make_fn(struct binding_req *r, const struct policy_binding *b, const char *op,
                                       kv_done_fn *done, const Gadget__Value *args);
/* Starts op on the gadget's store: refused as busy past the binding's
 * CallsMax before make copies anything, else made and queued (answered
 * if refused); done answers r when the store is done. */
void bind_kv_start(struct binding_req *r, const struct policy_binding *b, const char *op, kv_done_fn *done,
                   const Gadget__Value *args, bind_kv_make_fn *make);

/* The kv binding's operations on the store (bind_kv.c). */
extern const struct kv_type bind_kv_store;

/* Key field of args: a string or bytes of 1 to KV_MAX_KEY bytes (empty
 * or absent if optional: "", 0). 0, or -EINVAL with why. */
int bind_kv_key(const Gadget__Value *args, const char *field, bool optional, const void **key, size_t *len,
                char *why, size_t whylen);
/* 0 if args is a map, else -EINVAL with why. */
int bind_kv_check_map(const Gadget__Value *args, char *why, size_t len);
/* Answers a write refused by the binding's MaxKeys=/MaxBytes=; what
 * (after "exceeded") says more, "" for nothing. */
void bind_kv_over_quota(struct binding_req *r, const struct kv_job *job, const char *what);
/* A write's end when it did not commit: answered (over the quota, with
 * what as bind_kv_over_quota's, or failed) and true; else false. */
bool bind_kv_write_failed(struct binding_req *r, const struct kv_job *job, const char *what);

/* cas and batch (bind_kv_batch.c): their checks and handlers. */
int bind_kv_check_cas(const Gadget__Value *args, char *why, size_t len);
int bind_kv_check_batch(const Gadget__Value *args, char *why, size_t len);
void bind_kv_cas(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
void bind_kv_batch(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
