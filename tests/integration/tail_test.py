#!/usr/bin/env python3
"""Integration tests of tail bindings: a real gadgetd, a test gadget
observed by others whose tail binding gets its calls, log lines and exits
in batches (the test gadget's method "tail" writes each batch as a log
line, "TAIL dropped=D e1 e2 ... n=N", each event "SEQ:GADGET:KIND:WHAT").
Usage: tail_test.py TEST."""
import json
import os
import re
import shutil
import sys

from harness import EXAMPLES, check, Daemon, main, policy, test, wait_for
from kvchecks import bcall, ready


def tail_binding(of="obs", method="tail", extra=""):
    return "[Binding T]\nType=tail\nOf=%s\nMethod=%s\n%s" % (of, method, extra)


def batches(d, name):
    """The batches the tail gadget name wrote: [(dropped, [(seq, gadget, kind, what)])]."""
    out = []
    for line in d.ctl("logs", name, "-n", "1000").stdout.splitlines():
        m = re.search(r"TAIL dropped=(-?\d+)(.*) n=(\d+)$", line)
        if not m:
            continue
        # A call's trace id (after "@") is read apart: traces(d, name).
        evs = [tuple(w.split("@")[0].split(":", 3)) for w in m.group(2).split()]
        check(len(evs) == int(m.group(3)), "a batch line whole: %r" % line)
        out.append((int(m.group(1)), [(int(s), g, k, w) for s, g, k, w in evs]))
    return out


def traces(d, name):
    """{seq: trace id} of the call events the tail gadget name wrote."""
    out = {}
    for line in d.ctl("logs", name, "-n", "1000").stdout.splitlines():
        m = re.search(r"TAIL dropped=-?\d+(.*) n=\d+$", line)
        for w in (m.group(1).split() if m else []):
            if "@" in w:
                out[int(w.split(":")[0])] = w.split("@", 1)[1]
    return out


def events(d, name):
    return [e for _, evs in batches(d, name) for e in evs]


def call_ok(d, gadget, method, args=None):
    r = d.ctl("call", gadget, method, json.dumps(args) if args is not None else "null", timeout=20)
    check(r.returncode == 0, "call %s %s: %s" % (gadget, method, r.stderr))


def tail_line(d, name):
    """gadgetctl status' "Tail: Q events queued, D dropped" as (Q, D)."""
    for line in d.status(name)["limits"]:
        m = re.fullmatch(r"Tail: (\d+) events queued, (\d+) dropped", line)
        if m:
            return int(m.group(1)), int(m.group(2))
    check(False, "no Tail line in the status of %s" % name)


@test
def tail_events_in_order(tmp):
    """A call's method and outcome, a log line, an exit reach the tail
    gadget in order (seq rising with no gap, lines in the order said),
    none dropped. A tail of the tail sees its log lines but none of its
    batches as calls (a batch is no event)."""
    with Daemon(tmp) as d:
        policy(d.pol, "obs", "Restart=on-failure\n")
        policy(d.pol, "mon", tail_binding())
        policy(d.pol, "meta", tail_binding(of="mon"))
        ready(d, "obs", "mon", "meta")
        for i in range(12):
            call_ok(d, "obs", "say", {"text": "n=%d" % i})
        r = d.ctl("call", "obs", "sleep", "{}")
        check(r.returncode != 0, "sleep without ms fails")
        d.ctl("call", "obs", "crash", "null")  # its end is an exit event
        want_lines = ["n=%d" % i for i in range(12)]

        def seen():
            ev = events(d, "mon")
            return (len([e for e in ev if e[2] == "call"]) >= 13 and any(e[2] == "exit" for e in ev) and
                    [e[3] for e in ev if e[2] == "log" and e[3].startswith("n=")] == want_lines) and ev
        ev = wait_for(seen, what="the tail's events")
        seqs = [e[0] for e in ev]
        check(seqs == list(range(1, len(seqs) + 1)), "seq rises by one: %r" % seqs)
        check(all(e[1] == "obs" for e in ev), "every event is obs's")
        calls = [e[3] for e in ev if e[2] == "call"]
        check(calls[:12] == ["say/ok"] * 12, "the says, ok: %r" % calls)
        check(calls[12] == "sleep/invalid", "the failed call's outcome: %r" % calls[12])
        check([e[3] for e in ev if e[2] == "exit"][0] == "SEGV", "the exit's signal: %r" % ev)
        check(all(b[0] == 0 for b in batches(d, "mon")), "nothing dropped")
        # Each call event carries its call's trace id; a call made with
        # gadgetctl call --trace carries the id it printed.
        r = d.ctl("call", "--trace", "obs", "say", json.dumps({"text": "traced"}))
        check(r.returncode == 0, "a traced call: %r" % r)
        tid = re.search(r"trace ([0-9a-f]{32})", r.stderr)
        check(tid, "gadgetctl call --trace printed no trace id: %r" % r.stderr)
        wait_for(lambda: tid.group(1) in traces(d, "mon").values(),
                 what="the traced call's event with trace %s: %r" % (tid.group(1), traces(d, "mon")))
        check(all(re.fullmatch(r"[0-9a-f]{32}", t) for t in traces(d, "mon").values()), "every call's trace id")
        check(tail_line(d, "mon") == (0, 0), "status: nothing queued or dropped")
        n = len(batches(d, "mon"))
        meta = wait_for(lambda: len(events(d, "meta")) >= n and events(d, "meta"), what="meta's events")
        check(all(e[2] == "log" and e[1] == "mon" for e in meta), "mon's lines, none of its batches: %r" % meta)
        # A reload that changes the tail binding: its feed is made anew.
        policy(d.pol, "mon", tail_binding(extra="QueueMax=4\n"))
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("mon") == "ready", what="mon ready again")
        call_ok(d, "obs", "say", {"text": "after"})
        wait_for(lambda: any(e[3] == "after" for e in events(d, "mon")), what="an event after the reload")


