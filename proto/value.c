/* value: typed values crossing the gadget boundary: validation of values
 * from a peer, builders, lookup, deep copy (value_packed.c: the packed
 * bytes' walk before any unpacking). Pure code, no syscalls. */
#include "value.h"
#include "value_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* One walk of value_check: limits, nodes seen so far and where to explain. */
struct check {
        unsigned max_depth;
        size_t nodes;
        char *why;
        size_t whylen;
};

int value_fail(char *why, size_t whylen, const char *fmt, ...)
{
        if (why && whylen > 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(why, whylen, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

bool value_utf8_valid(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        if (!s)
                return len == 0;
        while (i < len) {
                unsigned c = p[i];
                size_t n;
                uint32_t cp, min;

                if (c < 0x80) {
                        /* ASCII runs, the common case, eight bytes at a time:
                         * a frame of text costs gadgetd little per byte. */
                        uint64_t w;
                        i++;
                        while (len - i >= sizeof w) {
                                memcpy(&w, p + i, sizeof w);
                                if (w & 0x8080808080808080ull)
                                        break;
                                i += sizeof w;
                        }
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        n = 1, cp = c & 0x1f, min = 0x80;
                } else if (c >= 0xe0 && c <= 0xef) {
                        n = 2, cp = c & 0x0f, min = 0x800;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3, cp = c & 0x07, min = 0x10000;
                } else {
                        return false; /* continuation byte, 0xc0/0xc1 or > 0xf4 */
                }
                if (len - i <= n)
                        return false;
                for (size_t k = 1; k <= n; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i + k] & 0x3f);
                }
                /* Why this is safe: overlong forms, UTF-16 surrogates and
                 * code points past U+10FFFF are refused, so every accepted
                 * string has exactly one meaning for every consumer. */
                if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += n + 1;
        }
        return true;
}

/* Quotes an untrusted key for a reason text: printable ASCII kept, anything
 * else as \xNN, cut after a few dozen bytes. */
static void quote(char *dst, size_t dstlen, const char *s)
{
        size_t o = 0, i;

        if (dstlen < 8) {
                if (dstlen)
                        dst[0] = '\0';
                return;
        }
        dst[o++] = '"';
        for (i = 0; s[i] && i < 40 && o + 6 < dstlen; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
                        dst[o++] = (char)c;
                else
                        o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", c);
        }
        if (s[i] && o + 4 < dstlen) {
                memcpy(dst + o, "...", 3);
                o += 3;
        }
        dst[o++] = '"';
        dst[o] = '\0';
}

/* Orders key pointers by their text, for the repeated-key search. */
static int cmp_keys(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_value(struct check *c, const Gadget__Value *v, unsigned depth);

/* Checks a list found at container depth depth (the outermost is 1). */
static int check_list(struct check *c, const Gadget__List *l, unsigned depth)
{
        if (!l)
                return value_fail(c->why, c->whylen, "list value without a list at depth %u", depth);
        if (l->n_items > VALUE_MAX_ITEMS)
                return value_fail(c->why, c->whylen, "list of %zu items at depth %u (most %u)",
                            l->n_items, depth, VALUE_MAX_ITEMS);
        if (l->n_items > 0 && !l->items)
                return value_fail(c->why, c->whylen, "list without items at depth %u", depth);
        for (size_t i = 0; i < l->n_items; i++) {
                if (!l->items[i])
                        return value_fail(c->why, c->whylen, "list item %zu missing at depth %u", i, depth);
                int e = check_value(c, l->items[i], depth);
                if (e < 0)
                        return e;
        }
        return 0;
}

/* Refuses a map whose keys repeat: sorts the key pointers, compares
 * neighbours (n log n, as maps may hold VALUE_MAX_ITEMS entries). */
static int check_unique_keys(struct check *c, const Gadget__Map *m, unsigned depth)
{
        const char **keys;
        char q[64];
        int e = 0;

        if (m->n_entries < 2)
                return 0;
        keys = malloc(m->n_entries * sizeof(*keys));
        if (!keys) {
                value_fail(c->why, c->whylen, "out of memory checking map keys");
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->n_entries; i++)
                keys[i] = m->entries[i]->key;
        qsort(keys, m->n_entries, sizeof(*keys), cmp_keys);
        for (size_t i = 1; i < m->n_entries; i++) {
                if (strcmp(keys[i - 1], keys[i]) == 0) {
                        quote(q, sizeof(q), keys[i]);
                        e = value_fail(c->why, c->whylen, "map key %s repeated at depth %u", q, depth);
                        break;
                }
        }
        free(keys);
        return e;
}

/* Checks a map found at container depth depth: entries and keys first,
 * then uniqueness, then the values. */
static int check_map(struct check *c, const Gadget__Map *m, unsigned depth)
{
        char q[64];
        int e;

        if (!m)
                return value_fail(c->why, c->whylen, "map value without a map at depth %u", depth);
        if (m->n_entries > VALUE_MAX_ITEMS)
                return value_fail(c->why, c->whylen, "map of %zu entries at depth %u (most %u)",
                            m->n_entries, depth, VALUE_MAX_ITEMS);
        if (m->n_entries > 0 && !m->entries)
                return value_fail(c->why, c->whylen, "map without entries at depth %u", depth);
        for (size_t i = 0; i < m->n_entries; i++) {
                const Gadget__MapEntry *me = m->entries[i];
                if (!me)
                        return value_fail(c->why, c->whylen, "map entry %zu missing at depth %u", i, depth);
                if (!me->key)
                        return value_fail(c->why, c->whylen, "map entry %zu without key at depth %u", i, depth);
                if (!value_utf8_valid(me->key, strlen(me->key)))
                        return value_fail(c->why, c->whylen, "map key is not valid UTF-8 at depth %u", depth);
                if (!me->value) {
                        quote(q, sizeof(q), me->key);
                        return value_fail(c->why, c->whylen, "map key %s without value at depth %u", q, depth);
                }
        }
        e = check_unique_keys(c, m, depth);
        if (e < 0)
                return e;
        for (size_t i = 0; i < m->n_entries; i++) {
                e = check_value(c, m->entries[i]->value, depth);
                if (e < 0)
                        return e;
        }
        return 0;
}

/* Checks one value enclosed by depth lists/maps, and what it holds. */
static int check_value(struct check *c, const Gadget__Value *v, unsigned depth)
{
        if (++c->nodes > VALUE_MAX_NODES)
                return value_fail(c->why, c->whylen, "more than %u values", VALUE_MAX_NODES);
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_NULL_VALUE:
        case GADGET__VALUE__KIND_BOOL_VALUE:
        case GADGET__VALUE__KIND_INT_VALUE:
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                return 0;
        case GADGET__VALUE__KIND_STRING_VALUE:
                if (!v->string_value)
                        return value_fail(c->why, c->whylen, "string value without string at depth %u", depth);
                /* protobuf-c does not check UTF-8; strings are NUL-terminated
                 * copies, so strlen sees all that any consumer will see. */
                if (!value_utf8_valid(v->string_value, strlen(v->string_value)))
                        return value_fail(c->why, c->whylen, "string is not valid UTF-8 at depth %u", depth);
                return 0;
        case GADGET__VALUE__KIND_BYTES_VALUE:
                if (v->bytes_value.len > 0 && !v->bytes_value.data)
                        return value_fail(c->why, c->whylen, "bytes value without data at depth %u", depth);
                return 0;
        case GADGET__VALUE__KIND_LIST_VALUE:
        case GADGET__VALUE__KIND_MAP_VALUE:
                if (depth + 1 > c->max_depth)
                        return value_fail(c->why, c->whylen, "lists/maps nested deeper than %u", c->max_depth);
                if (v->kind_case == GADGET__VALUE__KIND_LIST_VALUE)
                        return check_list(c, v->list_value, depth + 1);
                return check_map(c, v->map_value, depth + 1);
        case GADGET__VALUE__KIND__NOT_SET:
                return value_fail(c->why, c->whylen, "value without a kind at depth %u", depth);
        default:
                return value_fail(c->why, c->whylen, "value of unknown kind %d at depth %u", (int)v->kind_case, depth);
        }
}

int value_check(const Gadget__Value *v, unsigned max_depth, char *why, size_t whylen)
{
        struct check c = {
                .max_depth = max_depth < VALUE_MAX_DEPTH ? max_depth : VALUE_MAX_DEPTH,
                .why = why,
                .whylen = whylen,
        };

        if (!v)
                return value_fail(why, whylen, "value missing");
        /* Why this is safe: recursion stops at max_depth (<= VALUE_MAX_DEPTH)
         * containers and the walk at VALUE_MAX_NODES values, so a hostile
         * tree costs bounded stack and time. */
        return check_value(&c, v, 0);
}

/* A fresh value of the given kind, its payload zeroed. */
static Gadget__Value *value_alloc(Gadget__Value__KindCase kind)
{
        Gadget__Value *v = malloc(sizeof(*v));
        if (!v)
                return NULL;
        gadget__value__init(v);
        v->kind_case = kind;
        return v;
}

Gadget__Value *value_new_null(void)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_NULL_VALUE);
        if (v)
                v->null_value = 1;
        return v;
}

