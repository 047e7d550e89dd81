"""Any local user against gadgetd's gateway: thousands of
connections that never finish a request head, at and beyond gadgetd's fd
limit, and a flood of requests without the token. The attacks are
attacks.py subcommands (see there to run one by hand or in a benchmark)."""
import http.client
import json
import os
import stat
import subprocess
import threading
import time

import harness
from gateway_util import Gateway, attack, counts
from harness import Healthy, check, cpu_s, fd_count, policy, rss_growth, rss_kib, test, wait_for


def gateway(tmp, settings, nofile=None):
    """A Gateway with [Gateway] settings added; with nofile, gadgetd runs
    with that open-files limit (through prlimit, which execs it)."""
    g = Gateway(tmp)
    with open(g.config, "a") as f:
        f.write(settings)
    if nofile:
        wrapper = os.path.join(tmp, "gadgetd-limited")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec prlimit --nofile=%d:%d -- %s \"$@\"\n" % (nofile, nofile, harness.GADGETD))
        os.chmod(wrapper, 0o755)
        harness.GADGETD = wrapper
    return g


def ready(g):
    policy(g.pol, "good", "LimitNOFILE=64\n")  # within the low limit of load_gateway_at_the_fd_limit
    check(g.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: g.state("good") == "ready", what="good ready")
    wait_for(lambda: harness.spare(g), what="the spare sandbox shell")


def log_lines(g, text):
    return sum(text in line for line in g.logtext().splitlines())


@test
def load_gateway_connection_flood(tmp):
    """A stranger opens 2,500 gateway connections and sends half a request
    head on each: gadgetd holds at most MaxConnections=64 of them, closes
    each after HeaderTimeout=1s, logs both once per window; the healthy
    gadget is answered, root's control works, the fds come back."""
    g = gateway(tmp, "MaxConnections=64\nHeaderTimeout=1s\n")
    with g:
        ready(g)
        pid = g.proc.pid
        fd0, rss0 = fd_count(pid), rss_kib(pid)
        t0 = time.time()
        with Healthy(g, "good", "echo"):
            p = attack("gateway-hold", str(g.port), "2500", "6")
            peak = fd0
            while p.poll() is None:
                peak = max(peak, fd_count(pid))
                time.sleep(0.05)
            c = counts(p.stdout.read())
            print("gadgetd's fds: %d at rest, at most %d during the attack" % (fd0, peak))
            check(c.get("opened", 0) >= 2000, "the attack: %r %s" % (c, p.stderr.read()))
            check(c["closed"] >= 64, "gadgetd closed only %d of the slow connections" % c["closed"])
            # MaxConnections=64 and a few of gadgetd's own: every run here,
            # plain and under ASan, peaks at 65 over the baseline (the 64
            # and the one being accepted). Before gateway_conn.c's
            # resume_if_room (the listener waits the loop turn in which
            # evhttp frees closed connections' fds) a CI run under ASan saw
            # 128. Slack: 8 fds of gadgetd's own that may open meanwhile
            # (an audit rotation, a kv store, a log pipe).
            check(peak <= fd0 + 64 + 1 + 8, "gadgetd held %d fds, was %d" % (peak, fd0))
            r = g.ctl("list")
            check(r.returncode == 0, "root's control: %r" % r.stderr)
            check(g.gadgets()["good"]["state"] == "ready", "the gateway serves the token holder")
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back to %d" % fd0)
        check(rss_growth(pid, rss0) < 16 * 1024, "RSS grew by %d KiB" % rss_growth(pid, rss0))
        # one line, then a count per 10 s window for as long as it lasted
        windows = int((time.time() - t0) / 10)
        check(1 <= log_lines(g, "(MaxConnections)") <= 2 + windows, "MaxConnections lines: %d in %d windows" % (
            log_lines(g, "(MaxConnections)"), windows + 1))
        check(1 <= log_lines(g, "HeaderTimeout") <= 3 + windows, "HeaderTimeout lines: %d in %d windows" % (
            log_lines(g, "HeaderTimeout"), windows + 1))
        check(log_lines(g, "gateway:") < 20, "gateway log lines: %d" % log_lines(g, "gateway:"))


