#!/usr/bin/env python3
"""The conformance suite: the same cases against the same gadget written
with each SDK (confgadget.c on libgadget, confgadget.py on the Python
SDK, confgadget.js on the JavaScript SDK), through a real gadgetd. A new
SDK is done when its twin of the gadget passes every case. Usage:
conformance_test.py SDK_CASE (--list names them: c_hello_and_signatures,
python_hello_and_signatures, js_hello_and_signatures, ...)."""
import http.server
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import (CALLFLOOD, EXAMPLES, GADGETCTL, TESTS, Daemon, check, gadgetd_run, main, need, test, wait_for)  # noqa: E402
import attacks  # noqa: E402  (the control protocol's frames by hand)

SDK_DIR = os.path.join(HERE, "..", "..", "sdk", "python")
sys.path.insert(0, SDK_DIR)
from gadget import _wire  # noqa: E402  (values for the control socket's calls)

CONFGADGET = os.environ.get("CONFGADGET", "")
ESCAPE = os.environ.get("ESCAPE", "")  # the escape probe (selftest/escape.c)
# The build tree's NODE_PATH: @gadgetd/gadget in it is a link to sdk/js.
JS_NODE_PATH = os.environ.get("JS_NODE_PATH", "")
JS_SDK_DIR = os.path.join(HERE, "..", "..", "sdk", "js")

# Every method and its signature, in the order each twin declares them.
SIGNATURES = [
    "echo(v: any) -> any",
    "nop()",
    "greet(name: string(..100), times?: int(1..10)) -> string",
    "fail(code: int, message: string)",
    "crash()",
    "kv() -> any",
    "http(url: string) -> {status: int, body: string}",
    "slow(url: string) -> string",
    "peer(method: string, args: any) -> any",
    "alarms() -> any",
    "ring(binding: string, id: string, at: int, payload: any, attempt: int)",
    "rung() -> any",
    "texts() -> {text: string, secret: string}",
    "log(text: string, level: int(0..7))",
    "violate()",
    "nap(ms: int(0..2000)) -> int",
]


def node():
    """The host's Node.js (its real path: a policy's Exec= is no link)."""
    path = shutil.which("node") or shutil.which("nodejs")
    if not path:
        need("Node.js", "no node here (scripts/deps installs nodejs)")
    return os.path.realpath(path)


def program(sdk):
    """The [Gadget] keys that run the conformance gadget of sdk: what a
    Python or Node gadget needs is docs/writing-gadgets.md's "Gadgets in
    Python" and "Gadgets in JavaScript"."""
    if sdk == "c":
        return "Exec=%s\n" % CONFGADGET
    if sdk == "js":
        return ("Exec=%s\nArguments=%s\nSystemLibraries=yes\nReadOnlyPaths=%s %s %s\nEnvironment=NODE_PATH=%s\n"
                % (node(), os.path.join(HERE, "confgadget.js"), JS_NODE_PATH, os.path.realpath(JS_SDK_DIR), HERE,
                   JS_NODE_PATH))
    sdk_dir = os.path.realpath(SDK_DIR)
    return ("Exec=%s\nArguments=-B %s\nSystemLibraries=yes\nReadOnlyPaths=%s %s\n"
            "Environment=PYTHONPATH=%s\n" % (os.path.realpath(sys.executable), os.path.join(HERE, "confgadget.py"),
                                             sdk_dir, HERE, sdk_dir))


def write_policy(d, sdk, name="conf", bindings="", extra=""):
    path = os.path.join(d.pol if hasattr(d, "pol") else d, name + ".policy")
    with open(path, "w") as f:
        timeout = "" if "CallTimeout=" in extra else "CallTimeout=10s\n"
        f.write("[Gadget]\nName=%s\n%sRequireTypes=yes\n%s%s%s" % (name, program(sdk), timeout, extra, bindings))
    os.chmod(path, 0o644)
    return path


def ready(d, *names):
    r = d.ctl("reload")
    check(r.returncode == 0, "reload: %r" % r.stderr)
    for n in names:
        wait_for(lambda n=n: d.state(n) == "ready", what=lambda n=n: "%s ready (%r): %s" % (
            n, d.state(n), d.logtext()[-1500:]))


