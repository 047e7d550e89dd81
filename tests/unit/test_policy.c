/* test_policy: the policy-file parser and its value parsers. Runs in
 * tests/unit (meson workdir); fixtures are in ../policies, and the tests
 * read copies of them made with the modes they need. */
#include "policy.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contract.h"

/* A pointer that must come back untouched from a failed parse. */
static struct policy sentinel_policy;
#define SENTINEL (&sentinel_policy)

/* The fixtures of ../policies, copied into a fresh directory (fixtures_copy)
 * with the modes they need: as root, gadgetd refuses a policy others may
 * write, and a UI must be readable by every user. The checkout's own modes
 * (a tarball of git archive has group-writable files) must not matter. */
static char fixture_dir[] = "/tmp/test-policy-fixtures-XXXXXX";
static const char *const fixture_names[] = { "good.policy", "bad.policy", "ui.html" };

/* The path of fixture name in fixture_dir, in buf. */
static const char *fixture(char *buf, size_t len, const char *name)
{
        snprintf(buf, len, "%s/%s", fixture_dir, name);
        return buf;
}

/* Copies ../policies/NAME to fixture_dir/NAME with mode 0644; 0 or -errno. */
static int fixture_copy(const char *name)
{
        char src[PATH_MAX], dst[PATH_MAX], buf[4096];
        int in, out, r = 0;
        ssize_t n;

        snprintf(src, sizeof(src), "../policies/%s", name);
        in = open(src, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return -errno;
        out = open(fixture(dst, sizeof(dst), name), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0) {
                r = -errno;
                goto out;
        }
        while ((n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t)n) != n) {
                        r = -EIO;
                        goto out;
                }
        if (n < 0 || fchmod(out, 0644) < 0)
                r = -errno;
out:
        if (out >= 0 && close(out) < 0 && r == 0)
                r = -errno;
        close(in);
        return r;
}

static bool fixtures_copy(void)
{
        if (!mkdtemp(fixture_dir))
                return false;
        for (size_t i = 0; i < sizeof(fixture_names) / sizeof(*fixture_names); i++)
                if (fixture_copy(fixture_names[i]) < 0)
                        return false;
        return true;
}

static void fixtures_remove(void)
{
        char path[PATH_MAX];

        for (size_t i = 0; i < sizeof(fixture_names) / sizeof(*fixture_names); i++)
                unlink(fixture(path, sizeof(path), fixture_names[i]));
        rmdir(fixture_dir);
}

/* The [Gadget] lines most tests start from: lines 1 to 3. */
#define HEAD "[Gadget]\nName=t\nExec=/bin/sh\n"

static int parse(const char *text, struct policy **p, struct policy_errors *e)
{
        return policy_parse("t.policy", text, strlen(text), p, e);
}

static void dump_errors(const struct policy_errors *e)
{
        for (size_t i = 0; i < e->n; i++)
                printf("#   error: %s\n", e->msgs[i]);
}

/* Whether msg starts with "t.policy:LINE: " and contains want. */
static bool error_is(const char *msg, unsigned line, const char *want)
{
        char prefix[32];

        snprintf(prefix, sizeof(prefix), "t.policy:%u: ", line);
        return strncmp(msg, prefix, strlen(prefix)) == 0 && strstr(msg, want) != NULL;
}

/* Parses text, which must fail with exactly one error: on line, containing want. */
static void expect_error(const char *text, unsigned line, const char *want)
{
        struct policy *p = SENTINEL;
        struct policy_errors e = { 0 };
        int r = parse(text, &p, &e);
        bool ok = r == -EINVAL && p == SENTINEL && e.n == 1 && error_is(e.msgs[0], line, want);

        CHECK(ok, "error on line %u: %s", line, want);
        if (!ok) {
                printf("#   r=%d n=%zu\n", r, e.n);
                dump_errors(&e);
        }
        policy_errors_clear(&e);
}

/* Parses text, which must succeed; the caller frees the result. */
static struct policy *expect_ok(const char *text, const char *what)
{
        struct policy *p = NULL;
        struct policy_errors e = { 0 };
        int r = parse(text, &p, &e);

        CHECK(r == 0 && p && e.n == 0, "parses: %s", what);
        if (r != 0)
                dump_errors(&e);
        policy_errors_clear(&e);
        return r == 0 ? p : NULL;
}

/* The budgets of a gadget's peer in gadgetd: defaults, settings, bounds. */
static void test_budgets(void)
{
        struct policy *p = expect_ok(HEAD "[Binding K]\nType=kv\n", "budget defaults");
        if (p) {
                CHECK(p->binding_calls_max == 64 && p->frame_values_max == 131072 &&
                      p->turn_frames_max == 64 && p->turn_bytes_max == 1 << 20 && p->calls_queued_max == 1024 &&
                      p->frame_bytes_per_s == 64 << 20,
                      "budget defaults");
                CHECK(policy_binding_find(p, "K")->calls_max == 16, "CallsMax defaults to 16");
                policy_free(p);
        }
        p = expect_ok(HEAD "BindingCallsMax=8\nFrameValuesMax=1000\nTurnFramesMax=2\nTurnBytesMax=64K\n"
                      "FrameBytesPerSecond=2M\nCallsQueuedMax=5\n[Binding T]\nType=text\nValue=x\nCallsMax=3\n", "budgets set");
        if (p) {
                CHECK(p->binding_calls_max == 8 && p->frame_values_max == 1000 && p->turn_frames_max == 2 &&
                      p->turn_bytes_max == 64 << 10 && p->calls_queued_max == 5 &&
                      p->frame_bytes_per_s == 2 << 20, "budgets set");
                CHECK(policy_binding_find(p, "T")->calls_max == 3, "CallsMax set");
                policy_free(p);
        }
        expect_error(HEAD "BindingCallsMax=infinity\n", 4, "a limit is required here");
        expect_error(HEAD "BindingCallsMax=0\n", 4, "must be greater than 0");
        expect_error(HEAD "FrameValuesMax=1048577\n", 4, "must be at most 1048576");
        expect_error(HEAD "TurnBytesMax=infinity\n", 4, "a limit is required here");
        expect_error(HEAD "FrameBytesPerSecond=infinity\n", 4, "a limit is required here");
        expect_error(HEAD "FrameBytesPerSecond=0\n", 4, "must be greater than 0");
        expect_error(HEAD "[Binding K]\nType=kv\nCallsMax=4097\n", 6, "must be at most 4096");
        expect_error(HEAD "CallsQueuedMax=infinity\n", 4, "a limit is required here");
        expect_error(HEAD "CallsQueuedMax=65537\n", 4, "must be at most 65536");
        /* A kv value travels in one frame: no policy may promise more. */
        expect_error(HEAD "[Binding K]\nType=kv\nMaxValueSize=4M\n", 6, "must be at most");
        /* The state quota: every core kept counts against it. */
        p = expect_ok(HEAD "CoreDump=64K\n", "StateMax default");
        if (p) {
                CHECK(p->state_max == 1ull << 30, "StateMax defaults to 1G");
                policy_free(p);
        }
        p = expect_ok(HEAD "CoreDump=64K\nStateMax=infinity\n", "StateMax=infinity");
        if (p) {
                CHECK(p->state_max == POLICY_UNLIMITED, "StateMax=infinity");
                policy_free(p);
        }
        expect_error(HEAD "StateMax=1M\nCoreDump=2M\n", 5, "CoreDump= is more than StateMax=");
        expect_error(HEAD "StateMax=0\n", 4, "must be greater than 0");
}

static void test_size(void)
{
        static const struct {
                const char *s;
                int r;
                uint64_t v;
        } t[] = {
                { "0", 0, 0 },
                { "512", 0, 512 },
                { "64K", 0, 64 * 1024 },
                { "16M", 0, 16 * 1024 * 1024 },
                { "1G", 0, 1024 * 1024 * 1024 },
                { "2T", 0, 2ull << 40 },
                { "0K", 0, 0 },
                { "infinity", 0, POLICY_UNLIMITED },
                { "18446744073709551614", 0, UINT64_MAX - 1 },
                { "16777215T", 0, 16777215ull << 40 },
                { "18446744073709551615", -EINVAL, 0 }, /* would read back as infinity */
                { "18446744073709551616", -EINVAL, 0 },
                { "99999999999999999999999", -EINVAL, 0 },
                { "16777216T", -EINVAL, 0 },
                { "17179869184G", -EINVAL, 0 },
                { "", -EINVAL, 0 },
                { "-1", -EINVAL, 0 },
                { "+1", -EINVAL, 0 },
                { " 1", -EINVAL, 0 },
                { "1 ", -EINVAL, 0 },
                { "1KB", -EINVAL, 0 },
                { "1k", -EINVAL, 0 },
                { "1B", -EINVAL, 0 },
                { "K", -EINVAL, 0 },
                { "0x10", -EINVAL, 0 },
                { "1.5M", -EINVAL, 0 },
                { "Infinity", -EINVAL, 0 },
                { "12Q", -EINVAL, 0 },
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                uint64_t v = 4242;
                int r = policy_parse_size(t[i].s, &v);
                CHECK(r == t[i].r && v == (r == 0 ? t[i].v : 4242), "size \"%s\"", t[i].s);
        }
        uint64_t v = 0;
        CHECK(policy_parse_size(NULL, &v) == -EINVAL, "size NULL");
}

