/* Unit tests of proto/validate.c: each rule of a worker message, a control
 * request and a control response is checked on its own, with a message
 * that breaks it alone (and the same message within the rule passing), so
 * that removing any one rule turns a check red. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "contract.h"
#include "tap.h"
#include "validate.h"
#include "value.h"
#include "control.pb-c.h"

static char why[256];

static int worker(const Gadget__WorkerMsg *m)
{
        why[0] = '\0';
        return validate_worker_msg(m, "g", why, sizeof why);
}

static int request(const Control__Request *q)
{
        why[0] = '\0';
        return validate_control_request(q, why, sizeof why);
}

static void test_hello(void)
{
        char *methods[] = { "a", "b" }, *dup[] = { "a", "a" }, *sigs[] = { "", "" };
        Gadget__Hello h = GADGET__HELLO__INIT;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_HELLO;
        m.hello = &h;
        h.name = "g";
        h.protocol_version = GADGET_PROTOCOL_VERSION;
        h.methods = methods;
        h.n_methods = 2;
        h.signatures = sigs;
        h.n_signatures = h.protocol_version >= 2 ? 2 : 0;
        CHECK(worker(&m) == 0, "a hello within the rules: %s", why);
        h.name = "other";
        CHECK(worker(&m) < 0 && strstr(why, "another name"), "a hello under another name: %s", why);
        h.name = "g";
        h.methods = dup;
        CHECK(worker(&m) < 0 && strstr(why, "repeats"), "a repeated method: %s", why);
        h.methods = methods;
        h.protocol_version = GADGET_PROTOCOL_VERSION + 1;
        CHECK(worker(&m) < 0 && strstr(why, "protocol version"), "another protocol version: %s", why);
}

static void test_log_and_result(void)
{
        Gadget__Log l = GADGET__LOG__INIT;
        Gadget__WorkerMsg m = GADGET__WORKER_MSG__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_LOG;
        m.log = &l;
        l.text = "fine";
        l.level = 7;
        CHECK(worker(&m) == 0, "a log at level 7: %s", why);
        l.level = 8;
        CHECK(worker(&m) < 0 && strstr(why, "level 8"), "a log level above 7: %s", why);
        l.level = 6;
        l.text = "bad \xff text";
        CHECK(worker(&m) < 0 && strstr(why, "UTF-8"), "log text that is not UTF-8: %s", why);

        Gadget__Error e = GADGET__ERROR__INIT;
        Gadget__CallResult r = GADGET__CALL_RESULT__INIT;
        m.msg_case = GADGET__WORKER_MSG__MSG_RESULT;
        m.result = &r;
        r.outcome_case = GADGET__CALL_RESULT__OUTCOME_ERROR;
        r.error = &e;
        e.message = "no";
        CHECK(worker(&m) == 0, "an error result: %s", why);
        e.message = "no \xc3";
        CHECK(worker(&m) < 0 && strstr(why, "error message"), "error text that is not UTF-8: %s", why);
}

static void test_requests(void)
{
        Control__Load load = CONTROL__LOAD__INIT;
        Control__Request q = CONTROL__REQUEST__INIT;
        q.req_case = CONTROL__REQUEST__REQ_LOAD;
        q.load = &load;
        load.path = "/etc/gadgetd/policy.d/x.policy";
        CHECK(request(&q) == 0, "an absolute load path: %s", why);
        load.path = "policy.d/x.policy";
        CHECK(request(&q) < 0 && strstr(why, "absolute"), "a relative load path: %s", why);
        load.path = "/etc/x.policy\n/etc/y.policy";
        CHECK(request(&q) < 0 && strstr(why, "control character"), "a load path with a newline: %s", why);
        load.path = "/etc/x.policy";
        load.runtime = load.no_block = true;
        CHECK(request(&q) == 0, "a runtime load that does not wait: %s", why);

        Control__Name n = CONTROL__NAME__INIT;
        n.name = "g";
        n.no_block = true;
        q.req_case = CONTROL__REQUEST__REQ_RESTART;
        q.restart = &n;
        CHECK(request(&q) == 0, "restart --no-block: %s", why);
        q.req_case = CONTROL__REQUEST__REQ_STOP;
        q.stop = &n;
        CHECK(request(&q) < 0 && strstr(why, "no_block"), "stop with no_block: %s", why);
        /* workshop (gadgetctl dev's link): a gadget's name, no no_block. */
        q.req_case = CONTROL__REQUEST__REQ_WORKSHOP;
        q.workshop = &n;
        CHECK(request(&q) < 0 && strstr(why, "no_block"), "workshop with no_block: %s", why);
        n.no_block = false;
        CHECK(request(&q) == 0, "workshop g: %s", why);
        n.name = "../g";
        CHECK(request(&q) < 0, "workshop of no gadget name: %s", why);
        n.name = "g";
        n.no_block = true;
        /* rollback --with-state: a gadget's name, no no_block. */
        q.req_case = CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE;
        q.rollback_with_state = &n;
        CHECK(request(&q) < 0 && strstr(why, "no_block"), "rollback --with-state with no_block: %s", why);
        n.no_block = false;
        CHECK(request(&q) == 0, "rollback --with-state g: %s", why);
        n.name = "../g";
        CHECK(request(&q) < 0, "rollback --with-state of no gadget name: %s", why);
        n.name = "g";
        n.no_block = true;
        /* nodes forget: a node's name (the rule of gadget names), no no_block. */
        q.req_case = CONTROL__REQUEST__REQ_FORGET_NODE;
        q.forget_node = &n;
        CHECK(request(&q) < 0 && strstr(why, "no_block"), "nodes forget with no_block: %s", why);
        n.no_block = false;
        CHECK(request(&q) == 0, "nodes forget g: %s", why);
        const char *bad_nodes[] = { "", "Bad!", "a/b", "-a" };
        for (size_t i = 0; i < sizeof bad_nodes / sizeof *bad_nodes; i++) {
                n.name = (char *)bad_nodes[i];
                CHECK(request(&q) < 0 && strstr(why, "invalid node name"), "nodes forget \"%s\": %s", bad_nodes[i], why);
        }

        Control__Call call = CONTROL__CALL__INIT;
        q.req_case = CONTROL__REQUEST__REQ_CALL;
        q.call = &call;
        call.name = "g";
        call.method = "m";
        call.caller = "";
        call.via = "";
        static char *chain[CONTROL_CHAIN_MAX + 1];
        for (size_t i = 0; i <= CONTROL_CHAIN_MAX; i++)
                chain[i] = "g";
        call.chain = chain;
        call.n_chain = CONTROL_CHAIN_MAX;
        CHECK(request(&q) == 0, "a chain of %d: %s", CONTROL_CHAIN_MAX, why);
        call.n_chain = CONTROL_CHAIN_MAX + 1;
        CHECK(request(&q) < 0 && strstr(why, "chain longer"), "a chain of %d: %s", CONTROL_CHAIN_MAX + 1, why);
        call.n_chain = 0;
        call.depth = CONTROL_CHAIN_MAX + 1;
        CHECK(request(&q) < 0 && strstr(why, "chain longer"), "a depth of %d: %s", CONTROL_CHAIN_MAX + 1, why);
        call.depth = 0;
        call.method = "../m";
        CHECK(request(&q) < 0 && strstr(why, "method"), "an invalid method name: %s", why);
        call.method = "m";
        call.caller = "\xff";
        CHECK(request(&q) < 0 && strstr(why, "caller"), "a caller that is not UTF-8: %s", why);

        /* logs: a gadget's, or every gadget's (no name); since within
         * years 1970 to 9999; audit takes neither. */
        Control__Logs logs = CONTROL__LOGS__INIT;
        q.req_case = CONTROL__REQUEST__REQ_LOGS;
        q.logs = &logs;
        logs.name = "g";
        logs.since_ms = 1796534001681;
        CHECK(request(&q) == 0, "logs g --since: %s", why);
        logs.since_ms = -1;
        CHECK(request(&q) < 0 && strstr(why, "since"), "a since before the epoch: %s", why);
        logs.since_ms = 0;
        logs.all = true;
        CHECK(request(&q) < 0 && strstr(why, "every gadget"), "all with a name: %s", why);
        logs.name = "";
        CHECK(request(&q) == 0, "all without a name: %s", why);
        logs.all = false;
        CHECK(request(&q) < 0 && strstr(why, "invalid gadget name"), "no name without all: %s", why);
        q.req_case = CONTROL__REQUEST__REQ_AUDIT;
        q.audit = &logs;
        logs.name = "g";
        logs.all = true;
        CHECK(request(&q) < 0 && strstr(why, "logs only"), "audit of every gadget: %s", why);
        logs.all = false;
        logs.since_ms = 5;
        CHECK(request(&q) < 0 && strstr(why, "logs only"), "audit with since: %s", why);
}

