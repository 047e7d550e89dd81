#!/usr/bin/env python3
"""gadgetctl daemon-reexec from outside: gadgetd executes its binary again
in place and keeps its gadgets — the same pids (read in /proc as well as
from its word), kv state, list, Restart= — and a stop after it still ends
every gadget; a damaged state fails closed (no process of the previous
image left); a re-exec that cannot wait for quiet is refused, and the old
image serves on. Usage: reexec_test.py TEST. Environment: GADGETD,
GADGETCTL, TESTGADGET."""
import json
import os
import shutil
import socket
import subprocess
import sys

import harness
from protobytes import field, frame, varint
from harness import GADGETD, Daemon, Healthy, check, main, pid_alive, test, wait_for, workers
from gateway_util import Gateway, GatewayCallers
from metrics_util import Scraper, metrics_listen

REEXECS = 5


def pid_of(d, name):
    return d.status(name)["pid"]


def kv(d, op, args):
    r = d.ctl("call", "store", "binding", json.dumps({"binding": "DATA", "op": op, "args": args}))
    check(r.returncode == 0, "kv %s: %r" % (op, r.stderr))
    return json.loads(r.stdout)


def echo(d, name, seq):
    r = d.ctl("call", name, "echo", json.dumps(seq))
    check(r.returncode == 0 and json.loads(r.stdout) == seq, "echo %d of %s: %r" % (seq, name, r))


def log_entry(d, name, text):
    """The gadget's log line of that text as --json gives it, or None."""
    for l in d.ctl("--json", "logs", name).stdout.splitlines():
        e = json.loads(l)
        if e["line"] == text:
            return e
    return None


def listing(d):
    return {n: g["state"] for n, g in d.list().items()}


def zombie_or_gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@test
def reexec_keeps_gadgets(tmp):
    with Daemon(tmp) as d:
        d.add("store", "Restart=always\n[Binding DATA]\nType=kv\n")
        d.add("plain", "Restart=always\n")
        d.add("idle", "Start=on-demand\n")
        d.add("halted", "Restart=no\n")
        d.add("napper", "IdleStop=1s\n")
        wait_for(lambda: listing(d) == {"store": "ready", "plain": "ready", "idle": "idle", "halted": "ready",
                                        "napper": "idle"},
                 what="the gadgets ready, napper idle after IdleStop=: %r" % listing(d))
        check(d.ctl("stop", "halted").returncode == 0, "stop halted")
        wait_for(lambda: d.state("halted") == "stopped", what="halted stopped")
        before = listing(d)
        pids = {n: pid_of(d, n) for n in ("store", "plain")}
        check(sorted(workers(d)) == sorted(pids.values()), "workers %r, status %r" % (workers(d), pids))
        kv(d, "put", {"key": "counter", "value": 0})
        check(d.ctl("call", "plain", "say", json.dumps({"text": "said before the re-execs"})).returncode == 0, "say")
        wait_for(lambda: "said before the re-execs" in d.ctl("logs", "plain").stdout, what="plain's log line")
        said = log_entry(d, "plain", "said before the re-execs")
        for i in range(1, REEXECS + 1):
            r = d.ctl("daemon-reexec")
            check(r.returncode == 0 and "2 of 2 running gadgets adopted" in r.stdout,
                  "daemon-reexec %d: %r %s" % (i, r, d.logtext()[-3000:]))
            check(d.proc.poll() is None, "gadgetd's own process ended")
            check(listing(d) == before, "list after re-exec %d: %r, before %r" % (i, listing(d), before))
            check({n: pid_of(d, n) for n in pids} == pids, "pids after re-exec %d" % i)
            check(sorted(workers(d)) == sorted(pids.values()), "workers after re-exec %d: %r" % (i, workers(d)))
            echo(d, "plain", i)
            counter = kv(d, "get", {"key": "counter"})
            check(counter == i - 1, "kv counter after re-exec %d: %r" % (i, counter))
            kv(d, "put", {"key": "counter", "value": counter + 1})
        check(d.logtext().count("re-executing") == REEXECS, "gadgetd's log names each re-exec")
        # Each gadget's log ring is handed on: its line from before the re-execs is there.
        check("said before the re-execs" in d.ctl("logs", "plain").stdout, "plain's log lost its line")
        # With its time, stream and run; the same process writes on as run 1.
        check(log_entry(d, "plain", "said before the re-execs") == said, "the line handed on: %r, before %r" %
              (log_entry(d, "plain", "said before the re-execs"), said))
        check(d.ctl("call", "plain", "say", json.dumps({"text": "said after"})).returncode == 0, "say")
        after = wait_for(lambda: log_entry(d, "plain", "said after"), what="plain's line after the re-execs")
        check(after["run"] == said["run"] == 1 and after["time_ms"] >= said["time_ms"], "after: %r" % after)
        # Its locks held throughout: a second gadgetd on the same directories is refused.
        second = subprocess.run([harness.GADGETD, "--policy-dir", d.pol, "--state-dir", os.path.join(tmp, "state"),
                                 "--socket", d.sock, "--run-dir", os.path.join(tmp, "run")],
                                capture_output=True, text=True, timeout=60)
        check(second.returncode != 0 and "in use by another gadgetd (pid %d)" % d.proc.pid in second.stderr,
              "a second gadgetd started beside the re-executed one: %r" % second)
        # Restart= still watches an adopted gadget.
        check(d.ctl("kill", "plain", "KILL").returncode == 0, "kill plain")
        wait_for(lambda: d.state("plain") == "ready" and pid_of(d, "plain") not in (0, pids["plain"]),
                 what="plain restarted by its Restart=")
        echo(d, "plain", 99)
        # The idle gadget still starts at its first call.
        echo(d, "idle", 1)
        alive = workers(d)
        check(len(alive) == 3, "three gadgets run: %r" % alive)
        check(d.stop() == 0, "gadgetd stops")
        check(all(not pid_alive(p) for p in alive), "a gadget outlived gadgetd's stop: %r" % alive)


