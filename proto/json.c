/* json: JSON text <-> typed values, through jansson.
 *
 * Decisions beyond json.h:
 * - A double is rendered with the fewest digits (at most 17) that read back
 *   to the same double, always as a JSON number that reads back as a double
 *   ("1.0", "1e300"). jansson takes one precision per document, so all
 *   doubles of a document use the largest precision any of them needs.
 * - NaN and the infinities have no JSON form: they are rendered as null,
 *   as JavaScript's JSON.stringify does (the value does not round-trip).
 * - {"$bytes": S} is bytes only when S is a string; S must then be
 *   canonical standard base64 (A-Z a-z 0-9 + /, '=' padding, no line
 *   breaks, unused bits zero), else the text is refused. {"$bytes": 5} is
 *   an ordinary map. A map whose only key is "$bytes" with a string value
 *   therefore reads back as bytes (or is refused).
 * - Integers beyond int64 are refused by jansson ("too big integer").
 * - Limits of value.h apply both ways: json_from_value refuses a value
 *   nested deeper than VALUE_MAX_DEPTH, so whatever it writes reads back. */
#include "json.h"
#include "value.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#define BYTES_KEY "$bytes"

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Writes a message to err (if given) and returns e. */
__attribute__((format(printf, 4, 5)))
static int set_err(char *err, size_t errlen, int e, const char *fmt, ...)
{
        if (err && errlen > 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return e;
}

/* Standard base64 with padding of n bytes, malloc'd and NUL-terminated. */
static char *base64_encode(const uint8_t *p, size_t n)
{
        char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t w = (uint32_t)p[i] << 16;
                if (i + 1 < n)
                        w |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < n)
                        w |= p[i + 2];
                *o++ = b64_alphabet[w >> 18 & 63];
                *o++ = b64_alphabet[w >> 12 & 63];
                *o++ = i + 1 < n ? b64_alphabet[w >> 6 & 63] : '=';
                *o++ = i + 2 < n ? b64_alphabet[w & 63] : '=';
        }
        *o = '\0';
        return out;
}

/* The 6-bit value of one base64 digit, or -1. */
static int base64_digit(unsigned char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Decodes canonical padded base64 into a malloc'd buffer (NULL when empty).
 * Returns 0 or -EINVAL / -ENOMEM. */
static int base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
        size_t pad = 0, len, o = 0;
        uint8_t *buf = NULL;

        if (n % 4 != 0)
                return -EINVAL;
        while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
                pad++;
        len = n / 4 * 3 - pad;
        if (len > 0) {
                buf = malloc(len);
                if (!buf)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i += 4) {
                uint32_t w = 0;
                int digits = (i + 4 == n) ? 4 - (int)pad : 4;
                for (int k = 0; k < 4; k++) {
                        int d = k < digits ? base64_digit((unsigned char)s[i + k]) : 0;
                        if (d < 0)
                                goto bad;
                        w = w << 6 | (uint32_t)d;
                }
                /* Canonical form only: the bits padding leaves unused are 0. */
                if ((pad == 1 && i + 4 == n && (w & 0xff)) || (pad == 2 && i + 4 == n && (w & 0xffff)))
                        goto bad;
                for (int k = 0; k < 3 && o < len; k++)
                        buf[o++] = (uint8_t)(w >> (16 - 8 * k));
        }
        *out = buf;
        *outlen = len;
        return 0;
bad:
        free(buf);
        return -EINVAL;
}

/* One conversion from JSON: values seen so far and where to explain. */
struct conv {
        size_t nodes;
        char *err;
        size_t errlen;
};

static int from_json(struct conv *c, json_t *j, unsigned depth, Gadget__Value **out);

/* {"$bytes": "<base64>"} to a bytes value. */
static int bytes_from_json(struct conv *c, json_t *s, Gadget__Value **out)
{
        Gadget__Value *v;
        uint8_t *data;
        size_t len;
        int e = base64_decode(json_string_value(s), json_string_length(s), &data, &len);

        if (e == -ENOMEM)
                return set_err(c->err, c->errlen, e, "out of memory");
        if (e < 0)
                return set_err(c->err, c->errlen, e, "\"" BYTES_KEY "\" is not standard base64");
        v = value_new_bytes(NULL, 0);
        if (!v) {
                free(data);
                return set_err(c->err, c->errlen, -ENOMEM, "out of memory");
        }
        v->bytes_value.data = data;
        v->bytes_value.len = len;
        *out = v;
        return 0;
}

