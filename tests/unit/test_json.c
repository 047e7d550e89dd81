/* Unit tests of proto/json.c: JSON text <-> typed values, limits and the
 * error messages a gadgetctl user sees. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "json.h"
#include "value.h"

static char err[256];

/* Parses text; the value or NULL, message in err. */
static Gadget__Value *parse(const char *text)
{
        Gadget__Value *v = NULL;
        err[0] = '\0';
        if (json_to_value(text, strlen(text), &v, err, sizeof(err)) < 0)
                return NULL;
        return v;
}

/* Whether text parses and renders back to want (text itself if NULL). */
static int round_trip(const char *text, const char *want)
{
        Gadget__Value *v = parse(text);
        char *s = v ? json_from_value(v) : NULL;
        int ok = s && strcmp(s, want ? want : text) == 0;
        if (!ok)
                printf("# %s -> %s (%s)\n", text, s ? s : "(null)", err);
        free(s);
        value_free(v);
        return ok;
}

/* Renders v (then frees it) and compares with want. */
static int renders(Gadget__Value *v, const char *want)
{
        char *s = json_from_value(v);
        int ok = s && strcmp(s, want) == 0;
        if (!ok)
                printf("# rendered %s, want %s\n", s ? s : "(null)", want);
        free(s);
        value_free(v);
        return ok;
}

/* Text of n nested arrays around 0. */
static char *nested_text(unsigned n)
{
        char *s = malloc(2 * n + 2), *p = s;
        memset(p, '[', n);
        p += n;
        *p++ = '0';
        memset(p, ']', n);
        p[n] = '\0';
        return s;
}

/* Text of an array of n zeros. */
static char *zeros_text(size_t n)
{
        char *s = malloc(2 * n + 3), *p = s;
        *p++ = '[';
        for (size_t i = 0; i < n; i++) {
                *p++ = '0';
                *p++ = ',';
        }
        p[n ? -1 : 0] = ']';
        p[n ? 0 : 1] = '\0';
        return s;
}

static void test_types(void)
{
        Gadget__Value *v;

        CHECK(round_trip("null", NULL), "null");
        CHECK(round_trip("true", NULL) && round_trip("false", NULL), "booleans");
        CHECK(round_trip("0", NULL) && round_trip("-17", NULL), "small ints");
        CHECK(round_trip("9223372036854775807", NULL) && round_trip("-9223372036854775808", NULL), "int64 limits");
        CHECK(round_trip("1.5", NULL) && round_trip("-0.25", NULL), "doubles");
        CHECK(round_trip("\"\"", NULL), "empty string");
        CHECK(round_trip("\"a\\\"b\\\\c\\n\\t\\u0001\"", NULL), "escapes");
        CHECK(round_trip("\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", NULL), "UTF-8 kept as is");
        CHECK(round_trip("\"\\u00e9\\ud83d\\ude00\"", "\"\xc3\xa9\xf0\x9f\x98\x80\""), "\\u escapes decoded");
        CHECK(round_trip("[]", NULL) && round_trip("{}", NULL), "empty list and map");
        CHECK(round_trip("[1,\"two\",[3.5,null],{\"k\":true}]", NULL), "mixed list");
        CHECK(round_trip("{\"b\":1,\"a\":{\"c\":[],\"d\":{}}}", NULL), "nested map keeps key order");
        CHECK(round_trip(" { \"a\" : [ 1 , 2 ] } ", "{\"a\":[1,2]}"), "output is compact");
        CHECK(round_trip("{\"$bytes\":\"aGVsbG8=\"}", NULL), "bytes");

        v = parse("{\"s\":\"x\",\"l\":[1],\"m\":{\"k\":null},\"b\":{\"$bytes\":\"AP8=\"},\"d\":2.0}");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_MAP_VALUE, "object -> map");
        CHECK(v && value_map_get(v, "l")->kind_case == GADGET__VALUE__KIND_LIST_VALUE, "array -> list");
        CHECK(v && value_map_get(v, "m")->kind_case == GADGET__VALUE__KIND_MAP_VALUE, "object -> map (nested)");
        CHECK_STR(value_string(value_map_get(v, "s")), "x", "string -> string");
        CHECK(v && value_map_get(v, "b")->kind_case == GADGET__VALUE__KIND_BYTES_VALUE &&
              value_map_get(v, "b")->bytes_value.len == 2 && value_map_get(v, "b")->bytes_value.data[0] == 0 &&
              value_map_get(v, "b")->bytes_value.data[1] == 0xff, "$bytes object -> bytes");
        CHECK(value_check(v, VALUE_MAX_DEPTH, err, sizeof(err)) == 0, "parsed value passes value_check (%s)", err);
        value_free(v);
        v = parse("null");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_NULL_VALUE, "null -> null");
        value_free(v);
        v = parse("true");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_BOOL_VALUE && v->bool_value, "true -> bool");
        value_free(v);
}