class Control:
    """Calls through the control socket with values of any size (a
    command line holds at most 128 KiB of JSON)."""

    def __init__(self, d):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(d.sock)
        self.buf = bytearray()
        self.rid = 0

    def call(self, name, method, args=None, timeout=30):
        """(value, None) or (None, (code, message))."""
        self.rid += 1
        body = (attacks.field(1, name.encode()) + attacks.field(2, method.encode()) +
                attacks.field(3, _wire.encode_value(args)))
        msg = attacks.varint(1 << 3) + attacks.varint(self.rid) + attacks.field(7, body)
        msg += attacks.varint(11 << 3) + attacks.varint(attacks.CONTROL_PROTOCOL_VERSION)
        self.s.sendall(_wire.frame(msg))
        self.s.settimeout(timeout)
        while True:
            if len(self.buf) >= 4:
                n = int.from_bytes(self.buf[:4], "little")
                if len(self.buf) >= 4 + n:
                    frame = bytes(self.buf[4:4 + n])
                    del self.buf[:4 + n]
                    break
            b = self.s.recv(1 << 20)
            check(b, "gadgetd closed the control connection")
            self.buf += b
        for f, wt, v in _wire.fields(frame, 0, len(frame)):
            if f == 6:
                return _wire.decode_value(frame, v[0], v[1]), None
            if f == 2:
                m = attacks.parse(frame[v[0]:v[1]])
                return None, (m.get(1, [0])[0], m.get(2, [b""])[0].decode())
        check(False, "an answer neither a result nor an error: %r" % frame[:100])

    def ok(self, name, method, args=None):
        v, err = self.call(name, method, args)
        check(err is None, "%s.%s(%r): error %r" % (name, method, args, err))
        return v

    def err(self, name, method, args=None):
        v, err = self.call(name, method, args)
        check(err is not None, "%s.%s(%r): no error but %r" % (name, method, args, v))
        return err


class HeldServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """An HTTP server on 127.0.0.1: /api/ping answers "pong"; /api/hold
    answers "held" once release is set (the request seen: arrived)."""
    daemon_threads = True

    def __init__(self):
        self.arrived = threading.Event()
        self.release = threading.Event()
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/api/hold":
                    srv.arrived.set()
                    srv.release.wait(30)
                body = b"held" if self.path == "/api/hold" else b"pong"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass
        super().__init__(("127.0.0.1", 0), H)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


def bindings(tmp, port=1):
    secret = os.path.join(tmp, "token")
    with open(secret, "w") as f:
        f.write("s3cret")
    os.chmod(secret, 0o600)
    return ("[Binding DATA]\nType=kv\n[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/api/\n"
            "[Binding PEER]\nType=gadget\nTarget=conf-peer\n[Binding CLOCK]\nType=alarm\nMethod=ring\n"
            "[Binding GREETING]\nType=text\nValue=hello there\n[Binding TOKEN]\nType=secret\nFile=%s\n"
            % (port, secret))


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# --- the cases ---------------------------------------------------------------

@case
def hello_and_signatures(tmp, sdk):
    """The hello names every method with its signature (RequireTypes=yes
    takes it), and the gadget takes its name from gadgetd's environment:
    one program under two names."""
    with Daemon(tmp) as d:
        write_policy(d, sdk)
        write_policy(d, sdk, "conf-peer")
        ready(d, "conf", "conf-peer")
        for name in ("conf", "conf-peer"):
            st = d.status(name)
            check(st["signatures"] == SIGNATURES and st["methods"] == [s.split("(")[0] for s in SIGNATURES],
                  "%s's methods and signatures: %r" % (name, st))
    # gadgetd run --call: the same gadget without a daemon.
    pol = write_policy(tmp, sdk)
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "greet", '{"name": "run"}'], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 0 and json.loads(r.stdout) == "hello, run", "gadgetd run --call: %r" % (r,))


