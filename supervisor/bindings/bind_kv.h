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
