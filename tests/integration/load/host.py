"""The host around gadgetd: secret files in directories others may write,
a second gadgetd on the same socket or state directory, host uids across
every gadgetd of the host, and `gadgetd run`'s stdio and signals."""
import os
import signal
import socket
import subprocess
import time

from harness import GADGETD, PROBE, Daemon, Healthy, check, children, gadgetd_run, policy, test, wait_for

# No RSS bound of gadgetd here (tests/integration/load_test.py --rss).
RSS_BOUND = False


# --- gadgetd run: stdio and signals -----------------------------------------

@test
def host_run_append_keeps_file(tmp):
    """`gadgetd run POLICY >> file`: the program gets a pipe, not the file;
    its ftruncate(1, 0) cannot erase what the file held, and its output is
    appended after it."""
    out = os.path.join(tmp, "out.txt")
    with open(out, "w") as f:
        f.write("kept line\n")
    pol = policy(tmp, "probe", exec_path=PROBE)
    with open(out, "a") as f:
        r = subprocess.run(gadgetd_run(tmp) + [pol, "--", "truncate"], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    check(r.returncode == 0, "gadgetd run failed: %r" % r.stderr)
    text = open(out).read()
    check(text.startswith("kept line\n"), "the caller's file was changed: %r" % text)
    check("truncate: EINVAL" in text and text.endswith("written after the truncate\n"),
          "the program's output was not appended as written: %r" % text)


def caller_with_ignored_and_blocked():
    """As a careless caller would start gadgetd run: SIGPIPE and SIGUSR1
    ignored, SIGUSR2 blocked."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})


@test
def host_run_signals_default_at_exec(tmp):
    """The program starts with every disposition at default and an empty
    mask, whatever gadgetd (SIGPIPE ignored) or its caller ignored or
    blocked."""
    pol = policy(tmp, "probe", exec_path=PROBE)
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--", "signals"], capture_output=True, text=True, timeout=60,
                       preexec_fn=caller_with_ignored_and_blocked)
    check(r.returncode == 0, "probe failed: %r" % r.stderr)
    facts = dict(l.split(": ", 1) for l in r.stdout.splitlines() if ": " in l)
    check(facts.get("sigpipe") == "default", "SIGPIPE at exec: %r" % facts)
    check(facts.get("ignored") == "0", "signals ignored at exec: %r" % facts)
    check(facts.get("blocked") == "0", "signals blocked at exec: %r" % facts)


@test
def host_run_signals_forwarded(tmp):
    """HUP, USR1, USR2 and ALRM sent to gadgetd run reach the program (they
    would otherwise end gadgetd run without a word); TERM ends it with the
    program's own status. PWR, ignored when gadgetd run started, stays
    ignored: sent first, it does not reach the program (which it would end)."""
    pol = policy(tmp, "trap", "SystemLibraries=yes\n", exec_path="/bin/sh")
    script = ("for s in HUP USR1 USR2 ALRM; do trap \"echo got-$s\" $s; done; "
              "trap 'echo got-TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done")
    sigs = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)

    def defaults():
        # A signal ignored when gadgetd run starts (nohup, as a run of
        # this suite under nohup has HUP) is left ignored by design.
        for sig in sigs:
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGPWR, signal.SIG_IGN)

    p = subprocess.Popen(gadgetd_run(tmp) + [pol, "--", "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=defaults)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        p.send_signal(signal.SIGPWR)
        for sig in sigs:
            p.send_signal(sig)
            line = p.stdout.readline().strip()
            check(line == "got-" + sig.name[3:], "after %s: %r (gadgetd run %s)" %
                  (sig.name, line, "alive" if p.poll() is None else "ended %s" % p.returncode))
        p.terminate()
        out, err = p.communicate(timeout=30)
        check("got-TERM" in out and p.returncode == 7, "status %s out %r err %r" % (p.returncode, out, err))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()



@test
def host_run_realtime_signal_forwarded(tmp):
    """A real-time signal, fatal by default, does not end gadgetd run
    without a word: the program gets it, and gadgetd run says so and exits
    with 128 + its number."""
    pol = policy(tmp, "sleepy", "SystemLibraries=yes\n", exec_path="/bin/sh")
    p = subprocess.Popen(gadgetd_run(tmp) + [pol, "--", "-c", "echo ready; exec sleep 20"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        sig = signal.SIGRTMIN + 2
        p.send_signal(sig)
        out, err = p.communicate(timeout=30)
        check(p.returncode == 128 + sig and "killed by signal SIGRTMIN+2" in err,
              "status %s, stderr %r" % (p.returncode, err))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()

# --- secrets ----------------------------------------------------------------

USER = 54321  # owns the directory the secret lies in, as a user would


def secret_setup(tmp):
    """A user's directory holding the secret file the policy names, and a
    root-only file elsewhere. Returns (file named by the policy, its
    directory, the root-only file)."""
    home = os.path.join(tmp, "home")
    sdir = os.path.join(home, "secrets")
    os.makedirs(sdir)
    for p in (home, sdir):
        os.chown(p, USER, USER)
        os.chmod(p, 0o755)
    key = os.path.join(sdir, "key")
    with open(key, "w") as f:
        f.write("user-value\n")
    os.chmod(key, 0o644)
    rootdir = os.path.join(tmp, "root-only")
    os.mkdir(rootdir, 0o700)
    with open(os.path.join(rootdir, "key"), "w") as f:
        f.write("ROOT-ONLY-value\n")
    return key, sdir, rootdir


def holder(d, key, extra="", gadget_keys=""):
    """A gadget "holder" with secret TOKEN from key, and the healthy "good"."""
    policy(d.pol, "good")
    policy(d.pol, "holder", "%s[Binding TOKEN]\nType=secret\nFile=%s\n%s" % (gadget_keys, key, extra))
    check(d.ctl("reload").returncode == 0, "reload failed")
    for n in ("good", "holder"):
        wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")


def token(d):
    r = d.ctl("call", "holder", "binding", '{"binding": "TOKEN", "op": "get"}')
    return r.stdout.strip()


def restart_fails(d, name, what):
    """Restarts name, whose new process cannot start: the restart fails
    saying why and the running process serves on (a restart without a
    gap), its status naming the cause; returns that cause."""
    pid = d.list()[name]["pid"]
    r = d.ctl("restart", name)
    check(r.returncode != 0 and "did not start" in r.stderr, "%s: %r" % (what, r))
    g = d.list()[name]
    check(g["state"] == "ready" and g["pid"] == pid and g.get("cause") and g["cause"] in r.stderr,
          "%s: the old process serves on, its status naming the cause: %r" % (what, g))
    return g["cause"]


@test
def host_secret_dir_swapped_for_symlink(tmp):
    """The user swaps the secret's directory for a symlink to a root-only
    directory: the restart's new process does not start, saying why (the
    running one serves on), and the gadget never gets the root-only file."""
    key, sdir, rootdir = secret_setup(tmp)
    with Daemon(tmp) as d:
        holder(d, key)
        check(token(d) == '"user-value"', "the secret before the swap: %r" % token(d))
        with Healthy(d, "good"):
            os.rename(sdir, sdir + ".old")
            os.symlink(rootdir, sdir)
            cause = restart_fails(d, "holder", "the start after the swap to fail")
        check("secret TOKEN" in cause and "symlink" in cause, "cause: %r" % cause)
        check("ROOT-ONLY" not in token(d) + d.logtext(), "the gadget got the root-only file")


@test
def host_secret_fifo_refused_without_blocking(tmp):
    """The user swaps the secret file for a FIFO: a restart, which reads
    the policy again, is refused ("not a regular file") and the gadget runs
    on; the next start that does not read the policy (Restart= after a
    crash) fails at once, while the healthy gadget keeps answering; gadgetd
    never waits for a writer."""
    key, sdir, rootdir = secret_setup(tmp)
    with Daemon(tmp) as d:
        holder(d, key, gadget_keys="Restart=on-failure\n")
        try:
            with Healthy(d, "good"):
                os.unlink(key)
                os.mkfifo(key, 0o666)
                os.chown(key, USER, USER)
                r = d.ctl("restart", "holder")
                check(r.returncode == 1 and "not a regular file" in r.stderr and d.state("holder") == "ready",
                      "restart with a FIFO secret: %r" % (r,))
                d.ctl("call", "holder", "crash")
                cause = wait_for(lambda: d.state("holder") == "failed" and d.list()["holder"].get("cause"),
                                 what="the start with a FIFO secret to fail")
                time.sleep(0.5)  # the healthy caller keeps calling after the refusal
            check("secret TOKEN" in cause and "not a regular file" in cause, "cause: %r" % cause)
        finally:
            # Were gadgetd blocked in open(), a writer lets it go, so the
            # test fails instead of hanging.
            try:
                os.close(os.open(key, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


@test
def host_secret_oversized_refused(tmp):
    """A secret file swapped for a large one is refused by its size, not
    read: the restart's new process does not start, its cause naming
    MaxSize=."""
    key, sdir, rootdir = secret_setup(tmp)
    with Daemon(tmp) as d:
        holder(d, key, "MaxSize=1K\n")
        with Healthy(d, "good"):
            with open(key, "w") as f:
                f.truncate(64 << 20)  # sparse: 64 MiB of zeros
            cause = restart_fails(d, "holder", "the start with a large secret to fail")
        check("secret TOKEN" in cause and "larger than MaxSize= (1024 bytes)" in cause, "cause: %r" % cause)


# --- host uids ----------------------------------------------------------------

def uid_base():
    """A range of host uids for this test alone, away from the default one
    that other gadgetd processes of the machine may be using."""
    return 0x60000000 + (os.getpid() % 4096) * 4096


def worker_uids(d):
    return {m.split()[1] for _, m in children(d) if m}


@test
def host_uids_unique_across_gadgetd(tmp):
    """The same gadget name under the daemon and under `gadgetd run`, each
    with its own --run-dir, gets a different host uid at the same time."""
    base = uid_base()
    with Daemon(tmp, extra=["--uid-base", str(base)]) as d:
        for n in ("good", "same"):
            policy(d.pol, n)
        check(d.ctl("reload").returncode == 0, "reload failed")
        for n in ("good", "same"):
            wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")
        with Healthy(d, "good"):
            held = worker_uids(d)
            check(len(held) == 2, "the daemon's gadgets hold host uids %r" % held)
            other = os.path.join(tmp, "other")
            os.mkdir(other)
            pol = policy(other, "same", "SystemLibraries=yes\n", exec_path="/bin/sh")
            r = subprocess.run(gadgetd_run(other, "--uid-base", str(base)) +
                               [pol, "--", "-c", "cat /proc/self/uid_map"],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, "gadgetd run failed: %r" % r.stderr)
            mine = r.stdout.split()[1]
            check(mine not in held, "gadgetd run got host uid %s, held by the daemon (%r)" % (mine, held))


@test
def host_uid_pool_exhausted(tmp):
    """With every uid of the range held by another gadgetd, gadgetd run
    fails to start with a clear error, and the daemon's gadget goes on."""
    base = uid_base()
    with Daemon(tmp, extra=["--uid-base", str(base), "--uid-count", "1"]) as d:
        policy(d.pol, "good")
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("good") == "ready", what="good ready")
        with Healthy(d, "good"):
            other = os.path.join(tmp, "other")
            os.mkdir(other)
            pol = policy(other, "late")
            r = subprocess.run(gadgetd_run(other, "--uid-base", str(base), "--uid-count", "1") + [pol],
                               capture_output=True, text=True, timeout=60)
        check(r.returncode == 125, "gadgetd run: status %d, stderr %r" % (r.returncode, r.stderr))
        check("no free host uid: all 1 of %d..%d are held" % (base, base) in r.stderr, "stderr: %r" % r.stderr)


