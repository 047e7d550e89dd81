#!/usr/bin/env python3
"""Integration tests of traces on one node: a real gadgetd with its
gateway, test gadgets and gadgetctl, exporting to a real OTLP receiver
(otlp.py: OpenTelemetry's own definitions decode what it gets).
Usage: traces_test.py TEST."""
import http.server
import json
import os
import secrets
import struct
import subprocess
import sys
import threading
import time

from attacks import answers, connect_unix, field, varint, CONTROL_PROTOCOL_VERSION
from gateway_util import Gateway
from harness import GADGETD, Daemon, check, main, policy, test, wait_for
from metrics_util import Metrics
from otlp import Receiver, chain, path

CALL_BACK = {"binding": "NEXT", "op": "call", "args": {"method": "echo", "args": "hi"}}


class Loopback:
    """A loopback HTTP server: a GET is answered 200 and its traceparent
    header kept (.seen); a POST is answered post_status, its body kept
    (.posts)."""

    def __init__(self, post_status=200):
        self.post_status = post_status
        self.seen, self.posts = [], []

    def __enter__(self):
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self, status, body):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                srv.seen.append(self.headers.get("traceparent"))
                self.answer(200, b"ok")

            def do_POST(self):
                srv.posts.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                self.answer(srv.post_status, b"")

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()


def exporting(tmp, rx, web_port=None):
    """A gateway node exporting to rx: "front" (bindings NEXT to "back",
    and WEB to a loopback server if web_port) and "back"."""
    d = Gateway(tmp)
    with open(d.config, "a") as f:
        f.write("[Daemon]\nTraceExport=%s\n" % rx.url)
    web = "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/\n" % web_port if web_port else ""
    policy(d.pol, "front", "[Binding NEXT]\nType=gadget\nTarget=back\n" + web)
    policy(d.pol, "back")
    return d


def new_traceparent():
    return "00-%s-%s-01" % (secrets.token_hex(16), secrets.token_hex(8))


@test
def traces_chain_exported_and_shown(tmp):
    """A call through the gateway with a traceparent reaches the OTLP
    receiver as one trace under it (front's call, its binding call, back's
    call: each the parent of the next), the answer's traceresponse names
    the first; `gadgetctl trace` prints the same tree; the audit record of
    the binding call carries the trace id; an http binding's request
    carries the binding span as its traceparent."""
    with Receiver() as rx, Loopback() as web:
        with exporting(tmp, rx, web.port) as d:
            d.wait_ready("front", "back")
            parent = new_traceparent()
            tid = parent[3:35]
            before = time.time_ns()
            status, hdrs, body = d.request("POST", "/api/gadgets/front/call/binding", json.dumps(CALL_BACK),
                                           headers={"traceparent": parent})
            after = time.time_ns()
            check(status == 200 and json.loads(body) == "hi", "the call: %d %r" % (status, body))
            spans = rx.wait(tid, 3)
            check(path(spans) == ["front binding", "front NEXT.call", "back echo"], "the chain: %r" % path(spans))
            by_id, root = chain(spans)
            check(root["parentSpanId"] == parent[36:52], "the root's parent is the caller's span: %r" % root)
            check(hdrs.get("traceresponse", "")[3:52] == tid + "-" + root["spanId"],
                  "traceresponse names the call's span: %r" % hdrs.get("traceresponse"))
            for s in spans:
                binding = s["name"] == "front NEXT.call"
                check(s["kind"] == (3 if binding else 2) and s["status"]["code"] == 1 and
                      s["attributes"]["gadgetd.outcome"] == "ok" and
                      int(s["end"]) >= int(s["start"]) > 0, "span %s: %r" % (s["name"], s))
            check(spans[0]["resource"].get("service.name") == "gadgetd", "resource: %r" % spans[0]["resource"])
            # Wall-clock times (a span's start comes from the monotonic
            # reading its call took): within the request, each hop's
            # start at or after its parent's (1 ms for the clocks' grain).
            down, cur = [], root
            while cur:
                down.append(cur)
                cur = next((s for s in spans if s["parentSpanId"] == cur["spanId"]), None)
            starts = [int(s["start"]) for s in down]
            check(all(before - 10**6 <= t and int(s["end"]) <= after + 10**6 for t, s in zip(starts, down)) and
                  starts == sorted(starts), "span times %r (root first) outside the request's [%d, %d] or "
                  "before their parents'" % ([(s["start"], s["end"]) for s in down], before, after))

            r = d.ctl("--json", "trace", tid)
            check(r.returncode == 0, "gadgetctl trace: %r" % r.stderr)
            shown = json.loads(r.stdout)
            check({(s["span_id"], s["parent_id"]) for s in shown["spans"]} ==
                  {(s["spanId"], s["parentSpanId"]) for s in spans}, "trace --json: %r" % shown)
            r = d.ctl("trace", tid)
            lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
            check(lines[0] == "trace " + tid and lines[1].startswith("call front binding (ok)") and
                  lines[2].startswith("  binding front NEXT.call (ok)") and
                  lines[3].startswith("    call back echo (ok)"), "the tree: %r" % r.stdout)

            r = d.ctl("audit", "front")
            recs = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
            check(any(x.get("binding") == "NEXT" and x.get("trace") == tid for x in recs),
                  "front's audit names the trace: %r" % r.stdout)

            url = "http://127.0.0.1:%d/x" % web.port
            r = d.ctl("call", "--trace", "front", "binding",
                      json.dumps({"binding": "WEB", "op": "request", "args": {"url": url}}))
            check(r.returncode == 0 and r.stderr.startswith("trace "), "call --trace: %r" % r)
            tid2 = r.stderr.split()[1]
            spans = rx.wait(tid2, 2)
            req = [s for s in spans if s["name"] == "front WEB.request"]
            check(req and web.seen[-1] == "00-%s-%s-01" % (tid2, req[0]["spanId"]),
                  "the request's traceparent %r, spans %r" % (web.seen, spans))