@case
def typed_calls_and_refusals(tmp, sdk):
    with Daemon(tmp) as d:
        write_policy(d, sdk)
        ready(d, "conf")
        c = Control(d)
        check(c.ok("conf", "greet", {"name": "ada", "times": 2}) == "hello, ada hello, ada", "greet")
        check(c.ok("conf", "greet", {"name": "é" * 100}) == "hello, " + "é" * 100, "100 characters")
        for args, why in (({"name": 5}, "args.name: expected string(..100), got int"),
                          ({"name": "x" * 101}, "args.name"), ({}, "name"),
                          ({"name": "a", "extra": 1}, 'unknown field "extra"'),
                          ({"name": "a", "times": 11}, "args.times")):
            code, msg = c.err("conf", "greet", args)
            check(code == 1 and why in msg, "greet(%r): %r" % (args, (code, msg)))
        code, msg = c.err("conf", "nosuch")
        check(code == 2, "no such method: %r" % ((code, msg),))
        check(c.ok("conf", "echo", {"v": None}) is None, "null")


@case
def errors_and_codes(tmp, sdk):
    """Every code of the contract, raised by a method, reaches the caller
    with its message; a method that fails otherwise is FAILED."""
    with Daemon(tmp) as d:
        write_policy(d, sdk)
        ready(d, "conf")
        c = Control(d)
        for code in range(1, 13):
            err = c.err("conf", "fail", {"code": code, "message": "failed with %d" % code})
            check(err == (code, "failed with %d" % code), "code %d: %r" % (code, err))
        code, msg = c.err("conf", "crash")
        check(code == 3, "crash: %r" % ((code, msg),))
        check(c.ok("conf", "greet", {"name": "after"}) == "hello, after", "served after the errors")


@case
def values_at_the_limits(tmp, sdk):
    """Values as deep as the protocol allows, as large as a frame holds
    (each way), and every kind, come back as they went; deeper ones are
    refused before the gadget."""
    with Daemon(tmp) as d:
        write_policy(d, sdk)
        ready(d, "conf")
        c = Control(d)
        kinds = [None, True, False, 0, -1, 2**63 - 1, -2**63, 1.5, -0.0, 1e308, "", "é\u2603\U0001F600",
                 b"", b"\0\xff", [], {}, {"a": [1, {"b": None}]}]
        check(c.ok("conf", "echo", {"v": kinds}) == kinds, "every kind")
        deep = "x"
        for _ in range(31):  # args {v: ...}: the record and 31 lists, 32 deep (lists and maps count)
            deep = [deep]
        check(c.ok("conf", "echo", {"v": deep}) == deep, "a value 32 deep")
        _wire.MAX_DEPTH += 1  # the test's own encoder would refuse it
        try:
            code, msg = c.err("conf", "echo", {"v": [deep]})
        finally:
            _wire.MAX_DEPTH -= 1
        check(code in (1, 9), "33 deep: %r" % ((code, msg),))
        big = "y" * (1 << 20)
        check(c.ok("conf", "echo", {"v": big}) == big, "a 1 MiB string")
        blob = bytes(range(256)) * 4096
        check(c.ok("conf", "echo", {"v": blob}) == blob, "1 MiB of bytes")
        many = list(range(65536))
        check(c.ok("conf", "echo", {"v": many}) == many, "65,536 items")
        check(c.ok("conf", "greet", {"name": "after"}) == "hello, after", "served after")


EXPECTED_KV = {
    "missing": 10,
    "got": {"x": [1, "two", None, True, 1.5, b"\0\xff"]},
    "list": {"keys": ["a/1"], "cursor": "a/1"},
    "cas_miss": {"written": False, "current": 1},
    "cas_hit": {"written": True},
    "batch": {"applied": True, "results": [False, True, True]},
    "deleted": True,
    "deleted_again": False,
    "keys": {"keys": ["b/1"], "cursor": None},
}


@case
def kv_binding(tmp, sdk):
    with Daemon(tmp) as d:
        write_policy(d, sdk, bindings=bindings(tmp))
        ready(d, "conf")
        got = Control(d).ok("conf", "kv")
        check(got == EXPECTED_KV, "kv: %r" % got)


