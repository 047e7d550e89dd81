/* ops: the operations of the binding types. Each type's file
 * (bind_TYPE.c) defines its operations as one table, a struct
 * binding_type_ops; ops.c lists those tables, and bindings.c dispatches
 * every binding call through them. Adding an operation is a row in its
 * type's table and its handler; adding a type, its file and its table's
 * name in ops.c (and, for a type with state, its store halves: kv_job.h's
 * struct kv_type). */
#pragma once

#include <stddef.h>

#include "bindings.h"
#include "policy.h"

struct type_sig;
struct kv_type;

/* One operation: its signature (whose name is the operation's, as
 * libgadget and proto/contract.h's GADGET_OP_* call it), the check of its
 * arguments and its handler. */
struct binding_op {
        const char *signature;     /* its name, arguments and result, in the type language */
        binding_check_fn *check;   /* what the signature cannot say; NULL: nothing more */
        binding_fn *handle;
        const char *name;          /* the signature's name, set by binding_ops_open */
        struct type_sig *sig;      /* parsed by binding_ops_open */
};

/* A row of a type's table: its signature, check and handler. */
#define BINDING_OP(signature, check, handle) { (signature), (check), (handle), NULL, NULL }

/* A binding type's operations, what it keeps per binding of a gadget
 * while the gadget runs (NULL hooks: nothing), and what it keeps on the
 * gadget's store (NULL: nothing). */
struct binding_type_ops {
        enum binding_type type;
        struct binding_op *ops;
        size_t n_ops;
        /* Its operations on the store and their two halves (kv_job.h),
         * defined in its file: the store is opened with every type's. */
        const struct kv_type *store;
        /* Reads what binding b keeps, at each start of the gadget (a
         * secret's file): 0 with *state set, or -errno with why. */
        int (*load)(const struct policy_binding *b, void **state, char *why, size_t len);
        /* Frees what load kept (wiping a secret). */
        void (*unload)(void *state);
};

/* What load kept for binding b of the gadget, NULL if nothing. */
void *bindings_state(const struct gadget_bindings *g, const struct policy_binding *b);
/* The table of type, NULL if it has none. */
const struct binding_type_ops *binding_type_find(enum binding_type type);

/* The types' store halves (their struct kv_type), in the order of the
 * list, into out (room for max): how many there are (more than max: the
 * first max written). */
size_t binding_store_types(const struct kv_type **out, size_t max);

/* Parses every row's signature (once, at start). 0, or -errno with why:
 * a row of a type's table is wrong. */
int binding_ops_open(char *err, size_t len);

/* The row of type's operation name, NULL if it has none. */
const struct binding_op *binding_op_find(enum binding_type type, const char *name);
/* type's operations, "get, put, delete, list", into buf. */
void binding_op_names(enum binding_type type, char *buf, size_t len);
