#!/usr/bin/env python3
"""Integration tests of one owner per gadget across nodes (Store=postgresql):
a real PostgreSQL server (pgserver.py) and two or three gadgetd "nodes" on
this machine, each with its own directories and Node=, the same policy
files and the same store. Usage: lease_pg_test.py TEST."""
import os
import signal
import subprocess
import sys
import threading
import time

from harness import check, main, policy, test, wait_for
from pgnodes import by_name, counter_policy, node, owner_of, start_all, states, stop_all
from pgserver import PgServer

LEASE_SPACE = 1734435943  # kvpg_sql.h KVPG_LEASE_SPACE


def owner_row(pg, gadget):
    out = pg.psql("SELECT node || ' ' || epoch FROM gadgetd_owner WHERE gadget = '%s'" % gadget)
    if not out:
        return None, 0
    n, e = out.split()
    return n, int(e)


@test
def pg_lease_one_owner(tmp):
    """Three nodes with the same counter policy: exactly one runs it (the
    others say "remote: runs on node X (epoch N)", and so does the store's
    owner row), calls through the owner count, a call through another node
    is refused naming the owner, and for two seconds no second node starts
    it. Stopped on its owner (gadgetctl stop), it is given back: another
    node runs it, with its count."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "abc"]
        for d in ds:
            counter_policy(d)
        try:
            start_all(ds)
            owner = owner_of(ds, "counter")
            o = by_name(ds, owner)
            row_node, epoch = owner_row(pg, "counter")
            check(row_node == owner and epoch >= 1, "owner row: %r %r" % (row_node, epoch))
            for i in range(1, 6):
                r = o.ctl("call", "counter", "increment")
                check(r.returncode == 0 and r.stdout.strip() == str(i), "increment %d: %r %r" % (i, r.stdout,
                                                                                               r.stderr))
            for d in ds:
                if d is o:
                    continue
                r = d.ctl("call", "counter", "get")
                check(r.returncode != 0 and ("gadget counter runs on node %s" % owner) in r.stderr,
                      "a call through a node that does not own it: %d %r" % (r.returncode, r.stderr))
            t_end = time.monotonic() + 2
            while time.monotonic() < t_end:
                s = states(ds, "counter")
                check(sum(st in ("ready", "starting") for st, _ in s.values()) == 1, "two run it: %r" % s)
                time.sleep(0.1)
            check(o.ctl("call", "counter", "get").stdout.strip() == "5", "count")
            # Stopped on its owner, it is given back: another node runs it.
            check(o.ctl("stop", "counter").returncode == 0, "stop")
            rest = [d for d in ds if d is not o]
            t0 = time.monotonic()
            owner2 = owner_of(rest, "counter", timeout=10)
            print("after gadgetctl stop on %s, node %s runs it %.0f ms later" % (owner, owner2,
                                                                              (time.monotonic() - t0) * 1000))
            check(o.state("counter") == "stopped", "on the old owner: %r" % o.list()["counter"])
            r = by_name(ds, owner2).ctl("call", "counter", "get")
            check(r.stdout.strip() == "5", "count on the new owner: %r %r" % (r.stdout, r.stderr))
        finally:
            stop_all(ds)


def increment_until(d, stop, res):
    """Increments through d until stop: res["acked"] counts the ones
    answered ok, res["unknown"] the ones answered with an error (applied
    or not)."""
    while not stop.is_set():
        r = d.ctl("call", "counter", "increment", timeout=60)
        if r.returncode == 0:
            res["acked"] += 1
            res["last"] = int(r.stdout.strip())
        else:
            res["unknown"] += 1
            return


@test
def pg_lease_takeover_after_sigkill(tmp):
    """The owner's gadgetd is killed (SIGKILL) while its counter is being
    incremented: another node takes the lease and serves the counter within
    2 s, with every acknowledged increment (the count is the acknowledged
    ones, or at most those plus the one whose answer was lost)."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "ab"]
        for d in ds:
            counter_policy(d)
        try:
            start_all(ds)
            owner = owner_of(ds, "counter")
            o = by_name(ds, owner)
            other = next(d for d in ds if d is not o)
            _, epoch0 = owner_row(pg, "counter")
            res, stop = {"acked": 0, "unknown": 0, "last": 0}, threading.Event()
            t = threading.Thread(target=increment_until, args=(o, stop, res))
            t.start()
            wait_for(lambda: res["acked"] >= 40, timeout=60, what="40 acknowledged increments")
            t0 = time.monotonic()
            o.proc.send_signal(signal.SIGKILL)
            o.proc.wait()
            stop.set()
            t.join()
            got = {}

            def served():
                r = other.ctl("call", "counter", "get", timeout=10)
                got["r"] = r
                return r.returncode == 0
            wait_for(served, timeout=20, what="the other node serving the counter")
            took = time.monotonic() - t0
            print("takeover after SIGKILL of the owner: %.0f ms" % (took * 1000))
            count = int(got["r"].stdout.strip())
            acked, unknown = res["acked"], res["unknown"]
            check(acked <= count <= acked + unknown, "count %d after %d acknowledged increments (%d unknown)"
                  % (count, acked, unknown))
            check(res["last"] == acked, "acknowledged %d, last answer %d" % (acked, res["last"]))
            row_node, epoch = owner_row(pg, "counter")
            check(row_node == os.path.basename(other.tmp) and epoch == epoch0 + 1, "owner row %r %r (was %r)"
                  % (row_node, epoch, epoch0))
            check(took < 2.0, "takeover took %.2f s" % took)
            r = other.ctl("call", "counter", "increment")
            check(r.stdout.strip() == str(count + 1), "increment after the takeover: %r" % r.stdout)
        finally:
            stop_all(ds)


