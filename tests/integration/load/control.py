"""The control socket's clients against gadgetd: a
member of the control group holding connections, clients that never read
their answers, and `load` of files the member may not read or that would
hold gadgetd (FIFO, /dev/zero, a symlink, 2 MiB). The attacks are
attacks.py subcommands (see there to run one by hand or in a benchmark)."""
import json
import os
import subprocess
import sys
import time

import harness
from harness import Daemon, Healthy, check, fd_count, policy, rss_growth, rss_kib, sanitized, test, wait_for

ATTACKS = os.path.join(os.path.dirname(os.path.abspath(harness.__file__)), "attacks.py")




NOBODY = (65534, 65534)  # in group nogroup: gadgetd runs with --group nogroup



def attack(user, *args):
    cmd = [sys.executable, ATTACKS, *args]
    if user:
        cmd = ["setpriv", "--reuid=%d" % user[0], "--regid=%d" % user[1], "--clear-groups"] + cmd
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def counts(line):
    w = line.split()
    return {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}


def config(d, text):
    path = os.path.join(d.tmp, "gadgetd.conf")
    with open(path, "w") as f:
        f.write(text)
    return ["--group", "nogroup", "--config", path]


def ready(d, name="good"):
    policy(d.pol, name)
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state(name) == "ready", what=name + " ready")
    wait_for(lambda: harness.spare(d), what="the spare sandbox shell")  # its fds count from here


def log_lines(d, text):
    return sum(text in line for line in d.logtext().splitlines())


