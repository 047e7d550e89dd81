/* Unit tests of proto/value.c: builders, lookup, copy, and the checker
 * that guards every value a peer sends. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "value.h"


static char why[256];

/* value_check with the full depth, reason left in why. */
static int check(const Gadget__Value *v)
{
        why[0] = '\0';
        return value_check(v, VALUE_MAX_DEPTH, why, sizeof(why));
}

/* Packs v into a malloc'd buffer. */
static uint8_t *pack(const Gadget__Value *v, size_t *len)
{
        *len = gadget__value__get_packed_size(v);
        uint8_t *buf = malloc(*len ? *len : 1);
        if (buf)
                gadget__value__pack(v, buf);
        return buf;
}

/* Whether a and b pack to the same bytes (deep equality for our trees). */
static int same(const Gadget__Value *a, const Gadget__Value *b)
{
        size_t la, lb;
        uint8_t *pa = pack(a, &la), *pb = pack(b, &lb);
        int eq = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
        free(pa);
        free(pb);
        return eq;
}

/* A list nesting depth lists, the innermost holding one int. */
static Gadget__Value *nested(unsigned depth)
{
        Gadget__Value *v = value_new_int(7);
        for (unsigned i = 0; i < depth; i++) {
                Gadget__Value *l = value_new_list();
                value_list_append(l, v);
                v = l;
        }
        return v;
}

/* A map with one entry per key, built directly (no per-key lookup). */
static Gadget__Value *map_of(size_t n, const char *prefix)
{
        Gadget__Value *m = value_new_map();
        Gadget__Map *mm = m->map_value;
        char key[32];

        mm->entries = malloc(n * sizeof(*mm->entries));
        for (size_t i = 0; i < n; i++) {
                Gadget__MapEntry *e = malloc(sizeof(*e));
                gadget__map_entry__init(e);
                snprintf(key, sizeof(key), "%s%zu", prefix, i);
                e->key = strdup(key);
                e->value = value_new_null();
                mm->entries[mm->n_entries++] = e;
        }
        return m;
}

/* A list of n nulls, built directly. */
static Gadget__Value *list_of(size_t n)
{
        Gadget__Value *l = value_new_list();
        l->list_value->items = malloc(n * sizeof(*l->list_value->items));
        for (size_t i = 0; i < n; i++)
                l->list_value->items[l->list_value->n_items++] = value_new_null();
        return l;
}

/* A tree holding every kind once. */
static Gadget__Value *sample(void)
{
        Gadget__Value *m = value_new_map(), *l = value_new_list(), *inner = value_new_map();
        value_map_set(m, "null", value_new_null());
        value_map_set(m, "bool", value_new_bool(true));
        value_map_set(m, "int", value_new_int(-42));
        value_map_set(m, "double", value_new_double(2.5));
        value_map_set(m, "string", value_new_string("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
        value_map_set(m, "empty", value_new_string(""));
        value_map_set(m, "bytes", value_new_bytes("\0\1\2\xff", 4));
        value_map_set(m, "nobytes", value_new_bytes(NULL, 0));
        value_list_append(l, value_new_int(1));
        value_list_append(l, value_new_list());
        value_list_append(l, value_new_map());
        value_map_set(inner, "", value_new_bool(false));
        value_list_append(l, inner);
        value_map_set(m, "list", l);
        return m;
}

static void test_builders(void)
{
        char buf[] = "abc";
        Gadget__Value *v;

        v = value_new_null();
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_NULL_VALUE, "null builder");
        value_free(v);
        v = value_new_bool(true);
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_BOOL_VALUE && v->bool_value, "bool builder");
        value_free(v);
        v = value_new_int(INT64_MIN);
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_INT_VALUE && v->int_value == INT64_MIN, "int builder");
        value_free(v);
        v = value_new_double(-0.5);
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_DOUBLE_VALUE && v->double_value == -0.5, "double builder");
        value_free(v);

        v = value_new_string(buf);
        buf[0] = 'x';
        CHECK_STR(value_string(v), "abc", "string builder copies its argument");
        value_free(v);
        v = value_new_string_len("abcdef", 3);
        CHECK_STR(value_string(v), "abc", "string_len takes len bytes");
        value_free(v);
        v = value_new_string("");
        CHECK(v && v->string_value != protobuf_c_empty_string && v->string_value[0] == '\0',
              "empty string is a copy, not protobuf_c_empty_string (which packing would drop)");
        value_free(v);
        errno = 0;
        CHECK(value_new_string_len("a\0b", 3) == NULL && errno == EINVAL,
              "string with an embedded NUL is refused, not cut");
        CHECK(value_new_string(NULL) == NULL, "NULL string refused");

        v = value_new_bytes("\0\1\2", 3);
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_BYTES_VALUE && v->bytes_value.len == 3 &&
              memcmp(v->bytes_value.data, "\0\1\2", 3) == 0, "bytes builder copies");
        value_free(v);
        v = value_new_bytes(NULL, 0);
        CHECK(v && v->bytes_value.len == 0, "empty bytes");
        value_free(v);
        CHECK(value_new_bytes(NULL, 5) == NULL, "bytes without data refused");

        CHECK(value_string(NULL) == NULL, "value_string(NULL)");
        v = value_new_int(1);
        CHECK(value_string(v) == NULL, "value_string of an int is NULL");
        value_free(v);
        value_free(NULL); /* a no-op: a crash here (or an ASan report) fails the test */
}