static void test_numbers(void)
{
        Gadget__Value *v;

        v = parse("1");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_INT_VALUE && v->int_value == 1, "1 is an int");
        value_free(v);
        v = parse("1.0");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_DOUBLE_VALUE && v->double_value == 1.0, "1.0 is a double");
        value_free(v);
        v = parse("1e2");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_DOUBLE_VALUE && v->double_value == 100.0, "1e2 is a double");
        value_free(v);
        v = parse("-0");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_INT_VALUE && v->int_value == 0, "-0 is the int 0");
        value_free(v);

        CHECK(renders(value_new_int(100), "100"), "int 100 -> 100");
        CHECK(renders(value_new_double(100.0), "100.0"), "double 100 -> 100.0 (reads back as a double)");
        CHECK(renders(value_new_double(0.1), "0.1"), "0.1 in shortest form");
        CHECK(renders(value_new_double(1.0 / 3.0), "0.3333333333333333"), "1/3");
        CHECK(renders(value_new_double(0.1 + 0.2), "0.30000000000000004"), "0.1+0.2 needs 17 digits");
        CHECK(renders(value_new_double(1e300), "1e300"), "1e300");
        CHECK(renders(value_new_double(1e15), "1000000000000000.0"), "1e15 without exponent");
        CHECK(renders(value_new_double(1.5e-7), "1.5e-7"), "small numbers with exponent");
        CHECK(renders(value_new_double(-0.0), "-0.0"), "negative zero");
        CHECK(renders(value_new_double(5e-324), "5e-324"), "smallest subnormal");
        CHECK(renders(value_new_double(NAN), "null"), "NaN renders as null");
        CHECK(renders(value_new_double(INFINITY), "null") && renders(value_new_double(-INFINITY), "null"),
              "infinities render as null");
        v = value_new_list();
        value_list_append(v, value_new_double(0.1));
        value_list_append(v, value_new_double(NAN));
        value_list_append(v, value_new_int(3));
        CHECK(renders(v, "[0.1,null,3]"), "non-finite inside a list");

        /* Every double reads back exactly, alone and beside others that
         * need a different precision. */
        uint64_t x = 0x9e3779b97f4a7c15u;
        int bad = 0, kind = 0;
        for (int i = 0; i < 20000; i++) {
                double d, pair[2];
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                memcpy(&d, &x, sizeof(d));
                if (i % 4 == 1)
                        d = ldexp(1.0, (int)(x % 2000) - 1000); /* powers of two */
                else if (i % 4 == 2)
                        d = (double)(x % 100000) / 1000.0; /* short decimals */
                if (!isfinite(d))
                        continue;
                v = value_new_list();
                value_list_append(v, value_new_double(d));
                value_list_append(v, value_new_double(i % 3 ? 0.1 : 1.0 / 3.0));
                char *s = json_from_value(v);
                Gadget__Value *back = NULL;
                value_free(v);
                if (!s || json_to_value(s, strlen(s), &back, err, sizeof(err)) < 0) {
                        bad++;
                } else {
                        for (int k = 0; k < 2; k++) {
                                Gadget__Value *item = back->list_value->items[k];
                                if (item->kind_case != GADGET__VALUE__KIND_DOUBLE_VALUE)
                                        kind++;
                                pair[k] = item->double_value;
                        }
                        if (memcmp(&pair[0], &d, sizeof(d)) != 0)
                                bad++;
                }
                free(s);
                value_free(back);
        }
        CHECK(bad == 0, "20000 doubles read back bit for bit (%d did not)", bad);
        CHECK(kind == 0, "and read back as doubles, never ints");
}

