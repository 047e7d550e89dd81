#!/usr/bin/env python3
"""Integration tests of gadgetctl backup and restore across the stores: a
backup taken on SQLite restores on PostgreSQL (Store=postgresql) and one
taken there restores on SQLite, the state the same; on PostgreSQL, the
state a deploy keeps with the version it leaves and rollback
--with-state's restore of it (fenced by the node's lease). Usage:
backup_pg_test.py TEST."""
import json
import os
import subprocess

from harness import GADGETCTL, Daemon, Healthy, check, main, policy, test, wait_for
from bundles import KV, bundle_dir
from backups import backup_file, check_instant, export, int_value, record, state_of
from pgnodes import node
from pgserver import PgServer

# An alarm's time far ahead (2100): not delivered during the test.
FAR = 4102444800000

POLICY = ("Start=on-demand\n[Binding LOG]\nType=kv\n"
          "[Binding ALARMS]\nType=alarm\nMethod=alarm\n")


@test
def backup_across_stores(tmp):
    with PgServer(tmp) as pg, Daemon(os.path.join(tmp, "sqlite")) as lite, node(tmp, pg, "node1") as d:
        policy(lite.pol, "store", POLICY)
        policy(d.pol, "store", POLICY)
        lite.ctl("reload")
        r = lite.ctl("call", "store", "writes", json.dumps({"kv": "LOG", "alarms": "ALARMS", "ms": 300}))
        check(r.returncode == 0, "writes: %r" % r.stderr)
        one = os.path.join(tmp, "sqlite.gbk")
        check(lite.ctl("backup", "store", one).returncode == 0, "backup on SQLite")
        want = state_of(export(lite, "store"))
        check(check_instant(export(lite, "store"), "SQLite") == int(r.stdout), "SQLite's state")
        # The PostgreSQL node holds the idle gadget's lease (Start=on-demand).
        d.ctl("reload")
        wait_for(lambda: d.state("store") == "idle", what="store idle on PostgreSQL")
        r = d.ctl("restore", "store", one)
        check(r.returncode == 0 and "restored store" in r.stdout, "restore on PostgreSQL: %r %r" % (r.stdout, r.stderr))
        check(state_of(export(d, "store")) == want, "PostgreSQL's state is not the backup's")
        check(pg.psql("SELECT keys FROM gadgetd_kv_ns WHERE gadget = 'store' AND binding = 'LOG'")
              == str(len(want["kv"])), "the namespace's usage after the restore")
        two = os.path.join(tmp, "pg.gbk")
        r = d.ctl("backup", "store", two)
        check(r.returncode == 0, "backup on PostgreSQL: %r" % r.stderr)
        # More keys than one statement of the restore sends (its batches).
        many = os.path.join(tmp, "many.gbk")
        with open(many, "wb") as f:
            f.write(backup_file("store", [record("K", "LOG", "m/%04d" % i, int_value(i % 60)) for i in range(450)]
                                + [record("A", "ALARMS", "x", int_value(1), FAR, FAR + 1, 3)], 450, 1))
        r = d.ctl("restore", "store", many)
        check(r.returncode == 0 and "450 keys, 1 alarms" in r.stdout, "restore of 450 keys: %r %r" % (r.stdout, r.stderr))
        e = export(d, "store")
        check([k["key"] for k in e["kv"]] == ["m/%04d" % i for i in range(450)] and
              [k["value"] for k in e["kv"]] == [i % 60 for i in range(450)] and
              e["alarms"] == [{"binding": "ALARMS", "id": "x", "at_ms": FAR, "due_ms": FAR + 1, "attempts": 3, "payload": 1}],
              "450 keys and an alarm restored: %r" % e["alarms"])
        # Stopped here, the gadget's lease is given back: a restore holds
        # its owner row while no node holds a live lease, and is refused
        # while one does (the store's row made to say node1's live lease).
        check(d.ctl("stop", "store").returncode == 0, "stop on PostgreSQL")
        wait_for(lambda: d.state("store") == "stopped", what="store stopped on PostgreSQL")
        r = d.ctl("restore", "store", two)
        check(r.returncode == 0, "restore of a stopped gadget on PostgreSQL: %r" % r.stderr)
        pg.psql("UPDATE gadgetd_owner SET node = 'node1', node_inc = (SELECT incarnation FROM gadgetd_node"
                " WHERE name = 'node1') WHERE gadget = 'store'")
        r = d.ctl("restore", "store", many)
        check(r.returncode == 1 and "node node1 runs store (it holds its lease)" in r.stderr,
              "a restore while a node holds the lease: %r" % r.stderr)
        pg.psql("UPDATE gadgetd_owner SET node_inc = 0 WHERE gadget = 'store'")
        check(state_of(export(d, "store")) == want, "the refused restore changed the state")
        check(lite.ctl("stop", "store").returncode == 0, "stop")
        wait_for(lambda: lite.state("store") in ("stopped", "idle"), what="store stopped on SQLite")
        check(lite.ctl("restore", "store", os.path.join(tmp, "empty.gbk")).returncode == 1, "a missing file")
        r = lite.ctl("restore", "store", two)
        check(r.returncode == 0, "restore on SQLite of PostgreSQL's backup: %r" % r.stderr)
        check(state_of(export(lite, "store")) == want, "the state back on SQLite differs")