@test
def tail_stuck_bounded(tmp):
    """A tail gadget stuck in its method: the observed gadget's calls all
    answer meanwhile; the tail's queue holds QueueMax= events, the rest are
    dropped and counted (status), and the next batch tells how many, the
    seq numbers leaving that gap."""
    hold = os.path.join(tmp, "hold")
    os.makedirs(hold)
    flag = os.path.join(hold, "stuck")
    open(flag, "w").close()
    with Daemon(tmp) as d:
        policy(d.pol, "obs")
        policy(d.pol, "mon", "Arguments=hold %s\nReadOnlyPaths=%s\nCallTimeout=60s\n" % (flag, hold) +
               tail_binding(extra="QueueMax=8\n"))
        ready(d, "obs", "mon")
        call_ok(d, "obs", "echo", 0)
        wait_for(lambda: batches(d, "mon"), what="the first batch, then stuck")
        # Why this proves "costs nothing": all these answer while the tail's
        # one batch is blocked (it holds until the flag goes).
        for i in range(40):
            call_ok(d, "obs", "echo", i + 1)
        check(len(batches(d, "mon")) == 1 and os.path.exists(flag), "the tail was stuck throughout")
        queued, dropped = tail_line(d, "mon")
        check(queued == 8 and dropped >= 32, "queue bounded at 8, the rest dropped: %r" % ((queued, dropped),))
        os.unlink(flag)
        wait_for(lambda: len(batches(d, "mon")) >= 2 and sum(len(b[1]) for b in batches(d, "mon")) >= 9 and
                 tail_line(d, "mon")[0] == 0, what="the queue delivered")
        bs = batches(d, "mon")
        check(bs[1][0] == dropped, "the next batch tells the drops: %r, status %d" % (bs[1][0], dropped))
        check(len(bs[1][1]) > 1, "several events in one batch: %r" % (bs[1],))
        # The newest were dropped: the next event's seq skips them.
        before = [e[0] for b in bs for e in b[1]]
        check(before == list(range(1, 10)), "the first event, then the 8 queued: %r" % before)
        call_ok(d, "obs", "echo", 100)
        last = wait_for(lambda: len(events(d, "mon")) == 10 and events(d, "mon")[-1], what="the next event")
        check(last[0] == 9 + dropped + 1, "the seq numbers skip the drops: %r after %d dropped" % (last, dropped))
        check(tail_line(d, "mon")[1] == dropped, "status counts them since the load")