# --- one instance -------------------------------------------------------------

def second_gadgetd(tmp, state, sock, run="run2"):
    """Starts another gadgetd on state and sock; returns (status, output).
    One that does not refuse is stopped after a while: the test fails."""
    pol = os.path.join(tmp, "policy2.d")
    os.makedirs(pol, exist_ok=True)
    cmd = [GADGETD, "--policy-dir", pol, "--state-dir", state, "--socket", sock, "--run-dir",
           os.path.join(tmp, run)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
        return r.returncode, r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        return None, "it ran: %r" % (e.stderr,)


@test
def host_second_daemon_refused(tmp):
    """A second gadgetd on the same state directory, or on the same control
    socket, refuses to start and names the running one's pid; so does a
    `gadgetd run` on the daemon's state directory. The first stays
    reachable throughout."""
    with Daemon(tmp) as d:
        policy(d.pol, "good")
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("good") == "ready", what="good ready")
        state = os.path.join(tmp, "state")
        pid = "pid %d" % d.proc.pid
        with Healthy(d, "good"):
            rc, out = second_gadgetd(tmp, state, os.path.join(tmp, "other.sock"))
            check(rc not in (0, None) and "state directory %s is in use" % state in out and pid in out,
                  "same state directory: status %r, %r" % (rc, out))
            rc, out = second_gadgetd(tmp, os.path.join(tmp, "state2"), d.sock)
            check(rc not in (0, None) and "control socket %s is in use" % d.sock in out and pid in out,
                  "same socket: status %r, %r" % (rc, out))
            run = policy(tmp, "good")
            r = subprocess.run([GADGETD, "run", "--state-dir", state, "--run-dir", os.path.join(tmp, "run3"),
                                run], capture_output=True, text=True, timeout=30)
            check(r.returncode == 125 and pid in r.stderr, "gadgetd run on the daemon's state directory: "
                  "status %d, %r" % (r.returncode, r.stderr))
            check(os.path.exists(d.sock), "the running gadgetd's socket is gone")
        check(d.ctl("list").returncode == 0, "the first gadgetd is not reachable")


