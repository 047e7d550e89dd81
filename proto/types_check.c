/* types_check: checks a value against a type of a signature; runs on every
 * call (arguments and result), so it allocates nothing and walks the value
 * once. Pure code. */
#include "types_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"

/* One step of the path below the checker's base ("args"): a record's
 * field, a map's key or a list's index. Kept as it is and written out only
 * for a message: a check that passes (nearly all of them, on every call)
 * formats nothing. */
enum seg_kind { SEG_FIELD, SEG_KEY, SEG_INDEX };
struct seg {
        enum seg_kind kind;
        const char *name;   /* field or key */
        size_t index;
};

/* Steps kept; the check's recursion follows the type, at most
 * TYPES_MAX_DEPTH deep, one step per level. */
#define SEGS_MAX (TYPES_MAX_DEPTH + 8)

/* One check: the base path (its logical length plen, which may exceed
 * what the buffer holds), the steps below it, and the message being
 * written. */
struct checker {
        char *path;
        size_t pathlen, plen;
        struct seg segs[SEGS_MAX];
        size_t n_segs;
        struct types_out err;
};

static void push(struct checker *c, enum seg_kind kind, const char *name, size_t index)
{
        if (c->n_segs < SEGS_MAX)
                c->segs[c->n_segs] = (struct seg){ kind, name, index };
        c->n_segs++;
}

static void pop(struct checker *c)
{
        c->n_segs--;
}

/* Appends an untrusted key, quoted: printable ASCII as is, other bytes as
 * \xNN, cut after 40 bytes. */
static void out_quoted(struct types_out *o, const char *s)
{
        size_t i;

        types_out_str(o, "\"");
        for (i = 0; s[i] && i < 40; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
                        types_out_add(o, s + i, 1);
                else
                        types_out_fmt(o, "\\x%02x", ch);
        }
        types_out_str(o, s[i] ? "...\"" : "\"");
}

/* Writes one step: ".name", "[2]", or ["key"] for a key that is not an
 * identifier. */
static void out_seg(struct types_out *o, const struct seg *g)
{
        if (g->kind == SEG_INDEX) {
                types_out_fmt(o, "[%zu]", g->index);
        } else if (g->kind == SEG_FIELD || gadget_identifier_ok(g->name)) {
                types_out_str(o, ".");
                types_out_str(o, g->name);
        } else {
                types_out_str(o, "[");
                out_quoted(o, g->name);
                types_out_str(o, "]");
        }
}

/* Starts the message: "PATH: ". */
static struct types_out *fail(struct checker *c)
{
        c->err.n = 0;
        if (c->err.cap > 0)
                c->err.buf[0] = '\0';
        types_out_add(&c->err, c->path, c->plen < c->pathlen ? c->plen : strlen(c->path));
        for (size_t i = 0; i < c->n_segs && i < SEGS_MAX; i++)
                out_seg(&c->err, &c->segs[i]);
        types_out_str(&c->err, ": ");
        return &c->err;
}

/* "PATH: expected T, got KIND". */
static int mismatch(struct checker *c, const struct type *t, const Gadget__Value *v)
{
        struct types_out *o = fail(c);

        types_out_str(o, "expected ");
        types_out_type(o, t);
        types_out_str(o, ", got ");
        types_out_str(o, types_value_kind(v));
        return -EINVAL;
}

static int check(struct checker *c, const struct type *t, const Gadget__Value *v);

static int check_int(struct checker *c, const struct type *t, int64_t i)
{
        if (t->has_min && i < t->imin)
                types_out_fmt(fail(c), "%lld is below the minimum %lld", (long long)i, (long long)t->imin);
        else if (t->has_max && i > t->imax)
                types_out_fmt(fail(c), "%lld is above the maximum %lld", (long long)i, (long long)t->imax);
        else
                return 0;
        return -EINVAL;
}

static int check_double(struct checker *c, const struct type *t, double d)
{
        char a[32], b[32];

        if (!t->has_min && !t->has_max)
                return 0;
        /* NaN compares false with everything: refused by bounds, explicitly. */
        if (isnan(d)) {
                types_out_str(fail(c), "NaN is outside the bounds");
                return -EINVAL;
        }
        types_fmt_double(a, d);
        if (t->has_min && d < t->dmin) {
                types_fmt_double(b, t->dmin);
                types_out_fmt(fail(c), "%s is below the minimum %s", a, b);
        } else if (t->has_max && d > t->dmax) {
                types_fmt_double(b, t->dmax);
                types_out_fmt(fail(c), "%s is above the maximum %s", a, b);
        } else {
                return 0;
        }
        return -EINVAL;
}