static void test_list(void)
{
        Gadget__Value *l = value_new_list(), *i = value_new_int(3);

        CHECK(value_list_append(l, value_new_int(1)) == 0, "append 1");
        CHECK(value_list_append(l, value_new_string("two")) == 0, "append 2");
        CHECK(value_list_append(l, i) == 0, "append 3");
        CHECK(l->list_value->n_items == 3 && l->list_value->items[2] == i &&
              l->list_value->items[0]->int_value == 1, "list holds items in order");
        CHECK(value_list_append(l, NULL) == -EINVAL, "append NULL refused");
        /* The item is freed on failure: the sanitizer build sees a leak otherwise. */
        CHECK(value_list_append(i, value_new_int(4)) == -EINVAL, "append to an int refused");
        CHECK(value_list_append(NULL, value_new_int(4)) == -EINVAL, "append to NULL refused");
        CHECK(check(l) == 0, "built list passes value_check (%s)", why);
        value_free(l);

        l = value_new_list();
        int e = 0;
        for (int k = 0; k < 5000 && e == 0; k++)
                e = value_list_append(l, value_new_int(k));
        CHECK(e == 0 && l->list_value->n_items == 5000 && l->list_value->items[4999]->int_value == 4999,
              "5000 appends");
        value_free(l);
        l = list_of(VALUE_MAX_ITEMS);
        CHECK(check(l) == 0, "list of VALUE_MAX_ITEMS accepted (%s)", why);
        value_free(l);
}

static void test_map(void)
{
        Gadget__Value *m = value_new_map(), *b = value_new_int(2);
        const Gadget__Value *got;

        CHECK(value_map_set(m, "a", value_new_int(1)) == 0, "set a");
        CHECK(value_map_set(m, "b", b) == 0, "set b");
        got = value_map_get(m, "b");
        CHECK(got == b, "get b returns the stored value");
        got = value_map_get(m, "a");
        CHECK(got && got->int_value == 1, "get a");
        CHECK(value_map_get(m, "c") == NULL, "get of a missing key is NULL");
        CHECK(value_map_set(m, "a", value_new_string("one")) == 0, "set a again");
        CHECK(m->map_value->n_entries == 2, "replacing keeps one entry per key");
        CHECK_STR(value_string(value_map_get(m, "a")), "one", "a replaced");
        CHECK(value_map_set(m, "b", b) == 0 && value_map_get(m, "b") == b,
              "setting a key to its own value keeps it alive");
        CHECK(value_map_set(m, NULL, value_new_null()) == -EINVAL, "NULL key refused");
        CHECK(value_map_set(m, "x", NULL) == -EINVAL, "NULL item refused");
        CHECK(value_map_set(b, "x", value_new_null()) == -EINVAL, "set on an int refused");
        CHECK(value_map_get(b, "a") == NULL, "get on an int is NULL");
        CHECK(value_map_get(NULL, "a") == NULL, "get on NULL is NULL");
        CHECK(value_map_set(m, "", value_new_null()) == 0 && value_map_get(m, "") != NULL, "empty key");
        CHECK(check(m) == 0, "built map passes value_check (%s)", why);
        value_free(m);
}

