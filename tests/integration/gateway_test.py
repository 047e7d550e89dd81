#!/usr/bin/env python3
"""Integration tests of the HTTP gateway over plain HTTP: the token, the
JSON API and its errors, the body limit, the headers, the audit records,
the config file's [Gateway] section. Usage: gateway_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET, EXAMPLES."""
import json
import os
import re
import shutil
import subprocess
import threading

from gateway_util import Gateway
from harness import EXAMPLES, GADGETD, check, main, policy, test, wait_for

SECURITY = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
            "cache-control": "no-store"}


def examples(g, *names):
    for n in names:
        shutil.copy(os.path.join(EXAMPLES, n + ".policy"), g.pol)
    g.ctl("reload")
    g.wait_ready(*names)


def check_security_headers(h, what):
    for k, v in SECURITY.items():
        check(h.get(k) == v, "%s: %s is %r" % (what, k, h.get(k)))


@test
def token_required(tmp):
    with Gateway(tmp) as g:
        examples(g, "counter")
        for path in ("/", "/api/gadgets", "/gadgets/counter/ui", "/nowhere", "/api/gadgets/counter/activity",
                     "/api/traces/" + "ab" * 16):
            status, h, body = g.request("GET", path, auth=False)
            check(status == 401, "GET %s without a token: %d" % (path, status))
            check(h.get("www-authenticate", "").startswith("Bearer"), "no WWW-Authenticate on %s" % path)
            check(json.loads(body)["error"]["code"] == "unauthorized", "401 body: %r" % body)
        status, _, _ = g.request("POST", "/api/gadgets/counter/call/increment", "null", auth=False)
        check(status == 401, "call without a token: %d" % status)
        for bad in ("Bearer " + g.token[:-1], "Bearer " + g.token + "x", "Bearer ", "Basic " + g.token):
            status, _, _ = g.request("GET", "/api/gadgets", auth=False, headers={"Authorization": bad})
            check(status == 401, "Authorization %r accepted: %d" % (bad[:20], status))
        status, _, _ = g.request("GET", "/api/gadgets", auth=False,
                                 headers={"Cookie": "gadgetd_session=" + "0" * 64})
        check(status == 401, "a made-up session cookie was accepted: %d" % status)
        status, _, _ = g.request("GET", "/api/gadgets", auth=False, headers={"Cookie": "gadgetd_session=" + g.token})
        check(status == 401, "the token as a cookie was accepted: %d" % status)
        wrong = g.token[:-1] + ("1" if g.token.endswith("0") else "0")  # never the token itself
        status, _, _ = g.request("GET", "/?token=" + wrong, auth=False)
        check(status == 401, "login with a wrong token: %d" % status)
        status, _, _ = g.request("GET", "/api/gadgets")
        check(status == 200, "the right token refused: %d" % status)
        check(g.call("counter", "increment")[0] == 200, "call with the token")
        check('gateway: refused "/": no valid token' in g.logtext(), "refusals not logged")
        check(g.token not in g.logtext(), "the token reached gadgetd's log")


@test
def login_cookie(tmp):
    with Gateway(tmp) as g:
        status, h, _ = g.request("GET", "/?token=" + g.token, auth=False)
        check(status == 303 and h.get("location") == "/", "login: %d %r" % (status, h.get("location")))
        cookie = h.get("set-cookie", "")
        m = re.match(r"gadgetd_session=([0-9a-f]{64}); ", cookie)
        check(m, "session cookie: %r" % cookie)
        for flag in ("HttpOnly", "SameSite=Strict", "Path=/"):
            check(flag in cookie.split("; "), "cookie lacks %s: %r" % (flag, cookie))
        check(g.token not in cookie, "the token itself is the cookie")
        check_security_headers(h, "login")
        session = {"Cookie": "other=1; gadgetd_session=" + m.group(1)}
        status, h, body = g.request("GET", "/", auth=False, headers=session)
        check(status == 200 and b"gadgetd workshop" in body, "page with the cookie: %d" % status)
        status, _, _ = g.request("GET", "/api/gadgets", auth=False, headers=session)
        check(status == 200, "API with the cookie: %d" % status)
        status, _, _ = g.request("GET", "/?view=1", auth=False, headers=session)
        check(status == 200, "a query without a token is no login: %d" % status)