/* Length bounds: n of unit ("character", "byte", "item", "entr"). */
static int check_length(struct checker *c, const struct type *t, size_t n, const char *unit,
                        const char *plural)
{
        const char *u = n == 1 ? unit : plural;

        if (t->has_min && n < (uint64_t)t->imin)
                types_out_fmt(fail(c), "%zu %s, below the minimum %lld", n, u, (long long)t->imin);
        else if (t->has_max && n > (uint64_t)t->imax)
                types_out_fmt(fail(c), "%zu %s, above the maximum %lld", n, u, (long long)t->imax);
        else
                return 0;
        return -EINVAL;
}

/* Code points of valid UTF-8: the bytes that are not continuations. */
static size_t code_points(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                n += ((unsigned char)*s & 0xc0) != 0x80;
        return n;
}

static int check_list(struct checker *c, const struct type *t, const Gadget__List *l)
{
        int e = check_length(c, t, l->n_items, "item", "items");

        for (size_t i = 0; e == 0 && i < l->n_items; i++) {
                push(c, SEG_INDEX, NULL, i);
                e = check(c, t->elem, l->items[i]);
                pop(c);
        }
        return e;
}

static int check_map(struct checker *c, const struct type *t, const Gadget__Map *m)
{
        int e = check_length(c, t, m->n_entries, "entry", "entries");

        for (size_t i = 0; e == 0 && i < m->n_entries; i++) {
                push(c, SEG_KEY, m->entries[i]->key, 0);
                e = check(c, t->elem, m->entries[i]->value);
                pop(c);
        }
        return e;
}

