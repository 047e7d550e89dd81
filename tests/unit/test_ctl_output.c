/* Unit tests of gadgetctl's output: units, durations, tables, escaping, and
 * what `list`, `status`, `logs`, `reload` and errors print, as text and JSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "output.h"
#include "show.h"

static char buf[OUTPUT_UNIT_MAX];

/* What fn printed on a memory stream (malloc'd). */
#define CAPTURE(out, call)                                                       \
        do {                                                                     \
                size_t len_;                                                     \
                FILE *f = open_memstream(&(out), &len_);                         \
                call;                                                            \
                fclose(f);                                                       \
        } while (0)

static void test_uptime(void)
{
        CHECK_STR(output_uptime(0, buf, sizeof(buf)), "-", "uptime 0 is -");
        CHECK_STR(output_uptime(999, buf, sizeof(buf)), "0s", "uptime under a second");
        CHECK_STR(output_uptime(3000, buf, sizeof(buf)), "3s", "uptime 3s");
        CHECK_STR(output_uptime(59999, buf, sizeof(buf)), "59s", "uptime 59s");
        CHECK_STR(output_uptime(60000, buf, sizeof(buf)), "1m00s", "uptime 1m00s");
        CHECK_STR(output_uptime(312000, buf, sizeof(buf)), "5m12s", "uptime 5m12s");
        CHECK_STR(output_uptime(3599999, buf, sizeof(buf)), "59m59s", "uptime 59m59s");
        CHECK_STR(output_uptime(3600000, buf, sizeof(buf)), "1h00m", "uptime 1h00m");
        CHECK_STR(output_uptime((2 * 3600 + 3 * 60 + 59) * 1000ull, buf, sizeof(buf)), "2h03m",
                  "uptime 2h03m drops seconds");
        CHECK_STR(output_uptime((4 * 86400 + 3600 + 59) * 1000ull, buf, sizeof(buf)), "4d01h",
                  "uptime 4d01h");
        CHECK_STR(output_uptime(UINT64_MAX, buf, sizeof(buf)), "213503982334d14h",
                  "uptime of UINT64_MAX ms fits");
}

static void test_size(void)
{
        CHECK_STR(output_size(0, buf, sizeof(buf)), "-", "size 0 is -");
        CHECK_STR(output_size(1, buf, sizeof(buf)), "1B", "size 1B");
        CHECK_STR(output_size(1023, buf, sizeof(buf)), "1023B", "size 1023B");
        CHECK_STR(output_size(1024, buf, sizeof(buf)), "1.0K", "size 1.0K");
        CHECK_STR(output_size(1536, buf, sizeof(buf)), "1.5K", "size 1.5K");
        CHECK_STR(output_size(12897485, buf, sizeof(buf)), "12.3M", "size 12.3M");
        CHECK_STR(output_size(1048575, buf, sizeof(buf)), "1.0M", "1023.99K rounds up to 1.0M");
        CHECK_STR(output_size(64ull << 20, buf, sizeof(buf)), "64.0M", "size 64.0M");
        CHECK_STR(output_size(3ull << 40, buf, sizeof(buf)), "3.0T", "size 3.0T");
        CHECK_STR(output_size(UINT64_MAX, buf, sizeof(buf)), "16.0E", "size of UINT64_MAX");
}

static void test_cpu(void)
{
        CHECK_STR(output_cpu(0, buf, sizeof(buf)), "-", "cpu 0 is -");
        CHECK_STR(output_cpu(9999, buf, sizeof(buf)), "0.00s", "cpu under a hundredth");
        CHECK_STR(output_cpu(50000, buf, sizeof(buf)), "0.05s", "cpu 0.05s");
        CHECK_STR(output_cpu(1234567, buf, sizeof(buf)), "1.23s", "cpu 1.23s");
        CHECK_STR(output_cpu(59999999, buf, sizeof(buf)), "59.99s", "cpu 59.99s");
        CHECK_STR(output_cpu(60000000, buf, sizeof(buf)), "1m00s", "cpu a minute as uptime");
        CHECK_STR(output_cpu(UINT64_MAX, buf, sizeof(buf)), "213503982d08h", "cpu of UINT64_MAX us fits");
}

static void test_ago(void)
{
        CHECK_STR(output_ago(0, buf, sizeof(buf)), "now", "seen 0 ms ago is now");
        CHECK_STR(output_ago(999, buf, sizeof(buf)), "now", "seen under a second ago is now");
        CHECK_STR(output_ago(3000, buf, sizeof(buf)), "3 s ago", "3 s ago");
        CHECK_STR(output_ago(59999, buf, sizeof(buf)), "59 s ago", "59 s ago");
        CHECK_STR(output_ago(150000, buf, sizeof(buf)), "2 min ago", "2.5 minutes: 2 min ago");
        CHECK_STR(output_ago(7200000, buf, sizeof(buf)), "2 h ago", "2 h ago");
        CHECK_STR(output_ago(4 * 86400000ull, buf, sizeof(buf)), "4 d ago", "4 d ago");
        CHECK_STR(output_ago(UINT64_MAX, buf, sizeof(buf)), "213503982334 d ago", "UINT64_MAX ms fits");
}

