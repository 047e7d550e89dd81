/* bind_value: the one operation of text and secret bindings, get: the
 * policy's Value= or the secret file read at the gadget's start. */
#include <string.h>

#include "bindings.h"
#include "contract.h"
#include "ops.h"
#include "policy.h"
#include "value.h"

/* Answers with a text or secret binding's value. */
static void reply_value(struct binding_req *r, const char *value)
{
        Gadget__Value *v = value_new_string(value);
        if (!v) {
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        bindings_reply(r, v, 0, NULL, strlen(value));
        value_free(v);
}

static void text_get(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        reply_value(r, b->value);
}

static void secret_get(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        reply_value(r, r->g->secrets[(size_t)(b - r->g->policy->bindings)]);
}

static struct binding_op text_ops[] = {
        BINDING_OP("get() -> string", NULL, text_get),
};
static struct binding_op secret_ops[] = {
        BINDING_OP("get() -> string", NULL, secret_get),
};

const struct binding_type_ops bind_text_type = { BINDING_TEXT, text_ops, 1 };
const struct binding_type_ops bind_secret_type = { BINDING_SECRET, secret_ops, 1 };
