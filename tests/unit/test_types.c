/* Unit tests of the type language of typed methods (proto/types.h): parse
 * (every type, every error and its message), print (canonical form, round
 * trip), check (every type, the messages a caller sees), JSON Schema. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "json.h"
#include "types.h"
#include "value.h"

static char err[512];

/* Parses text; NULL with the message in err. */
static struct type_sig *parse(const char *text)
{
        struct type_sig *sig = NULL;
        err[0] = '\0';
        if (types_sig_parse(text, &sig, err, sizeof err) < 0)
                return NULL;
        return sig;
}

/* Whether text is refused with exactly want. */
static int refused(const char *text, const char *want)
{
        struct type_sig *sig = parse(text);
        int ok = !sig && strcmp(err, want) == 0;
        if (!ok)
                printf("# %s: got \"%s\", want \"%s\"\n", text, sig ? "(parsed)" : err, want);
        types_sig_free(sig);
        return ok;
}

/* Whether text parses, prints as want (text itself if NULL), and that
 * print parses back to the same print. */
static int prints(const char *text, const char *want)
{
        char a[TYPES_MAX_TEXT + 1], b[TYPES_MAX_TEXT + 1];
        struct type_sig *sig = parse(text), *again = NULL;
        int ok = 0;

        if (!sig) {
                printf("# %s: %s\n", text, err);
                return 0;
        }
        types_sig_print(sig, a, sizeof a);
        again = parse(a);
        if (again) {
                types_sig_print(again, b, sizeof b);
                ok = strcmp(a, want ? want : text) == 0 && strcmp(a, b) == 0;
        }
        if (!ok)
                printf("# %s printed \"%s\", want \"%s\" (%s)\n", text, a, want ? want : text, err);
        types_sig_free(sig);
        types_sig_free(again);
        return ok;
}

/* The message of checking json (the arguments when args, else the result)
 * against signature text; "" when accepted, "(bad test)" if a text fails. */
static const char *check_json(const char *text, int args, const char *json)
{
        static char msg[512];
        Gadget__Value *v = NULL;
        struct type_sig *sig = parse(text);

        snprintf(msg, sizeof msg, "(bad test)");
        if (sig && json_to_value(json, strlen(json), &v, msg, sizeof msg) == 0) {
                msg[0] = '\0';
                int e = args ? types_check_args(sig, v, msg, sizeof msg)
                             : types_check_result(sig, v, msg, sizeof msg);
                if ((e == 0) != (msg[0] == '\0'))
                        snprintf(msg, sizeof msg, "(return %d does not match the message)", e);
        }
        value_free(v);
        types_sig_free(sig);
        return msg;
}

#define ARGS_OK(sig, json) CHECK_STR(check_json(sig, 1, json), "", "%s accepts args %s", sig, json)
#define ARGS_NO(sig, json, want) CHECK_STR(check_json(sig, 1, json), want, "%s refuses args %s", sig, json)
#define RES_OK(type, json) CHECK_STR(check_json("f() -> " type, 0, json), "", "%s accepts %s", type, json)
#define RES_NO(type, json, want) CHECK_STR(check_json("f() -> " type, 0, json), want, "%s refuses %s", type, json)

/* The message of checking v (freed) against result type text. */
static const char *check_value(const char *type, Gadget__Value *v)
{
        static char msg[600];
        char text[600];

        snprintf(text, sizeof text, "f() -> %s", type);
        struct type_sig *sig = parse(text);
        msg[0] = '\0';
        if (!sig)
                snprintf(msg, sizeof msg, "(bad test: %s)", err);
        else
                types_check_result(sig, v, msg, sizeof msg);
        types_sig_free(sig);
        value_free(v);
        return msg;
}

