"""The kv binding under load. Every SQLite operation runs
on the gadget's own thread behind a queue of CallsMax= operations per
binding; list reads a bounded key range; MaxKeys=/MaxBytes= have safe
defaults; deletes commit on a full disk. Each attack is the `kv-flood` mode
of tests/integration/hostile.c, reusable by a benchmark."""
import json
import os
import re
import sqlite3
import subprocess
import time

from harness import Daemon, Healthy, check, cpu_s, fd_count, fd_links, policy, rss_kib, need, test, unload, wait_for
from metrics_util import Metrics, parse, value

HOSTILE = os.environ.get("HOSTILE", "")
GOOD_PUT = json.dumps({"binding": "DATA", "op": "put", "args": {"key": "h", "value": "healthy"}})
GOOD_GET = json.dumps({"binding": "DATA", "op": "get", "args": {"key": "h"}})
# A value as large as the default MaxValueSize=1M lets in once packed.
BIG_VALUE = 1048000
# Above what gadgetd holds for a gadget and its kv store (5 fds, a thread,
# CallsMax=16 queued values), below a leak.
FD_SLACK = 24
RSS_SLACK_KIB = 32 * 1024
# ASan keeps freed memory in quarantine on purpose: there RSS says nothing
# (leaks are LeakSanitizer's to find, at gadgetd's exit).
RSS_CHECKED = os.environ.get("SANITIZE", "none") in ("", "none")
SPARE_FDS = 4  # the spare sandbox shell being built: pidfd, socket, mountinfo


def ready(d, *names):
    d.ctl("reload")
    for n in names:
        wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")


def bcall(d, gadget, op, args):
    r = d.ctl("call", gadget, "binding", json.dumps({"binding": "DATA", "op": op, "args": args}))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def flood(d, name, *args, timeout=40, keys=""):
    """Loads hostile kv-flood ARGS as gadget name (with [Gadget] keys) and
    waits for its report:
    {"sent": N, "ok": N, "busy": N, "limit": N, "failed": N, "other": N}."""
    policy(d.pol, name, "Arguments=kv-flood %s\n%s[Binding DATA]\nType=kv\n" % (" ".join(map(str, args)), keys),
           exec_path=HOSTILE)
    d.ctl("reload")

    def report():
        m = re.search(r"kv-flood: (sent .*)", d.ctl("logs", name).stdout)
        if m:
            w = m.group(1).split()
            return {w[i]: int(w[i + 1]) for i in range(0, len(w), 2)}
        return None
    return wait_for(report, timeout=timeout, what="the kv-flood report of " + name)




class Cost:
    """gadgetd's fds and RSS before an attack, the most seen during it."""

    def __init__(self, d):
        self.pid = d.proc.pid
        self.fd0, self.rss0 = fd_count(self.pid), rss_kib(self.pid)
        self.fd_max, self.rss_max = self.fd0, self.rss0
        self.eventfds = fd_links(self.pid).count("anon_inode:[eventfd]")

    def sample(self):
        self.fd_max = max(self.fd_max, fd_count(self.pid))
        self.rss_max = max(self.rss_max, rss_kib(self.pid))

    def check_during(self):
        self.sample()
        check(self.fd_max <= self.fd0 + FD_SLACK, "fds %d -> %d during the attack" % (self.fd0, self.fd_max))
        check(not RSS_CHECKED or self.rss_max <= self.rss0 + RSS_SLACK_KIB,
              "RSS %d -> %d KiB during the attack" % (self.rss0, self.rss_max))

    def __str__(self):
        return "gadgetd fds %d..%d, RSS %d..%d KiB" % (self.fd0, self.fd_max, self.rss0, self.rss_max)

    def check_after(self, attacker):
        """Once the attacker is unloaded its store is closed: no fd of its
        database, reserve or eventfd is left, and gadgetd has no more fds
        than before but for those of the spare sandbox shell it builds for
        the next start."""
        def kv_fds():
            links = fd_links(self.pid)
            return [l for l in links if "/kv/%s." % attacker in l], links.count("anon_inode:[eventfd]")
        wait_for(lambda: kv_fds() == ([], self.eventfds), what="the attacker's store closed: %r" % (kv_fds(),))
        check(fd_count(self.pid) <= self.fd0 + SPARE_FDS, "fds %d -> %d after the attack" % (
            self.fd0, fd_count(self.pid)))
        check(not RSS_CHECKED or rss_kib(self.pid) <= self.rss0 + RSS_SLACK_KIB, "RSS %d -> %d KiB after the attack" % (
            self.rss0, rss_kib(self.pid)))




def flood_log(d):
    return "\n".join(l for l in d.logtext().splitlines() if "[flood]" in l and " audit " not in l)


def refused_logged(d):
    """The operations the log says were refused busy."""
    return sum(int(n) for n in re.findall(r"(\d+) binding calls answered busy", flood_log(d)))