static void test_response(void)
{
        Gadget__Error e = GADGET__ERROR__INIT;
        Control__Response r = CONTROL__RESPONSE__INIT;
        r.resp_case = CONTROL__RESPONSE__RESP_ERROR;
        r.error = &e;
        e.message = "fine";
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "an error answer: %s", why);
        e.message = "\xfe";
        CHECK(validate_control_response(&r, why, sizeof why) < 0, "an error answer that is not UTF-8: %s", why);
        /* A reload's kept gadget: a gadget's name, its errors as text. */
        Control__ReloadReport rr = CONTROL__RELOAD_REPORT__INIT;
        Control__ReloadKept k = CONTROL__RELOAD_KEPT__INIT;
        Control__ReloadKept *kp = &k;
        char *errs[] = { "a.policy:3: bad" };
        k.name = "a";
        k.path = "a.policy";
        k.errors = errs;
        k.n_errors = 1;
        rr.kept = &kp;
        rr.n_kept = 1;
        r.resp_case = CONTROL__RESPONSE__RESP_RELOAD;
        r.reload = &rr;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a reload report with a kept gadget: %s", why);
        k.name = "a b";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "invalid name"),
              "a kept gadget of an invalid name: %s", why);
        k.name = "a";
        errs[0] = "\xfe";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "kept gadget a"),
              "a kept gadget's errors not UTF-8: %s", why);
        errs[0] = "a.policy:3: bad";
        Control__ReloadChanged c = CONTROL__RELOAD_CHANGED__INIT;
        Control__ReloadChanged *cp = &c;
        char *keys[] = { "CallTimeout" };
        c.name = "a", c.keys = keys, c.n_keys = 1;
        rr.changed = &cp;
        rr.n_changed = 1;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a reload report with changed keys: %s", why);
        c.name = "";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "changed gadget of an invalid name"),
              "a changed gadget without a name: %s", why);
        /* Log entries: printable text, a gadget's and a stream's name,
         * priority 0..7, no time before the epoch. */
        Control__LogLines ll = CONTROL__LOG_LINES__INIT;
        Control__LogEntry le = CONTROL__LOG_ENTRY__INIT;
        Control__LogEntry *lep = &le;
        le.text = "hi", le.gadget = "g", le.stream = "stdout", le.priority = 7, le.run = 1, le.time_ms = 1;
        ll.entries = &lep, ll.n_entries = 1, ll.note = "";
        r.resp_case = CONTROL__RESPONSE__RESP_LOGS;
        r.logs = &ll;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a log entry: %s", why);
        le.priority = 8;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "priority 8"), "priority 8: %s", why);
        le.priority = 6;
        le.stream = "std\x1bout";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "stream"), "a stream's name: %s", why);
        le.stream = "stdout";
        le.text = "\xfe";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "invalid text"), "text: %s", why);
        le.text = "hi";
        le.time_ms = -5;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "time -5"), "a time: %s", why);
        /* exec's end: a shell's exit status, 0 to 255. */
        Control__ExecEnd x = CONTROL__EXEC_END__INIT;
        r.resp_case = CONTROL__RESPONSE__RESP_EXEC;
        r.exec = &x;
        x.status = 255;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "exec's end, status 255: %s", why);
        x.status = 256;
        CHECK(validate_control_response(&r, why, sizeof why) < 0, "exec's end, status 256 refused: %s", why);
        /* trace NAME's frames: a known kind, short labels, a bounded preview. */
        Control__FrameBatch fb = CONTROL__FRAME_BATCH__INIT;
        Control__Frame fr = CONTROL__FRAME__INIT;
        Control__Frame *frp = &fr;
        fr.kind = "binding_call", fr.name = "NOTE.get", fr.outcome = "", fr.preview = "[\"k\"]";
        fb.frames = &frp, fb.n_frames = 1, fb.note = "";
        r.resp_case = CONTROL__RESPONSE__RESP_FRAMES;
        r.frames = &fb;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a frame: %s", why);
        fr.kind = "ptrace";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "unknown kind"), "a kind: %s", why);
        fr.kind = "log";
        fr.name = "in\x1b" "fo";
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "invalid name"), "a name: %s", why);
        fr.name = "info";
        char big[CONTROL_FRAME_PREVIEW + 10];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        fr.preview = big;
        CHECK(validate_control_response(&r, why, sizeof why) < 0, "a preview past its bound: %s", why);
        fr.preview = "";
        fb.n_frames = CONTROL_FRAMES_QUEUE + 1;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "more than"), "too many: %s", why);
        x.status = -1;
        CHECK(validate_control_response(&r, why, sizeof why) < 0, "exec's end, status -1 refused: %s", why);
        /* A program pid is a pid or 0. */
        Control__GadgetInfo gi = CONTROL__GADGET_INFO__INIT;
        Control__GadgetStatus st = CONTROL__GADGET_STATUS__INIT;
        st.info = &gi;
        gi.name = "g", gi.program_pid = 42;
        r.resp_case = CONTROL__RESPONSE__RESP_STATUS;
        r.status = &st;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a status with a program pid: %s", why);
        gi.program_pid = -2;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "program pid"),
              "a negative program pid refused: %s", why);
        r.resp_case = 99;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "unknown"),
              "an answer of an unknown kind: %s", why);
}

