#!/usr/bin/env python3
"""Typed methods, from outside: a real gadgetd, a gadget with declared
signatures (testgadget's shape, seen and liar), and every way a call
reaches it — gadgetctl, the gateway's HTTP API, another gadget through a
gadget binding, `gadgetd run --call`. A refused call must never reach the
gadget: its own count (seen) and gadgetd's (calls) stay put.
Usage: types_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET,
EXAMPLES."""
import json
import os
import subprocess
import sys

from gateway_util import Gateway
from harness import EXAMPLES, TESTGADGET, Daemon, check, gadgetd_run, main, policy, test, wait_for

GOOD = {"name": "ada", "id": 7}
# (arguments, the message gadgetd answers with): each refused before the gadget.
BAD = [
    ({"name": 5, "id": 1}, "shape: args.name: expected string(1..20), got int"),
    ({"id": 1}, "shape: args.name: missing required field"),
    ({"name": "a", "id": 1, "colour": "red"}, 'shape: args: unknown field "colour"'),
    ({"name": "a", "id": 1.5}, "shape: args.id: expected int | string, got double"),
    ({"name": "a", "id": 1, "times": 11}, "shape: args.times: 11 is above the maximum 10"),
    ({"name": "a", "id": 1, "tags": ["x", 2]}, "shape: args.tags[1]: expected string, got int"),
    ({"name": "a", "id": 1, "tags": ["a", "b", "c", "d"]}, "shape: args.tags: 4 items, above the maximum 3"),
    ({"name": "a", "id": 1, "point": {"x": 1}}, "shape: args.point.y: missing required field"),
    ({"name": "a", "id": 1, "point": {"x": 1, "y": "2"}}, "shape: args.point.y: expected int, got string"),
    ({"name": "a", "id": 1, "meta": {"k": "v"}}, "shape: args.meta.k: expected int, got string"),
    ([1, 2], "shape: args: expected {"),
    (None, "shape: args.name: missing required field"),
]
# Accepted: unions, optional/nullable fields, int as double, any, bytes.
GOOD_TOO = [
    {"name": "b", "id": "x7"},
    {"name": "c", "id": 1, "ratio": 2, "point": {"x": 1, "y": 2, "label": None}},
    {"name": "d", "id": 1, "extra": {"anything": [1, "two", None]}, "blob": {"$bytes": "AAE="}},
    {"name": "e", "id": 1, "tags": [], "meta": {}},
]


def ctl_call(d, gadget, method, args):
    return d.ctl("call", gadget, method, json.dumps(args))


def seen(d, gadget="tg"):
    r = d.ctl("call", gadget, "seen")
    check(r.returncode == 0, "seen: %r" % r.stderr)
    return int(r.stdout)


def start(d, *names, body=""):
    for n in names:
        policy(d.pol, n, body)
    d.ctl("reload")
    for n in names:
        wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")


@test
def typed_calls_checked_from_gadgetctl(tmp):
    with Daemon(tmp) as d:
        start(d, "tg")
        calls = d.list()["tg"]["calls"]
        for args, want in BAD:
            r = ctl_call(d, "tg", "shape", args)
            check(r.returncode == 1 and want in r.stderr, "shape(%r): %r, want %r" % (args, r.stderr, want))
        check(d.list()["tg"]["calls"] == calls, "refused calls counted as calls: %r" % d.list()["tg"])
        check(seen(d) == 0, "the gadget saw a refused call")
        for args in [GOOD] + GOOD_TOO:
            r = ctl_call(d, "tg", "shape", args)
            check(r.returncode == 0 and json.loads(r.stdout) == {"ok": True}, "shape(%r): %r" % (args, r))
        check(seen(d) == 1 + len(GOOD_TOO), "accepted calls that did not arrive")
        # A method without parameters takes null or {}, nothing else.
        check(d.ctl("call", "tg", "seen", "{}").returncode == 0, "seen({})")
        r = d.ctl("call", "tg", "seen", '{"x": 1}')
        check(r.returncode == 1 and 'seen: args: unknown field "x"' in r.stderr, "seen({x}): %r" % r.stderr)


@test
def typed_results_checked(tmp):
    with Daemon(tmp) as d:
        start(d, "tg")
        r = ctl_call(d, "tg", "liar", {"kind": "ok"})
        check(r.returncode == 0 and json.loads(r.stdout) == {"id": 1}, "liar ok: %r" % r)
        for kind, want in [("string", "liar: result: expected {id: int}, got string"),
                           ("extra", 'liar: result: unknown field "z"'),
                           ("nested", "liar: result.id: expected int, got string"),
                           ("null", "liar: result: expected {id: int}, got null")]:
            r = ctl_call(d, "tg", "liar", {"kind": kind})
            check(r.returncode == 1 and want in r.stderr and "breaks the method's declared signature" in r.stderr,
                  "liar %s: %r" % (kind, r.stderr))
        check("liar: result: expected {id: int}, got string" in d.logtext(), "no warning in gadgetd's log")
        audit = d.ctl("audit", "tg")
        recs = [json.loads(line) for line in audit.stdout.splitlines()]
        bad = [x for x in recs if x.get("binding") == "signature" and x.get("op") == "liar"]
        check(len(bad) == 4 and all(x["outcome"] == "error" for x in bad), "audit records: %r" % recs)
        check(d.state("tg") == "ready", "a broken result must not end the gadget")


