/* bind_value: the one operation of text and secret bindings, get: the
 * policy's Value= or the secret file read at each start of the gadget
 * (kept wiped on free: the secret type's load and unload). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bindings.h"
#include "contract.h"
#include "ops.h"
#include "policy.h"
#include "system/log.h"
#include "system/secret_file.h"
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
        const char *secret = bindings_state(r->g, b);
        if (!secret) { /* its policy was replaced since the gadget started */
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, "the secret was not read at the gadget's start", 0);
                return;
        }
        reply_value(r, secret);
}

/* Reads a secret binding's file, at each start of the gadget. */
static int secret_load(const struct policy_binding *b, void **state, char *why, size_t len)
{
        char *secret;
        size_t n;
        int e = secret_file_read(b->file, b->max_size, SECRET_ANY_MODE, NULL, &secret, &n);
        if (e < 0) {
                char q[512];
                log_escape(b->file, strlen(b->file), q, sizeof q);
                if (e == -EFBIG)
                        snprintf(why, len, "secret %s: %s is larger than MaxSize= (%llu bytes)", b->name, q,
                                 (unsigned long long)b->max_size);
                else
                        snprintf(why, len, "secret %s: cannot read %s: %s", b->name, q, secret_file_why(e));
                return e;
        }
        *state = secret;
        return 0;
}

/* Wipes and frees a secret. */
static void secret_unload(void *state)
{
        char *secret = state;
        if (!secret)
                return;
        explicit_bzero(secret, strlen(secret));
        free(secret);
}

static struct binding_op text_ops[] = {
        BINDING_OP("get() -> string", NULL, text_get),
};
static struct binding_op secret_ops[] = {
        BINDING_OP("get() -> string", NULL, secret_get),
};

const struct binding_type_ops bind_text_type = {
        .type = BINDING_TEXT, .ops = text_ops, .n_ops = 1,
};
const struct binding_type_ops bind_secret_type = {
        .type = BINDING_SECRET, .ops = secret_ops, .n_ops = 1,
        .load = secret_load, .unload = secret_unload,
};