/* gadgetctl trace's request (a trace id) and answer (a node's spans). */
static void test_trace(void)
{
        Control__Trace t = CONTROL__TRACE__INIT;
        Control__Request q = CONTROL__REQUEST__INIT;
        q.req_case = CONTROL__REQUEST__REQ_TRACE;
        q.trace = &t;
        t.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        CHECK(request(&q) == 0, "a trace id: %s", why);
        const char *bad_ids[] = { "", "4bf92f3577b34da6a3ce929d0e0e473", "4BF92F3577B34DA6A3CE929D0E0E4736",
                                  "00000000000000000000000000000000", "4bf92f3577b34da6a3ce929d0e0e4736a" };
        for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
                t.trace_id = (char *)bad_ids[i];
                CHECK(request(&q) < 0 && strstr(why, "trace id"), "trace id \"%s\" refused: %s", bad_ids[i], why);
        }
        Control__Span sp = CONTROL__SPAN__INIT, *spp = &sp;
        sp.span_id = "00f067aa0ba902b7";
        sp.parent_id = "";
        sp.gadget = "counter";
        sp.name = "NEXT.call";
        sp.kind = "binding";
        sp.node = "a";
        sp.peer = "";
        sp.outcome = "ok";
        char *unreached[] = { "b" };
        Control__TraceTree tt = CONTROL__TRACE_TREE__INIT;
        tt.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        tt.spans = &spp;
        tt.n_spans = 1;
        tt.unreached = unreached;
        tt.n_unreached = 1;
        Control__Response r = CONTROL__RESPONSE__INIT;
        r.resp_case = CONTROL__RESPONSE__RESP_TRACE;
        r.trace = &tt;
        CHECK(validate_control_response(&r, why, sizeof why) == 0, "a trace: %s", why);
        struct { const char **field; const char *bad, *says; } cases[] = {
                { (const char **)&tt.trace_id, "4bf9", "trace with an invalid id" },
                { (const char **)&sp.span_id, "00F067AA0BA902B7", "invalid id" },
                { (const char **)&sp.parent_id, "00f067aa0ba902b", "invalid id" },
                { (const char **)&sp.gadget, "../x", "invalid gadget" },
                { (const char **)&sp.name, "a\033[2Jb", "invalid gadget, name" },
                { (const char **)&sp.outcome, "\xfe", "invalid gadget, name or outcome" },
                { (const char **)&sp.kind, "other", "unknown kind" },
                { (const char **)&sp.node, "A B", "invalid node name" },
                { (const char **)&sp.peer, "-x", "invalid node name" },
                { (const char **)&unreached[0], "a/b", "invalid node" },
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                const char *was = *cases[i].field;
                *cases[i].field = cases[i].bad;
                CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, cases[i].says),
                      "a span with \"%s\" refused: %s", cases[i].bad, why);
                *cases[i].field = was;
        }
        tt.n_spans = CONTROL_TRACE_SPANS_MAX + 1;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "more than"),
              "more than %d spans refused: %s", CONTROL_TRACE_SPANS_MAX, why);
}