@test
def typed_calls_checked_while_waiting_for_a_start(tmp):
    """Calls that wait for an idle gadget's start (Start=on-demand) are
    checked against its signatures once its hello declares them: a call
    of the wrong type is refused then, never sent; a result breaking the
    signature is refused as from a running gadget."""
    with Daemon(tmp) as d:
        policy(d.pol, "od", "Start=on-demand\n")
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("od") == "idle", what="od idle")
        r = ctl_call(d, "od", "liar", {"kind": "string"})
        check(r.returncode == 1 and "liar: result: expected {id: int}, got string" in r.stderr and
              "breaks the method's declared signature" in r.stderr, "a broken result after a start: %r" % r.stderr)
        # A restart while it still stops would start it again (a running
        # gadget's restart): the stop ends first, then the restart of a
        # stopped on-demand gadget makes it idle.
        check(d.ctl("stop", "od").returncode == 0, "stop")
        wait_for(lambda: d.state("od") == "stopped", what="od stopped")
        check(d.ctl("restart", "od").returncode == 0, "back to idle")
        wait_for(lambda: d.state("od") == "idle", what="od idle again")
        r = ctl_call(d, "od", "liar", {"kind": 5})
        check(r.returncode == 1 and "liar: args.kind: expected string, got int" in r.stderr,
              "a call of the wrong type after a start: %r" % r.stderr)
        check(seen(d, "od") == 0, "the gadget saw the refused call")


@test
def typed_calls_checked_through_gateway(tmp):
    with Gateway(tmp) as g:
        start(g, "tg")
        calls = g.gadgets()["tg"]["calls"]
        for args, want in BAD:
            status, body = g.call("tg", "shape", args)
            check(status == 400 and want in body["error"]["message"], "gateway shape(%r): %d %r" % (args, status, body))
        check(g.gadgets()["tg"]["calls"] == calls, "refused calls reached the gadget: %r" % g.gadgets()["tg"])
        status, body = g.call("tg", "liar", {"kind": "extra"})
        check(status == 502 and 'liar: result: unknown field "z"' in body["error"]["message"],
              "gateway liar: %d %r" % (status, body))
        status, body = g.call("tg", "shape", GOOD)
        check(status == 200 and body == {"ok": True}, "gateway good call: %d %r" % (status, body))
        check(seen(g) == 1, "the gadget saw a refused call")
        sigs = dict(zip(g.gadgets()["tg"]["methods"], g.gadgets()["tg"]["signatures"]))
        check(sigs["seen"] == "seen() -> int" and sigs["echo"] == "", "the gateway's signatures: %r" % sigs)


@test
def typed_calls_checked_through_gadget_binding(tmp):
    with Daemon(tmp) as d:
        start(d, "tg")
        start(d, "caller", body="[Binding TG]\nType=gadget\nTarget=tg\n")
        calls = d.list()["tg"]["calls"]
        for args, want in BAD:
            inner = {"method": "shape"} if args is None else {"method": "shape", "args": args}
            r = ctl_call(d, "caller", "binding", {"binding": "TG", "op": "call", "args": inner})
            check(r.returncode == 1 and want in r.stderr, "through TG shape(%r): %r" % (args, r.stderr))
        check(d.list()["tg"]["calls"] == calls, "refused calls reached the gadget: %r" % d.list()["tg"])
        r = ctl_call(d, "caller", "binding", {"binding": "TG", "op": "call",
                                               "args": {"method": "liar", "args": {"kind": "string"}}})
        check(r.returncode == 1 and "liar: result: expected {id: int}, got string" in r.stderr,
              "through TG liar: %r" % r.stderr)
        r = ctl_call(d, "caller", "binding", {"binding": "TG", "op": "call",
                                               "args": {"method": "shape", "args": GOOD}})
        check(r.returncode == 0 and json.loads(r.stdout) == {"ok": True}, "through TG good: %r" % r)
        check(seen(d) == 1, "the gadget saw a refused call")
        # The binding operations' own signatures, checked by the same code.
        r = ctl_call(d, "caller", "binding", {"binding": "TG", "op": "call", "args": {"method": 5}})
        check(r.returncode == 1 and "TG.call: args.method: expected string, got int" in r.stderr,
              "call with a method of the wrong type: %r" % r.stderr)