static void check_escape(const char *in, unsigned flags, const char *want, const char *what)
{
        char *got = output_escape(in, flags);
        CHECK_STR(got, want, "escape: %s", what);
        free(got);
}

static void test_escape(void)
{
        check_escape("plain text", 0, "plain text", "printable ASCII unchanged");
        check_escape("a\x1b[31mb", 0, "a\\x1b[31mb", "ESC escaped");
        check_escape("a\tb\nc\r", 0, "a\\x09b\\x0ac\\x0d", "tab, newline, CR escaped");
        check_escape("a\tb\nc", OUTPUT_KEEP_TAB | OUTPUT_KEEP_NEWLINE, "a\tb\nc", "tab and newline kept");
        check_escape("\x7f", 0, "\\x7f", "DEL escaped");
        check_escape("caf\xc3\xa9 \xe2\x9c\x93", 0, "caf\xc3\xa9 \xe2\x9c\x93", "UTF-8 kept");
        check_escape("\xc2\x9b" "2J", 0, "\\xc2\\x9b2J", "C1 CSI escaped");
        check_escape("x\xe2\x80\xaey", 0, "x\\xe2\\x80\\xaey", "bidi override escaped");
        check_escape("\xff\xe2\x80", 0, "\\xff\\xe2\\x80", "invalid and truncated UTF-8 escaped");
        check_escape("\xed\xa0\x80", 0, "\\xed\\xa0\\x80", "surrogate escaped");
        CHECK(output_width("h\xc3\xa9llo") == 5, "width counts code points");
}

static void test_table(void)
{
        static const char *const h[] = { "NAME", "N", "LAST" };
        static const bool right[] = { false, true, false };
        static const char *const r1[] = { "a", "12345", "x" };
        static const char *const r2[] = { "caf\xc3\xa9-long", "7", "\x1b" };
        struct output_table *t = output_table_new(3, h, right);
        char *out = NULL;

        CHECK(t && output_table_add(t, r1) == 0 && output_table_add(t, r2) == 0, "table built");
        CHECK(output_table_rows(t) == 2, "two rows besides the header");
        CAPTURE(out, output_table_print(t, f));
        CHECK_STR(out,
                  "NAME           N  LAST\n"
                  "a          12345  x\n"
                  "caf\xc3\xa9-long      7  \\x1b\n",
                  "columns aligned by code points, numbers right, cells escaped");
        free(out);
        output_table_free(t);
}

static Control__GadgetInfo info(const char *name, const char *state, const char *cause, int pid,
                                uint64_t up, uint32_t restarts, uint64_t calls, uint64_t mem,
                                uint64_t tasks, uint64_t cpu_usec)
{
        Control__GadgetInfo g = CONTROL__GADGET_INFO__INIT;
        g.name = (char *)name;
        g.state = (char *)state;
        g.cause = (char *)cause;
        g.pid = pid;
        g.uptime_ms = up;
        g.restarts = restarts;
        g.calls = calls;
        g.memory_bytes = mem;
        g.tasks = tasks;
        g.cpu_usec = cpu_usec;
        return g;
}

static void test_list(void)
{
        Control__GadgetInfo a = info("hello", "ready", "", 4242, 312000, 0, 17, 12897485, 3, 1234567);
        Control__GadgetInfo b = info("wordcount", "failed", "exited with status 1", 0, 0, 5, 0, 0, 0, 0);
        Control__GadgetInfo *gs[] = { &a, &b };
        Control__GadgetList l = CONTROL__GADGET_LIST__INIT;
        char *out = NULL;

        l.gadgets = gs;
        l.n_gadgets = 2;
        CAPTURE(out, CHECK(show_list(f, &l, false) == 0, "list printed"));
        CHECK_STR(out,
                  "NAME       STATE    PID  UPTIME  RESTARTS  CALLS  MEMORY  TASKS    CPU\n"
                  "hello      ready   4242   5m12s         0     17   12.3M      3  1.23s\n"
                  "wordcount  failed     -       -         5      0       -      -      -\n",
                  "list table");
        free(out);
        CAPTURE(out, show_list(f, &l, true));
        CHECK_STR(out,
                  "[{\"name\":\"hello\",\"state\":\"ready\",\"cause\":\"\",\"pid\":4242,"
                  "\"uptime_ms\":312000,\"restarts\":0,\"calls\":17,\"memory_bytes\":12897485,"
                  "\"tasks\":3,\"cpu_usec\":1234567,\"start_us\":0,\"start\":\"always\",\"active_ago_ms\":0,\"in_flight\":0,\"kept_errors\":0,\"denials\":0},"
                  "{\"name\":\"wordcount\",\"state\":\"failed\",\"cause\":\"exited with status 1\","
                  "\"pid\":0,\"uptime_ms\":0,\"restarts\":5,\"calls\":0,\"memory_bytes\":0,"
                  "\"tasks\":0,\"cpu_usec\":0,\"start_us\":0,\"start\":\"always\",\"active_ago_ms\":0,\"in_flight\":0,\"kept_errors\":0,\"denials\":0}]\n",
                  "list JSON: an array of GadgetInfo objects");
        free(out);
        /* A gadget kept on its previous policy: a POLICY column, and a note. */
        gs[1]->kept_errors = 2;
        CAPTURE(out, show_list(f, &l, false));
        CHECK(out && strstr(out, "  CPU  POLICY\n") && strstr(out, "1.23s  -\n") && strstr(out, "-  kept: 2 errors\n") &&
                      strstr(out, "kept: a reload left the gadget on its previous policy"),
              "list: POLICY column while one is kept: %s", out);
        free(out);
        CAPTURE(out, show_list(f, &l, true));
        CHECK(out && strstr(out, "\"kept_errors\":2,\"denials\":0}]"), "list JSON: kept_errors: %s", out);
        free(out);
        gs[1]->kept_errors = 0;
        l.n_gadgets = 0;
        CAPTURE(out, show_list(f, &l, true));
        CHECK_STR(out, "[]\n", "empty list JSON");
        free(out);
        CAPTURE(out, show_list(f, &l, false));
        CHECK_STR(out, "no gadgets loaded\n", "empty list text");
        free(out);
}