@test
def foreign_requests_refused(tmp):
    with Gateway(tmp) as g:
        host = "127.0.0.1:%d" % g.port
        for name, hdrs in (("Origin of another site", {"Origin": "http://evil.example"}),
                           ("Origin of another port", {"Origin": "http://127.0.0.1:1"}),
                           ("Origin null (a sandboxed frame)", {"Origin": "null"}),
                           ("cross-site fetch", {"Sec-Fetch-Site": "cross-site"}),
                           ("same-site fetch", {"Sec-Fetch-Site": "same-site"}),
                           ("foreign Host (DNS rebinding)", {"Host": "evil.example:%d" % g.port})):
            for path in ("/api/gadgets", "/api/gadgets/counter/activity", "/api/traces/" + "ab" * 16):
                status, _, body = g.request("GET", path, headers=hdrs)
                check(status == 403 and json.loads(body)["error"]["code"] == "forbidden",
                      "%s %s: %d %r" % (name, path, status, body))
        for ok in ({"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"},
                   {"Host": "localhost:%d" % g.port, "Origin": "http://localhost:%d" % g.port},
                   {"Sec-Fetch-Site": "none"}):
            status, _, _ = g.request("GET", "/api/gadgets", headers=ok)
            check(status == 200, "%r refused: %d" % (ok, status))


@test
def json_api(tmp):
    with Gateway(tmp) as g:
        examples(g, "counter", "notes")
        policy(g.pol, "plain", "CallTimeout=500ms\n")
        g.ctl("reload")
        g.wait_ready("plain")
        gl = g.gadgets()
        check(set(gl) == {"counter", "notes", "plain"}, "list: %r" % gl)
        check(gl["counter"]["ui"] and gl["notes"]["ui"] and not gl["plain"]["ui"], "ui flags: %r" % gl)
        check(sorted(gl["counter"]["methods"]) == ["get", "increment"], "methods: %r" % gl["counter"])
        check(gl["counter"]["state"] == "ready", "state: %r" % gl["counter"])
        check(g.call("counter", "increment") == (200, 1), "increment")
        check(g.call("counter", "increment") == (200, 2), "increment again")
        check(g.call("notes", "add", {"title": "t", "text": "x\u00e9"}) == (200, None), "notes add")
        check(g.call("notes", "get", {"title": "t"}) == (200, "x\u00e9"), "notes get")
        check(g.call("plain", "echo", "h\u00e9llo \u2603") == (200, "h\u00e9llo \u2603"), "a string round trip")
        check(g.call("plain", "echo", 2 ** 40) == (200, 2 ** 40), "an int round trip")
        check(g.call("plain", "echo") == (200, None), "no body is null")

        def err(status, code, call, *want):
            got_status, body = call
            e = body.get("error", {})
            check(got_status == status and e.get("code") == code and all(w in e.get("message", "") for w in want),
                  "want %d %s %r, got %d %r" % (status, code, want, got_status, body))

        status, h, body = g.request("POST", "/api/gadgets/counter/call/get", b"{bad",
                                    headers={"Content-Type": "application/json"})
        err(400, "bad_json", (status, json.loads(body)), "not valid JSON", "line 1")
        check(h.get("content-type", "").startswith("application/json"), "error content type %r" % h)
        err(404, "not_found", g.call("nope", "get"), 'no gadget named "nope"')
        err(404, "no_method", g.call("counter", "nope"), 'no method "nope"')
        err(404, "no_method", g.call("counter", "b%2Fad"), "no such method")
        err(404, "not_found", g.call("notes", "get", {"title": "missing"}))
        err(400, "invalid", g.call("notes", "add", {"title": 1}), "add: args.title: expected string(1..200), got int")
        activity_and_traces(g, err)
        err(504, "timeout", g.call("plain", "hang"), "CallTimeout")
        status, _, body = g.request("POST", "/api/gadgets/counter/call/get", b"null",
                                    headers={"Content-Type": "text/plain"})
        err(415, "unsupported_media_type", (status, json.loads(body)), "application/json")
        status, h, body = g.request("GET", "/api/gadgets/counter/call/get")
        check(status == 405 and h.get("allow") == "POST", "GET on a call: %d %r" % (status, h.get("allow")))
        status, h, body = g.request("POST", "/api/gadgets", b"null")
        check(status == 405 and h.get("allow") == "GET", "POST on the list: %d" % status)
        status, _, body = g.request("GET", "/api/nowhere")
        err(404, "not_found", (status, json.loads(body)), "no such page")
        status, _, _ = g.request("PUT", "/api/gadgets", b"null")
        check(status in (405, 501), "PUT: %d" % status)
        g.ctl("stop", "counter")
        wait_for(lambda: g.gadgets()["counter"]["state"] == "stopped", what="counter stopped")
        err(503, "unavailable", g.call("counter", "get"), "not ready")
        check(g.gadgets()["counter"]["calls"] == 2, "calls counted: %r" % g.gadgets()["counter"])


