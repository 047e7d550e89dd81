/* ops: the operations of every binding type, one table (ops.c). A row
 * is a type, an operation's name, the check of its arguments and its
 * handler; bindings.c dispatches every binding call through it. Adding an
 * operation is a row there and its handler. */
#pragma once

#include <stddef.h>

#include "bindings.h"
#include "policy.h"

struct binding_op {
        enum binding_type type;
        const char *name;          /* GADGET_OP_* of contract.h */
        binding_check_fn *check;   /* NULL: its arguments are not read */
        binding_fn *handle;
};

/* The row of type's operation name, NULL if it has none. */
const struct binding_op *binding_op_find(enum binding_type type, const char *name);
/* type's operations, "get, put, delete, list", into buf. */
void binding_op_names(enum binding_type type, char *buf, size_t len);