/* A shared store: a NODE column after STATE ("-" while no node runs it),
 * node and epoch in JSON where a node runs it. */
static void test_list_nodes(void)
{
        Control__GadgetInfo a = info("counter", "ready", "", 4242, 312000, 0, 17, 12897485, 3, 1234567);
        Control__GadgetInfo b = info("notes", "remote", "runs on node node-b (epoch 3)", 0, 0, 0, 0, 0, 0, 0);
        Control__GadgetInfo c = info("fresh", "remote", "waits for its lease in the store", 0, 0, 0, 0, 0, 0, 0);
        Control__GadgetInfo *gs[] = { &a, &b, &c };
        Control__GadgetList l = CONTROL__GADGET_LIST__INIT;
        char *out = NULL;

        a.node = "a", a.epoch = 1;
        b.node = "node-b", b.epoch = 3;
        l.gadgets = gs;
        l.n_gadgets = 3;
        CAPTURE(out, CHECK(show_list(f, &l, false) == 0, "clustered list printed"));
        CHECK_STR(out,
                  "NAME     STATE   NODE     PID  UPTIME  RESTARTS  CALLS  MEMORY  TASKS    CPU\n"
                  "counter  ready   a       4242   5m12s         0     17   12.3M      3  1.23s\n"
                  "notes    remote  node-b     -       -         0      0       -      -      -\n"
                  "fresh    remote  -          -       -         0      0       -      -      -\n",
                  "list: NODE column with the owner, - for none yet");
        free(out);
        CAPTURE(out, show_list(f, &l, true));
        CHECK(out && strstr(out, "\"active_ago_ms\":0,\"in_flight\":0,\"kept_errors\":0,\"denials\":0,\"node\":\"a\",\"epoch\":1}") &&
                      strstr(out, "\"active_ago_ms\":0,\"in_flight\":0,\"kept_errors\":0,\"denials\":0,\"node\":\"node-b\",\"epoch\":3}") &&
                      strstr(out, "\"cause\":\"waits for its lease in the store\",\"pid\":0,\"uptime_ms\":0,"
                                  "\"restarts\":0,\"calls\":0,\"memory_bytes\":0,\"tasks\":0,\"cpu_usec\":0,"
                                  "\"start_us\":0,\"start\":\"always\",\"active_ago_ms\":0,\"in_flight\":0,\"kept_errors\":0,\"denials\":0}]"),
              "list JSON: node and epoch where a node runs it, neither where none does");
        free(out);
        /* Only the one waiting for its lease: still clustered. */
        l.gadgets = gs + 2;
        l.n_gadgets = 1;
        CAPTURE(out, show_list(f, &l, false));
        CHECK(out && strncmp(out, "NAME   STATE   NODE  PID", 24) == 0, "a remote gadget alone: NODE column");
        free(out);
}

/* `nodes`: the table, down after CONTROL_NODE_DOWN_MS, the node answering
 * marked; JSON with up. */
