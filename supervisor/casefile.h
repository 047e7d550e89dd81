/* casefile: the test file of `gadgetd test FILE`, read and checked before
 * anything runs. Lines:
 *   policy FILE              the gadget's policy (relative to the file), once
 *   call METHOD [JSON]       a call of METHOD with JSON arguments (default null)
 *   expect JSON              its result must equal JSON (maps in any order)
 *   error CODE               it must fail with CODE (not_found or 10 ...)
 *   fake BINDING OP JSON     binding calls BINDING.OP answered JSON, not made
 *   fake BINDING OP error CODE [MESSAGE]
 * and # comments. Each call is followed by its expect or error line.
 * Several fakes of one BINDING.OP answer in turn, the last one from then on. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gadget.pb-c.h"

struct case_call {
        unsigned line;               /* of its call line */
        char *method;
        Gadget__Value *args;
        Gadget__Value *expect;       /* the result wanted, or NULL: the error code */
        char *expect_json;           /* as written, for the report */
        int code;
};

struct case_fake {
        unsigned line;
        char *binding, *op;
        Gadget__Value *value;        /* the answer, or NULL: code and message */
        int code;
        char *message;
        bool used;
};

struct casefile {
        char *policy;                /* the policy's path (made relative to the file's folder) */
        struct case_call *calls;
        size_t n_calls;
        struct case_fake *fakes;
        size_t n_fakes;
};

/* Reads path into cf. 0, or -1 with "FILE:LINE: why" in err (cf freed). */
int casefile_read(const char *path, struct casefile *cf, char *err, size_t len);
void casefile_free(struct casefile *cf);
/* The fake answering binding.op now (marked used), or NULL. */
struct case_fake *casefile_fake(struct casefile *cf, const char *binding, const char *op);
/* Whether two values are equal: maps in any order, an int equal to a
 * double of its value. */
bool casefile_equal(const Gadget__Value *a, const Gadget__Value *b);
/* A GADGET_E* code from its name (not_found) or number; -1 if neither. */
int casefile_code(const char *s);
