/* types_parse: the parser of method signatures (grammar in types.h).
 * Recursive descent, one level per list<>, map<>, {} or () and at most
 * TYPES_MAX_DEPTH of them. Pure code. */
#include "types_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"

struct parser {
        const char *s;
        size_t len, pos;
        unsigned depth;
        size_t types;
        struct type_sig *sig;
        char *err;
        size_t errlen;
};

/* Writes "column N: what" to err; returns -EINVAL. */
__attribute__((format(printf, 3, 4)))
static int perr(struct parser *p, size_t at, const char *fmt, ...)
{
        if (p->err && p->errlen > 0) {
                va_list ap;
                int n = snprintf(p->err, p->errlen, "column %zu: ", at + 1);
                va_start(ap, fmt);
                if (n >= 0 && (size_t)n < p->errlen)
                        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static int oom(struct parser *p)
{
        if (p->err && p->errlen > 0)
                snprintf(p->err, p->errlen, "out of memory");
        return -ENOMEM;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_word(char c)
{
        return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static void skip_ws(struct parser *p)
{
        while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t'))
                p->pos++;
}

/* The character at the cursor (after spaces), or '\0' at the end. */
static char peek(struct parser *p)
{
        skip_ws(p);
        return p->pos < p->len ? p->s[p->pos] : '\0';
}

/* Takes c if it is next. */
static bool accept(struct parser *p, char c)
{
        if (peek(p) != c || c == '\0')
                return false;
        p->pos++;
        return true;
}

/* Length of the run of word characters at the cursor. */
static size_t word_len(const struct parser *p)
{
        size_t n = 0;
        while (p->pos + n < p->len && is_word(p->s[p->pos + n]))
                n++;
        return n;
}

/* Names the token at the cursor for a message: "\"foo\"", "\"->\"",
 * "byte 0x01", "the end". Untrusted text is shown only as printable ASCII. */
static void describe(const struct parser *p, char *out, size_t outlen)
{
        const char *s = p->s + p->pos;
        size_t rest = p->len - p->pos, n = 1;
        unsigned char c = (unsigned char)*s;

        if (rest == 0) {
                snprintf(out, outlen, "the end");
                return;
        }
        if (is_word(*s)) {
                for (n = 0; n < rest && is_word(s[n]); n++)
                        ;
        } else if (rest > 1 && ((c == '-' && s[1] == '>') || (c == '.' && s[1] == '.'))) {
                n = 2;
        } else if (c < 0x20 || c >= 0x7f) {
                snprintf(out, outlen, "byte 0x%02x", c);
                return;
        } else if (c == '"' || c == '\\') {
                snprintf(out, outlen, "'%c'", c);
                return;
        }
        if (n > 24)
                snprintf(out, outlen, "\"%.24s...\"", s);
        else
                snprintf(out, outlen, "\"%.*s\"", (int)n, s);
}

/* "column N: expected WHAT, found TOKEN" at the cursor. */
static int expected(struct parser *p, const char *what)
{
        char tok[48];

        skip_ws(p);
        describe(p, tok, sizeof tok);
        return perr(p, p->pos, "expected %s, found %s", what, tok);
}

/* A new type of the signature (counted against TYPES_MAX_NODES). */
static int new_type(struct parser *p, enum type_kind kind, size_t at, struct type **out)
{
        if (p->types >= TYPES_MAX_NODES)
                return perr(p, at, "more than %d types", TYPES_MAX_NODES);
        struct type *t = calloc(1, sizeof(*t));
        if (!t)
                return oom(p);
        t->kind = kind;
        SLIST_INSERT_HEAD(&p->sig->types, t, link);
        p->types++;
        *out = t;
        return 0;
}

/* Enters one more level of nesting, for the type starting at at. */
static int enter(struct parser *p, size_t at)
{
        if (p->depth >= TYPES_MAX_DEPTH)
                return perr(p, at, "types nested deeper than %d", TYPES_MAX_DEPTH);
        p->depth++;
        return 0;
}

static int parse_type(struct parser *p, struct type **out);

/* One bound: a number, or nothing (*has false). Integers for all but
 * double; lengths are not negative. */
static int parse_bound(struct parser *p, const struct type *t, bool *has, int64_t *i, double *d)
{
        char num[48];
        bool frac = false;

        *has = false;
        skip_ws(p);
        size_t start = p->pos, at = p->pos;
        if (at < p->len && p->s[at] == '-')
                at++;
        if (at >= p->len || !is_digit(p->s[at])) {
                if (at == start)
                        return 0;
                p->pos = at;
                return expected(p, "a digit");
        }
        while (at < p->len && is_digit(p->s[at]))
                at++;
        if (at + 1 < p->len && p->s[at] == '.' && is_digit(p->s[at + 1])) {
                frac = true;
                for (at++; at < p->len && is_digit(p->s[at]); at++)
                        ;
        }
        if (at < p->len && (p->s[at] == 'e' || p->s[at] == 'E')) {
                frac = true;
                at++;
                if (at < p->len && (p->s[at] == '+' || p->s[at] == '-'))
                        at++;
                if (at >= p->len || !is_digit(p->s[at])) {
                        p->pos = at;
                        return expected(p, "a digit");
                }
                while (at < p->len && is_digit(p->s[at]))
                        at++;
        }
        if (at - start >= sizeof num)
                return perr(p, start, "number longer than %zu characters", sizeof num - 1);
        memcpy(num, p->s + start, at - start);
        num[at - start] = '\0';
        if (t->kind == TYPE_DOUBLE) {
                *d = strtod(num, NULL);
                if (!isfinite(*d))
                        return perr(p, start, "number out of range: %s", num);
        } else {
                if (frac)
                        return perr(p, start, "expected an integer, found \"%s\"", num);
                errno = 0;
                long long v = strtoll(num, NULL, 10);
                if (errno == ERANGE)
                        return perr(p, start, "number out of range: %s", num);
                if (v < 0 && t->kind != TYPE_INT)
                        return perr(p, start, "a length cannot be negative: %s", num);
                *i = v;
        }
        p->pos = at;
        *has = true;
        return 0;
}

/* "(MIN..MAX)" after a type that takes bounds, if there. */
static int parse_bounds(struct parser *p, struct type *t)
{
        if (peek(p) != '(')
                return 0;
        size_t at = p->pos++;
        int e = parse_bound(p, t, &t->has_min, &t->imin, &t->dmin);
        if (e < 0)
                return e;
        skip_ws(p);
        if (p->pos + 1 >= p->len || p->s[p->pos] != '.' || p->s[p->pos + 1] != '.')
                return expected(p, "\"..\"");
        p->pos += 2;
        e = parse_bound(p, t, &t->has_max, &t->imax, &t->dmax);
        if (e < 0)
                return e;
        if (!accept(p, ')'))
                return expected(p, "a number or \")\"");
        if (!t->has_min && !t->has_max)
                return perr(p, at, "bounds without a number");
        if (t->has_min && t->has_max &&
            (t->kind == TYPE_DOUBLE ? t->dmin > t->dmax : t->imin > t->imax))
                return perr(p, at, "the lower bound is above the upper bound");
        return 0;
}

static int cmp_fields(const void *a, const void *b)
{
        return strcmp((*(const struct type_field *const *)a)->name,
                      (*(const struct type_field *const *)b)->name);
}

/* Fields of a record up to closer ('}', or ')' for parameters). */
static int parse_fields(struct parser *p, struct type *rec, char closer, const char *what)
{
        char want[40];

        if (accept(p, closer))
                goto done;
        for (;;) {
                skip_ws(p);
                size_t at = p->pos, n = word_len(p);
                if (n == 0 || is_digit(p->s[at])) {
                        snprintf(want, sizeof want, "a %s name", what);
                        return expected(p, want);
                }
                if (n > 64)
                        return perr(p, at, "%s name longer than 64 characters", what);
                for (size_t i = 0; i < rec->n_fields; i++)
                        if (strlen(rec->fields[i].name) == n && memcmp(rec->fields[i].name, p->s + at, n) == 0)
                                return perr(p, at, "%s \"%s\" repeated", what, rec->fields[i].name);
                if (rec->n_fields >= TYPES_MAX_FIELDS)
                        return perr(p, at, "more than %d %ss", TYPES_MAX_FIELDS, what);
                struct type_field *f = realloc(rec->fields, (rec->n_fields + 1) * sizeof(*f));
                if (!f)
                        return oom(p);
                rec->fields = f;
                f = &rec->fields[rec->n_fields];
                *f = (struct type_field){ .name = strndup(p->s + at, n) };
                if (!f->name)
                        return oom(p);
                rec->n_fields++;
                p->pos += n;
                f->optional = accept(p, '?');
                if (!accept(p, ':'))
                        return expected(p, f->optional ? "\":\"" : "\"?\" or \":\"");
                struct type *ft;
                int e = parse_type(p, &ft);
                if (e < 0)
                        return e;
                f->type = ft;
                if (!f->optional)
                        rec->n_required++;
                if (accept(p, ','))
                        continue;
                if (accept(p, closer))
                        break;
                snprintf(want, sizeof want, "\",\" or \"%c\"", closer);
                return expected(p, want);
        }
done:
        if (rec->n_fields > 0) {
                rec->by_name = malloc(rec->n_fields * sizeof(*rec->by_name));
                if (!rec->by_name)
                        return oom(p);
                for (size_t i = 0; i < rec->n_fields; i++)
                        rec->by_name[i] = &rec->fields[i];
                qsort(rec->by_name, rec->n_fields, sizeof(*rec->by_name), cmp_fields);
        }
        return 0;
}

/* "list<T>" or "map<T>", after the word (which starts at at). */
static int parse_container(struct parser *p, struct type *t, size_t at)
{
        struct type *elem;
        int e = enter(p, at);

        if (e < 0)
                return e;
        if (!accept(p, '<'))
                return expected(p, "\"<\"");
        e = parse_type(p, &elem);
        if (e < 0)
                return e;
        if (!accept(p, '>'))
                return expected(p, "\"|\" or \">\"");
        t->elem = elem;
        p->depth--;
        return parse_bounds(p, t);
}

static const struct {
        const char *word;
        enum type_kind kind;
} keywords[] = {
        { "null", TYPE_NULL }, { "bool", TYPE_BOOL }, { "int", TYPE_INT },
        { "double", TYPE_DOUBLE }, { "string", TYPE_STRING }, { "bytes", TYPE_BYTES },
        { "any", TYPE_ANY }, { "list", TYPE_LIST }, { "map", TYPE_MAP },
};

/* A type named by a word: a primitive, list<T> or map<T>. */
static int parse_named(struct parser *p, struct type **out)
{
        size_t at = p->pos, n = word_len(p);
        struct type *t;
        int e;

        for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
                if (strlen(keywords[i].word) != n || memcmp(keywords[i].word, p->s + at, n) != 0)
                        continue;
                e = new_type(p, keywords[i].kind, at, &t);
                if (e < 0)
                        return e;
                p->pos += n;
                if (t->kind == TYPE_LIST || t->kind == TYPE_MAP)
                        e = parse_container(p, t, at);
                else if (t->kind == TYPE_NULL || t->kind == TYPE_BOOL || t->kind == TYPE_ANY)
                        e = peek(p) == '(' ? perr(p, p->pos, "bounds are only for int, double, "
                                                  "string, bytes, list and map") : 0;
                else
                        e = parse_bounds(p, t);
                *out = t;
                return e;
        }
        if (n > 24)
                return perr(p, at, "unknown type \"%.24s...\"", p->s + at);
        return perr(p, at, "unknown type \"%.*s\"", (int)n, p->s + at);
}

/* base := PRIM [bounds] | list/map | record | '(' type ')' */
static int parse_base(struct parser *p, struct type **out)
{
        char c = peek(p);
        size_t at = p->pos;
        int e;

        if (c == '(' || c == '{') {
                e = enter(p, at);
                if (e < 0)
                        return e;
                p->pos++;
                if (c == '(') {
                        e = parse_type(p, out);
                        if (e == 0 && !accept(p, ')'))
                                e = expected(p, "\"|\" or \")\"");
                } else {
                        e = new_type(p, TYPE_RECORD, at, out);
                        if (e == 0)
                                e = parse_fields(p, *out, '}', "field");
                }
                p->depth--;
                return e;
        }
        if (is_word(c) && !is_digit(c))
                return parse_named(p, out);
        return expected(p, "a type");
}

/* alt := base ['?'] */
static int parse_alt(struct parser *p, struct type **out)
{
        int e = parse_base(p, out);

        while (e == 0 && peek(p) == '?') {
                if (types_admits_null(*out))
                        return perr(p, p->pos, "\"?\" on a type that already admits null");
                (*out)->nullable = true;
                p->pos++;
        }
        return e;
}

static const char *const slot_plural[TYPE_SLOTS] = {
        "null", "bools", "ints", "doubles", "strings", "bytes", "lists", "maps",
};

/* Adds one alternative (not a union) to union u; at most one per slot. */
static int add_one(struct parser *p, struct type *u, const struct type *a, size_t at)
{
        static const enum type_slot slot_of[] = {
                [TYPE_NULL] = TYPE_SLOT_NULL, [TYPE_BOOL] = TYPE_SLOT_BOOL,
                [TYPE_INT] = TYPE_SLOT_INT, [TYPE_DOUBLE] = TYPE_SLOT_DOUBLE,
                [TYPE_STRING] = TYPE_SLOT_STRING, [TYPE_BYTES] = TYPE_SLOT_BYTES,
                [TYPE_LIST] = TYPE_SLOT_LIST, [TYPE_MAP] = TYPE_SLOT_MAP,
                [TYPE_RECORD] = TYPE_SLOT_MAP,
        };

        if (a->kind == TYPE_ANY)
                return perr(p, at, "a union cannot hold any (any admits every value)");
        enum type_slot s = slot_of[a->kind];
        /* Why: with one alternative per kind of value, a check tries one
         * alternative only, so its cost stays linear in the value. */
        if (u->slot[s])
                return perr(p, at, "two alternatives of the union accept %s", slot_plural[s]);
        if ((a->nullable || s == TYPE_SLOT_NULL) && (u->slot[TYPE_SLOT_NULL] || u->nullable))
                return perr(p, at, "two alternatives of the union accept null");
        const struct type **alts = realloc(u->alts, (u->n_alts + 1) * sizeof(*alts));
        if (!alts)
                return oom(p);
        u->alts = alts;
        alts[u->n_alts++] = a;
        u->slot[s] = a;
        if (a->nullable)
                u->slot[TYPE_SLOT_NULL] = a;
        return 0;
}

/* Adds alternative a to union u; a union's alternatives are spliced in. */
static int add_alt(struct parser *p, struct type *u, const struct type *a, size_t at)
{
        if (a->kind != TYPE_UNION)
                return add_one(p, u, a, at);
        for (size_t i = 0; i < a->n_alts; i++) {
                int e = add_one(p, u, a->alts[i], at);
                if (e < 0)
                        return e;
        }
        if (a->nullable) {
                if (types_admits_null(u))
                        return perr(p, at, "two alternatives of the union accept null");
                u->nullable = true;
        }
        return 0;
}

/* type := alt {'|' alt} */
static int parse_type(struct parser *p, struct type **out)
{
        struct type *first = NULL, *u = NULL, *a;
        size_t at;
        int e;

        skip_ws(p);
        at = p->pos;
        e = parse_alt(p, &first);
        if (e < 0 || peek(p) != '|') {
                *out = first;
                return e;
        }
        e = new_type(p, TYPE_UNION, at, &u);
        if (e == 0)
                e = add_alt(p, u, first, at);
        while (e == 0 && accept(p, '|')) {
                skip_ws(p);
                at = p->pos;
                e = parse_alt(p, &a);
                if (e == 0)
                        e = add_alt(p, u, a, at);
        }
        *out = u;
        return e;
}

/* sig := NAME '(' params ')' ['->' type] */
static int parse_sig(struct parser *p)
{
        struct type *result;
        size_t at, n = 0;
        int e;

        skip_ws(p);
        at = p->pos;
        while (at + n < p->len && (is_word(p->s[at + n]) || p->s[at + n] == '.' || p->s[at + n] == '-'))
                n++;
        if (n == 0)
                return expected(p, "a method name");
        if (n > GADGET_NAME_MAX)
                return perr(p, at, "method name longer than %d characters", GADGET_NAME_MAX);
        p->sig->name = strndup(p->s + at, n);
        if (!p->sig->name)
                return oom(p);
        if (!gadget_method_name_ok(p->sig->name))
                return perr(p, at, "bad method name \"%s\" (it may not start with \".\" or \"-\")",
                            p->sig->name);
        p->pos += n;
        if (!accept(p, '('))
                return expected(p, "\"(\"");
        e = new_type(p, TYPE_RECORD, at, &p->sig->params);
        if (e == 0)
                e = parse_fields(p, p->sig->params, ')', "parameter");
        if (e < 0)
                return e;
        if (peek(p) == '-' && p->pos + 1 < p->len && p->s[p->pos + 1] == '>') {
                p->pos += 2;
                e = parse_type(p, &result);
                if (e < 0)
                        return e;
                skip_ws(p);
                if (p->pos < p->len)
                        return expected(p, "the end");
        } else {
                if (p->pos < p->len)
                        return expected(p, "\"->\" or the end");
                e = new_type(p, TYPE_NULL, p->pos, &result);
                if (e < 0)
                        return e;
        }
        p->sig->result = result;
        return 0;
}

int types_sig_parse(const char *text, struct type_sig **out, char *err, size_t errlen)
{
        struct parser p = { .s = text, .err = err, .errlen = errlen };
        int e;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!text || !out) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "no signature");
                return -EINVAL;
        }
        /* Why this is safe: the text, the recursion (TYPES_MAX_DEPTH) and
         * the allocations (TYPES_MAX_NODES types, TYPES_MAX_FIELDS fields
         * each) are bounded before anything untrusted is looked at twice. */
        p.len = strnlen(text, TYPES_MAX_TEXT + 1);
        if (p.len > TYPES_MAX_TEXT) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "signature longer than %d bytes", TYPES_MAX_TEXT);
                return -EINVAL;
        }
        p.sig = calloc(1, sizeof(*p.sig));
        if (!p.sig)
                return oom(&p);
        e = parse_sig(&p);
        /* The canonical text must parse too: it has more spaces. */
        if (e == 0 && types_sig_print(p.sig, NULL, 0) > TYPES_MAX_TEXT) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "signature longer than %d bytes when printed",
                                 TYPES_MAX_TEXT);
                e = -EINVAL;
        }
        if (e < 0) {
                types_sig_free(p.sig);
                return e;
        }
        *out = p.sig;
        return 0;
}