def raw_call(sock, gadget, method, traceparent):
    """A control Call with a traceparent gadgetctl would refuse."""
    call = field(1, gadget.encode()) + field(2, method.encode()) + field(10, traceparent.encode())
    msg = varint(1 << 3) + varint(7) + field(7, call) + varint(11 << 3) + varint(CONTROL_PROTOCOL_VERSION)
    s = connect_unix(sock)
    try:
        s.sendall(struct.pack("<I", len(msg)) + msg)
        return answers(s, 1, timeout=20)
    finally:
        s.close()


@test
def traces_hostile_traceparent_ignored(tmp):
    """A traceparent that breaks the W3C format (too long, not lower-case
    hex, an all-zero id, version ff) is ignored, through the gateway and
    the control socket: the call goes on and starts a trace of its own.
    gadgetctl refuses one before sending it."""
    good = new_traceparent()
    bad = [good + "-" + "a" * 600, good[:-1] + "1x", good.upper(), good[:3] + "0" * 32 + good[35:],
           good[:36] + "0" * 16 + good[52:], "ff" + good[2:], good[:20] + "g" + good[21:], good[:-2]]
    with Receiver() as rx:
        with exporting(tmp, rx) as d:
            d.wait_ready("front", "back")
            for tp in bad:
                status, hdrs, body = d.request("POST", "/api/gadgets/back/call/echo", '"x"',
                                               headers={"traceparent": tp})
                check(status == 200 and json.loads(body) == "x", "gateway call with %r: %d %r" % (tp, status, body))
                tid = hdrs.get("traceresponse", "")[3:35]
                check(len(tid) == 32 and tid not in tp.lower(), "a trace of its own for %r: %r" % (tp, tid))
                spans = rx.wait(tid, 1)
                check(spans[0]["parentSpanId"] == "", "no parent taken from %r: %r" % (tp, spans))
            with rx.lock:
                before = {s["traceId"] for s in rx.spans}
            for tp in bad[3:5]:
                a = raw_call(d.sock, "back", "echo", tp)
                check(a and a[0]["kind"] == "other", "control call with %r: %r" % (tp, a))
                r = d.ctl("call", "--traceparent", tp, "back", "echo")
                check(r.returncode == 2 and "not a W3C traceparent" in r.stderr, "gadgetctl with %r: %r" % (tp, r))
            def new():
                with rx.lock:
                    return {s["traceId"] for s in rx.spans} - before
            wait_for(lambda: len(new()) >= 2, what="the two control calls' traces")
            check(not (new() & {tp[3:35].lower() for tp in bad}), "a hostile trace id was taken: %r" % new())