static void test_parse_print(void)
{
        CHECK(prints("greet(name: string, times?: int) -> string", NULL), "the issue's greet");
        CHECK(prints("increment() -> int", NULL), "no parameters");
        CHECK(prints("add(title: string, body: string, tags?: list<string>) -> {id: int}", NULL),
              "the issue's add");
        CHECK(prints("  f ( a :int ,b ? : string )->  int|string ", "f(a: int, b?: string) -> int | string"),
              "spaces normalized");
        CHECK(prints("f(\ta:\tint)", "f(a: int)"), "tabs are spaces");
        CHECK(prints("f()", NULL), "no arrow: returns null");
        CHECK(prints("f() -> null", "f()"), "-> null is printed as no arrow");
        CHECK(prints("f(a: null, b: bool, c: int, d: double, e: string, g: bytes, h: any) -> any", NULL),
              "every primitive");
        CHECK(prints("f(a: int(0..100), b: double(0..1), c: string(..64), d: string(1..64), "
                     "e: bytes(..1024), g: list<int>(..10), h: map<int>(1..))", NULL), "bounds");
        CHECK(prints("f(a: double(-1.5e3..0.25), b: double(1E2..1e20))",
                     "f(a: double(-1500..0.25), b: double(100..1e+20))"), "double bounds, shortest form");
        CHECK(prints("f(a: double(0.1..0.30000000000000004))", NULL), "doubles print exactly");
        CHECK(prints("f(a: int(-5..-1), b: int(007..8), c: int(-9223372036854775808..9223372036854775807))",
                     "f(a: int(-5..-1), b: int(7..8), c: int(-9223372036854775808..9223372036854775807))"),
              "int bounds");
        CHECK(prints("f(a: int ( 1 .. 2 ))", "f(a: int(1..2))"), "spaces inside bounds");
        CHECK(prints("f(a: int?, b: list<int>?, c: {x: int}?, d: (int | string)?, e: string(..3)?)", NULL),
              "nullable");
        CHECK(prints("f() -> int | double | string | bytes | bool | null | list<any> | map<int>", NULL),
              "a union of every kind");
        CHECK(prints("f() -> int | (string | bytes)", "f() -> int | string | bytes"), "unions are flattened");
        CHECK(prints("f() -> int | (string | bytes)?", "f() -> (int | string | bytes)?"),
              "a nullable union spliced makes the union nullable");
        CHECK(prints("f() -> int? | string", NULL), "a nullable alternative");
        CHECK(prints("f() -> ((int))", "f() -> int"), "parentheses");
        CHECK(prints("f() -> (int)?", "f() -> int?"), "parenthesized nullable");
        CHECK(prints("f() -> {}", NULL), "empty record");
        CHECK(prints("f() -> {a: {b: list<map<{c?: int}>>}, d?: bytes}", NULL), "nested records");
        CHECK(prints("a.b-c_1() -> int", NULL), "method names with . - _");
        CHECK(prints("f(int: int, list: string, null?: any)", NULL), "keywords as parameter names");

        /* Accessors. */
        struct type_sig *sig = parse("greet(name: string, times?: int) -> string");
        CHECK(sig && strcmp(types_sig_name(sig), "greet") == 0, "name");
        const struct type *p = sig ? types_sig_params(sig) : NULL;
        CHECK(p && p->kind == TYPE_RECORD && p->n_fields == 2 && p->n_required == 1 &&
              strcmp(p->fields[0].name, "name") == 0 && !p->fields[0].optional &&
              p->fields[0].type->kind == TYPE_STRING && p->fields[1].optional, "params record");
        CHECK(sig && types_sig_result(sig)->kind == TYPE_STRING, "result type");
        char small[8];
        int n = sig ? types_sig_print(sig, small, sizeof small) : 0;
        CHECK(n == 42 && strcmp(small, "greet(n") == 0, "print is cut like snprintf (%d)", n);
        n = sig ? types_print(types_sig_params(sig), small, sizeof small) : 0;
        CHECK(n == 27 && strcmp(small, "{name: ") == 0, "types_print of the params record (%d)", n);
        types_sig_free(sig);
        sig = parse("f()");
        CHECK(sig && types_sig_result(sig)->kind == TYPE_NULL && types_sig_params(sig)->n_fields == 0,
              "f() takes {} and returns null");
        types_sig_free(sig);
        types_sig_free(NULL);
}