@test
def load_control_idle_connections_root_gets_in(tmp):
    """300 idle connections of one group member: she gets 8
    (ControlMaxConnectionsPerUser), root still gets in, gadgetd's fds stay
    within 8 of where they were, one log line says who was refused."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        pid = d.proc.pid
        fd0 = fd_count(pid)
        with Healthy(d, "good", "echo"):
            p = attack(NOBODY, "control-idle", d.sock, "300", "30")
            c = counts(p.stdout.readline())
            check(c.get("accepted") == 8 and c["refused"] == c["connected"] - 8 and c["connected"] >= 200,
                  "the member's connections: %r %s" % (c, p.stderr.read() if not c else ""))
            r = d.ctl("list")
            check(r.returncode == 0, "root locked out: %r" % r.stderr)
            r = d.ctl("list", user=NOBODY)
            check(r.returncode != 0 and "busy" in r.stderr, "her 9th connection: %d %r" % (r.returncode, r.stderr))
            check(fd_count(pid) <= fd0 + 8 + 4, "gadgetd holds %d fds, was %d" % (fd_count(pid), fd0))
            p.stdin.close()
            p.wait(timeout=30)
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back to %d" % fd0)
        check(log_lines(d, "refused a control connection from uid 65534") == 1,
              "refusals logged: %r" % [l for l in d.logtext().splitlines() if "refused" in l][:5])
        check("ControlMaxConnectionsPerUser" in d.logtext(), "the log does not say which limit")


@test
def load_control_many_users_root_gets_in(tmp):
    """Five group members with 8 connections each against
    ControlMaxConnections=16: 16 get in, all told busy beyond, root is not
    counted with them."""
    d = Daemon(tmp)
    d.extra = config(d, "[Daemon]\nControlMaxConnections=16\n")
    with d:
        ready(d)
        fd0 = fd_count(d.proc.pid)
        with Healthy(d, "good", "echo"):
            ps = [attack((60001 + i, 65534), "control-idle", d.sock, "8", "30") for i in range(5)]
            got = [counts(p.stdout.readline()) for p in ps]
            check(sum(c["accepted"] for c in got) == 16, "accepted: %r" % got)
            check(sum(c["refused"] for c in got) == 24, "refused: %r" % got)
            for _ in range(3):
                r = d.ctl("list")
                check(r.returncode == 0, "root locked out: %r" % r.stderr)
            check(fd_count(d.proc.pid) <= fd0 + 16 + 4, "gadgetd holds %d fds" % fd_count(d.proc.pid))
            for p in ps:
                p.stdin.close()
                p.wait(timeout=30)
        check(log_lines(d, "ControlMaxConnections)") == 1, "refusals logged: %r" %
              [l for l in d.logtext().splitlines() if "refused" in l][:5])


@test
def load_control_refused_client_is_told_why(tmp):
    """What a refused gadgetctl says, and its exit status (1, failed), for
    each limit: two other members' idle connections fill
    ControlMaxConnections=3 (the refused one is told gadgetd is busy),
    then her own fill ControlMaxConnectionsPerUser=2 (she is told to close
    one). Root still gets in."""
    d = Daemon(tmp)
    d.extra = config(d, "[Daemon]\nControlMaxConnections=3\nControlMaxConnectionsPerUser=2\n")
    with d:
        ready(d)
        ps = [attack((60001 + i, 65534), "control-idle", d.sock, "2", "30") for i in range(2)]
        c = [counts(p.stdout.readline()) for p in ps]
        check(sum(x.get("accepted", 0) for x in c) == 3, "the other members' connections: %r" % c)
        r = d.ctl("list", user=NOBODY)
        check(r.returncode == 1 and "gadgetd is busy: too many control connections, try again later" in r.stderr,
              "over ControlMaxConnections: %d %r" % (r.returncode, r.stderr))
        check(d.ctl("list").returncode == 0, "root locked out")
        for p in ps:
            p.stdin.close()
            p.wait(timeout=30)
        wait_for(lambda: d.ctl("list", user=NOBODY).returncode == 0, what="her connection admitted again")
        p = attack(NOBODY, "control-idle", d.sock, "2", "30")
        c = counts(p.stdout.readline())
        check(c.get("accepted") == 2, "her connections: %r" % c)
        r = d.ctl("list", user=NOBODY)
        check(r.returncode == 1 and "busy: uid 65534 has 2 control connections open, the most one user may "
              "have; close one" in r.stderr, "over ControlMaxConnectionsPerUser: %d %r" % (r.returncode, r.stderr))
        check(d.ctl("list").returncode == 0, "root locked out")
        p.stdin.close()
        p.wait(timeout=30)


@test
def load_control_clients_that_never_read(tmp):
    """100 clients pipelining up to 20,000 requests each (`status` of a
    gadget that does not exist: small answers, cheap to make) and reading
    nothing: each is dropped once ControlQueueSize (256 KiB) of answers
    waits, gadgetd's RSS stays within 64 MiB of where it was and comes back
    (within 2 MiB), the log says who was dropped."""
    d = Daemon(tmp)
    d.extra = config(d, "[Daemon]\nControlMaxConnections=100\nControlMaxConnectionsPerUser=100\n")
    with d:
        ready(d)
        pid = d.proc.pid
        fd0, rss0 = fd_count(pid), rss_kib(pid)
        t0 = time.time()
        with Healthy(d, "good", "echo"):
            p = attack(NOBODY, "control-noread", d.sock, "100", "20000", "nosuchgadget")
            peak = rss0
            while p.poll() is None:
                peak = max(peak, rss_kib(pid))
                time.sleep(0.05)
            c = counts(p.stdout.read())
            check(c.get("connections") == 100 and c["dropped"] == 100, "the non-readers: %r %s" % (c, p.stderr.read()))
            check(sanitized(pid) or peak - rss0 < 64 * 1024, "RSS grew by %d KiB" % (peak - rss0))
            check(d.ctl("list").returncode == 0, "root cannot list")
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back")
        # Back within 2 MiB: the dropped clients' buffers are given back
        # to the system (conn.c's trim; without it 4 to 21 MiB stayed).
        wait_for(lambda: rss_growth(pid, rss0) < 2 * 1024, what="gadgetd's RSS back (%d KiB, was %d)" %
                 (rss_kib(pid), rss0))
        print("RSS %d KiB before, %d KiB at the peak, %d KiB after" % (rss0, peak, rss_kib(pid)))
        windows = int((time.time() - t0) / 10)  # one line, then a count per 10 s window
        check(1 <= log_lines(d, "dropped the control client of uid 65534") <= 3 + windows,
              "drops logged: %r" % [l for l in d.logtext().splitlines() if "dropped" in l][:5])


def load_as(d, user, path):
    p = attack(user, "control-load", d.sock, path)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "the load request got no answer: %r" % err)
    return json.loads(out)


@test
def load_control_wide_frames(tmp):
    """A member of the control group sends 20 requests of 500,000 values
    each (2 MiB frames of nulls, under the frame size bound), reconnecting
    for each: each ends its connection unanswered, counted on the packed
    bytes before any is decoded (CONTROL_FRAME_VALUES_MAX); and the user's
    requests are read at most CONTROL_USER_BYTES_PER_S (8 MiB) a second,
    and one request past it: 5 of these 1.9 MiB requests a second, so the
    20 need four seconds, the last begun 3 s after the first (2.9: the
    clock's rounding; a slower host only makes it longer; without the
    budget 0.3 s). One of 100,000 values is decoded and answered; a
    healthy caller is answered throughout."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        with Healthy(d, "good"):
            t0 = time.monotonic()
            p = attack(NOBODY, "control-wide", d.sock, "20", "500000")
            out, err = p.communicate(timeout=300)
            took = time.monotonic() - t0
            c = counts(out)
            check(c.get("closed") == 20 and not c.get("answered"), "the wide requests: %r %s" % (c, err))
            check(took >= 2.9, "20 requests of 1.9 MiB of one user read in %.2f s, under the 3 s its budget allows"
                  % took)
            p = attack(NOBODY, "control-wide", d.sock, "1", "100000")
            out, err = p.communicate(timeout=120)
            c = counts(out)
            check(c.get("answered") == 1, "a request within the bound: %r %s" % (c, err))