static void test_dup(void)
{
        Gadget__Value *s = sample(), *d = value_dup(s);

        CHECK(d && d != s, "dup returns a new tree");
        CHECK(d && same(s, d), "dup packs to the same bytes");
        CHECK(d && value_map_get(d, "list") != value_map_get(s, "list"), "dup copies sub-trees");
        CHECK(d && value_string(value_map_get(d, "string")) != value_string(value_map_get(s, "string")),
              "dup copies strings");
        value_map_set(s, "int", value_new_int(99));
        CHECK(d && value_map_get(d, "int")->int_value == -42, "changing the original leaves the copy");
        CHECK(check(d) == 0, "copy passes value_check (%s)", why);
        CHECK(value_dup(NULL) == NULL, "dup(NULL) is NULL");
        value_free(s);
        value_free(d);
}

static void test_check_good(void)
{
        Gadget__Value *v = sample(), *n;

        CHECK(check(v) == 0, "sample tree accepted (%s)", why);
        value_free(v);
        n = nested(VALUE_MAX_DEPTH);
        CHECK(check(n) == 0, "%u nested lists accepted (%s)", VALUE_MAX_DEPTH, why);
        CHECK(value_check(n, 1000, why, sizeof(why)) == 0, "max_depth above VALUE_MAX_DEPTH is capped, not refused");
        value_free(n);
        n = nested(3);
        CHECK(value_check(n, 3, why, sizeof(why)) == 0, "3 levels with max_depth 3");
        CHECK(value_check(n, 2, why, sizeof(why)) == -EINVAL, "3 levels with max_depth 2 refused");
        CHECK(value_check(n, 0, NULL, 0) == -EINVAL, "max_depth 0 allows only scalars; why may be NULL");
        value_free(n);
        n = value_new_int(5);
        CHECK(value_check(n, 0, why, sizeof(why)) == 0, "scalar with max_depth 0");
        value_free(n);
        n = map_of(VALUE_MAX_ITEMS, "key");
        CHECK(check(n) == 0, "map of %u distinct keys accepted (%s)", VALUE_MAX_ITEMS, why);
        value_free(n);
}

static void test_check_bad(void)
{
        Gadget__Value *v, *l;

        CHECK(check(NULL) == -EINVAL, "NULL value refused");
        v = value_new_int(1);
        v->kind_case = GADGET__VALUE__KIND__NOT_SET;
        CHECK(check(v) == -EINVAL && strstr(why, "kind"), "kind not set refused: %s", why);
        value_free(v);
        l = value_new_list();
        v = value_new_null();
        v->kind_case = GADGET__VALUE__KIND__NOT_SET;
        value_list_append(l, value_new_null());
        value_list_append(l, v);
        CHECK(check(l) == -EINVAL && strstr(why, "depth 1"), "nested kind not set refused: %s", why);
        value_free(l);

        v = nested(VALUE_MAX_DEPTH + 1);
        CHECK(check(v) == -EINVAL && strstr(why, "deeper"), "%u nested lists refused: %s", VALUE_MAX_DEPTH + 1, why);
        CHECK(value_check(v, 1000, why, sizeof(why)) == -EINVAL, "even with a larger max_depth");
        value_free(v);
        v = value_new_map();
        value_map_set(v, "m", nested(VALUE_MAX_DEPTH));
        CHECK(check(v) == -EINVAL, "depth counts maps too");
        value_free(v);

        v = list_of(VALUE_MAX_ITEMS + 1);
        CHECK(check(v) == -EINVAL && strstr(why, "65537"), "list of %u items refused: %s", VALUE_MAX_ITEMS + 1, why);
        value_free(v);
        v = map_of(VALUE_MAX_ITEMS + 1, "");
        CHECK(check(v) == -EINVAL && strstr(why, "entries"), "map of %u entries refused: %s", VALUE_MAX_ITEMS + 1, why);
        value_free(v);
        v = value_new_list();
        for (int i = 0; i < 5; i++)
                value_list_append(v, list_of(VALUE_MAX_ITEMS));
        CHECK(check(v) == -EINVAL && strstr(why, "262144"), "more than VALUE_MAX_NODES values refused: %s", why);
        value_free(v);
}