@test
def traces_sampled_export(tmp):
    """TraceSample=0: a new trace is not sampled (its flags 00) and not
    exported, though gadgetctl trace shows it; a chain whose traceparent
    says sampled (01) is exported all the same, as W3C asks."""
    with Receiver() as rx:
        d = exporting(tmp, rx)
        with open(d.config, "a") as f:
            f.write("TraceSample=0\n")
        with d:
            d.wait_ready("front", "back")
            status, hdrs, _ = d.request("POST", "/api/gadgets/front/call/binding", json.dumps(CALL_BACK))
            tr = hdrs.get("traceresponse", "")
            check(status == 200 and tr.endswith("-00"), "an unsampled trace: %d %r" % (status, tr))
            r = d.ctl("--json", "trace", tr[3:35])
            check(r.returncode == 0 and len(json.loads(r.stdout)["spans"]) == 3, "kept all the same: %r" % r)
            parent = new_traceparent()
            status, hdrs, _ = d.request("POST", "/api/gadgets/front/call/binding", json.dumps(CALL_BACK),
                                        headers={"traceparent": parent})
            check(status == 200 and hdrs.get("traceresponse", "").endswith("-01"), "sampled: %r" % hdrs)
            rx.wait(parent[3:35], 3)
            # The export keeps the ring's order: the first trace would be there by now.
            check(not rx.of(tr[3:35]), "the unsampled trace was exported: %r" % rx.of(tr[3:35]))


@test
def traces_off_and_bad_export(tmp):
    """TraceKeep=0 turns tracing off: calls go on, no span is kept (trace
    says so), no audit record names a trace. A TraceExport= that is not an
    http(s) URL stops gadgetd at its start, naming the line. A collector
    that refuses the batches costs their spans (counted, logged), not the
    calls."""
    conf = os.path.join(tmp, "bad.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nTraceExport=ftp://127.0.0.1/v1/traces\n")
    r = subprocess.run([GADGETD, "--config", conf, "--policy-dir", tmp], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "bad.conf:2" in r.stderr, "a bad TraceExport=: %r" % r.stderr)
    conf = os.path.join(tmp, "off.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nTraceKeep=0\n")
    with Daemon(tmp, extra=["--config", conf]) as d:
        policy(d.pol, "front", "[Binding NEXT]\nType=gadget\nTarget=back\n")
        policy(d.pol, "back")
        d.ctl("reload")
        wait_for(lambda: d.state("front") == "ready" and d.state("back") == "ready", what="front and back")
        r = d.ctl("call", "--trace", "front", "binding", json.dumps(CALL_BACK))
        check(r.returncode == 0 and r.stdout.strip() == '"hi"', "a call with tracing off: %r" % r)
        r = d.ctl("trace", r.stderr.split()[1])
        check(r.returncode == 1 and "tracing is off" in r.stderr, "trace with tracing off: %r" % r)
        r = d.ctl("audit", "front")
        check('"binding":"NEXT"' in r.stdout and '"trace"' not in r.stdout, "the audit without a trace: %r" % r.stdout)
    # A collector that refuses every batch: the spans are dropped, counted
    # and logged, and calls go on.
    with Loopback(post_status=503) as srv:
        os.makedirs(os.path.join(tmp, "r"))
        with Metrics(os.path.join(tmp, "r"), more="TraceExport=http://127.0.0.1:%d/v1/traces\n" % srv.port) as d:
            policy(d.pol, "back")
            d.ctl("reload")
            wait_for(lambda: d.state("back") == "ready", what="back")
            check(d.ctl("call", "back", "echo").returncode == 0, "a call while the collector refuses")
            wait_for(lambda: "spans dropped" in d.logtext(), what="the dropped spans in gadgetd's log")
            check(srv.posts and d.ctl("call", "back", "echo").returncode == 0, "calls go on: %r" % srv.posts)
            # ... and served by the metrics endpoint.
            _, _, text = d.get()
            dropped = [int(l.split()[1]) for l in text.splitlines() if l.startswith("gadgetd_trace_spans_dropped_total ")]
            check(dropped and dropped[0] > 0, "gadgetd_trace_spans_dropped_total: %r" % dropped)


if __name__ == "__main__":
    sys.exit(main())
