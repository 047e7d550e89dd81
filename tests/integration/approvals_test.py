#!/usr/bin/env python3
"""Gatekeepers' approvals and admin methods, from outside: a real gadgetd,
testgadget as the gatekeeper (tg) and as a gadget calling it through a
gadget binding (caller), and every way a call reaches it — gadgetctl, the
gateway's HTTP API, another gadget. A call that waits for approval must
not reach the gadget before a person approves it; deny and timeout answer
the caller with an error; each decision is an audit record naming who
decided.
Usage: approvals_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import subprocess
import sys
import threading
import time

from gateway_util import Gateway
from servers import Recorder
from harness import GADGETCTL, Daemon, check, gadgetd_run, main, policy, test, wait_for

# testgadget's methods are untyped but for a few: a gatekeeper requires
# signatures unless its policy says otherwise.
GATEKEEPER = "Gatekeeper=yes\nRequireTypes=no\nAdminMethods=say\nApprove=echo\nApproveTimeout=60s\n"


def start(d, **gadgets):
    for name, body in gadgets.items():
        policy(d.pol, name, body)
    d.ctl("reload")
    for name in gadgets:
        wait_for(lambda n=name: d.state(n) == "ready", what=name + " ready")


def waiting(d):
    r = d.ctl("--json", "approvals")
    check(r.returncode == 0, "approvals: %r" % r.stderr)
    return json.loads(r.stdout)["approvals"]


def one_waiting(d, **want):
    """The one call waiting, once it is listed; checks its fields."""
    ws = wait_for(lambda: waiting(d) or None, what="a call waiting for approval")
    check(len(ws) == 1, "one call waits: %r" % ws)
    for k, v in want.items():
        check(ws[0][k] == v, "%s of the waiting call: %r, want %r" % (k, ws[0][k], v))
    return ws[0]


def audit(d, gadget):
    r = d.ctl("audit", gadget)
    check(r.returncode == 0, "audit: %r" % r.stderr)
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def decisions(d, gadget):
    return [r for r in audit(d, gadget) if r.get("binding") == "approval"]


def ctl_bg(d, *args):
    """gadgetctl in the background: (process, its (stdout, stderr) later)."""
    return subprocess.Popen([GADGETCTL, "--socket", d.sock, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def calls_of(d, name):
    return d.list()[name]["calls"]


@test
def approve_and_deny_through_gadgetctl(tmp):
    with Daemon(tmp) as d:
        start(d, tg=GATEKEEPER)
        before = calls_of(d, "tg")
        p = ctl_bg(d, "call", "tg", "echo", '"hi there"')
        w = one_waiting(d, caller="gadgetctl (uid 0)", via="gadgetctl", target="tg", method="echo",
                        args='"hi there"', timeout_ms=60000)
        time.sleep(0.3)
        check(p.poll() is None, "the call ended before anyone decided")
        check(calls_of(d, "tg") == before, "the gadget got the call before it was approved")
        text = d.ctl("approvals").stdout
        check("tg echo" in text and "from gadgetctl (uid 0) through gadgetctl" in text and 'args: "hi there"' in text,
              "approvals shows what, from whom, with which arguments: %r" % text)
        r = d.ctl("approve", str(w["id"]))
        check(r.returncode == 0 and "approved by gadgetctl (uid 0)" in r.stdout, "approve: %r" % (r,))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and json.loads(out) == "hi there", "the approved call: %r %r" % (out, err))
        check(waiting(d) == [], "nothing waits after the decision")
        # Denied: the caller gets an error, the gadget never the call.
        before = calls_of(d, "tg")
        p = ctl_bg(d, "call", "tg", "echo", '"secret plan"')
        w = one_waiting(d, method="echo")
        r = d.ctl("deny", str(w["id"]))
        check(r.returncode == 0, "deny: %r" % (r,))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 1 and "denied by gadgetctl (uid 0)" in err, "the denied call: %r %r" % (out, err))
        check(calls_of(d, "tg") == before, "a denied call reached the gadget")
        recs = decisions(d, "tg")
        check([r["outcome"] for r in recs] == ["ok", "denied"], "two decisions in the audit: %r" % recs)
        check(all("by gadgetctl (uid 0)" in r["detail"] and r["op"] == "echo" for r in recs),
              "the audit names who decided: %r" % recs)
        # Not waiting (any more), not a number.
        r = d.ctl("approve", str(w["id"]))
        check(r.returncode == 3 and "no call waits for approval" in r.stderr, "a decided ID again: %r" % (r,))
        r = d.ctl("deny", "x1")
        check(r.returncode == 2, "a bad ID: %r" % (r,))
        # Methods not in Approve= go at once; the admin method never does.
        r = d.ctl("call", "tg", "sleep", '{"ms": 1}')
        check(r.returncode == 0, "a method without Approve=: %r" % (r,))


@test
def approval_timeout_denies(tmp):
    with Daemon(tmp) as d:
        start(d, tg="Approve=echo\nApproveTimeout=1s\n")
        t0 = time.monotonic()
        r = d.ctl("call", "tg", "echo", "1")
        took = time.monotonic() - t0
        check(r.returncode == 1 and "no one approved the call within ApproveTimeout (1 s)" in r.stderr,
              "a call no one approved: %r" % (r,))
        check(took >= 0.9, "denied after %.2f s, before its ApproveTimeout" % took)
        check(calls_of(d, "tg") == 0, "a timed-out call reached the gadget")
        recs = decisions(d, "tg")
        check(len(recs) == 1 and recs[0]["outcome"] == "denied" and "by its timeout" in recs[0]["detail"],
              "the timeout's decision in the audit: %r" % recs)


@test
def gadgetd_run_asks_no_one(tmp):
    """gadgetd run has no control socket or workshop: no one could approve,
    so a call that needs approval is denied at once, not after a timeout."""
    pol = policy(tmp, "tg", "Approve=echo\nApproveTimeout=1h\n")
    t0 = time.monotonic()
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "echo", '"x"'], capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and "gadgetd run has no one to approve calls (Approve=)" in r.stderr,
          "run --call of a method to approve: %r" % (r,))
    check(time.monotonic() - t0 < 30, "denied at once, not after ApproveTimeout")
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "sleep", '{"ms": 1}'], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "another method: %r" % (r,))


@test
def binding_approval_and_always(tmp):
    with Daemon(tmp) as d:
        start(d, tg="", caller="[Binding TG]\nType=gadget\nTarget=tg\nMethods=echo sleep\nApprove=echo\n",
              other="[Binding TG]\nType=gadget\nTarget=tg\nApprove=echo\n")
        inner = {"binding": "TG", "op": "call", "args": {"method": "echo", "args": 12}}
        p = ctl_bg(d, "call", "caller", "binding", json.dumps(inner))
        w = one_waiting(d, caller="caller", via="binding TG", target="tg", method="echo", args="12")
        check(calls_of(d, "tg") == 0, "the target got the call before it was approved")
        r = d.ctl("approve", "--always", str(w["id"]))
        check(r.returncode == 0 and "always for this caller" in r.stdout, "approve --always: %r" % (r,))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and json.loads(out) == 12, "the approved binding call: %r %r" % (out, err))
        # Always: the caller's next call of echo waits for no one.
        r = d.ctl("call", "caller", "binding", json.dumps(inner), timeout=20)
        check(r.returncode == 0 and json.loads(r.stdout) == 12, "a call under a standing approval: %r" % (r,))
        # ... but gadgetctl calling tg is another caller: Approve= of the binding only.
        check(d.ctl("call", "tg", "echo", "3").returncode == 0, "a direct call, no Approve= on tg")
        recs = decisions(d, "caller")
        check(len(recs) == 1 and "always for this caller" in recs[0]["detail"], "caller's audit: %r" % recs)
        check(len(decisions(d, "tg")) == 1, "the target's audit has the decision too")
        # A denied binding call is an error for the calling gadget; a
        # standing approval is the one caller's, not another's.
        inner2 = dict(inner, args={"method": "echo", "args": "x"})
        p = ctl_bg(d, "call", "other", "binding", json.dumps(inner2))
        w = one_waiting(d, caller="other")
        d.ctl("deny", str(w["id"]))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 1 and "denied by gadgetctl (uid 0)" in err, "denied binding call: %r" % err)


@test
def http_binding_approval(tmp):
    """Approve=POST on an http binding: the POST reaches the server only
    once approved; GET goes at once; a denied POST never arrives."""
    with Recorder() as srv, Daemon(tmp) as d:
        base = "http://127.0.0.1:%d/api/" % srv.port
        start(d, web="[Binding API]\nType=http\nAllow=%s\nMethods=GET POST\nApprove=POST\n" % base)

        def req(method):
            inner = {"binding": "API", "op": "request", "args": {"url": base + "t", "method": method, "body": "b"}}
            return ctl_bg(d, "call", "web", "binding", json.dumps(inner))

        g = req("GET")
        out, err = g.communicate(timeout=30)
        check(g.returncode == 0 and [x[0] for x in srv.seen] == ["GET"], "a GET waits for no one: %r" % err)
        p = req("POST")
        w = one_waiting(d, caller="web", via="binding API", target=base + "t", method="POST")
        check('"body":"b"' in w["args"], "the request shown: %r" % w["args"])
        time.sleep(0.3)
        check(len(srv.seen) == 1, "the server got the request before it was approved: %r" % srv.seen)
        d.ctl("approve", str(w["id"]))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and json.loads(out)["status"] == 200, "the approved POST: %r %r" % (out, err))
        check([x[0] for x in srv.seen] == ["GET", "POST"], "the server saw: %r" % srv.seen)
        p = req("POST")
        w = one_waiting(d, method="POST")
        d.ctl("deny", str(w["id"]))
        out, err = p.communicate(timeout=30)
        check(p.returncode == 1 and "binding API: denied by gadgetctl (uid 0)" in err, "the denied POST: %r" % err)
        check(len(srv.seen) == 2, "a denied request reached the server: %r" % srv.seen)


@test
def gone_callers_ask_no_more(tmp):
    with Daemon(tmp) as d:
        start(d, tg="Approve=echo\n", caller="[Binding TG]\nType=gadget\nTarget=tg\nApprove=sleep\n")
        p = ctl_bg(d, "call", "tg", "echo", "1")
        one_waiting(d, caller="gadgetctl (uid 0)")
        p.kill()
        p.wait()
        wait_for(lambda: waiting(d) == [], what="the gone client's call to leave the list")
        inner = {"binding": "TG", "op": "call", "args": {"method": "sleep", "args": {"ms": 1}}}
        p = ctl_bg(d, "call", "caller", "binding", json.dumps(inner))
        one_waiting(d, caller="caller", via="binding TG")
        check(d.ctl("stop", "caller").returncode == 0, "stop caller")
        wait_for(lambda: waiting(d) == [], what="the stopped gadget's call to leave the list")
        p.communicate(timeout=30)
        check(calls_of(d, "tg") == 0, "a call of a gone caller reached the target")
        # Unloading the target while a call to it waits: the caller hears.
        p = ctl_bg(d, "call", "tg", "echo", "2")
        one_waiting(d, target="tg")
        os.unlink(os.path.join(d.pol, "tg.policy"))
        d.ctl("reload")
        out, err = p.communicate(timeout=30)
        check(p.returncode == 1 and "unloaded" in err, "a call to an unloaded gadget: %r" % err)
        check(waiting(d) == [], "nothing waits for an unloaded gadget")


@test
def admin_methods_only_from_admin_ui(tmp):
    with Gateway(tmp) as g:
        start(g, tg=GATEKEEPER, caller="[Binding TG]\nType=gadget\nTarget=tg\n")
        r = g.ctl("call", "tg", "say", '{"text": "x"}')
        check(r.returncode == 1 and "say is an admin method of gatekeeper \"tg\"" in r.stderr,
              "gadgetctl calling an admin method: %r" % (r,))
        inner = {"binding": "TG", "op": "call", "args": {"method": "say", "args": {"text": "x"}}}
        r = g.ctl("call", "caller", "binding", json.dumps(inner))
        check(r.returncode == 1 and "admin method" in r.stderr, "a gadget calling an admin method: %r" % (r,))
        status, body = g.call("tg", "say", {"text": "x"})
        check(status == 403 and "admin method" in body["error"]["message"], "a UI's call of it: %r" % body)
        status, _, raw = g.request("POST", "/api/gadgets/tg/admin/say", json.dumps({"text": "x"}))
        check(status == 200, "the admin route calls it: %r %r" % (status, raw))
        status, _, raw = g.request("POST", "/api/gadgets/tg/admin/sleep", json.dumps({"ms": 1}))
        check(status == 403 and b"only its admin methods" in raw, "the admin route and another method: %r" % raw)
        # No approval is asked on the admin route: it is the operator's.
        check(waiting(g) == [], "nothing waits")
        gs = {x["name"]: x for x in json.loads(g.request("GET", "/api/gadgets")[2])["gadgets"]}
        check(gs["tg"]["gatekeeper"] and gs["tg"]["admin_methods"] == ["say"] and not gs["tg"]["admin_ui"],
              "the list tells a gatekeeper: %r" % gs["tg"])
        check(not gs["caller"]["gatekeeper"], "and an ordinary gadget")
        status, _, _ = g.request("GET", "/gadgets/tg/admin")
        check(status == 404, "no admin UI, none served: %r" % status)


@test
def gatekeeper_requires_signatures(tmp):
    """A gatekeeper's methods are what stands between other gadgets and its
    credential: without RequireTypes=no it must type every one."""
    with Daemon(tmp) as d:
        policy(d.pol, "gk", "Gatekeeper=yes\n")
        policy(d.pol, "plain", "")
        d.ctl("reload")
        wait_for(lambda: d.state("gk") == "failed", what="the untyped gatekeeper to fail")
        r = d.ctl("--json", "status", "gk")
        cause = json.loads(r.stdout)["cause"]
        check("declare no signature (RequireTypes=yes)" in cause, "the cause: %r" % cause)
        wait_for(lambda: d.state("plain") == "ready", what="an ordinary untyped gadget to run")


@test
def approve_and_deny_through_the_gateway(tmp):
    with Gateway(tmp) as g:
        start(g, tg=GATEKEEPER)
        got = {}

        def call(key, args):
            got[key] = g.call("tg", "echo", args)

        t = threading.Thread(target=call, args=("a", "n1"))
        t.start()
        wait_for(lambda: json.loads(g.request("GET", "/api/approvals")[2])["approvals"] or None,
                 what="the call listed by the gateway")
        ws = json.loads(g.request("GET", "/api/approvals")[2])
        check(ws["total"] == 1 and ws["approvals"][0]["caller"] == "workshop" and
              ws["approvals"][0]["args"] == '"n1"', "the gateway's list: %r" % ws)
        wid = ws["approvals"][0]["id"]
        # A decision must come as JSON (a second guard against other pages).
        status, _, _ = g.request("POST", "/api/approvals/%d/approve" % wid, b"")
        check(status == 400, "a decision without a JSON body: %r" % status)
        status, _, raw = g.request("POST", "/api/approvals/%d/approve" % wid, "{}")
        check(status == 200 and json.loads(raw) == {"id": wid, "decision": "approved"}, "approve: %r" % raw)
        t.join(30)
        check(got["a"] == (200, "n1"), "the approved call: %r" % (got,))
        t = threading.Thread(target=call, args=("b", "n2"))
        t.start()
        wid = wait_for(lambda: waiting(g) or None, what="the second call")[0]["id"]
        status, _, raw = g.request("POST", "/api/approvals/%d/deny" % wid, "{}")
        check(status == 200, "deny: %r" % raw)
        t.join(30)
        status, body = got["b"]
        check(status == 403 and "denied by the workshop" in body["error"]["message"], "the denied call: %r" % (got,))
        status, _, _ = g.request("POST", "/api/approvals/%d/deny" % wid, "{}")
        check(status == 404, "a decided ID again: %r" % status)
        recs = decisions(g, "tg")
        check([r["outcome"] for r in recs] == ["ok", "denied"] and
              all("by the workshop (gateway, from 127.0.0.1)" in r["detail"] for r in recs),
              "the audit names the workshop: %r" % recs)


if __name__ == "__main__":
    sys.exit(main())
