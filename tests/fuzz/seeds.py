#!/usr/bin/env python3
"""Regenerates the fuzzers' seed corpora (tests/fuzz/corpus/TARGET/) from
real traffic; the files it writes are committed, so a fuzz run starts from
what gadgetd really reads.

  worker   every frame real gadgets (the examples, the test gadget) send
           during a few calls, recorded by fuzz-capture (a stand-in for
           gadgetd on fd 3), and each gadget's whole stream
  control  every request gadgetctl sends, taken from a stand-in socket
  policy   the example and test policies, and every policy the
           integration tests wrote (RECORDED/policy)
  json     every JSON argument the integration tests passed (RECORDED/json)
  response every answer a real gadgetd gives to the control corpus's
           requests (the hello example loaded, called and tailed first),
           as gadgetctl reads them and another node's answers arrive on
           the node link
  backup   `gadgetctl backup` of a real gadget's kv and alarm store, and
           of an empty one
  report   the reports gadgetd-sandbox writes on its report pipe, encoded
           here as worker/sandbox/report.c encodes them (nothing records
           that pipe): every kind, and failures the integration tests
           provoke

RECORDED is what a test run with GADGETD_FUZZ_SEEDS=RECORDED left (see
tests/integration/harness.py). Paths of the build machine are replaced by
neutral ones, so no corpus file names this machine.

Usage: tests/fuzz/seeds.py BUILD FUZZ_BUILD [RECORDED]
  (BUILD: a normal build; FUZZ_BUILD: the clang build with fuzz-capture)
"""
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from protobytes import field, frame, varint  # noqa: E402
CORPUS = os.path.join(HERE, "corpus")


def save(target, data, name=None):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = name or hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def neutral(data, build):
    """The build tree's and the test's temporary paths, made neutral."""
    for old, new in ((os.path.abspath(build).encode(), b"/usr/lib/gadgetd-test"),
                     (ROOT.encode(), b"/usr/src/gadgetd")):
        data = data.replace(old, new)
    return re.sub(rb"/tmp/gadgetd-test-[A-Za-z0-9_]+", b"/tmp/gadgetd-test", data)


CAPTURES = [
    # (prefix, program, calls)
    ("hello", "examples/hello", [("greet", '{"name": "Ada"}'), ("greet", "{}"), ("nosuch", "null")]),
    ("wordcount", "examples/wordcount", [("count", '{"text": "one two  three\\n"}'), ("count", "[1, 2]")]),
    ("counter", "examples/counter", [("increment", "null"), ("increment", '{"by": 5}'), ("get", "null")]),
    ("notes", "examples/notes", [("add", '{"text": "milk"}'), ("list", "null"), ("get", '{"id": 1}'),
                                 ("delete", '{"id": 1}')]),
    ("relay", "examples/relay", [("bump", "null"), ("count", "null")]),
    ("fetch", "examples/fetch", [("get", '{"url": "http://127.0.0.1:8080/hi"}'), ("get", "{}")]),
    ("testgadget", "tests/integration/testgadget", [
        ("echo", '"hi"'), ("echo", "42"), ("echo", '{"a": [1, 2.5, true, null, {"$bytes": "AAEC"}]}'),
        ("say", '{"text": "line"}'), ("big", '{"n": 3000}'), ("big", '{"n": -1}'),
        ("binding", '{"binding": "STORE", "op": "put", "args": {"key": "k", "value": [1, {"x": "y"}]}}'),
        ("binding", '{"binding": "STORE", "op": "get", "args": {"key": "k"}}'),
        ("binding", '{"binding": "STORE", "op": "list", "args": {"prefix": "", "limit": 10}}'),
        ("binding", '{"binding": "WEB", "op": "request", "args": {"url": "http://127.0.0.1:8080/", '
                    '"method": "POST", "headers": {"X-A": "b"}, "body": {"$bytes": "aGk="}}}'),
        ("binding", '{"binding": "PEER", "op": "call", "args": {"method": "echo", "args": "x"}}'),
        ("sleep", '{"ms": 1}'), ("nosuch", "null"),
        # Typed methods: their hello is version 2, with signatures.
        ("shape", '{"name": "ada", "id": 7, "tags": ["a"], "point": {"x": 1, "y": 2, "label": null}}'),
        ("shape", '{"name": 5, "id": 1}'), ("seen", "null"), ("liar", '{"kind": "extra"}'),
        # kv's cas and batch: nested values, their ops' maps.
        ("binding", '{"binding": "STORE", "op": "cas", "args": {"key": "k", "expect": [1, {"x": "y"}], '
                    '"value": {"$bytes": "AAE="}}}'),
        ("binding", '{"binding": "STORE", "op": "batch", "args": {"ops": [{"op": "put", "key": "a", "value": 1}, '
                    '{"op": "cas", "key": "k", "expect": null, "value": [true]}, {"op": "delete", "key": "b"}]}}')]),
]