def two_gadgets(d):
    """The healthy gadget "good" with a kv binding of its own, its store
    already open."""
    policy(d.pol, "good", "[Binding DATA]\nType=kv\n")
    ready(d, "good")
    check(bcall(d, "good", "put", {"key": "h", "value": "healthy"})[0] == 0, "good's first put")


@test
def load_kv_pipelined_puts(tmp):
    """3,000 pipelined puts: the attacker gets "busy" beyond its queue, a
    healthy gadget's own puts (durable) are all answered meanwhile."""
    with Daemon(tmp) as d:
        two_gadgets(d)
        cost = Cost(d)
        t0 = time.monotonic()
        with Healthy(d, "good", "binding", GOOD_PUT) as h:
            r = flood(d, "flood", "DATA", "put", 3000, 3000, 64)
            cost.check_during()
        check(r["sent"] == 3000 and r["ok"] + r["busy"] == 3000, "flood outcomes: %r" % r)
        check(r["busy"] > 0 and r["ok"] >= 16, "no busy answers beyond the queue: %r" % r)
        check("busy: 16 calls of binding DATA in flight (CallsMax=16): answering busy" in flood_log(d),
              "no log line on the full queue")
        wait_for(lambda: refused_logged(d) == r["busy"], what="the log to count %d refused operations (%d)" % (
            r["busy"], refused_logged(d)))
        # The first refusal's line, then counts: one a second at most, and
        # one whenever nothing is left in flight (a burst's end, which a
        # pipelined flood reaches a few times, however short). Logged one
        # by one, the 2,930 refusals would be 2,930 lines.
        seconds = time.monotonic() - t0
        lines = [l for l in flood_log(d).splitlines() if "warning: " in l and "busy" in l]
        check(len(lines) <= 20 + int(seconds), "refusals flood the log in %.1f s: %r" % (seconds, lines[:10]))
        check(bcall(d, "good", "get", {"key": "h"})[1] == '"healthy"', "good's data")
        unload(d, "flood")
        cost.check_after("flood")
        print("healthy calls: %r; attacker: %r; %s" % (h.result, r, cost))




def loop_gets(d):
    """gadgetd_kv_loop_gets_total by outcome: the kv gets tried on the loop."""
    series = parse(d.get()[2])
    return {o: value(series, "gadgetd_kv_loop_gets_total", outcome=o) for o in ("answered", "uncached", "over_budget")}


@test
def load_kv_get_flood(tmp):
    """A gadget puts a 1 MiB value and gets it 30 times, 8 gets in flight:
    its gets are its store thread's (the lookup alone reads the value's 257
    pages: more than the loop reads for a get, kvdb_nowait.c), none is
    answered on gadgetd's loop, which meanwhile answers every small get of
    a healthy gadget, many of them itself. What its frames and answers
    cost the loop is bounded a second (FrameBytesPerSecond=8M here): its
    31 MiB take at least (31 MiB - 8 MiB at once - 8 MiB of answers in
    flight) / 8 MiB = 1.87 s (1.5 allowed for the clock's rounding; without
    the budget they took 0.2 s), gadgetd says so once, and its metrics
    count the waits (gadgetd_gadget_budget_waits_total)."""
    with Metrics(tmp) as d:
        two_gadgets(d)
        cost = Cost(d)
        before = loop_gets(d)
        with Healthy(d, "good", "binding", GOOD_GET) as h:
            t0 = time.monotonic()
            r = flood(d, "hog", "DATA", "get", 30, 8, BIG_VALUE, "big", 1, keys="FrameBytesPerSecond=8M\n")
            took = time.monotonic() - t0
            cost.check_during()
        after = loop_gets(d)
        grew = {o: after[o] - before[o] for o in after}
        check(r == {"sent": 30, "ok": 30, "busy": 0, "limit": 0, "failed": 0, "other": 0}, "gets: %r" % r)
        check(took >= 1.5, "30 gets of 1 MiB answered in %.2f s, under the 1.87 s FrameBytesPerSecond=8M "
              "allows at least" % took)
        check(d.logtext().count("(FrameBytesPerSecond=8388608): the rest wait for the next second") == 1,
              "the hold said once:\n%s" % d.logtext()[-2000:])
        series = parse(d.get()[2])
        waits = {b: value(series, "gadgetd_gadget_budget_waits_total", gadget="hog", budget=b)
                 for b in ("FrameBytesPerSecond", "FrameValuesPerSecond")}
        check(waits["FrameBytesPerSecond"] >= 1 and waits["FrameValuesPerSecond"] == 0, "waits counted: %r" % waits)
        # Each get of good's tried on the loop is answered there or by its
        # thread; the hog's, all of the thread.
        check(grew["over_budget"] > 0 and 0 < grew["answered"] <= h.result["sent"],
              "gets on the loop: %r, good sent %d" % (grew, h.result["sent"]))
        rc, out, _ = bcall(d, "good", "get", {"key": "h"})
        check(rc == 0 and out == '"healthy"', "good's data: %r" % out)
        unload(d, "hog")
        cost.check_after("hog")
        print("healthy calls: %r; attacker: %r; loop gets: %r; %s" % (h.result, r, grew, cost))