static void test_parse_errors(void)
{
        CHECK(refused("", "column 1: expected a method name, found the end"), "empty");
        CHECK(refused("(x: int)", "column 1: expected a method name, found \"(\""), "no name");
        CHECK(refused(".f()", "column 1: bad method name \".f\" (it may not start with \".\" or \"-\")"),
              "bad method name");
        CHECK(refused("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa()",
                      "column 1: method name longer than 64 characters"), "long method name");
        CHECK(refused("f", "column 2: expected \"(\", found the end"), "no parameters");
        CHECK(refused("f!()", "column 2: expected \"(\", found \"!\""), "odd character");
        CHECK(refused("f(\x01)", "column 3: expected a parameter name, found byte 0x01"), "control byte");
        CHECK(refused("f(\"a\": int)", "column 3: expected a parameter name, found '\"'"), "quote");
        CHECK(refused("f(x int)", "column 5: expected \"?\" or \":\", found \"int\""), "no colon");
        CHECK(refused("f(x? int)", "column 6: expected \":\", found \"int\""), "no colon after ?");
        CHECK(refused("f(x?: )", "column 7: expected a type, found \")\""), "no type");
        CHECK(refused("greet(name: strin)", "column 13: unknown type \"strin\""), "unknown type");
        CHECK(refused("f(a: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",
                      "column 6: unknown type \"aaaaaaaaaaaaaaaaaaaaaaaa...\""), "long unknown type is cut");
        CHECK(refused("f(1x: int)", "column 3: expected a parameter name, found \"1x\""), "bad identifier");
        CHECK(refused("f(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: int)",
                      "column 3: parameter name longer than 64 characters"), "long identifier");
        CHECK(refused("f(a: int, a: int)", "column 11: parameter \"a\" repeated"), "repeated parameter");
        CHECK(refused("f() -> {a: int, a?: int}", "column 17: field \"a\" repeated"), "repeated field");
        CHECK(refused("f() -> {a: int,}", "column 16: expected a field name, found \"}\""), "trailing comma");
        CHECK(refused("f(a: int,)", "column 10: expected a parameter name, found \")\""), "trailing comma");
        CHECK(refused("f(a: int", "column 9: expected \",\" or \")\", found the end"), "unclosed params");
        CHECK(refused("f() -> {a: int", "column 15: expected \",\" or \"}\", found the end"), "unclosed record");
        CHECK(refused("f() -> list<int", "column 16: expected \"|\" or \">\", found the end"), "unclosed list");
        CHECK(refused("f() -> list int", "column 13: expected \"<\", found \"int\""), "list without <");
        CHECK(refused("f() -> (int", "column 12: expected \"|\" or \")\", found the end"), "unclosed (");
        CHECK(refused("f() int", "column 5: expected \"->\" or the end, found \"int\""), "no arrow");
        CHECK(refused("f() -> int int", "column 12: expected the end, found \"int\""), "garbage after");
        CHECK(refused("f() ->", "column 7: expected a type, found the end"), "arrow without type");
        CHECK(refused("f() -> 5", "column 8: expected a type, found \"5\""), "a number for a type");
        CHECK(refused("f() -> int??", "column 12: \"?\" on a type that already admits null"), "??");
        CHECK(refused("f() -> null?", "column 12: \"?\" on a type that already admits null"), "null?");
        CHECK(refused("f() -> any?", "column 11: \"?\" on a type that already admits null"), "any?");
        CHECK(refused("f() -> (int | null)?", "column 20: \"?\" on a type that already admits null"),
              "nullable union with null");
        CHECK(refused("f() -> int | any", "column 14: a union cannot hold any (any admits every value)"),
              "any in a union");
        CHECK(refused("f() -> int | int(0..1)", "column 14: two alternatives of the union accept ints"),
              "two ints");
        CHECK(refused("f() -> {a: int} | map<int>", "column 19: two alternatives of the union accept maps"),
              "record and map");
        CHECK(refused("f() -> list<int> | list<string>", "column 20: two alternatives of the union accept lists"),
              "two lists");
        CHECK(refused("f() -> int? | null", "column 15: two alternatives of the union accept null"),
              "nullable and null");
        CHECK(refused("f() -> null | (int | string)?", "column 15: two alternatives of the union accept null"),
              "null and a nullable union");
        CHECK(refused("f() -> (int | string)? | null", "column 26: two alternatives of the union accept null"),
              "a nullable union and null");
        CHECK(refused("f() -> bool(0..1)", "column 12: bounds are only for int, double, string, bytes, list and map"),
              "bounds on bool");
        CHECK(refused("f() -> int(..)", "column 11: bounds without a number"), "empty bounds");
        CHECK(refused("f() -> int(5..1)", "column 11: the lower bound is above the upper bound"), "min > max");
        CHECK(refused("f() -> double(1..0.5)", "column 14: the lower bound is above the upper bound"),
              "double min > max");
        CHECK(refused("f() -> int(0.5..1)", "column 12: expected an integer, found \"0.5\""), "fraction for int");
        CHECK(refused("f() -> list<int>(1e3..)", "column 18: expected an integer, found \"1e3\""),
              "exponent for a length");
        CHECK(refused("f() -> string(-1..)", "column 15: a length cannot be negative: -1"), "negative length");
        CHECK(refused("f() -> int(99999999999999999999..)",
                      "column 12: number out of range: 99999999999999999999"), "int overflow");
        CHECK(refused("f() -> double(1e999..)", "column 15: number out of range: 1e999"), "double overflow");
        CHECK(refused("f() -> int(5)", "column 13: expected \"..\", found \")\""), "one number");
        CHECK(refused("f() -> int(1..2", "column 16: expected a number or \")\", found the end"), "unclosed bounds");
        CHECK(refused("f() -> int(-..)", "column 13: expected a digit, found \"..\""), "lone minus");
        CHECK(refused("f() -> double(1e..)", "column 17: expected a digit, found \"..\""), "bad exponent");
        CHECK(refused("f() -> int(123456789012345678901234567890123456789012345678..)",
                      "column 12: number longer than 47 characters"), "long number");
        CHECK(refused("f() -> int?(0..1)", "column 12: expected the end, found \"(\""), "bounds after ?");
        CHECK(refused("f() -> map<int>?(0..1)", "column 17: expected the end, found \"(\""), "bounds after ?");
}