static void test_nodes(void)
{
        Control__NodeInfo a = CONTROL__NODE_INFO__INIT, b = CONTROL__NODE_INFO__INIT, c = CONTROL__NODE_INFO__INIT;
        Control__NodeInfo *ns[] = { &a, &b, &c };
        Control__NodeList l = CONTROL__NODE_LIST__INIT;
        char *out = NULL;

        a.name = "a", a.self = true;
        b.name = "b", b.peer = "10.0.0.2:7001", b.last_seen_ms = 10000, b.leases = 1700;
        a.leases = 12;
        c.name = "c", c.last_seen_ms = 42500;
        l.nodes = ns;
        l.n_nodes = 3;
        CAPTURE(out, CHECK(show_nodes(f, &l, false) == 0, "nodes printed"));
        CHECK_STR(out,
                  "NAME  PEER           LEASES  LAST SEEN\n"
                  "a     -              12      now (this node)\n"
                  "b     10.0.0.2:7001  1700    10 s ago\n"
                  "c     -              0       down, last seen 42 s ago\n",
                  "nodes table: 10 s is up, 42 s down, this node marked");
        free(out);
        b.last_seen_ms = 10001;
        CAPTURE(out, show_nodes(f, &l, true));
        CHECK_STR(out,
                  "{\"nodes\":[{\"name\":\"a\",\"peer\":\"\",\"last_seen_ms\":0,\"self\":true,\"up\":true,\"leases\":12},"
                  "{\"name\":\"b\",\"peer\":\"10.0.0.2:7001\",\"last_seen_ms\":10001,\"self\":false,\"up\":false,"
                  "\"leases\":1700},"
                  "{\"name\":\"c\",\"peer\":\"\",\"last_seen_ms\":42500,\"self\":false,\"up\":false,\"leases\":0}]}\n",
                  "nodes JSON: past 10 s is down");
        free(out);
        l.n_nodes = 0;
        CAPTURE(out, show_nodes(f, &l, false));
        CHECK_STR(out, "no nodes seen in the store yet\n", "no nodes yet");
        free(out);
        CAPTURE(out, show_nodes(f, &l, true));
        CHECK_STR(out, "{\"nodes\":[]}\n", "no nodes yet, JSON");
        free(out);
        l.n_nodes = 1;
        l.store_warning = "the store commits without a synchronous standby";
        CAPTURE(out, show_nodes(f, &l, false));
        CHECK_STR(out,
                  "NAME  PEER  LEASES  LAST SEEN\n"
                  "a     -     12      now (this node)\n"
                  "warning: the store commits without a synchronous standby\n",
                  "nodes table: the store's warning after it");
        free(out);
        CAPTURE(out, show_nodes(f, &l, true));
        CHECK_STR(out,
                  "{\"nodes\":[{\"name\":\"a\",\"peer\":\"\",\"last_seen_ms\":0,\"self\":true,\"up\":true,"
                  "\"leases\":12}],\"store_warning\":\"the store commits without a synchronous standby\"}\n",
                  "nodes JSON: store_warning when there is one");
        free(out);
}

/* `status` of a gadget on a shared store: the Node line after State. */
static void test_status_node(void)
{
        Control__GadgetInfo g = info("counter", "remote", "runs on node b (epoch 3)", 0, 0, 0, 0, 0, 0, 0);
        Control__GadgetStatus s = CONTROL__GADGET_STATUS__INIT;
        char *out = NULL;

        g.node = "b", g.epoch = 3;
        s.info = &g;
        CAPTURE(out, show_status(f, &s, false));
        CHECK(out && strstr(out, "      State: remote (runs on node b (epoch 3))\n"
                                 "       Node: b (lease epoch 3)\n     Policy: "),
              "status: Node line with the lease epoch");
        free(out);
        CAPTURE(out, show_status(f, &s, true));
        CHECK(out && strstr(out, "\"node\":\"b\",\"epoch\":3,"), "status JSON: node and epoch");
        free(out);
        g.node = "", g.epoch = 0;
        g.cause = "waits for its lease in the store";
        CAPTURE(out, show_status(f, &s, false));
        CHECK(out && strstr(out, "\n       Node: none yet\n"), "status: Node none yet");
        free(out);
        CAPTURE(out, show_status(f, &s, true));
        CHECK(out && !strstr(out, "\"node\"") && !strstr(out, "\"epoch\""), "status JSON, no node");
        free(out);
}

/* A crash: its cause and backtrace under the rest, escaped as any text. */
static void test_status_crash(void)
{
        Control__GadgetInfo g = info("notes", "failed", "killed by SIGSEGV (SEGV_MAPERR at 0x0) in f", 0, 0, 0, 0,
                                     0, 0, 0);
        char *frames[] = { "f+0x8 (notes) notes.c:12", "main+0x10 (notes) \x1b[2J" };
        Control__GadgetStatus s = CONTROL__GADGET_STATUS__INIT;
        char *out = NULL;
        s.info = &g;
        s.policy_path = "/p";
        s.limits_mode = "";
        s.crash_cause = "killed by SIGSEGV (SEGV_MAPERR at 0x0) in f";
        s.crash_backtrace = frames, s.n_crash_backtrace = 2;
        CAPTURE(out, show_status(f, &s, false));
        CHECK(out && strstr(out, " Last crash: killed by SIGSEGV (SEGV_MAPERR at 0x0) in f\n"
                                 "  Backtrace: f+0x8 (notes) notes.c:12\n"
                                 "             main+0x10 (notes) \\x1b[2J\n\n"
                                 "Last log lines:\n"),
              "status: last crash and backtrace: %s", out ? out : "");
        free(out);
        CAPTURE(out, show_status(f, &s, true));
        CHECK(out && strstr(out, "\"crash_cause\":\"killed by SIGSEGV (SEGV_MAPERR at 0x0) in f\","
                                 "\"crash_backtrace\":[\"f+0x8 (notes) notes.c:12\","),
              "status JSON: crash_cause, crash_backtrace");
        free(out);
}