/* Every kind of Request (each field of its oneof, found in the descriptor,
 * so a kind added to control.proto is covered at once) has its case in the
 * validator: with its message at the defaults it is passed or refused for
 * a rule of its own, never as an unknown kind; a kind that names a gadget
 * (a field "name") refuses an invalid name. */
static void test_every_request_kind(void)
{
        const ProtobufCMessageDescriptor *d = &control__request__descriptor;
        unsigned kinds = 0;
        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &d->fields[i];
                if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->type != PROTOBUF_C_TYPE_MESSAGE)
                        continue;
                const ProtobufCMessageDescriptor *md = f->descriptor;
                ProtobufCMessage *m = calloc(1, md->sizeof_message);
                if (!m)
                        abort();
                protobuf_c_message_init(md, m);
                Control__Request q = CONTROL__REQUEST__INIT;
                q.req_case = (Control__Request__ReqCase)f->id;
                *(ProtobufCMessage **)((char *)&q + f->offset) = m;
                request(&q);
                CHECK(!strstr(why, "unknown request kind"), "the request %s has a case in the validator: %s",
                      f->name, why);
                const ProtobufCFieldDescriptor *name = protobuf_c_message_descriptor_get_field_by_name(md, "name");
                if (name && name->type == PROTOBUF_C_TYPE_STRING && name->label != PROTOBUF_C_LABEL_REPEATED) {
                        *(const char **)((char *)m + name->offset) = "../x";
                        CHECK(request(&q) < 0, "the request %s with the gadget name \"../x\" is refused", f->name);
                }
                free(m);
                kinds++;
        }
        CHECK(kinds >= 14, "%u kinds of request found in the descriptor", kinds);
}