static void test_duration(void)
{
        static const struct {
                const char *s;
                int r;
                uint64_t ms;
        } t[] = {
                { "250ms", 0, 250 },
                { "5s", 0, 5000 },
                { "2min", 0, 120000 },
                { "1h", 0, 3600000 },
                { "7", 0, 7000 },
                { "0", 0, 0 },
                { "0ms", 0, 0 },
                { "18446744073709551615ms", 0, UINT64_MAX },
                { "18446744073709551", 0, 18446744073709551000ull },
                { "18446744073709552", -EINVAL, 0 },
                { "18446744073709552s", -EINVAL, 0 },
                { "5124095576030432h", -EINVAL, 0 },
                { "", -EINVAL, 0 },
                { "s", -EINVAL, 0 },
                { "5 s", -EINVAL, 0 },
                { "5sec", -EINVAL, 0 },
                { "5m", -EINVAL, 0 },
                { "5S", -EINVAL, 0 },
                { "1.5s", -EINVAL, 0 },
                { "-1s", -EINVAL, 0 },
                { "1min30s", -EINVAL, 0 },
                { "infinity", -EINVAL, 0 },
        };
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                uint64_t ms = 4242;
                int r = policy_parse_duration(t[i].s, &ms);
                CHECK(r == t[i].r && ms == (r == 0 ? t[i].ms : 4242), "duration \"%s\"", t[i].s);
        }
}

static void test_bool_count(void)
{
        static const char *const yes[] = { "yes", "YES", "true", "True", "on", "1" };
        static const char *const no[] = { "no", "No", "false", "FALSE", "off", "0" };
        static const char *const bad[] = { "", "y", "n", "2", "yess", "on ", "enabled" };
        bool b;
        uint64_t v;

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                b = false;
                CHECK(policy_parse_bool(yes[i], &b) == 0 && b, "bool \"%s\" is true", yes[i]);
                b = true;
                CHECK(policy_parse_bool(no[i], &b) == 0 && !b, "bool \"%s\" is false", no[i]);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK(policy_parse_bool(bad[i], &b) == -EINVAL, "bool \"%s\" refused", bad[i]);

        CHECK(policy_parse_count("16", &v) == 0 && v == 16, "count 16");
        CHECK(policy_parse_count("infinity", &v) == 0 && v == POLICY_UNLIMITED, "count infinity");
        CHECK(policy_parse_count("16K", &v) == -EINVAL, "count takes no suffix");
        CHECK(policy_parse_count("", &v) == -EINVAL, "count empty");
        CHECK(policy_parse_count("99999999999999999999", &v) == -EINVAL, "count overflow");
}

static void test_names(void)
{
        char s65[66], s64[65];

        memset(s65, 'a', 65);
        s65[65] = '\0';
        memcpy(s64, s65, 64);
        s64[64] = '\0';

        CHECK(gadget_identifier_ok("API"), "identifier API");
        CHECK(gadget_identifier_ok("_x9"), "identifier _x9");
        CHECK(gadget_identifier_ok("a"), "identifier a");
        CHECK(gadget_identifier_ok(s64), "identifier of 64");
        CHECK(!gadget_identifier_ok(s65), "identifier of 65 refused");
        CHECK(!gadget_identifier_ok("9x"), "identifier 9x refused");
        CHECK(!gadget_identifier_ok(""), "identifier empty refused");
        CHECK(!gadget_identifier_ok("a-b"), "identifier a-b refused");
        CHECK(!gadget_identifier_ok("caf\xc3\xa9"), "identifier non-ASCII refused");
        CHECK(!gadget_identifier_ok(NULL), "identifier NULL refused");

        CHECK(gadget_name_ok("notes"), "name notes");
        CHECK(gadget_name_ok("9lives"), "name 9lives");
        CHECK(gadget_name_ok("a_b-c"), "name a_b-c");
        CHECK(gadget_name_ok(s64 + 1), "name of 63");
        CHECK(!gadget_name_ok(s64), "name of 64 refused");
        CHECK(!gadget_name_ok("Notes"), "name with upper case refused");
        CHECK(!gadget_name_ok("-x"), "name -x refused");
        CHECK(!gadget_name_ok("_x"), "name _x refused");
        CHECK(!gadget_name_ok(""), "name empty refused");
        CHECK(!gadget_name_ok("a.b"), "name a.b refused");
        CHECK(!gadget_name_ok("a/b"), "name a/b refused");
        CHECK(!gadget_name_ok(".."), "name .. refused");
}

/* Splits s and checks the words against want (NULL-terminated). */
static void check_split(const char *s, const char *const *want)
{
        char **w = NULL;
        size_t n = 0, nwant = 0;
        bool ok;

        while (want[nwant])
                nwant++;
        ok = policy_split_words(s, &w, &n) == 0 && n == nwant && w[n] == NULL;
        for (size_t i = 0; ok && i < n; i++) {
                if (strcmp(w[i], want[i]) != 0) {
                        printf("#   word %zu: got \"%s\", want \"%s\"\n", i, w[i], want[i]);
                        ok = false;
                }
        }
        CHECK(ok, "split [%s] into %zu words", s, nwant);
        policy_strv_free(w);
}

static void test_split(void)
{
        char **w = (char **)1;
        size_t n = 42;

        check_split("a b\tc", (const char *const[]){ "a", "b", "c", NULL });
        check_split("  lead  trail  ", (const char *const[]){ "lead", "trail", NULL });
        check_split("", (const char *const[]){ NULL });
        check_split("   ", (const char *const[]){ NULL });
        check_split("\"b c\" 'd e'", (const char *const[]){ "b c", "d e", NULL });
        check_split("x\"y z\"w", (const char *const[]){ "xy zw", NULL });
        check_split("\"\" ''", (const char *const[]){ "", "", NULL });
        check_split("\"q\\\"q\" \"b\\\\s\" \"n\\n\"",
                    (const char *const[]){ "q\"q", "b\\s", "n\\n", NULL });
        check_split("'a\\\"b'", (const char *const[]){ "a\\\"b", NULL });
        check_split("f\\ g \\'", (const char *const[]){ "f g", "'", NULL });
        check_split("'it\"s'", (const char *const[]){ "it\"s", NULL });

        CHECK(policy_split_words("a \"b", &w, &n) == -EINVAL && n == 42 && w == (char **)1,
              "unterminated double quote refused, nothing returned");
        CHECK(policy_split_words("'abc", &w, &n) == -EINVAL, "unterminated single quote refused");
        CHECK(policy_split_words("abc\\", &w, &n) == -EINVAL, "trailing backslash refused");
        CHECK(policy_split_words("\"a\\\"", &w, &n) == -EINVAL, "escaped closing quote refused");
}

static const char full_policy[] =
        "# a comment\n"                                                 /* 1 */
        "; another comment\n"                                           /* 2 */
        "[Gadget]\n"                                                    /* 3 */
        "Name=notes-2\n"
        "Exec=/bin/sh\n"
        "Arguments=-c 'echo \"hi there\"' --x=\"a b\"\n"
        "Environment=LANG=C.UTF-8 \"GREETING=hello world\"\n"
        "Environment=TZ=UTC\n"
        "ReadOnlyPaths=/usr/share/ //usr/./lib//\n"
        "ReadOnlyPaths=\"/usr/bin\"\n"
        "SystemLibraries=yes        # read-only /usr, /lib, /lib64\n"
        "Loopback=on\n"
        "TmpSize=64M\n"
        "MemoryMax=1G\n"
        "TasksMax=16\n"
        "CPUQuota=150%\n"
        "LimitNOFILE=4096\n"
        "CallTimeout=5s\n"
        "RuntimeMax=2h\n"
        "Restart=on-failure\n"
        "\n"
        "[Binding NOTES]\n"                                             /* 22 */
        "MaxKeys=1000   ; before Type on purpose\n"
        "Type=kv\n"
        "MaxValueSize=64K\n"
        "MaxBytes=10M\n"
        "\n"
        "[Binding COUNTER]\n"                                           /* 28 */
        "Type=gadget\n"
        "Target=counter\n"
        "Methods=get increment\n"
        "\n"
        "[Binding API]\n"                                               /* 33 */
        "Type=http\n"
        "Allow=http://127.0.0.1:8080/api/\n"
        "Allow=https://example.com\n"
        "Allow=https://[::1]:8443\n"
        "Methods=GET POST\n"
        "Timeout=250ms\n"
        "MaxResponseSize=1536K\n"
        "MaxRequestSize=4K\n"
        "\n"
        "[Binding MOTD]\n"                                              /* 43 */
        "Type=text\n"
        "Value=Hello, world!\n"
        "\n"
        "[Binding TOKEN]\n"                                             /* 47 */
        "Type=secret\n"
        "File=/etc/passwd\n"
        "MaxSize=4K\n";

static bool strv_is(char *const *v, size_t n, const char *const *want)
{
        size_t i;

        for (i = 0; want[i]; i++) {
                if (i >= n || !v || !v[i] || strcmp(v[i], want[i]) != 0)
                        return false;
        }
        return i == n && v && v[n] == NULL;
}