static void test_status(void)
{
        Control__GadgetInfo g = info("notes", "ready", "killed by signal SIGSEGV", 99, 7380000, 1, 3,
                                     2048, 16, 61500000);
        Control__Binding b1 = CONTROL__BINDING__INIT, b2 = CONTROL__BINDING__INIT, b3 = CONTROL__BINDING__INIT;
        Control__Binding *bs[] = { &b1, &b2, &b3 };
        char *limits[] = { "MemoryMax=64M", "TasksMax=16" };
        char *methods[] = { "get", "put" };
        char *sigs[] = { "get(title: string) -> string", "" };
        char *ops[] = { "get(key: string | bytes) -> any", "put(key: string | bytes, value: any) -> null" };
        char *tail[] = { "started", "bad \x1b]0;owned\x07 title\tend" };
        Control__GadgetStatus s = CONTROL__GADGET_STATUS__INIT;
        char *out = NULL;

        b1.name = "NOTES", b1.type = "kv", b1.ops = ops, b1.n_ops = 2;
        b2.name = "PEER", b2.type = "gadget";
        b3.name = "API", b3.type = "http", b3.credential = "/etc/gadgetd/credentials/api.token";
        s.info = &g;
        s.policy_path = "/etc/gadgetd/policy.d/notes.policy";
        s.limits_mode = "cgroup v1";
        s.limits = limits, s.n_limits = 2;
        s.methods = methods, s.n_methods = 2;
        s.signatures = sigs, s.n_signatures = 2;
        s.bindings = bs, s.n_bindings = 3;
        s.log_tail = tail, s.n_log_tail = 2;
        g.start = "on-demand", g.active_ago_ms = 12500, g.in_flight = 2, g.program_pid = 100;
        CAPTURE(out, CHECK(show_status(f, &s, false) == 0, "status printed"));
        CHECK_STR(out,
                  "notes\n"
                  "      State: ready (last stop: killed by signal SIGSEGV)\n"
                  "     Policy: /etc/gadgetd/policy.d/notes.policy\n"
                  "      Start: on-demand\n"
                  "Last active: 12 s ago\n"
                  "        PID: 99\n"
                  "Program PID: 100\n"
                  "     Uptime: 2h03m\n"
                  "   Restarts: 1\n"
                  "      Calls: 3, 2 in flight\n"
                  "     Memory: 2.0K\n"
                  "      Tasks: 16\n"
                  "        CPU: 1m01s\n"
                  "Limits mode: cgroup v1\n"
                  "     Limits: MemoryMax=64M, TasksMax=16\n"
                  "   Bindings: NOTES (kv)\n"
                  "               get(key: string | bytes) -> any\n"
                  "               put(key: string | bytes, value: any) -> null\n"
                  "             PEER (gadget)\n"
                  "             API (http, credential /etc/gadgetd/credentials/api.token)\n"
                  "    Methods: get(title: string) -> string\n"
                  "             put (untyped)\n"
                  "\n"
                  "Last log lines:\n"
                  "started\n"
                  "bad \\x1b]0;owned\\x07 title\tend\n",
                  "status block, log lines escaped");
        free(out);
        CAPTURE(out, show_status(f, &s, true));
        CHECK_STR(out,
                  "{\"name\":\"notes\",\"state\":\"ready\",\"cause\":\"killed by signal SIGSEGV\","
                  "\"pid\":99,\"uptime_ms\":7380000,\"restarts\":1,\"calls\":3,\"memory_bytes\":2048,"
                  "\"tasks\":16,\"cpu_usec\":61500000,\"start_us\":0,\"start\":\"on-demand\",\"active_ago_ms\":12500,\"in_flight\":2,\"kept_errors\":0,\"denials\":0,\"program_pid\":100,"
                  "\"policy_path\":\"/etc/gadgetd/policy.d/notes.policy\",\"limits_mode\":\"cgroup v1\","
                  "\"limits\":[\"MemoryMax=64M\",\"TasksMax=16\"],"
                  "\"bindings\":[{\"name\":\"NOTES\",\"type\":\"kv\",\"ops\":[\"get(key: string | bytes) -> any\","
                  "\"put(key: string | bytes, value: any) -> null\"]},{\"name\":\"PEER\",\"type\":\"gadget\",\"ops\":[]},"
                  "{\"name\":\"API\",\"type\":\"http\",\"ops\":[],\"credential\":\"/etc/gadgetd/credentials/api.token\"}],"
                  "\"methods\":[\"get\",\"put\"],\"signatures\":[\"get(title: string) -> string\",\"\"],"
                  "\"log_tail\":[\"started\",\"bad \\u001B]0;owned\\u0007 title\\tend\"],"
                  "\"audit_unwritten\":0,\"audit_error\":\"\",\"audit_unsent\":0,\"audit_unsent_error\":\"\",\"audit_caught_up\":0,\"audit_log_skipped\":0,\"kept_error_lines\":[],\"denial_kinds\":0,"
                  "\"crash_cause\":\"\",\"crash_backtrace\":[],\"version\":\"\",\"previous_version\":\"\","
                  "\"rollout_version\":\"\",\"rollout_percent\":0,\"rollout_back\":\"\",\"release_generation\":0,\"release_node\":\"\",\"release_refused\":\"\",\"previous_state_ms\":0,\"previous_state_bytes\":0}\n",
                  "status JSON: GadgetInfo fields and the rest");
        free(out);

        g = info("notes", "failed", "exited with status 3", 0, 0, 5, 0, 0, 0, 0);
        s.n_limits = s.n_methods = s.n_signatures = s.n_bindings = s.n_log_tail = 0;
        s.limits_mode = "";
        s.audit_unwritten = 3;
        s.audit_error = "No space left on device";
        s.audit_unsent = 7;
        s.audit_unsent_error = "the queue to the store is full";
        s.audit_log_skipped = 2;
        CAPTURE(out, show_status(f, &s, false));
        CHECK(out && strstr(out, "      State: failed (exited with status 3)\n") &&
                      strstr(out, "        PID: -\n") && strstr(out, "Limits mode: -\n") &&
                      strstr(out, "      Tasks: -\n") && strstr(out, "        CPU: -\n") &&
                      strstr(out, "   Bindings: -\n") && strstr(out, "Last log lines:\n(none)\n") &&
                      strstr(out, "  Audit log: 3 records not written since gadgetd started "
                                  "(No space left on device)\n") &&
                      strstr(out, "Audit store: 7 records not copied to the store since gadgetd started "
                                  "(the queue to the store is full)\n") &&
                      strstr(out, "Audit store: 2 lines of audit.log skipped by its catch-up, never sent "),
              "stopped gadget: cause, - for what is missing, audit records not written, not copied or skipped");
        free(out);
}

