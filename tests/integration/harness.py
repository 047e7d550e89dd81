"""The integration tests' small harness: one test per process, named on
the command line; `--list` prints the names (meson registers each)."""
import ctypes
import hashlib
import json
import os
import socket
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parts import need, skip  # noqa: E402,F401  (the one skip rule; tests import it from here)

GADGETD = os.environ.get("GADGETD", "")
GADGETCTL = os.environ.get("GADGETCTL", "")
TESTGADGET = os.environ.get("TESTGADGET", "")
PROBE = os.environ.get("PROBE", "")
CALLFLOOD = os.environ.get("CALLFLOOD", "")
EXAMPLES = os.environ.get("EXAMPLES", "")

TESTS = {}

# What the sanitizers print: "ERROR: AddressSanitizer: ...", "LeakSanitizer",
# UBSan's "file.c:12:3: runtime error: ...".
SANITIZER_MARKS = ("Sanitizer", "runtime error")
# Set (by scripts/fuzz-seeds) to a directory: every policy a test writes
# and every JSON argument it passes is kept there as a fuzzing seed.
SEEDS = os.environ.get("GADGETD_FUZZ_SEEDS", "")


class Failure(Exception):
    pass


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def sanitizer_check(text, what):
    """The one place that reads a process's output for sanitizer reports:
    any report fails the test, whatever the exit status was."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text and any(m in text for m in SANITIZER_MARKS):
        raise Failure("sanitizer report from %s:\n%s" % (what, text[-4000:]))


def _seed(kind, data):
    if not SEEDS or data is None:
        return
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(SEEDS, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def _seed_args(args):
    """Keeps the JSON arguments and policy files of one command line."""
    args = [a if isinstance(a, str) else str(a) for a in args]
    for i, a in enumerate(args):
        if a in ("call", "--call") and i + 2 < len(args) and args[i + 2][:1] in '{["-0123456789tfn':
            _seed("json", args[i + 2])
        if a.endswith(".policy") and os.path.isfile(a):
            with open(a, "rb") as f:
                _seed("policy", f.read())


def _is_gadgetctl(args):
    """args runs gadgetctl (itself, or under setpriv and the like)."""
    return bool(GADGETCTL) and isinstance(args, (list, tuple)) and GADGETCTL in args[:8]


def _without_exit_leak_check(env):
    """env (None: the test's) with LeakSanitizer's check at exit off, in a
    sanitizer build. For gadgetctl only: a command that exits hands all
    its memory back, and one that runs on (logs -f, top) ends by a signal,
    which LeakSanitizer never checks, so its leak check at exit guards
    nothing a user runs; it cost 36 ms of CPU (3,000 page faults) at each
    of the thousands of gadgetctl runs of a test pass, 0.5-1 s of a
    median test's 2 s, measured. ASan's and UBSan's checks stay on; so
    does the leak check of gadgetd and of every other program."""
    env = dict(os.environ if env is None else env)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


class _CheckedPopen(subprocess.Popen):
    """Every process a test starts (subprocess.run and Popen alike): what
    it wrote to a captured stderr (or to a captured stdout that stderr was
    merged into) is checked for sanitizer reports when the test collects
    it. A stderr the test throws away goes to the test's own stderr
    instead, which main() checks at the end."""

    def __init__(self, args, *rest, **kw):
        if kw.get("stderr") == subprocess.DEVNULL:
            kw["stderr"] = None
        self._merged = kw.get("stderr") == subprocess.STDOUT
        if SEEDS and isinstance(args, (list, tuple)):
            _seed_args(args)
        if _is_gadgetctl(args):
            kw["env"] = _without_exit_leak_check(kw.get("env"))
        super().__init__(args, *rest, **kw)

    def communicate(self, *a, **kw):
        out, err = super().communicate(*a, **kw)
        what = " ".join(os.path.basename(str(x)) for x in self.args[:3]) if isinstance(self.args, (list, tuple)) \
            else str(self.args)
        sanitizer_check(err, what)
        if self._merged:
            sanitizer_check(out, what)
        return out, err


subprocess.Popen = _CheckedPopen  # subprocess.run starts its process through this name too


def policy(dirname, name, body="", exec_path=None):
    path = os.path.join(dirname, name + ".policy")
    with open(path, "w") as f:
        f.write("[Gadget]\nName=%s\nExec=%s\n%s" % (name, exec_path or TESTGADGET, body))
    os.chmod(path, 0o644)  # gadgetd (root) refuses policies others may write
    _seed("policy", open(path, "rb").read())
    return path


def gadgetd_run(tmp, *opts):
    """The start of a `gadgetd run` command line on tmp's own state and run
    directories (gadgetd runs sharing tmp share the uid pool)."""
    return [GADGETD, "run", *opts, "--run-dir", os.path.join(tmp, "run"), "--state-dir",
            os.path.join(tmp, "state")]


def run_probe(tmp, *args, body="", opts=()):
    """Runs the probe with args under a policy of body; returns (the
    completed process, {key: [values]} of its "key: value" lines)."""
    pol = policy(tmp, "probe", body, exec_path=PROBE)
    r = subprocess.run(gadgetd_run(tmp, *opts) + [pol, "--", *args], capture_output=True, text=True, timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(": ")
        out.setdefault(k, []).append(v)
    return r, out


def children(d):
    """(pid, uid_map) of gadgetd's child processes. A gadget's PID 1 has
    its id map; the spare sandbox shell, not yet any gadget's, has none."""
    out = []
    for pid in open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split():
        try:
            out.append((int(pid), open("/proc/%s/uid_map" % pid).read().strip()))
        except OSError:
            pass  # gone meanwhile
    return out


def workers(d):
    return [pid for pid, idmap in children(d) if idmap]


def spare(d):
    """The pid of gadgetd's spare sandbox shell, once it has one."""
    shells = [pid for pid, idmap in children(d) if not idmap]
    check(len(shells) <= 1, "more than one spare shell: %r" % shells)
    return shells[0] if shells else None


def mounts():
    """{v1 controller: (root, mount point)} and the cgroup2 mount point."""
    v1, v2 = {}, None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields, tail = pre.split(), post.split()
            if tail[0] == "cgroup":
                for c in tail[2].split(","):
                    v1.setdefault(c, (fields[3], fields[4]))
            elif tail[0] == "cgroup2" and not v2:
                v2 = (fields[3], fields[4])
    return v1, v2


def cgroup_dirs(pid):
    """{controller or "v2": directory of pid's cgroup} as seen from here."""
    v1, v2 = mounts()
    out = {}
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            targets = [("v2", v2)] if hid == "0" else [(c, v1.get(c)) for c in ctrls.split(",")]
            for name, m in targets:
                if not m:
                    continue
                root, point = m
                rel = path if root == "/" else path[len(root):]
                out[name] = (point + rel).rstrip("/")
    return out


def wait_for(cond, timeout=20, what="condition"):
    """cond's first true value, asked every 50 ms for timeout s; what
    names it in the failure (a callable: its text then, with what was
    seen last)."""
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    check(False, "timed out waiting for " + (what() if callable(what) else what))



def free_port():
    """A TCP port free on 127.0.0.1 now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    """A gadgetd on temporary directories, stopped at the end."""

    def __init__(self, tmp, extra=(), wrap=(), env=None):
        """wrap: a command line gadgetd runs under (e.g. a private mount
        namespace); env: gadgetd's environment instead of the test's."""
        self.tmp = tmp
        self.wrap = list(wrap)
        self.env = env
        self.pol = os.path.join(tmp, "policy.d")
        os.makedirs(self.pol, exist_ok=True)
        self.sock = os.path.join(tmp, "run", "control.sock")
        self.log = open(os.path.join(tmp, "gadgetd.log"), "w+")
        self.extra = list(extra)
        self.proc = None

    def start(self, stale_socket=False):
        """Starts gadgetd; a socket left by a gadgetd killed earlier in
        the test is removed first, unless stale_socket (gadgetd's own
        clean-up is under test): then gadgetd must answer on it."""
        if os.path.exists(self.sock) and not stale_socket:
            os.unlink(self.sock)
        self.proc = subprocess.Popen(
            [*self.wrap, GADGETD, "--policy-dir", self.pol, "--state-dir", os.path.join(self.tmp, "state"),
             "--socket", self.sock, "--run-dir", os.path.join(self.tmp, "run"), *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        if stale_socket:
            wait_for(lambda: self.ctl("list", timeout=10).returncode == 0 or self.proc.poll() is not None,
                     what="gadgetd to answer on its control socket")
            check(self.proc.poll() is None, "gadgetd ended (status %r): %s" % (self.proc.returncode,
                                                                         self.logtext()[-2000:]))
        else:
            wait_for(lambda: os.path.exists(self.sock), what="the control socket")
        return self

    def ctl(self, *args, user=None, groups=(), timeout=60):
        """gadgetctl, as user (uid, gid) with exactly the supplementary groups given, or as root."""
        cmd = [GADGETCTL, "--socket", self.sock, *args]
        if user:
            grp = ["--groups=" + ",".join(str(g) for g in groups)] if groups else ["--clear-groups"]
            cmd = ["setpriv", "--reuid=%d" % user[0], "--regid=%d" % user[1], *grp] + cmd
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def list(self):
        r = self.ctl("--json", "list")
        check(r.returncode == 0, "list failed: %r" % r.stderr)
        return {g["name"]: g for g in json.loads(r.stdout)}

    def state(self, name):
        return self.list().get(name, {}).get("state")

    def add(self, name, body=""):
        """Writes policy name (body: its keys after Name= and Exec=) into
        the policy directory and reloads."""
        policy(self.pol, name, body)
        r = self.ctl("reload")
        check(r.returncode == 0, "reload: %r" % r.stderr)

    def status(self, name):
        """gadgetctl --json status NAME, as a dict."""
        r = self.ctl("--json", "status", name)
        check(r.returncode == 0, "status %s: %r" % (name, r.stderr))
        return json.loads(r.stdout)

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        return self.proc.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        stopped_here = bool(self.proc and self.proc.poll() is None)
        if stopped_here:
            self.stop()
        # Under the sanitizer build, gadgetd reports what it found at exit.
        sanitizer_check(self.logtext(), "gadgetd")
        # gadgetd's own end: asked to stop here, it exits 0; ended before
        # (a test's kill, a refused start), never by a crash's signal.
        if exc[0] is None and self.proc:
            rc = self.proc.returncode
            crash = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
            check(rc == 0 if stopped_here else -rc not in crash,
                  "gadgetd exited with status %r%s: %s" % (rc, " on SIGTERM" if stopped_here else "",
                                                          self.logtext()[-1500:]))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def fd_map(pid):
    """{fd: what it points at} of pid (those closed while read left out)."""
    out = {}
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(f)] = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            pass  # closed meanwhile
    return out


def fd_links(pid):
    """What pid's fds point at (those closed while they are read left out)."""
    return list(fd_map(pid).values())


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid):
    """utime + stime of pid in seconds, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sanitized(pid):
    """Under AddressSanitizer, whose quarantine keeps freed memory
    resident, RSS bounds are not checked (they hold for the normal build)."""
    return "libasan" in open("/proc/%d/maps" % pid).read()


def rss_growth(pid, rss0):
    """RSS above rss0 in KiB (0 when sanitized)."""
    return 0 if sanitized(pid) else rss_kib(pid) - rss0


def unload(d, name):
    """Removes gadget name's policy and reloads: the gadget is gone."""
    os.unlink(os.path.join(d.pol, name + ".policy"))
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: name not in d.list(), timeout=10, what="%s unloaded" % name)