/* A JSON array (depth: containers around it, itself included) to a list. */
static int list_from_json(struct conv *c, json_t *a, unsigned depth, Gadget__Value **out)
{
        size_t n = json_array_size(a);
        Gadget__Value *v;
        Gadget__List *l;
        int e = 0;

        if (n > VALUE_MAX_ITEMS)
                return set_err(c->err, c->errlen, -EINVAL, "array of %zu items (most %u)", n, VALUE_MAX_ITEMS);
        v = value_new_list();
        if (!v)
                return set_err(c->err, c->errlen, -ENOMEM, "out of memory");
        l = v->list_value;
        if (n > 0 && !(l->items = malloc(n * sizeof(*l->items)))) {
                e = set_err(c->err, c->errlen, -ENOMEM, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                e = from_json(c, json_array_get(a, i), depth, &l->items[l->n_items]);
                if (e < 0)
                        goto out;
                l->n_items++;
        }
out:
        if (e < 0)
                value_free(v);
        else
                *out = v;
        return e;
}

/* A JSON object (depth: containers around it, itself included) to a map;
 * jansson has already refused repeated keys. */
static int map_from_json(struct conv *c, json_t *o, unsigned depth, Gadget__Value **out)
{
        size_t n = json_object_size(o);
        Gadget__Value *v;
        Gadget__Map *m;
        const char *key;
        json_t *item;
        int e = 0;

        if (n > VALUE_MAX_ITEMS)
                return set_err(c->err, c->errlen, -EINVAL, "object of %zu keys (most %u)", n, VALUE_MAX_ITEMS);
        v = value_new_map();
        if (!v)
                return set_err(c->err, c->errlen, -ENOMEM, "out of memory");
        m = v->map_value;
        if (n > 0 && !(m->entries = malloc(n * sizeof(*m->entries)))) {
                e = set_err(c->err, c->errlen, -ENOMEM, "out of memory");
                goto out;
        }
        json_object_foreach(o, key, item) {
                Gadget__MapEntry *me = malloc(sizeof(*me));
                if (!me) {
                        e = set_err(c->err, c->errlen, -ENOMEM, "out of memory");
                        goto out;
                }
                gadget__map_entry__init(me);
                m->entries[m->n_entries++] = me;
                me->key = strdup(key);
                if (!me->key) {
                        me->key = (char *)protobuf_c_empty_string;
                        e = set_err(c->err, c->errlen, -ENOMEM, "out of memory");
                        goto out;
                }
                e = from_json(c, item, depth, &me->value);
                if (e < 0)
                        goto out;
        }
out:
        if (e < 0)
                value_free(v);
        else
                *out = v;
        return e;
}

/* One JSON value enclosed by depth arrays/objects to a value. */
static int from_json(struct conv *c, json_t *j, unsigned depth, Gadget__Value **out)
{
        Gadget__Value *v = NULL;

        if (++c->nodes > VALUE_MAX_NODES)
                return set_err(c->err, c->errlen, -EINVAL, "more than %u values", VALUE_MAX_NODES);
        switch (json_typeof(j)) {
        case JSON_NULL:
                v = value_new_null();
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                v = value_new_bool(json_is_true(j));
                break;
        case JSON_INTEGER:
                v = value_new_int(json_integer_value(j));
                break;
        case JSON_REAL:
                v = value_new_double(json_real_value(j));
                break;
        case JSON_STRING:
                /* jansson checked UTF-8 and refused \u0000 (no JSON_ALLOW_NUL). */
                v = value_new_string_len(json_string_value(j), json_string_length(j));
                break;
        case JSON_OBJECT:
                if (json_object_size(j) == 1 && json_is_string(json_object_get(j, BYTES_KEY)))
                        return bytes_from_json(c, json_object_get(j, BYTES_KEY), out);
                /* fall through */
        case JSON_ARRAY:
                if (depth + 1 > VALUE_MAX_DEPTH)
                        return set_err(c->err, c->errlen, -EINVAL, "arrays/objects nested deeper than %u",
                                       VALUE_MAX_DEPTH);
                if (json_is_array(j))
                        return list_from_json(c, j, depth + 1, out);
                return map_from_json(c, j, depth + 1, out);
        }
        if (!v)
                return set_err(c->err, c->errlen, -ENOMEM, "out of memory");
        *out = v;
        return 0;
}

int json_to_value(const char *text, size_t len, Gadget__Value **out, char *err, size_t errlen)
{
        struct conv c = { .err = err, .errlen = errlen };
        Gadget__Value *v = NULL;
        json_error_t je;
        json_t *j;
        int e;

        if (!text && len > 0)
                return set_err(err, errlen, -EINVAL, "no JSON text");
        /* Why this is safe: jansson checks UTF-8, refuses \u0000, repeated
         * keys and nesting past JSON_PARSER_MAX_DEPTH; the conversion below
         * enforces the value.h limits before building anything. */
        j = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
        if (!j)
                return set_err(err, errlen, -EINVAL, "%s at line %d, column %d", je.text, je.line, je.column);
        e = from_json(&c, j, 0, &v);
        json_decref(j);
        if (e < 0)
                return e;
        *out = v;
        return 0;
}

/* Fewest significant digits (1..17) that print d so it reads back exactly,
 * without an exponent for magnitudes from 1e-4 to 1e16. */
static int real_precision(double d)
{
        char buf[40];
        double a = fabs(d);

        for (int p = 1; p < 17; p++) {
                snprintf(buf, sizeof(buf), "%.*g", p, d);
                if (strtod(buf, NULL) != d)
                        continue;
                if (strchr(buf, 'e') && a >= 1e-4 && a < 1e16)
                        continue;
                return p;
        }
        return 17;
}

/* Whether every finite double in v reads back exactly from "%.*g" with
 * precision prec (more digits than a double needs alone can still land on
 * the wrong side of it next to a power of two). */
static bool reals_round_trip(const Gadget__Value *v, int prec)
{
        char buf[40];

        switch (v->kind_case) {
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                if (!isfinite(v->double_value))
                        return true;
                snprintf(buf, sizeof(buf), "%.*g", prec, v->double_value);
                return strtod(buf, NULL) == v->double_value;
        case GADGET__VALUE__KIND_LIST_VALUE:
                for (size_t i = 0; i < v->list_value->n_items; i++)
                        if (!reals_round_trip(v->list_value->items[i], prec))
                                return false;
                return true;
        case GADGET__VALUE__KIND_MAP_VALUE:
                for (size_t i = 0; i < v->map_value->n_entries; i++)
                        if (!reals_round_trip(v->map_value->entries[i]->value, prec))
                                return false;
                return true;
        default:
                return true;
        }
}

static json_t *to_json(const Gadget__Value *v, unsigned depth, int *prec);

/* A list value to a JSON array, or NULL. */
static json_t *list_to_json(const Gadget__List *l, unsigned depth, int *prec)
{
        json_t *a;

        if (!l || (l->n_items > 0 && !l->items))
                return NULL;
        a = json_array();
        for (size_t i = 0; a && i < l->n_items; i++) {
                /* json_array_append_new takes the item even on failure. */
                if (json_array_append_new(a, to_json(l->items[i], depth, prec)) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        }
        return a;
}

/* A map value to a JSON object, or NULL (also for repeated keys). */
static json_t *map_to_json(const Gadget__Map *m, unsigned depth, int *prec)
{
        json_t *o;

        if (!m || (m->n_entries > 0 && !m->entries))
                return NULL;
        o = json_object();
        for (size_t i = 0; o && i < m->n_entries; i++) {
                const Gadget__MapEntry *e = m->entries[i];
                if (!e || !e->key || json_object_get(o, e->key) ||
                    json_object_set_new(o, e->key, to_json(e->value, depth, prec)) < 0) {
                        json_decref(o);
                        o = NULL;
                }
        }
        return o;
}

/* A bytes value to {"$bytes": "<base64>"}, or NULL. */
static json_t *bytes_to_json(const ProtobufCBinaryData *b)
{
        char *s;
        json_t *o;

        if (b->len > 0 && !b->data)
                return NULL;
        s = base64_encode(b->data, b->len);
        if (!s)
                return NULL;
        o = json_object();
        if (o && json_object_set_new(o, BYTES_KEY, json_string(s)) < 0) {
                json_decref(o);
                o = NULL;
        }
        free(s);
        return o;
}

/* One value enclosed by depth lists/maps to JSON, or NULL; raises *prec
 * to the precision its doubles need. */
static json_t *to_json(const Gadget__Value *v, unsigned depth, int *prec)
{
        int p;

        if (!v)
                return NULL;
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_NULL_VALUE:
                return json_null();
        case GADGET__VALUE__KIND_BOOL_VALUE:
                return json_boolean(v->bool_value);
        case GADGET__VALUE__KIND_INT_VALUE:
                return json_integer(v->int_value);
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                if (!isfinite(v->double_value))
                        return json_null();
                p = real_precision(v->double_value);
                if (p > *prec)
                        *prec = p;
                return json_real(v->double_value);
        case GADGET__VALUE__KIND_STRING_VALUE:
                /* NULL for invalid UTF-8: jansson checks it. */
                return v->string_value ? json_string(v->string_value) : NULL;
        case GADGET__VALUE__KIND_BYTES_VALUE:
                return bytes_to_json(&v->bytes_value);
        case GADGET__VALUE__KIND_LIST_VALUE:
                if (depth + 1 > VALUE_MAX_DEPTH)
                        return NULL;
                return list_to_json(v->list_value, depth + 1, prec);
        case GADGET__VALUE__KIND_MAP_VALUE:
                if (depth + 1 > VALUE_MAX_DEPTH)
                        return NULL;
                return map_to_json(v->map_value, depth + 1, prec);
        default:
                return NULL;
        }
}

char *json_from_value(const Gadget__Value *v)
{
        int prec = 1;
        json_t *j = to_json(v, 0, &prec);
        char *s;

        if (!j)
                return NULL;
        /* to_json accepted v, so its lists and maps have no holes. */
        while (prec < 17 && !reals_round_trip(v, prec))
                prec++;
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(prec));
        json_decref(j);
        return s;
}
