#!/usr/bin/env python3
"""Integration tests of gadgetctl backup, restore and export on the SQLite
store: a real gadgetd and the test gadget writing while backups are taken.
The PostgreSQL half is backup_pg_test.py. Usage: backup_test.py TEST."""
import hashlib
import json
import os
import sqlite3
import threading

from harness import Daemon, check, main, policy, test, wait_for
from backups import PAD_KEYS, backup_file, check_instant, export, int_value, read_file, record
from kvchecks import ready

POLICY = ("[Binding LOG]\nType=kv\nMaxKeys=100000\n"
          "[Binding PAD]\nType=kv\nMaxKeys=100000\n"
          "[Binding SMALL]\nType=kv\nMaxKeys=2\n"
          "[Binding ALARMS]\nType=alarm\nMethod=alarm\nMaxAlarms=100000\n")


def pad(tmp, name):
    """The gadget's database made before gadgetd starts, its binding PAD
    holding PAD_KEYS keys (kvdb_kv.c's and kvdb_alarm.c's tables): read
    between the log and the alarms, they make a backup long enough that
    one not read in one transaction sees writes land in between."""
    kv = os.path.join(tmp, "state", "kv")
    os.makedirs(kv, mode=0o700)
    db = sqlite3.connect(os.path.join(kv, name + ".sqlite"))
    db.executescript(
        "PRAGMA journal_mode=WAL;"
        "CREATE TABLE kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
        "CREATE TABLE usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL, bytes INTEGER NOT NULL);")
    rows = [("PAD", b"pad/%06d" % i, int_value(1)) for i in range(PAD_KEYS)]
    db.executemany("INSERT INTO kv VALUES (?, ?, ?)", rows)
    db.execute("INSERT INTO usage VALUES ('PAD', ?, ?)", (PAD_KEYS, sum(len(r[1]) + len(r[2]) for r in rows)))
    db.commit()
    db.close()


