#!/usr/bin/env python3
"""Integration tests of the bindings: real gadgets call kv, gadget, http,
text and secret bindings through a real gadgetd. Usage: bindings_test.py TEST."""
import http.server
import json
import os
import re
import signal
import socketserver
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time

from harness import (EXAMPLES, GADGETCTL, GADGETD, Daemon, check, main, need, policy, test,
                     wait_for)
from kvchecks import (bcall, counter_thousand_concurrent_checks, kv_batch_quota_checks, kv_cas_batch_checks,
                      kv_limits_checks, kv_namespaces_checks, kv_operations_checks, ready)
from protobytes import varint


# --- kv ---------------------------------------------------------------------

@test
def kv_operations(tmp):
    with Daemon(tmp) as d:
        kv_operations_checks(d)
        db = os.path.join(tmp, "state", "kv", "store.sqlite")
        check(os.stat(db).st_mode & 0o777 == 0o600, "database mode %o" % (os.stat(db).st_mode & 0o777))


@test
def binding_answer_wakes_gadget_once(tmp):
    """A gadget waiting for a binding's answer sleeps once per call, until
    the answer: gadgetd reading its request does not wake it for nothing
    (a task blocked in read on a Unix socket is woken by every read at the
    other end; libgadget waits in poll). 400 kv gets one after the other:
    at most 1.4 sleeps each (2 each with the read)."""
    with Daemon(tmp) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "put")
        n = 400
        r = d.ctl("call", "store", "repeat", json.dumps({"binding": "DATA", "op": "get", "args": {"key": "k"},
                                                         "n": n}))
        check(r.returncode == 0, "repeat: %r" % r.stderr)
        switches = json.loads(r.stdout)["switches"]
        print("%d binding calls: the gadget slept %d times" % (n, switches))
        check(switches <= 1.4 * n, "%d binding calls: the gadget slept %d times" % (n, switches))


@test
def kv_namespaces_per_binding(tmp):
    with Daemon(tmp) as d:
        kv_namespaces_checks(d)


@test
def kv_cas_and_batch(tmp):
    with Daemon(tmp) as d:
        kv_cas_batch_checks(d)
        kv_batch_quota_checks(d)
        details = audit_details(d, "cas")
        check("not applied: ops[3]'s cas did not match" in details and
              "not written: the stored value differs" in details, "audit details: %r" % details)
        db = sqlite3.connect(os.path.join(tmp, "state", "kv", "small.sqlite"))
        usage = db.execute("SELECT u.keys = count(*), u.bytes = sum(length(k.key) + length(k.value)) FROM usage u"
                           " JOIN kv k ON k.binding = u.binding GROUP BY u.binding").fetchall()
        check(usage == [(1, 1)], "usage row and keys disagree: %r" % usage)


@test
def kv_limits_and_errors(tmp):
    with Daemon(tmp) as d:
        kv_limits_checks(d)


def deep_value(levels):
    """The packed bytes of a Value of `levels` lists, each the only item of
    the one around it: some 6 bytes a level, far within MaxValueSize=."""
    inner = b"\x08\x01"  # null_value
    parts, n = [], len(inner)
    for _ in range(levels):
        items = b"\x0a" + varint(n)  # List.items (1)
        n += len(items)
        value = b"\x3a" + varint(n)  # Value.list_value (7)
        n += len(value)
        parts.append(value + items)
    return b"".join(reversed(parts)) + inner


@test
def kv_stored_value_read_as_hostile(tmp):
    """A value read back from the store is bounded before it is decoded:
    what another node of a shared PostgreSQL (or a hand) wrote there may be
    a value of 60,000 nested lists (360 KB), which protobuf-c's recursive
    unpacker would follow off gadgetd's stack, or text that is not UTF-8.
    The get and the cas that read it fail saying so; gadgetd and the gadget's
    other keys go on."""
    d = Daemon(tmp)
    with d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        for k in ("deep", "text", "fine"):
            check(bcall(d, "store", "DATA", "put", {"key": k, "value": 1})[0] == 0, "put " + k)
        d.stop()
    db = sqlite3.connect(os.path.join(tmp, "state", "kv", "store.sqlite"))
    with db:
        for key, value in ((b"deep", deep_value(60000)), (b"text", b"\x2a\x02\xc3\x28")):  # string_value, not UTF-8
            check(db.execute("UPDATE kv SET value = ? WHERE key = ?", (value, key)).rowcount == 1, "the row")
    db.close()
    with Daemon(tmp) as d:
        ready(d, "store")
        for key, what in (("deep", "nested"), ("text", "UTF-8")):
            rc, _, err = bcall(d, "store", "DATA", "get", {"key": key})
            check(rc == 1 and "the stored value is not a valid value" in err and what in err,
                  "get of %s: %d %r" % (key, rc, err))
            rc, _, err = bcall(d, "store", "DATA", "cas", {"key": key, "expect": 1, "value": 2})
            check(rc == 1 and "the stored value is not a valid value" in err, "cas of %s: %d %r" % (key, rc, err))
        rc, out, _ = bcall(d, "store", "DATA", "get", {"key": "fine"})
        check(rc == 0 and json.loads(out) == 1, "the other key: %d %r" % (rc, out))
        check(d.proc.poll() is None, "gadgetd ended")