@case
def other_bindings(tmp, sdk):
    """http, gadget (a call to the same program under another name), text,
    secret, alarms (set, list, cancel, and one that rings) and log lines."""
    srv = HeldServer()
    try:
        with Daemon(tmp) as d:
            write_policy(d, sdk, bindings=bindings(tmp, srv.port))
            write_policy(d, sdk, "conf-peer")
            ready(d, "conf", "conf-peer")
            c = Control(d)
            url = "http://127.0.0.1:%d/api/ping" % srv.port
            check(c.ok("conf", "http", {"url": url}) == {"status": 200, "body": "pong"}, "http")
            code, msg = c.err("conf", "http", {"url": "http://127.0.0.1:%d/other" % srv.port})
            check(code == 4, "http outside Allow=: %r" % ((code, msg),))
            check(c.ok("conf", "peer", {"method": "greet", "args": {"name": "peer"}}) == "hello, peer", "peer")
            code, msg = c.err("conf", "peer", {"method": "greet", "args": {"name": 1}})
            check(code == 1 and "args.name" in msg, "peer's refusal: %r" % ((code, msg),))
            check(c.ok("conf", "texts") == {"text": "hello there", "secret": "s3cret"}, "text and secret")
            got = c.ok("conf", "alarms")
            check(got == {"id": "later", "listed": [{"id": "later", "payload": {"n": 1}}], "cancelled": True,
                          "cancelled_again": False}, "alarms: %r" % got)
            wait_for(lambda: c.ok("conf", "rung") is not None, what="the alarm's call")
            check(c.ok("conf", "rung") == {"id": "now", "payload": "rang", "attempt": 1}, "rung")
            check(c.ok("conf", "log", {"text": "a line from the gadget", "level": 4}) is None, "log")
            wait_for(lambda: "a line from the gadget" in d.ctl("logs", "conf").stdout, what="the log line")
    finally:
        srv.shutdown()


@case
def shutdown_drains(tmp, sdk):
    """A call in flight when the gadget is asked to stop is answered; then
    the gadget exits by itself (status 0), not killed after the grace."""
    srv = HeldServer()
    try:
        with Daemon(tmp) as d:
            write_policy(d, sdk, bindings=bindings(tmp, srv.port), extra="Restart=no\n")
            ready(d, "conf")
            c = Control(d)
            slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "conf", "slow",
                                     json.dumps({"url": "http://127.0.0.1:%d/api/hold" % srv.port})],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            check(srv.arrived.wait(20), "the held request never came")
            r = d.ctl("stop", "conf")
            check(r.returncode == 0, "stop: %r" % r.stderr)
            srv.release.set()
            out, err = slow.communicate(timeout=30)
            check(slow.returncode == 0 and json.loads(out) == "held", "the call in flight: %r %r" % (out, err))
            wait_for(lambda: d.state("conf") in ("stopped", "inactive"), what=lambda: "stopped: %r" % d.state("conf"))
            log = d.logtext()
            check("SIGKILL" not in log and "killed" not in log, "killed, not drained: %s" % log[-1500:])
            del c
    finally:
        srv.release.set()
        srv.shutdown()


@case
def served_while_waiting(tmp, sdk):
    """Calls that come while a method waits for a binding call are served:
    at once by an async Python or JavaScript method's gadget (calls and binding calls
    share the connection, matched by id), after it by a C one (libgadget
    queues them), answered either way."""
    srv = HeldServer()
    try:
        with Daemon(tmp) as d:
            write_policy(d, sdk, bindings=bindings(tmp, srv.port))
            ready(d, "conf")
            slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "conf", "slow",
                                     json.dumps({"url": "http://127.0.0.1:%d/api/hold" % srv.port})],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            check(srv.arrived.wait(20), "the held request never came")
            if sdk in ("python", "js"):
                try:
                    got = Control(d).call("conf", "greet", {"name": "meanwhile"}, timeout=10)
                except TimeoutError:
                    got = "no answer in 10 s"
                check(got == ("hello, meanwhile", None), "a call meanwhile: %r" % (got,))
                check(not srv.release.is_set() and slow.poll() is None, "the held call ended first")
                srv.release.set()
            else:
                greet = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "conf", "greet",
                                          '{"name": "meanwhile"}'], stdout=subprocess.PIPE, text=True)
                wait_for(lambda: d.status("conf")["in_flight"] == 2, what="both calls in flight")
                srv.release.set()
                out, _ = greet.communicate(timeout=30)
                check(json.loads(out) == "hello, meanwhile", "the call meanwhile: %r" % out)
            out, err = slow.communicate(timeout=30)
            check(slow.returncode == 0 and json.loads(out) == "held", "the held call: %r %r" % (out, err))
    finally:
        srv.release.set()
        srv.shutdown()


