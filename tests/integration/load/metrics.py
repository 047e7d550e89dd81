"""Any local user against gadgetd's metrics endpoint (MetricsListen=):
hundreds of connections that never finish a request head, requests
without the token, junk, huge headers, and scrapers that never read their
answers — while a healthy gadget is called and the token holder scrapes.
The flood's attacks are attacks.py's (the gateway's: any evhttp server of
gadgetd counts its connections in system/httpconn.c)."""
import socket

import harness
from harness import Healthy, check, fd_count, policy, rss_growth, rss_kib, test, wait_for
from gateway_util import attack, counts
from metrics_util import Metrics


def ready(d):
    """good, and 600 idle gadgets (Start=on-demand: no process each), so
    that a scrape is many chunks (a family most gadgets have no series of,
    gadgetd_gadget_calls, among them) and a reader that stops reading
    stops it halfway."""
    policy(d.pol, "good")
    for i in range(600):
        policy(d.pol, "idle%d" % i, "Start=on-demand\n")
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("good") == "ready" and len(d.list()) == 601, what="good ready, all loaded")
    wait_for(lambda: harness.spare(d), what="the spare sandbox shell")  # its fds counted at rest


def raw(port, data, read=True):
    """Sends data on a new connection; the status line's code, or "closed"."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        if not read:
            return s
        head = s.recv(65536)
        return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else "closed"
    except OSError:
        return "closed"
    finally:
        if read:
            s.close()


def scrape_ok(d):
    try:
        status, _, body = d.get()
    except OSError:  # cut, as the oldest connection without the token yet
        return False
    return (status == 200 and 'gadgetd_gadget_state{gadget="good",state="ready"} 1' in body and
            "gadgetd_gadgets 601\n" in body and body.endswith('gadgetd_connections{kind="metrics"} %s\n'
                                                               % body.rsplit(" ", 1)[-1].strip()))


@test
def load_metrics_endpoint(tmp):
    """A stranger holds 600 connections with half a request head each:
    gadgetd holds at most its 16 seats (and a few fds of its own), the
    token holder's scrapes are answered meanwhile (a tokenless connection
    holds at most half the seats). 500 requests without the token are each
    401; junk, a 64 KiB header and a body are refused with a 4xx or closed;
    8 token holders that ask for 50 scrapes each (of 601 gadgets) and
    stop reading, then leave halfway, cost nothing else; each scrape is
    whole (it ends with gadgetd's own series). The healthy gadget is answered throughout; fds come back."""
    d = Metrics(tmp)
    with d:
        ready(d)
        pid = d.proc.pid
        fd0, rss0 = fd_count(pid), rss_kib(pid)
        with Healthy(d, "good", "echo"):
            p = attack("gateway-hold", str(d.port), "600", "4")
            peak, scrapes, tries = fd0, 0, 0
            while p.poll() is None:
                peak = max(peak, fd_count(pid))
                scrapes += scrape_ok(d)
                tries += 1
            c = counts(p.stdout.read())
            check(c.get("opened", 0) >= 500, "the attack: %r %s" % (c, p.stderr.read()))
            # 16 seats, the one being accepted, the token holder's, and slack for gadgetd's own
            check(peak <= fd0 + 16 + 2 + 8, "gadgetd held %d fds, was %d" % (peak, fd0))
            check(scrapes >= 1, "the token holder's scrapes answered during the flood: %d" % scrapes)
            print("token holder's scrapes during the flood: %d answered of %d" % (scrapes, tries))
            p = attack("gateway-notoken", str(d.port), "500")
            out, err = p.communicate(timeout=60)
            check(counts(out).get("status_401", 0) == 500, "requests without the token: %r %s" % (out, err))
            junk = [b"\x00\xff" * 4000 + b"\r\n\r\n", b"GARBAGE / HTTP/9.9\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n",
                    b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"b" * 100000]
            for data in junk:
                status = raw(d.port, data)
                check(status == "closed" or 400 <= status < 500, "junk %r: %r" % (data[:20], status))
            auth = ("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % d.token).encode()
            slow = []
            for _ in range(8):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", d.port))
                s.sendall(auth * 50)
                slow.append(s)
            check(scrape_ok(d), "a scrape while 8 readers do not read")
            check(d.ctl("list").returncode == 0, "root's control")
            for s in slow:
                s.close()
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back to %d" % fd0)
        check(rss_growth(pid, rss0) < 16 * 1024, "RSS grew by %d KiB" % rss_growth(pid, rss0))
        status, _, body = d.get()
        check('gadgetd_budget_refusals_total{budget="metrics_connections"}' in body, "the refusals' series")
        check(d.logtext().count("metrics: ") < 20, "metrics log lines: %d" % d.logtext().count("metrics: "))