def populate(tmp, gadget, n):
    """n keys k00000000... of binding DATA, written straight into the
    gadget's database (schema as supervisor/store/kvdb.c makes it)."""
    os.makedirs(os.path.join(tmp, "state", "kv"), mode=0o700, exist_ok=True)
    path = os.path.join(tmp, "state", "kv", gadget + ".sqlite")
    db = sqlite3.connect(path)
    db.executescript("PRAGMA journal_mode=WAL;"
                     "CREATE TABLE kv (binding TEXT NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,"
                     " PRIMARY KEY (binding, key)) WITHOUT ROWID;"
                     "CREATE TABLE usage (binding TEXT PRIMARY KEY, keys INTEGER NOT NULL,"
                     " bytes INTEGER NOT NULL);")
    value = b"\x30\x01"  # a packed Value: int 0... any bytes do for list
    db.executemany("INSERT INTO kv VALUES ('DATA', ?, ?)", ((b"k%08d" % i, value) for i in range(n)))
    db.execute("INSERT INTO usage VALUES ('DATA', ?, ?)", (n, n * 11))
    db.commit()
    db.close()
    os.chmod(path, 0o600)


@test
def load_kv_list_unmatched_prefix(tmp):
    """2,000 lists of a prefix no key has, below 60,000 keys: each reads a
    bounded range, so the lot costs gadgetd little CPU (a scan to the end
    of the table cost about 7 ms each, 14 s in all)."""
    populate(tmp, "lister", 60000)
    with Daemon(tmp) as d:
        two_gadgets(d)
        cost = Cost(d)
        cpu0 = cpu_s(d.proc.pid)
        with Healthy(d, "good", "binding", GOOD_PUT) as h:
            r = flood(d, "lister", "DATA", "list", 2000, 16, 0, "a/")
            cost.check_during()
        cpu = cpu_s(d.proc.pid) - cpu0
        check(r["sent"] == 2000 and r["ok"] + r["busy"] == 2000 and r["ok"] > 0, "list outcomes: %r" % r)
        # Healthy calls and the lists together; the scans alone were 14 s.
        check(cpu < 4, "2,000 lists of an unmatched prefix cost gadgetd %.1f s of CPU" % cpu)
        rc, out, _ = bcall(d, "good", "list", {"prefix": "h"})
        check(json.loads(out)["keys"] == ["h"], "good's list: %r" % out)
        unload(d, "lister")
        cost.check_after("lister")
        print("healthy calls: %r; attacker: %r; gadgetd CPU %.2f s; %s" % (h.result, r, cpu, cost))


@test
def load_kv_default_quota(tmp):
    """A gadget whose policy sets no kv limits writes until MaxBytes=16M
    refuses it, not until the disk is full."""
    with Daemon(tmp) as d:
        two_gadgets(d)
        cost = Cost(d)
        with Healthy(d, "good", "binding", GOOD_PUT) as h:
            r = flood(d, "filler", "DATA", "put", 60, 1, 900000)
            cost.check_during()
        check(r["limit"] > 0 and r["ok"] + r["limit"] == 60, "puts beyond the default quota: %r" % r)
        check(r["ok"] * 900000 <= 16 << 20, "%d puts of 900 KB went in" % r["ok"])
        db = os.path.join(tmp, "state", "kv", "filler.sqlite")
        size = os.path.getsize(db) + os.path.getsize(db + "-wal")
        check(size <= 24 << 20, "the database holds %d bytes" % size)
        unload(d, "filler")
        cost.check_after("filler")
        print("healthy calls: %r; attacker: %r; database %d bytes; %s" % (h.result, r, size, cost))