/* Text of "f() -> " and n nested lists around int. */
static char *nested_lists(unsigned n)
{
        char *s = malloc(16 + 6 * n), *p = s;
        p += sprintf(p, "f() -> ");
        for (unsigned i = 0; i < n; i++)
                p += sprintf(p, "list<");
        p += sprintf(p, "int");
        for (unsigned i = 0; i < n; i++)
                *p++ = '>';
        *p = '\0';
        return s;
}

/* A signature with n parameters (or n fields of one record parameter),
 * each of type type and named by a prefix of name (long names). */
static char *many(unsigned n, int record, const char *type, unsigned namelen)
{
        char *s = malloc(64 + n * (namelen + strlen(type) + 16)), *p = s;
        p += sprintf(p, record ? "f(r: {" : "f(");
        for (unsigned i = 0; i < n; i++)
                p += sprintf(p, "%sa%0*u:%s", i ? "," : "", (int)namelen - 1, i, type);
        p += sprintf(p, record ? "})" : ")");
        return s;
}

static void test_limits(void)
{
        char *s = nested_lists(TYPES_MAX_DEPTH);
        CHECK(prints(s, NULL), "16 nested lists");
        free(s);
        s = nested_lists(TYPES_MAX_DEPTH + 1);
        CHECK(refused(s, "column 88: types nested deeper than 16"), "17 nested lists");
        free(s);
        s = malloc(TYPES_MAX_DEPTH * 2 + 32);
        strcpy(s, "f() -> ");
        for (int i = 0; i <= TYPES_MAX_DEPTH; i++)
                strcat(s, "(");
        CHECK(refused(s, "column 24: types nested deeper than 16"), "17 parentheses");
        free(s);
        s = many(64, 0, "int", 2);
        struct type_sig *sig = parse(s);
        CHECK(sig && types_sig_params(sig)->n_fields == 64, "64 parameters");
        types_sig_free(sig);
        free(s);
        s = many(65, 0, "int", 2);
        CHECK(refused(s, "column 505: more than 64 parameters"), "65 parameters");
        free(s);
        s = many(65, 1, "int", 2);
        CHECK(refused(s, "column 509: more than 64 fields"), "65 fields");
        free(s);
        /* 2 records + 64 * 4 types = 258 types. */
        s = many(64, 1, "list<list<list<int>>>", 2);
        CHECK(parse(s) == NULL && strstr(err, ": more than 256 types") && strncmp(err, "column ", 7) == 0,
              "257 types: %s", err);
        free(s);
        s = malloc(TYPES_MAX_TEXT + 2);
        memset(s, ' ', TYPES_MAX_TEXT + 1);
        memcpy(s, "f()", 3);
        s[TYPES_MAX_TEXT + 1] = '\0';
        CHECK(refused(s, "signature longer than 4096 bytes"), "4097 bytes");
        s[TYPES_MAX_TEXT] = '\0';
        CHECK(prints(s, "f()"), "4096 bytes");
        free(s);
        /* 59 names of 64: 4,073 bytes as written, 4,190 printed. */
        s = many(59, 0, "int", 64);
        CHECK(strlen(s) <= TYPES_MAX_TEXT && refused(s, "signature longer than 4096 bytes when printed"),
              "the canonical text is bounded too");
        free(s);
        CHECK(types_sig_parse(NULL, &(struct type_sig *){ NULL }, err, sizeof err) == -EINVAL &&
              strcmp(err, "no signature") == 0, "NULL text");
}