/* One builder's answer r: of kind, for id, with body, and it passes the
 * check gadgetctl and other nodes run on what they read. */
static void check_answer(const Control__Response *r, Control__Response__RespCase kind, uint64_t id, const void *body)
{
        CHECK(r->resp_case == kind && r->id == id && r->error == body &&
              validate_control_response(r, why, sizeof why) == 0,
              "answer %llu of kind %d: %s", (unsigned long long)id, (int)kind, why);
}

static void test_answers(void)
{
        struct answer a;
        Gadget__Value v = GADGET__VALUE__INIT;
        Control__GadgetList gl = CONTROL__GADGET_LIST__INIT;
        Control__GadgetStatus st = CONTROL__GADGET_STATUS__INIT;
        Control__LogLines ll = CONTROL__LOG_LINES__INIT;
        Control__ReloadReport rr = CONTROL__RELOAD_REPORT__INIT;
        Control__ApprovalList al = CONTROL__APPROVAL_LIST__INIT;
        Control__NodeList nl = CONTROL__NODE_LIST__INIT;
        Control__GadgetInfo gi = CONTROL__GADGET_INFO__INIT;
        v.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        gi.name = "g";
        st.info = &gi;
        why[0] = '\0';
        check_answer(answer_error(&a, 1, GADGET_EBUSY, "busy"), CONTROL__RESPONSE__RESP_ERROR, 1, &a.error);
        CHECK(a.error.code == GADGET_EBUSY && strcmp(a.error.message, "busy") == 0, "the error's code and message");
        check_answer(answer_done(&a, 2, "ready"), CONTROL__RESPONSE__RESP_DONE, 2, &a.done);
        CHECK(strcmp(a.done.message, "ready") == 0, "the done answer's message");
        check_answer(answer_of(&a, 3, &v.base), CONTROL__RESPONSE__RESP_RESULT, 3, &v);
        check_answer(answer_of(&a, 4, &gl.base), CONTROL__RESPONSE__RESP_LIST, 4, &gl);
        check_answer(answer_of(&a, 5, &st.base), CONTROL__RESPONSE__RESP_STATUS, 5, &st);
        check_answer(answer_of(&a, 6, &ll.base), CONTROL__RESPONSE__RESP_LOGS, 6, &ll);
        check_answer(answer_of(&a, 7, &rr.base), CONTROL__RESPONSE__RESP_RELOAD, 7, &rr);
        check_answer(answer_of(&a, 8, &al.base), CONTROL__RESPONSE__RESP_APPROVALS, 8, &al);
        check_answer(answer_of(&a, 9, &nl.base), CONTROL__RESPONSE__RESP_NODES, 9, &nl);
        Control__Name n = CONTROL__NAME__INIT;
        CHECK(answer_of(&a, 10, &n.base) == NULL, "no answer carries a request's Name");
}

/* answer_items: n initialized messages behind n pointers and a NULL. */
static void test_answer_items(void)
{
        Control__NodeInfo **items = answer_items(&control__node_info__descriptor, 3);
        CHECK(items && items[3] == NULL, "three items and the NULL after them");
        for (size_t i = 0; items && i < 3; i++) {
                CHECK(items[i]->base.descriptor == &control__node_info__descriptor && strcmp(items[i]->name, "") == 0,
                      "item %zu initialized", i);
                items[i]->leases = i; /* each its own message */
        }
        CHECK(items && items[0]->leases == 0 && items[2]->leases == 2, "the items do not overlap");
        free(items);
        items = answer_items(&control__node_info__descriptor, 0);
        CHECK(items && items[0] == NULL, "no items: only the NULL");
        free(items);
        CHECK(answer_items(&control__node_info__descriptor, SIZE_MAX / 8) == NULL, "too many items: NULL");
}

