#!/usr/bin/env python3
"""bench/backupbench.py: gadgetctl backup of a large SQLite store — its
throughput, and the p99 of a gadget's kv puts while it runs beside the
p99 without it (issue 38). As root, from the top of a built tree:

    bench/backupbench.py [--mib N] [--build DIR]

--mib: the store's size (keys and values; default 256: a 1 GiB store
takes minutes to make on a small host, and the rate is per byte); --build:
the meson build directory (default build-bench, else build). The store
is made directly in the gadget's SQLite file before gadgetd starts (1 KiB
values under 16-byte keys, as a gadget's puts would leave them); the
puts are `gadgetctl call` of the test gadget's binding method, each
timed whole (the process included: the same in both columns). Prints a
markdown table. Not part of the test suite."""
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


MIB = int(arg("--mib", "256"))
BUILD = os.path.abspath(arg("--build", os.path.join(ROOT, "build-bench")
                            if os.path.isdir(os.path.join(ROOT, "build-bench")) else os.path.join(ROOT, "build")))
GADGETD = os.path.join(BUILD, "supervisor", "gadgetd")
GADGETCTL = os.path.join(BUILD, "ctl", "gadgetctl")
TESTGADGET = os.path.join(BUILD, "tests", "integration", "testgadget")
VALUE = 1024


def packed_bytes(n):
    """A packed gadget.Value of n bytes (bytes_value, field 6)."""
    ln, out = n, bytearray()
    while True:
        b = ln & 0x7F
        ln >>= 7
        out.append(b | (0x80 if ln else 0))
        if not ln:
            break
    return bytes([0x32]) + bytes(out) + os.urandom(n)


def make_store(state, keys):
    kv = os.path.join(state, "kv")
    os.makedirs(kv, mode=0o700)
    db = sqlite3.connect(os.path.join(kv, "store.sqlite"))
    db.executescript(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;"
        "CREATE TABLE kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
        " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
        "CREATE TABLE usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL, bytes INTEGER NOT NULL);")
    total, batch = 0, []
    for i in range(keys):
        k, v = b"big/%012d" % i, packed_bytes(VALUE)
        total += len(k) + len(v)
        batch.append(("BIG", k, v))
        if len(batch) == 10000:
            db.executemany("INSERT INTO kv VALUES (?, ?, ?)", batch)
            batch = []
    db.executemany("INSERT INTO kv VALUES (?, ?, ?)", batch)
    db.execute("INSERT INTO usage VALUES ('BIG', ?, ?)", (keys, total))
    db.commit()
    db.close()
    return total


def ctl(sock, *args):
    return subprocess.run([GADGETCTL, "--socket", sock, *args], capture_output=True, text=True, timeout=3600)


def puts(sock, stop, out):
    i = 0
    while not stop.is_set():
        t = time.monotonic()
        r = ctl(sock, "call", "store", "binding",
                json.dumps({"binding": "LOG", "op": "put", "args": {"key": "k%d" % (i % 100), "value": i}}))
        if r.returncode != 0:
            raise SystemExit("put: %s" % r.stderr)
        out.append((time.monotonic() - t) * 1000)
        i += 1


def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    if os.geteuid() != 0:
        raise SystemExit("run as root")
    tmp = tempfile.mkdtemp(prefix="backupbench-", dir=BUILD)
    state, pol = os.path.join(tmp, "state"), os.path.join(tmp, "policy.d")
    os.makedirs(pol)
    keys = MIB * 1024 * 1024 // (VALUE + 20)
    t = time.monotonic()
    total = make_store(state, keys)
    print("made a store of %d keys, %.0f MiB, in %.0f s" % (keys, total / 2**20, time.monotonic() - t), file=sys.stderr)
    with open(os.path.join(pol, "store.policy"), "w") as f:
        f.write("[Gadget]\nName=store\nExec=%s\nStateMax=100G\n[Binding BIG]\nType=kv\nMaxKeys=100000000\n"
                "MaxBytes=100G\n[Binding LOG]\nType=kv\n" % TESTGADGET)
    sock = os.path.join(tmp, "run", "control.sock")
    log = open(os.path.join(tmp, "gadgetd.log"), "w+")
    d = subprocess.Popen([GADGETD, "--policy-dir", pol, "--state-dir", state, "--socket", sock, "--run-dir",
                          os.path.join(tmp, "run")], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not (os.path.exists(sock) and "ready" in ctl(sock, "list").stdout):
            if time.monotonic() > deadline or d.poll() is not None:
                log.seek(0)
                raise SystemExit("the gadget did not start:\n" + log.read()[-3000:])
            time.sleep(0.2)
        steady, during = [], []
        stop = threading.Event()
        th = threading.Thread(target=puts, args=(sock, stop, steady))
        th.start()
        time.sleep(10)
        stop.set()
        th.join()
        stop = threading.Event()
        th = threading.Thread(target=puts, args=(sock, stop, during))
        th.start()
        path = os.path.join(tmp, "store.gbk")
        t = time.monotonic()
        r = ctl(sock, "backup", "store", path)
        took = time.monotonic() - t
        stop.set()
        th.join()
        if r.returncode != 0:
            raise SystemExit("backup: %s" % r.stderr)
        size = os.path.getsize(path)
        ctl(sock, "stop", "store")
        t = time.monotonic()
        r = ctl(sock, "restore", "store", path)
        rtook = time.monotonic() - t
        if r.returncode != 0:
            raise SystemExit("restore: %s" % r.stderr)
        print("| store | backup | backup rate | restore (stopped) | restore rate |")
        print("| --- | --- | --- | --- | --- |")
        print("| %d keys, %.0f MiB | %.1f s (file %.0f MiB) | %.0f MiB/s | %.1f s | %.0f MiB/s |" % (
            keys, total / 2**20, took, size / 2**20, size / 2**20 / took, rtook, size / 2**20 / rtook))
        print()
        print("| kv put through gadgetctl call | calls | p50 | p99 | max |")
        print("| --- | --- | --- | --- | --- |")
        for name, xs in (("steady (10 s)", steady), ("during the backup", during)):
            print("| %s | %d | %.1f ms | %.1f ms | %.1f ms |" % (name, len(xs), statistics.median(xs), p(xs, 0.99),
                                                              max(xs)))
    finally:
        d.terminate()
        d.wait(timeout=60)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
