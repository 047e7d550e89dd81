#!/usr/bin/env python3
"""gadgetctl logs from outside: each line carries its time (wall clock, to
the ms), stream (stdout, stderr, message), priority and run (which process
of the gadget), in text and --json; a gadget that crashes and restarts
shows runs 1, 2, 3; --since leaves out the lines before a time; logs -f
without a name follows every gadget at once, each line naming its gadget.
And the audit records of operations: a gadget's lifecycle events with
their fields, gadgetctl call naming the caller's uid, a kv miss as
not_found. Usage: logs_test.py TEST. Environment: GADGETD, GADGETCTL,
TESTGADGET."""
import json
import os
import re
import subprocess
import sys
import threading
import time

from harness import GADGETCTL, Daemon, check, main, test, wait_for

SHORT = re.compile(r"^(\w{3} \d{2} \d{2}:\d{2}:\d{2}\.\d{3}) ([a-z0-9_-]+)\[(\d+|-)\] ([a-z]+)\.([a-z]+): (.*)$")


def entries(d, *args):
    r = d.ctl("--json", "logs", *args)
    check(r.returncode == 0, "logs --json %r: %r" % (args, r.stderr))
    return [json.loads(l) for l in r.stdout.splitlines()]


def texts(d, *args):
    """The gadget's own lines (not gadgetd's: its lifecycle)."""
    return [e["line"] for e in entries(d, *args) if e["stream"] != "gadgetd"]


def call(d, name, method, args=None):
    r = d.ctl("call", name, method, *([json.dumps(args)] if args is not None else []))
    check(r.returncode == 0, "call %s.%s: %r" % (name, method, r.stderr))


def now_ms():
    return time.time_ns() // 1000000


