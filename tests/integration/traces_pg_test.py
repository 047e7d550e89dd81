#!/usr/bin/env python3
"""Integration test of a trace across nodes: a real PostgreSQL server
(pgserver.py), two gadgetd nodes with the peer link, each exporting to one
real OTLP receiver (otlp.py). Usage: traces_pg_test.py TEST."""
import json
import secrets
import sys
import time

from harness import Healthy, check, main, policy, test, wait_for
from otlp import Receiver, chain, path
from pgnodes import certs, nodes_seen, peer_node, start_all, stop_all
from peerclient import Peer, call, trace
from pgserver import PgServer


@test
def pg_traces_three_gadgets_two_nodes(tmp):
    """x (node a) calls y (node b), which calls z (node a), each through a
    gadget binding: the receiver gets one trace whose spans form one chain
    from gadgetctl's call of x to z's call, each hop's parent the one
    before, across both nodes (a forwarded call a span on each node, the
    receiving one under the sending one); `gadgetctl trace` on either node
    prints the same spans with the same links, and names a node that does
    not answer; so does the workshop's trace view (the gateway's
    /api/traces/ID on a)."""
    with PgServer(tmp) as pg, Receiver() as rx:
        cd = certs(tmp, "a", "b")
        ds = [peer_node(tmp, pg, n, cd, gateway=n == "a") for n in "ab"]
        for d in ds:
            with open(d.extra[1], "a") as f:
                f.write("TraceExport=%s\n" % rx.url)
            policy(d.pol, "x", "Nodes=a\n[Binding NEXT]\nType=gadget\nTarget=y\n")
            policy(d.pol, "y", "Nodes=b\n[Binding NEXT]\nType=gadget\nTarget=z\n")
            policy(d.pol, "z", "Nodes=a\n")
        a, b = ds
        try:
            start_all(ds)
            wait_for(lambda: a.state("x") == "ready" and b.state("y") == "ready" and a.state("z") == "ready",
                     timeout=20, what="x and z on a, y on b")
            nodes_seen(a, 2)
            nodes_seen(b, 2)
            inner = {"binding": "NEXT", "op": "call", "args": {"method": "echo", "args": "deep"}}
            outer = {"binding": "NEXT", "op": "call", "args": {"method": "binding", "args": inner}}
            r = a.ctl("call", "--trace", "x", "binding", json.dumps(outer))
            check(r.returncode == 0 and r.stdout.strip() == '"deep"', "the chain: %r" % r)
            tid = r.stderr.split()[1]
            spans = rx.wait(tid, 7)
            names = path(spans)
            check(names == ["x binding", "x NEXT.call", "y binding", "y binding", "y NEXT.call", "z echo",
                            "z echo"], "the chain's hops: %r" % names)
            nodes = [s["attributes"]["gadgetd.node"] for s in spans]
            by_id, root = chain(spans)
            order = [root]
            while len(order) < len(spans):
                order.append(next(s for s in spans if s["parentSpanId"] == order[-1]["spanId"]))
            check([s["attributes"]["gadgetd.node"] for s in order] == ["a", "a", "a", "b", "b", "b", "a"],
                  "the nodes of the hops: %r" % nodes)
            check([s["attributes"].get("gadgetd.peer_node") for s in order] ==
                  [None, None, "b", "a", None, "a", "b"], "the peers: %r" % order)
            want = {(s["spanId"], s["parentSpanId"]) for s in spans}
            for d in ds:
                r = d.ctl("--json", "trace", tid)
                check(r.returncode == 0, "trace on %s: %r" % (d.tmp[-1], r.stderr))
                got = json.loads(r.stdout)
                check({(s["span_id"], s["parent_id"]) for s in got["spans"]} == want and not got["unreached"],
                      "trace on node %s: %r" % (d.tmp[-1], got))
            r = b.ctl("trace", tid)
            check(r.returncode == 0 and r.stdout.splitlines()[-1].startswith("            call z echo (ok)"),
                  "the tree on b: %r" % r.stdout)
            # The workshop's trace link: the same spans, from both nodes.
            st, _, body = a.request("GET", "/api/traces/" + tid)
            got = json.loads(body) if st == 200 else {}
            check({(x["span_id"], x["parent_id"]) for x in got.get("spans", [])} == want and
                  got["unreached"] == [], "the gateway's trace on a: %d %r" % (st, body[:300]))
            # The owner's audit of the forwarded call names its trace.
            def forwarded_audited():
                r = a.ctl("audit", "z")
                return any(x.startswith("{") and json.loads(x).get("binding") == "node" and
                           json.loads(x).get("trace") == tid for x in r.stdout.splitlines())
            wait_for(forwarded_audited, what="a's audit record of z's forwarded call, with the trace id")
            hostile_traceparents(a, cd, rx)
            trace_flood(a, cd, tid)
            # A node that does not answer is named; the tree comes without it.
            b.stop()
            r = a.ctl("--json", "trace", tid)
            got = json.loads(r.stdout) if r.returncode == 0 else {}
            check(got.get("unreached") == ["b"] and len(got["spans"]) == 4, "trace with b down: %r" % r)
            r = a.ctl("trace", tid)
            check(r.returncode == 0 and "not answered by node b" in r.stderr, "the text with b down: %r" % r)
            st, _, body = a.request("GET", "/api/traces/" + tid)
            got = json.loads(body) if st == 200 else {}
            check(got.get("unreached") == ["b"] and len(got["spans"]) == 4, "the gateway's trace with b down: %d %r"
                  % (st, body[:300]))
        finally:
            stop_all(ds)