def audit_details(d, gadget):
    """The detail of each audit record of gadget's binding calls, oldest
    first (not those of its lifecycle or of the gadgetctl calls)."""
    out = d.ctl("--json", "audit", gadget).stdout
    return [r.get("detail") for r in map(json.loads, out.splitlines()) if r["binding"] not in ("lifecycle", "gadgetctl")]


@test
def kv_store_cannot_be_opened(tmp):
    """A state directory whose kv folder cannot be written: the gadget's kv
    calls fail saying so and why (no path of the host), the audit records
    it, other gadgets and gadgetd go on, and once the folder is writable
    again the same gadget's store opens."""
    kvdir = os.path.join(tmp, "state", "kv")
    os.makedirs(kvdir, mode=0o700)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m,mode=0700", "tmpfs", kvdir]).returncode != 0:
        need("root", "cannot mount a tmpfs")
    try:
        with Daemon(tmp) as d:
            policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
            policy(d.pol, "other")
            ready(d, "store", "other")
            for op, args in (("put", {"key": "k", "value": 1}), ("get", {"key": "k"})):
                rc, _, err = bcall(d, "store", "DATA", op, args)
                check(rc == 1 and "cannot open the gadget's store: Read-only file system" in err,
                      "%s on a read-only state directory: %d %r" % (op, rc, err))
                check(tmp not in err, "the host path reached the gadget: %r" % err)
            check(d.ctl("call", "other", "echo", '"up"').stdout.strip() == '"up"', "another gadget stalled")
            wait_for(lambda: len(audit_details(d, "store")) == 2, what="2 audit records")
            check(all("Read-only file system" in (x or "") for x in audit_details(d, "store")),
                  "audit: %r" % audit_details(d, "store"))
            subprocess.run(["umount", kvdir], check=True)
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
            check(rc == 0, "put once the directory is writable: %r" % err)
            check(d.proc.poll() is None, "gadgetd ended")
    finally:
        subprocess.run(["umount", kvdir], stderr=subprocess.DEVNULL)


@test
def kv_store_full_disk_at_open(tmp):
    """The disk is already full when the gadget's store is first opened
    (no room for the database's schema): the call fails as "storage full",
    not as a generic error, and the store opens once there is room. (A
    disk that fills later: load/kv.py, load_kv_full_disk_deletes.)"""
    kvdir = os.path.join(tmp, "state", "kv")
    os.makedirs(kvdir, mode=0o700)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", kvdir]).returncode != 0:
        need("root", "cannot mount a tmpfs")
    try:
        filler = os.path.join(kvdir, "filler")
        with open(filler, "wb", buffering=0) as f:
            for chunk in (1 << 16, 4096, 1):
                try:
                    while True:
                        f.write(b"x" * chunk)
                except OSError:
                    pass
        with Daemon(tmp) as d:
            policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
            ready(d, "store")
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
            check(rc == 1 and "storage full" in err, "put on a full disk: %d %r" % (rc, err))
            os.unlink(filler)
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
            check(rc == 0, "put once there is room: %r" % err)
    finally:
        subprocess.run(["umount", kvdir], stderr=subprocess.DEVNULL)