def get_json(g, path):
    status, _, body = g.request("GET", path)
    return status, json.loads(body)


def activity_and_traces(g, err):
    """The workshop's view of a gadget (json_api's daemon): its counters,
    its call log (the last 32 calls, newest first, each with its trace id)
    and its last log lines (50 at most, escaped); the spans of a trace
    behind a call; every answer bounded, every id and name checked."""
    counter = g.gadgets()["counter"]
    # Its 2 increments and the call of a method it lacks (the other
    # refusals above never reached it: a bad body, a method name no gadget
    # could declare).
    check(counter["calls_total"] == 3 and counter["errors"] == 1 and 0 < counter["p99_us"] <= 5000000 and
          counter["memory_bytes"] > 0, "counter's numbers in the list: %r" % counter)
    for i in range(40):
        check(g.call("plain", "echo", i) == (200, i), "echo %d" % i)
    status, h, _ = g.request("POST", "/api/gadgets/plain/call/spew", json.dumps({"lines": 60, "bytes": 3}))
    check(status == 200 and h.get("traceresponse"), "spew: %d %r" % (status, h))
    trace = h["traceresponse"].split("-")[1]

    def settled():
        status, a = get_json(g, "/api/gadgets/plain/activity")
        check(status == 200, "activity: %d %r" % (status, a))
        return a if len(a["events"]) == 50 and a["events"][-1]["text"] == "\\x01" * 3 else None
    a = wait_for(settled, what="plain's 60 spewed lines among its events")
    check(len(a["call_log"]) == 32, "the call log holds the last 32: %d" % len(a["call_log"]))
    last = a["call_log"][0]
    check(last["method"] == "spew" and last["outcome"] == "ok" and last["trace"] == trace and
          last["duration_us"] > 0, "spew's line of the call log: %r" % last)
    check([c["method"] for c in a["call_log"][1:]] == ["echo"] * 31, "echo's calls after it: %r" % a["call_log"][:3])
    e = a["events"][-1]
    check(e["stream"] == "stdout" and e["run"] == 1 and e["time_ms"] > 0, "an event: %r" % e)
    # Its 3 calls above (a string, an int, a null), the 40 echoes and spew.
    check(a["calls"] == 44 and a["errors"] == 0 and a["p99_us"] > 0 and a["memory_bytes"] > 0, "numbers: %r" % {
        k: a[k] for k in ("calls", "errors", "p99_us", "memory_bytes")})
    # A method it never declared is logged under the metrics' label, never
    # by the name a caller chose.
    err(404, "no_method", g.call("plain", "made_up_by_caller"))
    _, a = get_json(g, "/api/gadgets/plain/activity")
    check(a["call_log"][0]["method"] == "_other" and a["call_log"][0]["outcome"] == "no_method" and
          "made_up_by_caller" not in json.dumps(a), "an undeclared method's line: %r" % a["call_log"][0])
    err(404, "not_found", get_json(g, "/api/gadgets/nope/activity"), 'no gadget named "nope"')
    err(404, "not_found", get_json(g, "/api/gadgets/..%2Fx/activity"))

    status, t = get_json(g, "/api/traces/" + trace)
    check(status == 200 and t["trace_id"] == trace, "the trace: %d %r" % (status, t))
    spans = t["spans"]
    check(len(spans) == 1 and spans[0]["gadget"] == "plain" and spans[0]["name"] == "spew" and
          spans[0]["kind"] == "call" and spans[0]["outcome"] == "ok" and spans[0]["parent_id"] == "",
          "spew's span: %r" % spans)
    for bad in ("0" * 32, trace.upper(), trace[:-1], trace + "0", "x" * 32):
        err(400, "invalid", get_json(g, "/api/traces/" + bad), "32 lower-case hex digits")
    err(404, "not_found", get_json(g, "/api/traces/" + "ab" * 16), "no span of trace")
    status, h, _ = g.request("POST", "/api/traces/" + trace, b"null")
    check(status == 405 and h.get("allow") == "GET", "POST on a trace: %d" % status)


