/* keys: private to the policy module. policy.c reads the file line by line
 * and tracks sections; keys.c knows every key and checks its value. */
#pragma once

#include "policy.h"

#define POLICY_N_GADGET_KEYS 15
#define POLICY_KEY_NAME 0 /* index of Name= in gadget_seen */
#define POLICY_KEY_EXEC 1
#define POLICY_QUOTE_MAX 96

enum policy_section {
        POLICY_SECT_NONE,    /* before the first section header */
        POLICY_SECT_GADGET,
        POLICY_SECT_BINDING, /* the last of p->bindings */
        POLICY_SECT_SKIP,    /* a bad or duplicate header: its keys are ignored */
};

struct policy_key;

/* A binding key kept until its section ends, when Type= is known. */
struct policy_pending {
        const struct policy_key *key;
        char *value;
        unsigned line;
};

/* The state of one parse; errors are reported at ->line. */
struct policy_ctx {
        const char *name;
        const char *text;
        size_t len, pos;
        unsigned line;
        struct policy *p;
        struct policy_errors *errs;
        size_t n_errors;
        bool oom, stop;
        enum policy_section sect;
        unsigned gadget_line;                        /* first [Gadget], 0 = none */
        unsigned gadget_seen[POLICY_N_GADGET_KEYS];  /* line each key was given on */
        struct policy_pending *pend;
        size_t n_pend;
};

void policy_err(struct policy_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Notes an allocation failure: the parse stops and returns -ENOMEM. */
void policy_oom(struct policy_ctx *c);
/* s in double quotes, escaped and shortened to fit size: for messages. */
const char *policy_quote(char *buf, size_t size, const char *s);
#define POLICY_Q(s) policy_quote((char[POLICY_QUOTE_MAX]){ 0 }, POLICY_QUOTE_MAX, (s))

void policy_gadget_key(struct policy_ctx *c, const char *key, const char *value);
void policy_binding_key(struct policy_ctx *c, const char *key, const char *value);
/* Checks the binding just read against its Type=; called when its section ends. */
void policy_binding_end(struct policy_ctx *c);
void policy_pending_clear(struct policy_ctx *c);
