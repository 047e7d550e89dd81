/* types: the type language of typed methods. A gadget declares a signature
 * per method, e.g. "greet(name: string, times?: int(1..10)) -> string";
 * gadgetd checks every call's arguments and every result against it.
 * Parse, print (canonical form), check a Gadget__Value, and JSON Schema.
 * Pure code: libc and the generated Value only (libgadget links it into
 * static gadgets). The language is described in proto/README.md, "Method
 * signatures (the type language)".
 *
 *   sig    := NAME '(' [param {',' param}] ')' ['->' type]
 *   param  := IDENT ['?'] ':' type
 *   type   := alt {'|' alt}
 *   alt    := base ['?']
 *   base   := PRIM [bounds] | ('list' | 'map') '<' type '>' [bounds]
 *           | '{' [field {',' field}] '}' | '(' type ')'
 *   field  := IDENT ['?'] ':' type
 *   PRIM   := 'null' | 'bool' | 'int' | 'double' | 'string' | 'bytes' | 'any'
 *   bounds := '(' [NUMBER] '..' [NUMBER] ')'   (int, double, string, bytes,
 *                                               list, map; at least one)
 *
 * NAME follows gadget_method_name_ok, IDENT gadget_identifier_ok
 * (contract.h). Spaces and tabs may separate tokens. No '->': the method
 * returns null. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include "gadget.pb-c.h"

/* Limits: a signature comes from an untrusted gadget. */
#define TYPES_MAX_TEXT 4096   /* bytes of a signature, as given and as printed */
#define TYPES_MAX_DEPTH 16    /* nesting of list<>, map<>, {} and () */
#define TYPES_MAX_NODES 256   /* types in one signature */
#define TYPES_MAX_FIELDS 64   /* fields of one record, parameters of a method */

enum type_kind {
        TYPE_NULL,
        TYPE_BOOL,
        TYPE_INT,
        TYPE_DOUBLE,
        TYPE_STRING,
        TYPE_BYTES,
        TYPE_ANY,
        TYPE_LIST,
        TYPE_MAP,    /* map<T>: any string keys */
        TYPE_RECORD, /* {a: T, b?: U}: closed */
        TYPE_UNION,  /* T | U: at most one alternative per kind of value */
};

/* The kinds of values a union tells apart (a record takes maps). */
enum type_slot {
        TYPE_SLOT_NULL,
        TYPE_SLOT_BOOL,
        TYPE_SLOT_INT,
        TYPE_SLOT_DOUBLE,
        TYPE_SLOT_STRING,
        TYPE_SLOT_BYTES,
        TYPE_SLOT_LIST,
        TYPE_SLOT_MAP,
        TYPE_SLOTS
};

struct type;

struct type_field {
        char *name;           /* gadget_identifier_ok */
        bool optional;        /* may be absent (present, it must match type) */
        const struct type *type;
};

/* One type of a parsed signature; read-only for users of the module. */
struct type {
        enum type_kind kind;
        bool nullable;          /* T?: null is accepted as well */
        bool has_min, has_max;  /* bounds: values of int (imin/imax) and double
                                 * (dmin/dmax); lengths (imin/imax) of string
                                 * (code points), bytes, list (items), map (entries) */
        int64_t imin, imax;
        double dmin, dmax;
        const struct type *elem;          /* list, map */
        struct type_field *fields;        /* record, in declared order */
        size_t n_fields, n_required;
        const struct type_field **by_name; /* record: fields sorted by name */
        const struct type **alts;         /* union: >= 2, none a union */
        size_t n_alts;
        const struct type *slot[TYPE_SLOTS]; /* union: the alternative per kind */
        SLIST_ENTRY(type) link;           /* in the signature's list of types */
};

struct type_sig;

/* Parses a signature (NUL-terminated text). 0 with *out set; -EINVAL with
 * "column N: what" (or a limit) in err; -ENOMEM. */
int types_sig_parse(const char *text, struct type_sig **out, char *err, size_t errlen);
void types_sig_free(struct type_sig *sig);
/* How many types the signature holds (what it costs whoever keeps it:
 * about one struct type each). */
size_t types_sig_nodes(const struct type_sig *sig);
/* The method's name; its arguments as one record type (the parameters are
 * its fields); its result type (null when the signature has no '->'). */
const char *types_sig_name(const struct type_sig *sig);
const struct type *types_sig_params(const struct type_sig *sig);
const struct type *types_sig_result(const struct type_sig *sig);

/* The canonical text ("f(a: int, b?: list<string>) -> {id: int}"): one
 * space after ':' and ',', around '|' and after '->'; it parses back to a
 * signature that prints the same. As snprintf: writes at most len bytes
 * (NUL-terminated when len > 0), returns the full length. */
int types_sig_print(const struct type_sig *sig, char *buf, size_t len);
int types_print(const struct type *t, char *buf, size_t len);

/* Checks v against t. path holds where v is ("args"), pathlen its buffer's
 * size; it is left as it is: the steps below it (".name", "[2]") are
 * written into the message only when there is one, so a check that
 * passes formats nothing. v must have
 * passed value_check (as every value gadgetd receives has). 0, or -EINVAL
 * with "PATH: what" in err: "args.name: expected string, got int",
 * "args: unknown field \"x\"", "args.title: missing required field",
 * "args.times: 500 is above the maximum 100". No allocation; linear in
 * v's size; recursion bounded by t's depth. */
int types_check(const struct type *t, const Gadget__Value *v, char *path, size_t pathlen,
                char *err, size_t errlen);
/* A call's arguments: a map (the record of the parameters), or null when
 * no parameter is required. Messages start with "args"; the caller names
 * the method ("greet: args.name: expected string, got int"). */
int types_check_args(const struct type_sig *sig, const Gadget__Value *args, char *err, size_t errlen);
/* A method's result. Messages start with "result". */
int types_check_result(const struct type_sig *sig, const Gadget__Value *res, char *err, size_t errlen);
/* The name of a value's kind in messages: null, bool, int, double, string,
 * bytes, list, map. */
const char *types_value_kind(const Gadget__Value *v);

/* The method as JSON (malloc'd text, NULL when out of memory):
 * {"name": N, "signature": CANONICAL, "params": SCHEMA, "result": SCHEMA},
 * each SCHEMA a JSON Schema (2020-12) of the JSON that gadgetctl and the
 * gateway read and write (proto/json.h: bytes are {"$bytes": BASE64}). */
char *types_json_schema(const struct type_sig *sig);
