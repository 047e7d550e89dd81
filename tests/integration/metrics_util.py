"""A gadgetd serving /metrics (MetricsListen=) on a free loopback port or
a Unix socket, with a bearer token: for metrics_test.py and the
hostile-load suite (load/metrics.py)."""
import http.client
import os
import secrets

from harness import Daemon, free_port, wait_for


class Metrics(Daemon):
    """A Daemon serving /metrics on a free loopback port (or a Unix
    socket: listen), with a bearer token; more: the config file's other
    sections."""

    def __init__(self, tmp, listen=None, more=""):
        self.token = secrets.token_hex(24)
        self.token_file = os.path.join(tmp, "metrics.token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.port = free_port()
        self.listen = listen or "127.0.0.1:%d" % self.port
        config = os.path.join(tmp, "gadgetd.conf")
        with open(config, "w") as f:
            f.write("[Daemon]\nMetricsListen=%s\nMetricsToken=%s\n%s" % (self.listen, self.token_file, more))
        super().__init__(tmp, ["--config", config])

    def start(self):
        super().start()
        wait_for(lambda: "metrics: serving /metrics" in self.logtext(), what="the metrics endpoint")
        return self

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