def capture_worker(build, fuzz_build):
    tool = os.path.join(fuzz_build, "tests", "fuzz", "fuzz-capture")
    for prefix, prog, calls in CAPTURES:
        out = tempfile.mkdtemp()
        args = [tool, out, prefix]
        for m, j in calls:
            args += ["--call", m, j]
        env = dict(os.environ, GADGET_NAME=prefix, ASAN_OPTIONS="detect_leaks=0")
        r = subprocess.run(args + ["--", os.path.join(build, prog)], env=env, capture_output=True, timeout=60)
        if r.returncode != 0:
            sys.exit("fuzz-capture %s: %s" % (prefix, r.stderr.decode(errors="replace")))
        for f in sorted(os.listdir(out)):
            with open(os.path.join(out, f), "rb") as fh:
                save("worker", fh.read(), "frame-" + f)
        shutil.rmtree(out)


# Every command of `gadgetctl --help` is sent once with the arguments its
# usage line names (control_commands), so a new command has its seed
# without an edit here; these add variants of options and values.
CONTROL = [
    ["--json", "list"], ["call", "notes", "add", '["x", 1.5, {"k": null}]'],
    ["call", "counter", "increment"], ["logs", "hello", "-n", "5"], ["logs", "hello", "-f"],
    ["audit", "counter", "-n", "3"], ["approve", "1", "--always"], ["load", "--runtime", "--no-block", "POLICY"],
    ["restart", "--no-block", "hello"], ["start", "--no-block", "hello"], ["kill", "hello", "KILL"],
    ["logs", "-f", "--all"], ["logs", "hello", "--since", "-5min"], ["logs", "hello", "--all", "-n", "20"],
    ["call", "--trace", "hello", "greet", "{}"],
    ["call", "--traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "hello", "greet", "{}"],
    ["trace", "4bf92f3577b34da6a3ce929d0e0e4736"], ["--json", "top"], ["trace", "-n", "3", "hello"],
    ["trace", "--frames", "4bf92f3577b34da6a3ce929d0e0e4736"],
]
# A value for each argument a usage line names.
CONTROL_ARGS = {"NAME": "hello", "METHOD": "greet", "JSON": '{"name": "Ada"}', "FILE": "POLICY",
                "POLICY": "POLICY", "NODE": "node-b", "ID": "1", "SIGNAL": "HUP", "forget": "forget",
                "--": "--", "COMMAND": "id", "ARG": "-u", "BUNDLE": "POLICY"}
# Commands gadgetctl carries out itself, sending no request; and dev,
# which runs until interrupted (its requests are list, load, restart,
# unload and workshop: Name and Load messages as the others send).
CONTROL_LOCAL = {"check", "selftest", "dev", "bundle", "keygen"}


def control_commands(gadgetctl):
    """One command line per command of `gadgetctl --help`, its arguments
    those of its usage line (optional ones too, options left out)."""
    out = subprocess.run([gadgetctl, "--help"], capture_output=True, text=True).stdout
    section = out.split("Commands:", 1)[1].split("\n\n", 1)[0]
    lines = []
    for name in re.findall(r"^  ([a-z][a-z-]*)\b", section, re.M):
        if name in CONTROL_LOCAL:
            continue
        usage = subprocess.run([gadgetctl, name, "--help"], capture_output=True, text=True).stdout
        words = re.sub(r"\[-[^]]*\]", "", usage.split("\n", 1)[0].split("] " + name, 1)[1]).split()
        # "NAME | ID": alternatives, the first one's seed (CONTROL has others).
        while "|" in words:
            i = words.index("|")
            del words[i:i + 2]
        lines.append([name] + [CONTROL_ARGS[w.strip("[]").rstrip(".")] for w in words])
    return lines


def capture_control(build):
    tmp = tempfile.mkdtemp()
    sock = os.path.join(tmp, "control.sock")
    pol = os.path.join(tmp, "hello.policy")
    with open(pol, "w") as f:
        f.write("[Gadget]\nName=hello\nExec=%s\n" % os.path.join(build, "examples", "hello"))
    got = []
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(4)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            data = b""
            c.settimeout(5)
            try:
                while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "little"):
                    b = c.recv(65536)
                    if not b:
                        break
                    data += b
            except OSError:
                pass
            got.append(data[4:])
            c.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    gadgetctl = os.path.join(build, "ctl", "gadgetctl")
    for cmd in control_commands(gadgetctl) + CONTROL:
        cmd = [pol if a == "POLICY" else a for a in cmd]
        subprocess.run([gadgetctl, "--socket", sock] + cmd,
                       capture_output=True, timeout=30)
    srv.close()
    for data in got:
        if data:
            save("control", neutral(data.replace(tmp.encode(), b"/etc/gadgetd/policy.d"), build))
    shutil.rmtree(tmp)