def catches(pid, sig):
    """Whether pid has a handler for sig (SigCgt of /proc/PID/status)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


class Healthy:
    """The healthy caller of the hostile-load tests: while the block runs,
    `callflood --steady` calls gadget.method one call at a time through
    the control socket. At the end, every call it made must have been
    answered without error; counts and latencies are in self.result."""

    def __init__(self, d, gadget, method="echo", args=None):
        cmd = [CALLFLOOD, "--steady", d.sock, gadget, method] + ([args] if args else [])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.result = {}
        # Until it catches SIGTERM, finish() would kill it unheard: a block
        # shorter than its start on a loaded host (seen under ASan).
        wait_for(lambda: self.proc.poll() is not None or catches(self.proc.pid, signal.SIGTERM),
                 what="the healthy caller's start")

    def __enter__(self):
        return self

    def finish(self):
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        for line in out.splitlines():
            parts = line.split()
            if parts[0] == "error":
                self.result["error %s" % parts[1]] = int(parts[2])
            else:
                self.result[parts[0]] = int(parts[1])
        check(self.proc.returncode == 0, "healthy caller failed: %r" % err)
        return self.result

    def __exit__(self, exc, *rest):
        if exc is not None:  # the test's own failure is the one to report
            try:
                self.finish()
            except Failure:
                pass
            return
        r = self.finish()
        if exc is None:
            check(r.get("sent", 0) > 0, "the healthy caller made no call")
            check(r.get("ok") == r.get("sent") and r.get("unanswered") == 0 and r.get("mismatched", 0) == 0,
                  "healthy calls not all answered once, in turn: %r" % r)


class Paced:
    """The steady caller of the restart and reload tests: `callflood
    --paced` calls gadget's echo through d's control socket at rate calls/s,
    pipelined, each with its sequence number, from its start until finish()
    (at most max_calls). check_all_answered: more than min_sent calls, each
    answered once, successfully, with its own number."""

    def __init__(self, d, gadget, min_sent, rate=300, max_calls=60000):
        self.proc = subprocess.Popen([CALLFLOOD, "--paced", str(rate), str(max_calls), d.sock, gadget, "echo"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.min_sent = min_sent
        self.result = {}
        self.err = ""

    def answered_some(self, d, gadget):
        """Waits until d counts 10 more calls to gadget (calls flow again),
        so that each event comes with calls coming."""
        def calls():
            r = d.ctl("--json", "status", gadget)
            check(r.returncode == 0, "status %s: %r" % (gadget, r.stderr))
            return json.loads(r.stdout)["calls"]
        n = calls()
        wait_for(lambda: calls() > n + 10, what="the paced caller's calls to %s" % gadget)

    def finish(self):
        self.proc.send_signal(signal.SIGTERM)
        out, self.err = self.proc.communicate(timeout=90)
        for line in out.splitlines():
            k, *v = line.split()
            self.result[k if k != "error" else "error " + v[0]] = int(v[-1])
        check(self.proc.returncode == 0, "paced caller failed: %r" % self.err)
        return self.result

    def check_all_answered(self):
        r = self.result
        check(r["sent"] > self.min_sent and r["ok"] == r["sent"] and r["unanswered"] == 0 and r["twice"] == 0 and
              r["wrong"] == 0 and r["stray"] == 0,
              "every call answered once, with its own number: %r %s" % (r, self.err.strip()))


# The host's own gadgetd directories (the defaults of --run-dir,
# --state-dir and the socket, and the host-wide uid lock's folder): no
# test may write there. Every test runs in a mount namespace of its own in
# which each is an empty tmpfs; whatever a test leaves in one fails it.
HOST_DIRS = ("/run/gadgetd", "/var/lib/gadgetd")
# The uid lock every test run of this host shares, bind-mounted at the
# host-wide path inside each test's namespace. Tests run in parallel (and
# several builds' suites may), so they need one lock among themselves, as
# gadgetd processes of a host do; but not the host's: a test must not
# write there, and a gadgetd the host runs is none of the tests' business.
# (So do not run the suite beside a production gadgetd using the default
# uid range.) Tests use the default path, so they exercise it as shipped.
TEST_UID_LOCK = "/run/gadgetd-test/uids.lock"
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000


def guard_host_dirs():
    """Enters a mount namespace of this test's own with an empty tmpfs on
    each of HOST_DIRS (made, empty, where the host lacks one) and the
    shared test uid lock at the host-wide path. Returns the guarded dirs,
    or () where that cannot be done (not root)."""
    if os.geteuid() != 0:
        return ()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return ()

    # mount(2) itself: mount(8) is a fork and an exec each (four a test).
    def mount(source, target, fstype, flags, data=None):
        if libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                      ctypes.c_ulong(flags), data and data.encode()) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "mount %s on %s: %s" % (source or fstype or "", target, os.strerror(e)))

    # Nothing mounted here reaches the host's namespace.
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    for d in HOST_DIRS:
        os.makedirs(d, mode=0o755, exist_ok=True)
        mount("gadgetd-test-guard", d, "tmpfs", 0, "mode=0755,size=64m")
    os.makedirs(os.path.dirname(TEST_UID_LOCK), mode=0o755, exist_ok=True)
    os.close(os.open(TEST_UID_LOCK, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600))
    lock = os.path.join(HOST_DIRS[0], "uids.lock")
    os.close(os.open(lock, os.O_CREAT | os.O_RDWR, 0o600))
    mount(TEST_UID_LOCK, lock, None, MS_BIND)
    return HOST_DIRS


def host_dirs_left(guarded):
    """What the test left in the guarded dirs (the uid lock aside)."""
    left = []
    for d in guarded:
        for root, dirs, files in os.walk(d):
            for n in dirs + files:
                p = os.path.join(root, n)
                if p != os.path.join(HOST_DIRS[0], "uids.lock"):
                    left.append(p)
    return sorted(left)


def logs_said(tmp, n=15):
    """A failed test's daemons' last warnings and errors (each gadgetd.log
    below tmp): what a CI run that keeps no files can tell of why."""
    for root, _, files in os.walk(tmp):
        if "gadgetd.log" in files:
            path = os.path.join(root, "gadgetd.log")
            with open(path, errors="replace") as f:
                lines = [x for x in f if "warning" in x or "error" in x]
            if lines:
                print("%s, its last warnings and errors:\n%s" % (os.path.relpath(path, tmp), "".join(lines[-n:])),
                      end="", flush=True)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        return 0
    name = sys.argv[1]
    guarded = guard_host_dirs()
    tmp = tempfile.mkdtemp(prefix="gadgetd-test-")
    os.chmod(tmp, 0o755)
    # This process's stderr, which every child inherits unless the test
    # captures it, passes through a pipe: copied to the real stderr as it
    # comes and checked at the end.
    sys.stderr.flush()
    real_stderr = os.dup(2)
    rd, wr = os.pipe()
    os.dup2(wr, 2)
    os.close(wr)
    seen = []

    def copy():
        while True:
            b = os.read(rd, 65536)
            if not b:
                return
            seen.append(b)
            os.write(real_stderr, b)
    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    failed = None
    try:
        TESTS[name](tmp)
    except Failure as e:
        failed = e
        logs_said(tmp)
    finally:
        if os.environ.get("GADGETD_TEST_KEEP"):
            print("kept: %s (GADGETD_TEST_KEEP)" % tmp, flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        sys.stderr.flush()
        os.dup2(real_stderr, 2)
        copier.join(timeout=2)  # a process left running may hold the pipe open
        errtext = b"".join(seen)
    if failed is None:
        try:
            sanitizer_check(errtext, "a process whose stderr the test did not capture")
        except Failure as e:
            failed = e
    left = host_dirs_left(guarded)
    if failed is None and left:
        failed = Failure("the test wrote to the host's gadgetd directories: %s" % ", ".join(left))
    if failed is not None:
        print("FAIL %s: %s" % (name, failed))
        return 1
    print("ok %s" % name)
    return 0