def fill_disk(path):
    """Writes path until the filesystem has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    f.write(b"x" * chunk)
            except OSError:
                pass


@test
def load_kv_full_disk_deletes(tmp):
    """With the state directory on a full filesystem, puts are refused as
    "storage full" but every delete commits, and what was not deleted is
    intact. Puts resume once the filesystem has room for the reserve."""
    state = os.path.join(tmp, "state")
    os.makedirs(state, mode=0o700)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", state]).returncode != 0:
        need("root", "cannot mount a tmpfs")
    try:
        with Daemon(tmp) as d:
            policy(d.pol, "good")
            policy(d.pol, "disk", "[Binding DATA]\nType=kv\nMaxBytes=infinity\n")
            ready(d, "good", "disk")
            # Room taken by others, given back at the end.
            with open(os.path.join(state, "ballast"), "wb") as f:
                f.write(b"b" * (3 << 20))
            cost = Cost(d)
            with Healthy(d, "good", "echo") as h:
                stored = []
                for i in range(120):
                    v = "%03d" % i * 30000
                    rc, _, err = bcall(d, "disk", "put", {"key": "k%03d" % i, "value": v})
                    if rc != 0:
                        check("storage full" in err, "put %d: %r" % (i, err))
                        break
                    stored.append(i)
                check(5 < len(stored) < 120, "%d puts before the disk was full" % len(stored))
                fill_disk(os.path.join(state, "filler"))
                # A full disk may still hold room in the WAL's own file: a
                # checkpoint lets SQLite write the next frames from the
                # file's start, into pages it has (a put there fits, and
                # is kept). Past them (the file is cut back to 1 MiB, 12
                # of these puts) the WAL must grow: that put is refused.
                late = []
                for i in range(16):
                    rc, _, err = bcall(d, "disk", "put", {"key": "late%02d" % i, "value": "%03d" % i * 30000})
                    if rc != 0:
                        break
                    late.append(i)
                check(rc != 0 and "storage full" in err,
                      "a put on a full disk: %r (%d puts fitted before)" % (err, len(late)))
                for i in stored[::2]:
                    rc, out, err = bcall(d, "disk", "delete", {"key": "k%03d" % i})
                    check(rc == 0 and out == "true", "delete k%03d on a full disk: %r" % (i, err))
                for i in stored[1::2]:
                    rc, out, err = bcall(d, "disk", "get", {"key": "k%03d" % i})
                    check(rc == 0 and json.loads(out) == "%03d" % i * 30000, "k%03d after deletes" % i)
                for i in stored[::2]:
                    check(bcall(d, "disk", "get", {"key": "k%03d" % i})[0] == 3, "k%03d not deleted" % i)
                for i in late:
                    rc, out, err = bcall(d, "disk", "get", {"key": "late%02d" % i})
                    check(rc == 0 and json.loads(out) == "%03d" % i * 30000, "late%02d, fitted in the WAL" % i)
                cost.check_during()
            # Puts resume once the reserve fits again.
            os.unlink(os.path.join(state, "ballast"))
            rc, _, err = bcall(d, "disk", "put", {"key": "small", "value": 1})
            check(rc == 0, "a put once there is room again: %r" % err)
            db = sqlite3.connect(os.path.join(state, "kv", "disk.sqlite"))
            check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check failed")
            db.close()
            print("healthy calls: %r; %d puts fit; %s" % (h.result, len(stored), cost))
    finally:
        subprocess.run(["umount", "-l", state])


@test
def load_kv_locked_database(tmp):
    """A database that cannot be written for a while (here another process
    holds its write lock, as a stalled disk would) stalls only its own
    gadget: its operations wait on its thread, the loop answers everyone
    else. Were SQLite on the loop, each queued put would hold it for the
    5 s busy timeout and the calls below would never be answered."""
    populate(tmp, "locked", 0)
    with Daemon(tmp) as d:
        two_gadgets(d)
        cost = Cost(d)
        lock = sqlite3.connect(os.path.join(tmp, "state", "kv", "locked.sqlite"), isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        try:
            with Healthy(d, "good", "binding", GOOD_PUT) as h:
                policy(d.pol, "locked", "Arguments=kv-flood DATA put 200 200 64\n[Binding DATA]\nType=kv\n",
                       exec_path=HOSTILE)
                d.ctl("reload")
                wait_for(lambda: "calls of binding DATA in flight (CallsMax=" in d.logtext(),
                         what="the locked gadget's queue to fill")
                for i in range(20):
                    r = d.ctl("call", "good", "binding", GOOD_PUT, timeout=20)
                    check(r.returncode == 0, "a healthy put while the other database is locked: %r" % r.stderr)
                    cost.sample()
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        r = wait_for(lambda: re.search(r"kv-flood: sent (\d+) ok (\d+) busy (\d+) limit (\d+) failed (\d+)",
                                       d.ctl("logs", "locked").stdout),
                     what="the locked gadget's report")
        sent, ok, busy, limit, failed = map(int, r.groups())
        # Every put answered: done, busy, or (on a slow host, where the
        # healthy calls above kept the lock past SQLite's 5 s busy wait)
        # failed with the store locked.
        check(sent == 200 and ok + busy + failed == 200 and ok >= 1 and busy > 0 and limit == 0,
              "locked gadget: %r" % (r.groups(),))
        cost.check_during()
        unload(d, "locked")
        cost.check_after("locked")
        print("healthy calls: %r; locked gadget sent %d ok %d busy %d; %s" % (h.result, sent, ok, busy, cost))