@test
def reexec_keeps_the_policy_in_effect(tmp):
    """A policy file changed since its load: the re-exec keeps the gadget
    on the policy it runs (same pid, no restart), says so in its status,
    and a reload then applies the file."""
    with Daemon(tmp) as d:
        d.add("plain", "CallTimeout=7s\n")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = pid_of(d, "plain")
        with open(os.path.join(d.pol, "plain.policy"), "a") as f:
            f.write("Restart=always\n")
        r = d.ctl("daemon-reexec")
        check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout, "daemon-reexec: %r" % r)
        st = d.status("plain")
        check(st["pid"] == pid and st["restarts"] == 0, "the gadget restarted: %r" % st)
        check(st.get("kept_errors") == 1, "its status does not say it is kept on its policy: %r" % st)
        cat = d.ctl("cat", "plain").stdout
        check("CallTimeout=7s" in cat and "Restart=always" not in cat.split("\n\n")[0], "cat: %r" % cat)
        r = d.ctl("reload")
        check(r.returncode == 0 and "restarted: plain" in r.stdout, "reload applies the file: %r" % r)
        wait_for(lambda: d.state("plain") == "ready" and pid_of(d, "plain") != pid, what="plain restarted")


@test
def reexec_keeps_a_runs_core(tmp):
    """CoreDump=: a run handed on by the re-exec keeps its core memfd, so
    its crash after the re-exec is kept as one before it would be."""
    with Daemon(tmp) as d:
        d.add("dump", "Restart=no\nCoreDump=64K\n")
        wait_for(lambda: d.state("dump") == "ready", what="dump ready")
        r = d.ctl("daemon-reexec")
        check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout, "daemon-reexec: %r" % r)
        d.ctl("call", "dump", "crash_null")
        wait_for(lambda: d.state("dump") == "failed", what="dump failed")
        c = json.loads(d.ctl("--json", "cores", "dump").stdout)
        check(len(c) == 1 and c[0]["run"] == 1 and 0 < c[0]["size"] <= 65536, "its core kept: %r %s"
              % (c, d.logtext()[-1500:]))
        cause = d.status("dump")["crash_cause"]
        check("in crash_null_here" in cause, "its crash explained as before the re-exec: %r" % cause)


@test
def reexec_steady_caller_sees_nothing(tmp):
    """A caller on one control connection, one call after the other,
    through 5 re-execs: every call answered once, in turn, none refused;
    its connection is handed on with what it had sent."""
    with Daemon(tmp) as d:
        d.add("plain", "")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = pid_of(d, "plain")

        def calls():
            return d.status("plain")["calls"]

        with Healthy(d, "plain", "echo", "7") as h:
            for i in range(1, REEXECS + 1):
                seen = calls()
                wait_for(lambda: calls() >= seen + 50, what="50 more calls before re-exec %d" % i)
                r = d.ctl("daemon-reexec")
                check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout,
                      "daemon-reexec %d: %r" % (i, r))
            seen = calls()
            wait_for(lambda: calls() >= seen + 50, what="50 more calls after the last re-exec")
        print("steady caller through %d re-execs: %r" % (REEXECS, h.result))
        check(h.result["sent"] >= 300, "too few calls: %r" % h.result)
        check(pid_of(d, "plain") == pid, "the gadget's pid changed")