static void test_logs_done_reload(void)
{
        char *lines[] = { "one", "two\x1b[2J" };
        Control__LogLines l = CONTROL__LOG_LINES__INIT;
        Control__Done d = CONTROL__DONE__INIT;
        char *loaded[] = { "a", "b" }, *errors[] = { "/x/bad.policy:3: unknown key \"Foo\"" };
        Control__ReloadReport r = CONTROL__RELOAD_REPORT__INIT;
        char *out = NULL, *err = NULL;

        l.lines = lines, l.n_lines = 2;
        CAPTURE(out, show_logs(f, &l, false));
        CHECK_STR(out, "one\ntwo\\x1b[2J\n", "log lines, escaped");
        free(out);
        CAPTURE(out, show_logs(f, &l, true));
        CHECK_STR(out, "{\"line\":\"one\"}\n{\"line\":\"two\\u001B[2J\"}\n", "log lines as JSON lines");
        free(out);
        char *recs[] = { "{\"gadget\":\"a\",\"op\":\"put\"}", "not json" };
        Control__LogLines al = CONTROL__LOG_LINES__INIT;
        al.lines = recs, al.n_lines = 2;
        CAPTURE(out, show_audit(f, &al, true));
        CHECK_STR(out, "{\"gadget\":\"a\",\"op\":\"put\"}\n{\"line\":\"not json\"}\n",
                  "audit records as their own objects, not strings");
        free(out);

        d.message = "stopped \"hello\"";
        CAPTURE(out, show_done(f, &d, false));
        CHECK_STR(out, "stopped \"hello\"\n", "done message");
        free(out);
        CAPTURE(out, show_done(f, &d, true));
        CHECK_STR(out, "{\"ok\":true,\"message\":\"stopped \\\"hello\\\"\"}\n", "done JSON");
        free(out);
        d.message = "";
        CAPTURE(out, show_done(f, &d, false));
        CHECK_STR(out, "", "empty done message prints nothing");
        free(out);

        r.loaded = loaded, r.n_loaded = 2;
        r.errors = errors, r.n_errors = 1;
        {
                size_t elen;
                FILE *ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &r, false));
                fclose(ef);
        }
        CHECK_STR(out, "loaded: a, b\n", "reload report");
        CHECK_STR(err, "/x/bad.policy:3: unknown key \"Foo\"\n", "reload errors on stderr");
        free(out);
        free(err);
        CAPTURE(out, show_reload(f, NULL, &r, true));
        CHECK_STR(out,
                  "{\"loaded\":[\"a\",\"b\"],\"stopped\":[],\"restarted\":[],\"unchanged\":[],"
                  "\"errors\":[\"/x/bad.policy:3: unknown key \\\"Foo\\\"\"],\"kept\":[],\"changed\":[],"
                  "\"failed\":[]}\n",
                  "reload JSON");
        free(out);
        /* A gadget kept on its previous policy: named on stdout, its
         * file's errors under it on stderr, in JSON with name and path. */
        {
                Control__ReloadReport k = CONTROL__RELOAD_REPORT__INIT;
                Control__ReloadKept kg = CONTROL__RELOAD_KEPT__INIT;
                Control__ReloadKept *kgp = &kg;
                char *kerr[] = { "/x/a.policy:2: bad", "/x/a.policy:5: worse" };
                char *unchanged[] = { "b" };
                kg.name = "a", kg.path = "/x/a.policy", kg.errors = kerr, kg.n_errors = 2;
                k.kept = &kgp, k.n_kept = 1;
                k.unchanged = unchanged, k.n_unchanged = 1;
                size_t elen;
                FILE *ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &k, false));
                fclose(ef);
                CHECK_STR(out, "unchanged: b\nkept on its previous policy: a\n", "reload: the kept gadget named");
                free(out);
                free(err);
                /* A restarted gadget with the keys that changed. */
                Control__ReloadChanged ch = CONTROL__RELOAD_CHANGED__INIT;
                Control__ReloadChanged *chp = &ch;
                char *keys[] = { "CallTimeout", "[Binding N]" };
                char *restarted[] = { "c", "d" };
                ch.name = "c", ch.keys = keys, ch.n_keys = 2;
                k.changed = &chp, k.n_changed = 1;
                k.restarted = restarted, k.n_restarted = 2;
                ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &k, false));
                fclose(ef);
                CHECK(out && strstr(out, "restarted: c (CallTimeout, [Binding N]), d\n"), "reload: changed keys: %s", out);
                free(out);
                CAPTURE(out, show_reload(f, NULL, &k, true));
                CHECK(out && strstr(out, "\"changed\":[{\"name\":\"c\",\"keys\":[\"CallTimeout\",\"[Binding N]\"]}]"),
                      "reload JSON: changed: %s", out);
                free(out);
                free(err);
                k.changed = NULL, k.n_changed = 0, k.restarted = NULL, k.n_restarted = 0;
                ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &k, false));
                fclose(ef);
                CHECK_STR(err, "kept a on its previous policy: /x/a.policy has 2 errors:\n"
                          "  /x/a.policy:2: bad\n  /x/a.policy:5: worse\n", "reload: its errors under it");
                free(out);
                free(err);
                CAPTURE(out, show_reload(f, NULL, &k, true));
                CHECK(out && strstr(out, "\"kept\":[{\"name\":\"a\",\"path\":\"/x/a.policy\",\"errors\":"
                                         "[\"/x/a.policy:2: bad\",\"/x/a.policy:5: worse\"]}]"),
                      "reload JSON: kept with name, path, errors: %s", out);
                free(out);
                /* A restart whose new process did not start: named on
                 * stdout, why on stderr (escaped), in JSON with its cause. */
                Control__ReloadFailed fl = CONTROL__RELOAD_FAILED__INIT;
                Control__ReloadFailed *flp = &fl;
                fl.name = "e", fl.cause = "did not start (killed by signal SIGABRT)\x1b";
                k.failed = &flp, k.n_failed = 1, k.kept = NULL, k.n_kept = 0;
                ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &k, false));
                fclose(ef);
                CHECK_STR(out, "unchanged: b\nnot restarted: e\n", "reload: the failed restart named");
                CHECK_STR(err, "e: its changed policy's new process did not start (killed by signal SIGABRT)\\x1b; it "
                          "serves on with its previous process and policy\n", "reload: why, escaped, on stderr");
                free(out);
                free(err);
                CAPTURE(out, show_reload(f, NULL, &k, true));
                CHECK(out && strstr(out, "\"failed\":[{\"name\":\"e\",\"cause\":\"did not start (killed by signal "
                                         "SIGABRT)\\u001B\"}]"), "reload JSON: failed with its cause: %s", out);
                free(out);
        }
        char *two[] = { "/x/bad.policy:3: unknown key \"Foo\"\n/x/bad.policy:4: bad value \x1b" };
        r.errors = two;
        {
                size_t elen;
                FILE *ef = open_memstream(&err, &elen);
                CAPTURE(out, show_reload(f, ef, &r, false));
                fclose(ef);
        }
        CHECK_STR(err, "/x/bad.policy:3: unknown key \"Foo\"\n/x/bad.policy:4: bad value \\x1b\n",
                  "a file's errors one a line, not joined by \\x0a; control bytes still escaped");
        free(out);
        free(err);
}