@test
def list_in_pages(tmp):
    """GET /api/gadgets answers at most 256 gadgets, by name; ?after=NAME
    the next ones ("more" says whether there are), "total" all of them."""
    with Gateway(tmp) as g:
        for i in range(300):
            policy(g.pol, "g%03d" % i, "Start=on-demand\n")
        g.ctl("reload")
        status, first = get_json(g, "/api/gadgets")
        names = [x["name"] for x in first["gadgets"]]
        check(status == 200 and first["total"] == 300 and first["more"] and names == ["g%03d" % i for i in range(256)],
              "the first page: %d %r" % (status, {k: first[k] for k in ("total", "more")}))
        status, rest = get_json(g, "/api/gadgets?after=g255")
        check(status == 200 and not rest["more"] and [x["name"] for x in rest["gadgets"]] ==
              ["g%03d" % i for i in range(256, 300)], "the next page: %d %r" % (status, rest.get("more")))
        status, none = get_json(g, "/api/gadgets?after=zzz")
        check(status == 200 and none["gadgets"] == [] and not none["more"], "after the last: %r" % none)
        for bad in ("..", "a%2Fb", ""):
            status, body = get_json(g, "/api/gadgets?after=" + bad)
            check(status == 400 and body["error"]["code"] == "invalid", "after=%r: %d %r" % (bad, status, body))


@test
def body_limit(tmp):
    with Gateway(tmp) as g:
        policy(g.pol, "plain")
        g.ctl("reload")
        g.wait_ready("plain")
        big = b'"' + b"a" * (1024 * 1024) + b'"'
        status, _, _ = g.request("POST", "/api/gadgets/plain/call/echo", big,
                                 headers={"Content-Type": "application/json"})
        check(status == 413, "a body over 1M: %d" % status)
        status, body = g.call("plain", "echo", "a" * 1000)
        check(status == 200 and body == "a" * 1000, "a small call after the big one: %d" % status)
        audit = open(os.path.join(tmp, "state", "audit.log")).read()
        check(audit.count('"call echo"') == 1, "the refused body reached the gadget: %r" % audit)