static void test_utf8(void)
{
        static const char *good[] = {
                "", "plain", "h\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbf",
                "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80", "\xc2\x80",
        };
        static const struct { const char *s, *what; } bad[] = {
                { "\x80", "lone continuation byte" },
                { "a\xbf", "continuation byte after ASCII" },
                { "\xc0\xaf", "overlong 2-byte '/'" },
                { "\xc1\xbf", "overlong 2-byte" },
                { "\xe0\x80\xaf", "overlong 3-byte" },
                { "\xe0\x9f\xbf", "overlong 3-byte U+07FF" },
                { "\xf0\x80\x80\xaf", "overlong 4-byte" },
                { "\xf0\x8f\xbf\xbf", "overlong 4-byte U+FFFF" },
                { "\xed\xa0\x80", "high surrogate U+D800" },
                { "\xed\xbf\xbf", "low surrogate U+DFFF" },
                { "\xed\xa0\xbd\xed\xb8\x80", "surrogate pair (CESU-8)" },
                { "\xf4\x90\x80\x80", "U+110000" },
                { "\xf5\x80\x80\x80", "lead byte 0xf5" },
                { "\xf8\x88\x80\x80\x80", "5-byte form" },
                { "\xfe", "0xfe" },
                { "\xff", "0xff" },
                { "\xe2\x82", "truncated 3-byte" },
                { "\xf0\x9f\x98", "truncated 4-byte" },
                { "\xe2\x28\xa1", "bad continuation" },
                { "ok\xc3", "truncated at the end" },
        };
        Gadget__Value *v, *m;

        for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++) {
                v = value_new_string(good[i]);
                CHECK(value_utf8_valid(good[i], strlen(good[i])) && check(v) == 0, "valid UTF-8 #%zu accepted", i);
                value_free(v);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                v = value_new_string(bad[i].s);
                CHECK(!value_utf8_valid(bad[i].s, strlen(bad[i].s)) && check(v) == -EINVAL &&
                      strstr(why, "UTF-8"), "invalid UTF-8 refused: %s", bad[i].what);
                value_free(v);
        }
        CHECK(value_utf8_valid("a\0b", 3), "NUL is valid UTF-8 when a length is given");
        CHECK(!value_utf8_valid("\xe2\x82\xac", 2), "length cuts a sequence");
        CHECK(value_utf8_valid(NULL, 0) && !value_utf8_valid(NULL, 1), "NULL only with length 0");
        /* Long ASCII runs are checked a word at a time: a bad byte at any
         * offset after one, and a sequence cut by the length, still count. */
        char buf[64];
        for (size_t at = 0; at < 40; at++) {
                memset(buf, 'a', sizeof buf);
                buf[at] = (char)0xff;
                CHECK(!value_utf8_valid(buf, sizeof buf), "a bad byte at %zu after ASCII refused", at);
                memcpy(buf + at, "\xe2\x82\xac", 3);
                CHECK(value_utf8_valid(buf, sizeof buf), "a euro sign at %zu after ASCII accepted", at);
                CHECK(!value_utf8_valid(buf, at + 2), "a euro sign cut at %zu refused", at + 2);
        }

        m = value_new_map();
        value_map_set(m, "\xed\xa0\x80", value_new_null());
        CHECK(check(m) == -EINVAL && strstr(why, "key"), "invalid UTF-8 map key refused: %s", why);
        value_free(m);
}