static void test_error(void)
{
        char *out = NULL;

        CAPTURE(out, show_error(f, false, 10, "no gadget named \"%s\"", "x"));
        CHECK_STR(out, "gadgetctl: no gadget named \"x\"\n", "error text");
        free(out);
        CAPTURE(out, show_error(f, true, 10, "no gadget named \"%s\"", "x"));
        CHECK_STR(out, "{\"error\":{\"code\":10,\"message\":\"no gadget named \\\"x\\\"\"}}\n",
                  "error JSON");
        free(out);
        CAPTURE(out, show_error(f, false, 3, "%s", "evil\x1b[8m"));
        CHECK_STR(out, "gadgetctl: evil\\x1b[8m\n", "error text escaped");
        free(out);
        CAPTURE(out, show_error(f, false, 3, "%s", "no\ngadgetctl: approved"));
        CHECK_STR(out, "gadgetctl: no\n  gadgetctl: approved\n", "a line of the message cannot pass for gadgetctl's own");
        free(out);
        CAPTURE(out, show_error(f, true, 0, "%s: bad", "file\xff"));
        CHECK_STR(out, "{\"error\":{\"code\":0,\"message\":\"file\\\\xff: bad\"}}\n",
                  "error JSON with invalid UTF-8 is escaped, not lost");
        free(out);
}