Gadget__Value *value_new_bool(bool b)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_BOOL_VALUE);
        if (v)
                v->bool_value = b;
        return v;
}

Gadget__Value *value_new_int(int64_t i)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_INT_VALUE);
        if (v)
                v->int_value = i;
        return v;
}

Gadget__Value *value_new_double(double d)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_DOUBLE_VALUE);
        if (v)
                v->double_value = d;
        return v;
}

Gadget__Value *value_new_string(const char *s)
{
        if (!s)
                return NULL;
        return value_new_string_len(s, strlen(s));
}

Gadget__Value *value_new_string_len(const char *s, size_t len)
{
        Gadget__Value *v;
        char *copy;

        /* A protobuf-c string ends at its first NUL: refuse rather than
         * silently cut the text. */
        if ((!s && len > 0) || (len > 0 && memchr(s, '\0', len))) {
                errno = EINVAL;
                return NULL;
        }
        /* Always a malloc'd copy, even for "": protobuf-c skips a oneof
         * string equal to protobuf_c_empty_string when packing. */
        copy = malloc(len + 1);
        if (!copy)
                return NULL;
        if (len > 0)
                memcpy(copy, s, len);
        copy[len] = '\0';
        v = value_alloc(GADGET__VALUE__KIND_STRING_VALUE);
        if (!v) {
                free(copy);
                return NULL;
        }
        v->string_value = copy;
        return v;
}