static void test_check_args(void)
{
        const char *greet = "greet(name: string, times?: int) -> string";

        ARGS_OK(greet, "{\"name\": \"Ada\"}");
        ARGS_OK(greet, "{\"times\": 3, \"name\": \"Ada\"}");
        ARGS_NO(greet, "{\"name\": 5}", "args.name: expected string, got int");
        ARGS_NO(greet, "{\"name\": \"Ada\", \"x\": 1}", "args: unknown field \"x\"");
        ARGS_NO(greet, "{\"name\": \"Ada\", \"\\u00e9\\\"\": 1}", "args: unknown field \"\\xc3\\xa9\\x22\"");
        ARGS_NO(greet, "null", "args.name: missing required field");
        ARGS_NO(greet, "{}", "args.name: missing required field");
        ARGS_NO(greet, "{\"times\": 1}", "args.name: missing required field");
        ARGS_NO(greet, "[1]", "args: expected {name: string, times?: int}, got list");
        ARGS_NO(greet, "{\"name\": \"Ada\", \"times\": null}", "args.times: expected int, got null");
        ARGS_OK("f(a?: int?)", "{\"a\": null}");
        ARGS_OK("f(a?: int?)", "null");

        const char *inc = "increment() -> int";
        ARGS_OK(inc, "null");
        ARGS_OK(inc, "{}");
        ARGS_NO(inc, "{\"a\": 1}", "args: unknown field \"a\"");
        ARGS_NO(inc, "0", "args: expected {}, got int");

        const char *add = "add(title: string, body: string, tags?: list<string>) -> {id: int}";
        ARGS_OK(add, "{\"title\": \"t\", \"body\": \"b\", \"tags\": [\"x\", \"y\"]}");
        ARGS_NO(add, "{\"title\": \"t\", \"body\": \"b\", \"tags\": [\"x\", \"y\", {\"$bytes\": \"AA==\"}]}",
                "args.tags[2]: expected string, got bytes");
        ARGS_NO(add, "{\"body\": \"b\"}", "args.title: missing required field");
        ARGS_NO(add, "{\"title\": \"t\"}", "args.body: missing required field");

        /* Records larger than a few fields, looked up by name. */
        const char *wide = "f(k: int, j: int, i: int, h: int, g: int, f: int, e: int, d: int, c: int, b: int, a?: int)";
        ARGS_OK(wide, "{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,\"j\":1,\"k\":1}");
        ARGS_NO(wide, "{\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,\"j\":1,\"k\":1,\"l\":1}",
                "args: unknown field \"l\"");
        ARGS_NO(wide, "{\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"h\":1,\"i\":1,\"j\":1,\"k\":1}",
                "args.g: missing required field");
}