/* --since's times, and a log line's time as text and ISO 8601 (TZ=UTC). */
static void test_log_times(void)
{
        const int64_t now = 1796534001681; /* 2026-12-06T05:13:21.681Z */
        int64_t t = -1;
        char when[OUTPUT_LOG_TIME_MAX];

        CHECK(output_parse_since("5min", now, &t) == 0 && t == now - 300000, "5min ago: %lld", (long long)t);
        CHECK(output_parse_since("-30s", now, &t) == 0 && t == now - 30000, "-30s");
        CHECK(output_parse_since("2h ago", now, &t) == 0 && t == now - 7200000, "2h ago");
        CHECK(output_parse_since("2026-12-06T05:13:21Z", now, &t) == 0 && t == 1796534001000, "ISO UTC");
        CHECK(output_parse_since("2026-12-06T05:13:21.5Z", now, &t) < 0, "milliseconds are three digits");
        CHECK(output_parse_since("2026-12-06T05:13:21.681Z", now, &t) == 0 && t == now, "ISO with ms");
        CHECK(output_parse_since("2026-12-06 05:13:21", now, &t) == 0 && t == 1796534001000, "local (TZ=UTC)");
        CHECK(output_parse_since("2026-12-06 05:13", now, &t) == 0 && t == 1796533980000, "without seconds");
        CHECK(output_parse_since("2026-12-06", now, &t) == 0 && t == 1796515200000, "a date: its midnight");
        const char *bad[] = { "", "soon", "5 min", "2026-13-01", "2026-12-06 25:00", "2026-12-06X", "5min agoo",
                              "-", "2026-12-06 05:13:21Z", "1969-12-31" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                CHECK(output_parse_since(bad[i], now, &t) < 0, "refused: \"%s\"", bad[i]);
        CHECK_STR(output_log_time(now, when, sizeof when), "Dec 06 05:13:21.681", "short-precise time");
        CHECK_STR(output_log_time(0, when, sizeof when), "-", "an unknown time");
        CHECK_STR(output_log_time_iso(now, when, sizeof when), "2026-12-06T05:13:21.681Z", "ISO time");
}

/* Log entries as short-precise text, their text alone, and JSON. */
static void test_log_entries(void)
{
        Control__LogEntry a = CONTROL__LOG_ENTRY__INIT, b = CONTROL__LOG_ENTRY__INIT;
        Control__LogEntry *v[] = { &a, &b };
        Control__LogLines l = CONTROL__LOG_LINES__INIT;
        char *out = NULL;

        a.text = "hello\x1b[2J", a.gadget = "notes", a.stream = "stderr", a.priority = 3, a.run = 2;
        a.time_ms = 1796534001681;
        b.text = "old", b.gadget = "notes", b.stream = "stdout", b.priority = 6;
        l.entries = v, l.n_entries = 2;
        CAPTURE(out, show_logs(f, &l, false));
        CHECK_STR(out, "Dec 06 05:13:21.681 notes[2] stderr.err: hello\\x1b[2J\n- notes[-] stdout.info: old\n",
                  "entries as short-precise, escaped; unknown time and run");
        free(out);
        CAPTURE(out, show_log_entries(f, &l, SHOW_LOGS_CAT));
        CHECK_STR(out, "hello\\x1b[2J\nold\n", "entries' text alone");
        free(out);
        l.n_entries = 1;
        CAPTURE(out, show_logs(f, &l, true));
        CHECK_STR(out, "{\"time\":\"2026-12-06T05:13:21.681Z\",\"time_ms\":1796534001681,\"gadget\":\"notes\","
                  "\"run\":2,\"stream\":\"stderr\",\"priority\":3,\"line\":\"hello\\u001B[2J\"}\n",
                  "an entry as JSON");
        free(out);
}

int main(void)
{
        setenv("TZ", "UTC", 1);
        tzset();
        test_uptime();
        test_size();
        test_cpu();
        test_ago();
        test_escape();
        test_table();
        test_list();
        test_status();
        test_status_crash();
        test_list_nodes();
        test_nodes();
        test_status_node();
        test_logs_done_reload();
        test_log_times();
        test_log_entries();
        test_error();
        return tap_done();
}