def gadgetd(build, tmp, name, program, body=""):
    """A real gadgetd (as root) on tmp's directories with one gadget loaded:
    (its process, its socket, the policy's path)."""
    import time
    sock, pol = os.path.join(tmp, "control.sock"), os.path.join(tmp, name + ".policy")
    with open(pol, "w") as f:
        f.write("[Gadget]\nName=%s\nExec=%s\n%s" % (name, os.path.join(build, program), body))
    os.chmod(pol, 0o644)
    os.makedirs(os.path.join(tmp, "policy.d"))
    d = subprocess.Popen([os.path.join(build, "supervisor", "gadgetd"), "--policy-dir",
                          os.path.join(tmp, "policy.d"), "--state-dir", os.path.join(tmp, "state"),
                          "--run-dir", os.path.join(tmp, "run"), "--socket", sock],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(500):
        if os.path.exists(sock):
            break
        time.sleep(0.01)
    subprocess.run([os.path.join(build, "ctl", "gadgetctl"), "--socket", sock, "load", pol], capture_output=True,
                   timeout=30)
    return d, sock, pol


def capture_responses(build):
    """Each request of the control corpus sent to a real gadgetd (as root,
    on a state directory of its own), and the first frames it answers."""
    tmp = tempfile.mkdtemp()
    d, sock, pol = gadgetd(build, tmp, "hello", "examples/hello")
    gadgetctl = os.path.join(build, "ctl", "gadgetctl")
    subprocess.run([gadgetctl, "--socket", sock, "call", "hello", "greet", '{"name": "Ada"}'],
                   capture_output=True, timeout=30)
    n = 0
    ctl_dir = os.path.join(CORPUS, "control")
    for name in sorted(os.listdir(ctl_dir)):
        with open(os.path.join(ctl_dir, name), "rb") as f:
            req = f.read().replace(b"/etc/gadgetd/policy.d/hello.policy", pol.encode())
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(2)
        try:
            c.connect(sock)
            c.sendall(len(req).to_bytes(4, "little") + req)
            data = b""
            for _ in range(3):  # a stream (logs, tail) answers more than once
                while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "little"):
                    b = c.recv(65536)
                    if not b:
                        raise OSError
                    data += b
                size = int.from_bytes(data[:4], "little")
                save("response", neutral(data[4:4 + size].replace(tmp.encode(), b"/etc/gadgetd"), build))
                n += 1
                data = data[4 + size:]
        except OSError:
            pass
        c.close()
    d.terminate()
    d.wait(timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)
    if not n:
        sys.exit("seeds.py: gadgetd answered none of the control corpus's requests")


