"""A gadgetd serving /metrics (MetricsListen=) on a free loopback port or
a Unix socket, with a bearer token: for metrics_test.py and the
hostile-load suite (load/metrics.py); the endpoint added to another
test's daemon (metrics_listen), and a scraper that scrapes it in a loop
(the re-exec and fd store tests)."""
import http.client
import os
import re
import secrets
import shutil
import subprocess
import threading

from harness import Daemon, check, free_port, need, wait_for


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
# The labels each series may carry: bounded sets, never a caller's string.
ALLOWED = {"gadget", "method", "binding", "op", "outcome", "cause", "state", "le", "budget", "kind", "why", "limit",
           "node", "direction"}


def parse(text):
    """{(name, frozenset(labels.items())): value}, checking every line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        check(m, "not a sample line: %r" % line)
        labels = dict(LABEL.findall(m.group(2) or ""))
        check(set(labels) <= ALLOWED, "a label outside the bounded set: %r" % line)
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def value(series, name, **labels):
    return series.get((name, frozenset(labels.items())))


def check_histograms(series):
    """Every histogram's buckets rise with le, +Inf equals _count."""
    hists = {}
    for (name, labels), v in series.items():
        if name.endswith("_bucket"):
            d = dict(labels)
            le = d.pop("le")
            hists.setdefault((name[:-7], frozenset(d.items())), []).append((float(le), v))
    check(hists, "no histogram")
    for (base, labels), buckets in hists.items():
        buckets.sort()
        counts = [v for _, v in buckets]
        check(counts == sorted(counts), "%s%r: buckets not cumulative: %r" % (base, dict(labels), buckets))
        check(buckets[-1][0] == float("inf") and buckets[-1][1] == series.get((base + "_count", labels)),
              "%s%r: +Inf bucket is not the count" % (base, dict(labels)))


def promtool_check(text):
    """promtool check metrics accepts text (Debian's prometheus package)."""
    promtool = shutil.which("promtool")
    if not promtool:
        need("promtool", "the exposition is checked by promtool (Debian's prometheus package)")
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    check(r.returncode == 0, "promtool: %s%s" % (r.stdout, r.stderr))


class Endpoint:
    """MetricsListen= on a free loopback port with a token file in tmp:
    its port, token and token_file; conf(), its [Daemon] lines."""

    def __init__(self, tmp, listen=None):
        self.token = secrets.token_hex(24)
        self.token_file = os.path.join(tmp, "metrics.token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.port = free_port()
        self.listen = listen or "127.0.0.1:%d" % self.port

    def conf(self):
        return "[Daemon]\nMetricsListen=%s\nMetricsToken=%s\n" % (self.listen, self.token_file)

    def get(self, path="/metrics", token=True, accept=None):
        """(status, headers with lower-case names, body text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {}
        if token:
            h["Authorization"] = "Bearer " + (self.token if token is True else token)
        if accept:
            h["Accept"] = accept
        try:
            c.request("GET", path, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        finally:
            c.close()


def metrics_listen(tmp, config):
    """Turns the metrics endpoint on in the config file config (appended:
    its [Daemon] section must be its last): the Endpoint."""
    e = Endpoint(tmp)
    with open(config, "a") as f:
        f.write(e.conf())
    return e


class Scraper(threading.Thread):
    """Scrapes an Endpoint's /metrics one after the other, each on a new
    connection, as Prometheus does at its interval (here without one):
    counts the scrapes answered 200 whose body holds want, the refused
    ones (connection refused, another status, want missing) and the lost
    (closed or reset without an answer). A context manager: started on
    entry, stopped and joined on exit."""

    def __init__(self, endpoint, want):
        super().__init__(daemon=True)
        self.e, self.want = endpoint, want
        self.stop = threading.Event()
        self.ok = self.refused = self.lost = 0
        self.errors = []

    def run(self):
        n = 0
        while not self.stop.is_set() and n < 100000:
            n += 1
            c = http.client.HTTPConnection("127.0.0.1", self.e.port, timeout=30)
            try:
                c.request("GET", "/metrics", headers={"Authorization": "Bearer " + self.e.token})
                r = c.getresponse()
                body = r.read().decode()
                if r.status == 200 and self.want in body:
                    self.ok += 1
                else:
                    self.refused += 1
                    self.errors.append((n, r.status, body[:200]))
            except ConnectionRefusedError as e:
                self.refused += 1
                self.errors.append((n, repr(e)))
            except (OSError, http.client.HTTPException) as e:
                self.lost += 1
                self.errors.append((n, repr(e)))
            finally:
                c.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join(60)

    def more(self, k, what):
        seen = self.ok
        wait_for(lambda: self.ok >= seen + k or not self.is_alive(), what=what)


class Metrics(Daemon):
    """A Daemon serving /metrics on a free loopback port (or a Unix
    socket: listen), with a bearer token; more: the config file's other
    sections."""

    def __init__(self, tmp, listen=None, more=""):
        e = self.endpoint = Endpoint(tmp, listen)
        self.token, self.token_file, self.port, self.listen = e.token, e.token_file, e.port, e.listen
        config = os.path.join(tmp, "gadgetd.conf")
        with open(config, "w") as f:
            f.write(e.conf() + more)
        super().__init__(tmp, ["--config", config])

    def start(self):
        super().start()
        wait_for(lambda: "metrics: serving /metrics" in self.logtext(), what="the metrics endpoint")
        return self

    def get(self, path="/metrics", token=True, accept=None):
        """(status, headers with lower-case names, body text)."""
        return self.endpoint.get(path, token, accept)
