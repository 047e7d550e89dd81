"""What a node's lease session costs with many declared gadgets
(Store=postgresql): two gadgetd nodes (or --nodes K) share one PostgreSQL
server (pgserver.py), each with the same N Start=on-demand policies, so
that each node holds its share of the leases and watches the rest. Measured:
the time until every gadget has an owner (a live lease in the store), then over a window the statements per second the server ran for
the nodes (pg_stat_database's xact_commit: one per statement outside a
transaction; each backend adds its counts at most once a second, hence
a window of several), and each gadgetd's and the server's CPU time;
then the node holding the most leases is killed (SIGKILL) and the time
until the others hold every lease is measured. Used by lease_pg_test.py; run as a program for the
benchmark's larger N: leaseload.py N [SECONDS] [--nodes K] [--json] (GADGETD,
GADGETCTL, TESTGADGET as for the tests; --json: the numbers as one JSON
object, for bench/run)."""
import json
import os
import signal
import sys
import tempfile
import time

from harness import cpu_s, policy
from pgnodes import live_leases, node, start_all, stop_all
from pgserver import PgServer


def held(pg, name=None):
    """How many gadget leases are live in the store now (node name's, if
    given)."""
    return live_leases(pg, name)


def locks(pg):
    """How many locks the server holds now, every kind (the nodes' leases
    take none of its lock table)."""
    return int(pg.psql("SELECT count(*) FROM pg_locks WHERE pid <> pg_backend_pid()"))


def commits(pg):
    return int(pg.psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'"))


def server_cpu_s(pg):
    total = 0.0
    for pid in pg.pids():
        try:
            total += cpu_s(pid)
        except OSError:
            pass
    return total


def measure(tmp, n, seconds=5.0, own_timeout=120.0, nodes=2):
    """Runs the nodes with n gadgets each; a dict of what was seen
    (owned_s is None if not every gadget had an owner in own_timeout)."""
    out = {"n": n, "nodes": nodes}
    pg = PgServer(tmp)
    with pg:
        ds = [node(tmp, pg, name) for name in "abcdefgh"[:nodes]]
        for d in ds:
            for i in range(n):
                policy(d.pol, "g%05d" % i, "Start=on-demand\n")
        try:
            t0 = time.monotonic()
            start_all(ds)
            out["owned_s"] = None
            while time.monotonic() - t0 < own_timeout:
                if held(pg) >= n:
                    out["owned_s"] = time.monotonic() - t0
                    break
                time.sleep(0.05)
            # The statistics of a backend reach pg_stat_database within a
            # second: a settled start, then the window.
            time.sleep(2)
            c0, s0, t1 = commits(pg), server_cpu_s(pg), time.monotonic()
            g0 = [cpu_s(d.proc.pid) for d in ds]
            time.sleep(seconds)
            g1 = [cpu_s(d.proc.pid) for d in ds]
            c1, s1, t2 = commits(pg), server_cpu_s(pg), time.monotonic()
            dt = t2 - t1
            out["qps"] = (c1 - c0) / dt
            out["gadgetd_cpu_pct"] = [100 * (b - a) / dt for a, b in zip(g0, g1)]
            out["server_cpu_pct"] = 100 * (s1 - s0) / dt
            out["held"] = held(pg)
            out["locks"] = locks(pg)
            # What each node says of each gadget: idle where held, remote
            # (naming the owner) on the other.
            out["states"] = [d.list() for d in ds]
            # The takeover: the node holding more leases killed, the other
            # takes every lease it held.
            a = max(ds, key=lambda d: held(pg, os.path.basename(d.tmp)))
            rest = [d for d in ds if d is not a]
            out["held_a"] = held(pg, os.path.basename(a.tmp))
            t0 = time.monotonic()
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            out["takeover_s"] = None
            while time.monotonic() - t0 < own_timeout:
                if sum(held(pg, os.path.basename(d.tmp)) for d in rest) >= n:
                    out["takeover_s"] = time.monotonic() - t0
                    break
                time.sleep(0.05)
        finally:
            stop_all(ds)
    return out


def report(r):
    def secs(s):
        return "%.2f s" % s if s is not None else "not within the timeout"
    return ("%d on-demand gadgets on %d nodes: every one owned after %s; %.0f statements/s at the server;"
            " gadgetd CPU %s; server CPU %.1f%%; one node killed (it held %d), the others hold every lease after %s"
            % (r["n"], r["nodes"], secs(r["owned_s"]), r["qps"], " / ".join("%.1f%%" % c for c in r["gadgetd_cpu_pct"]),
               r["server_cpu_pct"], r["held_a"], secs(r["takeover_s"])))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--json"]
    k = 2
    if "--nodes" in args:
        i = args.index("--nodes")
        k = int(args[i + 1])
        del args[i:i + 2]
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        res = measure(tmp, int(args[0]), float(args[1]) if len(args) > 1 else 5.0, nodes=k)
        if "--json" in sys.argv:
            res.pop("states", None)
            print(json.dumps(res))
        else:
            print(report(res))