def capture_backups(build):
    """`gadgetctl backup` of a real gadget's store: kv values of every kind
    and an alarm with its payload, and of an empty store."""
    tmp = tempfile.mkdtemp()
    d, sock, _ = gadgetd(build, tmp, "store", "tests/integration/testgadget",
                         "[Binding DATA]\nType=kv\n\n[Binding WAKE]\nType=alarm\nMethod=echo\n")
    gadgetctl = [os.path.join(build, "ctl", "gadgetctl"), "--socket", sock]

    def bcall(binding, op, args):
        a = json.dumps({"binding": binding, "op": op, "args": args})
        subprocess.run(gadgetctl + ["call", "store", "binding", a], capture_output=True, timeout=30)
    backup = os.path.join(tmp, "b.gbk")
    subprocess.run(gadgetctl + ["backup", "store", backup], capture_output=True, timeout=30)
    for key, value in (("n", None), ("t", True), ("i", -42), ("f", 2.5), ("s", "text"),
                       ("b", {"$bytes": "AAEC"}), ("l", [1, [2, [3]], "x"]), ("m", {"a": {"b": [None, 1]}})):
        bcall("DATA", "put", {"key": key, "value": value})
    bcall("WAKE", "set", {"id": "later", "delay": 3600000, "payload": {"note": "later", "n": [1, 2]}})
    for i, path in enumerate((backup, os.path.join(tmp, "c.gbk"))):
        if i:
            subprocess.run(gadgetctl + ["backup", "store", path], capture_output=True, timeout=30)
        if os.path.exists(path):
            with open(path, "rb") as f:
                save("backup", neutral(f.read(), build))
    d.terminate()
    d.wait(timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)


def policies(build, recorded):
    for p in glob.glob(os.path.join(ROOT, "examples", "*", "*.policy.in")):
        with open(p, "rb") as f:
            data = f.read().replace(b"@GADGET_DIR@", b"/usr/lib/gadgets").replace(b"@UI_DIR@", b"/usr/share/gadgetd/ui") \
                .replace(b"@CREDENTIAL_DIR@", b"/etc/gadgetd/credentials")
        save("policy", data, os.path.basename(p)[:-len(".policy.in")])
    for p in glob.glob(os.path.join(ROOT, "tests", "policies", "*.policy")):
        with open(p, "rb") as f:
            save("policy", f.read(), os.path.basename(p)[:-len(".policy")])
    for kind in ("policy", "json"):
        for p in glob.glob(os.path.join(recorded or "/nonexistent", kind, "*")):
            with open(p, "rb") as f:
                save(kind, neutral(f.read(), build))


def failed(step, reason):
    return frame(field(1, field(1, step.encode()) + field(2, reason.encode())))


def reports():
    warm, ready = frame(b"\x10\x01"), frame(b"\x18\x01")
    status = lambda s: frame(b"\x20" + varint(s))
    seeds = {
        "warm": warm, "ready": ready, "status-exit-0": status(0), "status-exit-3": status(3 << 8),
        "status-sigkill": status(9), "status-sigsys-core": status(31 | 0x80),
        "failed-bind": failed("bind /srv/data", "Permission denied"),
        "failed-exec": failed("exec /usr/lib/gadgets/probe", "Permission denied"),
        "failed-interpreter": failed("exec /usr/lib/gadgets/ls", "its interpreter /lib64/ld-linux-x86-64.so.2 "
                                     "is not in the sandbox (SystemLibraries=yes adds the system's)"),
        "failed-init": failed("init", "fork failed"),
        "life": ready + status(0), "life-warm": warm + ready + status(9),
    }
    for name, data in seeds.items():
        save("report", data, name)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, fuzz_build = sys.argv[1], sys.argv[2]
    recorded = sys.argv[3] if len(sys.argv) > 3 else None
    capture_worker(build, fuzz_build)
    capture_control(build)
    capture_responses(build)
    capture_backups(build)
    policies(build, recorded)
    reports()
    for t in ("worker", "control", "response", "policy", "json", "report", "bundle", "backup"):
        print("%s: %d files" % (t, len(os.listdir(os.path.join(CORPUS, t)))))


if __name__ == "__main__":
    main()