static void test_check_types(void)
{
        const char *add = "add(title: string, body: string, tags?: list<string>) -> {id: int}";
        CHECK_STR(check_json(add, 0, "{\"id\": 1}"), "", "result {id: 1}");
        CHECK_STR(check_json(add, 0, "\"x\""), "result: expected {id: int}, got string", "result a string");
        CHECK_STR(check_json(add, 0, "{\"id\": 1, \"x\": 2}"), "result: unknown field \"x\"", "result closed");
        CHECK_STR(check_json("f()", 0, "null"), "", "no arrow: null");
        CHECK_STR(check_json("f()", 0, "1"), "result: expected null, got int", "no arrow: not 1");

        RES_OK("null", "null");
        RES_NO("null", "false", "result: expected null, got bool");
        RES_OK("bool", "true");
        RES_NO("bool", "1", "result: expected bool, got int");
        RES_OK("int", "-5");
        RES_NO("int", "3.0", "result: expected int, got double");
        RES_NO("int", "null", "result: expected int, got null");
        RES_OK("double", "3.5");
        RES_OK("double", "3");
        RES_NO("double", "\"3\"", "result: expected double, got string");
        RES_OK("string", "\"\"");
        RES_NO("string", "{\"$bytes\": \"\"}", "result: expected string, got bytes");
        RES_OK("bytes", "{\"$bytes\": \"AP8=\"}");
        RES_NO("bytes", "\"AP8=\"", "result: expected bytes, got string");
        RES_OK("list<int>", "[]");
        RES_NO("list<int>", "{}", "result: expected list<int>, got map");
        RES_OK("map<int>", "{}");
        RES_OK("map<int>", "{\"a\": 1, \"b c\": 2}");
        RES_NO("map<int>", "[]", "result: expected map<int>, got list");
        RES_NO("map<int>", "{\"a\": \"x\"}", "result.a: expected int, got string");
        RES_NO("map<int>", "{\"a b\": \"x\"}", "result[\"a b\"]: expected int, got string");
        RES_NO("map<int>", "{\"\\n\\\\\": null}", "result[\"\\x0a\\x5c\"]: expected int, got null");
        RES_NO("map<int>", "{\"0123456789012345678901234567890123456789abc\": null}",
               "result[\"0123456789012345678901234567890123456789...\"]: expected int, got null");
        RES_OK("{}", "{}");
        RES_NO("{}", "null", "result: expected {}, got null");
        RES_OK("{}?", "null");

        /* any */
        RES_OK("any", "null");
        RES_OK("any", "[1, {\"a\": [true]}]");
        RES_OK("{a: any}", "{\"a\": null}");
        RES_NO("{a: any}", "{}", "result.a: missing required field");
        RES_OK("list<any>", "[1, \"x\", null]");

        /* Nesting: the path names each step. */
        RES_OK("list<list<{a: int?}>>", "[[{\"a\": null}], [{\"a\": 2}]]");
        RES_NO("list<list<{a: int?}>>", "[[{\"a\": null}], [{\"a\": \"s\"}]]",
               "result[1][0].a: expected int?, got string");
        RES_NO("list<list<{a: int?}>>", "[[{\"a\": null}], [{}]]", "result[1][0].a: missing required field");
        RES_NO("{a: {b: map<list<int>>}}", "{\"a\": {\"b\": {\"k\": [1, 2, true]}}}",
               "result.a.b.k[2]: expected int, got bool");

        /* Optional and nullable. */
        RES_OK("{a?: int}", "{}");
        RES_NO("{a?: int}", "{\"a\": null}", "result.a: expected int, got null");
        RES_OK("{a?: int?}", "{\"a\": null}");
        RES_OK("{a: int?}", "{\"a\": null}");
        RES_NO("{a: int?}", "{}", "result.a: missing required field");
        RES_OK("list<int>?", "null");
        RES_OK("list<int>?", "[1]");
        RES_NO("list<int>?", "[null]", "result[0]: expected int, got null");
        RES_NO("list<int>?", "\"x\"", "result: expected list<int>?, got string");

        /* Unions: the alternative of the value's kind decides. */
        RES_OK("int | string", "1");
        RES_OK("int | string", "\"s\"");
        RES_NO("int | string", "true", "result: expected int | string, got bool");
        RES_NO("int | string", "null", "result: expected int | string, got null");
        RES_OK("(int | string)?", "null");
        RES_OK("int? | string", "null");
        RES_OK("double | string", "1");
        RES_OK("int | double", "1.5");
        RES_NO("int(0..1) | double", "2", "result: 2 is above the maximum 1");
        RES_OK("{a: int} | list<int>", "[1]");
        RES_NO("{a: int} | list<int>", "{\"a\": \"x\"}", "result.a: expected int, got string");
        RES_NO("{a: int} | list<int>", "{\"b\": 1}", "result: unknown field \"b\"");
        RES_OK("null | bool | bytes", "{\"$bytes\": \"\"}");
        RES_NO("list<int | {a: string}>", "[1, {\"a\": 2}]", "result[1].a: expected string, got int");
        RES_NO("list<int | {a: string}>", "[1, 2.5]", "result[1]: expected int | {a: string}, got double");
}