static void test_full(void)
{
        struct policy *p = expect_ok(full_policy, "full policy");
        const struct policy_binding *b;

        if (!p)
                return;
        CHECK_STR(p->path, "t.policy", "path");
        CHECK_STR(p->name, "notes-2", "Name");
        CHECK_STR(p->exec, "/bin/sh", "Exec");
        CHECK(strv_is(p->argv, p->argc,
                      (const char *const[]){ "-c", "echo \"hi there\"", "--x=a b", NULL }),
              "Arguments split like a shell");
        CHECK(strv_is(p->env, p->n_env, (const char *const[]){ "LANG=C.UTF-8",
                      "GREETING=hello world", "TZ=UTC", NULL }), "Environment accumulates");
        CHECK(strv_is(p->ro_paths, p->n_ro_paths,
                      (const char *const[]){ "/usr/share", "/usr/lib", "/usr/bin", NULL }),
              "ReadOnlyPaths accumulate, normalised");
        CHECK(p->system_libraries, "SystemLibraries, inline comment stripped");
        CHECK(p->n_warnings == 1 && strstr(p->warnings[0], "Loopback= is deprecated"),
              "Loopback= loads, ignored with a warning");
        CHECK(p->tmp_size == 64ull << 20, "TmpSize");
        CHECK(p->memory_max == 1ull << 30, "MemoryMax");
        CHECK(p->tasks_max == 16, "TasksMax");
        CHECK(p->cpu_quota == 150, "CPUQuota above 100%%");
        CHECK(p->limit_nofile == 4096, "LimitNOFILE");
        CHECK(p->call_timeout_ms == 5000, "CallTimeout");
        CHECK(p->runtime_max_ms == 2 * 3600 * 1000, "RuntimeMax");
        CHECK(p->restart == POLICY_RESTART_ON_FAILURE, "Restart");
        CHECK(p->n_bindings == 5, "five bindings");

        b = policy_binding_find(p, "NOTES");
        CHECK(b && b->type == BINDING_KV && b->line == 22, "kv binding, header line");
        CHECK(b && b->max_keys == 1000 && b->max_value_size == 64 * 1024 &&
              b->max_bytes == 10 << 20, "kv limits (key before Type=)");

        b = policy_binding_find(p, "COUNTER");
        CHECK(b && b->type == BINDING_GADGET && b->line == 28, "gadget binding");
        CHECK(b && b->target && strcmp(b->target, "counter") == 0, "Target");
        CHECK(b && strv_is(b->methods, b->n_methods,
                           (const char *const[]){ "get", "increment", NULL }), "gadget Methods");

        b = policy_binding_find(p, "API");
        CHECK(b && b->type == BINDING_HTTP && b->line == 33, "http binding");
        CHECK(b && strv_is(b->allow, b->n_allow, (const char *const[]){
                      "http://127.0.0.1:8080/api/", "https://example.com/",
                      "https://[::1]:8443/", NULL }), "Allow; '/' added after a bare host");
        CHECK(b && strv_is(b->methods, b->n_methods, (const char *const[]){ "GET", "POST", NULL }),
              "http Methods");
        CHECK(b && b->timeout_ms == 250 && b->max_response == 1536 << 10 && b->max_request == 4096,
              "http limits");

        b = policy_binding_find(p, "MOTD");
        CHECK(b && b->type == BINDING_TEXT && b->value && strcmp(b->value, "Hello, world!") == 0,
              "text Value");
        b = policy_binding_find(p, "TOKEN");
        CHECK(b && b->type == BINDING_SECRET && b->file && strcmp(b->file, "/etc/passwd") == 0,
              "secret File");
        CHECK(b && b->max_size == 4096, "secret MaxSize");
        CHECK(policy_binding_find(p, "notes") == NULL, "binding names are case-sensitive");
        policy_free(p);
        p = expect_ok(HEAD "NetworkNamespace=shared\n", "NetworkNamespace=shared");
        CHECK(p && p->netns == POLICY_NETNS_SHARED, "NetworkNamespace=shared");
        policy_free(p);
}

static void test_defaults(void)
{
        struct policy *p = expect_ok(HEAD "[Binding K]\nType=kv\n[Binding H]\nType=http\n"
                                     "Allow=https://example.com/x\n[Binding G]\nType=gadget\n"
                                     "Target=other\n[Binding T]\nType=text\nValue=\n"
                                     "[Binding S]\nType=secret\nFile=/etc/passwd\n",
                                     "defaults");
        const struct policy_binding *b;

        if (!p)
                return;
        CHECK(p->argc == 0 && !p->argv && p->n_env == 0 && !p->env && p->n_ro_paths == 0,
              "no arguments, environment or paths");
        CHECK(!p->system_libraries, "booleans default to no");
        CHECK(p->tmp_size == 16 << 20, "TmpSize defaults to 16M");
        CHECK(p->netns == POLICY_NETNS_PRIVATE, "NetworkNamespace defaults to private");
        CHECK(p->memory_max == POLICY_UNLIMITED && p->tasks_max == POLICY_UNLIMITED,
              "MemoryMax and TasksMax default to infinity");
        CHECK(p->cpu_quota == 0 && p->runtime_max_ms == 0, "no CPU quota, no RuntimeMax");
        CHECK(p->limit_nofile == 1024 && p->call_timeout_ms == 30000, "LimitNOFILE, CallTimeout");
        CHECK(p->restart == POLICY_RESTART_NO, "Restart defaults to no");
        CHECK(p->start_timeout_ms == 10000, "StartTimeout defaults to 10s");
        CHECK(p->log_lines == 0 && p->log_bytes == 0, "the log budget defaults to gadgetd's");
        b = policy_binding_find(p, "K");
        CHECK(b && b->max_value_size == 1 << 20 && b->max_keys == 100000 && b->max_bytes == 16 << 20 &&
              b->calls_max == 16, "kv defaults: MaxKeys=100000, MaxBytes=16M, CallsMax=16");
        b = policy_binding_find(p, "H");
        CHECK(b && strv_is(b->methods, b->n_methods, (const char *const[]){ "GET", NULL }),
              "http Methods default to GET");
        CHECK(b && b->timeout_ms == 10000 && b->max_response == 1 << 20 &&
              b->max_request == 1 << 20, "http limit defaults");
        b = policy_binding_find(p, "G");
        CHECK(b && b->n_methods == 0 && !b->methods, "gadget binding: no Methods= list");
        b = policy_binding_find(p, "T");
        CHECK(b && b->value && b->value[0] == '\0', "text Value may be empty");
        b = policy_binding_find(p, "S");
        CHECK(b && b->max_size == 64 * 1024, "secret MaxSize defaults to 64K");
        policy_free(p);

        p = expect_ok(HEAD "StartTimeout=500ms\nLogLinesPerSecond=20\nLogBytesPerSecond=8K\n",
                      "start timeout and log budget");
        CHECK(p && p->start_timeout_ms == 500 && p->log_lines == 20 && p->log_bytes == 8192,
              "StartTimeout, LogLinesPerSecond, LogBytesPerSecond");
        policy_free(p);

        p = expect_ok(HEAD "RuntimeMax=infinity\nTasksMax=infinity\nMemoryMax=infinity\n",
                      "infinity where allowed");
        CHECK(p && p->runtime_max_ms == 0 && p->tasks_max == POLICY_UNLIMITED, "infinity values");
        policy_free(p);
}

/* A temporary *.html file of size bytes and mode; its path in buf. */
static bool temp_html(char *buf, size_t len, off_t size, mode_t mode)
{
        snprintf(buf, len, "/tmp/test-policy-XXXXXX.html");
        int fd = mkstemps(buf, 5);
        bool ok = fd >= 0 && ftruncate(fd, size) == 0 && fchmod(fd, mode) == 0;

        if (fd >= 0)
                close(fd);
        return ok;
}

/* UI=: an existing, world-readable regular *.html file, absolute, at most
 * POLICY_UI_MAX bytes. */
static void test_ui(void)
{
        char fixture_ui[PATH_MAX], text[2 * PATH_MAX + 64], tmp[64];
        struct policy *p;

        p = expect_ok(HEAD, "no UI=");
        CHECK(p && p->ui == NULL, "UI defaults to none");
        policy_free(p);

        CHECK(realpath(fixture(text, sizeof(text), "ui.html"), fixture_ui) != NULL, "fixture ui.html exists");
        snprintf(text, sizeof(text), HEAD "UI=%s\n", fixture_ui);
        p = expect_ok(text, "UI= an HTML file");
        CHECK(p && p->ui && strcmp(p->ui, fixture_ui) == 0, "UI path kept");
        policy_free(p);

        expect_error(HEAD "UI=policies/ui.html\n", 4, "UI=\"policies/ui.html\" is not an absolute path");
        expect_error(HEAD "UI=/nonexistent/ui.html\n", 4, "No such file or directory");
        expect_error(HEAD "UI=/tmp\n", 4, "UI=\"/tmp\" is not a regular file");
        expect_error(HEAD "UI=/bin/sh\n", 4, "UI=\"/bin/sh\" is not an HTML file");
        expect_error(HEAD "UI=\n", 4, "UI= needs a value");
        snprintf(text, sizeof(text), HEAD "UI=%s\nUI=%s\n", fixture_ui, fixture_ui);
        expect_error(text, 5, "UI= given twice (first on line 4)");

        if (temp_html(tmp, sizeof(tmp), 10, 0600)) {
                snprintf(text, sizeof(text), HEAD "UI=%s\n", tmp);
                expect_error(text, 4, "is not readable by every user");
        } else {
                CHECK(false, "temporary file for the private UI");
        }
        unlink(tmp);
        if (temp_html(tmp, sizeof(tmp), POLICY_UI_MAX + 1, 0644)) {
                snprintf(text, sizeof(text), HEAD "UI=%s\n", tmp);
                expect_error(text, 4, "is larger than 1048576 bytes");
        } else {
                CHECK(false, "temporary file for the large UI");
        }
        unlink(tmp);
}

/* A gatekeeper's keys, approvals and credentials. */
/* Schedule=METHOD CALENDAR: repeatable, in order, each with its line;
 * errors name the line and what was wrong. */