@test
def deploy_with_state_on_postgresql(tmp):
    """A deploy keeps the state of the version it leaves, read from the
    store; rollback --with-state restores it into the store under the
    node's lease, a steady caller waiting through it."""
    key = os.path.join(tmp, "key.pem")
    r = subprocess.run([GADGETCTL, "keygen", "-o", key], capture_output=True, text=True)
    check(r.returncode == 0, "keygen: %r" % r.stderr)
    with PgServer(tmp) as pg:
        nd = node(tmp, pg, "node1")
        with open(os.path.join(tmp, "node1", "gadgetd.conf"), "a") as f:
            f.write("[Releases]\nTrustedKeys=%s\n" % r.stdout.split()[-1])
        with nd as d:
            def fop(op, value=0):
                r = d.ctl("call", "rel", "fop", json.dumps({"op": op, "key": "count", "id": "t", "value": value}))
                check(r.returncode == 0, "fop %s: %r" % (op, r.stderr))
                return json.loads(r.stdout)["v"]

            # Refused "try again" until the node read the store's releases.
            wait_for(lambda: "the releases in the store are read" in d.logtext(), what="node1 read the store")
            for v in ("1.0", "2.0"):
                out = os.path.join(tmp, "rel-%s.bundle" % v)
                r = d.ctl("bundle", bundle_dir(tmp, v, keys=KV), "--key", key, "-o", out)
                check(r.returncode == 0, "bundle: %r" % r.stderr)
                r = d.ctl("install", out)
                check(r.returncode == 0, "install %s: %r" % (v, r.stderr))
            check(d.ctl("rollback", "rel").returncode == 0, "rollback to 1.0")
            wait_for(lambda: d.state("rel") == "ready", what="rel ready on PostgreSQL")
            for _ in range(3):
                fop("incr")
            with Healthy(d, "rel"):
                r = d.ctl("deploy", "rel", "2.0")
                check(r.returncode == 0 and "kept the state of 1.0 (1 keys, 0 alarms)" in r.stdout,
                      "deploy 2.0: %r %r" % (r.stdout, r.stderr))
                fop("write", 1000)
                r = d.ctl("rollback", "rel", "--with-state")
                check(r.returncode == 0 and "restored the state kept with 1.0" in r.stdout,
                      "rollback --with-state: %r %r" % (r.stdout, r.stderr))
                check(fop("read") == 3, "1.0's state in the store")
            check(pg.psql("SELECT keys FROM gadgetd_kv_ns WHERE gadget = 'rel' AND binding = 'KV'") == "1",
                  "the namespace's usage after the restore")


if __name__ == "__main__":
    raise SystemExit(main())
