"""A gadgetd with its HTTP gateway on a free loopback port, for
gateway_test.py and the browser tests (tests/browser/run.py)."""
import http.client
import json
import os
import re
import secrets
import threading
import subprocess
import sys

from harness import Daemon, check, wait_for

ATTACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attacks.py")
STRANGER = (60100, 60100)  # any local user: not in the control group, no token


def attack(*args):
    """attacks.py ARGS as the stranger (for an HTTP server of gadgetd's:
    the gateway, the metrics endpoint)."""
    cmd = ["setpriv", "--reuid=%d" % STRANGER[0], "--regid=%d" % STRANGER[1], "--clear-groups",
           sys.executable, ATTACKS, *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def counts(line):
    """An attack's "KEY N KEY N ..." line as a dict."""
    w = line.split()
    return {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}


class Gateway(Daemon):
    """A Daemon whose config file turns the gateway on (Listen=127.0.0.1:0:
    gadgetd picks the port and logs it; or listen, another ADDRESS:PORT,
    e.g. in a network namespace of the fault tests)."""

    def __init__(self, tmp, extra=(), listen="127.0.0.1:0"):
        self.token = secrets.token_hex(32)
        self.token_file = os.path.join(tmp, "gateway.token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.config = os.path.join(tmp, "gadgetd.conf")
        with open(self.config, "w") as f:
            f.write("[Gateway]\nListen=%s\nTokenFile=%s\n" % (listen, self.token_file))
        self.host = listen.rsplit(":", 1)[0]
        super().__init__(tmp, ["--config", self.config, *extra])
        self.port = None

    def start(self):
        super().start()
        m = wait_for(lambda: re.search(r"gateway: listening on http://%s:(\d+)/" % re.escape(self.host),
                                       self.logtext()),
                     what="the gateway's address in gadgetd's log")
        self.port = int(m.group(1))
        self.base = "http://%s:%d" % (self.host, self.port)
        return self

    def request(self, method, path, body=None, headers=None, auth=True):
        """Returns (status, headers dict with lower-case names, body bytes)."""
        h = {"Host": "%s:%d" % (self.host, self.port)}
        if auth:
            h["Authorization"] = "Bearer " + self.token
        if body is not None and not isinstance(body, bytes):
            body = body.encode()
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def call(self, gadget, method, args=None, **kw):
        """POSTs a call; returns (status, decoded JSON body)."""
        status, _, body = self.request("POST", "/api/gadgets/%s/call/%s" % (gadget, method),
                                       json.dumps(args), **kw)
        return status, json.loads(body)

    def gadgets(self):
        status, _, body = self.request("GET", "/api/gadgets")
        check(status == 200, "GET /api/gadgets: %d %r" % (status, body))
        return {g["name"]: g for g in json.loads(body)["gadgets"]}

    def wait_ready(self, *names):
        for n in names:
            wait_for(lambda n=n: self.gadgets().get(n, {}).get("state") == "ready", what=n + " ready")


class GatewayCaller(threading.Thread):
    """Calls gadget's echo through the gateway, each call on a new
    connection (as a page's fetch may), one after the other, with its
    sequence number; counts the answers, the refusals (any status but 200,
    or another number) and the calls lost (the connection closed or reset
    without an answer)."""

    def __init__(self, g, gadget):
        super().__init__(daemon=True)
        self.g, self.gadget = g, gadget
        self.stop = threading.Event()
        self.ok = self.refused = self.lost = 0
        self.errors = []

    def run(self):
        seq = 0
        while not self.stop.is_set() and seq < 100000:
            seq += 1
            c = http.client.HTTPConnection("127.0.0.1", self.g.port, timeout=30)
            try:
                c.request("POST", "/api/gadgets/%s/call/echo" % self.gadget, body=json.dumps(seq),
                          headers={"Host": "127.0.0.1:%d" % self.g.port, "Content-Type": "application/json",
                                   "Authorization": "Bearer " + self.g.token})
                r = c.getresponse()
                body = r.read()
                if r.status == 200 and json.loads(body) == seq:
                    self.ok += 1
                else:
                    self.refused += 1
                    self.errors.append((seq, r.status, body[:200]))
            except (OSError, http.client.HTTPException) as e:
                self.lost += 1
                self.errors.append((seq, repr(e)))
            finally:
                c.close()


class GatewayCallers:
    """n GatewayCallers of gadget through g, started on entry, stopped and
    joined on exit; more(k, what) waits for k more answers (or a caller's
    end); refused() and lost() sum theirs."""

    def __init__(self, g, gadget, n):
        self.callers = [GatewayCaller(g, gadget) for _ in range(n)]

    def __enter__(self):
        for c in self.callers:
            c.start()
        return self

    def __exit__(self, *exc):
        for c in self.callers:
            c.stop.set()
        for c in self.callers:
            c.join(60)

    def ok(self):
        return sum(c.ok for c in self.callers)

    def refused(self):
        return sum(c.refused for c in self.callers)

    def lost(self):
        return sum(c.lost for c in self.callers)

    def errors(self):
        return [c.errors[:3] for c in self.callers]

    def more(self, k, what):
        seen = self.ok()
        wait_for(lambda: self.ok() >= seen + k or not all(c.is_alive() for c in self.callers), what=what)