@test
def typed_kv_operations_checked(tmp):
    with Daemon(tmp) as d:
        start(d, "store", body="[Binding KV]\nType=kv\n")
        for args, want in [({"key": 5}, "KV.get: args.key: expected string | bytes, got int"),
                           ({"key": "k", "x": 1}, 'KV.get: args: unknown field "x"')]:
            r = ctl_call(d, "store", "binding", {"binding": "KV", "op": "get", "args": args})
            check(r.returncode == 1 and want in r.stderr, "kv get %r: %r" % (args, r.stderr))
        r = ctl_call(d, "store", "binding", {"binding": "KV", "op": "list", "args": {"limit": 0}})
        check(r.returncode == 1 and "KV.list: args.limit: 0 is below the minimum 1" in r.stderr,
              "kv list limit 0: %r" % r.stderr)
        st = d.ctl("status", "store").stdout
        check("get(key: string | bytes) -> any" in st and "KV (kv)" in st, "status lists kv's operations: %s" % st)


@test
def typed_run_call(tmp):
    pol = policy(tmp, "tg")
    for args, want in BAD:
        r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "shape", json.dumps(args)], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 1 and want in r.stderr, "run --call shape(%r): %r" % (args, r))
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "liar", '{"kind": "string"}'], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 1 and "liar: result: expected {id: int}, got string" in r.stderr,
          "run --call with a broken result: %r" % r)
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "shape", json.dumps(GOOD)], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0 and json.loads(r.stdout) == {"ok": True}, "run --call: %r" % r)


@test
def require_types(tmp):
    conf = os.path.join(tmp, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nRequireTypes=yes\n")
    with Daemon(tmp, extra=["--config", conf]) as d:
        policy(d.pol, "mixed")                               # echo, sleep, ... untyped
        policy(d.pol, "allowed", "RequireTypes=no\n")
        policy(d.pol, "hello", exec_path=os.path.join(EXAMPLES, "hello"))
        d.ctl("reload")
        wait_for(lambda: d.state("allowed") == "ready" and d.state("hello") == "ready", what="typed and allowed")
        wait_for(lambda: d.state("mixed") == "failed", what="mixed to fail")
        cause = d.list()["mixed"]["cause"]
        check(cause.startswith("untyped: ") and "(RequireTypes=yes)" in cause, "cause: %r" % cause)
    # Without the setting, the same gadget runs; a policy may still ask.
    plain = os.path.join(tmp, "plain")
    os.makedirs(plain, mode=0o755)
    with Daemon(plain) as d:
        start(d, "mixed")
        policy(d.pol, "strict", "RequireTypes=yes\n")
        d.ctl("reload")
        wait_for(lambda: d.state("strict") == "failed", what="strict to fail")


@test
def bad_signature_fails_the_gadget(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "bad", 'Environment="TESTGADGET_SIGNATURE=odd(x: strng) -> int"\n')
        d.ctl("reload")
        wait_for(lambda: d.state("bad") == "failed", what="bad to fail")
        log = d.ctl("logs", "bad").stdout
        check("signature of odd: column" in log and "strng" in log, "the gadget says why: %r" % log)


@test
def status_and_describe(tmp):
    with Daemon(tmp) as d:
        start(d, "tg", body="[Binding KV]\nType=kv\n")
        st = d.ctl("status", "tg").stdout
        check("seen() -> int" in st and "echo (untyped)" in st and "liar(kind: string) -> {id: int}" in st,
              "status: %s" % st)
        j = json.loads(d.ctl("--json", "status", "tg").stdout)
        sigs = dict(zip(j["methods"], j["signatures"]))
        check(sigs["seen"] == "seen() -> int" and sigs["echo"] == "", "status --json: %r" % sigs)
        check(j["bindings"][0]["ops"][0] == "get(key: string | bytes) -> any", "binding ops: %r" % j["bindings"])
        text = d.ctl("describe", "tg").stdout.splitlines()
        check("seen() -> int" in text and "echo (untyped)" in text, "describe: %r" % text)
        desc = json.loads(d.ctl("--json", "describe", "tg").stdout)
        m = {x["name"]: x for x in desc["methods"]}
        check(desc["name"] == "tg" and m["echo"] == {"name": "echo", "untyped": True}, "describe --json: %r" % desc)
        p = m["shape"]["params"]
        check(p["type"] == "object" and p["additionalProperties"] is False and
              sorted(p["required"]) == ["id", "name"] and p["properties"]["times"]["maximum"] == 10,
              "shape's params as JSON Schema: %r" % p)
        check(m["liar"]["result"]["properties"]["id"]["type"] == "integer", "liar's result: %r" % m["liar"])


if __name__ == "__main__":
    sys.exit(main())