@test
def ui_and_headers(tmp):
    with Gateway(tmp) as g:
        examples(g, "counter")
        policy(g.pol, "plain")
        g.ctl("reload")
        g.wait_ready("plain")
        status, h, body = g.request("GET", "/gadgets/counter/ui")
        check(status == 200 and h.get("content-type") == "text/html; charset=utf-8", "UI: %d %r" % (status, h))
        csp = h.get("content-security-policy", "")
        for part in ("sandbox allow-scripts", "default-src 'none'", "frame-ancestors 'self'",
                     "form-action 'none'", "base-uri 'none'"):
            check(part in csp, "UI CSP lacks %r: %r" % (part, csp))
        check("connect-src" not in csp and "allow-same-origin" not in csp, "UI CSP opens something: %r" % csp)
        check_security_headers(h, "UI")
        text = body.decode()
        check(text.startswith("<!DOCTYPE html><script>\n/* The capability of a sandboxed frame"),
              "stub not after the doctype: %r" % text[:80])
        check('("counter", 1048576, "ui");\n</script>' in text, "stub not called with the gadget's name and kind ui")
        ui = re.search(r"^UI=(.*)$", open(os.path.join(EXAMPLES, "counter.policy")).read(), re.M).group(1)
        source = open(ui).read()
        check(text.endswith(source[len("<!DOCTYPE html>"):]), "the UI file is not served as it is")
        status, _, _ = g.request("GET", "/gadgets/plain/ui")
        check(status == 404, "a gadget without UI: %d" % status)
        status, _, _ = g.request("GET", "/gadgets/nope/ui")
        check(status == 404, "no such gadget: %d" % status)

        status, h, body = g.request("GET", "/")
        csp = h.get("content-security-policy", "")
        m = re.search(r"script-src 'nonce-([0-9a-f]{32})'", csp)
        check(status == 200 and m, "page CSP: %r" % csp)
        for part in ("default-src 'none'", "frame-ancestors 'none'", "connect-src 'self'", "frame-src 'self'",
                     "style-src 'nonce-" + m.group(1), "require-trusted-types-for 'script'"):
            check(part in csp, "page CSP lacks %r: %r" % (part, csp))
        check("unsafe-inline" not in csp and "unsafe-eval" not in csp, "page CSP: %r" % csp)
        page = body.decode()
        scripts = re.findall(r"<script[^>]*>", page)
        check(scripts and all('nonce="%s"' % m.group(1) in s for s in scripts), "scripts: %r" % scripts)
        check(h.get("x-frame-options") == "DENY", "page framable: %r" % h.get("x-frame-options"))
        check_security_headers(h, "page")
        status, h2, _ = g.request("GET", "/")
        check(re.search(r"nonce-([0-9a-f]{32})", h2["content-security-policy"]).group(1) != m.group(1),
              "the nonce is the same twice")
        for path in ("/api/gadgets", "/nowhere"):
            status, h, _ = g.request("GET", path)
            check_security_headers(h, path)
            check("sandbox" in h.get("content-security-policy", ""), "%s CSP: %r" % (path, h))


@test
def calls_audited(tmp):
    with Gateway(tmp) as g:
        examples(g, "counter")
        g.call("counter", "increment")
        g.call("counter", "nope")
        r = g.ctl("audit", "counter")
        recs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        gw = [x for x in recs if x["binding"] == "gateway"]
        check(len(gw) == 2, "gateway records: %r" % r.stdout)
        check(gw[0]["op"] == "call increment" and gw[0]["outcome"] == "ok", "record: %r" % gw[0])
        check(gw[1]["op"] == "call nope" and gw[1]["outcome"] == "error" and "no method" in gw[1]["detail"],
              "refused call record: %r" % gw[1])
        check(any(x["binding"] == "COUNT" for x in recs), "the gadget's own kv calls: %r" % recs)


@test
def sockets_close_on_exec(tmp):
    with Gateway(tmp) as g:
        import socket
        s = socket.create_connection(("127.0.0.1", g.port))
        try:
            g.request("GET", "/api/gadgets")  # the first connection is accepted by now
            fds = os.path.join("/proc", str(g.proc.pid), "fd")
            checked = 0
            for fd in os.listdir(fds):
                try:  # the request's own connection may close meanwhile
                    if not os.readlink(os.path.join(fds, fd)).startswith("socket:"):
                        continue
                    with open(os.path.join("/proc", str(g.proc.pid), "fdinfo", fd)) as f:
                        flags = int(re.search(r"flags:\s+([0-7]+)", f.read()).group(1), 8)
                except FileNotFoundError:
                    continue
                check(flags & os.O_CLOEXEC, "socket fd %s of gadgetd lacks O_CLOEXEC" % fd)
                checked += 1
            # the control socket, the gateway's listening socket, s's connection
            check(checked >= 3, "only %d sockets seen" % checked)
        finally:
            s.close()