@test
def host_gadgetd_run_shares_state(tmp):
    """`gadgetd run` processes share a state directory, even for the same
    gadget (tests and benchmarks run many at once): only a daemon's is
    refused."""
    pol = policy(tmp, "twice", "SystemLibraries=yes\n", exec_path="/bin/sh")
    first = subprocess.Popen(gadgetd_run(tmp) + [pol, "--", "-c", "echo ready; sleep 20"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(first.stdout.readline().strip() == "ready", "the first gadgetd run did not start")
        r = subprocess.run(gadgetd_run(tmp) + [pol, "--", "-c", "echo second"], capture_output=True, text=True,
                           timeout=30)
        check(r.returncode == 0 and r.stdout == "second\n", "a second gadgetd run: status %d, %r %r" %
              (r.returncode, r.stdout, r.stderr))
    finally:
        first.kill()
        first.wait()


@test
def host_stale_socket_removed(tmp):
    """A socket left by a gadgetd killed with SIGKILL is removed by the next
    gadgetd (a connect to it fails); one where another program listens is
    left alone, and gadgetd refuses to start."""
    with Daemon(tmp) as d:
        d.proc.kill()
        d.proc.wait()
        check(os.path.exists(d.sock), "no stale socket left to test with")
        p = subprocess.Popen([GADGETD, "--policy-dir", d.pol, "--state-dir", os.path.join(tmp, "state"),
                              "--socket", d.sock, "--run-dir", os.path.join(tmp, "run")],
                             stdout=d.log, stderr=subprocess.STDOUT)
        d.proc = p  # stopped by the Daemon at the end
        wait_for(lambda: d.ctl("list").returncode == 0, what="the new gadgetd to answer on the old path")
    foreign = os.path.join(tmp, "foreign.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(foreign)
    listener.listen(1)
    try:
        rc, out = second_gadgetd(tmp, os.path.join(tmp, "state3"), foreign)
        check(rc not in (0, None) and "another process accepts connections" in out,
              "a live foreign socket: status %r, %r" % (rc, out))
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(foreign)  # still the listener's
        c.close()
    finally:
        listener.close()