@test
def kv_store_corrupt(tmp):
    """A database file that is not SQLite, and one whose table pages were
    overwritten: kv calls fail with "the gadget's store is damaged", never
    "not found" or a crash, and gadgetd serves the others."""
    kvdir = os.path.join(tmp, "state", "kv")
    os.makedirs(kvdir, mode=0o700)
    with open(os.path.join(kvdir, "garbage.sqlite"), "wb") as f:
        f.write(b"this is not a database\n" * 400)
    # A real store with rows, then every page past the schema's overwritten.
    with Daemon(tmp) as d:
        policy(d.pol, "pages", "[Binding DATA]\nType=kv\n")
        ready(d, "pages")
        for i in range(50):
            check(bcall(d, "pages", "DATA", "put", {"key": "k%02d" % i, "value": "v" * 200})[0] == 0, "put")
    db = os.path.join(kvdir, "pages.sqlite")
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    with open(db, "r+b") as f:
        f.seek(4096)
        size = os.path.getsize(db)
        f.write(b"\xa5" * (size - 4096))
    with Daemon(tmp) as d:
        policy(d.pol, "garbage", "[Binding DATA]\nType=kv\n")
        policy(d.pol, "pages", "[Binding DATA]\nType=kv\n")
        policy(d.pol, "other", "[Binding DATA]\nType=kv\n")
        ready(d, "garbage", "pages", "other")
        for name in ("garbage", "pages"):
            for op, args in (("get", {"key": "k01"}), ("put", {"key": "k", "value": 1}),
                             ("list", {"prefix": ""})):
                rc, _, err = bcall(d, name, "DATA", op, args)
                check(rc == 1 and "the gadget's store is damaged" in err,
                      "%s on %s: %d %r" % (op, name, rc, err))
        check(bcall(d, "other", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "another gadget's store")
        check(any("damaged" in (x or "") for x in audit_details(d, "garbage")), "audit of the damage")
        check(d.proc.poll() is None, "gadgetd ended")


@test
def kv_store_locked(tmp):
    """Another process holds the database's write lock past SQLite's 5 s
    busy timeout: the put fails saying the store is locked, the gadget's
    reads still work (WAL), and once the lock is gone puts commit."""
    with Daemon(tmp) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "first put")
        lock = sqlite3.connect(os.path.join(tmp, "state", "kv", "store.sqlite"), isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            rc, _, err = bcall(d, "store", "DATA", "put", {"key": "k", "value": 2})
            check(rc == 1 and "the gadget's store is locked by another process" in err, "locked put: %d %r" % (rc, err))
            rc, out, err = bcall(d, "store", "DATA", "get", {"key": "k"})
            check(rc == 0 and out == "1", "get while locked: %d %r %r" % (rc, out, err))
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        check(bcall(d, "store", "DATA", "put", {"key": "k", "value": 3})[0] == 0, "put after the lock")
        check(any("locked" in (x or "") for x in audit_details(d, "store")), "audit of the lock")


@test
def undeclared_and_wrong_type_refused(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "limited", "[Binding DATA]\nType=kv\n[Binding NAME]\nType=text\nValue=x\n")
        ready(d, "limited")
        rc, _, err = bcall(d, "limited", "OTHER", "get", {"key": "k"})
        check(rc == 4 or (rc == 1 and "no binding named OTHER" in err), "undeclared: %d %r" % (rc, err))
        check("no binding named OTHER" in err, "undeclared: %r" % err)
        rc, _, err = bcall(d, "limited", "DATA", "call", {"method": "x"})
        check(rc != 0 and "is of type kv" in err, "kv with call: %r" % err)
        rc, _, err = bcall(d, "limited", "NAME", "put", {"key": "k", "value": 1})
        check(rc != 0 and "is of type text" in err, "text with put: %r" % err)
        audit = d.ctl("audit", "limited").stdout
        check('"outcome":"denied"' in audit and '"binding":"OTHER"' in audit, "audit: %r" % audit)


@test
def counter_thousand_concurrent(tmp):
    with Daemon(tmp) as d:
        counter_thousand_concurrent_checks(d)


@test
def acknowledged_puts_survive_sigkill(tmp):
    d = Daemon(tmp)
    policy(d.pol, "durable", "[Binding DATA]\nType=kv\n")
    d.start()
    ready(d, "durable")
    acked = []

    # Killed once enough puts were acknowledged (a count, not a time: in the
    # emulated Debian 12 guest 1.5 s held only 9), while more are on their way.
    def kill_after_some():
        wait_for(lambda: len(acked) >= 20, timeout=120, what="20 acknowledged puts")
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGKILL)
    killer = threading.Thread(target=kill_after_some)
    killer.start()
    for i in range(100000):
        rc, _, _ = bcall(d, "durable", "DATA", "put", {"key": "k%06d" % i, "value": i})
        if rc != 0:
            break
        acked.append("k%06d" % i)
    d.proc.wait()
    killer.join()
    check(len(acked) >= 20, "only %d puts before the kill" % len(acked))
    db = sqlite3.connect(os.path.join(tmp, "state", "kv", "durable.sqlite"))
    check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check failed")
    stored = {bytes(k).decode() for (k,) in db.execute("SELECT key FROM kv WHERE binding = 'DATA'")}
    db.close()
    missing = [k for k in acked if k not in stored]
    check(not missing, "%d acknowledged keys lost, e.g. %r" % (len(missing), missing[:3]))
    # A restarted gadgetd serves them.
    d2 = Daemon(tmp)
    with d2:
        ready(d2, "durable")
        rc, out, _ = bcall(d2, "durable", "DATA", "get", {"key": acked[-1]})
        check(rc == 0 and json.loads(out) == len(acked) - 1, "after restart: %r" % out)


SYNC = re.compile(r"^\d+ +(fsync|fdatasync)\(\d+<([^>]*)>")
RESUMED = re.compile(r"^\d+ +<\.\.\. (fsync|fdatasync) resumed>")
SOCK_WRITE = re.compile(r"^\d+ +(write|writev|sendmsg|sendto)\(\d+<UNIX-STREAM:\[(\d+)->(\d+)\]>")
WAL_WRITE = re.compile(r"^\d+ +(pwrite64|write)\(\d+<([^>]*-wal)>")


def sync_before_answer(trace, wal, gadget_inode):
    """From an strace -f -yy log of one put: whether the log was synced
    after its last write and before gadgetd's first write to the gadget's
    socket after it. Returns (ok, what happened)."""
    lines = trace.splitlines()
    pending = {}  # pid: the file of an unfinished sync
    last_wal = synced_at = None
    for i, line in enumerate(lines):
        m = WAL_WRITE.match(line)
        if m and m.group(2) == wal:
            last_wal, synced_at = i, None
            continue
        m = SYNC.match(line)
        if m and m.group(2) in (wal, wal[:-len("-wal")]):
            if "<unfinished" in line:
                pending[line.split()[0]] = m.group(2)
            elif last_wal is not None and line.rstrip().endswith("= 0"):
                synced_at = i
            continue
        m = RESUMED.match(line)
        if m and pending.pop(line.split()[0], None) and last_wal is not None and line.rstrip().endswith("= 0"):
            synced_at = i
            continue
        m = SOCK_WRITE.match(line)
        if m and last_wal is not None and m.group(3) == gadget_inode:
            return synced_at is not None, "answer at line %d, last log write at %d, sync at %s" % (
                i, last_wal, synced_at)
    return False, "no log write followed by an answer to the gadget (log writes: %s)" % (last_wal,)


