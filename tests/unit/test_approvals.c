/* Unit tests of supervisor/system/approvals.c on a real libevent loop and a
 * real audit log in a temporary directory: asking, listing, deciding, the
 * timeout, cancelling, standing ("always") approvals, the bound on calls
 * waiting, and arguments cut for display. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>

#include "tap.h"
#include "contract.h"
#include "system/approvals.h"
#include "system/audit.h"
#include "value.h"

struct outcome {
        int calls;
        bool approved;
        char why[200];
};

static void decided(void *arg, bool approved, const char *why)
{
        struct outcome *o = arg;
        o->calls++;
        o->approved = approved;
        snprintf(o->why, sizeof o->why, "%s", why ? why : "");
}

static struct approval_req req(const char *caller, const char *method, const Gadget__Value *args,
                               struct outcome *o)
{
        return (struct approval_req){ .caller = caller, .via = "binding T", .target = "tk", .method = method,
                                      .gadget = caller, .args = args, .timeout_ms = 60000, .decided = decided,
                                      .arg = o };
}

static char *audit_text(const char *dir)
{
        char path[300], *buf = calloc(1, 1 << 16);
        snprintf(path, sizeof path, "%s/audit.log", dir);
        FILE *f = fopen(path, "r");
        if (f && buf)
                buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
        if (f)
                fclose(f);
        return buf;
}

int main(void)
{
        char dir[] = "/tmp/gadgetd-test-approvals-XXXXXX", msg[300];
        if (!mkdtemp(dir)) {
                printf("Bail out! mkdtemp: %s\n", strerror(errno));
                return 1;
        }
        struct event_base *base = event_base_new();
        struct audit *audit = NULL;
        struct audit_config cfg = AUDIT_DEFAULT_CONFIG;
        struct approvals *a = NULL;
        CHECK(base && audit_open(dir, &cfg, base, &audit) == 0 && approvals_new(base, audit, NULL, &a) == 0, "opened");
        if (!a)
                return tap_done();

        /* Asked, listed with its arguments, approved. */
        Gadget__Value *args = value_new_string("the plan");
        struct outcome o1 = { 0 }, o2 = { 0 };
        struct approval_req q = req("helpdesk", "create", args, &o1);
        struct approval *ap = NULL;
        CHECK(approvals_ask(a, &q, &ap, msg, sizeof msg) == 0 && ap, "a call waits");
        struct approval_info in[4];
        size_t n = approvals_list(a, in, 4);
        CHECK(n == 1 && in[0].id == 1 && strcmp(in[0].caller, "helpdesk") == 0 &&
              strcmp(in[0].args, "\"the plan\"") == 0 && in[0].timeout_ms == 60000, "listed: %zu", n);
        CHECK(approvals_decide(a, 2, true, false, "me", false, msg, sizeof msg) == GADGET_ENOTFOUND,
              "an id that does not wait is not found");
        CHECK(approvals_decide(a, 1, true, false, "gadgetctl (uid 7)", false, msg, sizeof msg) == 0 && o1.calls == 1 &&
              o1.approved, "approved: the caller is told once");
        CHECK(strcmp(msg, "approved by gadgetctl (uid 7)") == 0, "the answer names who: %s", msg);
        CHECK(approvals_list(a, in, 4) == 0, "nothing waits");
        CHECK(approvals_decide(a, 1, false, false, "me", false, msg, sizeof msg) == GADGET_ENOTFOUND, "decided once only");

        /* Denied, with who in the reason. */
        q.arg = &o2;
        CHECK(approvals_ask(a, &q, NULL, msg, sizeof msg) == 0, "asked again");
        CHECK(approvals_decide(a, 2, false, false, "the workshop", false, msg, sizeof msg) == 0 && o2.calls == 1 &&
              !o2.approved && strcmp(o2.why, "denied by the workshop") == 0, "denied: %s", o2.why);

        /* Cancelled: the caller is told (so that it frees), no decision. */
        struct outcome o3 = { 0 };
        q.arg = &o3;
        CHECK(approvals_ask(a, &q, &ap, msg, sizeof msg) == 0, "asked a third time");
        approval_cancel(ap);
        CHECK(o3.calls == 1 && !o3.approved && approvals_list(a, in, 4) == 0, "cancelled");

        /* Timeout: denied by the loop's timer. */
        struct outcome o4 = { 0 };
        q.arg = &o4;
        q.timeout_ms = 50;
        CHECK(approvals_ask(a, &q, NULL, msg, sizeof msg) == 0, "asked with a short timeout");
        event_base_loop(base, EVLOOP_ONCE);
        CHECK(o4.calls == 1 && !o4.approved && strstr(o4.why, "ApproveTimeout"), "timed out: %s", o4.why);

        /* Always: the same caller, via, target and method go at once; another caller does not. */
        struct outcome o5 = { 0 };
        q.arg = &o5;
        q.timeout_ms = 60000;
        CHECK(approvals_ask(a, &q, NULL, msg, sizeof msg) == 0, "asked for always");
        n = approvals_list(a, in, 4);
        CHECK(n == 1 && approvals_decide(a, in[0].id, true, true, "me", false, msg, sizeof msg) == 0 && o5.approved &&
              strstr(msg, "always for this caller"), "approved always: %s", msg);
        CHECK(approvals_ask(a, &q, NULL, msg, sizeof msg) == 1 && o5.calls == 1, "a standing approval: at once");
        struct approval_req other = req("intruder", "create", args, &o5);
        CHECK(approvals_ask(a, &other, &ap, msg, sizeof msg) == 0, "another caller still waits");
        approval_cancel(ap);
        other = req("helpdesk", "delete", args, &o5);
        CHECK(approvals_ask(a, &other, &ap, msg, sizeof msg) == 0, "another method still waits");
        approval_cancel(ap);

        /* The bounds: APPROVALS_PER_CALLER of one caller, then busy for it
         * alone; APPROVALS_MAX in all, then busy for everyone. */
        struct outcome many = { 0 };
        struct approval_req m = req("flood", "create", NULL, &many);
        int fails = 0;
        for (int i = 0; i < APPROVALS_PER_CALLER; i++)
                fails += approvals_ask(a, &m, NULL, msg, sizeof msg) != 0;
        CHECK(fails == 0, "%d calls of one caller wait", APPROVALS_PER_CALLER);
        CHECK(approvals_ask(a, &m, NULL, msg, sizeof msg) == GADGET_EBUSY && strstr(msg, "calls of flood wait"),
              "one more of that caller is busy: %s", msg);
        char name[32];
        for (int i = 1; i < APPROVALS_MAX / APPROVALS_PER_CALLER; i++) {
                snprintf(name, sizeof name, "flood%d", i);
                m.caller = name;
                for (int k = 0; k < APPROVALS_PER_CALLER; k++)
                        fails += approvals_ask(a, &m, NULL, msg, sizeof msg) != 0;
        }
        CHECK(fails == 0, "%d calls of %d callers wait", APPROVALS_MAX, APPROVALS_MAX / APPROVALS_PER_CALLER);
        m.caller = "latecomer";
        CHECK(approvals_ask(a, &m, NULL, msg, sizeof msg) == GADGET_EBUSY && strstr(msg, "too many"),
              "one more in all is busy: %s", msg);
        CHECK(approvals_list(a, in, 4) == APPROVALS_MAX, "the list counts them all");

        /* What a person approves is the whole of what they see: longer
         * arguments are not asked for; exactly APPROVAL_ARGS_MAX are. */
        char *big = malloc(APPROVAL_ARGS_MAX + 2);
        memset(big, 'x', APPROVAL_ARGS_MAX + 1);
        big[APPROVAL_ARGS_MAX - 2] = '\0'; /* with its quotes: APPROVAL_ARGS_MAX bytes of JSON */
        Gadget__Value *fits = value_new_string(big);
        big[APPROVAL_ARGS_MAX - 2] = 'x';
        big[APPROVAL_ARGS_MAX - 1] = '\0';
        Gadget__Value *bigv = value_new_string(big);
        free(big);
        struct approvals *b2 = NULL;
        struct outcome o6 = { 0 }, o7 = { 0 }, o8 = { 0 };
        approvals_new(base, audit, NULL, &b2);
        struct approval_req bq = req("helpdesk", "create", bigv, &o6);
        CHECK(b2 && approvals_ask(b2, &bq, NULL, msg, sizeof msg) == GADGET_ELIMIT && strstr(msg, "4097 bytes"),
              "arguments of %d bytes as JSON are not asked for: %s", APPROVAL_ARGS_MAX + 1, msg);
        struct approval_req fq = req("helpdesk", "create", fits, &o7);
        CHECK(b2 && approvals_ask(b2, &fq, NULL, msg, sizeof msg) == 0, "%d bytes are", APPROVAL_ARGS_MAX);
        if (b2) {
                approvals_list(b2, in, 4);
                CHECK(strlen(in[0].args) == APPROVAL_ARGS_MAX, "shown whole: %zu bytes", strlen(in[0].args));
        }
        /* A right-to-left override cannot reorder what the person reads. */
        Gadget__Value *rlo = value_new_string("pay \xe2\x80\xae" "01 EUR\xd8\x9c");
        struct approval_req rq = req("helpdesk", "create", rlo, &o8);
        CHECK(b2 && approvals_ask(b2, &rq, NULL, msg, sizeof msg) == 0, "asked with U+202E");
        if (b2) {
                approvals_list(b2, in, 4);
                CHECK(strcmp(in[1].args, "\"pay \\u202e01 EUR\\u061c\"") == 0, "bidi controls escaped: %s",
                      in[1].args);
        }
        /* The one who asked does not approve; root may. */
        CHECK(b2 && approvals_decide(b2, 1, true, false, "helpdesk", false, msg, sizeof msg) == GADGET_EDENIED &&
                      strstr(msg, "another person"), "its own call: %s", msg);
        CHECK(b2 && approvals_decide(b2, 1, true, false, "helpdesk", true, msg, sizeof msg) == 0 && o7.approved,
              "root's own call: %s", msg);
        value_free(fits);
        value_free(rlo);
        approvals_free(b2);
        CHECK(o6.calls == 0 && o7.calls == 1 && o8.calls == 1 && !o8.approved, "freeing denies what waits");

        approvals_free(a);
        CHECK(many.calls == APPROVALS_MAX, "every one of the flood told at the end: %d", many.calls);
        audit_close(audit);
        char *text = audit_text(dir);
        CHECK(text && strstr(text, "\"binding\":\"approval\"") &&
              strstr(text, "approved by gadgetctl (uid 7); helpdesk called tk create through binding T") &&
              strstr(text, "denied by the workshop") && strstr(text, "denied by its timeout"),
              "the decisions are in the audit log");
        CHECK(text && !strstr(text, "the plan"), "the audit holds no arguments");
        free(text);
        value_free(args);
        value_free(bigv);
        event_base_free(base);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "cleaned up");
        return tap_done();
}