static void test_check_bounds(void)
{
        RES_OK("int(0..100)", "0");
        RES_OK("int(0..100)", "100");
        RES_NO("int(0..100)", "500", "result: 500 is above the maximum 100");
        RES_NO("int(0..100)", "-1", "result: -1 is below the minimum 0");
        RES_OK("int(..-9223372036854775808)", "-9223372036854775808");
        RES_NO("int(-5..)", "-6", "result: -6 is below the minimum -5");
        ARGS_NO("f(times: int(0..100))", "{\"times\": 500}", "args.times: 500 is above the maximum 100");
        RES_OK("double(0..1)", "0.5");
        RES_OK("double(0..1)", "1");
        RES_NO("double(0..1)", "2", "result: 2 is above the maximum 1");
        RES_NO("double(0..1)", "1.5", "result: 1.5 is above the maximum 1");
        RES_NO("double(0.25..)", "-0.1", "result: -0.1 is below the minimum 0.25");
        CHECK_STR(check_value("double(0..1)", value_new_double(NAN)), "result: NaN is outside the bounds",
                  "NaN is refused by bounds");
        CHECK_STR(check_value("double", value_new_double(NAN)), "", "NaN is a double");
        CHECK_STR(check_value("double(..1)", value_new_double(INFINITY)), "result: inf is above the maximum 1",
                  "infinity");
        CHECK_STR(check_value("double(0..)", value_new_double(-INFINITY)), "result: -inf is below the minimum 0",
                  "-infinity");
        RES_NO("string(1..3)", "\"\"", "result: 0 characters, below the minimum 1");
        RES_OK("string(1..3)", "\"h\\u00e9\\u00e9\"");
        RES_OK("string(1..3)", "\"\\ud83d\\ude00\"");
        RES_NO("string(1..3)", "\"abcd\"", "result: 4 characters, above the maximum 3");
        RES_NO("string(2..)", "\"\\u00e9\"", "result: 1 character, below the minimum 2");
        RES_OK("bytes(..2)", "{\"$bytes\": \"AAA=\"}");
        RES_NO("bytes(..2)", "{\"$bytes\": \"AAAA\"}", "result: 3 bytes, above the maximum 2");
        RES_NO("bytes(2..)", "{\"$bytes\": \"AA==\"}", "result: 1 byte, below the minimum 2");
        RES_NO("list<int>(1..2)", "[]", "result: 0 items, below the minimum 1");
        RES_NO("list<int>(1..2)", "[1, 2, 3]", "result: 3 items, above the maximum 2");
        RES_NO("list<int>(1..2)", "[1, \"x\"]", "result[1]: expected int, got string");
        RES_NO("list<int>(2..)", "[1]", "result: 1 item, below the minimum 2");
        RES_NO("map<int>(..1)", "{\"a\": 1, \"b\": 2}", "result: 2 entries, above the maximum 1");
        RES_NO("map<int>(2..)", "{\"a\": 1}", "result: 1 entry, below the minimum 2");
        RES_OK("string(..3)?", "null");
}

static void test_check_edges(void)
{
        struct type_sig *sig = parse("f(a: {b: list<string>}) -> int");
        Gadget__Value *v = NULL;
        char path[8] = "args", msg[16];
        const char *json = "{\"a\": {\"b\": [\"x\", 1]}}";

        json_to_value(json, strlen(json), &v, err, sizeof err);
        CHECK(sig && v && types_check(types_sig_params(sig), v, path, sizeof path, err, sizeof err) == -EINVAL &&
              strcmp(err, "args.a.b[1]: expected string, got int") == 0,
              "the path below the base is written into the message only: %s", err);
        CHECK(strcmp(path, "args") == 0, "the base path is left as it was");
        CHECK(sig && types_check(types_sig_params(sig), v, path, sizeof path, msg, sizeof msg) == -EINVAL &&
              strcmp(msg, "args.a.b[1]: ex") == 0, "a short message buffer is cut: %s", msg);
        CHECK(sig && types_check(types_sig_params(sig), v, NULL, 0, NULL, 0) == -EINVAL, "no buffers");
        CHECK(sig && types_check(types_sig_result(sig), v, NULL, 0, err, sizeof err) == -EINVAL &&
              strcmp(err, "value: expected int, got map") == 0, "no path: \"value\"");
        CHECK(sig && types_check_args(sig, NULL, err, sizeof err) == -EINVAL &&
              strcmp(err, "args: expected {a: {b: list<string>}}, got nothing") == 0, "no value: %s", err);
        value_free(v);
        types_sig_free(sig);

        /* A repeated key (value_check refuses it first) is no stand-in
         * for a missing field. */
        sig = parse("f(a: int, b: int)");
        v = value_new_map();
        value_map_set(v, "a", value_new_int(1));
        value_map_set(v, "x", value_new_int(2));
        free(v->map_value->entries[1]->key);
        v->map_value->entries[1]->key = strdup("a");
        CHECK(sig && types_check_args(sig, v, err, sizeof err) == -EINVAL &&
              strcmp(err, "args: repeated field \"a\"") == 0, "repeated key: %s", err);
        value_free(v);
        types_sig_free(sig);

        Gadget__Value *kinds[] = { value_new_null(), value_new_bool(1), value_new_int(1), value_new_double(1),
                                   value_new_string("s"), value_new_bytes("b", 1), value_new_list(),
                                   value_new_map() };
        const char *names[] = { "null", "bool", "int", "double", "string", "bytes", "list", "map" };
        for (size_t i = 0; i < 8; i++) {
                CHECK_STR(types_value_kind(kinds[i]), names[i], "kind name %s", names[i]);
                value_free(kinds[i]);
        }
        CHECK_STR(types_value_kind(NULL), "nothing", "no value");
}