def gadget_socket_inode(pid):
    """The inode of the gadget's end of its socket: fd 3 of the program,
    a descendant of the sandbox's process pid."""
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            link = os.readlink("/proc/%d/fd/3" % p)
            m = re.fullmatch(r"socket:\[(\d+)\]", link)
            if m and p != pid:
                return m.group(1)
        except OSError:
            pass
        for t in os.listdir("/proc/%d/task" % p):
            todo += [int(c) for c in open("/proc/%d/task/%s/children" % (p, t)).read().split()]
    check(False, "no process below %d holds a socket on fd 3" % pid)


@test
def put_answered_after_sync(tmp):
    # SIGKILL of gadgetd cannot lose what the kernel already holds, so this
    # watches the system calls instead: the WAL written, then synced, then
    # the answer written to the gadget's socket, in that order.
    with Daemon(tmp) as d:
        policy(d.pol, "durable", "[Binding DATA]\nType=kv\n")
        ready(d, "durable")
        rc, _, err = bcall(d, "durable", "DATA", "put", {"key": "warm", "value": 0})
        check(rc == 0, "first put: %s" % err)
        gpid = d.list()["durable"]["pid"]
        gadget_inode = gadget_socket_inode(gpid)
        wal = os.path.realpath(os.path.join(tmp, "state", "kv", "durable.sqlite")) + "-wal"
        out = os.path.join(tmp, "strace.log")
        errf = open(os.path.join(tmp, "strace.err"), "w+")
        st = subprocess.Popen(["strace", "-f", "-qq", "-yy", "-o", out, "-e",
                               "trace=fsync,fdatasync,pwrite64,write,writev,sendmsg,sendto", "-p",
                               str(d.proc.pid)], stderr=errf)
        try:
            wait_for(lambda: st.poll() is not None or traced_all(d.proc.pid, st.pid),
                     what="strace attached to every thread of gadgetd")
            check(st.poll() is None, "strace ended: %r" % open(errf.name).read())
            rc, _, err = bcall(d, "durable", "DATA", "put", {"key": "traced", "value": 1})
            check(rc == 0, "traced put: %s" % err)
            time.sleep(0.5)
        finally:
            st.send_signal(signal.SIGINT)  # detaches; gadgetd goes on
            st.wait(timeout=30)
        trace = open(out).read()
        ok, what = sync_before_answer(trace, wal, gadget_inode)
        check(ok, "the put was answered before its commit was synced: %s\n%s" % (what, trace[-4000:]))


def traced_all(pid, tracer):
    """Whether every thread of pid has tracer as its TracerPid."""
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                if ("TracerPid:\t%d\n" % tracer) not in f.read():
                    return False
    except FileNotFoundError:
        return False
    return True


# --- gadget -----------------------------------------------------------------

@test
def gadget_binding_calls(tmp):
    with Daemon(tmp) as d:
        os.symlink(os.path.join(EXAMPLES, "counter.policy"), os.path.join(d.pol, "counter.policy"))
        os.symlink(os.path.join(EXAMPLES, "relay.policy"), os.path.join(d.pol, "relay.policy"))
        ready(d, "counter", "relay")
        check(d.ctl("call", "relay", "bump").stdout.strip() == "1", "relay bump")
        check(d.ctl("call", "counter", "get").stdout.strip() == "1", "counter saw it")
        policy(d.pol, "caller", "[Binding C]\nType=gadget\nTarget=counter\nMethods=get\n"
                                "[Binding GONE]\nType=gadget\nTarget=absent\n")
        ready(d, "caller")
        rc, out, _ = bcall(d, "caller", "C", "call", {"method": "get"})
        check(rc == 0 and out == "1", "allowed method: %r" % out)
        rc, _, err = bcall(d, "caller", "C", "call", {"method": "increment"})
        check(rc != 0 and "does not allow method increment" in err, "allowlist: %r" % err)
        rc, _, err = bcall(d, "caller", "GONE", "call", {"method": "x"})
        check(rc != 0 and "unavailable" in err, "absent target: %r" % err)
        d.ctl("stop", "counter")
        wait_for(lambda: d.state("counter") == "stopped", what="counter stopped")
        rc, _, err = bcall(d, "caller", "C", "call", {"method": "get"})
        check(rc != 0 and "unavailable" in err, "stopped target: %r" % err)


@test
def gadget_cycle_refused(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "ping", "[Binding PEER]\nType=gadget\nTarget=pong\n")
        policy(d.pol, "pong", "[Binding PEER]\nType=gadget\nTarget=ping\n")
        ready(d, "ping", "pong")
        inner = {"binding": "PEER", "op": "call", "args": {"method": "echo", "args": "x"}}
        start = time.time()
        rc, _, err = bcall(d, "ping", "PEER", "call", {"method": "binding", "args": inner})
        check(rc != 0 and "cycle" in err, "cycle: %d %r" % (rc, err))
        check(time.time() - start < 5, "the cycle was not refused at once")
        rc, out, _ = bcall(d, "ping", "PEER", "call", {"method": "echo", "args": "fine"})
        check(rc == 0 and out == '"fine"', "a plain call after the cycle: %r" % out)


