/* types: signatures of typed methods: their canonical text, accessors and
 * freeing (parsing is types_parse.c, checking types_check.c, JSON Schema
 * types_schema.c). Pure code. */
#include "types_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void types_out_add(struct types_out *o, const char *s, size_t len)
{
        if (o->grow) {
                if (o->oom)
                        return;
                if (o->n + len + 1 > o->cap) {
                        size_t cap = o->cap ? o->cap : 256;
                        while (cap < o->n + len + 1)
                                cap *= 2;
                        char *b = realloc(o->buf, cap);
                        if (!b) {
                                o->oom = true;
                                return;
                        }
                        o->buf = b;
                        o->cap = cap;
                }
                memcpy(o->buf + o->n, s, len);
                o->n += len;
                o->buf[o->n] = '\0';
                return;
        }
        if (o->cap > 0 && o->n < o->cap - 1) {
                size_t room = o->cap - 1 - o->n;
                memcpy(o->buf + o->n, s, len < room ? len : room);
                o->buf[o->n + (len < room ? len : room)] = '\0';
        }
        o->n += len;
}

void types_out_str(struct types_out *o, const char *s)
{
        types_out_add(o, s, strlen(s));
}

void types_out_fmt(struct types_out *o, const char *fmt, ...)
{
        char tmp[256];
        va_list ap;

        va_start(ap, fmt);
        int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
        va_end(ap);
        if (n > 0)
                types_out_add(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void types_fmt_double(char buf[32], double d)
{
        /* Whole numbers of up to 17 digits without an exponent: "1500". */
        if (d > -1e17 && d < 1e17 && d == (double)(int64_t)d && !(d == 0 && signbit(d))) {
                snprintf(buf, 32, "%lld", (long long)d);
                return;
        }
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, 32, "%.*g", prec, d);
                if (strtod(buf, NULL) == d)
                        return;
        }
}

bool types_admits_null(const struct type *t)
{
        return t->nullable || t->kind == TYPE_NULL || t->kind == TYPE_ANY ||
               (t->kind == TYPE_UNION && t->slot[TYPE_SLOT_NULL]);
}

static const char *const kind_names[] = {
        [TYPE_NULL] = "null", [TYPE_BOOL] = "bool", [TYPE_INT] = "int",
        [TYPE_DOUBLE] = "double", [TYPE_STRING] = "string", [TYPE_BYTES] = "bytes",
        [TYPE_ANY] = "any", [TYPE_LIST] = "list", [TYPE_MAP] = "map",
};

/* Appends one end of a bound: a double's, or an integer's (values of int,
 * lengths of the rest). */
static void out_end(struct types_out *o, const struct type *t, int64_t i, double d)
{
        char num[32];

        if (t->kind == TYPE_DOUBLE)
                types_fmt_double(num, d);
        else
                snprintf(num, sizeof num, "%lld", (long long)i);
        types_out_str(o, num);
}

/* Appends "(MIN..MAX)" of a bounded type. */
static void out_bounds(struct types_out *o, const struct type *t)
{
        if (!t->has_min && !t->has_max)
                return;
        types_out_str(o, "(");
        if (t->has_min)
                out_end(o, t, t->imin, t->dmin);
        types_out_str(o, "..");
        if (t->has_max)
                out_end(o, t, t->imax, t->dmax);
        types_out_str(o, ")");
}

/* Appends the fields of a record: "a: T, b?: U". */
static void out_fields(struct types_out *o, const struct type *t)
{
        for (size_t i = 0; i < t->n_fields; i++) {
                if (i > 0)
                        types_out_str(o, ", ");
                types_out_str(o, t->fields[i].name);
                types_out_str(o, t->fields[i].optional ? "?: " : ": ");
                types_out_type(o, t->fields[i].type);
        }
}

void types_out_type(struct types_out *o, const struct type *t)
{
        switch (t->kind) {
        case TYPE_UNION:
                /* A nullable union needs its parentheses: "(int | string)?". */
                if (t->nullable)
                        types_out_str(o, "(");
                for (size_t i = 0; i < t->n_alts; i++) {
                        if (i > 0)
                                types_out_str(o, " | ");
                        types_out_type(o, t->alts[i]);
                }
                types_out_str(o, t->nullable ? ")?" : "");
                return;
        case TYPE_RECORD:
                types_out_str(o, "{");
                out_fields(o, t);
                types_out_str(o, "}");
                break;
        case TYPE_LIST:
        case TYPE_MAP:
                types_out_str(o, kind_names[t->kind]);
                types_out_str(o, "<");
                types_out_type(o, t->elem);
                types_out_str(o, ">");
                out_bounds(o, t);
                break;
        default:
                types_out_str(o, kind_names[t->kind]);
                out_bounds(o, t);
                break;
        }
        if (t->nullable)
                types_out_str(o, "?");
}

/* Returns what snprintf would for o's text. */
static int out_done(const struct types_out *o)
{
        return o->n > (size_t)INT32_MAX ? INT32_MAX : (int)o->n;
}

int types_print(const struct type *t, char *buf, size_t len)
{
        struct types_out o = { .buf = buf, .cap = len };

        if (len > 0)
                buf[0] = '\0';
        types_out_type(&o, t);
        return out_done(&o);
}

int types_sig_print(const struct type_sig *sig, char *buf, size_t len)
{
        struct types_out o = { .buf = buf, .cap = len };

        if (len > 0)
                buf[0] = '\0';
        types_out_str(&o, sig->name);
        types_out_str(&o, "(");
        out_fields(&o, sig->params);
        types_out_str(&o, ")");
        /* No arrow for a plain null result: "increment()" returns null. */
        if (sig->result->kind != TYPE_NULL || sig->result->nullable) {
                types_out_str(&o, " -> ");
                types_out_type(&o, sig->result);
        }
        return out_done(&o);
}

const char *types_sig_name(const struct type_sig *sig)
{
        return sig->name;
}

const struct type *types_sig_params(const struct type_sig *sig)
{
        return sig->params;
}

const struct type *types_sig_result(const struct type_sig *sig)
{
        return sig->result;
}

void types_sig_free(struct type_sig *sig)
{
        if (!sig)
                return;
        struct type *t;
        while ((t = SLIST_FIRST(&sig->types))) {
                SLIST_REMOVE_HEAD(&sig->types, link);
                for (size_t i = 0; i < t->n_fields; i++)
                        free(t->fields[i].name);
                free(t->fields);
                free(t->by_name);
                free(t->alts);
                free(t);
        }
        free(sig->name);
        free(sig);
}

const char *types_value_kind(const Gadget__Value *v)
{
        switch (v ? v->kind_case : GADGET__VALUE__KIND__NOT_SET) {
        case GADGET__VALUE__KIND_NULL_VALUE:
                return "null";
        case GADGET__VALUE__KIND_BOOL_VALUE:
                return "bool";
        case GADGET__VALUE__KIND_INT_VALUE:
                return "int";
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                return "double";
        case GADGET__VALUE__KIND_STRING_VALUE:
                return "string";
        case GADGET__VALUE__KIND_BYTES_VALUE:
                return "bytes";
        case GADGET__VALUE__KIND_LIST_VALUE:
                return "list";
        case GADGET__VALUE__KIND_MAP_VALUE:
                return "map";
        default:
                return "nothing";
        }
}

size_t types_sig_nodes(const struct type_sig *sig)
{
        size_t n = 0;
        const struct type *t;
        SLIST_FOREACH(t, &sig->types, link)
                n++;
        return n;
}