@case
def late_calls_not_started(tmp, sdk):
    """A gadget behind, not stuck (each call naps 300 ms, CallTimeout=1s):
    of 6 calls sent at once, those whose callers were answered "it may have
    run" before the gadget read them are not started (the SDK reads the
    call's deadline, gadget.proto Call.deadline_us): at most the one in
    progress at the deadline runs beside those answered."""
    with Daemon(tmp) as d:
        write_policy(d, sdk, extra="CallTimeout=1s\n")
        ready(d, "conf")
        r = subprocess.run([CALLFLOOD, d.sock, "conf", "nap", "6", '{"ms": 300}'], capture_output=True, text=True,
                           timeout=60)
        counts = dict((" ".join(x.split()[:-1]), int(x.split()[-1])) for x in r.stdout.splitlines())
        ok, timeouts = counts.get("ok", 0), counts.get("error 6", 0)
        check(ok + timeouts == 6 and timeouts >= 1, "6 calls, some timed out: %r %r" % (counts, r.stderr))
        # Answered after the rest (the gadget reads its calls in order).
        started = Control(d).ok("conf", "nap", {"ms": 0}) - 1
        check(started <= ok + 1, "%d calls started, %d answered ok: some started after their callers were told "
              "they timed out" % (started, ok))


@case
def protocol_violation(tmp, sdk):
    """A frame header over the limit ends that worker only, logged as a
    protocol violation; its call fails, and the gadget serves again after
    its restart."""
    with Daemon(tmp) as d:
        write_policy(d, sdk, extra="Restart=on-failure\n")
        write_policy(d, sdk, "conf-peer")
        ready(d, "conf", "conf-peer")
        c = Control(d)
        code, msg = c.err("conf", "violate")
        check(code in (8, 11), "the violating call: %r" % ((code, msg),))
        wait_for(lambda: "protocol" in d.logtext(), what=lambda: "the violation logged: " + d.logtext()[-1500:])
        check(c.ok("conf-peer", "greet", {"name": "other"}) == "hello, other", "another gadget unharmed")
        # Its restart, not the old run: for a few ms after the violating
        # call's answer the old run still shows ready (its end not yet
        # seen), and a call then finds its connection gone (UNAVAILABLE).
        wait_for(lambda: d.status("conf")["restarts"] >= 1 and d.state("conf") == "ready", what="conf restarted")
        check(c.ok("conf", "greet", {"name": "again"}) == "hello, again", "served after its restart")


def counter_runs(tmp, policies):
    """The counter example through gadgetd run under each policy in turn:
    its increments count on (one state directory)."""
    for want, p in enumerate(policies, 1):
        r = subprocess.run(gadgetd_run(tmp) + [p, "--call", "increment"], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0 and json.loads(r.stdout) == want, "gadgetd run --call increment: %r" % (r,))


def counter_in_daemon(d, pol, name):
    """The counter example loaded into the daemon d, on the state the
    runs before left (two increments): the third, then get. Its Control."""
    r = d.ctl("load", pol)
    check(r.returncode == 0, "load: %r %s" % (r.stderr, d.logtext()[-1500:]))
    c = Control(d)
    check(c.ok(name, "increment") == 3 and c.ok(name, "get") == 3, "the daemon's counter")
    return c


@test
def python_counter_example(tmp):
    """examples/python/counter.py under its policy as built, with the
    default filter and limits: through gadgetd run, then the daemon."""
    pol = os.path.join(EXAMPLES, "counter-py.policy")
    counter_runs(tmp, (pol, pol))
    with Daemon(tmp) as d:
        counter_in_daemon(d, pol, "counter-py")
        st = d.status("counter-py")
        check(st["denials"] == 0, "its filter refused calls: %r" % st)


