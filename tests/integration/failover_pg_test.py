#!/usr/bin/env python3
"""Integration tests of a failover as callers see it (Store=postgresql with
the peer link, two gadgetd nodes on this machine and a real PostgreSQL
server, as cluster_pg_test.py): calls that never reached a node that went
away wait for the gadget's next node and go there; those that reached it
are answered "it may have run", never sent again. And dead nodes leave
`gadgetctl nodes`: after NodeForget=, or by `gadgetctl nodes forget`.
Usage: failover_pg_test.py TEST."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from harness import CALLFLOOD, Healthy, check, main, policy, test, wait_for
from pgnodes import (by_name, certs, counter_cluster, counter_on_a, node, nodes_seen, owner_of, peer_node,
                     slow_loop_lease, start_all, stop_all)
from pgserver import PgServer, PgStandby

GONE, BUSY = 11, 7  # proto/contract.h: GADGET_EGONE, GADGET_EBUSY


def steady(d):
    """callflood --steady on d's control socket: one increment at a time."""
    return subprocess.Popen([CALLFLOOD, "--steady", d.sock, "counter", "increment"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def counts(proc):
    """Stops a callflood and reads its counts ("ok", "error 11", ...)."""
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    check(proc.returncode == 0, "callflood failed: %r" % err)
    res = {}
    for line in out.splitlines():
        parts = line.split()
        key = " ".join(parts[:-1])
        res[key] = int(parts[-1])
    return res


def count_of(d):
    r = d.ctl("call", "counter", "get", timeout=40)
    check(r.returncode == 0, "get through %s: %r" % (d.tmp[-1], r.stderr))
    return int(r.stdout.strip())


class Caller:
    """One call at a time of tg's fop increment through node d's control
    socket (gadgetctl), each with an id of its own, until stop(): every
    call's record (as faultload.py's: t0, t1 monotonic; status "ok" with
    the count it answered, "fail" for gadgetd's refusals that say nothing
    ran, "info" for any other error: it may have run)."""

    def __init__(self, d, name, ops, lock):
        self.d, self.name, self.ops, self.lock = d, name, ops, lock
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0
        while not self.stopping.is_set():
            i += 1
            op = {"id": "%s%d" % (self.name, i), "client": self.name, "gadget": "tg", "key": "n", "kind": "incr",
                  "arg": None, "out": None, "t0": time.monotonic()}
            r = self.d.ctl("call", "tg", "fop", json.dumps({"op": "incr", "key": "n", "id": op["id"]}), timeout=60)
            op["t1"] = time.monotonic()
            if r.returncode == 0:
                op.update(status="ok", out=json.loads(r.stdout)["v"])
            else:
                op["err"] = r.stderr.strip()
                op["status"] = "fail" if re.search(r"runs on node|does not run|no node|waits for its lease|busy",
                                                   op["err"]) and "may have run" not in op["err"] else "info"
            with self.lock:
                self.ops.append(op)
            if op["status"] != "ok":
                self.stopping.wait(0.02)  # pacing, not a wait for anything: refusals come at once

    def stop(self):
        self.stopping.set()
        self.thread.join(120)


@test
def pg_store_failover_to_a_standby(tmp):
    """The store itself fails over: a primary with a streaming standby
    (synchronous: synchronous_standby_names names it), StoreConnection=
    naming both (on a the standby first: gadgetd must skip a server that
    takes no writes; on b the primary first: once it is gone silent, b
    must not wait on it forever; node c, with target_session_attrs=any
    and the standby first, must pass it by its refusal of writes), nodes
    a and b running tg (Nodes=a b), a steady caller of
    its counter increment through each node. The primary's WAL sender is
    stopped until the primary has a commit the standby lacks (a commit
    waiting for it, or, were it asynchronous, acknowledged writes), then
    every process of the primary is stopped (SIGSTOP: a host gone silent,
    its sessions open and unanswered, as a machine that lost power or its
    network; killed once calls are back) and the standby promoted
    (GADGETD_STANDBY_FAULT=kill: SIGKILLed at once, the sessions reset).
    Checked: calls resume through both nodes within 6 s of the loss (and
    each node's lease is back on the promoted server within 8 s; silent,
    the owner stopped at its lease's 920 ms deadline, and its audit copy
    moved within 8 s); every
    acknowledged increment is in the final count (no more than those and
    the ones that may have run), the counter's history is linearizable
    (linearize.py), no two processes of tg had effects (kv writes) at
    interleaving times (faultchecks.double_runs, from tg's records); no
    node warns of an
    asynchronous store while the standby is synchronous (log, `gadgetctl
    nodes`), and both do after the failover (the promoted server has no
    standby, and StoreConnection= names two hosts). GADGETD_STANDBY_ASYNC=1 runs it
    with the standby asynchronous: acknowledged increments are lost and
    the test fails (as it must)."""
    from faultchecks import check_linearizable, double_runs
    from faultload import POLICY, frec_records
    sync = os.environ.get("GADGETD_STANDBY_ASYNC") != "1"
    silent = os.environ.get("GADGETD_STANDBY_FAULT", "freeze") == "freeze"
    pg = PgServer(tmp, settings="synchronous_standby_names = 'standby'\n" if sync else "").start()
    standby = None
    try:
        standby = PgStandby(tmp, pg).start()
        wait_for(lambda: standby.streaming() == ("sync" if sync else "async"), timeout=30,
                 what="the standby streaming (%s)" % ("sync" if sync else "async"))
        cd = certs(tmp, "a", "b")
        ds = []
        for n, hosts in (("a", (standby.dir, pg.dir)), ("b", (pg.dir, standby.dir))):
            pg.conninfo = "host=%s,%s dbname=postgres user=gadgetd" % hosts
            ds.append(peer_node(tmp, pg, n, cd))
        for d in ds:
            policy(d.pol, "tg", POLICY % ("a b", 3, d.tmp[-1]))
        # c takes any server (target_session_attrs=any), the standby first:
        # refused a write there (25006), it must try the next host.
        pg.conninfo = "host=%s,%s dbname=postgres user=gadgetd target_session_attrs=any" % (standby.dir, pg.dir)
        c = node(tmp, pg, "c")
        ops, lock = [], threading.Lock()
        callers = []
        try:
            start_all(ds + [c])
            check(owner_of(ds, "tg") == "a", "a runs tg")
            a, b = ds
            nodes_seen(b, 2)
            wait_for(lambda: "store: connected to PostgreSQL" in c.logtext() and
                     "this node's lease taken" in c.logtext(), timeout=15,
                     what="c past the standby (25006) to the primary")
            check("read-only transaction" in c.logtext(), "c was refused by the standby: %s" % c.logtext()[-2000:])
            check("read-only transaction" not in a.logtext(), "a (target_session_attrs=read-write by default) "
                  "skipped the standby: %s" % a.logtext()[-2000:])
            warning = "commits without a synchronous standby"

            def store_warning(d):
                r = d.ctl("--json", "nodes")
                check(r.returncode == 0, "nodes: %r" % r.stderr)
                return json.loads(r.stdout).get("store_warning", "")
            for d in ds:
                w = store_warning(d)
                check((warning in w) != sync, "%s's store warning before the failover: %r" % (d.tmp[-1], w))
            callers = [Caller(d, d.tmp[-1], ops, lock) for d in ds]

            def acked():
                with lock:
                    return sum(1 for o in ops if o["status"] == "ok")
            wait_for(lambda: acked() >= 20, timeout=30, what="increments before the failover")
            ws = pg.child("walsender")
            check(ws, "the primary's WAL sender")
            os.kill(ws, signal.SIGSTOP)  # the standby lags: nothing more is sent to it
            ahead = acked()
            # The primary now has a commit the standby lacks: a synchronous
            # one waits for it; asynchronous ones are acknowledged.
            wait_for(lambda: int(pg.psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")) > 0
                     or acked() >= ahead + 3, timeout=20, what="a commit the standby lacks")
            pg.signal_all(signal.SIGSTOP)
            if not silent:
                pg.signal_all(signal.SIGKILL)
            t_kill = time.monotonic()
            a_before = len(a.logtext())
            standby.promote()
            t_promoted = time.monotonic()

            def resumed():
                with lock:
                    return {o["client"] for o in ops if o["status"] == "ok" and o["t0"] > t_promoted} == {"a", "b"}
            wait_for(resumed, timeout=30, what="calls through both nodes after the promotion")
            t_back = time.monotonic()
            # Each node's lease session on the new primary: joined again.
            rejoined = {}
            for d in ds:
                wait_for(lambda: d.logtext().count("this node's lease taken") >= 2, timeout=20,
                         what="%s joining the new primary" % d.tmp[-1])
                rejoined[d.tmp[-1]] = time.monotonic() - t_kill
            if silent:
                # a's audit copy follows its lease session to the new
                # primary, not the silent one's 10 s query timeout later.
                wait_for(lambda: "audit: copying records to the store again" in a.logtext()[a_before:],
                         timeout=max(0.1, 8 - (time.monotonic() - t_kill)),
                         what="a's audit copy on the new primary within 8 s")
                pg.signal_all(signal.SIGKILL)
            n = acked()
            wait_for(lambda: acked() >= n + 10, timeout=20, what="calls after the failover")
            for cl in callers:
                cl.stop()
            callers = []
            ops = list(ops)
            finals = set()
            for d in ds:
                r = d.ctl("call", "tg", "fop", json.dumps({"op": "read", "key": "n", "id": "final"}), timeout=40)
                check(r.returncode == 0, "the final read through %s: %r" % (d.tmp[-1], r.stderr))
                finals.add(json.loads(r.stdout)["v"])
            check(len(finals) == 1, "the nodes read different counts: %r" % finals)
            final = finals.pop()
            ok = sum(1 for o in ops if o["status"] == "ok")
            maybe = [o for o in ops if o["status"] == "info"]
            after = [o for o in ops if o["status"] == "ok" and o["t0"] > t_kill]
            first = min(o["t1"] for o in after) - t_kill
            print("store failover (%s standby): %d increments acknowledged, %d may have run, %d not run; count %d; "
                  "primary %s, promoted %.2f s after, calls answered again %.2f s after it (through both %.2f s)"
                  % ("synchronous" if sync else "asynchronous", ok, len(maybe),
                     sum(1 for o in ops if o["status"] == "fail"), final, "stopped" if silent else "killed",
                     t_promoted - t_kill, first, t_back - t_kill))
            for o in maybe:
                print("  may have run: %s %.3f..%.3f %s" % (o["id"], o["t0"] - t_kill, o["t1"] - t_kill, o["err"]))
            for d in ds:
                store = [ln for ln in d.logtext().splitlines() if "store:" in ln or "audit:" in ln]
                print("%s's store lines:\n  %s" % (d.tmp[-1], "\n  ".join(store[-12:])))
            check(ok <= final <= ok + len(maybe),
                  "count %d after %d acknowledged increments (%d may have run): acknowledged writes lost"
                  % (final, ok, len(maybe)))
            print("nodes joined the new primary (seen) %s"
                  % ", ".join("%s %.2f s" % kv for kv in sorted(rejoined.items())))
            check(t_back - t_kill < 6, "calls answered again %.1f s after the primary's loss" % (t_back - t_kill))
            check(max(rejoined.values()) < 8, "a node's lease back only %.1f s after the primary's loss"
                  % max(rejoined.values()))
            for g, k, v, n_ops, n_open, secs in check_linearizable(ops):
                print("linearizable %s/%s: %s (%d operations, %d open, %.2f s)" % (g, k, v, n_ops, n_open, secs))
                check(v.ok is True, "%s/%s: not linearizable: %s" % (g, k, v))
            records = [r for d in ds for r in frec_records(d.logtext())]
            two = double_runs(records)
            check(not two, "two owners at once: %r" % [(x[0], x[1], x[2], x[3]) for x in two])
            if silent:
                # The owner stopped by its own deadline, its lease session
                # still open on the silent primary (its 2 s timeout later).
                check("no renewal of this node's lease was acknowledged within 920 ms" in a.logtext(),
                      "a stopped serving at its lease's deadline")
            if sync:
                for d in ds:
                    log = d.logtext()
                    at = log.find("store: lost the connection to PostgreSQL")
                    check(at > 0, "%s lost its store connection" % d.tmp[-1])
                    check(warning not in log[:at], "%s warned of an asynchronous store before the failover: %s"
                          % (d.tmp[-1], log[:at][-1500:]))
                    wait_for(lambda: warning in d.logtext()[at:], timeout=10,
                             what="%s warning of the promoted server's lack of a standby" % d.tmp[-1])
                    wait_for(lambda: warning in store_warning(d), timeout=10,
                             what="%s's gadgetctl nodes warning of it" % d.tmp[-1])
                    # whole (its 204 bytes were cut at 200)
                    w = store_warning(d)
                    check(w.endswith("may lose the last writes and leases it acknowledged"),
                          "%s's gadgetctl nodes warning cut: %r" % (d.tmp[-1], w))
        finally:
            for cl in callers:
                cl.stop()
            stop_all(ds + [c])
    finally:
        if standby:
            standby.stop()
        pg.stop()


@test
def pg_failover_calls_wait_for_the_next_node(tmp):
    """A steady caller through the node that survives, during 5 failovers
    (the owner SIGKILLed, then started again; the roles swap each round):
    no call is refused, lost or answered twice. A call the dead node had
    received is answered "node X went away after the call was sent; it may
    have run" (error 11, counted apart); every other one waits for the
    takeover and is answered by the new owner. The count is the calls
    answered ok, plus at most those that may have run."""
    with PgServer(tmp) as pg:
        cd = certs(tmp, "a", "b")
        with counter_cluster([peer_node(tmp, pg, n, cd) for n in "ab"], "a b", "a") as ds:
            for d in ds:
                nodes_seen(d, 2)
            owner = "a"
            total = {"ok": 0, "gone": 0, "other": {}, "sent": 0}
            for rnd in range(5):
                o = by_name(ds, owner)
                s = next(d for d in ds if d is not o)
                before = count_of(s)
                caller = steady(s)
                wait_for(lambda: count_of(s) >= before + 5, timeout=20, what="calls through %s" % s.tmp[-1])
                o.proc.send_signal(signal.SIGKILL)
                o.proc.wait()
                wait_for(lambda: s.state("counter") == "ready", timeout=20, what="%s runs the counter" % s.tmp[-1])
                mid = count_of(s)
                wait_for(lambda: count_of(s) >= mid + 5, timeout=20, what="calls after the takeover")
                res = counts(caller)
                print("round %d (%s killed): %r" % (rnd + 1, owner, res))
                check(res.get("unanswered") == 0, "round %d: a call unanswered: %r" % (rnd + 1, res))
                total["ok"] += res.get("ok", 0)
                total["sent"] += res.get("sent", 0)
                total["gone"] += res.get("error %d" % GONE, 0)
                for k, v in res.items():
                    if k.startswith("error ") and k != "error %d" % GONE:
                        total["other"][k] = total["other"].get(k, 0) + v
                o.start()
                owner = s.tmp[-1]
                check(owner_of(ds, "counter") == owner, "the restarted node leaves the counter to %s" % owner)
                nodes_seen(o, 2)
            count = count_of(by_name(ds, owner))
            print("5 failovers: %d calls, %d ok, %d may have run, others %r; count %d"
                  % (total["sent"], total["ok"], total["gone"], total["other"], count))
            check(not total["other"], "calls refused or failed during the failovers: %r" % total["other"])
            check(total["ok"] + total["gone"] == total["sent"], "calls lost: %r" % total)
            # The test's own gets add nothing; each increment ran at most once.
            check(total["ok"] <= count <= total["ok"] + total["gone"],
                  "count %d after %d increments answered ok and %d that may have run"
                  % (count, total["ok"], total["gone"]))


@test
def pg_reexec_with_the_node_link(tmp):
    """gadgetctl daemon-reexec of the owner a, 3 times, with the node link:
    a steady caller through b (its calls forwarded to a) and one through a
    itself. a holds b's session at a frame boundary, answers what it read,
    tells b goodbye and execs; b sends what a did not answer again once
    a's link is back (its connect waits in the handed-on listener's
    backlog). Nothing refused, lost, answered twice or "may have run"
    (error 11); the gadget's pid unchanged; the count is the calls
    answered."""
    os.environ["CALLFLOOD_SILENCE_MS"] = "30000"
    with PgServer(tmp) as pg:
        cd = certs(tmp, "a", "b")
        ds = [peer_node(tmp, pg, n, cd) for n in "ab"]
        slow_loop_lease(*ds)  # a's loop under two steady callers and b's re-execs
        with counter_cluster(ds, "a b", "a") as ds:
            a, b = by_name(ds, "a"), by_name(ds, "b")
            for d in ds:
                nodes_seen(d, 2)
            pid = a.status("counter")["pid"]
            before = count_of(a)
            callers = [steady(b), steady(a)]
            for i in range(1, 4):
                seen = count_of(b)
                wait_for(lambda: count_of(b) >= seen + 10, timeout=20, what="calls through b, round %d" % i)
                r = a.ctl("daemon-reexec", timeout=40)
                check(r.returncode == 0 and "1 of 1 running gadgets adopted" in r.stdout,
                      "daemon-reexec %d: %r %s" % (i, r, a.logtext()[-2000:]))
                wait_for(lambda: a.state("counter") == "ready", timeout=20, what="a ready after re-exec %d" % i)
                check(a.status("counter")["pid"] == pid, "the gadget's pid changed")
            seen = count_of(b)
            wait_for(lambda: count_of(b) >= seen + 10, timeout=20, what="calls through b after the last")
            res = [counts(c) for c in callers]
            print("3 re-execs of the owner: through b %r, through a %r" % tuple(res))
            for who, rr in zip("ba", res):
                check(rr.get("unanswered") == 0 and rr.get("ok") == rr.get("sent") and rr.get("sent", 0) > 0,
                      "calls through %s refused, lost or failed: %r" % (who, rr))
            check(count_of(a) - before == res[0]["ok"] + res[1]["ok"],
                  "count %d after %d increments answered" % (count_of(a) - before, res[0]["ok"] + res[1]["ok"]))
            check(a.logtext().count("its lease taken back after gadgetd's re-exec") == 3, "a's log")


@test
def pg_reexec_of_a_forwarding_node(tmp):
    """gadgetctl daemon-reexec of b, 3 times, whose counter runs on a (b
    forwards its calls there), with a steady caller through b and one
    through a. b answers every forwarded call it sent before its exec;
    its next image takes the counter back as remote, wants its lease again
    and forwards the calls that waited meanwhile once the store names a.
    Nothing refused, lost, answered twice or "may have run" (error 11); the
    pid on a unchanged; the count is the calls answered. Then a is
    SIGKILLed and b takes the counter over: its want of the lease (rank 1
    of Nodes=a b) came through the re-execs."""
    os.environ["CALLFLOOD_SILENCE_MS"] = "30000"
    with PgServer(tmp) as pg:
        cd = certs(tmp, "a", "b")
        ds = [peer_node(tmp, pg, n, cd) for n in "ab"]
        slow_loop_lease(*ds)  # a's loop under two steady callers and b's re-execs
        with counter_cluster(ds, "a b", "a") as ds:
            a, b = by_name(ds, "a"), by_name(ds, "b")
            for d in ds:
                nodes_seen(d, 2)
            pid = a.status("counter")["pid"]
            before = count_of(a)
            callers = [steady(b), steady(a)]
            for i in range(1, 4):
                seen = count_of(b)
                wait_for(lambda: count_of(b) >= seen + 10, timeout=20, what="calls through b, round %d" % i)
                r = b.ctl("daemon-reexec", timeout=40)
                check(r.returncode == 0 and "0 of 0 running gadgets adopted, 1 run by other nodes" in r.stdout,
                      "daemon-reexec %d of b: %r %s" % (i, r, b.logtext()[-2000:]))
                g = b.list()["counter"]
                check(g["state"] == "remote" and "runs on node a" in g["cause"], "b after re-exec %d: %r" % (i, g))
            seen = count_of(b)
            wait_for(lambda: count_of(b) >= seen + 10, timeout=20, what="calls through b after the last")
            res = [counts(c) for c in callers]
            print("3 re-execs of the forwarding node b: through b %r, through a %r" % tuple(res))
            for who, rr in zip("ba", res):
                check(rr.get("unanswered") == 0 and rr.get("ok") == rr.get("sent") and rr.get("sent", 0) > 0,
                      "calls through %s refused, lost or failed: %r" % (who, rr))
            check(a.status("counter")["pid"] == pid, "the gadget's pid on a changed")
            check(count_of(a) - before == res[0]["ok"] + res[1]["ok"],
                  "count %d after %d increments answered" % (count_of(a) - before, res[0]["ok"] + res[1]["ok"]))
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            wait_for(lambda: b.state("counter") == "ready", timeout=20, what="b takes the counter over")


@test
def pg_failover_may_have_run_is_not_sent_again(tmp):
    """A call node a received and had not answered when it was killed (a
    sleep of the test gadget) is answered on b with "node a went away after
    the call was sent; it may have run", and is not made again on b, which
    takes the gadget over."""
    with PgServer(tmp) as pg:
        cd = certs(tmp, "a", "b")
        a, b = peer_node(tmp, pg, "a", cd), peer_node(tmp, pg, "b", cd)
        for d in (a, b):
            policy(d.pol, "tg", "Nodes=a b\nCallTimeout=60s\n")
        try:
            start_all([a, b])
            check(owner_of([a, b], "tg") == "a", "a runs tg")
            nodes_seen(b, 2)
            slow = subprocess.Popen([os.environ["GADGETCTL"], "--socket", b.sock, "call", "tg", "sleep", '{"ms": 30000}'],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            wait_for(lambda: a.list()["tg"]["in_flight"] == 1, timeout=10, what="the sleep in flight on a")
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            out, err = slow.communicate(timeout=60)
            check(slow.returncode != 0 and "node a went away after the call was sent; it may have run" in err,
                  "the call in flight on a: %r %r" % (out, err))
            wait_for(lambda: b.state("tg") == "ready", timeout=20, what="b runs tg")
            g = b.list()["tg"]
            check(g["in_flight"] == 0, "the call was not made again on b: %r" % g)
        finally:
            stop_all([a, b])


@test
def pg_failover_waiting_calls_bounded(tmp):
    """Hostile load: with the only node allowed to run the counter (Nodes=a)
    gone, a flood of 300 calls through b finds CallsQueuedMax=200 of them
    waiting for a node and the other 100 answered busy at once, while b
    answers its own gadget's calls throughout; node a started again, the
    200 waiting calls reach it, in order, and are answered."""
    with PgServer(tmp) as pg:
        cd = certs(tmp, "a", "b")
        a, b = counter_on_a(tmp, pg, cd, extra="CallsQueuedMax=200\n")
        slow_loop_lease(a, b)  # a's start meets 200 forwarded calls at once
        try:
            start_all([a, b])
            check(owner_of([a, b], "counter") == "a", "a runs the counter")
            wait_for(lambda: b.state("good") == "ready", timeout=20, what="good on b")
            nodes_seen(b, 2)
            with Healthy(b, "good"):
                a.proc.send_signal(signal.SIGKILL)
                a.proc.wait()
                # b has seen the lease free (so it has seen its link to a end).
                wait_for(lambda: "runs on node" not in b.list()["counter"]["cause"], what="b sees no node runs it")
                env = dict(os.environ, CALLFLOOD_SILENCE_MS="60000", CALLFLOOD_RESULTS="1")
                flood = subprocess.Popen([CALLFLOOD, b.sock, "counter", "increment", "300"], stdout=subprocess.PIPE,
                                         text=True, env=env)
                wait_for(lambda: a.proc.poll() is not None, what="a gone")
                a.start()
                out, _ = flood.communicate(timeout=120)
            res = {}
            results = []
            for line in out.splitlines():
                parts = line.split()
                if parts[0] == "result":
                    results.append((int(parts[1]), int(parts[2])))
                else:
                    res[" ".join(parts[:-1])] = int(parts[-1])
            print("flood through b while a was gone: %r" % res)
            check(res.get("ok") == 200 and res.get("error %d" % BUSY) == 100 and res.get("unanswered") == 0,
                  "200 waited and were answered, 100 busy: %r" % res)
            values = [v for _, v in sorted(results)]
            check(values == sorted(values), "the waiting calls were answered in order")
            check(count_of(a) == 200, "200 increments, once each")
        finally:
            stop_all([a, b])


def listed(d):
    r = d.ctl("--json", "nodes")
    check(r.returncode == 0, "nodes: %r" % r.stderr)
    return {n["name"]: n for n in json.loads(r.stdout)["nodes"]}


@test
def pg_nodes_forget_and_expiry(tmp):
    """Nodes a and c are SIGKILLed (NodeForget=15s on every node): while
    a is live (seen within 10 s) `gadgetctl nodes forget a` is refused
    saying so; once it is down, forget takes it off the list at once (c,
    down too, is still listed); c leaves by itself after NodeForget=. Only
    root may forget; b is not forgotten (this node), nor an unknown name;
    the gadgets' owner rows keep their epochs."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "abc"]
        for d in ds:
            with open(d.extra[1], "a") as f:
                f.write("NodeForget=15s\nGroup=nogroup\n")
            policy(d.pol, "only_a", "Nodes=a\n")
        a, b, c = ds
        try:
            start_all(ds)
            check(owner_of(ds, "only_a") == "a", "a runs only_a")
            wait_for(lambda: set(listed(b)) == {"a", "b", "c"}, timeout=15, what="b lists a, b and c")
            a.proc.send_signal(signal.SIGKILL)
            c.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            c.proc.wait()
            r = b.ctl("nodes", "forget", "a")
            check(r.returncode != 0 and "node a is live" in r.stderr, "forget of a live node: %r" % r)
            r = b.ctl("nodes", "forget", "a", user=(65534, 65534))
            check(r.returncode != 0 and "root only" in r.stderr, "forget as a member of the group: %r" % r)
            check("a" in listed(b), "a refused forget leaves a listed")
            r = b.ctl("nodes", "forget", "b")
            check(r.returncode != 0 and "this node" in r.stderr, "forget of this node: %r" % r)
            r = b.ctl("nodes", "forget", "nosuch")
            check(r.returncode != 0 and "no node nosuch" in r.stderr, "forget of an unknown node: %r" % r)
            r = b.ctl("nodes", "forget", "Bad!")
            check(r.returncode != 0 and "not a node name" in r.stderr, "forget of a bad name: %r" % r)
            wait_for(lambda: not listed(b)["a"]["up"], timeout=20, what="a down")
            got = {}

            def forgot():
                got["r"] = b.ctl("nodes", "forget", "a")
                return got["r"].returncode == 0
            wait_for(forgot, timeout=10, what="forget of a once down: %r" % got.get("r"))
            check("forgot node a" in got["r"].stdout, "the answer: %r" % got["r"])
            now = listed(b)  # at once, not at the next beat
            check("a" not in now and "c" in now, "a forgotten, c (as dead) still listed: %r" % now)
            check(pg.psql("SELECT count(*) FROM gadgetd_node WHERE name = 'a'") == "0", "a's row gone")
            check(pg.psql("SELECT node FROM gadgetd_owner WHERE gadget = 'only_a'") == "a",
                  "only_a's owner row (its epoch) kept")
            wait_for(lambda: "c" not in listed(b), timeout=20, what="c leaving the list after NodeForget=")
            check(set(listed(b)) == {"b"}, "only b is left: %r" % listed(b))
            # A node forgotten that comes back is listed again.
            a.start()
            wait_for(lambda: "a" in listed(b), timeout=15, what="a listed again")
        finally:
            stop_all(ds)


if __name__ == "__main__":
    sys.exit(main())