@test
def reexec_pipelined_calls_answered_once(tmp):
    """400 calls written at once (each taking 1 ms in the gadget), a
    re-exec while they run, 5 times: the re-exec waits for those in flight
    and hands on the connection with the rest unread; every call answered,
    once, none refused."""
    with Daemon(tmp) as d:
        d.add("plain", "")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = pid_of(d, "plain")
        for i in range(1, REEXECS + 1):
            flood = subprocess.Popen([harness.CALLFLOOD, d.sock, "plain", "sleep", "400", '{"ms": 1}'],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            wait_for(lambda: d.status("plain")["in_flight"] > 0, what="calls in flight")
            r = d.ctl("daemon-reexec")
            check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout, "daemon-reexec %d: %r" % (i, r))
            out, err = flood.communicate(timeout=60)
            check(flood.returncode == 0 and out.split() == ["ok", "400", "unanswered", "0"],
                  "round %d: %r %r" % (i, out, err))
        check(pid_of(d, "plain") == pid, "the gadget's pid changed")


def request(rid, kind, body):
    """A control Request of id rid (version 1), kind its oneof field, framed."""
    return frame(varint(1 << 3) + varint(rid) + varint(11 << 3) + varint(1) + field(kind, body))


def answer(sock):
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    n, body = int.from_bytes(head, "little"), b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return body


@test
def reexec_hands_on_a_half_read_request(tmp):
    """A client's request cut in the middle when gadgetd re-executes: the
    half gadgetd had read is handed on, the rest comes to the new image,
    and the call is answered."""
    with Daemon(tmp) as d:
        d.add("plain", "")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        call = request(2, 7, field(1, b"plain") + field(2, b"echo") + field(3, varint(3 << 3) + varint(6)))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(d.sock)
        s.sendall(request(1, 5, b"") + call[:10])
        check(answer(s).startswith(b"\x08\x01"), "no answer to the list")  # read with the half after it
        r = d.ctl("daemon-reexec")
        check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout, "daemon-reexec: %r" % r)
        s.sendall(call[10:])
        body = answer(s)
        check(body.startswith(b"\x08\x02") and b"\x32\x02\x18\x06" in body, "the call's answer: %r" % body)
        s.close()


@test
def reexec_with_the_gateway(tmp):
    """gadgetd with its gateway and its metrics endpoint, 4 callers through
    the gateway and a scraper of /metrics throughout 5 re-execs: both ports
    kept (the listening sockets handed on), every call answered and every
    scrape too (each showing the adopted gadget ready), none refused or
    lost; a browser's session cookie still valid; the gadget's pid
    unchanged."""
    g = Gateway(tmp)
    m = metrics_listen(tmp, g.config)
    with g:
        g.add("plain", "")
        g.wait_ready("plain")
        pid = pid_of(g, "plain")
        st, hd, _ = g.request("GET", "/?token=" + g.token, auth=False)
        check(st == 303, "login: %d" % st)
        cookie = hd["set-cookie"].split(";")[0]
        ready = 'gadgetd_gadget_state{gadget="plain",state="ready"} 1'
        with GatewayCallers(g, "plain", 4) as callers, Scraper(m, ready) as scraper:
            for i in range(1, REEXECS + 1):
                callers.more(100, "100 more calls through the gateway before re-exec %d" % i)
                scraper.more(2, "2 more scrapes before re-exec %d" % i)
                r = g.ctl("daemon-reexec")
                check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout,
                      "daemon-reexec %d: %r %s" % (i, r, g.logtext()[-2000:]))
            callers.more(100, "100 more calls after the last")
            scraper.more(2, "2 more scrapes after the last")
        print("through the gateway, %d re-execs: %d ok, %d refused, %d lost; scrapes: %d ok, %d refused, %d lost"
              % (REEXECS, callers.ok(), callers.refused(), callers.lost(), scraper.ok, scraper.refused,
                 scraper.lost))
        check(callers.refused() == 0 and callers.lost() == 0, "calls refused or lost: %r" % callers.errors())
        check(callers.ok() >= 600, "too few calls: %d" % callers.ok())
        check(scraper.refused == 0 and scraper.lost == 0, "scrapes refused or lost: %r" % scraper.errors[:5])
        check(g.logtext().count("its socket kept across gadgetd's re-exec") == REEXECS,
              "the gateway's socket not kept")
        check(g.logtext().count("the socket kept across gadgetd's re-exec") == REEXECS,
              "the metrics endpoint's socket not kept")
        st, _, body = g.request("GET", "/api/gadgets", auth=False, headers={"Cookie": cookie})
        check(st == 200, "the session cookie from before the re-execs: %d %r" % (st, body))
        check(pid_of(g, "plain") == pid, "the gadget's pid changed")