/* The field of record t named key, by binary search; NULL if none. */
static const struct type_field *find_field(const struct type *t, const char *key)
{
        size_t lo = 0, hi = t->n_fields;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int r = strcmp(key, t->by_name[mid]->name);
                if (r == 0)
                        return t->by_name[mid];
                if (r < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

/* "PATH.NAME: missing required field" for the first required field of t
 * not in seen (bit i: fields[i] is present). */
static int missing(struct checker *c, const struct type *t, uint64_t seen)
{
        for (size_t i = 0; i < t->n_fields; i++) {
                if (t->fields[i].optional || (seen >> i & 1))
                        continue;
                push(c, SEG_FIELD, t->fields[i].name, 0);
                types_out_str(fail(c), "missing required field");
                pop(c);
                return -EINVAL;
        }
        return 0;
}

_Static_assert(TYPES_MAX_FIELDS <= 64, "a record's fields are bits of a uint64_t");

/* A record: a map whose keys are fields of t (closed), each matching its
 * field's type, holding every required field. The fields seen are bits
 * of one word: no allocation, and a repeated key (which value_check
 * already refuses) cannot stand for a missing field. */
static int check_record(struct checker *c, const struct type *t, const Gadget__Map *m)
{
        uint64_t seen = 0;
        size_t required = 0;

        for (size_t i = 0; i < m->n_entries; i++) {
                const Gadget__MapEntry *me = m->entries[i];
                const struct type_field *f = find_field(t, me->key);
                if (!f || (seen >> (f - t->fields) & 1)) {
                        struct types_out *o = fail(c);
                        types_out_str(o, f ? "repeated field " : "unknown field ");
                        out_quoted(o, me->key);
                        return -EINVAL;
                }
                seen |= (uint64_t)1 << (f - t->fields);
                required += !f->optional;
                push(c, SEG_FIELD, f->name, 0);
                int e = check(c, f->type, me->value);
                pop(c);
                if (e < 0)
                        return e;
        }
        if (required < t->n_required)
                return missing(c, t, seen);
        return 0;
}

/* The alternative of union t that takes v's kind (an int falls back on a
 * double alternative); NULL if none. */
static const struct type *union_alt(const struct type *t, const Gadget__Value *v)
{
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_NULL_VALUE:
                return t->slot[TYPE_SLOT_NULL];
        case GADGET__VALUE__KIND_BOOL_VALUE:
                return t->slot[TYPE_SLOT_BOOL];
        case GADGET__VALUE__KIND_INT_VALUE:
                return t->slot[TYPE_SLOT_INT] ? t->slot[TYPE_SLOT_INT] : t->slot[TYPE_SLOT_DOUBLE];
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                return t->slot[TYPE_SLOT_DOUBLE];
        case GADGET__VALUE__KIND_STRING_VALUE:
                return t->slot[TYPE_SLOT_STRING];
        case GADGET__VALUE__KIND_BYTES_VALUE:
                return t->slot[TYPE_SLOT_BYTES];
        case GADGET__VALUE__KIND_LIST_VALUE:
                return t->slot[TYPE_SLOT_LIST];
        case GADGET__VALUE__KIND_MAP_VALUE:
                return t->slot[TYPE_SLOT_MAP];
        default:
                return NULL;
        }
}

static int check(struct checker *c, const struct type *t, const Gadget__Value *v)
{
        Gadget__Value__KindCase k = v ? v->kind_case : GADGET__VALUE__KIND__NOT_SET;

        if (k == GADGET__VALUE__KIND_NULL_VALUE && t->nullable)
                return 0;
        switch (t->kind) {
        case TYPE_ANY:
                return v ? 0 : mismatch(c, t, v);
        case TYPE_UNION: {
                const struct type *a = v ? union_alt(t, v) : NULL;
                return a ? check(c, a, v) : mismatch(c, t, v);
        }
        case TYPE_NULL:
                return k == GADGET__VALUE__KIND_NULL_VALUE ? 0 : mismatch(c, t, v);
        case TYPE_BOOL:
                return k == GADGET__VALUE__KIND_BOOL_VALUE ? 0 : mismatch(c, t, v);
        case TYPE_INT:
                return k == GADGET__VALUE__KIND_INT_VALUE ? check_int(c, t, v->int_value) : mismatch(c, t, v);
        case TYPE_DOUBLE:
                if (k == GADGET__VALUE__KIND_INT_VALUE)
                        return check_double(c, t, (double)v->int_value);
                return k == GADGET__VALUE__KIND_DOUBLE_VALUE ? check_double(c, t, v->double_value)
                                                             : mismatch(c, t, v);
        case TYPE_STRING:
                if (k != GADGET__VALUE__KIND_STRING_VALUE || !v->string_value)
                        return mismatch(c, t, v);
                if (!t->has_min && !t->has_max)
                        return 0;
                return check_length(c, t, code_points(v->string_value), "character", "characters");
        case TYPE_BYTES:
                if (k != GADGET__VALUE__KIND_BYTES_VALUE)
                        return mismatch(c, t, v);
                return check_length(c, t, v->bytes_value.len, "byte", "bytes");
        case TYPE_LIST:
                if (k != GADGET__VALUE__KIND_LIST_VALUE || !v->list_value)
                        return mismatch(c, t, v);
                return check_list(c, t, v->list_value);
        case TYPE_MAP:
        case TYPE_RECORD:
                if (k != GADGET__VALUE__KIND_MAP_VALUE || !v->map_value)
                        return mismatch(c, t, v);
                if (t->kind == TYPE_MAP)
                        return check_map(c, t, v->map_value);
                return check_record(c, t, v->map_value);
        }
        return mismatch(c, t, v);
}

int types_check(const struct type *t, const Gadget__Value *v, char *path, size_t pathlen,
                char *err, size_t errlen)
{
        char here[8] = "value";
        struct checker c = {
                .path = path ? path : here,
                .pathlen = path ? pathlen : sizeof here,
                .err = { .buf = err, .cap = err ? errlen : 0 },
        };

        if (c.pathlen == 0)
                return -EINVAL;
        c.plen = strnlen(c.path, c.pathlen - 1);
        c.path[c.plen] = '\0';
        if (c.err.cap > 0)
                err[0] = '\0';
        /* Why this is safe: the recursion follows the type, not the value,
         * so it is at most TYPES_MAX_DEPTH deep however deep v is. */
        return check(&c, t, v);
}

int types_check_args(const struct type_sig *sig, const Gadget__Value *args, char *err, size_t errlen)
{
        char path[8] = "args";

        /* null stands for "no arguments": the empty record. */
        if (args && args->kind_case == GADGET__VALUE__KIND_NULL_VALUE) {
                struct checker c = { .path = path, .pathlen = sizeof path, .plen = 4,
                                     .err = { .buf = err, .cap = err ? errlen : 0 } };
                return missing(&c, sig->params, 0);
        }
        return types_check(sig->params, args, path, sizeof path, err, errlen);
}

int types_check_result(const struct type_sig *sig, const Gadget__Value *res, char *err, size_t errlen)
{
        char path[8] = "result";

        return types_check(sig->result, res, path, sizeof path, err, errlen);
}
