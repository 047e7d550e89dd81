/* types_schema: a method's signature as JSON Schema (2020-12), written
 * with a small string builder: libgadget links this too, without jansson.
 * The schemas describe the JSON of proto/json.h (gadgetctl, the gateway):
 * bytes are {"$bytes": "<base64>"}. Pure code. */
#include "types_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends s as a JSON string. */
static void json_str(struct types_out *o, const char *s)
{
        types_out_str(o, "\"");
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '"' || c == '\\')
                        types_out_fmt(o, "\\%c", c);
                else if (c < 0x20)
                        types_out_fmt(o, "\\u%04x", c);
                else
                        types_out_add(o, s, 1);
        }
        types_out_str(o, "\"");
}

/* Appends ,"key":N for the bounds of t present (integers). */
static void int_bounds(struct types_out *o, const struct type *t, const char *min, const char *max)
{
        if (t->has_min)
                types_out_fmt(o, ",\"%s\":%lld", min, (long long)t->imin);
        if (t->has_max)
                types_out_fmt(o, ",\"%s\":%lld", max, (long long)t->imax);
}

static void schema(struct types_out *o, const struct type *t);

/* Bytes as json.c writes them. Lengths of the base64 text (4 per 3 bytes
 * started) are bounded as the byte counts imply: necessary, not exact. */
static void schema_bytes(struct types_out *o, const struct type *t)
{
        types_out_str(o, "{\"type\":\"object\",\"properties\":{\"$bytes\":"
                         "{\"type\":\"string\",\"contentEncoding\":\"base64\"");
        if (t->has_min)
                types_out_fmt(o, ",\"minLength\":%llu", ((unsigned long long)t->imin + 2) / 3 * 4);
        if (t->has_max)
                types_out_fmt(o, ",\"maxLength\":%llu", ((unsigned long long)t->imax + 2) / 3 * 4);
        types_out_str(o, "}},\"required\":[\"$bytes\"],\"additionalProperties\":false}");
}

/* A closed record: properties, required, no other properties. */
static void schema_record(struct types_out *o, const struct type *t)
{
        types_out_str(o, "{\"type\":\"object\",\"properties\":{");
        for (size_t i = 0; i < t->n_fields; i++) {
                types_out_str(o, i ? "," : "");
                json_str(o, t->fields[i].name);
                types_out_str(o, ":");
                schema(o, t->fields[i].type);
        }
        types_out_str(o, "}");
        if (t->n_required > 0) {
                types_out_str(o, ",\"required\":[");
                for (size_t i = 0, n = 0; i < t->n_fields; i++) {
                        if (t->fields[i].optional)
                                continue;
                        types_out_str(o, n++ ? "," : "");
                        json_str(o, t->fields[i].name);
                }
                types_out_str(o, "]");
        }
        types_out_str(o, ",\"additionalProperties\":false}");
}

/* The schema of t without its nullability. */
static void schema_base(struct types_out *o, const struct type *t)
{
        char a[32];

        switch (t->kind) {
        case TYPE_NULL:
                types_out_str(o, "{\"type\":\"null\"}");
                return;
        case TYPE_BOOL:
                types_out_str(o, "{\"type\":\"boolean\"}");
                return;
        case TYPE_ANY:
                types_out_str(o, "{}");
                return;
        case TYPE_INT:
                types_out_str(o, "{\"type\":\"integer\"");
                int_bounds(o, t, "minimum", "maximum");
                break;
        case TYPE_DOUBLE:
                types_out_str(o, "{\"type\":\"number\"");
                if (t->has_min) {
                        types_fmt_double(a, t->dmin);
                        types_out_fmt(o, ",\"minimum\":%s", a);
                }
                if (t->has_max) {
                        types_fmt_double(a, t->dmax);
                        types_out_fmt(o, ",\"maximum\":%s", a);
                }
                break;
        case TYPE_STRING:
                /* JSON Schema counts code points, as the checker does. */
                types_out_str(o, "{\"type\":\"string\"");
                int_bounds(o, t, "minLength", "maxLength");
                break;
        case TYPE_BYTES:
                schema_bytes(o, t);
                return;
        case TYPE_LIST:
                types_out_str(o, "{\"type\":\"array\",\"items\":");
                schema(o, t->elem);
                int_bounds(o, t, "minItems", "maxItems");
                break;
        case TYPE_MAP:
                types_out_str(o, "{\"type\":\"object\",\"additionalProperties\":");
                schema(o, t->elem);
                int_bounds(o, t, "minProperties", "maxProperties");
                break;
        case TYPE_RECORD:
                schema_record(o, t);
                return;
        case TYPE_UNION:
                types_out_str(o, "{\"anyOf\":[");
                for (size_t i = 0; i < t->n_alts; i++) {
                        types_out_str(o, i ? "," : "");
                        schema(o, t->alts[i]);
                }
                types_out_str(o, t->nullable ? ",{\"type\":\"null\"}]}" : "]}");
                return;
        }
        types_out_str(o, "}");
}

static void schema(struct types_out *o, const struct type *t)
{
        if (!t->nullable || t->kind == TYPE_UNION) {
                schema_base(o, t);
                return;
        }
        types_out_str(o, "{\"anyOf\":[");
        schema_base(o, t);
        types_out_str(o, ",{\"type\":\"null\"}]}");
}

char *types_json_schema(const struct type_sig *sig)
{
        struct types_out o = { .grow = true };
        char *text = malloc(TYPES_MAX_TEXT + 1);

        if (!text)
                return NULL;
        types_sig_print(sig, text, TYPES_MAX_TEXT + 1);
        types_out_str(&o, "{\"name\":");
        json_str(&o, sig->name);
        types_out_str(&o, ",\"signature\":");
        json_str(&o, text);
        types_out_str(&o, ",\"params\":");
        schema(&o, sig->params);
        types_out_str(&o, ",\"result\":");
        schema(&o, sig->result);
        types_out_str(&o, "}");
        free(text);
        if (o.oom) {
                free(o.buf);
                return NULL;
        }
        return o.buf;
}
