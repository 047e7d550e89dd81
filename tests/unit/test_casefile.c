/* Unit tests of supervisor/casefile.c, gadgetd test's file: its lines
 * read into calls, answers wanted and fakes; each error named by its
 * FILE:LINE; fakes answering in turn; values compared with maps in any
 * order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "casefile.h"
#include "contract.h"
#include "json.h"
#include "tap.h"
#include "value.h"

static char dir[64];

/* Writes text to dir/name and reads it; 0 or -1 with the error in err. */
static int read_text(const char *name, const char *text, struct casefile *cf, char *err, size_t len)
{
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "w");
        fputs(text, f);
        fclose(f);
        return casefile_read(path, cf, err, len);
}

static void test_good_file(void)
{
        struct casefile cf;
        char err[400] = "", want[160];
        int e = read_text("good.test",
                          "# a comment\n\npolicy g.policy\ncall get\nexpect 0\n"
                          "call add {\"title\": \"a\", \"text\": \"b\"}\r\nexpect null\n"
                          "call nosuch\nerror no_method\ncall x\nerror 10\n"
                          "fake WEB request {\"status\": 200}\nfake WEB request error unavailable no network\n",
                          &cf, err, sizeof err);
        CHECK(e == 0, "a good file reads: %s", err);
        if (e < 0)
                return;
        snprintf(want, sizeof want, "%s/g.policy", dir);
        CHECK_STR(cf.policy, want, "the policy, relative to the file's folder");
        CHECK(cf.n_calls == 4 && cf.n_fakes == 2, "4 calls, 2 fakes: %zu, %zu", cf.n_calls, cf.n_fakes);
        CHECK(cf.calls[0].line == 4 && strcmp(cf.calls[0].method, "get") == 0 &&
              cf.calls[0].args->kind_case == GADGET__VALUE__KIND_NULL_VALUE && cf.calls[0].expect &&
              cf.calls[0].expect->int_value == 0, "call get on line 4: null arguments, 0 wanted");
        CHECK(cf.calls[1].line == 6 && value_map_get(cf.calls[1].args, "title") && cf.calls[1].expect &&
              cf.calls[1].expect->kind_case == GADGET__VALUE__KIND_NULL_VALUE, "call add's arguments (CRLF)");
        CHECK(!cf.calls[2].expect && cf.calls[2].code == GADGET_ENOMETHOD, "error no_method");
        CHECK(!cf.calls[3].expect && cf.calls[3].code == GADGET_ENOTFOUND, "error 10");
        const struct case_fake *a = casefile_fake(&cf, "WEB", "request"), *b = casefile_fake(&cf, "WEB", "request"),
                               *c = casefile_fake(&cf, "WEB", "request");
        CHECK(a && a->value && b && !b->value && b->code == GADGET_EUNAVAILABLE && strcmp(b->message, "no network") == 0,
              "the fakes answer in turn");
        CHECK(c == b, "the last one from then on");
        CHECK(!casefile_fake(&cf, "WEB", "get") && !casefile_fake(&cf, "OTHER", "request"), "no fake of another op");
        casefile_free(&cf);
}

static void test_errors_name_their_line(void)
{
        static const struct {
                const char *text, *want;
        } bad[] = {
                { "call get\nexpect 0\n", ":2: no policy line" },
                { "policy p\ncall get\ncall get\nexpect 1\n", ":3: the call of line 2 has no expect or error line" },
                { "policy p\ncall get\n", ":2: the call has no expect or error line" },
                { "policy p\nexpect 1\n", ":2: expect with no call before it" },
                { "policy p\ncall get {bad\nexpect 1\n", ":2: call get: bad JSON arguments" },
                { "policy p\ncall get\nexpect [1,\n", ":3: expect: bad JSON" },
                { "policy p\ncall get\nerror nosuch\n", ":3: error needs a CODE" },
                { "policy p\ncall get\nerror 13\n", ":3: error needs a CODE" },
                { "policy p\ncall ../x\nexpect 1\n", ":2: call needs a METHOD name" },
                { "policy p\nfake WEB\n", ":2: fake needs BINDING OP and an answer" },
                { "policy p\nfake WEB request\n", ":2: fake WEB request: bad JSON answer: none" },
                { "policy p\nfake WEB request error\n", ":2: fake error needs a CODE" },
                { "policy p\npolicy q\n", ":2: policy given twice" },
                { "policy p\nexpec 1\n", ":2: unknown line \"expec\"" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                struct casefile cf;
                char err[400] = "";
                int e = read_text("bad.test", bad[i].text, &cf, err, sizeof err);
                CHECK(e < 0 && strstr(err, "bad.test") && strstr(err, bad[i].want), "%s: %s", bad[i].want, err);
                if (e == 0)
                        casefile_free(&cf);
        }
}

static Gadget__Value *v(const char *json)
{
        Gadget__Value *out = NULL;
        char err[100];
        return json_to_value(json, strlen(json), &out, err, sizeof err) < 0 ? NULL : out;
}

static void test_equal(void)
{
        static const struct {
                const char *a, *b;
                bool equal;
        } cases[] = {
                { "{\"a\": 1, \"b\": [1, 2]}", "{\"b\": [1, 2], \"a\": 1}", true },
                { "{\"a\": 1}", "{\"a\": 1, \"b\": 2}", false },
                { "{\"a\": 1, \"b\": 2}", "{\"a\": 1, \"c\": 2}", false },
                { "[1, 2]", "[2, 1]", false },
                { "1", "1.0", true },
                { "1", "\"1\"", false },
                { "null", "false", false },
                { "{\"$bytes\": \"aGk=\"}", "{\"$bytes\": \"aGk=\"}", true },
                { "{\"$bytes\": \"aGk=\"}", "\"hi\"", false },
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                Gadget__Value *a = v(cases[i].a), *b = v(cases[i].b);
                CHECK(a && b && casefile_equal(a, b) == cases[i].equal && casefile_equal(b, a) == cases[i].equal,
                      "%s %s %s", cases[i].a, cases[i].equal ? "==" : "!=", cases[i].b);
                value_free(a);
                value_free(b);
        }
}

int main(void)
{
        snprintf(dir, sizeof dir, "/tmp/test-casefile-XXXXXX");
        if (!mkdtemp(dir))
                return 1;
        test_good_file();
        test_errors_name_their_line();
        test_equal();
        char path[128];
        snprintf(path, sizeof path, "%s/good.test", dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/bad.test", dir);
        unlink(path);
        rmdir(dir);
        return tap_done();
}