@test
def tail_events_per_second(tmp):
    """EventsPerSecond= holds the next batch back once a batch used the
    budget: the events meanwhile fill the queue, the rest are dropped, and
    the held batch comes later, telling them. (Without the hold each full
    queue would go at once, to a tail that answers at once: none dropped.)"""
    with Daemon(tmp) as d:
        policy(d.pol, "obs")
        policy(d.pol, "mon", tail_binding(extra="EventsPerSecond=1\nQueueMax=4\n"))
        ready(d, "obs", "mon")
        for i in range(4):  # a whole batch, sent at once: the next waits about 3 s
            call_ok(d, "obs", "echo", i)
        wait_for(lambda: len(events(d, "mon")) == 4, what="the first batch")
        for i in range(6):
            call_ok(d, "obs", "echo", 10 + i)
        check(tail_line(d, "mon") == (4, 2), "held back: 4 queued, 2 dropped: %r" % (tail_line(d, "mon"),))
        wait_for(lambda: len(events(d, "mon")) == 8, what="the held batch, later")
        check(batches(d, "mon")[-1][0] == 2, "it tells the 2 dropped: %r" % (batches(d, "mon"),))


@test
def tail_hostile(tmp):
    """Tails that crash on each batch, answer with junk, never answer, or
    name no method they have: the observed gadget's calls all answer,
    gadgetd stays up, the crashing tail's lost batches are counted."""
    with Daemon(tmp) as d:
        policy(d.pol, "obs")
        policy(d.pol, "crasher", "Restart=always\n" + tail_binding(method="crash"))
        policy(d.pol, "junk", tail_binding(method="echo"))
        policy(d.pol, "mute", "CallTimeout=60s\n" + tail_binding(method="hang"))
        policy(d.pol, "nomethod", tail_binding(method="nosuch"))
        ready(d, "obs", "crasher", "junk", "mute", "nomethod")
        for i in range(30):
            call_ok(d, "obs", "echo", i)
        wait_for(lambda: tail_line(d, "crasher")[1] > 0, what="the crasher's lost batches counted")
        wait_for(lambda: tail_line(d, "nomethod")[1] == 30, what="the batches to no method, dropped")
        wait_for(lambda: tail_line(d, "junk") == (0, 0), what="junk answers: all delivered")
        check("tail binding T: Method=nosuch is not a method the gadget declared" in d.logtext(),
              "gadgetd says Method= is not declared")
        rc, out, err = bcall(d, "junk", "T", "get")
        check(rc != 0 and "binding T is of type tail: it has no operations" in err,
              "a tail binding has no operations: %r" % ((rc, out, err),))
        check(d.state("obs") == "ready" and d.proc.poll() is None, "obs and gadgetd unharmed")
        call_ok(d, "obs", "echo", 99)


@test
def tail_monitor_example(tmp):
    """The monitor example keeps each observed gadget's calls and errors
    per method in its kv store and answers them from rates()."""
    with Daemon(tmp) as d:
        shutil.copy(os.path.join(EXAMPLES, "monitor.policy"), d.pol)
        policy(d.pol, "hello")  # the test gadget, under a name the monitor observes
        ready(d, "monitor", "hello")
        for i in range(3):
            call_ok(d, "hello", "echo", i)
        check(d.ctl("call", "hello", "sleep", "{}").returncode != 0, "a failing call")

        def rows():
            r = d.ctl("call", "monitor", "rates")
            check(r.returncode == 0, "rates: %s" % r.stderr)
            got = {(x["gadget"], x["method"]): (x["calls"], x["errors"]) for x in json.loads(r.stdout)["rows"]}
            return got if got.get(("hello", "sleep")) == (1, 1) else None
        got = wait_for(rows, what="the monitor's rates")
        check(got == {("hello", "echo"): (3, 0), ("hello", "sleep"): (1, 1)}, "rates: %r" % got)


@test
def tail_policy_errors(tmp):
    """A bad Of= is refused with its file and line, by gadgetctl check and
    by a load."""
    with Daemon(tmp) as d:
        path = policy(tmp, "bad", "[Binding T]\nType=tail\nMethod=tail\nOf=obs Bad_Name\n")
        r = d.ctl("check", path)
        check(r.returncode != 0 and "bad.policy:7: Of=\"obs Bad_Name\": \"Bad_Name\" is not a valid gadget name"
              in r.stdout + r.stderr, "check: %r" % ((r.stdout, r.stderr),))
        path = policy(tmp, "self", "[Binding T]\nType=tail\nMethod=tail\nOf=obs self\n")
        r = d.ctl("load", path)
        check(r.returncode != 0 and "self.policy:4: binding T: Of= names this gadget itself" in r.stdout + r.stderr,
              "load: %r" % ((r.stdout, r.stderr),))
        check("self" not in d.list(), "not loaded")


if __name__ == "__main__":
    sys.exit(main())
