/* bindings: gadgetd's side of binding calls. Every call is checked against
 * the calling gadget's policy (the gadget's own claims count for nothing),
 * carried out by the type's module, answered, and audited. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gadget.pb-c.h"

struct unit;
struct policy_binding;
struct event_base;
struct audit;
struct http;

/* What binding calls may use of gadgetd, given by the unit's owner
 * (struct unit_hooks): no module here reaches through a unit into the
 * daemon. */
struct bindings_env {
        struct event_base *base;
        const char *state_dir;      /* the gadgets' kv stores are below it */
        struct audit *audit;
        struct http *http;
        /* The loaded gadget of that name, NULL if none (gadget bindings). */
        struct unit *(*find)(void *arg, const char *name);
        void *find_arg;
};

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
/* The gadget ended: pending requests lose their caller. */
void bindings_orphan(struct unit *u);
/* Reads the unit's secret files (at each start). 0 or -errno with why. */
int bindings_load_secrets(struct unit *u, char *why, size_t len);
void bindings_free_secrets(struct unit *u);

/* An operation's handler: carries out r's operation on b and answers r
 * itself (now or later); args passed the row's check. */
typedef void binding_fn(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args);
/* The check of an operation's arguments, before anything is done (the
 * policy's own limits are the handler's): 0, or -EINVAL with why. */
typedef int binding_check_fn(const Gadget__Value *args, char *why, size_t len);

/* The handlers and checks of the type modules, the cells of the table in
 * ops.c. */
binding_fn bind_kv_get, bind_kv_put, bind_kv_delete, bind_kv_list;
binding_check_fn bind_kv_check_key, bind_kv_check_put, bind_kv_check_list;
binding_fn bind_gadget_call;
binding_check_fn bind_gadget_check_call;
binding_fn bind_http_request;
binding_check_fn bind_http_check_request;
binding_fn bind_text_get, bind_secret_get;
