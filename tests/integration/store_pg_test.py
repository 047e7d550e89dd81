#!/usr/bin/env python3
"""Integration tests of the PostgreSQL store (Store=postgresql): a real
PostgreSQL server started by each test (pgserver.py), real gadgetd, real
gadgets. Usage: store_pg_test.py TEST."""
import json
import os
import signal
import sys
import threading
import time

import re
import subprocess

from harness import Daemon, check, main, policy, test, wait_for
from pgserver import PgServer
import kvchecks
from kvchecks import bcall, ready

# The schema version this tree's gadgetd migrates to: how many migrations
# kvpg_sql.c lists.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "supervisor", "store",
                       "kvpg_sql.c")) as _c:
    SCHEMA_VERSION = len(re.findall(r"\bmigration_\w+",
                                    re.search(r"migrations\[\] = \{(.*?)\};", _c.read(), re.S).group(1)))


def pg_daemon(tmp, pg, name="gadgetd", node="node1", extra_conf=""):
    """A gadgetd (its own directories below tmp/name) whose kv bindings
    live in pg."""
    base = os.path.join(tmp, name)
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    conf = os.path.join(base, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nStore=postgresql\nStoreConnection=%s\nNode=%s\n%s" % (pg.conninfo, node, extra_conf))
    return Daemon(base, extra=["--config", conf])


def connected(d):
    return "store: connected to PostgreSQL" in d.logtext()


@test
def pg_kv_operations(tmp):
    """get/put/delete/list with cursors and bytes keys, on PostgreSQL; and
    no SQLite file is made."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        kvchecks.kv_operations_checks(d)
        check(not os.path.exists(os.path.join(d.tmp, "state", "kv")), "a SQLite store was made")
        rows = pg.psql("SELECT gadget, binding, keys FROM gadgetd_kv_ns ORDER BY gadget, binding")
        check(rows == "store|DATA|5", "namespaces: %r" % rows)


@test
def pg_kv_namespaces(tmp):
    """Each binding of each gadget its own namespace."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        kvchecks.kv_namespaces_checks(d)


@test
def pg_kv_limits(tmp):
    """Key size, MaxValueSize, MaxKeys and MaxBytes as on SQLite; a refused
    put writes nothing; the usage row matches the keys stored."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        kvchecks.kv_limits_checks(d)
        usage = pg.psql("SELECT n.keys = count(v.key) AND n.bytes = sum(length(v.key) + length(v.value))"
                        " FROM gadgetd_kv_ns n JOIN gadgetd_kv v ON v.ns = n.id GROUP BY n.id")
        check(usage == "t", "usage row and keys disagree: %r" % usage)


@test
def pg_kv_cas_and_batch(tmp):
    """cas and batch as on SQLite: all or nothing, the failed cas named,
    quotas per write mid-batch; the usage rows match the keys after."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        kvchecks.kv_cas_batch_checks(d)
        kvchecks.kv_batch_quota_checks(d)
        usage = pg.psql("SELECT n.gadget, n.keys = count(v.key) AND n.bytes = coalesce(sum(length(v.key) +"
                        " length(v.value)), 0) FROM gadgetd_kv_ns n LEFT JOIN gadgetd_kv v ON v.ns = n.id"
                        " GROUP BY n.id ORDER BY n.gadget")
        check(usage == "cas|t\nsmall|t", "usage rows and keys disagree: %r" % usage)


def batch_ops(*ops):
    """gadgetd_kv_batch's ops argument as kv_job_add_op packs it, each op
    (key, expect, value, cas): as a bytea literal."""
    out = b""
    for key, expect, value, cas in ops:
        out += bytes([(1 if cas else 0) | (2 if expect is not None else 0) | (4 if value is not None else 0)])
        out += len(key).to_bytes(2, "big") + key
        for v in (expect, value):
            out += len(v or b"").to_bytes(4, "big") + (v or b"")
    return "'\\x%s'::bytea" % out.hex()


def live_owner(pg):
    """probe-node, whose node lease runs for an hour (incarnation 3), owns
    gadget probe at epoch 5: the write functions' fence passes for it."""
    pg.psql("INSERT INTO gadgetd_node (name, incarnation, lease_until) VALUES ('probe-node', 3,"
            " now() + interval '1 hour')")
    pg.psql("INSERT INTO gadgetd_owner (gadget, node, epoch, node_inc) VALUES ('probe', 'probe-node', 5, 3)")


@test
def pg_batch_function_fences(tmp):
    """gadgetd_kv_batch as the store runs it: a writer whose epoch is not
    the owner row's is refused with GDF01 and writes nothing (a cas and a
    batch alike); a cas that does not match rolls back the ops before it;
    malformed ops (a length past the end) fail the statement, writing
    nothing."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        wait_for(lambda: connected(d), what="the schema migrated")
        live_owner(pg)
        big = 9223372036854775807

        def batch(ops, epoch, max_keys=big):
            return sql_try(pg, "SELECT failed || ' ' || why || ' ' || existed || ' ' || coalesce(encode(cur, 'hex'),"
                               " '-') FROM gadgetd_kv_batch('probe', 'A', %s, %d, %d, 'probe-node', %d)"
                           % (ops, max_keys, big, epoch))

        def keys():
            return pg.psql("SELECT coalesce(string_agg(encode(v.key, 'escape') || '=' || encode(v.value, 'escape'),"
                           " ',' ORDER BY v.key), '') FROM gadgetd_kv v JOIN gadgetd_kv_ns n ON n.id = v.ns"
                           " WHERE n.gadget = 'probe'")

        put_a = batch_ops((b"a", None, b"1", False))
        check(batch(put_a, 4)[2] == "GDF01", "old epoch, a put in a batch")
        check(batch(batch_ops((b"a", None, b"1", True)), 4)[2] == "GDF01", "old epoch, a cas")
        check(keys() == "", "a fenced batch wrote: %r" % keys())
        check(batch(put_a, 5) == (True, "-1 0 0 -", None), "owner's epoch: %r" % (batch(put_a, 5),))
        got = batch(batch_ops((b"b", None, b"2", False), (b"a", b"9", b"3", True)), 5)
        check(got == (True, "1 1 0 31", None), "a stale cas after a put: %r" % (got,))
        check(keys() == "a=1", "a batch not applied wrote: %r" % keys())
        got = batch(batch_ops((b"b", None, b"2", False), (b"c", None, b"3", False)), 5, max_keys=2)
        check(got == (True, "1 2 0 -", None), "over MaxKeys= mid-batch: %r" % (got,))
        check(keys() == "a=1", "a batch over the quota wrote: %r" % keys())
        got = batch(batch_ops((b"a", b"1", None, True), (b"b", None, b"2", False)), 5)
        check(got == (True, "-1 0 1 -", None), "a cas delete and a put: %r" % (got,))
        check(keys() == "b=2", "after: %r" % keys())
        bad = put_a[:-len("'::bytea")] + "ff'::bytea"
        check(batch("'\\x0400'::bytea || " + bad, 5)[0] is False, "malformed ops refused")
        check(batch("'\\x00000100'::bytea", 5)[0] is False, "a length past the end refused")
        check(keys() == "b=2", "malformed ops wrote: %r" % keys())


def sql_try(pg, sql):
    """Runs sql as the store's user: (ok, output, SQLSTATE of its error or None)."""
    r = pg._as_user(os.path.join(pg.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-v",
                    "VERBOSITY=verbose", "-c", sql, check=False, capture=True)
    m = re.search(r"ERROR:\s+([0-9A-Z]{5}):", r.stderr)
    return r.returncode == 0, r.stdout.strip(), m.group(1) if m else None


@test
def pg_write_functions_fence_and_quota(tmp):
    """gadgetd_kv_put and gadgetd_kv_delete as the store runs them: a writer
    whose epoch is not the owner row's is refused with GDF01 and writes
    nothing, on a binding's first write (no namespace yet) as on later
    ones, and so is one with no owner row; a put over MaxKeys= or
    MaxBytes= answers 1 and writes nothing; the usage row always matches
    the keys. The owner's epoch is refused too once its node's lease has
    expired by the server's clock (nobody took the gadget over), or the
    node gave the gadget back, or its lease is of another incarnation."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        wait_for(lambda: connected(d), what="the schema migrated")
        live_owner(pg)
        big = 9223372036854775807

        def put(binding, key, value, epoch, gadget="probe", max_keys=big, max_bytes=big):
            return sql_try(pg, "SELECT gadgetd_kv_put('%s', '%s', convert_to('%s', 'UTF8'),"
                               " convert_to('%s', 'UTF8'), %d, %d, 'node1', %d)"
                           % (gadget, binding, key, value, max_keys, max_bytes, epoch))

        def delete(binding, key, epoch):
            return sql_try(pg, "SELECT gadgetd_kv_delete('probe', '%s', convert_to('%s', 'UTF8'), %d)"
                           % (binding, key, epoch))

        def namespaces():
            return pg.psql("SELECT coalesce(string_agg(binding || '=' || keys || '/' || bytes, ','"
                           " ORDER BY binding), '') FROM gadgetd_kv_ns WHERE gadget = 'probe'")

        check(put("A", "k", "v", 4)[2] == "GDF01", "old epoch, first write of a binding")
        check(namespaces() == "", "a fenced first write made a namespace: %r" % namespaces())
        check(put("A", "k", "v", 5) == (True, "0", None), "owner's epoch, first write")
        check(put("A", "k", "vv", 4)[2] == "GDF01", "old epoch, namespace there")
        check(put("A", "k", "vv", 5, gadget="nobody")[2] == "GDF01", "no owner row")
        check(put("A", "k2", "v", 5, max_keys=1) == (True, "1", None), "over MaxKeys=")
        check(put("A", "k", "vvvv", 5, max_bytes=4) == (True, "1", None), "over MaxBytes=")
        check(put("A", "k", "vvv", 5, max_keys=1, max_bytes=4) == (True, "0", None), "overwrite within the quota")
        check(namespaces() == "A=1/4", "usage: %r" % namespaces())
        check(delete("A", "k", 4)[2] == "GDF01", "delete, old epoch")
        check(delete("B", "k", 4)[2] == "GDF01", "delete, old epoch, no namespace")
        check(delete("B", "k", 5) == (True, "f", None), "delete, no namespace")
        check(delete("A", "nope", 5) == (True, "f", None), "delete of a missing key")
        check(delete("A", "k", 5) == (True, "t", None), "delete")
        check(namespaces() == "A=0/0", "usage after the delete: %r" % namespaces())
        check(pg.psql("SELECT count(*) FROM gadgetd_kv v JOIN gadgetd_kv_ns n ON n.id = v.ns"
                      " WHERE n.gadget IN ('probe', 'nobody')") == "0", "keys left")
        # The fence's second half: the owner node's lease, at the server.
        pg.psql("UPDATE gadgetd_node SET lease_until = now() - interval '1 ms' WHERE name = 'probe-node'")
        check(put("A", "k", "v", 5)[2] == "GDF01", "owner's epoch, its node's lease expired")
        check(delete("A", "k", 5)[2] == "GDF01", "delete, owner's epoch, its node's lease expired")
        pg.psql("UPDATE gadgetd_node SET lease_until = now() + interval '1 hour', incarnation = 4"
                " WHERE name = 'probe-node'")
        check(put("A", "k", "v", 5)[2] == "GDF01", "owner's epoch, its node's lease of another incarnation")
        pg.psql("UPDATE gadgetd_node SET incarnation = 3 WHERE name = 'probe-node'")
        check(put("A", "k", "v", 5) == (True, "0", None), "owner's epoch, its node's lease live again")
        pg.psql("SELECT gadgetd_lease_release('{probe}', 'probe-node', 3)")
        check(put("A", "k", "v", 5)[2] == "GDF01", "owner's epoch, the gadget given back")


@test
def pg_counter_thousand_concurrent(tmp):
    """The counter example on PostgreSQL counts 1,000 increments sent by four
    callers at once exactly (each a get and a durable put, in order)."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        kvchecks.counter_thousand_concurrent_checks(d)


@test
def pg_put_answered_after_commit(tmp):
    """A put is answered from its commit, not from its statement: a
    constraint trigger deferred to commit time refuses one key, so its
    statement succeeds and only its commit fails. That put must be an
    error (nothing stored); the others ok."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        check(bcall(d, "store", "DATA", "put", {"key": "first", "value": 1})[0] == 0, "first put")
        pg.psql("CREATE FUNCTION refuse_doomed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.key = convert_to('doomed', 'UTF8') THEN RAISE EXCEPTION 'commit refused by the test';"
                " END IF; RETURN NULL; END $$;"
                "CREATE CONSTRAINT TRIGGER refuse_doomed AFTER INSERT OR UPDATE ON gadgetd_kv"
                " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_doomed()")
        rc, _, err = bcall(d, "store", "DATA", "put", {"key": "doomed", "value": 2})
        check(rc == 1 and "commit refused by the test" in err, "a put whose commit failed: %d %r" % (rc, err))
        check(bcall(d, "store", "DATA", "get", {"key": "doomed"})[0] == 3, "the refused put is stored")
        check(bcall(d, "store", "DATA", "put", {"key": "fine", "value": 3})[0] == 0, "the next put")
        check(pg.psql("SELECT keys FROM gadgetd_kv_ns") == "2", "usage counts the refused put")


@test
def pg_commits_are_synchronous(tmp):
    """An acknowledged put survives a crash of the server only if its
    commit waited for the WAL on disk: with the server's own default set to
    synchronous_commit=off, gadgetd's kv and lease sessions still commit
    synchronously (a trigger run at each commit records the setting the
    committing session has)."""
    with PgServer(tmp) as pg:
        pg.psql("ALTER SYSTEM SET synchronous_commit = off")
        pg.psql("SELECT pg_reload_conf()")
        check(pg.psql("SHOW synchronous_commit") == "off", "the server's default is off")
        with pg_daemon(tmp, pg) as d:
            policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
            ready(d, "store")
            pg.psql("CREATE TABLE seen (tbl text, setting text);"
                    "CREATE FUNCTION record_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                    " INSERT INTO seen VALUES (TG_TABLE_NAME, current_setting('synchronous_commit')); RETURN NULL;"
                    " END $$;"
                    "CREATE CONSTRAINT TRIGGER record_kv AFTER INSERT OR UPDATE ON gadgetd_kv"
                    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_commit();"
                    "CREATE CONSTRAINT TRIGGER record_owner AFTER INSERT OR UPDATE ON gadgetd_owner"
                    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION record_commit()")
            check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "a put")
            policy(d.pol, "other", "[Binding DATA]\nType=kv\n")
            ready(d, "other")  # its lease: a row of gadgetd_owner written
            wait_for(lambda: "gadgetd_owner" in pg.psql("SELECT tbl FROM seen"), what="a lease's commit")
            rows = pg.psql("SELECT tbl || '=' || setting FROM seen ORDER BY 1")
            check(rows and all(r.endswith("=on") for r in rows.splitlines()) and "gadgetd_kv=on" in rows,
                  "the settings of gadgetd's commits: %r" % rows)


def put_until(d, gadget, acked, stop, prefix="k", errors=None):
    """Puts k000000, k000001, ... until stop is set; acked gets each key
    answered ok, errors each error message."""
    i = 0
    while not stop.is_set():
        key = "%s%06d" % (prefix, i)
        rc, _, err = bcall(d, gadget, "DATA", "put", {"key": key, "value": i})
        if rc == 0:
            acked.append(key)
        elif errors is not None:
            errors.append(err)
        else:
            return
        i += 1


def stored_keys(pg, gadget):
    out = pg.psql("SELECT convert_from(v.key, 'UTF8') FROM gadgetd_kv v JOIN gadgetd_kv_ns n ON n.id = v.ns"
                  " WHERE n.gadget = '%s' AND n.binding = 'DATA'" % gadget)
    return set(out.split("\n")) if out else set()


@test
def pg_acknowledged_puts_survive_sigkill(tmp):
    """Puts are acknowledged, gadgetd is killed (SIGKILL) among more: every
    acknowledged put is in the store, and a new gadgetd serves them."""
    with PgServer(tmp) as pg:
        d = pg_daemon(tmp, pg)
        policy(d.pol, "durable", "[Binding DATA]\nType=kv\n")
        d.start()
        ready(d, "durable")
        acked, stop = [], threading.Event()
        t = threading.Thread(target=put_until, args=(d, "durable", acked, stop))
        t.start()
        wait_for(lambda: len(acked) >= 30, timeout=120, what="30 acknowledged puts")
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        stop.set()
        t.join()
        stored = stored_keys(pg, "durable")
        missing = [k for k in acked if k not in stored]
        check(not missing, "%d acknowledged keys lost, e.g. %r" % (len(missing), missing[:3]))
        with pg_daemon(tmp, pg) as d2:
            ready(d2, "durable")
            rc, out, _ = bcall(d2, "durable", "DATA", "get", {"key": acked[-1]})
            check(rc == 0 and json.loads(out) == len(acked) - 1, "after restart: %r" % out)


@test
def pg_restarted_under_load(tmp):
    """PostgreSQL crashes and restarts (pg_ctl restart -m immediate) while
    two gadgets put: meanwhile their calls fail saying the store is
    unavailable (and, for a put caught in its commit, that its outcome is
    unknown) or that the gadget lost its lease or waits for it (the lease
    session ends with the server: the gadgets are stopped until this node
    holds their leases again), never hang; gadgetd reconnects by itself,
    logging the loss and the reconnection once each; every acknowledged
    put is there."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        for g in ("one", "two"):
            policy(d.pol, g, "[Binding DATA]\nType=kv\n")
        ready(d, "one", "two")
        stop = threading.Event()
        acked = {"one": [], "two": []}
        errors = {"one": [], "two": []}
        threads = [threading.Thread(target=put_until, args=(d, g, acked[g], stop, "k", errors[g]))
                   for g in acked]
        for t in threads:
            t.start()
        wait_for(lambda: min(len(a) for a in acked.values()) >= 20, timeout=60, what="puts before the crash")
        pg.restart(mode="immediate")
        # Puts go on succeeding after the restart, without any help.
        n = {g: len(a) for g, a in acked.items()}
        wait_for(lambda: all(len(acked[g]) >= n[g] + 20 for g in acked), timeout=60,
                 what="puts acknowledged again after the restart")
        stop.set()
        for t in threads:
            t.join()
        log = d.logtext()
        check(log.count("store: lost the connection to PostgreSQL") == 1, "loss logged: %s" % log[-3000:])
        check(log.count("store: connected to PostgreSQL") == 2, "reconnection logged: %s" % log[-3000:])
        errs = errors["one"] + errors["two"]
        # The lease session ends with the server: the gadgets are killed at
        # once and start again once this node holds their leases again.
        # A put the gadget asked for under the lease it lost, sent once this
        # node holds the lease again (a new epoch): refused by the store.
        clear = ("store unavailable:", "lost its store lease", "lost its lease in the store",
                 "does not run on this node (waits for its lease",
                 "is not ready (starting)", "fenced: this node no longer owns gadget")
        unclear = [e for e in errs if not any(c in e for c in clear)]
        check(not unclear, "unclear errors: %r" % unclear[:5])
        check(d.logtext().count("lost its store lease") >= 2, "the gadgets were not stopped at the loss")
        print("errors during the restart: %d, e.g. %r" % (len(errs), sorted(set(errs))[:4]))
        for g in acked:
            stored = stored_keys(pg, g)
            missing = [k for k in acked[g] if k not in stored]
            check(not missing, "%s: %d acknowledged keys lost, e.g. %r" % (g, len(missing), missing[:3]))
        check(d.proc.poll() is None, "gadgetd ended")


@test
def pg_session_terminated(tmp):
    """An administrator ends gadgetd's kv session (pg_terminate_backend)
    while it is idle: gadgetd notices at once, logs it once, reconnects by
    itself, and the gadget's data is all there. Its lease session is
    another (lease_pg_test.py): the gadget runs on meanwhile."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "put")
        check(pg.terminate_backends(exact="gadgetd node1") == 1, "gadgetd's session not found by its application_name")
        wait_for(lambda: "store: lost the connection to PostgreSQL" in d.logtext(), what="the loss logged")
        wait_for(lambda: d.logtext().count("store: connected to PostgreSQL") == 2, what="the reconnection")
        rc, out, err = bcall(d, "store", "DATA", "get", {"key": "k"})
        check(rc == 0 and json.loads(out) == 1, "get after the reconnection: %r %r" % (out, err))
        check("terminating connection due to administrator command" in d.logtext(), "the reason: %s" %
              d.logtext()[-2000:])
        check("lost its store lease" not in d.logtext(), "the gadget was stopped")


@test
def pg_server_hangs(tmp):
    """The server stops answering (every PostgreSQL process stopped with
    SIGSTOP) during a put: gadgetd's loop goes on serving other gadgets at
    once; no renewal of the node's lease is acknowledged, so the gadgets
    are stopped within its 920 ms (a node that cannot reach the store may
    have lost its leases), the put's caller told so within about 3 s; once the
    server runs again gadgetd reconnects and starts them by itself."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        policy(d.pol, "other")
        ready(d, "store", "other")
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "put")
        pg.signal_all(signal.SIGSTOP)
        try:
            res = {}
            t = threading.Thread(target=lambda: res.update(r=bcall(d, "store", "DATA", "put",
                                                                  {"key": "k", "value": 2})))
            t0 = time.monotonic()
            t.start()
            # In flight, or already answered: its node's lease may run out
            # (920 ms) between two looks of a loaded host.
            wait_for(lambda: "r" in res or d.list()["store"]["in_flight"] == 1, timeout=10, what="the put in flight")
            # Each call to the other gadget answered at once: by it, or,
            # once the node's lease has run out (920 ms: a loaded host may
            # get there within these calls), refused for that lease.
            for _ in range(5):
                s0 = time.monotonic()
                r = d.ctl("call", "other", "echo", '"up"')
                check(r.stdout.strip() == '"up"' or (time.monotonic() - t0 > 0.9 and "lease" in r.stderr),
                      "another gadget stalled: %r %r" % (r.stdout, r.stderr))
                check(time.monotonic() - s0 < 1, "another gadget's call took %.1f s" % (time.monotonic() - s0))
            t.join(timeout=30)
            took = time.monotonic() - t0
            check("r" in res, "the put was not answered within %.0f s" % took)
            rc, _, err = res["r"]
            check(rc == 1 and "lost its store lease" in err and "no renewal of this node's lease was acknowledged"
                  in err,
                  "the put to a hung server: %d %r" % (rc, err))
            check(took < 4, "answered after %.1f s" % took)
            wait_for(lambda: d.state("other") == "remote", timeout=5, what="the other gadget stopped")
        finally:
            pg.signal_all(signal.SIGCONT)
        # The put may still commit once the server runs (before any other
        # node could take the lease): its caller was told it failed.
        ready(d, "store", "other")
        rc, out, err = bcall(d, "store", "DATA", "get", {"key": "k"})
        check(rc == 0 and json.loads(out) in (1, 2), "get after the reconnection: %r %r" % (out, err))


@test
def pg_down_fails_fast(tmp):
    """With PostgreSQL down, no gadget runs (this node cannot hold a
    lease): each says it waits for its lease, and calls to it fail at once
    saying so; once the server is up gadgetd connects and starts them by
    itself. The connection string's password never reaches gadgetd's
    log."""
    pg = PgServer(tmp)
    pg.start()
    pg.stop()
    pg.conninfo += " password=hunter2-secret"
    d = pg_daemon(tmp, pg)
    try:
        with d:
            policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
            policy(d.pol, "other")
            d.ctl("reload")
            wait_for(lambda: "store: cannot connect to PostgreSQL" in d.logtext(), what="the failure logged")
            time.sleep(3)
            for g in ("store", "other"):
                info = d.list()[g]
                check(info["state"] == "remote" and info["cause"] == "waits for its lease in the store",
                      "%s while the store is down: %r" % (g, info))
            t0 = time.monotonic()
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
            took = time.monotonic() - t0
            check(rc == 1 and "gadget store does not run on this node (waits for its lease in the store)" in err,
                  "a call while down: %d %r" % (rc, err))
            check(took < 1, "the call took %.1f s to fail" % took)
            pg.start()
            wait_for(lambda: connected(d), timeout=30, what="gadgetd to connect")
            ready(d, "store", "other")
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
            check(rc == 0, "put once the server is up: %r" % err)
            log = d.logtext()
            check(log.count("store: cannot connect to PostgreSQL") == 1, "the failure logged again and again")
            check("hunter2-secret" not in log and "password=***" in log, "the password: %s" % log[-2000:])
    finally:
        pg.stop()


@test
def pg_gadgetd_race_to_migrate(tmp):
    """Three gadgetd start at once on a fresh store: one creates the schema,
    the others wait for it (the advisory lock) instead of failing; all see
    the current version, each writes, and the schema holds one version row
    and every node."""
    with PgServer(tmp) as pg:
        ds = [pg_daemon(tmp, pg, x, "node-" + x) for x in "abc"]
        for d in ds:
            policy(d.pol, "g" + d.tmp[-1], "[Binding DATA]\nType=kv\n")
        starters = [threading.Thread(target=d.start) for d in ds]
        try:
            for t in starters:
                t.start()
            for t in starters:
                t.join()
            wait_for(lambda: all(connected(d) for d in ds), what="every gadgetd connected")
            logs = "".join(d.logtext() for d in ds)
            check("cannot connect" not in logs, "a gadgetd failed to set up the store: %s" % logs[-3000:])
            check(logs.count("schema version %d" % SCHEMA_VERSION) == 3, "versions: %s" % logs[-3000:])
            for v in range(1, SCHEMA_VERSION + 1):
                check(logs.count("migrated the PostgreSQL schema to version %d\n" % v) == 1, "migrations: %s"
                      % logs[-3000:])
            for i, d in enumerate(ds):
                g = "g" + d.tmp[-1]
                ready(d, g)
                check(bcall(d, g, "DATA", "put", {"key": "k", "value": i})[0] == 0, "%s put" % g)
        finally:
            for d in ds:
                d.__exit__(None, None, None)
        check(pg.psql("SELECT count(*) || ':' || max(version) FROM gadgetd_schema") == "1:%d" % SCHEMA_VERSION,
              "schema version row")
        check(pg.psql("SELECT string_agg(name, ',' ORDER BY name) FROM gadgetd_node") == "node-a,node-b,node-c",
              "nodes")
        check(pg.psql("SELECT string_agg(created_by, ',' ORDER BY created_by) FROM gadgetd_kv_ns")
              == "node-a,node-b,node-c", "namespaces' nodes")


@test
def pg_store_newer_schema(tmp):
    """A store a newer node migrated (its version above this gadgetd's, set
    by SQL after a first start): while its compatible is not above ours,
    the node connects without migrating it, says once beside which schema
    it runs, serves kv, takes leases, copies its audit and installs a
    release into the store; once compatible is above ours it is refused
    (kv, lease, audit, releases: no lease taken), the log naming both
    numbers and what to do."""
    from bundles import bundle_dir
    newer = SCHEMA_VERSION + 1
    with PgServer(tmp) as pg:
        d = pg_daemon(tmp, pg)
        r = d.ctl("keygen", "-o", os.path.join(tmp, "k.pem"))
        check(r.returncode == 0, "keygen: %r" % r.stderr)
        conf = "[Releases]\nTrustedKeys=%s\n" % r.stdout.split()[-1]

        def bundle(version):
            out = os.path.join(tmp, "rel-%s.bundle" % version)
            r = d.ctl("bundle", bundle_dir(tmp, version, "rel"), "--key", os.path.join(tmp, "k.pem"),
                      "-o", out)
            check(r.returncode == 0, "bundle: %r" % r.stderr)
            return out

        d = pg_daemon(tmp, pg, extra_conf=conf)
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        with d:
            ready(d, "store")
            check("lease session to PostgreSQL ended" not in d.logtext(), "the lease session on a new store: %s"
                  % d.logtext()[-3000:])
        check(pg.psql("SELECT version || ':' || compatible FROM gadgetd_schema") == "%d:12" % SCHEMA_VERSION,
              "a store this gadgetd migrated: %r" % pg.psql("SELECT * FROM gadgetd_schema"))
        pg.psql("UPDATE gadgetd_schema SET version = %d, compatible = %d" % (newer, SCHEMA_VERSION))
        pg.psql("DELETE FROM gadgetd_owner")
        audited = int(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE node = 'node1'"))
        with pg_daemon(tmp, pg, extra_conf=conf) as d:
            wait_for(lambda: connected(d), what="gadgetd to connect to the newer store")
            ready(d, "store")
            check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 7})[0] == 0, "put on the newer store")
            rc, out, err = bcall(d, "store", "DATA", "get", {"key": "k"})
            check(rc == 0 and json.loads(out) == 7, "get on the newer store: %d %r %r" % (rc, out, err))
            check(pg.psql("SELECT node FROM gadgetd_owner WHERE gadget = 'store' AND node_inc > 0") == "node1",
                  "the lease: %r" % pg.psql("SELECT * FROM gadgetd_owner"))
            wait_for(lambda: int(pg.psql("SELECT count(*) FROM gadgetd_audit WHERE node = 'node1'")) > audited,
                     what="the audit copy on the newer store")
            r = d.ctl("install", bundle("1.0"))
            check(r.returncode == 0, "install on the newer store: %r %r" % (r.stdout, r.stderr))
            check(pg.psql("SELECT string_agg(version, ',') FROM gadgetd_release") == "1.0", "the release stored")
            log = d.logtext()
            check(log.count("store: the PostgreSQL schema is version %d, newer than this gadgetd's (%d)"
                            % (newer, SCHEMA_VERSION)) == 1, "the newer schema said once: %s" % log[-3000:])
            check("cannot connect" not in log and "cannot copy" not in log and "lease session to PostgreSQL ended"
                  not in log,
                  "a connection refused the newer store: %s" % log[-3000:])
        check(pg.psql("SELECT version || ':' || compatible FROM gadgetd_schema") == "%d:%d" % (newer, SCHEMA_VERSION),
              "the newer store migrated: %r" % pg.psql("SELECT * FROM gadgetd_schema"))
        pg.psql("UPDATE gadgetd_schema SET compatible = %d" % newer)
        pg.psql("DELETE FROM gadgetd_owner")
        with pg_daemon(tmp, pg, extra_conf=conf) as d:
            want = ("the store's schema is version %d, which only nodes of schema %d or later may use; this "
                    "gadgetd's is %d: upgrade it to one of schema %d or later" % (newer, newer, SCHEMA_VERSION, newer))
            wait_for(lambda: "): %s; retrying" % want in d.logtext(), what="the refusal logged")
            wait_for(lambda: "audit: cannot copy records to the store (%s): %s" % (pg.conninfo, want) in d.logtext(),
                     what="the audit copy's refusal logged")
            wait_for(lambda: "store: the lease session to PostgreSQL ended: %s; reconnecting" % want in d.logtext(),
                     what="the lease session's refusal logged")
            check(not connected(d), "connected to a store it may not use")
            check(pg.psql("SELECT count(*) FROM gadgetd_owner") == "0",
                  "a lease taken: %r" % pg.psql("SELECT * FROM gadgetd_owner"))
            check(d.logtext().count("lease session to PostgreSQL ended") == 1, "the refusal logged again and again")
            r = d.ctl("install", bundle("2.0"))
            check(r.returncode != 0 and "this node may not use the cluster's store: %s" % want in r.stderr,
                  "install on a store past this node: %r %r" % (r.stdout, r.stderr))
        check(pg.psql("SELECT string_agg(version, ',') FROM gadgetd_release") == "1.0", "2.0 stored")


