#!/usr/bin/env python3
"""Integration tests of the audit across nodes (Store=postgresql): every
node copies its audit lines to the store, and `gadgetctl audit NAME` on any
node shows the gadget's records from every node. A real PostgreSQL server
(pgserver.py) and two gadgetd nodes on this machine (lease_pg_test.py's).
Usage: audit_pg_test.py TEST."""
import json
import os
import signal
import subprocess
import sys
import time

from harness import GADGETCTL, check, main, policy, test, wait_for
from pgnodes import counter_cluster, node
from pgserver import PgServer

HOSTILE_PATH = os.environ.get("HOSTILE", "")


def file_lines(d, gadget):
    """gadget's records in d's audit.log, as text, oldest first (a line
    that is no JSON, as a torn one, is none)."""
    path = os.path.join(d.tmp, "state", "audit.log")
    if not os.path.exists(path):
        return []

    def gadget_of(line):
        try:
            return json.loads(line)["gadget"]
        except ValueError:
            return None
    with open(path) as f:
        return [line.rstrip("\n") for line in f if gadget_of(line) == gadget]


def store_lines(pg, gadget, node_name):
    out = pg.psql("SELECT line FROM gadgetd_audit WHERE gadget = '%s' AND node = '%s' ORDER BY id"
                  % (gadget, node_name))
    return out.splitlines() if out else []


def audit(d, *args):
    """`gadgetctl audit ARGS`: (records as text, stderr)."""
    r = d.ctl("audit", *args)
    check(r.returncode == 0, "gadgetctl audit %r: %d %r" % (args, r.returncode, r.stderr))
    return r.stdout.splitlines(), r.stderr