static void test_bytes(void)
{
        static const struct { const char *text, *what; } bad[] = {
                { "{\"$bytes\":\"abc\"}", "length not a multiple of 4" },
                { "{\"$bytes\":\"YQ\"}", "missing padding" },
                { "{\"$bytes\":\"a===\"}", "three pads" },
                { "{\"$bytes\":\"====\"}", "only pads" },
                { "{\"$bytes\":\"ab!d\"}", "character outside the alphabet" },
                { "{\"$bytes\":\"ab-_\"}", "URL-safe alphabet" },
                { "{\"$bytes\":\"YQ==YQ==\"}", "padding in the middle" },
                { "{\"$bytes\":\"YR==\"}", "unused bits set" },
                { "{\"$bytes\":\"YWJ=\"}", "unused bits set (one pad)" },
                { "{\"$bytes\":\"YWJj\\nZA==\"}", "line break" },
        };
        static const uint8_t all[3] = { 0xfb, 0xff, 0xbf };
        Gadget__Value *v;

        CHECK(round_trip("{\"$bytes\":\"\"}", NULL), "empty bytes");
        CHECK(round_trip("{\"$bytes\":\"YQ==\"}", NULL) && round_trip("{\"$bytes\":\"YWI=\"}", NULL) &&
              round_trip("{\"$bytes\":\"YWJj\"}", NULL), "1, 2 and 3 bytes");
        CHECK(renders(value_new_bytes(all, 3), "{\"$bytes\":\"+/+/\"}"), "standard alphabet (+ and /)");
        v = parse("{\"$bytes\":\"+/+/\"}");
        CHECK(v && v->bytes_value.len == 3 && memcmp(v->bytes_value.data, all, 3) == 0, "decodes + and /");
        value_free(v);
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
                v = parse(bad[i].text);
                CHECK(!v && strstr(err, "base64"), "invalid base64 refused: %s (%s)", bad[i].what, err);
        }
        v = parse("{\"$bytes\":5}");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_MAP_VALUE, "{\"$bytes\": 5} is an ordinary map");
        value_free(v);
        v = parse("{\"$bytes\":\"YQ==\",\"x\":1}");
        CHECK(v && v->kind_case == GADGET__VALUE__KIND_MAP_VALUE && v->map_value->n_entries == 2,
              "$bytes beside another key is an ordinary map");
        value_free(v);
        v = parse("[{\"$bytes\":\"YQ==\"}]");
        CHECK(v && v->list_value->items[0]->kind_case == GADGET__VALUE__KIND_BYTES_VALUE, "bytes inside a list");
        value_free(v);
}

static void test_limits(void)
{
        Gadget__Value *v;
        char *s;

        s = nested_text(VALUE_MAX_DEPTH);
        v = parse(s);
        CHECK(v != NULL, "%u nested arrays accepted (%s)", VALUE_MAX_DEPTH, err);
        free(s);
        s = v ? json_from_value(v) : NULL;
        CHECK(s && strlen(s) == 2 * VALUE_MAX_DEPTH + 1, "and rendered");
        free(s);
        value_free(v);
        s = nested_text(VALUE_MAX_DEPTH + 1);
        v = parse(s);
        CHECK(!v && strstr(err, "deeper than 32"), "%u nested arrays refused: %s", VALUE_MAX_DEPTH + 1, err);
        free(s);
        s = malloc(6 * (VALUE_MAX_DEPTH + 1) + VALUE_MAX_DEPTH + 4);
        {
                char *p = s;
                for (int i = 0; i <= VALUE_MAX_DEPTH; i++)
                        p = stpcpy(p, "{\"a\":");
                *p++ = '1';
                memset(p, '}', VALUE_MAX_DEPTH + 1);
                p[VALUE_MAX_DEPTH + 1] = '\0';
        }
        v = parse(s);
        free(s);
        CHECK(!v && strstr(err, "deeper"), "33 nested objects refused: %s", err);
        s = nested_text(5000);
        v = parse(s);
        CHECK(!v && strstr(err, "line 1"), "5000 nested arrays refused by the parser: %s", err);
        free(s);

        v = value_new_int(1);
        for (int i = 0; i <= VALUE_MAX_DEPTH; i++) {
                Gadget__Value *l = value_new_list();
                value_list_append(l, v);
                v = l;
        }
        s = json_from_value(v);
        CHECK(s == NULL, "a value nested too deep is not rendered");
        free(s);
        value_free(v);

        s = zeros_text(VALUE_MAX_ITEMS);
        v = parse(s);
        CHECK(v && v->list_value->n_items == VALUE_MAX_ITEMS, "array of %u items accepted", VALUE_MAX_ITEMS);
        free(s);
        value_free(v);
        s = zeros_text(VALUE_MAX_ITEMS + 1);
        v = parse(s);
        CHECK(!v && strstr(err, "65537"), "array of %u items refused: %s", VALUE_MAX_ITEMS + 1, err);
        free(s);

        /* 5 arrays of 60000 zeros: each small enough, 300006 values in all. */
        s = malloc(5 * 120010 + 10);
        {
                char *p = s, *z = zeros_text(60000);
                *p++ = '[';
                for (int i = 0; i < 5; i++) {
                        if (i)
                                *p++ = ',';
                        strcpy(p, z);
                        p += strlen(z);
                }
                strcpy(p, "]");
                free(z);
        }
        v = parse(s);
        CHECK(!v && strstr(err, "262144"), "more than VALUE_MAX_NODES values refused: %s", err);
        free(s);
}