@test
def logs_carry_time_stream_priority_run(tmp):
    with Daemon(tmp) as d:
        d.add("mixer")
        wait_for(lambda: d.state("mixer") == "ready", what="mixer ready")
        t0 = now_ms()
        call(d, "mixer", "interleave")
        call(d, "mixer", "log", {"text": "it broke", "level": 3})
        t1 = now_ms()
        wait_for(lambda: "it broke" in texts(d, "mixer"), what="the log message")
        got = {e["line"]: e for e in entries(d, "mixer")}
        want = {"out-start out-end": ("stdout", 6), "err-line": ("stderr", 6), "log-line": ("message", 6),
                "it broke": ("message", 3)}
        for text, (stream, prio) in want.items():
            e = got.get(text)
            check(e is not None, "no line %r in %r" % (text, list(got)))
            check((e["stream"], e["priority"], e["run"], e["gadget"]) == (stream, prio, 1, "mixer"),
                  "line %r: %r" % (text, e))
            check(t0 <= e["time_ms"] <= t1, "line %r at %d, not within [%d, %d]" % (text, e["time_ms"], t0, t1))
            iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(e["time_ms"] // 1000)) + ".%03dZ" % (e["time_ms"] % 1000)
            check(e["time"] == iso, "time %r, want %r" % (e["time"], iso))
        # Text: journalctl's short-precise, in local time.
        r = d.ctl("logs", "mixer")
        check(r.returncode == 0, "logs: %r" % r.stderr)
        lines = {}
        for l in r.stdout.splitlines():
            m = SHORT.match(l)
            check(m is not None, "not a short-precise line: %r" % l)
            lines[m.group(6)] = m.groups()
        e = got["it broke"]
        local = time.strftime("%b %d %H:%M:%S", time.localtime(e["time_ms"] // 1000)) + ".%03d" % (e["time_ms"] % 1000)
        check(lines["it broke"][:5] == (local, "mixer", "1", "message", "err"), "text: %r" % (lines["it broke"],))
        check(lines["err-line"][3:5] == ("stderr", "info"), "text: %r" % (lines["err-line"],))
        r = d.ctl("logs", "mixer", "-n", "1", "-o", "cat")
        check(r.stdout == "it broke\n", "-o cat: %r" % r.stdout)


@test
def logs_runs_of_a_crashing_gadget(tmp):
    """A gadget that crashes and is restarted: each run's lines carry its
    number, so the runs read apart."""
    with Daemon(tmp) as d:
        d.add("crasher", "Restart=always\n")
        for run in (1, 2, 3):
            wait_for(lambda: d.state("crasher") == "ready", what="crasher ready (run %d)" % run)
            call(d, "crasher", "say", {"text": "alive in run %d" % run})
            wait_for(lambda: "alive in run %d" % run in texts(d, "crasher"), what="run %d's line" % run)
            if run < 3:
                d.ctl("call", "crasher", "crash")
                wait_for(lambda: d.status("crasher")["restarts"] == run, what="restart %d" % run)
        runs = {e["line"]: e["run"] for e in entries(d, "crasher")}
        check(all(runs["alive in run %d" % n] == n for n in (1, 2, 3)), "runs: %r" % runs)
        r = d.ctl("logs", "crasher")
        check(re.search(r"crasher\[2\] stdout\.info: alive in run 2$", r.stdout, re.M), "text: %r" % r.stdout)


@test
def logs_since(tmp):
    with Daemon(tmp) as d:
        d.add("talker")
        wait_for(lambda: d.state("talker") == "ready", what="talker ready")
        for text in ("one", "two", "three"):
            call(d, "talker", "say", {"text": text})
        wait_for(lambda: texts(d, "talker")[-1:] == ["three"], what="the lines")
        es = entries(d, "talker")
        t = {e["line"]: e["time_ms"] for e in es}
        check(t["one"] < t["two"], "the lines' times: %r" % t)
        two = t["two"]
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(two // 1000)) + ".%03dZ" % (two % 1000)
        check(texts(d, "talker", "--since", iso) == ["two", "three"], "--since %s: %r" %
              (iso, texts(d, "talker", "--since", iso)))
        check(texts(d, "talker", "--since", iso, "-n", "1") == ["three"], "--since with -n 1")
        check(texts(d, "talker", "--since", "1h") == ["one", "two", "three"], "--since 1h")
        # From now on: none of the old lines.
        check(texts(d, "talker", "--since", "0s") == [], "--since 0s: %r" % texts(d, "talker", "--since", "0s"))
        r = d.ctl("logs", "talker", "--since", "yesterday-ish")
        check(r.returncode == 2 and "--since" in r.stderr, "a bad time: %d %r" % (r.returncode, r.stderr))
        r = d.ctl("audit", "talker", "--since", "1h")
        check(r.returncode == 2, "audit takes no --since: %r" % r.stderr)


@test
def logs_follow_every_gadget(tmp):
    """logs -f without NAME: the new lines of every gadget, each naming its
    gadget, one loaded after the follow began too."""
    with Daemon(tmp) as d:
        d.add("first")
        d.add("second")
        wait_for(lambda: d.state("first") == "ready" and d.state("second") == "ready", what="both ready")
        call(d, "first", "say", {"text": "old line"})
        wait_for(lambda: "old line" in texts(d, "first"), what="first's old line")
        f = subprocess.Popen([GADGETCTL, "--socket", d.sock, "--json", "logs", "-f", "-n", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        reader = threading.Thread(target=lambda: seen.extend(json.loads(l) for l in f.stdout), daemon=True)
        reader.start()
        got = lambda: {(e["gadget"], e["line"]) for e in seen}
        try:
            # The follow has begun once a line said after its start reaches it.
            for i in range(200):
                call(d, "first", "say", {"text": "ping %d" % i})
                if got() or f.poll() is not None:
                    break
                time.sleep(0.02)
            wait_for(lambda: got() or f.poll() is not None, what="a ping followed")
            call(d, "second", "say", {"text": "from second"})
            d.add("third")
            wait_for(lambda: d.state("third") == "ready", what="third ready")
            call(d, "third", "say", {"text": "from third"})
            call(d, "first", "say", {"text": "from first"})
            want = {("first", "from first"), ("second", "from second"), ("third", "from third")}
            wait_for(lambda: want <= got() or f.poll() is not None, what="the lines of three gadgets")
            check(want <= got(), "followed: %r" % got())
            check(("first", "old line") not in got(), "-n 0: an old line came: %r" % got())
        finally:
            f.kill()
            f.wait()
        r = d.ctl("logs")
        check(r.returncode == 2 and "-f" in r.stderr, "logs without NAME or -f: %d %r" % (r.returncode, r.stderr))
        # --all without -f: every gadget's lines, each gadget's in turn.
        got = [(e["gadget"], e["line"]) for e in entries(d, "--all") if e["stream"] == "stdout"]
        check(("first", "old line") in got and ("third", "from third") in got, "--all: %r" % got)


def audit(d, name):
    r = d.ctl("--json", "audit", name)
    check(r.returncode == 0, "audit %s: %r" % (name, r.stderr))
    return [json.loads(l) for l in r.stdout.splitlines()]


@test
def audit_call_names_uid(tmp):
    """gadgetctl call leaves an audit record of its outcome naming the
    caller's uid: root's, and a control-group member's."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        d.add("talker")
        wait_for(lambda: d.state("talker") == "ready", what="talker ready")
        call(d, "talker", "echo", "from root")
        r = d.ctl("call", "talker", "echo", '"from nobody"', user=(65534, 65534))
        check(r.returncode == 0, "a member's call: %r" % r.stderr)
        r = d.ctl("call", "talker", "nosuch", user=(65534, 65534))
        check(r.returncode != 0, "a call of no method")
        want = [("call echo", "ok", 0), ("call echo", "ok", 65534), ("call nosuch", "error", 65534)]
        got = lambda: [(a["op"], a["outcome"], a.get("uid")) for a in audit(d, "talker") if a["binding"] == "gadgetctl"]
        wait_for(lambda: got() == want, what="the calls' records: %r" % got())


@test
def audit_kv_miss_not_found(tmp):
    """A kv get of a missing key is audited as not_found, not error."""
    with Daemon(tmp) as d:
        d.add("store", "[Binding DATA]\nType=kv\n")
        wait_for(lambda: d.state("store") == "ready", what="store ready")
        r = d.ctl("call", "store", "binding", json.dumps({"binding": "DATA", "op": "get", "args": {"key": "nope"}}))
        check(r.returncode != 0, "a get of a missing key: %r" % r.stdout)
        got = lambda: [(a["op"], a["outcome"]) for a in audit(d, "store") if a["binding"] == "DATA"]
        wait_for(lambda: got() == [("get", "not_found")], what="the get's record: %r" % got())


def lifecycle(d, name):
    return [r for r in audit(d, name) if r["binding"] == "lifecycle"]


@test
def lifecycle_events_audited(tmp):
    """A gadget's lifecycle — started, ready, exited (with its signal or
    status), restarted — as audit records with their fields, and as lines
    of its log (stream gadgetd) with their run."""
    with Daemon(tmp) as d:
        d.add("crasher", "Restart=always\n")
        wait_for(lambda: d.state("crasher") == "ready", what="crasher ready")
        pid1 = d.status("crasher")["pid"]
        d.ctl("call", "crasher", "crash")
        wait_for(lambda: d.status("crasher")["restarts"] == 1 and d.state("crasher") == "ready", what="run 2 ready")
        pid2 = d.status("crasher")["pid"]
        check(d.ctl("stop", "crasher").returncode == 0, "stop")
        wait_for(lambda: d.state("crasher") == "stopped", what="crasher stopped")
        want = ["started", "ready", "exited", "restarted", "started", "ready", "exited"]
        got = lambda: [r["op"] for r in lifecycle(d, "crasher")]
        wait_for(lambda: len(got()) >= len(want), what="the lifecycle records")
        check(got() == want, "the lifecycle records: %r" % got())
        recs = lifecycle(d, "crasher")
        check([(r["run"], r.get("pid")) for r in recs[:2]] == [(1, pid1)] * 2 and
              [(r["run"], r.get("pid")) for r in recs[4:6]] == [(2, pid2)] * 2, "runs and pids: %r" % recs)
        crash, restart, stop = recs[2], recs[3], recs[6]
        check(crash["run"] == 1 and crash["pid"] == pid1 and crash["signal"] == "SIGSEGV" and
              crash["outcome"] == "error" and "exit_status" not in crash, "the crash: %r" % crash)
        check(isinstance(restart["delay_ms"], int) and restart["outcome"] == "ok", "the restart: %r" % restart)
        check(stop["run"] == 2 and stop["pid"] == pid2 and stop["exit_status"] == 0 and stop["outcome"] == "ok" and
              "signal" not in stop, "the stop: %r" % stop)
        # In its log too, each line with its run.
        own = [(e["run"], e["line"]) for e in entries(d, "crasher") if e["stream"] == "gadgetd"]
        check((1, "gadgetd: started (pid %d)" % pid1) in own and (2, "gadgetd: started (pid %d)" % pid2) in own and
              any(run == 1 and "SIGSEGV" in line for run, line in own), "its log: %r" % own)


@test
def lifecycle_idle_and_woken(tmp):
    """Start=on-demand with IdleStop=: idle at its load, woken by a call,
    idle again once quiet."""
    with Daemon(tmp) as d:
        d.add("sleepy", "Start=on-demand\nIdleStop=300ms\n")
        wait_for(lambda: d.state("sleepy") == "idle", what="sleepy idle")
        call(d, "sleepy", "echo", 1)
        want = ["idle", "woken", "started", "ready", "idle", "exited"]
        got = lambda: [r["op"] for r in lifecycle(d, "sleepy")]
        wait_for(lambda: len(got()) >= len(want), what="the lifecycle records")
        check(got() == want, "the lifecycle records: %r" % got())
        recs = lifecycle(d, "sleepy")
        check(recs[4]["run"] == 1 and "IdleStop=300ms" in recs[4]["detail"], "the idle stop: %r" % recs[4])


if __name__ == "__main__":
    sys.exit(main())