@test
def js_examples(tmp):
    """examples/js/counter.js and notes.js under their policies as built,
    with the default filter and limits (and the counter under the escape
    probe's too): through gadgetd run, then the daemon. Their filter refused nothing but clone3 (ENOSYS by design:
    glibc then starts Node's threads with clone, whose flags the filter
    checks)."""
    node()  # the build made the policies only where it found node
    pol = os.path.join(EXAMPLES, "counter-js.policy")
    # The second run under the limits the escape probe runs with
    # (gadgetctl selftest's default policy).
    limited = os.path.join(tmp, "counter-js.policy")
    with open(pol) as f, open(limited, "w") as out:
        out.write(f.read().replace("\n[Binding", "\nMemoryMax=64M\nTasksMax=32\nTmpSize=16M\n\n[Binding", 1))
    os.chmod(limited, 0o644)
    counter_runs(tmp, (pol, limited))
    with Daemon(tmp) as d:
        c = counter_in_daemon(d, pol, "counter-js")
        r = d.ctl("load", os.path.join(EXAMPLES, "notes-js.policy"))
        check(r.returncode == 0, "load notes-js: %r %s" % (r.stderr, d.logtext()[-1500:]))
        for title in ("b/2", "a/1", "b/1"):
            check(c.ok("notes-js", "add", {"title": title, "text": "note " + title}) is None, "add " + title)
        check(c.ok("notes-js", "get", {"title": "a/1"}) == "note a/1", "get")
        check(c.ok("notes-js", "list", {"prefix": "b/"}) == ["b/1", "b/2"], "list")
        check(c.ok("notes-js", "delete", {"title": "a/1"}) is True, "delete")
        check(c.err("notes-js", "get", {"title": "a/1"})[0] == 10, "a deleted note: not found")
        for name in ("counter-js", "notes-js"):
            r = d.ctl("--json", "denials", name)
            check(r.returncode == 0, "denials %s: %r" % (name, r))
            refused = json.loads(r.stdout)
            check(refused["untracked"] == 0 and refused["total"] == sum(x["count"] for x in refused["denials"]) and
                  all(x["call"] == "clone3" and x["answer"] == "ENOSYS" for x in refused["denials"]),
                  "%s's filter refused more than clone3: %r" % (name, refused))


def escape_verdicts(tmp, pol=None):
    """{attempt: verdict} of the escape probe (gadgetctl selftest) under
    pol with the probe as its program, or under the default policy."""
    env = dict(os.environ, GADGETD_ESCAPE_PROBE=ESCAPE)
    r = subprocess.run([GADGETCTL, "--json", "selftest"] + ([pol] if pol else []), capture_output=True, text=True,
                       env=env, timeout=120)
    check(r.returncode == 0, "selftest %s: %d %r" % (pol or "", r.returncode, r.stderr[-1500:]))
    return {row["attempt"]: row["verdict"] for row in json.loads(r.stdout)}


@test
def js_sandbox_no_wider(tmp):
    """The escape probe under what a Node gadget's policy has beyond a C
    gadget's (SystemLibraries=yes, the program and the SDK read-only,
    NODE_PATH), with the escape probe's limits: every attempt made under
    the default policy is made and blocked alike."""
    pol = write_policy(tmp, "js", "node-escape", extra="MemoryMax=64M\nTasksMax=32\nTmpSize=16M\n")
    plain, node_ = escape_verdicts(tmp), escape_verdicts(tmp, pol)
    check(len(plain) > 80 and set(plain.values()) == {"blocked"}, "the default policy's verdicts: %r" % plain)
    check(node_ == plain, "under a Node gadget's keys: %r" % {k: (plain.get(k), node_.get(k))
                                                              for k in set(plain) | set(node_)
                                                              if plain.get(k) != node_.get(k)})


for _sdk in ("c", "python", "js"):
    for _name, _fn in CASES.items():
        TESTS["%s_%s" % (_sdk, _name)] = (lambda fn, sdk: lambda tmp: fn(tmp, sdk))(_fn, _sdk)

if __name__ == "__main__":
    sys.exit(main())