static void test_schedule(void)
{
        char text[8192], err[64];
        size_t o;
        struct policy *p = expect_ok(HEAD "Schedule=tidy daily\nSchedule=report  Mon..Fri *-*-* 9:00  UTC \n"
                                     "Schedule=tidy *:0/15\n", "three Schedule= lines");

        if (p) {
                CHECK(p->n_schedules == 3 && strcmp(p->schedules[0].method, "tidy") == 0 &&
                      strcmp(p->schedules[0].calendar, "daily") == 0 && p->schedules[0].line == 4 &&
                      p->schedules[0].cal, "Schedule=tidy daily: its method, text, line and calendar");
                CHECK(p->n_schedules == 3 && strcmp(p->schedules[1].method, "report") == 0 &&
                      strcmp(p->schedules[1].calendar, "Mon..Fri *-*-* 9:00  UTC") == 0 &&
                      p->schedules[2].line == 6, "the calendar as written, without the blanks around it");
                policy_free(p);
        }
        p = expect_ok(HEAD "Schedule=tidy *-02-30\nSchedule=tidy 2020-01-01\nSchedule=tidy *-02-29\n",
                      "Schedule= that never elapses");
        if (p) {
                /* (and a warning that /bin/sh's loader is not in the sandbox) */
                CHECK(p->n_schedules == 3 && p->n_warnings == 3 &&
                      strcmp(p->warnings[0], "t.policy:4: warning: Schedule= never elapses: its calendar event has no "
                             "time after now (a past date, or one like February 30)") == 0 &&
                      strncmp(p->warnings[1], "t.policy:5: warning: Schedule= never", 36) == 0,
                      "a Schedule= that never elapses loads, with a warning");
                policy_free(p);
        }
        p = expect_ok(HEAD, "no Schedule=");
        if (p) {
                CHECK(p->n_schedules == 0 && !p->schedules, "no Schedule=: none");
                policy_free(p);
        }
        expect_error(HEAD "Schedule=tidy\n", 4, "Schedule=\"tidy\": expected METHOD CALENDAR");
        expect_error(HEAD "Schedule=\n", 4, "Schedule= needs a value");
        expect_error(HEAD "Schedule=ti.dy daily\n", 4, "Schedule=: \"ti.dy\" is not a method name");
        expect_error(HEAD "Schedule=tidy daily\nSchedule=tidy 25:00\n", 5,
                     "Schedule=: calendar event \"25:00\": hour 25 is out of range (0..23)");
        expect_error(HEAD "Schedule=tidy 12:00 Europe/Berlin\n", 4,
                     "time zone \"Europe/Berlin\": only UTC is supported");
        expect_error(HEAD "Schedule=tidy *-*~29\n", 4, "day ~29 is out of range (1..28)");
        expect_error(HEAD "Schedule=tidy Fri..Mon\n", 4, "weekday range \"Fri..Mon\" goes backwards");
        expect_error(HEAD "Gatekeeper=yes\nSchedule=tidy daily\nSchedule=configure daily\nAdminMethods=configure\n", 6,
                     "Schedule=: configure is an admin method, which only the admin UI calls");
        o = (size_t)snprintf(text, sizeof(text), "%s", HEAD);
        for (int i = 0; i <= POLICY_SCHEDULES_MAX; i++)
                o += (size_t)snprintf(text + o, sizeof(text) - o, "Schedule=m%d daily\n", i);
        snprintf(err, sizeof(err), "Schedule=: more than %d schedules", POLICY_SCHEDULES_MAX);
        expect_error(text, 4 + POLICY_SCHEDULES_MAX, err);
}

static void test_gatekeeper(void)
{
        char html[64];
        struct policy *p = expect_ok(HEAD "Gatekeeper=yes\nAdminMethods=configure pending\nApprove=create\n"
                                     "[Binding API]\nType=http\nAllow=http://127.0.0.1:9/api/\nMethods=GET POST\n"
                                     "Credential=/bin/sh\nApprove=POST\nApproveTimeout=30s\n"
                                     "[Binding G]\nType=gadget\nTarget=other\nApprove=send\n", "a gatekeeper");
        if (p) {
                const struct policy_binding *api = policy_binding_find(p, "API");
                CHECK(p->gatekeeper && p->n_admin_methods == 2 && policy_admin_method(p, "pending") &&
                      !policy_admin_method(p, "create"), "AdminMethods= read");
                CHECK(p->n_approve == 1 && policy_listed(p->approve, "create") &&
                      p->approve_timeout_ms == POLICY_APPROVE_TIMEOUT_MS, "Approve= and its default timeout");
                CHECK(api && api->credential && strcmp(api->credential, "/bin/sh") == 0 && api->credential_header &&
                      strcmp(api->credential_header, POLICY_CREDENTIAL_HEADER) == 0 && api->n_approve == 1 &&
                      api->approve_timeout_ms == 30000, "an http binding's credential, in its default header");
                CHECK(policy_listed(policy_binding_find(p, "G")->approve, "send"),
                      "a gadget binding's Approve= without Methods= (every method allowed)");
        }
        policy_free(p);
        p = expect_ok(HEAD "Nodes=web2 web-1 db_3\n", "Nodes=");
        if (p) {
                CHECK(p->n_nodes == 3 && strcmp(p->nodes[0], "web2") == 0 && strcmp(p->nodes[2], "db_3") == 0,
                      "Nodes= in order of preference");
                policy_free(p);
        }
        p = expect_ok(HEAD, "no Nodes=");
        if (p) {
                CHECK(p->n_nodes == 0 && !p->nodes, "no Nodes=: any node");
                policy_free(p);
        }
        expect_error(HEAD "Nodes=web1 Web2\n", 4, "Nodes=\"web1 Web2\": \"Web2\" is not a node name");
        expect_error(HEAD "Nodes=a b a\n", 4, "Nodes=\"a b a\" lists a twice");
        expect_error(HEAD "Nodes=a.b\n", 4, "is not a node name (1 to 63 of a-z 0-9 _ -)");
        expect_error(HEAD "Nodes=\n", 4, "Nodes= needs a value");
        expect_error(HEAD "Nodes=a\nNodes=b\n", 5, "Nodes= given twice (first on line 4)");
        expect_error(HEAD "[Binding K]\nType=kv\nNodes=a\n", 6, "unknown key \"Nodes\" in [Binding K]");
        expect_error(HEAD "AdminMethods=configure\n", 4, "AdminMethods= is only for a gatekeeper: add Gatekeeper=yes");
        expect_error(HEAD "Gatekeeper=yes\nAdminMethods=a\nApprove=b a\n", 6, "Approve=: a is an admin method");
        expect_error(HEAD "Gatekeeper=yes\nAdminMethods=a b a\n", 5, "AdminMethods=\"a b a\" lists a twice");
        expect_error(HEAD "Gatekeeper=yes\nAdminMethods=a.b\n", 5,
                     "AdminMethods=\"a.b\": \"a.b\" is not a method name (letters, digits and _)");
        expect_error(HEAD "Approve=a.b\n", 4, "is not a method name");
        expect_error(HEAD "ApproveTimeout=2d\n", 4, "is not a duration");
        expect_error(HEAD "ApproveTimeout=25h\n", 4, "must be at most 86400000");
        expect_error(HEAD "[Binding G]\nType=gadget\nTarget=o\nMethods=a\nApprove=b\n", 8,
                     "Approve=\"b\": b is not one of the binding's Methods=");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nApprove=POST\n", 7,
                     "POST is not one of the binding's Methods=");
        expect_error(HEAD "[Binding K]\nType=kv\nApprove=put\n", 6, "key Approve is not valid for a binding of type kv");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nCredentialHeader=X-Key: {}\n", 4,
                     "binding H has CredentialHeader= but no Credential=");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nCredential=/bin/sh\nCredentialHeader=X-Key\n", 8,
                     "is not \"Name: value\"");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nCredential=/bin/sh\nCredentialHeader=X-Key: v\n", 8,
                     "must hold {} (where the credential goes) exactly once");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nCredential=/bin/sh\nCredentialHeader=Host: {}\n", 8,
                     "names a header HTTP itself manages");
        expect_error(HEAD "[Binding H]\nType=http\nAllow=http://h/\nCredential=/nonexistent\n", 7,
                     "No such file or directory");
        expect_error(HEAD "[Binding T]\nType=text\nValue=x\nCredential=/bin/sh\n", 7,
                     "key Credential is not valid for a binding of type text");
        if (temp_html(html, sizeof html, 10, 0644)) {
                char text[300];
                snprintf(text, sizeof text, HEAD "AdminUI=%s\n", html);
                expect_error(text, 4, "AdminUI= is only for a gatekeeper");
                snprintf(text, sizeof text, HEAD "Gatekeeper=yes\nAdminUI=%s\n", html);
                p = expect_ok(text, "an admin UI");
                CHECK(p && p->admin_ui && strcmp(p->admin_ui, html) == 0, "AdminUI= read");
                policy_free(p);
                unlink(html);
        }
        expect_error(HEAD "Gatekeeper=yes\nAdminUI=/bin/sh\n", 5, "AdminUI=\"/bin/sh\" is not an HTML file");
}