def trace_flood(a, cd, tid):
    """Hostile load, asks for spans: node b (its key leaked, or b
    hostile) asks node a for a trace's spans 200 times at once over two
    sessions. At most NODELINK_TRACES_PER_S (8) a second are answered —
    with a's spans of the trace — and the others are refused as busy,
    naming the bound, while a healthy caller on a is answered throughout;
    the refusals are logged once, not 192 times."""
    addr = [n["peer"] for n in json.loads(a.ctl("--json", "nodes").stdout)["nodes"] if n["name"] == "a"][0]
    asks = 200
    with Healthy(a, "z"):
        peers = [Peer(addr, cd, "b", "a") for _ in range(2)]
        t0 = time.monotonic()
        for i in range(asks):
            peers[i % 2].send(trace(i + 1, tid))
        answers = [peers[i % 2].answer(timeout=30) for i in range(asks)]
        took = time.monotonic() - t0
        for p in peers:
            p.close()
    spans = [r for r in answers if r and r["kind"] == "other"]
    busy = [r for r in answers if r and r["kind"] == "error" and r["code"] == 7]
    check(len(spans) + len(busy) == asks, "every ask answered, with spans or busy: %r" % answers[:3])
    check(busy and "asks for traces more than 8 times a second" in busy[0]["message"],
          "the asks past the bound are refused as busy: %r" % busy[:1])
    # The bucket holds one second's 8 and drains 8 a second.
    check(len(spans) <= 8 * (took + 1) + 1, "%d asks answered in %.2f s" % (len(spans), took))
    check(a.logtext().count("asks for traces more than 8 times a second") == 1, "the refusals logged once")


def hostile_traceparents(a, cd, rx):
    """As node b, calls of z on a carrying traceparents: a valid one is
    the parent of the call's span there (nothing more); one that breaks the
    format is ignored, the call answered under a trace of its own."""
    addr = [n["peer"] for n in json.loads(a.ctl("--json", "nodes").stdout)["nodes"] if n["name"] == "a"][0]
    good = "00-%s-%s-01" % (secrets.token_hex(16), secrets.token_hex(8))
    bad = [good[:3] + "0" * 32 + good[35:], good[:36] + "0" * 16 + good[52:], good.upper(), good + "-x" * 300,
           "ff" + good[2:]]
    p = Peer(addr, cd, "b", "a")
    try:
        for i, tp in enumerate([good] + bad):
            p.send(call(i + 1, "z", "echo", traceparent=tp))
            check(p.answer(timeout=20) == {"kind": "other"}, "a call with traceparent %r" % tp[:80])
    finally:
        p.close()
    s = rx.wait(good[3:35], 1)[0]
    check(s["parentSpanId"] == good[36:52] and s["attributes"].get("gadgetd.peer_node") == "b",
          "the valid traceparent is the span's parent: %r" % s)

    def roots():
        with rx.lock:
            return [x for x in rx.spans if x["name"] == "z echo" and x["parentSpanId"] == "" and
                    x["attributes"].get("gadgetd.peer_node") == "b"]
    wait_for(lambda: len(roots()) >= len(bad), what="the calls with hostile traceparents, each a trace of its own")
    check(not {x["traceId"] for x in roots()} & {tp[3:35].lower() for tp in bad}, "a hostile trace id was taken")


if __name__ == "__main__":
    sys.exit(main())