class TableLock:
    """Another session holding gadgetd_audit locked (ACCESS EXCLUSIVE):
    the store is slow for the copies and reads of audit records, not for
    kv or leases. release() lets it go."""

    def __init__(self, pg):
        env = dict(os.environ, LC_ALL="C", PGHOST=pg.dir, PGUSER="gadgetd", PGDATABASE="postgres")
        self.proc = subprocess.Popen(
            ["setpriv", "--reuid=%d" % pg.pw.pw_uid, "--regid=%d" % pg.pw.pw_gid, "--clear-groups",
             os.path.join(pg.bin, "psql"), "-X", "-q"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            env=env, cwd=pg.dir, text=True)
        self.proc.stdin.write("BEGIN; LOCK TABLE gadgetd_audit IN ACCESS EXCLUSIVE MODE; SELECT 1;\n")
        self.proc.stdin.flush()
        wait_for(lambda: pg.psql("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                                 " WHERE c.relname = 'gadgetd_audit' AND l.mode = 'AccessExclusiveLock'"
                                 " AND l.granted") == "1", what="the lock on gadgetd_audit")

    def release(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("ROLLBACK;\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@test
def pg_audit_history_across_nodes(tmp):
    """The counter runs on node a (Nodes=a b) and counts; a is killed
    (SIGKILL), b takes it over and counts on. `gadgetctl audit counter` on
    b shows a's records then b's, each line exactly as its node wrote it to
    its audit.log and naming its node ("node":"a"); -n 2 the last two; and
    a, started again, shows the same history."""
    with PgServer(tmp) as pg:
        with counter_cluster([node(tmp, pg, n) for n in "ab"], "a b", "a") as (a, b):
            for i in range(3):
                check(a.ctl("call", "counter", "increment").returncode == 0, "increment on a")
            mine_a = file_lines(a, "counter")
            check(len(mine_a) >= 3 and all(json.loads(l)["node"] == "a" for l in mine_a),
                  "a's audit.log: %r" % mine_a)
            # The copy is asynchronous: a is killed once it is in the store.
            wait_for(lambda: store_lines(pg, "counter", "a") == mine_a, what="a's records in the store")
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            wait_for(lambda: b.ctl("call", "counter", "increment").returncode == 0, timeout=20,
                     what="b serving the counter")
            # Two more while the table is locked (b's first copy waits on the
            # lock, the rest queue behind it), and an audit asked meanwhile:
            # once the lock goes, it shows every record b wrote before it.
            lock = TableLock(pg)
            try:
                for i in range(2):
                    check(b.ctl("call", "counter", "increment").returncode == 0, "increment on b")
                early = subprocess.Popen([GADGETCTL, "--socket", b.sock, "audit", "counter"], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
                time.sleep(0.5)
            finally:
                lock.release()
            early_out, early_err = early.communicate(timeout=30)
            mine_b = file_lines(b, "counter")
            check(mine_b and all(json.loads(l)["node"] == "b" for l in mine_b), "b's audit.log: %r" % mine_b)
            want = mine_a + mine_b
            got, err = audit(b, "counter")
            check(got == want, "audit on b:\n%s\nwant:\n%s" % ("\n".join(got), "\n".join(want)))
            check(err == "", "a note on b: %r" % err)
            check(early.returncode == 0 and early_out.splitlines() == want and early_err == "",
                  "audit on b asked while the store was locked: %d %r\n%s" % (early.returncode, early_err,
                                                                               early_out))
            got, _ = audit(b, "counter", "-n", "2")
            check(got == want[-2:], "audit -n 2 on b: %r" % got)
            r = b.ctl("--json", "audit", "counter")
            check([json.loads(l)["node"] for l in r.stdout.splitlines()] == ["a"] * len(mine_a) + ["b"] * len(mine_b),
                  "--json: %r" % r.stdout)
            # Retention: rows older than StoreKeepDays= (90) go when a
            # connects again; younger ones stay.
            for gadget, days in (("old", 91), ("young", 89)):
                pg.psql("INSERT INTO gadgetd_audit (gadget, node, at, line) VALUES ('%s', 'x', now() - interval"
                        " '%d days', '{}')" % (gadget, days))
            # a again (the gadget stays on b: no failback): the same history.
            a.start()
            wait_for(lambda: pg.psql("SELECT string_agg(gadget, ',') FROM gadgetd_audit WHERE node = 'x'")
                     == "young", what="the row older than 90 days deleted, not the younger")
            wait_for(lambda: a.state("counter") == "remote", what="a back, the counter remote")
            got, err = audit(a, "counter")
            check(got == want, "audit on a after its restart: %r" % got)
            r = a.ctl("audit", "nosuch")
            check(r.returncode != 0 and 'no gadget named "nosuch"' in r.stderr, "unknown name: %r" % r.stderr)


def status(d, gadget):
    r = d.ctl("--json", "status", gadget)
    check(r.returncode == 0, "status: %r" % r.stderr)
    return json.loads(r.stdout)


@test
def pg_audit_store_slow_or_down(tmp):
    """The store's audit table is locked (a slow store): a gadget flooding
    denied calls is answered as usual and gadgetd answers `list` at once,
    while its audit lines beyond the queue (4096) are dropped from it and
    counted (gadgetctl status, gadgetd's log); once the lock goes, every
    line reaches the store once: those dropped are caught up from
    audit.log once the queue is empty (file = store). Then the server
    stops: `list` still answers at once, and `audit` answers from this
    node's audit.log, saying so on stderr."""
    check(HOSTILE_PATH, "HOSTILE is not set (the hostile test program)")
    with PgServer(tmp) as pg:
        d = node(tmp, pg, "a")
        with open(d.extra[1], "a") as f:
            f.write("[Audit]\nRecordsPerSecond=infinity\nStoreKeepDays=30\n")
        try:
            d.start()
            policy(d.pol, "good")
            check(d.ctl("reload").returncode == 0, "reload")
            wait_for(lambda: d.state("good") == "ready", what="good ready")
            wait_for(lambda: pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                     "'gadgetd a audit'") == "1", what="a's audit session")
            lock = TableLock(pg)
            t_locked = time.monotonic()
            n = 12000
            policy(d.pol, "attacker", "Arguments=binding-flood NOPE get %d\n" % n, exec_path=HOSTILE_PATH)
            check(d.ctl("reload").returncode == 0, "reload")
            slowest = 0.0
            while not [l for l in d.ctl("logs", "attacker").stdout.splitlines() if "binding-flood:" in l]:
                t0 = time.monotonic()
                check(d.ctl("list").returncode == 0, "list during the flood")
                slowest = max(slowest, time.monotonic() - t0)
                check(d.ctl("call", "good", "echo", '"x"').returncode == 0, "a call during the flood")
                time.sleep(0.05)
            print("slowest gadgetctl list while the store was locked: %.0f ms" % (slowest * 1000))
            # A loop that waited for the locked table would not answer
            # before the lock goes, after this flood: 3 s tells that apart
            # from the flood's own share of the loop, which under ASan on a
            # slow host made one list take 1.18 s.
            check(slowest < 3.0, "list took %.2f s" % slowest)
            in_file = len([l for l in file_lines(d, "attacker") if json.loads(l)["binding"] == "NOPE"])
            check(in_file == n, "%d records in audit.log, %d calls" % (in_file, n))
            dropped = status(d, "good")["audit_unsent"]
            print("with the store locked: %d of %d records dropped from the store's copy" % (dropped, n))
            check(n - 4096 - 512 <= dropped < n, "dropped %d" % dropped)
            check("the queue to the store is full" in status(d, "good")["audit_unsent_error"], "why")
            # Said at the first drop, not at the end of a window.
            check("records were not copied to the store" in d.logtext(), "the dropped records in gadgetd's log")
            print("the table was locked for %.1f s" % (time.monotonic() - t_locked))
            lock.release()
            # Every record of the file (the attacker's, its lifecycle's and
            # good's calls') is in the store once: those dropped from the
            # queue copied from audit.log once the queue was empty.
            in_file = sum(len(file_lines(d, g)) for g in ("attacker", "good"))
            wait_for(lambda: int(pg.psql("SELECT count(*) FROM gadgetd_audit")) == in_file, timeout=30,
                     what="every record in the store")
            by_seq = pg.psql("SELECT line FROM gadgetd_audit WHERE gadget = 'attacker' ORDER BY seq").splitlines()
            check(by_seq == file_lines(d, "attacker"), "the store's lines by seq are not the file's")
            # Those copied no longer count as not copied.
            wait_for(lambda: status(d, "good")["audit_unsent"] == 0, timeout=10,
                     what="audit_unsent back to 0 once the dropped records were caught up")
            caught = status(d, "good")["audit_caught_up"]
            print("caught up from audit.log: %d records" % caught)
            # (At least those dropped: a line the queue took after a drop
            # may be sent both ways, and lands once.)
            check(caught >= dropped, "caught up %d, dropped %d" % (caught, dropped))
            got, _ = audit(d, "attacker", "-n", "3")
            # The file's last three (the store lists the records in their
            # own order, though these were dropped and caught up last).
            check(got == file_lines(d, "attacker")[-3:], "audit -n 3 from the store: %r" % got)
            # The server stops: gadgetd answers at once, audit from the file.
            pg.stop()
            t0 = time.monotonic()
            check(d.ctl("list").returncode == 0, "list with the store down")
            took = time.monotonic() - t0
            print("gadgetctl list with the store down: %.0f ms" % (took * 1000))
            check(took < 1.0, "list took %.2f s" % took)
            # Seconds later (the reconnects' backoff grown to seconds), a
            # read still does not wait for the next attempt.
            time.sleep(4)
            t0 = time.monotonic()
            got, err = audit(d, "attacker", "-n", "3")
            took = time.monotonic() - t0
            print("gadgetctl audit with the store down: %.0f ms" % (took * 1000))
            check(took < 1.0, "audit took %.2f s" % took)
            check(got == file_lines(d, "attacker")[-3:], "audit -n 3 from the file: %r" % got)
            check("note: the store is unreachable" in err and "this node's records only" in err,
                  "no note: %r" % err)
            check(len(err.strip().splitlines()) == 1, "the note is one line: %r" % err)
        finally:
            d.__exit__(None, None, None)


@test
def pg_audit_copies_in_batches(tmp):
    """A gadget's records made together reach the store in a few
    transactions, not one each (each is a synchronous commit: a WAL flush
    the gadget's own kv puts would queue behind): 40 kv gets one after the
    other are copied by at most 20 INSERTs (the rows of one share its xmin;
    1 seen on an idle host, 4-6 on a loaded one; one INSERT per record
    without the batching; under ASan only fewer than 40, where 9-23 were
    seen), every record there. Gets, not puts:
    under load a put's own synchronous commit spread 40 puts over more
    windows than that (10-18 INSERTs seen)."""
    check(HOSTILE_PATH, "HOSTILE is not set (the hostile test program)")
    n = 40
    with PgServer(tmp) as pg:
        d = node(tmp, pg, "a")
        try:
            d.start()
            wait_for(lambda: pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                     "'gadgetd a audit'") == "1", what="a's audit session")
            policy(d.pol, "putter", "Arguments=kv-flood KV get %d 1 8\n\n[Binding KV]\nType=kv\n" % n,
                   exec_path=HOSTILE_PATH)
            check(d.ctl("reload").returncode == 0, "reload")
            wait_for(lambda: [l for l in d.ctl("logs", "putter").stdout.splitlines() if "kv-flood:" in l],
                     what="the puts done")
            rows = "FROM gadgetd_audit WHERE gadget = 'putter' AND line::json->>'binding' = 'KV'"
            wait_for(lambda: pg.psql("SELECT count(*) " + rows) == str(n), what="every put's record in the store")
            batches = int(pg.psql("SELECT count(DISTINCT xmin::text) " + rows))
            # How many windows there are depends on the host's speed more
            # than on gadgetd (one INSERT at a time, each a synchronous
            # commit: 6 over 41 ms on a loaded two-CPU VM, 9-11 over 70-110
            # ms under ASan): the bound is that lines share INSERTs, at
            # least two a piece on average.
            span_ms = float(pg.psql("SELECT extract(epoch FROM max(at) - min(at)) * 1000 " + rows))
            bound = n // 2
            if os.environ.get("ASAN_OPTIONS"):  # meson test --setup sanitize
                # Each record and INSERT is slower by more than the gather
                # window there (23 INSERTs over 207 ms seen, under load):
                # only that some lines share one.
                bound = n - 1
            print("%d records over %.1f ms copied by %d INSERTs (at most %d)" % (n, span_ms, batches, bound))
            check(batches <= bound, "%d records over %.1f ms copied by %d INSERTs" % (n, span_ms, batches))
        finally:
            d.__exit__(None, None, None)



@test
def pg_audit_store_bounded(tmp):
    """The store holds at most the local log's budget of a node's records
    ([Audit] MaxFileSize= x KeepFiles=: 16K x 2 here), kept as rows are
    written: 100 KB of node a's older rows already there when it starts,
    then 400 new records (about 64 KB) in one batch; a's rows hold at most
    32 KiB (and one record) after, the newest record there, the older rows
    dropped first, then the oldest new ones (every older row then, even
    one small enough to fit), and the drops said in a's log at once;
    another node's rows are not touched. Then 40 records in small
    batches: the store holds the newest within the budget still."""
    check(HOSTILE_PATH, "HOSTILE is not set (the hostile test program)")
    budget = 2 * 16 * 1024
    with PgServer(tmp) as pg:
        d = node(tmp, pg, "a")
        with open(d.extra[1], "a") as f:
            f.write("[Audit]\nMaxFileSize=16K\nKeepFiles=2\nRecordsPerSecond=infinity\n")
        session = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gadgetd a audit'"
        try:
            d.start()
            wait_for(lambda: pg.psql(session) == "1", what="a's audit session (the schema made)")
        finally:
            d.__exit__(None, None, None)
        pad = "x" * 480
        pg.psql("INSERT INTO gadgetd_audit (gadget, node, at, line) SELECT 'old', n, now(),"
                " '{\"gadget\":\"old\",\"pad\":\"%s\"}' FROM generate_series(1, 200), (VALUES ('a'), ('z')) v(n)"
                % pad)
        # The newest of a's older rows tiny: the batch that drops the
        # queue's older lines to fit the budget leaves room (less than a
        # line) that rows as small as these would fill, kept though older
        # than the records dropped (seen once with a "ready" record).
        pg.psql("INSERT INTO gadgetd_audit (gadget, node, at, line) SELECT 'old', 'a', now(), '{}'"
                " FROM generate_series(1, 100)")
        mine = "SELECT coalesce(sum(octet_length(line)), 0) FROM gadgetd_audit WHERE node = '%s'"
        check(int(pg.psql(mine % "a")) > 3 * budget, "a's older rows are there")
        try:
            d.start()
            wait_for(lambda: pg.psql(session) == "1", what="a's audit session again")
            policy(d.pol, "getter", "Arguments=kv-flood KV get 400 1 8\n\n[Binding KV]\nType=kv\n",
                   exec_path=HOSTILE_PATH)
            # The table locked while the gets are audited: a store that
            # was slow, so the records reach it as one batch of about 64 KB,
            # twice the budget (the rows it held after a batch larger than
            # the budget were the whole batch: seen once under load). A
            # read waits on the lock first, so that no record goes before
            # that batch (a batch of the first ones would wait on the lock
            # instead, and be the newest rows before it).
            with pg.locked("gadgetd_audit"):
                early = subprocess.Popen([GADGETCTL, "--socket", d.sock, "audit", "getter"], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
                wait_for(lambda: pg.psql(session + " AND wait_event_type = 'Lock'") == "1",
                         what="the read waiting on the lock")
                check(d.ctl("reload").returncode == 0, "reload")
                wait_for(lambda: [l for l in d.ctl("logs", "getter").stdout.splitlines() if "kv-flood:" in l],
                         what="the gets done")
            early_out, early_err = early.communicate(timeout=60)
            check(early.returncode == 0 and early_out == "", "the read asked before the gets: %d %r %r" % (
                early.returncode, early_out, early_err))
            newest_kept(pg, d, "getter", budget)
            check(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE node = 'a' AND gadget = 'old'") == "0",
                  "the oldest of a's rows were dropped first")
            check(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE node = 'z'") == "200", "z's rows untouched")
            # Said at once (the batch's older lines were dropped before it
            # was sent), not at the end of a window.
            check("oldest rows were dropped" in d.logtext(), "the drops said in a's log")
            # Then records in small batches (the store not slow): each
            # batch that would pass the budget drops as many of the
            # oldest rows.
            policy(d.pol, "getter2", "Arguments=kv-flood KV get 40 1 8\n\n[Binding KV]\nType=kv\n",
                   exec_path=HOSTILE_PATH)
            check(d.ctl("reload").returncode == 0, "reload")
            wait_for(lambda: [l for l in d.ctl("logs", "getter2").stdout.splitlines() if "kv-flood:" in l],
                     what="getter2's gets done")
            newest_kept(pg, d, "getter2", budget)
        finally:
            d.__exit__(None, None, None)
        # Records only in audit.log at a start (as after a SIGKILL), more
        # than the budget: the catch-up copies them in batches that keep
        # it too (the last batch has no next one to trim after it).
        for g in ("getter", "getter2"):
            os.unlink(os.path.join(d.pol, g + ".policy"))
        log = os.path.join(d.tmp, "state", "audit.log")
        seq = max(json.loads(line)["seq"] for suffix in (".2", ".1", "") if os.path.exists(log + suffix)
                  for line in open(log + suffix))
        now = time.time()
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".%03dZ" % (int(now * 1000) % 1000)
        with open(log, "a") as f:
            for i in range(1, 221):
                f.write(json.dumps({"time": when, "gadget": "filed", "binding": "KV", "op": "get", "outcome": "ok",
                                    "bytes": 0, "duration_us": 1, "node": "a", "seq": seq + i,
                                    "detail": "y" * 120}, separators=(",", ":")) + "\n")
        try:
            d.start()
            newest_kept(pg, d, "filed", budget)
        finally:
            d.__exit__(None, None, None)


def newest_kept(pg, d, gadget, budget):
    """Once gadget's newest record in d's audit.log is in the store, node
    a's rows there are the newest records of its audit.log and rotated
    files (16K each: audit.log.2, audit.log.1, audit.log), in order, and
    hold at most budget bytes (and one record)."""
    newest = file_lines(d, gadget)[-1]
    # (Records of one millisecond may be the same text: any count.)
    wait_for(lambda: pg.psql("SELECT count(*) FROM gadgetd_audit WHERE line = $$%s$$" % newest) != "0",
             what="%s's newest record in the store" % gadget)
    held = int(pg.psql("SELECT coalesce(sum(octet_length(line)), 0) FROM gadgetd_audit WHERE node = 'a'"))
    longest = int(pg.psql("SELECT max(octet_length(line)) FROM gadgetd_audit WHERE node = 'a'"))
    check(held <= budget + longest, "a's rows hold %d bytes, at most %d (+ one record): %s; %s" % (
        held, budget, pg.psql("SELECT gadget, count(*), sum(octet_length(line)), min(id), max(id) FROM gadgetd_audit"
                              " WHERE node = 'a' GROUP BY 1"), [l for l in d.logtext().splitlines() if "audit" in l][-6:]))
    written = []
    for suffix in (".2", ".1", ""):
        path = os.path.join(d.tmp, "state", "audit.log" + suffix)
        if os.path.exists(path):
            with open(path) as f:
                written += [line.rstrip("\n") for line in f]
    out = pg.psql("SELECT line FROM gadgetd_audit WHERE node = 'a' AND gadget <> 'old' ORDER BY id")
    kept = out.splitlines() if out else []
    check(0 < len(kept) < len(written) and kept == written[-len(kept):],
          "after %s: the newest %d of the %d records in the files kept, in order" % (gadget, len(kept), len(written)))


def batch_terminated(pg, session):
    """The audit session's batch waits on the table's lock (pg.locked);
    its backend is terminated ("terminating connection", 57P01, as at a
    store's restart)."""
    wait_for(lambda: pg.psql("SELECT count(*) %s AND wait_event_type = 'Lock'" % session) == "1",
             what="the batch waiting on the lock")
    pid = pg.psql("SELECT pid " + session)
    check(pg.psql("SELECT pg_terminate_backend(%s)" % pid) == "t", "terminated")
    wait_for(lambda: pg.psql("SELECT count(*) FROM pg_stat_activity WHERE pid = %s" % pid) == "0",
             what="the batch's backend gone")


@test
def pg_audit_caught_up_after_sigkill(tmp):
    """A batch whose session the server ends before it commits (a store's
    restart or a terminated backend: 57P01; here the batch waits on a lock
    when its backend is terminated) is sent again once the store takes it:
    the record reaches the store's copy and nothing is counted unsent.
    (Before, such a batch was dropped and counted: its records were in the
    node's audit.log only — the fault schedule's store restarts.)
    Then records a node wrote to its audit.log but had not copied when it
    was SIGKILLed reach the store's copy once it starts again, each exactly
    once: it asks the store for its highest sequence and sends what
    audit.log holds past it. Here none of them was copied before the kill
    (their batch waited on a lock and its backend was terminated, the
    reconnect's setup then waiting on the lock too); a record there twice
    lands once, and a torn last line (a write cut short) is skipped, never sent; the restarted node's own
    records go on past the file's last sequence. (One test: the two share
    a store and a node's start.)"""
    with PgServer(tmp) as pg:
        d = node(tmp, pg, "a")
        session = "FROM pg_stat_activity WHERE application_name = 'gadgetd a audit'"
        try:
            d.start()
            policy(d.pol, "good")
            check(d.ctl("reload").returncode == 0, "reload")
            wait_for(lambda: d.state("good") == "ready", what="good ready")
            wait_for(lambda: pg.psql("SELECT count(*) " + session) == "1", what="a's audit session")
            with pg.locked("gadgetd_audit"):
                check(d.ctl("call", "good", "echo", '"before"').returncode == 0, "the first call")
                line = file_lines(d, "good")[-1]
                check('"op":"call echo"' in line, "the call's record in audit.log: %r" % line)
                batch_terminated(pg, session)
            copied = "SELECT count(*) FROM gadgetd_audit WHERE line = $$%s$$" % line
            wait_for(lambda: pg.psql(copied) != "0" or status(d, "good")["audit_unsent"] > 0, timeout=20,
                     what="the record copied or counted")
            unsent = status(d, "good")
            check(unsent["audit_unsent"] == 0, "counted as not copied: %d (%s)" % (unsent["audit_unsent"],
                                                                                 unsent["audit_unsent_error"]))
            check(pg.psql(copied) == "1", "the record in the store once: %s" % pg.psql(copied))
            wait_for(lambda: store_lines(pg, "good", "a") == file_lines(d, "good"), what="the first call copied")
            with pg.locked("gadgetd_audit"):
                for i in range(5):
                    check(d.ctl("call", "good", "echo", '"k%d"' % i).returncode == 0, "call %d" % i)
                batch_terminated(pg, session)
                d.proc.send_signal(signal.SIGKILL)
                d.proc.wait()
            acked = [l for l in file_lines(d, "good") if '"op":"call echo"' in l]
            check(len(acked) == 6, "every call's record in audit.log: %r" % acked)
            copied = "SELECT count(*) FROM gadgetd_audit WHERE node = 'a' AND line = $$%s$$"
            check([pg.psql(copied % l) for l in acked] == ["1"] + ["0"] * 5,
                  "only the first call in the store before the restart")
            # A record twice in the file (one sent twice lands once: the
            # store's key is node and sequence), then a torn last line.
            with open(os.path.join(d.tmp, "state", "audit.log"), "a") as f:
                f.write(acked[-1] + "\n")
                f.write('{"time":"2026-12-06T20:00:00.000Z","gadget":"good","node":"a","seq":')
            # Another node's record, written after them, reaches the store
            # before they are caught up (a lower id).
            now = time.time()
            later = ('{"time":"%s.%03dZ","gadget":"good","binding":"echo","op":"call echo","outcome":"ok",'
                     '"node":"b","seq":1}' % (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)),
                                             int(now * 1000) % 1000))
            check(later > acked[-1][:len('{"time":"2026-12-06T20:00:00.000Z"')], "the clock went back")
            pg.psql("INSERT INTO gadgetd_audit (gadget, node, at, line, seq) VALUES ('good', 'b', '%s', $$%s$$, 1)"
                    % (json.loads(later)["time"], later))
            d.start()
            wait_for(lambda: [pg.psql(copied % l) for l in acked] == ["1"] * 6, timeout=20,
                     what="every acknowledged call in the store's copy once")
            check(pg.psql("SELECT count(*) - count(DISTINCT seq) FROM gadgetd_audit WHERE node = 'a'") == "0",
                  "a sequence twice in the store")
            check(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE line NOT LIKE '%}'") == "0",
                  "the torn line sent: %s" % pg.psql("SELECT line FROM gadgetd_audit WHERE line NOT LIKE '%}'"))
            # A node of schema 12 sends rows without seq: they still insert,
            # the same line twice too (NULLs never conflict).
            old = ("INSERT INTO gadgetd_audit (gadget, node, at, line) SELECT l::json->>'gadget', 'old',"
                   " (l::json->>'time')::timestamptz, l FROM unnest(ARRAY[$$%s$$]) AS t(l)" % acked[0])
            pg.psql(old)
            pg.psql(old)
            check(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE node = 'old' AND seq IS NULL") == "2",
                  "a schema-12 node's rows")
            wait_for(lambda: d.state("good") == "ready", what="good ready again")
            check(d.ctl("call", "good", "echo", '"after"').returncode == 0, "the call after the restart")
            last = [json.loads(l)["seq"] for l in acked]
            after = json.loads(file_lines(d, "good")[-1])["seq"]
            check(last == sorted(last) and after > last[-1], "sequences %r, then %r" % (last, after))
            # `gadgetctl audit` lists them in the order they were written
            # (their own time), not the order they reached the store; the
            # schema-12 node's rows (no seq) among them.
            got, _ = audit(d, "good")
            check(got.index(later) > got.index(acked[-1]), "caught up listed after a later record: %r" % got)
            times = [json.loads(l)["time"] for l in got]
            check(times == sorted(times) and got.count(acked[0]) == 3, "audit not in time order: %r" % got)
            last3, _ = audit(d, "good", "-n", "3")
            check(last3 == got[-3:], "audit -n 3: %r, not the last three of %r" % (last3, got))
            wait_for(lambda: "; 1 lines of it skipped" in d.logtext(), what="the torn line counted")
            st = status(d, "good")
            check(st["audit_caught_up"] >= 5 and st["audit_log_skipped"] == 1 and st["audit_unsent"] == 0,
                  "status: caught up %d, skipped %d, unsent %d" % (st["audit_caught_up"], st["audit_log_skipped"],
                                                                 st["audit_unsent"]))
        finally:
            d.__exit__(None, None, None)


if __name__ == "__main__":
    sys.exit(main())
