/* types_int: what the files of the types module share (types.c,
 * types_parse.c, types_check.c, types_schema.c); not for other modules. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include "types.h"

struct type_sig {
        char *name;
        struct type *params;        /* a record */
        const struct type *result;
        SLIST_HEAD(, type) types;   /* every type of the signature, to free; zeroed: empty */
};

/* Text being written: into a fixed buffer (cut, always NUL-terminated,
 * n counts what did not fit too), or growing (grow: realloc'd; oom set on
 * failure). */
struct types_out {
        char *buf;
        size_t cap, n;
        bool grow, oom;
};

void types_out_add(struct types_out *o, const char *s, size_t len);
void types_out_str(struct types_out *o, const char *s);
__attribute__((format(printf, 2, 3)))
void types_out_fmt(struct types_out *o, const char *fmt, ...);
/* Appends t in canonical form. */
void types_out_type(struct types_out *o, const struct type *t);
/* The shortest text of a finite d that reads back exactly (at most 24 bytes). */
void types_fmt_double(char buf[32], double d);
/* Whether t accepts null (nullable, null, any, or a union with a null slot). */
bool types_admits_null(const struct type *t);