/* kill: only a signal the sandbox's PID 1 passes on, or KILL. */
static void test_kill(void)
{
        Control__Kill k = CONTROL__KILL__INIT;
        Control__Request q = CONTROL__REQUEST__INIT;
        q.req_case = CONTROL__REQUEST__REQ_KILL;
        q.kill = &k;
        k.name = "g";
        const int ok[] = { SIGTERM, SIGKILL, SIGHUP, SIGUSR1, SIGRTMIN, SIGRTMAX };
        for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
                k.signal = ok[i];
                CHECK(request(&q) == 0, "kill with signal %d: %s", ok[i], why);
        }
        const int bad[] = { 0, -1, SIGSTOP, SIGCONT, SIGCHLD, SIGSEGV, SIGRTMAX + 1, 4096 };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                k.signal = bad[i];
                CHECK(request(&q) < 0 && strstr(why, "signal"), "kill with signal %d refused: %s", bad[i], why);
        }
        CHECK(gadget_signal_parse("TERM") == SIGTERM && gadget_signal_parse("sigkill") == SIGKILL &&
              gadget_signal_parse("SIGHUP") == SIGHUP && gadget_signal_parse("15") == SIGTERM &&
              gadget_signal_parse("RTMIN+2") == SIGRTMIN + 2, "signal names and numbers parse");
        CHECK(gadget_signal_parse("STOP") < 0 && gadget_signal_parse("19") < 0 && gadget_signal_parse("") < 0 &&
              gadget_signal_parse("TERMX") < 0 && gadget_signal_parse("15x") < 0,
              "STOP, 19, \"\", TERMX and 15x are refused");
}

/* exec: a command of 1 to CONTROL_EXEC_ARGS_MAX words, each non-empty first,
 * at most CONTROL_EXEC_ARG_MAX bytes, UTF-8. */
static void test_exec(void)
{
        static char long_word[CONTROL_EXEC_ARG_MAX + 2];
        static char *many[CONTROL_EXEC_ARGS_MAX + 1];
        char *cmd[] = { "sh", "-c", "id" }, *empty[] = { "" }, *bad[] = { "sh", "\xff" }, *longv[] = { long_word };
        Control__Exec x = CONTROL__EXEC__INIT;
        Control__Request q = CONTROL__REQUEST__INIT;
        q.req_case = CONTROL__REQUEST__REQ_EXEC;
        q.exec = &x;
        x.name = "g";
        x.argv = cmd, x.n_argv = 3;
        CHECK(request(&q) == 0, "exec sh -c id: %s", why);
        x.n_argv = 0;
        CHECK(request(&q) < 0 && strstr(why, "command"), "exec without a command refused: %s", why);
        x.argv = empty, x.n_argv = 1;
        CHECK(request(&q) < 0, "exec of an empty word refused: %s", why);
        x.argv = bad, x.n_argv = 2;
        CHECK(request(&q) < 0 && strstr(why, "UTF-8"), "exec with a word not UTF-8 refused: %s", why);
        memset(long_word, 'a', CONTROL_EXEC_ARG_MAX);
        x.argv = longv, x.n_argv = 1;
        CHECK(request(&q) == 0, "a word of CONTROL_EXEC_ARG_MAX bytes: %s", why);
        long_word[CONTROL_EXEC_ARG_MAX] = 'a';
        CHECK(request(&q) < 0, "a longer word refused: %s", why);
        for (size_t i = 0; i <= CONTROL_EXEC_ARGS_MAX; i++)
                many[i] = "x";
        x.argv = many, x.n_argv = CONTROL_EXEC_ARGS_MAX;
        CHECK(request(&q) == 0, "CONTROL_EXEC_ARGS_MAX words: %s", why);
        x.n_argv++;
        CHECK(request(&q) < 0, "more words refused: %s", why);
        x.argv = cmd, x.n_argv = 3, x.name = "../x";
        CHECK(request(&q) < 0 && strstr(why, "name"), "exec in an invalid gadget name refused: %s", why);
}

int main(void)
{
        test_kill();
        test_exec();
        test_hello();
        test_log_and_result();
        test_requests();
        test_response();
        test_answers();
        test_answer_items();
        test_every_request_kind();
        test_trace();
        return tap_done();
}