def build_copy(tmp):
    """gadgetd and gadgetd-sandbox copied into a tree that reads as a
    build tree (how gadgetd finds its sandbox helper): the binary there can
    be removed or replaced under a running gadgetd, as a package upgrade
    does. Returns the copy of gadgetd."""
    build = os.path.dirname(os.path.dirname(GADGETD))
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "meson-private"))
    for rel in ("supervisor/gadgetd", "worker/sandbox/gadgetd-sandbox"):
        os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
        shutil.copy2(os.path.join(build, rel), os.path.join(tree, rel))
    return os.path.join(tree, "supervisor", "gadgetd")


@test
def reexec_runs_the_file_on_disk(tmp):
    """An exec that fails (the binary removed) leaves the old image
    serving, its gadget untouched, and says why; a replaced binary (a new
    file at the path, as a package upgrade writes it) is the one run."""
    copy = build_copy(tmp)
    harness.GADGETD = copy  # what Daemon runs (one test per process)
    with Daemon(tmp) as d:
        d.add("plain", "")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = pid_of(d, "plain")
        os.unlink(copy)
        r = d.ctl("daemon-reexec")
        check(r.returncode == 1 and "cannot execute %s: No such file or directory" % copy in r.stderr,
              "re-exec of a removed binary: %r" % r)
        check(pid_of(d, "plain") == pid and d.proc.poll() is None, "the old image does not serve on")
        echo(d, "plain", 1)
        shutil.copy2(os.path.join(os.path.dirname(os.path.dirname(GADGETD)), "supervisor", "gadgetd"), copy)
        r = d.ctl("daemon-reexec")
        check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout, "re-exec: %r" % r)
        check(os.stat("/proc/%d/exe" % d.proc.pid).st_ino == os.stat(copy).st_ino,
              "gadgetd does not run the new file")
        check(pid_of(d, "plain") == pid, "the gadget's pid changed")
        echo(d, "plain", 2)


def damaged(tmp, how):
    env = dict(os.environ, GADGETD_TEST_REEXEC_DAMAGE=how)
    with Daemon(tmp, env=env) as d:
        d.add("store", "Restart=always\n[Binding DATA]\nType=kv\n")
        wait_for(lambda: d.state("store") == "ready", what="store ready")
        old = pid_of(d, "store")
        r = d.ctl("daemon-reexec")
        check(r.returncode != 0, "a re-exec with a damaged state said it worked: %r" % r)
        wait_for(lambda: "ended (see its log)" in d.logtext(), what="the new image's word")
        log = d.logtext()
        check("cannot be read, so no gadget is adopted" in log, "no clear refusal in the log: %s" % log[-2000:])
        check(d.proc.poll() is None, "gadgetd ended")
        check(zombie_or_gone(old), "the old worker lives on: %s" % log[-2000:])
        # The new image starts its gadgets afresh, as at any start.
        wait_for(lambda: d.ctl("status", "store").returncode == 0 and d.state("store") == "ready",
                 what="store started again")
        check(pid_of(d, "store") != old, "the old worker was kept")
        check(workers(d) == [pid_of(d, "store")], "one worker, the new: %r" % workers(d))


@test
def reexec_damaged_state_fails_closed(tmp):
    damaged(tmp, "flip")


@test
def reexec_truncated_state_fails_closed(tmp):
    damaged(tmp, "truncate")


@test
def reexec_refused_while_a_call_runs(tmp):
    with Daemon(tmp) as d:
        d.add("slow", "CallTimeout=30s\n")
        wait_for(lambda: d.state("slow") == "ready", what="slow ready")
        pid = pid_of(d, "slow")
        call = subprocess.Popen([os.environ["GADGETCTL"], "--socket", d.sock, "call", "slow", "sleep",
                                 json.dumps({"ms": 6000})], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.status("slow").get("in_flight") == 1,
                 what="the call in flight")
        r = d.ctl("daemon-reexec")
        check(r.returncode != 0 and "gadget slow has calls in flight after 2 s" in r.stderr,
              "re-exec during a call: %r" % r)
        out, err = call.communicate(timeout=30)
        check(call.returncode == 0 and json.loads(out) == "slept", "the call: %r %r" % (out, err))
        check(pid_of(d, "slow") == pid and "re-executing" not in d.logtext(), "gadgetd re-executed anyway")
        echo(d, "slow", 1)


if __name__ == "__main__":
    sys.exit(main())