@test
def load_gateway_at_the_fd_limit(tmp):
    """gadgetd with 200 open files and MaxConnections=1000 (a bad setting):
    2,000 held connections bring it to its fd limit. The listener pauses
    instead of spinning on EMFILE (gadgetd's CPU time beyond what the
    healthy calls cost stays under a third of the attack's wall time, each
    pause is one log line), and so does the
    control listener when root connects meanwhile; the healthy gadget is
    answered throughout, and root's waiting `list` is answered once
    HeaderTimeout has closed the connections."""
    g = gateway(tmp, "MaxConnections=1000\nHeaderTimeout=2s\n", nofile=200)
    try:
        with g:
            ready(g)
            pid = g.proc.pid
            fd0 = fd_count(pid)
            with Healthy(g, "good", "echo"):
                # What the healthy calls alone cost gadgetd, to tell the
                # attack's cost apart (the caller calls as fast as it can).
                cpu0, t0 = cpu_s(pid), time.time()
                time.sleep(1)
                base = (cpu_s(pid) - cpu0) / (time.time() - t0)
                cpu0, t0 = cpu_s(pid), time.time()
                p = attack("gateway-hold", str(g.port), "2000", "5")
                wait_for(lambda: log_lines(g, "listener on 127.0.0.1:%d: cannot accept" % g.port), what="gadgetd at its fd limit")
                # root's control connection waits in the listen queue meanwhile:
                # the control listener pauses too, and answers once fds are free
                ctl = subprocess.Popen([harness.GADGETCTL, "--socket", g.sock, "list"], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
                p.wait(timeout=60)
                out, err = ctl.communicate(timeout=60)
                check(ctl.returncode == 0 and "good" in out, "root's list during the attack: %r" % err)
                cpu, wall = cpu_s(pid) - cpu0, time.time() - t0
                check(p.returncode == 0, "the attack failed: %r" % p.stderr.read())
                check(cpu / wall - base < 1 / 3, "gadgetd used %.1f s of CPU in %.1f s (%.0f%% of a CPU for the "
                      "healthy calls alone)" % (cpu, wall, 100 * base))
            pauses = log_lines(g, "listener on 127.0.0.1:%d: cannot accept: Too many open files" % g.port)
            check(1 <= pauses <= wall / 0.5 + 2, "EMFILE lines: %d in %.1f s" % (pauses, wall))
            check("Error from accept" not in g.logtext(), "libevent logged accept errors")
            check(1 <= log_lines(g, "control socket: cannot accept: Too many open files") <= 2,
                  "control EMFILE lines: %d" % log_lines(g, "control socket: cannot accept"))
            wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back to %d" % fd0)
            check(g.ctl("list").returncode == 0, "root's control after the attack")
    finally:
        harness.GADGETD = os.environ.get("GADGETD", "")


@test
def load_gateway_seats_come_back(tmp):
    """A stranger holds 16 connections to a gateway of MaxConnections=16,
    HeaderTimeout=1s, sending a request without the token on each every
    0.3 s (each answered 401) and opening a new one for each closed: its
    connections hold at most half the seats and none past HeaderTimeout,
    so all of a token holder's 25 requests, one connection each, are
    answered within 5 s meanwhile (without either bound the stranger kept
    every seat)."""
    g = gateway(tmp, "MaxConnections=16\nHeaderTimeout=1s\n")
    with g:
        ready(g)
        p = attack("gateway-notoken-hold", str(g.port), "16", "8", "0.3")
        wait_for(lambda: log_lines(g, "no valid token") >= 1, what="the stranger's first refusal")
        ok = 0
        for _ in range(25):
            c = http.client.HTTPConnection("127.0.0.1", g.port, timeout=5)
            try:
                c.request("POST", "/api/gadgets/good/call/echo", body="1",
                          headers={"Host": "127.0.0.1:%d" % g.port, "Authorization": "Bearer " + g.token,
                                   "Content-Type": "application/json"})
                ok += c.getresponse().status == 200
            except OSError:
                pass
            finally:
                c.close()
        out, err = p.communicate(timeout=60)
        c = counts(out)
        check(ok == 25, "the token holder's requests answered: %d of 25 (stranger: %r %s)" % (ok, c, err))
        check(c.get("answered", 0) > 0 and c.get("closed", 0) > 0, "the stranger was answered and cut: %r" % c)


@test
def load_gateway_requests_without_token(tmp):
    """3,000 requests without the token on one connection: each answered
    401 (or, once HeaderTimeout=10s since its connection passed, closed:
    a connection that never shows the token keeps its seat no longer),
    and the log has one line for them plus at most a count."""
    g = gateway(tmp, "")
    with g:
        ready(g)
        pid = g.proc.pid
        fd0 = fd_count(pid)
        with Healthy(g, "good", "echo"):
            t0 = time.time()
            p = attack("gateway-notoken", str(g.port), "3000")
            out, err = p.communicate(timeout=60)
            c = counts(out)
            windows = int((time.time() - t0) / 10)
            check(c.get("status_401", 0) + c.get("status_closed", 0) == 3000 and
                  c.get("status_closed", 0) <= windows, "the stranger's answers: %r %s" % (c, err))
        check(log_lines(g, "no valid token") == 1, "token refusals logged: %d" % log_lines(g, "no valid token"))
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back")


@test
def load_gateway_big_answers(tmp):
    """A page (or anyone holding the token) asks its gadget for 1 MB
    results, one after another: each answer's JSON costs gadgetd's loop
    about 12 ms, so calls through the gateway to one gadget get at most
    GATEWAY_BYTES_PER_S (4 MiB) of JSON a second. The 8th call of 1.33 MB
    answers starts once 7 answers (9.3 MB) have drained to the budget: at
    least (9.3 MB - 4 MiB) / 4 MiB = 1.23 s (1.1 allowed for the clock's
    rounding; 0.12 s without the budget). Then 17 calls at once that the
    gadget does not answer: 16 reach it (GATEWAY_CALLS_PER_GADGET), the
    17th waits in the gateway, and starts (and is answered) once the
    gadget is killed and its policy removed (a reload unloads it). gadgetd says so once; a healthy caller is answered
    throughout."""
    g = gateway(tmp, "")
    with g:
        ready(g)
        policy(g.pol, "big", "CallTimeout=30s\n")
        check(g.ctl("reload").returncode == 0, "reload failed")
        g.wait_ready("big")
        with Healthy(g, "good", "echo"):
            t0 = time.monotonic()
            for _ in range(8):
                status, body = g.call("big", "big", {"n": 1000000})
                check(status == 200 and len(body["$bytes"]) == 1333336, "a big answer: %d" % status)
            took = time.monotonic() - t0
            check(took >= 1.1, "8 answers of 1.33 MB through the gateway in %.2f s, under the 1.23 s "
                  "GATEWAY_BYTES_PER_S allows" % took)
            check(log_lines(g, "calls to it through the gateway wait their turn") == 1, "said once")
            results = []

            def hang():
                results.append(g.call("big", "hang", {}))
            threads = [threading.Thread(target=hang) for _ in range(17)]
            for t in threads:
                t.start()
            in_flight = lambda: json.loads(g.ctl("--json", "status", "big").stdout)["in_flight"]
            wait_for(lambda: in_flight() == 16, what="16 calls in flight")
            check(len(results) == 0 and in_flight() == 16, "a 17th call reached the gadget: %r, %d in flight"
                  % (results, in_flight()))
            os.remove(os.path.join(g.pol, "big.policy"))
            check(g.ctl("kill", "big", "KILL").returncode == 0, "kill")
            check(g.ctl("reload").returncode == 0, "the reload that unloads big")
            t1 = time.monotonic()
            for t in threads:
                t.join()
            print("8 big answers in %.2f s; the 17 hanging calls answered %.2f s after the kill" % (
                took, time.monotonic() - t1))
        check(len(results) == 17 and all(s != 200 for s, _ in results), "17 answers: %r" %
              sorted({s for s, _ in results}))
