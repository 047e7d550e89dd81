/* Unit tests of proto/validate.c: each rule of a worker message, a control
 * request and a control response is checked on its own, with a message
 * that breaks it alone (and the same message within the rule passing), so
 * that removing any one rule turns a check red. */
#include <string.h>

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
        r.resp_case = 99;
        CHECK(validate_control_response(&r, why, sizeof why) < 0 && strstr(why, "unknown"),
              "an answer of an unknown kind: %s", why);
}

int main(void)
{
        test_hello();
        test_log_and_result();
        test_requests();
        test_response();
        return tap_done();
}
