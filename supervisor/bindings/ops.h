/* ops: the operations of every binding type, one table (ops.c). A row
 * is a type, an operation's name, the check of its arguments and its
 * handler; bindings.c dispatches every binding call through it. Adding an
 * operation is a row there and its handler. */
#pragma once

#include <stddef.h>

#include "bindings.h"
#include "policy.h"

struct type_sig;

struct binding_op {
        enum binding_type type;
        const char *name;          /* GADGET_OP_* of contract.h */
        const char *signature;     /* its arguments and result, in the type language */
        struct type_sig *sig;      /* parsed by binding_ops_open */
        binding_check_fn *check;   /* what the signature cannot say; NULL: nothing more */
        binding_fn *handle;
};

/* Parses every row's signature (once, at start). 0, or -errno with why:
 * a row of this table is wrong. */
int binding_ops_open(char *err, size_t len);

/* The row of type's operation name, NULL if it has none. */
const struct binding_op *binding_op_find(enum binding_type type, const char *name);
/* type's operations, "get, put, delete, list", into buf. */
void binding_op_names(enum binding_type type, char *buf, size_t len);