static void test_dup_keys(void)
{
        Gadget__Value *m = value_new_map(), *outer;
        Gadget__MapEntry *e;

        value_map_set(m, "a", value_new_null());
        value_map_set(m, "b", value_new_null());
        value_map_set(m, "c", value_new_null());
        e = m->map_value->entries[2];
        free(e->key);
        e->key = strdup("a");
        CHECK(check(m) == -EINVAL && strstr(why, "\"a\"") && strstr(why, "repeated") && strstr(why, "depth 1"),
              "repeated key refused: %s", why);
        outer = value_new_list();
        value_list_append(outer, m);
        CHECK(check(outer) == -EINVAL && strstr(why, "depth 2"), "repeated key in a nested map: %s", why);
        free(e->key);
        e->key = strdup("\x01\"x");
        value_free(outer);

        m = map_of(VALUE_MAX_ITEMS, "k");
        e = m->map_value->entries[VALUE_MAX_ITEMS - 1];
        free(e->key);
        e->key = strdup("k0\n");
        CHECK(check(m) == 0, "near-equal keys are distinct");
        free(e->key);
        e->key = strdup("k0");
        CHECK(check(m) == -EINVAL && strstr(why, "\"k0\""), "first and last of %u keys equal: %s", VALUE_MAX_ITEMS, why);
        value_free(m);

        m = value_new_map();
        value_map_set(m, "\"\n\\", value_new_null());
        value_map_set(m, "y", value_new_null());
        e = m->map_value->entries[1];
        free(e->key);
        e->key = strdup("\"\n\\");
        CHECK(check(m) == -EINVAL && strstr(why, "\\x22\\x0a\\x5c") && !strchr(why, '\n'),
              "repeated key escaped in the reason: %s", why);
        value_free(m);
}

static void test_null_parts(void)
{
        Gadget__Value *v, *l, *m;

        v = value_new_null();
        v->kind_case = GADGET__VALUE__KIND_LIST_VALUE;
        v->list_value = NULL;
        CHECK(check(v) == -EINVAL && strstr(why, "without a list"), "kind LIST without list: %s", why);
        v->kind_case = GADGET__VALUE__KIND_MAP_VALUE;
        v->map_value = NULL;
        CHECK(check(v) == -EINVAL && strstr(why, "without a map"), "kind MAP without map: %s", why);
        v->kind_case = GADGET__VALUE__KIND_STRING_VALUE;
        v->string_value = NULL;
        CHECK(check(v) == -EINVAL, "kind STRING without string: %s", why);
        v->kind_case = GADGET__VALUE__KIND_BYTES_VALUE;
        v->bytes_value.len = 3;
        v->bytes_value.data = NULL;
        CHECK(check(v) == -EINVAL, "bytes with length but no data: %s", why);
        value_free(v);

        l = value_new_list();
        value_list_append(l, value_new_null());
        value_list_append(l, value_new_null());
        value_free(l->list_value->items[1]);
        l->list_value->items[1] = NULL;
        CHECK(check(l) == -EINVAL && strstr(why, "item 1"), "NULL list item: %s", why);
        CHECK(value_dup(l) == NULL, "dup refuses a list with a hole");
        value_free(l);
        l = value_new_list();
        l->list_value->n_items = 2;
        CHECK(check(l) == -EINVAL, "list count without items: %s", why);
        l->list_value->n_items = 0;
        value_free(l);

        m = value_new_map();
        value_map_set(m, "a", value_new_null());
        value_free(m->map_value->entries[0]->value);
        m->map_value->entries[0]->value = NULL;
        CHECK(check(m) == -EINVAL && strstr(why, "without value"), "map entry without value: %s", why);
        CHECK(value_dup(m) == NULL, "dup refuses an entry without value");
        value_free(m);
        m = value_new_map();
        value_map_set(m, "a", value_new_null());
        protobuf_c_message_free_unpacked(&m->map_value->entries[0]->base, NULL);
        m->map_value->entries[0] = NULL;
        CHECK(check(m) == -EINVAL && strstr(why, "entry 0"), "NULL map entry: %s", why);
        value_free(m);
        m = value_new_map();
        value_map_set(m, "a", value_new_null());
        free(m->map_value->entries[0]->key);
        m->map_value->entries[0]->key = NULL;
        CHECK(check(m) == -EINVAL && strstr(why, "without key"), "map entry without key: %s", why);
        value_free(m);
}