def lease_pid(pg, gadget):
    """The server process holding gadget's lease lock."""
    return pg.psql("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %d AND objid ="
                   " hashtext('%s')::oid AND granted" % (LEASE_SPACE, gadget))


@test
def pg_lease_session_terminated_fences(tmp):
    """The owner's lease session is ended (pg_terminate_backend): the owner
    kills its gadget at once ("lost its store lease"), the other node takes
    the lease (a new epoch; the old owner, back on the store, lets it go
    first though Nodes= prefers it) and serves the count; a write carrying
    the old epoch is refused by the store itself (SQLSTATE GDF01,
    "fenced"), while the new epoch's is taken; the old owner then says
    where it runs."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "ab"]
        for d in ds:
            counter_policy(d, nodes="a b")
        try:
            start_all(ds)
            check(owner_of(ds, "counter") == "a", "Nodes=a b: not on a")
            a, b = ds
            for _ in range(3):
                a.ctl("call", "counter", "increment")
            _, old = owner_row(pg, "counter")
            pid = lease_pid(pg, "counter")
            check(pid and pg.psql("SELECT application_name FROM pg_stat_activity WHERE pid = %s" % pid)
                  == "gadgetd a lease", "the lease session: %r" % pid)
            t0 = time.monotonic()
            check(pg.psql("SELECT pg_terminate_backend(%s)" % pid) == "t", "terminate")
            wait_for(lambda: a.state("counter") != "ready", timeout=5, what="a to stop the counter")
            stopped = time.monotonic() - t0
            print("owner stopped its gadget %.0f ms after its lease session ended" % (stopped * 1000))
            check(stopped < 0.5, "a stopped the counter after %.2f s" % stopped)
            check("lost its store lease" in a.logtext(), "a's log: %s" % a.logtext()[-2000:])
            owner = owner_of(ds, "counter", timeout=10)
            check(owner == "b", "taken over by %s" % owner)
            _, new = owner_row(pg, "counter")
            check(new > old, "epoch %d after %d" % (new, old))
            print("now on node %s at epoch %d (was a at %d)" % (owner, new, old))
            o = by_name(ds, owner)
            check(o.ctl("call", "counter", "get").stdout.strip() == "3", "count after the takeover")
            put = ("SELECT gadgetd_kv_put('counter', 'COUNT', convert_to('fence-probe', 'UTF8'), '\\x00', 10,"
                   " 1000000, 'a', %d)")
            r = pg._as_user(os.path.join(pg.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            "-v", "VERBOSITY=verbose", "-c", put % old, check=False, capture=True)
            check(r.returncode != 0 and "GDF01" in r.stderr and "fenced: this node no longer owns gadget counter"
                  in r.stderr, "a put with the old epoch: %d %r %r" % (r.returncode, r.stdout, r.stderr))
            check(pg.psql(put % new) == "0", "a put with the owner's epoch")
            check(o.ctl("call", "counter", "get").stdout.strip() == "3", "count")
            wait_for(lambda: "runs on node b" in (a.list()["counter"].get("cause") or ""), timeout=10,
                         what="a to say where the counter runs: %r" % a.list().get("counter"))
        finally:
            stop_all(ds)


@test
def pg_lease_takeover_waits_for_write_in_flight(tmp):
    """A put of the owner is in flight (held in its transaction, past the
    fence, by a lock the test holds) when its lease session ends: the
    other node's takeover waits for that write (the fence's FOR SHARE
    lock), so the new owner's first read already has it and nothing of the
    old owner lands after the takeover."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "ab"]
        for d in ds:
            counter_policy(d, nodes="a b")
        holder = None
        try:
            start_all(ds)
            check(owner_of(ds, "counter") == "a", "Nodes=a b: not on a")
            a, b = ds
            for _ in range(3):
                a.ctl("call", "counter", "increment")
            env = dict(os.environ, LC_ALL="C", PGHOST=pg.dir, PGUSER="gadgetd", PGDATABASE="postgres")
            holder = subprocess.Popen(
                ["setpriv", "--reuid=%d" % pg.pw.pw_uid, "--regid=%d" % pg.pw.pw_gid, "--clear-groups",
                 os.path.join(pg.bin, "psql"), "-X", "-A", "-t", "-q"], cwd=pg.dir, env=env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            holder.stdin.write("BEGIN; SELECT 'held' FROM gadgetd_kv_ns WHERE gadget = 'counter' FOR UPDATE;\n")
            holder.stdin.flush()
            check(holder.stdout.readline().strip() == "held", "the test's lock")
            res = {}
            t = threading.Thread(target=lambda: res.update(r=a.ctl("call", "counter", "increment")))
            t.start()
            wait_for(lambda: pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gadgetd a'"
                                     " AND wait_event_type = 'Lock'") == "1", what="a's put to wait")
            check(pg.psql("SELECT pg_terminate_backend(%s)" % lease_pid(pg, "counter")) == "t", "terminate")
            time.sleep(1.2)
            check(b.state("counter") == "remote", "b took over while a's write was in flight: %r"
                  % b.list()["counter"])
            holder.stdin.write("COMMIT;\n")
            holder.stdin.flush()
            wait_for(lambda: b.state("counter") == "ready", timeout=10, what="b to take over")
            first = b.ctl("call", "counter", "get").stdout.strip()
            time.sleep(0.5)
            again = b.ctl("call", "counter", "get").stdout.strip()
            t.join()
            print("a's increment in flight: %r; b reads %s, then %s" % (res["r"].stderr.strip(), first, again))
            check(first == "4" and again == "4", "b read %s, then %s" % (first, again))
        finally:
            if holder:
                holder.kill()
                holder.wait()
            stop_all(ds)