Gadget__Value *value_new_bytes(const void *data, size_t len)
{
        Gadget__Value *v;
        uint8_t *copy = NULL;

        if (!data && len > 0) {
                errno = EINVAL;
                return NULL;
        }
        if (len > 0) {
                copy = malloc(len);
                if (!copy)
                        return NULL;
                memcpy(copy, data, len);
        }
        v = value_alloc(GADGET__VALUE__KIND_BYTES_VALUE);
        if (!v) {
                free(copy);
                return NULL;
        }
        v->bytes_value.data = copy;
        v->bytes_value.len = len;
        return v;
}

Gadget__Value *value_new_list(void)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_LIST_VALUE);
        Gadget__List *l = malloc(sizeof(*l));

        if (!v || !l) {
                free(v);
                free(l);
                return NULL;
        }
        gadget__list__init(l);
        v->list_value = l;
        return v;
}

Gadget__Value *value_new_map(void)
{
        Gadget__Value *v = value_alloc(GADGET__VALUE__KIND_MAP_VALUE);
        Gadget__Map *m = malloc(sizeof(*m));

        if (!v || !m) {
                free(v);
                free(m);
                return NULL;
        }
        gadget__map__init(m);
        v->map_value = m;
        return v;
}

int value_list_append(Gadget__Value *list, Gadget__Value *item)
{
        Gadget__List *l;
        Gadget__Value **items;

        if (!item)
                return -EINVAL;
        if (!list || list->kind_case != GADGET__VALUE__KIND_LIST_VALUE || !list->list_value) {
                value_free(item);
                return -EINVAL;
        }
        l = list->list_value;
        /* Grown one slot at a time: lists from protobuf-c or value_dup have
         * no spare room, so no capacity can be assumed. */
        items = realloc(l->items, (l->n_items + 1) * sizeof(*items));
        if (!items) {
                value_free(item);
                return -ENOMEM;
        }
        items[l->n_items++] = item;
        l->items = items;
        return 0;
}

/* The entry of map m holding key, or NULL. */
static Gadget__MapEntry *map_find(const Gadget__Map *m, const char *key)
{
        for (size_t i = 0; i < m->n_entries; i++) {
                Gadget__MapEntry *e = m->entries[i];
                if (e && e->key && strcmp(e->key, key) == 0)
                        return e;
        }
        return NULL;
}

int value_map_set(Gadget__Value *map, const char *key, Gadget__Value *item)
{
        Gadget__Map *m;
        Gadget__MapEntry *e, **entries;

        if (!item)
                return -EINVAL;
        if (!key || !map || map->kind_case != GADGET__VALUE__KIND_MAP_VALUE || !map->map_value) {
                value_free(item);
                return -EINVAL;
        }
        m = map->map_value;
        e = map_find(m, key);
        if (e) {
                if (e->value != item) {
                        value_free(e->value);
                        e->value = item;
                }
                return 0;
        }
        e = malloc(sizeof(*e));
        entries = realloc(m->entries, (m->n_entries + 1) * sizeof(*entries));
        if (entries)
                m->entries = entries;
        if (!e || !entries) {
                free(e);
                value_free(item);
                return -ENOMEM;
        }
        gadget__map_entry__init(e);
        e->key = strdup(key);
        if (!e->key) {
                free(e);
                value_free(item);
                return -ENOMEM;
        }
        e->value = item;
        entries[m->n_entries++] = e;
        return 0;
}