static void test_syntax(void)
{
        struct policy *p;

        p = expect_ok("\xef\xbb\xbf[Gadget]\r\nName=t\r\nExec=/bin/sh\r\n", "BOM and CRLF");
        CHECK(p && strcmp(p->name, "t") == 0, "CRLF stripped from values");
        policy_free(p);

        p = expect_ok("[Gadget]\n  # indented comment\n\t; another\n\nName = t   ; comment\n"
                      "Exec=/bin/sh\n[Binding V]\nType=text\nValue=a#b;c #d\n"
                      "[Binding W]   # comment after a header\nType=text\nValue= ;x\n",
                      "comments");
        CHECK(p && strcmp(p->name, "t") == 0, "blanks around '=' and inline ';' comment stripped");
        const struct policy_binding *b = p ? policy_binding_find(p, "V") : NULL;
        CHECK(b && strcmp(b->value, "a#b;c") == 0, "'#' and ';' need a blank before them");
        b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && strcmp(b->value, "") == 0, "comment right after '=' leaves an empty value");
        policy_free(p);

        p = expect_ok("[Gadget]\nName=t\nExec=/bin/sh", "no newline at the end");
        policy_free(p);
        p = expect_ok(HEAD "[Binding abcdefghijklmnopqrstuvwxyz"
                      "abcdefghijklmnopqrstuvwxyz_0123456789a]\n"
                      "Type=kv\n", "binding name of 64 (longer than inih's section buffer)");
        CHECK(p && p->n_bindings == 1 && strlen(p->bindings[0].name) == 64,
              "long binding name kept");
        policy_free(p);
}

static void test_errors(void)
{
        char longline[300];

        /* sections */
        expect_error("", 1, "no [Gadget] section");
        expect_error("# only a comment\n[Binding A]\nType=kv\n", 1, "no [Gadget] section");
        expect_error(HEAD "[Foo]\nX=1\n", 4, "unknown section \"Foo\"");
        expect_error(HEAD "[gadget]\n", 4, "unknown section \"gadget\"");
        expect_error(HEAD "[Gadget]\nName=u\n", 4, "duplicate [Gadget] section (first on line 1)");
        expect_error(HEAD "[Binding\n", 4, "does not end with ']'");
        expect_error(HEAD "[Binding]\nType=kv\n", 4, "[Binding] needs a name");
        expect_error(HEAD "[Binding 9x]\nType=kv\n", 4, "binding name \"9x\" is not an identifier");
        expect_error(HEAD "[Binding A-B]\nType=kv\n", 4, "\"A-B\"");
        expect_error(HEAD "[Binding API]\nType=kv\n\n[Binding API]\nType=text\n", 7,
                     "duplicate binding API (first on line 4)");
        expect_error("Name=t\n[Gadget]\nName=t\nExec=/bin/sh\n", 1,
                     "Name= comes before any section");

        /* line syntax */
        expect_error(HEAD "hello\n", 4,
                     "expected KEY=VALUE, [Section] or a comment, not \"hello\"");
        expect_error(HEAD "Loopback: yes\n", 4, "expected KEY=VALUE");
        expect_error(HEAD "=yes\n", 4, "expected KEY=VALUE");
        expect_error(HEAD "Arguments=-a\n  -b\n", 5, "continuation lines are not supported");
        expect_error(HEAD "  Loopback=yes\n", 4, "continuation lines are not supported");
        memset(longline, 'x', sizeof(longline));
        memcpy(longline, HEAD "Arguments=", strlen(HEAD "Arguments="));
        longline[sizeof(longline) - 1] = '\0';
        expect_error(longline, 4, "line is longer than");
        /* inih's line buffer is 200 bytes: 198 of text, the newline and a NUL. */
        longline[strlen(HEAD) + 198] = '\0';
        {
                struct policy *p = expect_ok(longline, "a line of 198 bytes");
                CHECK(p && p->argc == 1 && strlen(p->argv[0]) == 198 - strlen("Arguments="),
                      "a line of 198 bytes is read whole");
                policy_free(p);
        }
        {
                struct policy *p = expect_ok(HEAD "Arguments=\n", "an empty Arguments=");
                CHECK(p && p->argc == 0 && p->argv == NULL, "an empty Arguments= leaves no arguments");
                policy_free(p);
        }
        {
                static const char nul[] = HEAD "Loopback=y\0es\n";
                struct policy *p = SENTINEL;
                struct policy_errors e = { 0 };
                int r = policy_parse("t.policy", nul, sizeof(nul) - 1, &p, &e);
                CHECK(r == -EINVAL && p == SENTINEL && e.n == 1 &&
                      error_is(e.msgs[0], 4, "NUL byte"), "NUL byte in a line");
                policy_errors_clear(&e);
        }

        /* [Gadget] keys */
        expect_error("[Gadget]\nExec=/bin/sh\n", 1, "[Gadget] has no Name=");
        expect_error("[Gadget]\nName=t\n", 1, "[Gadget] has no Exec=");
        expect_error(HEAD "Bogus=1\n", 4, "unknown key \"Bogus\" in [Gadget]");
        expect_error(HEAD "memoryMax=1\n", 4, "keys are case-sensitive: MemoryMax");
        expect_error(HEAD "Name=u\n", 4, "Name= given twice (first on line 2)");
        expect_error(HEAD "Loopback=\n", 4, "Loopback= needs a value");
        expect_error(HEAD "StartTimeout=infinity\n", 4, "is not a duration");
        expect_error(HEAD "StartTimeout=0\n", 4, "must be greater than 0");
        expect_error(HEAD "LogLinesPerSecond=0\n", 4, "must be greater than 0");
        expect_error(HEAD "LogLinesPerSecond=infinity\n", 4, "a limit is required here");
        expect_error(HEAD "LogBytesPerSecond=1G\n", 4, "must be at most");
        expect_error("[Gadget]\nName=Notes\nExec=/bin/sh\n", 2,
                     "Name=\"Notes\" is not a valid gadget name");
        expect_error("[Gadget]\nName=t\nExec=bin/sh\n", 3,
                     "Exec=\"bin/sh\" is not an absolute path");
        expect_error("[Gadget]\nName=t\nExec=/nonexistent\n", 3,
                     "Exec=\"/nonexistent\": No such file or directory");
        expect_error("[Gadget]\nName=t\nExec=/usr/share\n", 3,
                     "Exec=\"/usr/share\" is not a regular file");
        expect_error("[Gadget]\nName=t\nExec=/etc/passwd\n", 3,
                     "Exec=\"/etc/passwd\" is not executable");
        expect_error("[Gadget]\nName=t\nExec=/bin/../bin/sh\n", 3, "must not contain \"..\"");
        expect_error(HEAD "Arguments=-c \"echo\n", 4, "unterminated quote");
        expect_error(HEAD "Environment=A=1 1B=2\n", 4, "\"1B=2\" is not NAME=VALUE");
        expect_error(HEAD "Environment=NOVALUE\n", 4, "\"NOVALUE\" is not NAME=VALUE");
        expect_error(HEAD "Environment=A=1\nEnvironment=A=2\n", 5, "sets A a second time");
        expect_error(HEAD "ReadOnlyPaths=usr/share\n", 4, "is not an absolute path");
        expect_error(HEAD "ReadOnlyPaths=/usr/share /nonexistent\n", 4,
                     "ReadOnlyPaths=\"/nonexistent\": No such file or directory");
        expect_error(HEAD "ReadOnlyPaths=/usr/../etc\n", 4, "must not contain \"..\"");
        expect_error(HEAD "ReadOnlyPaths=//\n", 4, "would expose the whole host file system");
        expect_error(HEAD "ReadOnlyPaths=/usr/share\nReadOnlyPaths=/usr/share/\n", 5,
                     "listed twice");
        expect_error(HEAD "SystemLibraries=maybe\n", 4,
                     "SystemLibraries=\"maybe\" is not a boolean");
        expect_error(HEAD "MemoryMax=12Q\n", 4, "MemoryMax=\"12Q\" is not a size");
        expect_error(HEAD "MemoryMax=0\n", 4, "MemoryMax=\"0\" must be greater than 0");
        expect_error(HEAD "MemoryMax=1K\n", 4, "MemoryMax=\"1K\" must be at least 1M: less cannot hold the sandbox");
        expect_error(HEAD "MemoryMax=1048575\n", 4, "MemoryMax=\"1048575\" must be at least 1M");
        expect_error(HEAD "TmpSize=infinity\n", 4, "TmpSize=\"infinity\": a limit is required");
        expect_error(HEAD "TmpSize=99999999999T\n", 4, "is not a size");
        expect_error(HEAD "TasksMax=16K\n", 4, "TasksMax=\"16K\" is not a whole number");
        expect_error(HEAD "TasksMax=0\n", 4, "must be greater than 0");
        expect_error(HEAD "CPUQuota=20\n", 4, "CPUQuota=\"20\" is not a percentage");
        expect_error(HEAD "CPUQuota=0%\n", 4, "is not a percentage");
        expect_error(HEAD "CPUQuota=%\n", 4, "is not a percentage");
        expect_error(HEAD "CPUQuota=4294967296%\n", 4, "is not a percentage");
        expect_error(HEAD "LimitNOFILE=1048577\n", 4,
                     "LimitNOFILE=\"1048577\" must be at most 1048576");
        expect_error(HEAD "LimitNOFILE=infinity\n", 4, "a limit is required");
        expect_error(HEAD "CallTimeout=5x\n", 4, "CallTimeout=\"5x\" is not a duration");
        expect_error(HEAD "CallTimeout=0\n", 4, "must be greater than 0");
        expect_error(HEAD "CallTimeout=infinity\n", 4, "is not a duration");
        expect_error(HEAD "RuntimeMax=99999999999999999999s\n", 4, "is not a duration");
        expect_error(HEAD "Restart=sometimes\n", 4, "Restart=\"sometimes\" is not one of");

        /* [Binding NAME] keys */
        expect_error(HEAD "[Binding A]\nMaxKeys=1\n", 4, "binding A has no Type=");
        expect_error(HEAD "[Binding A]\nMaxKeys=1\nType=blob\n", 6, "Type=\"blob\" is not one of");
        expect_error(HEAD "[Binding A]\nType=kv\nType=kv\n", 6,
                     "Type= given twice (first on line 5)");
        expect_error(HEAD "[Binding A]\nType=kv\nFoo=1\n", 6, "unknown key \"Foo\" in [Binding A]");
        expect_error(HEAD "[Binding A]\nTarget=counter\nType=kv\n", 5,
                     "key Target is not valid for a binding of type kv");
        expect_error(HEAD "[Binding A]\nType=kv\nMaxValueSize=infinity\n", 6,
                     "a limit is required");
        expect_error(HEAD "[Binding A]\nType=kv\nMaxBytes=lots\n", 6,
                     "MaxBytes=\"lots\" is not a size");
        expect_error(HEAD "[Binding A]\nType=kv\nMaxPending=4\n", 6, "unknown key \"MaxPending\" in [Binding A]");
        expect_error(HEAD "[Binding A]\nType=gadget\n", 4,
                     "binding A of type gadget has no Target=");
        expect_error(HEAD "[Binding A]\nType=gadget\nTarget=Counter\n", 6,
                     "Target=\"Counter\" is not a valid gadget name");
        expect_error(HEAD "[Binding A]\nType=gadget\nTarget=t\n", 4,
                     "Target=t is this gadget itself");
        expect_error(HEAD "[Binding A]\nType=gadget\nTarget=c\nMethods=get 2x\n", 7,
                     "\"2x\" is not a method name");
        expect_error(HEAD "[Binding A]\nType=gadget\nTarget=c\nMethods=get get\n", 7,
                     "lists get twice");
        expect_error(HEAD "[Binding A]\nType=http\n", 4, "binding A of type http has no Allow=");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=ftp://h/\n", 6,
                     "does not start with http://");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://\n", 6, "has no valid host");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h:0/\n", 6, "has no valid host");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h:99999/\n", 6,
                     "has no valid host");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://a@h/\n", 6, "user information");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h?q=1\n", 6, "needs a '/'");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h/#x\n", 6, "fragment");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h/\nAllow=http://h\n", 7,
                     "listed twice");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h/\nMethods=GET get\n", 7,
                     "\"get\" is not one of GET, POST");
        expect_error(HEAD "[Binding A]\nType=http\nAllow=http://h/\nTimeout=soon\n", 7,
                     "Timeout=\"soon\" is not a duration");
        expect_error(HEAD "[Binding A]\nType=text\n", 4, "binding A of type text has no Value=");
        expect_error(HEAD "[Binding A]\nType=secret\n", 4, "binding A of type secret has no File=");
        expect_error(HEAD "[Binding A]\nType=secret\nFile=/nonexistent\n", 6, "No such file");
        expect_error(HEAD "[Binding A]\nType=secret\nFile=etc/passwd\n", 6, "not an absolute path");
        expect_error(HEAD "[Binding A]\nType=secret\nFile=/usr/share\n", 6, "not a regular file");
        expect_error(HEAD "[Binding A]\nType=secret\nFile=/etc/passwd\nMaxSize=2M\n", 7,
                     "MaxSize=\"2M\" must be at most 1048576");
        expect_error(HEAD "[Binding A]\nType=kv\nMaxSize=1K\n", 6,
                     "key MaxSize is not valid for a binding of type kv");
}