@test
def pg_libpq_missing(tmp):
    """libpq cannot be loaded (an unloadable libpq.so.5 first on gadgetd's
    library path): a gadgetd on SQLite starts and serves kv as ever (it
    never loads libpq); one with Store=postgresql refuses to start, saying
    why."""
    libdir = os.path.join(tmp, "lib")
    os.makedirs(libdir)
    open(os.path.join(libdir, "libpq.so.5"), "w").close()
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    with Daemon(os.path.join(tmp), env=env) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "kv on SQLite without libpq")
    conf = os.path.join(tmp, "pg.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nStore=postgresql\nStoreConnection=host=/nonexistent\nNode=n\n")
    from harness import GADGETD
    r = subprocess.run([GADGETD, "--config", conf, "--policy-dir", os.path.join(tmp, "policy.d"), "--state-dir",
                        os.path.join(tmp, "state"), "--socket", os.path.join(tmp, "run", "control.sock"),
                        "--run-dir", os.path.join(tmp, "run")], capture_output=True, text=True, timeout=30, env=env)
    check(r.returncode != 0 and "store: PostgreSQL: cannot load libpq.so.5" in r.stderr,
          "Store=postgresql without libpq: %d %r" % (r.returncode, r.stderr[-1000:]))


@test
def pg_store_config_errors(tmp):
    """Store=postgresql without StoreConnection=, a bad Store=, Node=,
    NodeForget= (under the 10 s after which a node counts as down) or
    LeaseTTL= (outside 1 s to 10 min) or LeasePoll= (under 50 ms):
    gadgetd refuses to start, naming the problem (never the connection
    string)."""
    from harness import GADGETD
    cases = (("Store=postgresql\n", "Store=postgresql needs StoreConnection="),
             ("Store=mysql\n", "is not sqlite or postgresql"),
             ("StoreConnection=host=/x password=s3cr3t\n", "StoreConnection= needs Store=postgresql"),
             ("Store=postgresql\nStoreConnection=host=/x\nNode=Bad.Name\n", "Node=\"Bad.Name\" is not a name"),
             ("[Audit]\nStoreKeepDays=0\n", '[Audit] StoreKeepDays="0": want a number of days from 1 to 36500'),
             ("NodeForget=5s\n", 'NodeForget="5s" is not a time of at least 10s'),
             ("NodeForget=soon\n", 'NodeForget="soon" is not a time'),
             ("LeaseTTL=500ms\n", 'LeaseTTL="500ms" is not a time from 1s to 10min'),
             ("LeaseTTL=1h\n", 'LeaseTTL="1h" is not a time from 1s to 10min'),
             ("LeasePoll=10ms\n", 'LeasePoll="10ms" is not a time from 50ms to 150s'))
    for i, (body, want) in enumerate(cases):
        conf = os.path.join(tmp, "c%d.conf" % i)
        with open(conf, "w") as f:
            f.write("[Daemon]\n" + body)
        r = subprocess.run([GADGETD, "--config", conf, "--help"], capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and want in r.stderr, "%r: %d %r" % (body, r.returncode, r.stderr))
        check("s3cr3t" not in r.stderr, "the connection string was printed")
    # A string libpq cannot parse: gadgetd does not start, saying so.
    for conninfo, want in (("host=/x nosuchoption=1", 'invalid connection option "nosuchoption"'),
                           ("host=/x password=s3cr3t bogus", "not a libpq connection string")):
        conf = os.path.join(tmp, "bad.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\nStore=postgresql\nNode=n\nStoreConnection=%s\n" % conninfo)
        os.makedirs(os.path.join(tmp, "policy.d"), exist_ok=True)
        r = subprocess.run([GADGETD, "--config", conf, "--policy-dir", os.path.join(tmp, "policy.d"), "--state-dir",
                            os.path.join(tmp, "state"), "--socket", os.path.join(tmp, "run", "control.sock"),
                            "--run-dir", os.path.join(tmp, "run")],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and want in r.stderr, "%r: %d %r" % (conninfo, r.returncode, r.stderr[-1000:]))
        check("s3cr3t" not in r.stderr, "the password was printed: %r" % r.stderr)