def through(binding, inner):
    """The args of the test gadget's binding method: call inner (method, args) through binding."""
    return {"binding": binding, "op": "call", "args": {"method": inner[0], "args": inner[1]}}


@test
def gadget_chain_depth_counts_the_chain_not_the_load(tmp):
    with Daemon(tmp) as d:
        # Fan-in: 10 callers at once into hub, each call going on to leaf,
        # which is slow, so they all wait at hub together: 3 gadgets deep.
        callers = ["c%d" % i for i in range(10)]
        for c in callers:
            policy(d.pol, c, "[Binding HUB]\nType=gadget\nTarget=hub\n")
        policy(d.pol, "hub", "[Binding LEAF]\nType=gadget\nTarget=leaf\n")
        policy(d.pol, "leaf")
        # A real chain: g1 -> g2 -> ... -> g9.
        for i in range(1, 10):
            policy(d.pol, "g%d" % i, "[Binding NEXT]\nType=gadget\nTarget=g%d\n" % (i + 1) if i < 9 else "")
        ready(d, "hub", "leaf", *callers, *["g%d" % i for i in range(1, 10)])
        at_hub = ("binding", through("LEAF", ("sleep", {"ms": 300})))
        procs = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", c, "binding",
                                   json.dumps(through("HUB", at_hub))],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in callers]
        for c, p in zip(callers, procs):
            out, err = p.communicate(timeout=120)
            check(p.returncode == 0 and out.strip() == '"slept"', "fan-in call from %s: %r %r" % (c, out, err))

        def chain(n):
            """gadgetctl -> g1 -> ... -> gn, gn echoes."""
            inner = ("echo", "deep")
            for i in range(n - 1, 0, -1):
                inner = ("binding", through("NEXT", inner))
            return d.ctl("call", "g1", inner[0], json.dumps(inner[1]))
        r = chain(8)
        check(r.returncode == 0 and r.stdout.strip() == '"deep"', "8 gadgets deep: %r %r" % (r.stdout, r.stderr))
        r = chain(9)
        check(r.returncode != 0 and "more than 8 gadgets deep" in r.stderr, "9 deep: %r %r" % (r.stdout, r.stderr))


# --- http -------------------------------------------------------------------