/* Values in messages are quoted, escaped and shortened. */
static void test_quoting(void)
{
        char text[400];
        struct policy *p = SENTINEL;
        struct policy_errors e = { 0 };

        expect_error(HEAD "Restart=a\"b\\c\x01\n", 4, "Restart=\"a\\\"b\\\\c\\x01\"");
        snprintf(text, sizeof(text), HEAD "Restart=%0150d\n", 7);
        parse(text, &p, &e);
        CHECK(e.n == 1 && strstr(e.msgs[0], "...\" is not one of") && strlen(e.msgs[0]) < 200,
              "a long value is shortened in the message");
        policy_errors_clear(&e);
}

static void test_many_errors(void)
{
        static const char text[] =
                "[Gadget]\n"                    /* 1 */
                "Name=Bad Name\n"               /* 2 */
                "Exec=/nonexistent\n"           /* 3 */
                "MemoryMax=lots\n"              /* 4 */
                "[Binding X]\n"                 /* 5 */
                "Type=kv\n"                     /* 6 */
                "Target=x\n"                    /* 7 */
                "[Nope]\n";                     /* 8 */
        struct policy *p = SENTINEL;
        struct policy_errors e = { 0 };
        int r = parse(text, &p, &e);

        CHECK(r == -EINVAL && p == SENTINEL, "several errors: nothing returned");
        CHECK(e.n == 5, "every error collected (%zu)", e.n);
        if (e.n == 5) {
                CHECK(error_is(e.msgs[0], 2, "Name=\"Bad Name\""), "first: line 2");
                CHECK(error_is(e.msgs[1], 3, "Exec=\"/nonexistent\""), "second: line 3");
                CHECK(error_is(e.msgs[2], 4, "MemoryMax=\"lots\""), "third: line 4");
                CHECK(error_is(e.msgs[3], 7, "key Target is not valid"), "fourth: line 7");
                CHECK(error_is(e.msgs[4], 8, "unknown section \"Nope\""), "fifth: line 8");
        } else {
                dump_errors(&e);
        }
        policy_errors_clear(&e);
        CHECK(e.n == 0 && e.msgs == NULL, "errors cleared");

        /* In line order, though the whole file's checks (no Exec=, on the
         * [Gadget] line) and a section's (no Method=, on its header) come
         * after the lines below them. */
        static const char late[] =
                "[Gadget]\n"                    /* 1: no Exec= */
                "Name=t\n"                      /* 2 */
                "Bogus=1\n"                     /* 3 */
                "[Binding W]\n"                 /* 4: no Method= */
                "Type=alarm\n"                  /* 5 */
                "MaxAlarms=0\n";                /* 6 */
        r = parse(late, &p, &e);
        CHECK(r == -EINVAL && e.n == 4, "late checks' errors collected (%zu)", e.n);
        for (size_t i = 1; i < e.n; i++)
                CHECK(strtoul(strchr(e.msgs[i - 1], ':') + 1, NULL, 10) <= strtoul(strchr(e.msgs[i], ':') + 1, NULL, 10),
                      "errors in line order: %s before %s", e.msgs[i - 1], e.msgs[i]);
        if (e.n == 4)
                CHECK(error_is(e.msgs[0], 1, "has no Exec=") && error_is(e.msgs[3], 6, "MaxAlarms"),
                      "first the [Gadget] line's, last line 6's");
        else
                dump_errors(&e);
        policy_errors_clear(&e);

        /* Appends to what errs already holds; NULL errs is allowed. */
        parse("[Gadget]\n", &p, &e);
        parse("[Gadget]\n", &p, &e);
        CHECK(e.n == 4, "errors accumulate across calls");
        policy_errors_clear(&e);
        CHECK(parse("[Gadget]\n", &p, NULL) == -EINVAL && p == SENTINEL, "errs may be NULL");

        /* A flood of bad lines stops at 100 messages plus one. */
        size_t len = 9 + 200 * 4;
        char *flood = malloc(len + 1);
        if (flood) {
                memcpy(flood, "[Gadget]\n", 9);
                for (size_t i = 0; i < 200; i++)
                        memcpy(flood + 9 + i * 4, "bad\n", 4);
                r = policy_parse("t.policy", flood, len, &p, &e);
                CHECK(r == -EINVAL && e.n == 101 && strstr(e.msgs[100], "too many errors"),
                      "error flood capped (%zu)", e.n);
                policy_errors_clear(&e);
                free(flood);
        }
}

static void test_load(void)
{
        char good[PATH_MAX], bad_path[PATH_MAX], missing[PATH_MAX], want[PATH_MAX + 64];
        struct policy *p = NULL;
        struct policy_errors e = { 0 };
        int r = policy_load(fixture(good, sizeof(good), "good.policy"), &p, &e);

        CHECK(r == 0 && p && e.n == 0, "good.policy loads");
        if (r != 0)
                dump_errors(&e);
        if (p) {
                CHECK_STR(p->path, good, "path kept as given");
                CHECK_STR(p->name, "notes", "good.policy Name");
                CHECK(p->system_libraries && p->memory_max == 64 << 20 && p->tasks_max == 16 &&
                      p->call_timeout_ms == 5000 && p->restart == POLICY_RESTART_ON_FAILURE,
                      "good.policy values");
                CHECK(p->argc == 2 && strcmp(p->argv[1], "exec notes --data /tmp") == 0,
                      "good.policy Arguments");
                CHECK(p->n_bindings == 5, "good.policy bindings");
                const struct policy_binding *b = policy_binding_find(p, "API");
                CHECK(b && b->n_methods == 2 && b->n_allow == 1, "good.policy http binding");
        }
        policy_free(p);
        policy_errors_clear(&e);

        p = SENTINEL;
        r = policy_load(fixture(bad_path, sizeof(bad_path), "bad.policy"), &p, &e);
        CHECK(r == -EINVAL && p == SENTINEL, "bad.policy refused");
        static const struct {
                unsigned line;
                const char *want;
        } bad[] = {
                { 3, "Name=\"Notes\"" },
                { 4, "Exec=\"bin/notes\" is not an absolute path" },
                { 5, "MemoryMax=\"64Q\"" },
                { 6, "SystemLibraries=\"maybe\"" },
                { 7, "Schedule=: calendar event \"Mon..Fri 25:00\": hour 25 is out of range (0..23)" },
                { 9, "binding API of type http has no Allow=" },
                { 10, "key Target is not valid for a binding of type http" },
                { 13, "duplicate binding API (first on line 9)" },
        };
        CHECK(e.n == sizeof(bad) / sizeof(bad[0]), "bad.policy: %zu errors", e.n);
        for (size_t i = 0; i < e.n && i < sizeof(bad) / sizeof(bad[0]); i++) {
                char prefix[PATH_MAX + 16];
                snprintf(prefix, sizeof(prefix), "%s:%u: ", bad_path, bad[i].line);
                CHECK(strncmp(e.msgs[i], prefix, strlen(prefix)) == 0 &&
                      strstr(e.msgs[i], bad[i].want),
                      "bad.policy:%u: %s", bad[i].line, bad[i].want);
        }
        policy_errors_clear(&e);

        r = policy_load(fixture(missing, sizeof(missing), "nonexistent.policy"), &p, &e);
        snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", missing);
        CHECK(r == -ENOENT && p == SENTINEL && e.n == 1 && strcmp(e.msgs[0], want) == 0, "missing file");
        policy_errors_clear(&e);
        r = policy_load(fixture_dir, &p, &e);
        snprintf(want, sizeof(want), "%s: not a regular file", fixture_dir);
        CHECK(r == -EINVAL && p == SENTINEL && e.n == 1 && strcmp(e.msgs[0], want) == 0,
              "directory refused");
        policy_errors_clear(&e);
}