@test
def pg_rows_read_as_hostile(tmp):
    """What another node of the shared store (which holds its credentials)
    writes there is read back as hostile, each at its one door: a kv value
    or an alarm's payload larger than any node writes never leaves the
    server (libpq holds a whole result), and the operation that reads it
    fails saying so; a node whose name no node can have is not listed (it
    made gadgetctl refuse the whole list of nodes), a peer address with
    control bytes is not kept, an owner of such a name is none known; a
    release row's texts are printable in the log; an audit row as long as a slice of audit.log
    is not gadgetd's (as in the file); a backup refuses a value too large
    for the format before it is read. gadgetd answers throughout and the
    gadget's other keys and alarms go on."""
    with PgServer(tmp) as pg, pg_daemon(tmp, pg) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n[Binding WAKE]\nType=alarm\nMethod=alarm\n")
        ready(d, "store")
        far = int(time.time() * 1000) + 3600 * 1000
        for k in ("big", "fine"):
            check(bcall(d, "store", "DATA", "put", {"key": k, "value": 1})[0] == 0, "put " + k)
        for i in ("a", "b"):
            check(bcall(d, "store", "WAKE", "set", {"id": i, "at": far})[0] == 0, "alarm " + i)
        big = "convert_to(repeat('x', 3000000), 'UTF8')"
        pg.psql("UPDATE gadgetd_kv SET value = %s WHERE key = 'big';"
                "UPDATE gadgetd_alarm SET payload = %s WHERE id = 'b';"
                "INSERT INTO gadgetd_node (name, peer, last_seen, incarnation, lease_until) VALUES"
                " (E'evil\\x1b[2J', '', now(), 3, now() + interval '1 hour'),"
                " ('peerbad', E'10.0.0.1:1\\x1b[31m', now(), 0, now());"
                "INSERT INTO gadgetd_owner (gadget, node, epoch, node_inc) VALUES ('probe', E'evil\\x1b[2J', 5, 3);"
                "INSERT INTO gadgetd_release (gadget, version, bundle, signer, installed_ms, uid, node) VALUES"
                " ('probe', E'1\\x1b]0;x\\x07', '\\x00', 'k', 0, 0, E'evil\\x1b[2J');"
                "INSERT INTO gadgetd_audit (gadget, node, at, line) VALUES ('store', 'peerbad', now(),"
                " repeat('y', 70000))" % (big, big))
        for op, args in (("get", {"key": "big"}), ("cas", {"key": "big", "expect": 1, "value": 2})):
            rc, _, err = bcall(d, "store", "DATA", op, args)
            check(rc == 1 and "3000000 bytes, more than the 2097152" in err, "%s of big: %d %r" % (op, rc, err))
        rc, out, _ = bcall(d, "store", "DATA", "get", {"key": "fine"})
        check(rc == 0 and json.loads(out) == 1, "the other key: %d %r" % (rc, out))
        rc, _, err = bcall(d, "store", "WAKE", "list", {})
        check(rc == 1 and "unexpected result" in err, "list of the alarms: %d %r" % (rc, err))
        check(bcall(d, "store", "WAKE", "cancel", {"id": "b"})[0] == 0, "the hostile alarm cancelled")
        rc, out, err = bcall(d, "store", "WAKE", "list", {})
        check(rc == 0 and '"a"' in out, "the alarms after: %d %r %r" % (rc, out, err))
        seen = {}

        def listed():
            r = d.ctl("--json", "nodes")
            seen["r"] = (r.returncode, r.stdout, r.stderr)
            return r.returncode == 0 and "peerbad" in r.stdout
        wait_for(listed, timeout=10, what="gadgetctl nodes: %r" % (seen,))
        nodes = {n["name"]: n for n in json.loads(seen["r"][1])["nodes"]}
        check(sorted(nodes) == ["node1", "peerbad"] and not nodes["peerbad"].get("peer"), "the nodes: %r" % nodes)
        # A gadget whose lease the row of that name holds: its owner is none
        # known (that name in gadgetctl list made it refuse the whole list).
        policy(d.pol, "probe", "")
        d.ctl("reload")
        wait_for(lambda: d.state("probe") == "remote", what="probe remote")
        check(d.list()["probe"].get("node", "") == "", "probe's owner: %r" % d.list()["probe"])
        # A release row of such names: refused (not a bundle), logged printable.
        wait_for(lambda: 'refused version "1?]0;x?" of "probe" from the store (put there by node evil?[2J)'
                 in d.logtext(), timeout=10, what="the release row refused")
        check("\x1b" not in d.logtext() and "\x07" not in d.logtext(), "a control byte in the log")
        r = d.ctl("audit", "store")
        check(r.returncode == 0 and "store" in r.stdout and "yyyy" not in r.stdout,
              "gadgetctl audit: %d %r" % (r.returncode, r.stderr))
        r = d.ctl("backup", "store", os.path.join(tmp, "store.gbk"))
        check(r.returncode == 1 and "too long" in r.stderr, "backup: %d %r" % (r.returncode, r.stderr))
        check(d.proc.poll() is None, "gadgetd ended")


if __name__ == "__main__":
    sys.exit(main())
