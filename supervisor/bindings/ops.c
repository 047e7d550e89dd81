/* ops: the list of the binding types' tables and the lookups over it
 * (ops.h). */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "types.h"

/* Every binding type's table, each defined in its type's file
 * (bind_TYPE.c): adding a type is its table's name in these two lines. */
extern const struct binding_type_ops bind_kv_type, bind_gadget_type, bind_http_type, bind_text_type,
        bind_secret_type, bind_alarm_type;
static const struct binding_type_ops *const types[] = {
        &bind_kv_type, &bind_gadget_type, &bind_http_type, &bind_text_type, &bind_secret_type, &bind_alarm_type,
};

#define N_TYPES (sizeof types / sizeof *types)

const struct binding_type_ops *binding_type_find(enum binding_type type)
{
        for (size_t i = 0; i < N_TYPES; i++)
                if (types[i]->type == type)
                        return types[i];
        return NULL;
}

/* Parses op's signature; its name becomes the operation's. */
static int op_open(struct binding_op *op, char *err, size_t len)
{
        char why[160];
        if (op->sig)
                return 0;
        int e = types_sig_parse(op->signature, &op->sig, why, sizeof why);
        if (e < 0) {
                snprintf(err, len, "binding operation %s: %s", op->signature, why);
                return e;
        }
        op->name = types_sig_name(op->sig);
        return 0;
}

size_t binding_store_types(const struct kv_type **out, size_t max)
{
        size_t n = 0;
        for (size_t t = 0; t < N_TYPES; t++)
                if (types[t]->store) {
                        if (n < max)
                                out[n] = types[t]->store;
                        n++;
                }
        return n;
}

int binding_ops_open(char *err, size_t len)
{
        for (size_t t = 0; t < N_TYPES; t++)
                for (size_t i = 0; i < types[t]->n_ops; i++) {
                        int e = op_open(&types[t]->ops[i], err, len);
                        if (e < 0)
                                return e;
                }
        return 0;
}

size_t binding_op_signatures(enum binding_type type, const char **out, size_t max)
{
        const struct binding_type_ops *t = binding_type_find(type);
        size_t n = 0;
        for (size_t i = 0; t && i < t->n_ops && n < max; i++)
                out[n++] = t->ops[i].signature;
        return n;
}

const struct binding_op *binding_op_find(enum binding_type type, const char *name)
{
        const struct binding_type_ops *t = binding_type_find(type);
        for (size_t i = 0; t && i < t->n_ops; i++)
                if (t->ops[i].name && strcmp(t->ops[i].name, name) == 0)
                        return &t->ops[i];
        return NULL;
}

void binding_op_names(enum binding_type type, char *buf, size_t len)
{
        const struct binding_type_ops *t = binding_type_find(type);
        size_t o = 0;
        buf[0] = '\0';
        for (size_t i = 0; t && i < t->n_ops && o < len; i++)
                o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", t->ops[i].name);
}