@test
def call_answered_when_gadgetd_stops(tmp):
    with Gateway(tmp) as g:
        policy(g.pol, "plain", "CallTimeout=60s\n")
        g.ctl("reload")
        g.wait_ready("plain")
        got = []
        t = threading.Thread(target=lambda: got.append(g.call("plain", "hang")))
        t.start()
        wait_for(lambda: g.gadgets()["plain"]["calls"] == 1, what="the call in flight")
        check(g.stop() == 0, "gadgetd did not exit cleanly")
        t.join(30)
        check(got and got[0][0] == 502 and got[0][1]["error"]["code"] == "gone" and
              "gadgetd is stopping" in got[0][1]["error"]["message"], "answer at stop: %r" % got)


def run_config(tmp, text, token_mode=0o600):
    token = os.path.join(tmp, "t.token")
    with open(token, "w") as f:
        f.write("0123456789abcdef0123\n")
    os.chmod(token, token_mode)
    conf = os.path.join(tmp, "c.conf")
    with open(conf, "w") as f:
        f.write(text.replace("TOKEN", token))
    return subprocess.run([GADGETD, "--config", conf, "--policy-dir", tmp, "--state-dir", os.path.join(tmp, "s"),
                           "--socket", os.path.join(tmp, "r", "c.sock"), "--run-dir", os.path.join(tmp, "r")],
                          capture_output=True, text=True, timeout=30)


@test
def config_errors(tmp):
    cases = (
        ("[Gateway]\nListen=0.0.0.0:8080\nTokenFile=TOKEN\n", 2, "c.conf:2: Listen=\"0.0.0.0:8080\": the gateway speaks plain HTTP"),
        ("[Gateway]\nListen=localhost:8080\nTokenFile=TOKEN\n", 2, "c.conf:2: Listen=\"localhost:8080\" is not ADDRESS:PORT"),
        ("[Gateway]\nListen=127.0.0.1:99999\nTokenFile=TOKEN\n", 2, "is not ADDRESS:PORT"),
        ("[Gateway]\nListen=127.0.0.1:8080\nTokenFile=t.token\n", 2, "c.conf:3: TokenFile=\"t.token\" is not an absolute path"),
        ("[Gateway]\nListen=127.0.0.1:8080\nPort=1\n", 2, "c.conf:3: unknown key \"Port\" in [Gateway]"),
        ("[Gateway]\nListen=127.0.0.1:8080\n", 2, "[Gateway] needs both Listen= and TokenFile="),
        ("[Gateway]\nTokenFile=TOKEN\n", 2, "[Gateway] needs both Listen= and TokenFile="),
        ("[Gateway]\nListen=127.0.0.1:0\nTokenFile=/nonexistent/token\n", 1, "TokenFile=/nonexistent/token: No such file"),
    )
    for text, code, want in cases:
        r = run_config(tmp, text)
        check(r.returncode == code and want in r.stderr, "%r: exit %d, %r" % (text, r.returncode, r.stderr))
    r = run_config(tmp, "[Gateway]\nListen=127.0.0.1:0\nTokenFile=TOKEN\n", token_mode=0o644)
    check(r.returncode == 1 and "readable or writable by every user" in r.stderr, "world-readable token: %r" % r.stderr)
    # Read as every secret is: a symlink in a directory others may write
    # is not followed (one planted there could point gadgetd elsewhere).
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    os.symlink(os.path.join(tmp, "t.token"), os.path.join(shared, "t.token"))
    os.chmod(os.path.join(tmp, "t.token"), 0o600)
    r = run_config(tmp, "[Gateway]\nListen=127.0.0.1:0\nTokenFile=%s\n" % os.path.join(shared, "t.token"))
    check(r.returncode == 1 and "a symlink in a directory others may write" in r.stderr, "planted symlink: %r" % r.stderr)
    with open(os.path.join(tmp, "short.token"), "w") as f:
        f.write("short\n")
    os.chmod(os.path.join(tmp, "short.token"), 0o600)
    r = run_config(tmp, "[Gateway]\nListen=127.0.0.1:0\nTokenFile=%s\n" % os.path.join(tmp, "short.token"))
    check(r.returncode == 1 and "must hold one token of 16 to 4096" in r.stderr, "short token: %r" % r.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