class Server:
    """A local HTTP server that counts connections and echoes requests;
    with tls=(cert, key), an HTTPS one."""

    def __init__(self, tls=None):
        outer = self
        self.connections = 0
        self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self):
                outer.connections += 1
                super().setup()

            def log_message(self, *a):
                pass

            def reply(self):
                outer.seen.append((self.command, self.path, dict(self.headers)))
                if self.path.startswith("/api/slow"):
                    time.sleep(3)
                if self.path.startswith("/api/redirect"):
                    self.send_response(302)
                    self.send_header("Location", "http://127.0.0.1:%d/private/" % outer.port)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = (b"x" * 5000) if self.path.startswith("/api/big") else b"hello " + self.path.encode()
                if self.command == "POST":
                    body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("X-Echo-Upgrade", self.headers.get("Upgrade", "-"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = reply

        class Quiet(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # clients that give up early (timeouts, size limits)

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def http_policy(d, srv, extra=""):
    policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/api/\nMethods=GET POST\n"
                         "MaxResponseSize=1K\nMaxRequestSize=64\nTimeout=5s\n%s" % (srv.port, extra))
    ready(d, "web")


@test
def http_does_not_block_the_loop(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            http_policy(d, srv)
            policy(d.pol, "other")
            ready(d, "other")
            slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "web", "binding",
                                     json.dumps({"binding": "WEB", "op": "request",
                                                 "args": {"url": "http://127.0.0.1:%d/api/slow" % srv.port}})],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.5)
            start = time.time()
            r = d.ctl("call", "other", "echo", '"quick"')
            check(r.stdout.strip() == '"quick"' and time.time() - start < 2, "gadgetd was blocked")
            slow.communicate(timeout=30)
    finally:
        srv.close()


@test
def http_allowed_request(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            http_policy(d, srv)
            url = "http://127.0.0.1:%d/api/items?x=1" % srv.port
            rc, out, err = bcall(d, "web", "WEB", "request", {"url": url, "headers": {"X-Test": "1", "Upgrade": "h2c"}})
            check(rc == 0, "request: %r" % err)
            resp = json.loads(out)
            check(resp["status"] == 200, "status: %r" % resp)
            import base64
            check(base64.b64decode(resp["body"]["$bytes"]) == b"hello /api/items?x=1", "body: %r" % resp["body"])
            check(resp["headers"]["content-type"] == "text/plain", "headers: %r" % resp["headers"])
            check(resp["headers"]["x-echo-upgrade"] == "-", "hop-by-hop Upgrade was sent")
            check(srv.seen[-1][2].get("X-Test") == "1", "request header not sent")
            rc, out, err = bcall(d, "web", "WEB", "request", {"url": url, "method": "POST", "body": "data"})
            check(rc == 0 and json.loads(out)["status"] == 200, "post: %r" % err)
    finally:
        srv.close()


@test
def http_refused_without_connection(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            http_policy(d, srv)
            base = "http://127.0.0.1:%d" % srv.port
            cases = [
                ({"url": base + "/private/x"}, "not allowed"),
                ({"url": base + "/api/../private/x"}, "not allowed"),
                ({"url": base + "/api/%2e%2e/private"}, "url"),
                ({"url": base + "/api/x", "method": "DELETE"}, "not allowed"),
                ({"url": "http://127.0.0.1:%d/api/" % (srv.port + 1)}, "not allowed"),
                ({"url": "https://127.0.0.1:%d/api/" % srv.port}, "not allowed"),
                ({"url": "http://user:pw@127.0.0.1:%d/api/" % srv.port}, "url"),
                ({"url": base + "/api/x", "method": "POST", "body": "y" * 100}, "MaxRequestSize"),
                ({"url": "file:///etc/passwd"}, "url"),
            ]
            for args, want in cases:
                rc, _, err = bcall(d, "web", "WEB", "request", args)
                check(rc != 0 and want in err, "%r: %d %r" % (args, rc, err))
            check(srv.connections == 0, "%d connections were made" % srv.connections)
    finally:
        srv.close()


@test
def http_internal_name_refused(tmp):
    """localhost resolves to a loopback address the Allow= entry does not name."""
    srv = Server()
    try:
        with Daemon(tmp) as d:
            policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://localhost:%d/api/\n" % srv.port)
            ready(d, "web")
            rc, _, err = bcall(d, "web", "WEB", "request", {"url": "http://localhost:%d/api/x" % srv.port})
            check(rc != 0 and "internal address" in err, "localhost: %r" % err)
            check(srv.connections == 0, "%d connections were made" % srv.connections)
    finally:
        srv.close()


@test
def http_redirect_not_followed(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            http_policy(d, srv)
            rc, out, _ = bcall(d, "web", "WEB", "request", {"url": "http://127.0.0.1:%d/api/redirect" % srv.port})
            resp = json.loads(out)
            check(rc == 0 and resp["status"] == 302, "redirect: %r" % out)
            check([p for _, p, _ in srv.seen] == ["/api/redirect"], "followed: %r" % srv.seen)
    finally:
        srv.close()


@test
def http_response_size_limit(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            http_policy(d, srv)
            rc, _, err = bcall(d, "web", "WEB", "request", {"url": "http://127.0.0.1:%d/api/big" % srv.port})
            check(rc != 0 and "MaxResponseSize" in err, "big: %r" % err)
    finally:
        srv.close()


@test
def http_timeout(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/api/\nTimeout=500ms\n"
                   % srv.port)
            ready(d, "web")
            start = time.time()
            rc, _, err = bcall(d, "web", "WEB", "request", {"url": "http://127.0.0.1:%d/api/slow" % srv.port})
            check(rc != 0 and "timed out" in err.lower(), "slow: %r" % err)
            check(time.time() - start < 2.5, "Timeout=500ms did not hold")
    finally:
        srv.close()


def binding_error(d, gadget, binding, url):
    """A request that must fail: its error (gadgetctl's stderr), checked to
    be an error answer and the audit's record of it."""
    rc, out, err = bcall(d, gadget, binding, "request", {"url": url})
    check(rc == 1, "%s: not an error: %d %r %r" % (url, rc, out, err))
    recs = [json.loads(x) for x in d.ctl("--json", "audit", gadget).stdout.splitlines()]
    check(recs and recs[-1]["outcome"] == "error" and recs[-1]["detail"] in err,
          "%s: audit %r for %r" % (url, recs[-1:], err))
    return err


@test
def http_connection_refused(tmp):
    """Nothing listens on the allowed port: the gadget gets libcurl's
    reason, and the audit records it."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # the port is free and nothing listens
    with Daemon(tmp) as d:
        policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/\n" % port)
        ready(d, "web")
        err = binding_error(d, "web", "WEB", "http://127.0.0.1:%d/x" % port)
        check("request failed" in err and "Connection refused" in err, "refused: %r" % err)


@test
def http_name_does_not_resolve(tmp):
    """A host name that cannot resolve (.invalid, RFC 6761) fails saying so.
    gadgetd runs in a mount namespace of its own whose resolv.conf names a
    loopback server nothing listens on, so the answer comes at once, with
    or without a network."""
    conf = os.path.join(tmp, "resolv.conf")
    with open(conf, "w") as f:
        f.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', conf]
    with Daemon(tmp, wrap=wrap) as d:
        policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://gadgetd-test.invalid/\nTimeout=20s\n")
        ready(d, "web")
        start = time.time()
        err = binding_error(d, "web", "WEB", "http://gadgetd-test.invalid/x")
        check("Could not resolve host: gadgetd-test.invalid" in err, "no such name: %r" % err)
        check(time.time() - start < 15, "resolution did not fail at once")


def make_ca(tmp, name):
    """A test CA (name.pem, name.key) made with openssl."""
    pem, key = os.path.join(tmp, name + ".pem"), os.path.join(tmp, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=gadgetd test " + name],
                   check=True, capture_output=True)
    os.chmod(pem, 0o644)
    return pem, key


def make_server_cert(tmp, ca):
    """A certificate for 127.0.0.1 signed by ca: (cert, key)."""
    cert, key, csr = (os.path.join(tmp, "server" + x) for x in (".pem", ".key", ".csr"))
    ext = os.path.join(tmp, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
                    "-out", cert, "-days", "2", "-extfile", ext], check=True, capture_output=True)
    return cert, key


@test
def http_https_trusts_its_ca_file(tmp):
    """HTTPS to a local server whose certificate a test CA signed: with
    CAFile= naming that CA the request succeeds; without it (the system's
    roots) and with CAFile= naming another CA it fails on the certificate,
    before any request reaches the server."""
    ca = make_ca(tmp, "ca")
    other = make_ca(tmp, "other-ca")
    srv = Server(tls=make_server_cert(tmp, ca))
    try:
        with Daemon(tmp) as d:
            allow = "Type=http\nAllow=https://127.0.0.1:%d/api/\n" % srv.port
            policy(d.pol, "web", "[Binding TRUSTED]\n%sCAFile=%s\n[Binding SYSTEM]\n%s"
                   "[Binding OTHER]\n%sCAFile=%s\n" % (allow, ca[0], allow, allow, other[0]))
            ready(d, "web")
            url = "https://127.0.0.1:%d/api/x" % srv.port
            rc, out, err = bcall(d, "web", "TRUSTED", "request", {"url": url})
            check(rc == 0 and json.loads(out)["status"] == 200, "trusted CA: %d %r %r" % (rc, out, err))
            check(srv.seen[-1][1] == "/api/x", "the server saw %r" % srv.seen)
            seen = len(srv.seen)
            for binding in ("SYSTEM", "OTHER"):
                err = binding_error(d, "web", binding, url)
                check("SSL certificate problem" in err, "%s: %r" % (binding, err))
            check(len(srv.seen) == seen, "an untrusted server got a request: %r" % srv.seen[seen:])
        r = subprocess.run([GADGETD, "check", policy(tmp, "bad", "[Binding W]\n%sCAFile=%s\n" %
                                                     (allow, os.path.join(tmp, "missing.pem")))],
                           capture_output=True, text=True)
        check(r.returncode != 0 and "CAFile=" in r.stdout + r.stderr, "a missing CAFile: %r" % (r.stdout + r.stderr))
    finally:
        srv.close()


@test
def http_libcurl_missing(tmp):
    """libcurl cannot be loaded (an unloadable libcurl.so.4 first on
    gadgetd's library path; a missing one fails the same dlopen): requests
    fail as "HTTP is unavailable", naming the library, the audit records
    it, and gadgetd and its other bindings go on."""
    libdir = os.path.join(tmp, "lib")
    os.makedirs(libdir)
    open(os.path.join(libdir, "libcurl.so.4"), "w").close()
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    with Daemon(tmp, env=env) as d:
        policy(d.pol, "web", "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:1/\n"
                             "[Binding DATA]\nType=kv\n")
        ready(d, "web")
        for _ in range(2):  # each request tries the load again
            err = binding_error(d, "web", "WEB", "http://127.0.0.1:1/x")
            check("HTTP is unavailable: cannot load libcurl.so.4" in err, "no libcurl: %r" % err)
        check(bcall(d, "web", "DATA", "put", {"key": "k", "value": 1})[0] == 0, "kv without libcurl")
        check(d.proc.poll() is None, "gadgetd ended")


@test
def audit_follow(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        f = subprocess.Popen([GADGETCTL, "--socket", d.sock, "audit", "store", "-f"], stdout=subprocess.PIPE,
                             text=True)
        time.sleep(0.3)
        bcall(d, "store", "DATA", "put", {"key": "k", "value": 1})
        # After the last ones before it (its start: -f shows the last 10).
        rec = {}
        for _ in range(10):
            rec = json.loads(f.stdout.readline())
            if rec["binding"] != "lifecycle":
                break
        f.kill()
        check(rec["gadget"] == "store" and rec["binding"] == "DATA" and rec["op"] == "put" and
              rec["outcome"] == "ok" and "duration_us" in rec and "bytes" in rec, "record: %r" % rec)


@test
def audit_json_not_found_and_none(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
        ready(d, "store")
        for i in range(3):
            bcall(d, "store", "DATA", "put", {"key": "k%d" % i, "value": i})
        # The puts' records (beside its lifecycle's and each gadgetctl call's).
        wait_for(lambda: d.ctl("audit", "store").stdout.count('"binding":"DATA"') == 3, what="3 records")
        # --json: each record is its own object, not a string inside one.
        r = d.ctl("--json", "audit", "store", "-n", "2")
        recs = [json.loads(x) for x in r.stdout.splitlines()]
        check(r.returncode == 0 and len(recs) == 2 and all(x.get("gadget") == "store" for x in recs) and
              recs[-1]["binding"] == "gadgetctl" and recs[-1]["op"] == "call binding" and
              recs[-2]["binding"] == "DATA" and recs[-2]["op"] == "put", "--json audit: %r" % r.stdout)
        # A name with neither a gadget nor records is not found, as everywhere.
        r = d.ctl("audit", "nosuch")
        check(r.returncode == 3 and 'no gadget named "nosuch"' in r.stderr, "audit nosuch: %d %r" % (r.returncode, r.stderr))
        r = d.ctl("audit", "nosuch", "-n", "0")
        check(r.returncode == 3, "audit nosuch -n 0: %d %r" % (r.returncode, r.stderr))
        # -n 0 prints nothing, as tail does; with -f only what comes after.
        r = d.ctl("audit", "store", "-n", "0")
        check(r.returncode == 0 and r.stdout == "", "audit -n 0: %r" % r.stdout)
        d.ctl("call", "store", "say", '{"text": "a line"}')
        wait_for(lambda: "a line" in d.ctl("logs", "store").stdout, what="the log line")
        r = d.ctl("logs", "store", "-n", "0")
        check(r.returncode == 0 and r.stdout == "", "logs -n 0: %r" % r.stdout)
        r = d.ctl("logs", "store", "-n", "1")
        check(r.stdout.strip().endswith("a line"), "logs -n 1: %r" % r.stdout)
        f = subprocess.Popen([GADGETCTL, "--socket", d.sock, "audit", "store", "-f", "-n", "0"],
                             stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        bcall(d, "store", "DATA", "get", {"key": "k0"})  # a get, after 3 puts
        rec = json.loads(f.stdout.readline())
        f.kill()
        f.wait()
        check(rec.get("gadget") == "store" and rec.get("op") == "get", "-f -n 0 printed an old record: %r" % rec)


@test
def fetch_example(tmp):
    srv = Server()
    try:
        with Daemon(tmp) as d:
            with open(os.path.join(EXAMPLES, "fetch.policy")) as f:
                text = f.read().replace("127.0.0.1:8080", "127.0.0.1:%d" % srv.port)
            with open(os.path.join(d.pol, "fetch.policy"), "w") as f:
                f.write(text)
            ready(d, "fetch")
            r = d.ctl("call", "fetch", "get", json.dumps({"url": "http://127.0.0.1:%d/hi" % srv.port}))
            check(json.loads(r.stdout) == {"status": 200, "body": "hello /hi"}, "fetch: %r %r" % (r.stdout, r.stderr))
    finally:
        srv.close()


# --- text and secret -------------------------------------------------------

@test
def text_and_secret(tmp):
    secret = os.path.join(tmp, "token")
    with open(secret, "w") as f:
        f.write("s3cr3t-VALUE-42\n")
    os.chmod(secret, 0o600)
    with Daemon(tmp) as d:
        policy(d.pol, "holder", "[Binding GREETING]\nType=text\nValue=hello there\n"
                                "[Binding TOKEN]\nType=secret\nFile=%s\n" % secret)
        ready(d, "holder")
        check(bcall(d, "holder", "GREETING", "get")[1] == '"hello there"', "text")
        rc, out, _ = bcall(d, "holder", "TOKEN", "get")
        check(rc == 0 and out == '"s3cr3t-VALUE-42"', "secret: %r" % out)
        rc, _, err = bcall(d, "holder", "TOKEN", "put", {"key": "x"})
        check(rc != 0 and "s3cr3t" not in err, "error message: %r" % err)
        status = d.ctl("status", "holder").stdout + d.ctl("--json", "status", "holder").stdout
        audit = d.ctl("audit", "holder").stdout
        d.stop()
        with open(os.path.join(tmp, "state", "audit.log")) as f:
            audit += f.read()
        for where, text in (("log", d.logtext()), ("status", status), ("audit", audit)):
            check("s3cr3t" not in text, "the secret is in the %s" % where)
        check('"binding":"TOKEN"' in audit, "secret reads are not audited")


@test
def secret_symlink_fails_start(tmp):
    """Secrets are found as listed paths are: a symlink planted in place of
    the file, in a directory others may write, stops the start, and the
    message names the binding. A restart of a running gadget whose secret
    became such a symlink fails before its new process is spawned (made
    with no timers of its own yet at its load: it ends through its end's
    timer) and leaves the old process serving."""
    real = os.path.join(tmp, "real-token")
    with open(real, "w") as f:
        f.write("s3cr3t\n")
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    link = os.path.join(shared, "token")
    os.symlink(real, link)
    with Daemon(tmp) as d:
        policy(d.pol, "needy", "[Binding TOKEN]\nType=secret\nFile=%s\n" % link)
        d.ctl("reload")
        cause = wait_for(lambda: d.list().get("needy", {}).get("cause"), what="a cause")
        check(d.state("needy") == "failed" and "secret TOKEN: cannot read" in cause, "cause: %r" % cause)
        check("s3cr3t" not in cause, "the secret is in the cause")
        kept = os.path.join(shared, "kept")
        with open(kept, "w") as f:
            f.write("s3cr3t\n")
        policy(d.pol, "held", "[Binding TOKEN]\nType=secret\nFile=%s\n" % kept)
        d.ctl("reload")
        wait_for(lambda: d.state("held") == "ready", what="held ready")
        pid = d.list()["held"]["pid"]
        os.unlink(kept)
        os.symlink(real, kept)
        r = d.ctl("restart", "held")
        check(r.returncode != 0 and "secret TOKEN: cannot read" in r.stderr, "restart: %r" % r.stderr)
        check(d.proc.poll() is None and d.state("held") == "ready" and d.list()["held"]["pid"] == pid,
              "after the failed restart: %r" % d.list().get("held"))


if __name__ == "__main__":
    sys.exit(main())
