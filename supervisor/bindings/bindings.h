/* bindings: gadgetd's side of binding calls. Every call is checked against
 * the calling gadget's policy (the gadget's own claims count for nothing),
 * carried out by the type's module, answered, and audited. */
#pragma once

#include <stdint.h>
#include <time.h>

#include "gadget.pb-c.h"

struct unit;
struct policy_binding;

/* One binding call being carried out. Async operations keep it until they
 * answer; if the calling gadget ends first, unit is set to NULL and the
 * answer goes nowhere. */
struct binding_req {
        struct unit *u;
        uint64_t id;
        char binding[72], op[72];
        struct timespec start;
        uint64_t bytes_in;
        struct binding_req *next;   /* in the unit's list of pending calls */
};

/* Entry point from the unit's peer. */
void bindings_handle(struct unit *u, const Gadget__BindingCall *bc);
/* Answers (value, or code and message), audits, frees r. */
void bindings_reply(struct binding_req *r, const Gadget__Value *value, int code, const char *message,
                    uint64_t bytes_out);
/* Answers that op is not one of b's type. */
void bindings_bad_op(struct binding_req *r, const struct policy_binding *b);
/* The gadget ended: pending requests lose their caller. */
void bindings_orphan(struct unit *u);
/* Reads the unit's secret files (at each start). 0 or -errno with why. */
int bindings_load_secrets(struct unit *u, char *why, size_t len);
void bindings_free_secrets(struct unit *u);

/* The type modules; each answers r itself (now or later). */
void bind_kv(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
void bind_gadget(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
void bind_http(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
