"""The http binding under attack: a flood of
requests to a listener that never accepts, a server answering with 25,000
headers, and answers larger than a frame. Each attack runs while the
healthy gadget "good" is called throughout."""
import os
import re
import subprocess
import threading
import time

from harness import GADGETD, Daemon, Healthy, check, fd_count, policy, rss_growth, rss_kib, sanitized, test, unload, wait_for
from servers import ManyHeaders, NeverAccepts

HOSTILE = os.environ.get("HOSTILE", "")
MIB = 1024


class Sampler:
    """Samples gadgetd's fds and RSS every 20 ms while the block runs."""

    def __init__(self, pid):
        self.pid = pid
        self.max_fds = self.max_rss = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.max_fds = max(self.max_fds, fd_count(self.pid))
            self.max_rss = max(self.max_rss, rss_kib(self.pid))
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def web_binding(port, extra=""):
    return "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/\n%s" % (port, extra)


def start_good(d):
    policy(d.pol, "good")
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("good") == "ready", what="good ready")


def warm_curl(d, port):
    """Loads libcurl in gadgetd (one request of a gadget "warm"), so the
    baseline taken after it holds what any first request costs."""
    policy(d.pol, "warm", web_binding(port, "Timeout=1s\n"))
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("warm") == "ready", what="warm ready")
    d.ctl("call", "warm", "binding", '{"binding": "WEB", "op": "request", "args": {"url": "http://127.0.0.1:%d/"}}'
          % port)
    unload(d, "warm")




def attack(d, name, mode_args, body):
    """Starts the hostile gadget name (tests/integration/hostile.c) with
    mode_args and waits for its summary line in its log."""
    policy(d.pol, name, "Arguments=%s\n%s" % (mode_args, body), exec_path=HOSTILE)
    check(d.ctl("reload").returncode == 0, "reload failed")
    prefix = mode_args.split()[0] + ":"
    return wait_for(lambda: [l for l in d.ctl("logs", name).stdout.splitlines() if prefix in l],
                    timeout=45, what="the %s summary" % name)[0]


def counts(line):
    """{"sent": N, "answered": N, "ok": N, CODE: N} of a binding-flood line."""
    words = line.split("binding-flood:")[1].split()
    out = {}
    i = 0
    while i < len(words):
        if words[i] == "error":
            out[int(words[i + 1])] = int(words[i + 2])
            i += 3
        else:
            out[words[i]] = int(words[i + 1])
            i += 2
    return out


def baseline(d):
    time.sleep(0.3)
    return fd_count(d.proc.pid), rss_kib(d.proc.pid)


def flood_never_accepting(tmp, extra_daemon, binding_extra, n, busy_log):
    """Item 1: n requests from one gadget to a listener that never accepts.
    At most `inflight` requests ever hold a socket; the rest are answered
    busy at once."""
    with Daemon(tmp, extra=extra_daemon) as d, NeverAccepts() as lst:
        start_good(d)
        warm_curl(d, lst.port)
        fds0, rss0 = baseline(d)
        url = "http://127.0.0.1:%d/x" % lst.port
        with Healthy(d, "good", "echo"), Sampler(d.proc.pid) as s:
            line = attack(d, "flood", "binding-flood WEB request %d %s" % (n, url),
                          web_binding(lst.port, "Timeout=2s\n" + binding_extra))
        c = counts(line)
        check(c["sent"] == n and c["answered"] == n, "not every request was answered: %r" % line)
        check(c.get("ok", 0) == 0, "a request to a listener that never accepts succeeded: %r" % line)
        check(c.get(7, 0) >= n - 200, "the flood was not answered busy: %r" % line)
        # Bound: the requests in flight (16 by default, fewer when the
        # total is lower) each hold one socket; the flooding worker holds
        # five fds; the rest is slack for libcurl's own.
        check(s.max_fds <= fds0 + 16 + 5 + 16, "fds rose from %d to %d" % (fds0, s.max_fds))
        check(sanitized(d.proc.pid) or s.max_rss <= rss0 + 64 * MIB, "RSS rose from %d KiB to %d KiB" % (rss0, s.max_rss))
        log = d.logtext()
        # Within a binding's CallsMax= gadgetd's binding budget answers busy;
        # beyond HTTPRequestsMax= the HTTP budget of all gadgets does.
        check(re.search(r"\[flood\].*(?:answered busy \(|in flight \()%s" % re.escape(busy_log), log),
              "the log does not say what was refused: %r" % log[-2000:])
        unload(d, "flood")
        wait_for(lambda: fd_count(d.proc.pid) <= fds0 + 1, what="gadgetd's fds to return to %d" % fds0)
        wait_for(lambda: rss_growth(d.proc.pid, rss0) <= 16 * MIB, what="gadgetd's RSS to return to %d KiB" % rss0)


@test
def load_http_flood_never_accepting(tmp):
    flood_never_accepting(tmp, (), "", 30000, "CallsMax=16")


@test
def load_http_flood_total_budget(tmp):
    """The daemon's total (HTTPRequestsMax=) holds below a binding's own
    budget: with --http-requests-max 4, the flood gets the total's busy."""
    flood_never_accepting(tmp, ("--http-requests-max", "4"), "CallsMax=64\n", 5000, "HTTPRequestsMax=4")