/* The JSON Schema of text, checked to be one JSON object (jansson). */
static int schema_is(const char *text, const char *want)
{
        struct type_sig *sig = parse(text);
        char *got = sig ? types_json_schema(sig) : NULL;
        json_error_t jerr;
        json_t *j = got ? json_loads(got, 0, &jerr) : NULL;
        int ok = j && json_is_object(j) && (!want || strcmp(got, want) == 0);

        if (!ok)
                printf("# %s:\n#   got  %s\n#   want %s\n#   %s\n", text, got ? got : "(null)", want ? want : "-",
                       j ? "" : jerr.text);
        json_decref(j);
        free(got);
        types_sig_free(sig);
        return ok;
}

static void test_schema(void)
{
        CHECK(schema_is("greet(name: string, times?: int) -> string",
                        "{\"name\":\"greet\",\"signature\":\"greet(name: string, times?: int) -> string\","
                        "\"params\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                        "\"times\":{\"type\":\"integer\"}},\"required\":[\"name\"],\"additionalProperties\":false},"
                        "\"result\":{\"type\":\"string\"}}"), "greet");
        CHECK(schema_is("increment()",
                        "{\"name\":\"increment\",\"signature\":\"increment()\",\"params\":{\"type\":\"object\","
                        "\"properties\":{},\"additionalProperties\":false},\"result\":{\"type\":\"null\"}}"),
              "increment: no required, returns null");
        CHECK(schema_is("f(a: bytes(1..4)) -> int(0..10)? | double(-0.5..2.5) | bool",
                        "{\"name\":\"f\",\"signature\":\"f(a: bytes(1..4)) -> int(0..10)? | double(-0.5..2.5) | bool\","
                        "\"params\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\",\"properties\":"
                        "{\"$bytes\":{\"type\":\"string\",\"contentEncoding\":\"base64\",\"minLength\":4,"
                        "\"maxLength\":8}},\"required\":[\"$bytes\"],\"additionalProperties\":false}},"
                        "\"required\":[\"a\"],\"additionalProperties\":false},\"result\":{\"anyOf\":[{\"anyOf\":"
                        "[{\"type\":\"integer\",\"minimum\":0,\"maximum\":10},{\"type\":\"null\"}]},{\"type\":"
                        "\"number\",\"minimum\":-0.5,\"maximum\":2.5},{\"type\":\"boolean\"}]}}"),
              "bytes as json.c writes them, bounds, a union with a nullable alternative");
        CHECK(schema_is("f() -> (list<string(..3)>(1..2) | map<any>(..5))?",
                        "{\"name\":\"f\",\"signature\":\"f() -> (list<string(..3)>(1..2) | map<any>(..5))?\","
                        "\"params\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false},"
                        "\"result\":{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3},"
                        "\"minItems\":1,\"maxItems\":2},{\"type\":\"object\",\"additionalProperties\":{},"
                        "\"maxProperties\":5},{\"type\":\"null\"}]}}"), "lists, maps, any, a nullable union");
        CHECK(schema_is("add(title: string, body: string, tags?: list<string>) -> {id: int, note?: string?}",
                        "{\"name\":\"add\",\"signature\":\"add(title: string, body: string, tags?: list<string>)"
                        " -> {id: int, note?: string?}\",\"params\":{\"type\":\"object\",\"properties\":{\"title\":"
                        "{\"type\":\"string\"},\"body\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":"
                        "{\"type\":\"string\"}}},\"required\":[\"title\",\"body\"],\"additionalProperties\":false},"
                        "\"result\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"note\":"
                        "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}},\"required\":[\"id\"],"
                        "\"additionalProperties\":false}}"), "add, records");
        CHECK(schema_is("f(a: double(1e300..), b: {c: null, d: any}?) -> list<list<int>>", NULL),
              "valid JSON with large doubles and nesting");
        char *s = many(20, 0, "list<{x: int(-9223372036854775808..9223372036854775807)?}>", 64);
        CHECK(schema_is(s, NULL) || !printf("# %s\n", err), "a large schema is one JSON object");
        free(s);
}

int main(void)
{
        test_parse_print();
        test_parse_errors();
        test_limits();
        test_check_args();
        test_check_types();
        test_check_bounds();
        test_check_edges();
        test_schema();
        return tap_done();
}
