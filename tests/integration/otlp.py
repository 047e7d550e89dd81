"""A real OTLP/HTTP trace receiver for the trace tests: tests/otlp/receiver.cjs
under Node.js, which decodes every request with OpenTelemetry's own OTLP
definitions (installed by scripts/deps from tests/otlp/package-lock.json)
and prints each span as a JSON line, read here."""
import filecmp
import json
import os
import shutil
import subprocess
import threading

from harness import check, wait_for
from parts import need

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "otlp")
STAMP = os.path.join(HERE, "node_modules", ".gadgetd-lock")


class Receiver:
    """The receiver, listening on a loopback port; .url is its /v1/traces,
    .spans every span received so far (dicts), .errors what it refused."""

    def __enter__(self):
        node = shutil.which("node")
        if not node:
            need("Node.js", "no node on PATH (scripts/deps installs Debian's nodejs)")
        if not (os.path.exists(STAMP) and filecmp.cmp(STAMP, os.path.join(HERE, "package-lock.json"), shallow=False)):
            need("@opentelemetry/otlp-transformer", "tests/otlp/node_modules is missing or not from "
                 "package-lock.json: run scripts/deps (npm ci)")
        self.proc = subprocess.Popen([node, os.path.join(HERE, "receiver.cjs")], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        first = json.loads(self.proc.stdout.readline() or "{}")
        check("port" in first, "the receiver did not start: %r" % first)
        self.url = "http://127.0.0.1:%d/v1/traces" % first["port"]
        self.spans, self.errors = [], []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                o = json.loads(line)
            except ValueError:
                o = {"error": line}
            with self.lock:
                (self.errors if "error" in o else self.spans).append(o)

    def of(self, trace_id):
        with self.lock:
            return [s for s in self.spans if s["traceId"] == trace_id]

    def wait(self, trace_id, n, what="spans"):
        """Waits until n spans of trace_id came; returns them."""
        wait_for(lambda: len(self.of(trace_id)) >= n, timeout=20,
                 what="%d %s of trace %s at the receiver (got %d; refused %r)" %
                 (n, what, trace_id, len(self.of(trace_id)), self.errors))
        return self.of(trace_id)

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def chain(spans):
    """The spans as {span_id: span}, and the root (the one whose parent is
    not among them); checks there is exactly one."""
    by_id = {s["spanId"]: s for s in spans}
    roots = [s for s in spans if s["parentSpanId"] not in by_id]
    check(len(roots) == 1, "not one root: %r" % [(s["name"], s["parentSpanId"]) for s in roots])
    return by_id, roots[0]


def path(spans):
    """The names from the root down, for spans that form one chain (each
    span at most one child); checks that they do."""
    by_id, root = chain(spans)
    names, cur = [], root
    while cur:
        names.append(cur["name"])
        kids = [s for s in spans if s["parentSpanId"] == cur["spanId"]]
        check(len(kids) <= 1, "%s has %d children: %r" % (cur["name"], len(kids), [k["name"] for k in kids]))
        cur = kids[0] if kids else None
    check(len(names) == len(spans), "the chain %r leaves spans out of %r" % (names, [s["name"] for s in spans]))
    return names