@test
def load_http_many_response_headers(tmp):
    """Item 2: a server answering with 25,000 headers. The transfer ends at
    MaxResponseHeaders=, with an error to the gadget and in the audit."""
    with Daemon(tmp) as d, ManyHeaders(25000) as srv:
        start_good(d)
        warm_curl(d, srv.port)
        fds0, rss0 = baseline(d)
        url = "http://127.0.0.1:%d/x" % srv.port
        with Healthy(d, "good", "echo"), Sampler(d.proc.pid) as s:
            line = attack(d, "heady", "binding-flood WEB request 64 %s" % url, web_binding(srv.port))
        c = counts(line)
        check(c["answered"] == 64 and c.get("ok", 0) == 0, "a response with 25,000 headers went through: %r" % line)
        check(c.get(9, 0) >= 1 and c.get(9, 0) + c.get(7, 0) == 64, "not limit or busy errors: %r" % line)
        check(s.max_fds <= fds0 + 16 + 5 + 16, "fds rose from %d to %d" % (fds0, s.max_fds))
        check(sanitized(d.proc.pid) or s.max_rss <= rss0 + 64 * MIB, "RSS rose from %d KiB to %d KiB" % (rss0, s.max_rss))
        audit = d.ctl("audit", "heady").stdout
        check('"outcome":"error"' in audit and "MaxResponseHeaders" in audit, "audit: %r" % audit[-1000:])
        check(re.search(r"\[heady\].*response headers over the limit", d.logtext()),
              "the log does not say the response was dropped")
        unload(d, "heady")
        wait_for(lambda: fd_count(d.proc.pid) <= fds0 + 1, what="gadgetd's fds to return to %d" % fds0)
        wait_for(lambda: rss_growth(d.proc.pid, rss0) <= 16 * MIB, what="gadgetd's RSS to return")


@test
def load_http_response_size_policy_capped(tmp):
    """Item 7: MaxResponseSize=8M is more than one frame carries: the
    policy is refused naming file and line; the largest size allowed
    works, and a 3 MB response over it is an error, never `ok`."""
    bad = policy(tmp, "big", "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:1/\nMaxResponseSize=8M\n")
    r = subprocess.run([GADGETD, "check", bad], capture_output=True, text=True)
    check(r.returncode != 0 and "big.policy:7: MaxResponseSize=\"8M\" is more than one answer can carry"
          in r.stdout + r.stderr, "8M accepted: %r" % (r.stdout + r.stderr))
    body = {"/3m": b"x" * (3 << 20), "/1m": b"y" * (1900 << 10)}

    class Sized(ManyHeaders):
        def answer(self, c):
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += c.recv(4096) or b"\r\n\r\n"
                path = data.split()[1].decode()
                payload = body.get(path, b"")
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(payload)
                          + payload)
            except OSError:
                pass
            finally:
                c.close()

    with Daemon(tmp) as d, Sized(0) as srv:
        start_good(d)
        policy(d.pol, "web", web_binding(srv.port, "MaxResponseSize=1900K\n"))
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("web") == "ready", what="web ready")
        with Healthy(d, "good", "echo"):
            r = d.ctl("call", "web", "binding", '{"binding": "WEB", "op": "request", "args": {"url": '
                      '"http://127.0.0.1:%d/3m"}}' % srv.port)
            check(r.returncode != 0 and "larger than MaxResponseSize" in r.stderr, "3 MB: %r" % (r.stderr,))
            r = d.ctl("--json", "call", "web", "binding", '{"binding": "WEB", "op": "request", "args": {"url": '
                      '"http://127.0.0.1:%d/1m"}}' % srv.port)
            check(r.returncode == 0 and len(r.stdout) > 1900 << 10, "1900K not delivered: %r" % r.stderr)
        audit = [l for l in d.ctl("audit", "web").stdout.splitlines() if '"binding":"WEB"' in l]
        check(len(audit) == 2 and '"outcome":"error"' in audit[0] and '"outcome":"ok"' in audit[1],
              "audit: %r" % audit)


@test
def load_binding_answer_over_frame(tmp):
    """Item 7, every binding type: an answer that cannot be sent (here a
    gadget binding's answer 9 bytes over the frame limit, since the caller
    uses the largest id) is an error to the caller and in the audit."""
    # The callee's answer frame is N + 14 bytes (tags and lengths around
    # N bytes, id 1): N = 2 MiB - 14 fills it exactly; the caller's frame
    # carries a 10-byte id instead of 1 and is 9 bytes over.
    n = (2 << 20) - 14
    with Daemon(tmp) as d:
        start_good(d)
        policy(d.pol, "callee")
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("callee") == "ready", what="callee ready")
        with Healthy(d, "good", "echo"):
            line = attack(d, "caller", "big-answer PEER big %d" % n, "[Binding PEER]\nType=gadget\nTarget=callee\n")
        check("big-answer: error 9 " in line and "larger than one frame can carry" in line,
              "the caller did not get an error: %r" % line)
        audit = "\n".join(l for l in d.ctl("audit", "caller").stdout.splitlines() if '"binding":"PEER"' in l)
        check('"outcome":"error"' in audit and '"outcome":"ok"' not in audit, "audit: %r" % audit)
        r = d.ctl("call", "good", "echo", '"still here"')
        check(r.returncode == 0, "gadgetd stopped answering")