@test
def pg_lease_nodes(tmp):
    """Nodes=: a gadget allowed only on b runs on b, never on a (not even
    once b is gone); one preferring b over a runs on b when both start
    together, and on a once b is gone."""
    with PgServer(tmp) as pg:
        ds = [node(tmp, pg, n) for n in "ab"]
        for d in ds:
            policy(d.pol, "only_b", "Nodes=b\n")
            policy(d.pol, "prefers_b", "Nodes=b a\n")
        try:
            start_all(ds)
            a, b = ds
            check(owner_of(ds, "only_b") == "b", "only_b")
            check(owner_of(ds, "prefers_b") == "b", "prefers_b")
            cause = a.list()["only_b"].get("cause")
            check("runs on node b" in cause or "not allowed on node a" in cause, "only_b on a: %r" % cause)
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait()
            wait_for(lambda: a.state("prefers_b") == "ready", timeout=10, what="prefers_b on a")
            t_end = time.monotonic() + 2
            while time.monotonic() < t_end:
                g = a.list()["only_b"]
                check(g["state"] == "remote", "only_b on a: %r" % g)
                time.sleep(0.1)
            check("not allowed on node a (Nodes=)" in a.list()["only_b"]["cause"], "cause: %r" % a.list()["only_b"])
            check(pg.psql("SELECT node FROM gadgetd_owner WHERE gadget = 'only_b'") == "b", "only_b's owner row")
        finally:
            stop_all(ds)


if __name__ == "__main__":
    sys.exit(main())