/* Appends a protobuf varint. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
        size_t n = 0;
        do {
                p[n] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
                v >>= 7;
                n++;
        } while (v);
        return n;
}

/* Packed Value{list_value: List{items: [...]}} nested levels deep, built
 * from the inside out in buf (size cap); returns the start offset. */
static size_t deep_packed(uint8_t *buf, size_t cap, unsigned levels)
{
        size_t pos = cap;
        uint8_t tmp[10];

        buf[--pos] = 1;
        buf[--pos] = 0x08; /* null_value: true */
        for (unsigned i = 0; i < levels; i++) {
                for (int t = 0; t < 2; t++) {
                        size_t n = put_varint(tmp, cap - pos);
                        pos -= n;
                        memcpy(buf + pos, tmp, n);
                        buf[--pos] = t == 0 ? 0x0a : 0x3a; /* List.items / Value.list_value */
                }
        }
        return pos;
}

static void test_protobuf(void)
{
        Gadget__Value *v = sample(), *u, *u2;
        size_t len, len2;
        uint8_t *buf = pack(v, &len), *buf2;
        static const uint8_t empty_string[] = { 0x2a, 0x00 };
        static const uint8_t bad_utf8[] = { 0x2a, 0x02, 0xc0, 0xaf };
        static const uint8_t no_kind[] = { 0x00 };
        /* Map{entries: [{key "k", value null}, {key "k", value null}]} */
        static const uint8_t dup_keys[] = { 0x42, 0x12, 0x0a, 0x07, 0x0a, 0x01, 'k', 0x12, 0x02, 0x08, 0x01,
                                            0x0a, 0x07, 0x0a, 0x01, 'k', 0x12, 0x02, 0x08, 0x01 };
        /* Map{entries: [{key "k"}]}: no value */
        static const uint8_t no_value[] = { 0x42, 0x05, 0x0a, 0x03, 0x0a, 0x01, 'k' };
        /* List with an empty Value item: kind not set */
        static const uint8_t empty_item[] = { 0x3a, 0x02, 0x0a, 0x00 };

        u = gadget__value__unpack(NULL, len, buf);
        CHECK(u != NULL, "sample unpacks");
        CHECK(check(u) == 0, "unpacked sample passes value_check (%s)", why);
        buf2 = pack(u, &len2);
        CHECK(len == len2 && memcmp(buf, buf2, len) == 0, "repacks to the same bytes");
        CHECK(u && value_map_get(u, "empty") && value_map_get(u, "empty")->kind_case == GADGET__VALUE__KIND_STRING_VALUE,
              "empty string keeps its kind through the wire");
        CHECK(u && value_map_get(u, "nobytes") &&
              value_map_get(u, "nobytes")->kind_case == GADGET__VALUE__KIND_BYTES_VALUE, "empty bytes too");
        u2 = value_dup(u);
        CHECK(u2 && same(u, u2), "dup of an unpacked tree");
        CHECK(u && value_map_set(u, "int", value_new_int(5)) == 0 && value_map_set(u, "new", value_new_null()) == 0 &&
              value_list_append((Gadget__Value *)value_map_get(u, "list"), value_new_null()) == 0,
              "unpacked trees can be changed with the builders");
        CHECK(check(u) == 0, "and still pass value_check");
        value_free(u);
        value_free(u2);
        value_free(v);
        free(buf);
        free(buf2);

        u = gadget__value__unpack(NULL, sizeof(empty_string), empty_string);
        CHECK(u && check(u) == 0 && value_string(u) && !*value_string(u), "packed empty string");
        value_free(u);
        u = gadget__value__unpack(NULL, sizeof(bad_utf8), bad_utf8);
        CHECK(u != NULL, "protobuf-c does not check UTF-8 itself");
        CHECK(check(u) == -EINVAL && strstr(why, "UTF-8"), "overlong string from the wire refused: %s", why);
        value_free(u);
        u = gadget__value__unpack(NULL, 0, no_kind);
        CHECK(u && check(u) == -EINVAL && strstr(why, "kind"), "empty message from the wire refused: %s", why);
        value_free(u);
        u = gadget__value__unpack(NULL, sizeof(dup_keys), dup_keys);
        CHECK(u && check(u) == -EINVAL && strstr(why, "repeated"), "repeated key from the wire refused: %s", why);
        value_free(u);
        u = gadget__value__unpack(NULL, sizeof(no_value), no_value);
        CHECK(u && check(u) == -EINVAL && strstr(why, "without value"), "entry without value from the wire: %s", why);
        value_free(u);
        u = gadget__value__unpack(NULL, sizeof(empty_item), empty_item);
        CHECK(u && check(u) == -EINVAL && strstr(why, "kind"), "list item without kind from the wire: %s", why);
        value_free(u);
}