@test
def load_control_big_answers(tmp):
    """A member of the control group asks a gadget for 2 MB results, 10
    one after another on one connection: the answers it is sent count
    against its CONTROL_USER_BYTES_PER_S (8 MiB) with its requests, so its
    10th request is read once 9 answers (18 MB) have drained to the
    budget: at least (18 MB - 8 MiB) / 8 MiB = 1.15 s (1.1 allowed for the
    clock's rounding; without the answers counted, 0.1 s). Every call is
    answered; a healthy caller is answered throughout."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        with Healthy(d, "good"):
            t0 = time.monotonic()
            p = attack(NOBODY, "control-big-answers", d.sock, "10", "good", "2000000")
            out, err = p.communicate(timeout=120)
            took = time.monotonic() - t0
        check(counts(out) == {"answered": 10}, "the big answers: %r %s" % (out, err))
        check(took >= 1.1, "10 answers of 2 MB to one user sent in %.2f s, under the 1.15 s its budget "
              "allows" % took)


@test
def load_control_load_refuses_what_the_user_cannot_read(tmp):
    """A group member's raw `load` of a root-only file, a FIFO, /dev/zero,
    a symlink and a 2 MiB file: each refused at once, saying why, with no
    text of the file; a world-readable junk file is refused naming
    FILE:LINE without its text. Root's FIFO and /dev/zero loads are
    refused too (they used to hold gadgetd for good)."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        pid = d.proc.pid
        fd0, rss0 = fd_count(pid), rss_kib(pid)
        secret = os.path.join(tmp, "shadow.policy")
        with open(secret, "w") as f:
            f.write("root:$6$SECRETHASH:19000:0:99999:7:::\n")
        os.chmod(secret, 0o600)
        junk = os.path.join(tmp, "junk.policy")
        with open(junk, "w") as f:
            f.write("TOPSECRETJUNK is not a key\n[Gadget]\nName=junk\nSECRETKEY=SECRETVALUE\n")
        os.chmod(junk, 0o644)
        fifo = os.path.join(tmp, "fifo.policy")
        os.mkfifo(fifo)
        os.chmod(fifo, 0o666)
        link = os.path.join(tmp, "link.policy")
        os.symlink(os.path.join(d.pol, "good.policy"), link)
        big = os.path.join(tmp, "big.policy")
        with open(big, "w") as f:
            f.write("#" * (2 << 20))
        os.chmod(big, 0o644)
        with Healthy(d, "good", "echo"):
            cases = [(NOBODY, secret, "Permission denied"), (NOBODY, junk, "gadgetctl check FILE` shows it"),
                     (NOBODY, junk, "junk.policy:1:"),
                     (NOBODY, fifo, "not a regular file"), (NOBODY, "/dev/zero", "not a regular file"),
                     (NOBODY, link, "symbolic link"), (NOBODY, big, "larger than 1 MiB"),
                     (None, fifo, "not a regular file"), (None, "/dev/zero", "not a regular file")]
            for user, path, want in cases:
                a = load_as(d, user, path)
                check(a["kind"] == "error" and want in a["message"], "load %s as %r: %r" % (path, user, a))
                for text in ("SECRET", "TOPSECRETJUNK"):
                    check(text not in a["message"], "load %s echoed the file: %r" % (path, a))
            a = load_as(d, NOBODY, os.path.join(d.pol, "good.policy"))
            check(a["kind"] == "done", "a readable good policy: %r" % a)
            check(fd_count(pid) <= fd0 + 4, "gadgetd holds %d fds, was %d" % (fd_count(pid), fd0))
            check(rss_growth(pid, rss0) < 16 * 1024, "RSS grew by %d KiB" % rss_growth(pid, rss0))
        a = load_as(d, None, junk)
        check("TOPSECRETJUNK" in a["message"], "root sees the text of its errors: %r" % a)
        wait_for(lambda: fd_count(pid) <= fd0 + 2, what="gadgetd's fds back")