static void test_errors(void)
{
        Gadget__Value *v = (Gadget__Value *)&err, *keep = v;

        CHECK(json_to_value("[1,\n 2,,]", 9, &v, err, sizeof(err)) == -EINVAL && v == keep,
              "bad JSON: -EINVAL, output untouched");
        CHECK(strstr(err, "line 2") && strstr(err, "column"), "message names line and column: %s", err);
        v = parse("{\"a\":1,\"a\":2}");
        CHECK(!v && strstr(err, "duplicate") && strstr(err, "line 1"), "repeated key refused: %s", err);
        v = parse("99999999999999999999");
        CHECK(!v && strstr(err, "too big integer") && strstr(err, "column"), "int beyond int64 refused: %s", err);
        v = parse("-99999999999999999999");
        CHECK(!v && strstr(err, "too big negative integer"), "negative int beyond int64 refused: %s", err);
        v = parse("9223372036854775808");
        CHECK(!v && strstr(err, "too big integer"), "INT64_MAX + 1 refused: %s", err);
        v = parse("1e400");
        CHECK(!v && strstr(err, "overflow"), "double overflow refused: %s", err);
        v = parse("");
        CHECK(!v && err[0], "empty text refused: %s", err);
        v = parse("1 2");
        CHECK(!v && strstr(err, "end of file expected"), "trailing data refused: %s", err);
        v = parse("NaN");
        CHECK(!v, "NaN is not JSON: %s", err);
        v = parse("\"\\u0000\"");
        CHECK(!v && strstr(err, "\\u0000"), "\\u0000 refused (no NUL in strings): %s", err);
        v = parse("\"\xc0\xaf\"");
        CHECK(!v && strstr(err, "byte"), "invalid UTF-8 in the text refused: %s", err);
        v = parse("[\"\xed\xa0\x80\"]");
        CHECK(!v && strstr(err, "byte"), "UTF-8 surrogate in the text refused: %s", err);
        v = parse("{\"\xf4\x90\x80\x80\":1}");
        CHECK(!v && strstr(err, "byte"), "key beyond U+10FFFF refused: %s", err);
        v = parse("\"\\ud800\"");
        CHECK(!v, "lone surrogate escape refused: %s", err);
        CHECK(json_to_value("[1]\0garbage", 11, &v, err, sizeof(err)) == -EINVAL, "NUL inside len refused: %s", err);
        CHECK(json_to_value("[1]", 3, &v, NULL, 0) == 0 && v->list_value->n_items == 1, "err may be NULL");
        value_free(v);
        CHECK(json_to_value("[1,", 3, &v, NULL, 0) == -EINVAL, "err may be NULL on failure too");
}

static void test_render_refusals(void)
{
        Gadget__Value *v;

        v = value_new_string("\xed\xa0\x80");
        CHECK(json_from_value(v) == NULL, "string with invalid UTF-8 not rendered");
        value_free(v);
        v = value_new_map();
        value_map_set(v, "a", value_new_int(1));
        value_map_set(v, "b", value_new_int(2));
        free(v->map_value->entries[1]->key);
        v->map_value->entries[1]->key = strdup("a");
        CHECK(json_from_value(v) == NULL, "map with a repeated key not rendered");
        value_free(v);
        v = value_new_map();
        value_map_set(v, "\xff", value_new_int(1));
        CHECK(json_from_value(v) == NULL, "map key with invalid UTF-8 not rendered");
        value_free(v);
        v = value_new_int(1);
        v->kind_case = GADGET__VALUE__KIND__NOT_SET;
        CHECK(json_from_value(v) == NULL, "value without kind not rendered");
        value_free(v);
        CHECK(json_from_value(NULL) == NULL, "NULL not rendered");
        v = value_new_map();
        value_map_set(v, "$bytes", value_new_string("YQ=="));
        CHECK(renders(v, "{\"$bytes\":\"YQ==\"}"), "a map {\"$bytes\": string} renders like bytes (documented)");
}

int main(void)
{
        test_types();
        test_numbers();
        test_bytes();
        test_limits();
        test_errors();
        test_render_refusals();
        return tap_done();
}