def logged(d, name):
    """How many kv rows the gadget's SQLite database holds now."""
    path = os.path.join(d.tmp, "state", "kv", name + ".sqlite")
    if not os.path.exists(path):
        return 0
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=5)
    try:
        return db.execute("SELECT count(*) FROM kv").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def stored(d, name):
    """A digest of the gadget's kv rows and alarms as its database holds them."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.tmp, "state", "kv", name + ".sqlite"), uri=True)
    try:
        h = hashlib.sha256()
        for row in db.execute("SELECT binding, key, value FROM kv ORDER BY binding, key"):
            h.update(repr(row).encode())
        for row in db.execute("SELECT * FROM alarm ORDER BY binding, id"):
            h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        db.close()


def restore_refused(d, name, data, why, tmp, before):
    path = os.path.join(tmp, "hostile-%d.gbk" % abs(hash(why)))
    with open(path, "wb") as f:
        f.write(data)
    r = d.ctl("restore", name, path)
    check(r.returncode == 1 and why in r.stderr, "restore of a bad file (%s): %r %r" % (why, r.returncode, r.stderr))
    check(stored(d, name) == before, "a refused restore (%s) changed the state" % why)


@test
def backup_during_writes(tmp):
    """Backups taken while the gadget writes each restore to a state that
    was real at one instant; restore is refused while the gadget runs;
    damaged, truncated and hostile files are refused with the reason and
    change nothing; export prints the state as JSON."""
    pad(tmp, "store")
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        policy(d.pol, "store", POLICY)
        policy(d.pol, "empty", "[Binding LOG]\nType=kv\n")
        ready(d, "store", "empty")
        # A gadget that never stored anything: an empty backup, no database made.
        e = export(d, "empty")
        check(e["kv"] == [] and e["alarms"] == [] and e["keys"] == 0 and
              not os.path.exists(os.path.join(d.tmp, "state", "kv", "empty.sqlite")), "an empty store: %r" % e)
        done = {}

        def write():
            r = d.ctl("call", "store", "writes", json.dumps({"kv": "LOG", "alarms": "ALARMS", "ms": 2000}))
            done["r"] = r
        t = threading.Thread(target=write)
        t.start()
        files = []
        for i in range(3):
            # The gadget serves one call at a time: its progress is read
            # from its database, not asked of it.
            at = logged(d, "store")
            wait_for(lambda: logged(d, "store") > at + 20, what="writes before backup %d" % i)
            path = os.path.join(tmp, "b%d.gbk" % i)
            r = d.ctl("backup", "store", path)
            check(r.returncode == 0 and "sha256" in r.stdout, "backup %d: %r %r" % (i, r.stdout, r.stderr))
            check(oct(os.stat(path).st_mode & 0o777) == "0o600" and not os.path.exists(path + ".partial"),
                  "backup file mode, or a partial file left")
            files.append(path)
        # A member of the control group is not root: a backup reads all of
        # the gadget's data.
        shared = os.path.join(tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        r = d.ctl("backup", "store", os.path.join(shared, "m.gbk"), user=(65534, 65534))
        check(r.returncode == 4 and "backup is root's only" in r.stderr and not os.listdir(shared),
              "a member's backup: %r" % r)
        r = d.ctl("backup", "store", files[0])
        check(r.returncode == 1 and "exists" in r.stderr, "a backup over an existing file: %r" % r.stderr)
        r = d.ctl("restore", "store", files[0])
        check(r.returncode == 1 and "restore only a stopped or idle gadget" in r.stderr,
              "restore while running: %r %r" % (r.returncode, r.stderr))
        t.join(timeout=60)
        check(done["r"].returncode == 0, "writes: %r" % done["r"].stderr)
        written = int(done["r"].stdout)
        check(d.ctl("stop", "store").returncode == 0, "stop")
        wait_for(lambda: d.state("store") == "stopped", what="store stopped")
        check(check_instant(export(d, "store"), "the final state") == written, "the final state is not every write")
        # Each backup holds a state that was real at one instant, the later
        # ones later states; the last, restored, is the gadget's state again.
        seen = [check_instant(read_file(path), path) for path in files]
        print("writes", written, "backups", seen)
        check(seen == sorted(seen) and seen[0] >= 1 and seen[-1] <= written, "backups out of time: %r" % seen)
        r = d.ctl("restore", "store", files[-1])
        check(r.returncode == 0 and "restored store" in r.stdout, "restore: %r %r" % (r.stdout, r.stderr))
        check(check_instant(export(d, "store"), "restored") == seen[-1], "the restored state is not the backup's")
        before = stored(d, "store")
        v = int_value(1)
        good = backup_file("store", [record("K", "LOG", "a", v), record("K", "LOG", "b", v)], 2, 0)
        restore_refused(d, "store", good[:-1] + bytes([good[-1] ^ 1]), "checksum does not match", tmp, before)
        restore_refused(d, "store", good[:len(good) - 40], "ends early", tmp, before)
        restore_refused(d, "store", b"not a backup", "not a gadgetd backup", tmp, before)
        restore_refused(d, "store", backup_file("store", [record("K", "OTHER", "k", v)], 1, 0),
                        "which store's policy does not declare", tmp, before)
        restore_refused(d, "store", backup_file("store", [record("K", "LOG", "b", v), record("K", "LOG", "a", v)],
                                                2, 0), "out of order or repeated", tmp, before)
        restore_refused(d, "store", backup_file("store", [record("K", "LOG", "a", v)], 5, 0),
                        "its end counts", tmp, before)
        restore_refused(d, "store", backup_file("store", [record("K", "LOG", "a", b"\x0a\xff")], 1, 0),
                        "not a valid value", tmp, before)
        restore_refused(d, "store", backup_file("store", [record("K", "SMALL", k, v) for k in "abc"], 3, 0),
                        "binding SMALL: more than its MaxKeys= (2)", tmp, before)


if __name__ == "__main__":
    raise SystemExit(main())