def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def stalled(pid):
    """Whether a thread of gadgetd waits in the stalled open()."""
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            if "fanotify" in open("/proc/%d/task/%s/wchan" % (pid, t)).read():
                return True
        except OSError:
            pass
    return False


@test
def load_control_load_that_never_opens(tmp):
    """A policy file whose open() does not return (a fanotify permission
    mark nobody answers, like a file on a FUSE mount its user does not
    serve): the member's load waits in a thread of its own while gadgetd
    answers everyone; her second load is told busy (ControlMaxLoads: one
    per user at a time); root's loads still work; once the open returns,
    her load is answered."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        pid = d.proc.pid
        threads0 = threads(pid)
        stuck = policy(tmp, "stuck")
        holder = attack(None, "stall-open", stuck, "30")
        line = holder.stdout.readline()
        if not line.startswith("stalling"):
            harness.need("fanotify permission events", "Debian's kernel has them, this one did not: %r" % line)
        with Healthy(d, "good", "echo"):
            p = attack(NOBODY, "control-load", d.sock, stuck)
            wait_for(lambda: stalled(pid), what="the load's thread in open()")
            check(p.poll() is None, "the stuck load was answered")
            a = load_as(d, NOBODY, os.path.join(d.pol, "good.policy"))
            check(a["kind"] == "error" and "busy" in a["message"] and "ControlMaxLoads" in a["message"],
                  "her second load: %r" % a)
            a = load_as(d, None, policy(d.pol, "other"))
            check(a["kind"] == "done" and "loaded other" in a["message"], "root's load: %r" % a)
            check(d.ctl("list").returncode == 0, "root's list")
            holder.stdin.close()
            holder.wait(timeout=30)
            out, err = p.communicate(timeout=30)
            check(p.returncode == 0 and json.loads(out)["kind"] == "done", "her load at last: %r %r" % (out, err))
        wait_for(lambda: threads(pid) == threads0, what="the load's thread to end")
        wait_for(lambda: d.state("stuck") == "ready", what="stuck ready")


@test
def load_control_root_loads_wait_their_turn(tmp):
    """Root pipelines 12 loads on one connection, three times its budget of
    reading threads (ControlMaxLoads=4): the loads beyond it wait their
    turn, every one is answered "done" and every gadget starts."""
    sys.path.insert(0, os.path.dirname(ATTACKS))
    import attacks
    with Daemon(tmp) as d:
        paths = [policy(tmp, "g%02d" % i) for i in range(12)]
        s = attacks.connect_unix(d.sock)
        s.sendall(b"".join(attacks.request(i + 1, 2, p) for i, p in enumerate(paths)))
        s.settimeout(60)
        buf, kinds = b"", []
        while len(kinds) < len(paths):
            while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "little"):
                chunk = s.recv(65536)
                check(chunk, "gadgetd closed the connection after %d answers: %r" % (len(kinds), kinds))
                buf += chunk
            n = int.from_bytes(buf[:4], "little")
            m = attacks.parse(buf[4:4 + n])
            buf = buf[4 + n:]
            kinds.append("done" if 3 in m else "error: %r" % attacks.parse(m[2][0]) if 2 in m else "other")
        check(kinds == ["done"] * len(paths), "answers: %r" % kinds)
        wait_for(lambda: all(d.state("g%02d" % i) == "ready" for i in range(12)), what="the 12 gadgets ready")


@test
def load_control_waits_bounded_per_connection(tmp):
    """A client pipelines 40 `load`s of an unchanged gadget that is still
    starting (each answered once it is ready): 16 of them wait
    (CONTROL_WAITING_MAX, per connection), the other 24 are refused at once
    as busy, naming that bound; the waits take none of the gadget's
    CallsQueuedMax=2, which its callers' calls need. Another client's waits
    end with it when it leaves. Once the gadget is stopped, each of the 16
    is answered: none is lost."""
    with Daemon(tmp) as d:
        path = policy(d.tmp, "mute", "Arguments=mute 600\nStartTimeout=10min\nCallsQueuedMax=2\n")
        r = d.ctl("load", "--no-block", path)
        check(r.returncode == 0, "load: %r" % r.stderr)
        p = attack(None, "control-waits", d.sock, "40", "24", path)
        first = counts(p.stdout.readline())
        check(first == {"answered": 24, "busy_connection": 24, "busy_queued": 0, "done": 0},
              "the first 24 answers: %r" % first)
        check(d.state("mute") == "starting", "mute is %s" % d.state("mute"))
        # Another client's 16 waits end with it when it leaves.
        sys.path.insert(0, os.path.dirname(ATTACKS))
        import attacks
        s = attacks.connect_unix(d.sock)
        s.sendall(b"".join(attacks.request(i + 1, 2, path) for i in range(16)))
        s.sendall(attacks.request(17, 5))
        check([a["kind"] for a in attacks.answers(s, 1, 60)] == ["other"], "a list after 16 waiting loads")
        s.close()
        # A caller's calls still find their CallsQueuedMax=2 free: they
        # wait for the start (until the stop answers them), not busy.
        calls = subprocess.Popen([harness.CALLFLOOD, d.sock, "mute", "echo", "2"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.status("mute")["in_flight"] == 2, what="the caller's 2 calls waiting")
        r = d.ctl("stop", "mute")
        check(r.returncode == 0, "stop: %r" % r.stderr)
        out, err = p.communicate("go\n", timeout=120)
        rest = counts(out)
        check(rest.get("answered") == 16 and rest.get("busy_connection") == 0 and rest.get("busy_queued") == 0,
              "the 16 waits, answered once mute stopped: %r %s" % (rest, err))
        out, err = calls.communicate(timeout=60)
        check("error 7 " not in out and sum(int(l.split()[-1]) for l in out.splitlines()) == 2,
              "the caller's 2 calls, answered at the stop, none busy: %r %s" % (out, err))


@test
def load_control_reexec_flood(tmp):
    """gadgetctl daemon-reexec from a group member, 30 times: each refused
    as root's only, no re-exec; then 10 from root at once: each answered
    (re-executed, one after the other, or busy), while a healthy caller's
    calls are all answered once and the gadget keeps its pid."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        ready(d)
        pid = json.loads(d.ctl("--json", "status", "good").stdout)["pid"]
        with Healthy(d, "good"):
            for _ in range(30):
                r = d.ctl("daemon-reexec", user=NOBODY, groups=(65534,))
                check(r.returncode != 0 and "daemon-reexec is root's only" in r.stderr, "member's re-exec: %r" % r)
            check("re-executing" not in d.logtext(), "a member's request re-executed gadgetd")
            procs = [subprocess.Popen([harness.GADGETCTL, "--socket", d.sock, "daemon-reexec"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(10)]
            outs = [p.communicate(timeout=120) for p in procs]
            done = sum(p.returncode == 0 and "re-executed in place" in o for p, (o, e) in zip(procs, outs))
            busy = sum(p.returncode != 0 and "already under way" in e for p, (o, e) in zip(procs, outs))
            check(done >= 1 and done + busy == 10, "root's re-execs: %r" % [(p.returncode, o, e) for p, (o, e)
                                                                            in zip(procs, outs)])
            print("10 re-execs at once: %d done, %d busy" % (done, busy))
        check(json.loads(d.ctl("--json", "status", "good").stdout)["pid"] == pid, "the gadget's pid changed")