/* POLICY_REDACT: the same errors at the same lines, without the file's
 * text (names, values, keys), numbers kept. */
static void test_redact(void)
{
        char path[PATH_MAX];
        struct policy *p = SENTINEL;
        struct policy_errors e = { 0 };
        uint64_t hash = 0;
        int fd = open(fixture(path, sizeof(path), "bad.policy"), POLICY_OPEN_FLAGS);
        int r = policy_load_fd(fd, "bad.policy", POLICY_REDACT, &p, &e, &hash);
        static const char *const secret[] = { "Notes", "bin/notes", "64Q", "maybe", "tidy", "25:00", "hour",
                                              "Target", "API", "http" };
        static const unsigned lines[] = { 3, 4, 5, 6, 7, 9, 10, 13 };

        CHECK(fd >= 0 && r == -EINVAL && p == SENTINEL && e.n == 8, "bad.policy refused, redacted (%zu)", e.n);
        for (size_t i = 0; i < e.n && i < 8; i++) {
                char prefix[64];
                bool clean = true;
                snprintf(prefix, sizeof(prefix), "bad.policy:%u: ", lines[i]);
                for (size_t k = 0; k < sizeof(secret) / sizeof(*secret); k++)
                        clean = clean && !strstr(e.msgs[i], secret[k]);
                CHECK(strncmp(e.msgs[i], prefix, strlen(prefix)) == 0 && clean, "redacted: %s", e.msgs[i]);
        }
        CHECK(e.n == 8 && strstr(e.msgs[7], "(first on line 9)"), "numbers are kept");
        policy_errors_clear(&e);
        if (fd >= 0)
                close(fd);

        fd = open(fixture(path, sizeof(path), "good.policy"), POLICY_OPEN_FLAGS);
        r = policy_load_fd(fd, "good.policy", POLICY_REDACT, &p, &e, &hash);
        CHECK(r == 0 && p != SENTINEL && hash != 0, "a good policy loads redacted, with its hash");
        if (r == 0)
                policy_free(p);
        if (fd >= 0)
                close(fd);
}

static void test_misc(void)
{
        policy_free(NULL);
        policy_errors_clear(NULL);
        CHECK(policy_binding_find(NULL, "A") == NULL, "find in NULL policy");
        CHECK_STR(policy_binding_type_name(BINDING_HTTP), "http", "type name");
        CHECK_STR(policy_binding_type_name((enum binding_type)99), "unknown", "bad type name");
        CHECK_STR(policy_restart_name(POLICY_RESTART_ON_FAILURE), "on-failure", "restart name");
        CHECK(policy_parse("t.policy", NULL, 0, NULL, NULL) == -EINVAL, "NULL out refused");
}

/* The http binding's budgets, and sizes capped at what one frame carries. */
static void test_http_limits(void)
{
#define H HEAD "[Binding W]\nType=http\nAllow=http://127.0.0.1:1/\n"
        struct policy *p = expect_ok(H, "http budgets: defaults");
        const struct policy_binding *b = p ? policy_binding_find(p, "W") : NULL;

        CHECK(b && b->calls_max == 16 && b->max_resp_headers == 100 &&
              b->max_resp_header_bytes == 64 << 10, "CallsMax, MaxResponseHeaders, "
              "MaxResponseHeaderSize defaults");
        policy_free(p);
        p = expect_ok(H "CallsMax=2\nMaxResponseHeaders=5\nMaxResponseHeaderSize=1K\n"
                      "MaxResponseSize=1900K\n", "http budgets set");
        b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && b->calls_max == 2 && b->max_resp_headers == 5 && b->max_resp_header_bytes == 1024 &&
              b->max_response == 1900 << 10, "http budgets read");
        policy_free(p);
        expect_error(H "MaxResponseSize=8M\n", 7, "MaxResponseSize=\"8M\" is more than one answer can carry");
        expect_error(H "Timeout=1s\nMaxResponseSize=2M\n", 8, "at most");
        /* The headers' room counts: 1900K fits with 1K of headers, not with 256K. */
        expect_error(H "MaxResponseSize=1900K\nMaxResponseHeaderSize=256K\n", 7, "more than one answer");
        expect_error(H "MaxRequestSize=3M\n", 7, "MaxRequestSize=\"3M\" must be at most");
        expect_error(H "MaxInFlight=2\n", 7, "unknown key \"MaxInFlight\" in [Binding W]");
        expect_error(H "MaxResponseHeaders=1001\n", 7, "must be at most 1000");
        expect_error(H "MaxResponseHeaderSize=1M\n", 7, "must be at most");
        /* CAFile=: an existing regular file, for http bindings only. */
        p = expect_ok(H "CAFile=/etc/passwd\n", "CAFile set");
        b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && b->ca_file && strcmp(b->ca_file, "/etc/passwd") == 0, "CAFile read");
        policy_free(p);
        p = expect_ok(H, "CAFile unset");
        b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && !b->ca_file, "no CAFile: the system's roots");
        policy_free(p);
        expect_error(H "CAFile=/nonexistent.pem\n", 7, "No such file");
        expect_error(H "CAFile=ca.pem\n", 7, "not an absolute path");
        expect_error(H "CAFile=/usr/share\n", 7, "not a regular file");
        expect_error(HEAD "[Binding K]\nType=kv\nCAFile=/etc/passwd\n", 6, "not valid for a binding of type kv");
#undef H
}

/* Alarm bindings: Method= required and a method name; MaxAlarms= and
 * MaxPayloadSize= defaults and bounds; alarm keys only on alarm bindings. */
static void test_alarm(void)
{
        struct policy *p = expect_ok(HEAD "[Binding W]\nType=alarm\nMethod=on_alarm\n", "an alarm binding");
        const struct policy_binding *b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && b->type == BINDING_ALARM && strcmp(b->method, "on_alarm") == 0 &&
                      b->max_alarms == POLICY_ALARMS_MAX && b->max_payload == POLICY_ALARM_PAYLOAD,
              "alarm binding: Method=, default MaxAlarms= and MaxPayloadSize=");
        CHECK_STR(policy_binding_type_name(BINDING_ALARM), "alarm", "type name");
        policy_free(p);
        p = expect_ok(HEAD "[Binding W]\nType=alarm\nMethod=m\nMaxAlarms=5\nMaxPayloadSize=1K\n", "limits set");
        b = p ? policy_binding_find(p, "W") : NULL;
        CHECK(b && b->max_alarms == 5 && b->max_payload == 1024, "MaxAlarms=5, MaxPayloadSize=1K");
        policy_free(p);
        expect_error(HEAD "[Binding W]\nType=alarm\n", 4, "binding W of type alarm has no Method=");
        expect_error(HEAD "[Binding W]\nType=alarm\nMethod=not a method\n", 6, "is not a valid method name");
        expect_error(HEAD "[Binding W]\nType=alarm\nMethod=m\nMaxPayloadSize=2M\n", 7, "must be at most");
        expect_error(HEAD "[Binding W]\nType=alarm\nMethod=m\nMaxAlarms=1000001\n", 7, "must be at most");
        expect_error(HEAD "[Binding K]\nType=kv\nMethod=m\n", 6, "key Method is not valid for a binding of type kv");
        expect_error(HEAD "[Binding W]\nType=alarms\n", 5, "is not one of kv, gadget, http, text, secret, alarm");
}

static void check_format(const char *policy_text, const char *what, const char *const *want, size_t n);

/* Tail bindings: Of= and Method= required; Of= names valid gadgets, each
 * once, never this gadget; QueueMax= default and bounds; tail keys only
 * on tail bindings. Each error names its line. */