static void test_packed_check(void)
{
        size_t cap = 200000, start, len;
        uint8_t *buf = malloc(cap);
        Gadget__Value *v, *u;
        Gadget__WorkerMsg msg = GADGET__WORKER_MSG__INIT;
        Gadget__CallResult res = GADGET__CALL_RESULT__INIT;
        static const uint8_t truncated[] = { 0x3a, 0x05, 0x0a, 0x01 };
        static const uint8_t huge_len[] = { 0x2a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a' };
        static const uint8_t group[] = { 0x0b, 0x0c };

        start = deep_packed(buf, cap, 10000);
        CHECK(value_packed_check(&gadget__value__descriptor, buf + start, cap - start, why, sizeof(why)) == -EINVAL &&
              strstr(why, "nested"), "10000 nested lists (%zu bytes) refused before unpacking: %s", cap - start, why);
        start = deep_packed(buf, cap, VALUE_MAX_DEPTH);
        CHECK(value_packed_check(&gadget__value__descriptor, buf + start, cap - start, why, sizeof(why)) == 0,
              "%u nested lists pass (%s)", VALUE_MAX_DEPTH, why);
        u = gadget__value__unpack(NULL, cap - start, buf + start);
        CHECK(u && check(u) == 0, "and unpack to a valid value");
        value_free(u);

        /* Deepest valid value: maps all the way (3 messages per level),
         * inside the WorkerMsg/CallResult envelope. */
        v = value_new_int(1);
        for (int i = 0; i < VALUE_MAX_DEPTH; i++) {
                Gadget__Value *m = value_new_map();
                value_map_set(m, "k", v);
                v = m;
        }
        res.outcome_case = GADGET__CALL_RESULT__OUTCOME_VALUE;
        res.value = v;
        msg.msg_case = GADGET__WORKER_MSG__MSG_RESULT;
        msg.result = &res;
        len = gadget__worker_msg__pack(&msg, buf);
        CHECK(value_packed_check(&gadget__worker_msg__descriptor, buf, len, why, sizeof(why)) == 0,
              "deepest valid value in its envelope passes (%s)", why);
        value_free(v);

        v = value_new_list();
        for (int i = 0; i < 1000; i++)
                value_list_append(v, value_new_string("wide"));
        len = gadget__value__pack(v, buf);
        CHECK(value_packed_check(&gadget__value__descriptor, buf, len, why, sizeof(why)) == 0, "wide list passes");
        value_free(v);

        CHECK(value_packed_check(&gadget__value__descriptor, truncated, sizeof(truncated), why, sizeof(why)) == -EINVAL,
              "sub-message past the end refused: %s", why);
        CHECK(value_packed_check(&gadget__value__descriptor, huge_len, sizeof(huge_len), why, sizeof(why)) == -EINVAL,
              "length near 4 GiB refused: %s", why);
        CHECK(value_packed_check(&gadget__value__descriptor, group, sizeof(group), why, sizeof(why)) == -EINVAL,
              "group wire type refused: %s", why);
        CHECK(value_packed_check(&gadget__value__descriptor, buf, 0, why, sizeof(why)) == 0, "empty message passes");
        free(buf);
}

/* The cost counted before unpacking: one per nested message, exactly. */
static void test_packed_cost(void)
{
        size_t cap = 1u << 20, len, n = 0;
        uint8_t *buf = malloc(cap);
        Gadget__Value *v = value_new_list();
        for (int i = 0; i < 1000; i++)
                value_list_append(v, value_new_null());
        Gadget__Value *m = value_new_map();
        value_map_set(m, "a", value_new_int(1));
        value_map_set(m, "b", value_new_string("x"));
        value_list_append(v, m);
        len = gadget__value__pack(v, buf);
        /* list node + 1000 nulls + the map value, its map node, 2 entries
         * and their 2 values */
        CHECK(value_packed_cost(&gadget__value__descriptor, buf, len, SIZE_MAX, &n, why, sizeof(why)) == 0 &&
              n == 1 + 1000 + 1 + 1 + 2 + 2, "counts every nested message: %zu", n);
        CHECK(value_packed_cost(&gadget__value__descriptor, buf, len, n, &n, why, sizeof(why)) == 0,
              "a count at the bound passes");
        n = 7;
        CHECK(value_packed_cost(&gadget__value__descriptor, buf, len, 1006, &n, why, sizeof(why)) == -EINVAL &&
              strstr(why, "more than 1006 values") && n == 7, "one over the bound refused, *values untouched: %s",
              why);
        CHECK(value_packed_cost(&gadget__value__descriptor, buf, 0, 0, &n, why, sizeof(why)) == 0 && n == 0,
              "an empty message costs nothing");
        value_free(v);
        free(buf);
}

/* value_preview: a value as a person reads it, cut at a fixed size
 * (gadgetctl trace NAME): bytes as their size, control bytes escaped, a
 * cut never inside a UTF-8 character, a huge value a bounded walk. */
static void test_preview(void)
{
        char out[24];
        Gadget__Value *m = value_new_map();
        value_map_set(m, "k", value_new_string("a\"b\n"));
        value_map_set(m, "b", value_new_bytes("secretbytes", 11));
        CHECK(value_preview(m, out, sizeof out) == strlen(out), "the length written");
        CHECK_STR(out, "{\"k\":\"a\\\"b\\u000a\",\"b\xe2\x80\xa6", "escaped, cut at 20 bytes");
        value_free(m);
        char wide[64];
        Gadget__Value *b = value_new_bytes("secretbytes", 11);
        value_preview(b, wide, sizeof wide);
        CHECK_STR(wide, "<11 bytes>", "bytes as their size, never their content");
        value_free(b);
        /* "é" is 2 bytes: a cut at an odd offset keeps whole characters. */
        Gadget__Value *u = value_new_string("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
        value_preview(u, out, sizeof out);
        CHECK(value_utf8_valid(out, strlen(out)) && strlen(out) <= sizeof out - 1, "cut on a character: %s", out);
        value_free(u);
        Gadget__Value *l = list_of(VALUE_MAX_ITEMS);
        value_preview(l, out, sizeof out);
        CHECK(strlen(out) <= sizeof out - 1 && strncmp(out, "[null,null,", 11) == 0, "a long list cut: %s", out);
        value_free(l);
        value_preview_text("line\tone\nline two", wide, sizeof wide);
        CHECK_STR(wide, "line one line two", "a text on one line");
}

int main(void)
{
        test_builders();
        test_list();
        test_map();
        test_dup();
        test_check_good();
        test_check_bad();
        test_utf8();
        test_dup_keys();
        test_null_parts();
        test_protobuf();
        test_packed_check();
        test_packed_cost();
        test_preview();
        return tap_done();
}