const Gadget__Value *value_map_get(const Gadget__Value *map, const char *key)
{
        const Gadget__MapEntry *e;

        if (!map || !key || map->kind_case != GADGET__VALUE__KIND_MAP_VALUE || !map->map_value)
                return NULL;
        e = map_find(map->map_value, key);
        return e ? e->value : NULL;
}

const char *value_string(const Gadget__Value *v)
{
        if (!v || v->kind_case != GADGET__VALUE__KIND_STRING_VALUE)
                return NULL;
        return v->string_value;
}

/* Deep copy of a list value; NULL if l has holes or memory runs out. */
static Gadget__Value *dup_list(const Gadget__List *l)
{
        Gadget__Value *v;
        Gadget__List *nl;

        if (!l || (l->n_items > 0 && !l->items))
                return NULL;
        v = value_new_list();
        if (!v)
                return NULL;
        nl = v->list_value;
        if (l->n_items > 0) {
                nl->items = malloc(l->n_items * sizeof(*nl->items));
                if (!nl->items)
                        goto fail;
        }
        for (size_t i = 0; i < l->n_items; i++) {
                Gadget__Value *item = value_dup(l->items[i]);
                if (!item)
                        goto fail;
                nl->items[nl->n_items++] = item;
        }
        return v;
fail:
        value_free(v);
        return NULL;
}

/* Deep copy of a map value; NULL if m has holes or memory runs out. */
static Gadget__Value *dup_map(const Gadget__Map *m)
{
        Gadget__Value *v;
        Gadget__Map *nm;

        if (!m || (m->n_entries > 0 && !m->entries))
                return NULL;
        v = value_new_map();
        if (!v)
                return NULL;
        nm = v->map_value;
        if (m->n_entries > 0) {
                nm->entries = malloc(m->n_entries * sizeof(*nm->entries));
                if (!nm->entries)
                        goto fail;
        }
        for (size_t i = 0; i < m->n_entries; i++) {
                const Gadget__MapEntry *e = m->entries[i];
                Gadget__MapEntry *ne;
                if (!e || !e->key || !e->value)
                        goto fail;
                ne = malloc(sizeof(*ne));
                if (!ne)
                        goto fail;
                gadget__map_entry__init(ne);
                nm->entries[nm->n_entries++] = ne;
                ne->key = strdup(e->key);
                if (!ne->key) {
                        ne->key = (char *)protobuf_c_empty_string;
                        goto fail;
                }
                ne->value = value_dup(e->value);
                if (!ne->value)
                        goto fail;
        }
        return v;
fail:
        value_free(v);
        return NULL;
}

Gadget__Value *value_dup(const Gadget__Value *v)
{
        if (!v)
                return NULL;
        switch (v->kind_case) {
        case GADGET__VALUE__KIND_NULL_VALUE:
                return value_new_null();
        case GADGET__VALUE__KIND_BOOL_VALUE:
                return value_new_bool(v->bool_value);
        case GADGET__VALUE__KIND_INT_VALUE:
                return value_new_int(v->int_value);
        case GADGET__VALUE__KIND_DOUBLE_VALUE:
                return value_new_double(v->double_value);
        case GADGET__VALUE__KIND_STRING_VALUE:
                return value_new_string(v->string_value);
        case GADGET__VALUE__KIND_BYTES_VALUE:
                return value_new_bytes(v->bytes_value.data, v->bytes_value.len);
        case GADGET__VALUE__KIND_LIST_VALUE:
                return dup_list(v->list_value);
        case GADGET__VALUE__KIND_MAP_VALUE:
                return dup_map(v->map_value);
        case GADGET__VALUE__KIND__NOT_SET:
                return value_alloc(GADGET__VALUE__KIND__NOT_SET);
        default:
                return NULL;
        }
}

void value_free(Gadget__Value *v)
{
        if (v)
                protobuf_c_message_free_unpacked(&v->base, NULL);
}

Gadget__Value *value_decode(const uint8_t *data, size_t len, char *why, size_t whylen)
{
        /* Why this is safe: the walk recurses at most
         * VALUE_PACKED_MAX_NESTING times, and so then does the unpacker. */
        if (value_packed_check(&gadget__value__descriptor, data, len, why, whylen) < 0)
                return NULL;
        Gadget__Value *v = gadget__value__unpack(NULL, len, data);
        if (!v) {
                snprintf(why, whylen, "does not decode");
                return NULL;
        }
        if (value_check(v, VALUE_MAX_DEPTH, why, whylen) < 0) {
                gadget__value__free_unpacked(v, NULL);
                return NULL;
        }
        return v;
}

Gadget__Value *value_unpack(const uint8_t *data, size_t len)
{
        char why[120];
        Gadget__Value *p = value_decode(data, len, why, sizeof why);
        Gadget__Value *v = p ? value_dup(p) : NULL;
        if (p)
                gadget__value__free_unpacked(p, NULL);
        return v;
}