static void test_tail(void)
{
        struct policy *p = expect_ok(HEAD "[Binding T]\nType=tail\nOf=a b-2\nMethod=events\n", "a tail binding");
        const struct policy_binding *b = p ? policy_binding_find(p, "T") : NULL;
        CHECK(b && b->type == BINDING_TAIL && b->n_of == 2 && strcmp(b->of[0], "a") == 0 &&
                      strcmp(b->of[1], "b-2") == 0 && !b->of[2] && strcmp(b->method, "events") == 0 &&
                      b->queue_max == POLICY_TAIL_QUEUE && b->events_per_s == POLICY_TAIL_EVENTS_PER_S,
              "tail binding: Of=, Method=, default QueueMax= and EventsPerSecond=");
        CHECK_STR(policy_binding_type_name(BINDING_TAIL), "tail", "type name");
        policy_free(p);
        p = expect_ok(HEAD "[Binding T]\nType=tail\nOf=a\nMethod=m\nQueueMax=8\nEventsPerSecond=5\n", "limits set");
        b = p ? policy_binding_find(p, "T") : NULL;
        CHECK(b && b->queue_max == 8 && b->events_per_s == 5, "QueueMax=8, EventsPerSecond=5");
        policy_free(p);
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\n", 4, "binding T of type tail has no Of=");
        expect_error(HEAD "[Binding T]\nType=tail\nOf=a\n", 4, "binding T of type tail has no Method=");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a Counter\n", 7,
                     "Of=\"a Counter\": \"Counter\" is not a valid gadget name");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a b a\n", 7, "Of=\"a b a\" names a twice");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a t\n", 4, "binding T: Of= names this gadget itself");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a\nQueueMax=65537\n", 8, "must be at most 65536");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a\nQueueMax=0\n", 8, "must be greater than 0");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a\nEventsPerSecond=1000001\n", 8,
                     "must be at most 1000000");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a\nEventsPerSecond=0\n", 8, "must be greater than 0");
        expect_error(HEAD "[Binding T]\nType=tail\nMethod=m\nOf=a\nTarget=a\n", 8,
                     "key Target is not valid for a binding of type tail");
        expect_error(HEAD "[Binding K]\nType=kv\nOf=a\n", 6, "key Of is not valid for a binding of type kv");
        char many[1024] = HEAD "[Binding T]\nType=tail\nMethod=m\nOf=";
        static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
        for (int i = 0; i <= POLICY_TAIL_OF_MAX; i++) /* short names: a line has at most 198 bytes */
                snprintf(many + strlen(many), sizeof many - strlen(many), i < 36 ? "%c " : "%c%c ",
                         digits[i % 36], digits[i / 36]);
        strcat(many, "\n");
        expect_error(many, 7, "Of= names 65 gadgets: at most 64");
        static const char *const want[] = { "[Binding T]\nType=tail\n", "Method=events\n", "Of=a b\n",
                                            "QueueMax=9\n", "EventsPerSecond=7\n" };
        check_format(HEAD "[Binding T]\nType=tail\nOf=a b\nMethod=events\nQueueMax=9\nEventsPerSecond=7\n",
                     "a tail binding",
                     want, sizeof want / sizeof *want);
}

/* Formats the policy text (what it is, for the messages) with
 * policy_format: each of want is in the result, which parses again to the
 * same text. */
static void check_format(const char *policy_text, const char *what, const char *const *want, size_t n)
{
        struct policy *p = expect_ok(policy_text, what);
        char *text = NULL, *again = NULL;
        struct policy *q = NULL;
        struct policy_errors e = { 0 };
        CHECK(p && policy_format(p, &text) == 0, "formats");
        if (!text)
                goto out;
        for (size_t i = 0; i < n; i++)
                CHECK(strstr(text, want[i]) != NULL, "formatted: %s", want[i]);
        CHECK(parse(text, &q, &e) == 0 && policy_format(q, &again) == 0 && strcmp(text, again) == 0,
              "the formatted policy parses to the same values");
        policy_errors_clear(&e);
out:
        free(text);
        free(again);
        policy_free(p);
        policy_free(q);
}

/* policy_format: the values in force as an operator writes them, and a
 * policy again: parsed, it formats to the same text. */
static void test_format(void)
{
        static const char *const want[] = { "MemoryMax=64M\n", "TmpSize=1000\n", "CallTimeout=1500ms\n",
                                            "IdleStop=2min\n", "RuntimeMax=infinity\n", "TasksMax=infinity\n",
                                            "StartTimeout=10s\n", "CPUQuota=50%\n", "LogBytesPerSecond=8K\n",
                                            "Arguments=a \"b c\" \"d\\\"e\"\n", "[Binding K]\nType=kv\n",
                                            "MaxValueSize=64K\n", "Value=hello world\n",
                                            "# LogLinesPerSecond= not set" };
        check_format(HEAD "Arguments=a \"b c\" 'd\"e'\nEnvironment=\"Y=two words\"\n"
                     "MemoryMax=64M\nTmpSize=1000\nCallTimeout=1500ms\nIdleStop=2min\n"
                     "Start=on-demand\nRuntimeMax=infinity\nCPUQuota=50%\nRequireTypes=no\n"
                     "LogBytesPerSecond=8K\nSchedule=tick *-*-* *:00:00\n"
                     "[Binding K]\nType=kv\nMaxValueSize=64K\n"
                     "[Binding T]\nType=text\nValue=hello world\n",
                     "a policy to format", want, sizeof want / sizeof *want);
}

/* policy_format of every binding type and of the gadget's lists: each
 * key written back, and the whole parsed again to the same text. */
static void test_format_bindings(void)
{
        static const char *const want[] = { "Gatekeeper=yes\n", "AdminMethods=stats reset\n", "Approve=send\n",
                                            "ApproveTimeout=2min\n", "Nodes=a b\n", "LogLinesPerSecond=50\n",
                                            "RequireTypes=yes\n", "[Binding H]\nType=http\n",
                                            "Allow=https://example.com/x\nAllow=http://b.example:8080/\n",
                                            "Methods=GET POST\n", "Timeout=3s\n",
                                            "CAFile=/etc/passwd\n", "Credential=/etc/passwd\nCredentialHeader=",
                                            "[Binding G]\nType=gadget\nTarget=other\nMethods=get\nApprove=get\n",
                                            "[Binding S]\nType=secret\nFile=/etc/passwd\nMaxSize=1K\n",
                                            "[Binding W]\nType=alarm\nMethod=on_alarm\n", "MaxPayloadSize=2K\n" };
        check_format(HEAD "Gatekeeper=yes\nAdminMethods=stats reset\nApprove=send\n"
                     "ApproveTimeout=2min\nNodes=a b\nLogLinesPerSecond=50\nRequireTypes=yes\n"
                     "[Binding H]\nType=http\nAllow=https://example.com/x\nAllow=http://b.example:8080\nMethods=GET POST\n"
                     "Timeout=3s\nCAFile=/etc/passwd\nCredential=/etc/passwd\n"
                     "[Binding G]\nType=gadget\nTarget=other\nMethods=get\nApprove=get\n"
                     "[Binding S]\nType=secret\nFile=/etc/passwd\nMaxSize=1K\n"
                     "[Binding W]\nType=alarm\nMethod=on_alarm\nMaxPayloadSize=2K\n",
                     "a policy of every binding type", want, sizeof want / sizeof *want);
}

/* policy_changed: the keys and bindings whose values differ, those set
 * in only one of the files included; comments, blanks and order are no
 * change. */
static void test_changed(void)
{
        struct policy *a = expect_ok(HEAD "CallTimeout=5s\nEnvironment=A=1\nEnvironment=B=2\n[Binding N]\nType=kv\n"
                                     "[Binding T]\nType=text\nValue=x\n", "policy a");
        struct policy *same = expect_ok("# a comment\n" HEAD "Environment=A=1\nEnvironment=B=2\nCallTimeout=5s\n\n"
                                        "[Binding T]\nType=text\nValue=x\n[Binding N]\nType=kv\n", "policy a, moved");
        struct policy *b = expect_ok(HEAD "CallTimeout=6s\nEnvironment=A=1\nEnvironment=B=3\nMemoryMax=1M\n"
                                     "[Binding N]\nType=kv\n[Binding T]\nType=text\nValue=y\n", "policy b");
        struct policy *c = expect_ok(HEAD "CallTimeout=5s\nEnvironment=A=1\nEnvironment=B=2\n[Binding N]\nType=kv\n",
                                     "policy c");
        const char *out[8];
        size_t n;

        if (!a || !same || !b || !c)
                goto out;
        CHECK(policy_changed(a, same, out, 8) == 0, "comments, blank lines and order change nothing");
        n = policy_changed(a, b, out, 8);
        CHECK(n == 4 && strcmp(out[0], "CallTimeout") == 0 && strcmp(out[1], "Environment") == 0 &&
                      strcmp(out[2], "MemoryMax") == 0 && strcmp(out[3], "[Binding T]") == 0,
              "a value, a repeated key's, a new key, a binding's key changed (%zu: %s ...)", n, n ? out[0] : "");
        n = policy_changed(a, c, out, 8);
        CHECK(n == 1 && strcmp(out[0], "[Binding T]") == 0, "a binding removed (%zu)", n);
        n = policy_changed(c, a, out, 1);
        CHECK(n == 1 && strcmp(out[0], "[Binding T]") == 0, "a binding added, at most max");
out:
        policy_free(a);
        policy_free(same);
        policy_free(b);
        policy_free(c);
}

int main(void)
{
        bool fixtures = fixtures_copy();

        CHECK(fixtures, "fixtures copied from ../policies into %s", fixture_dir);
        test_size();
        test_duration();
        test_bool_count();
        test_names();
        test_split();
        test_full();
        test_defaults();
        test_ui();
        test_syntax();
        test_errors();
        test_quoting();
        test_many_errors();
        test_load();
        test_redact();
        test_misc();
        test_http_limits();
        test_budgets();
        test_gatekeeper();
        test_schedule();
        test_alarm();
        test_tail();
        test_format();
        test_format_bindings();
        test_changed();
        fixtures_remove();
        return tap_done();
}
