"""The integration tests' small harness: one test per process, named on
the command line; `--list` prints the names (meson registers each)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GADGETD = os.environ.get("GADGETD", "")
GADGETCTL = os.environ.get("GADGETCTL", "")
TESTGADGET = os.environ.get("TESTGADGET", "")
PROBE = os.environ.get("PROBE", "")
CALLFLOOD = os.environ.get("CALLFLOOD", "")
EXAMPLES = os.environ.get("EXAMPLES", "")

TESTS = {}


class Failure(Exception):
    pass


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def policy(dirname, name, body="", exec_path=None):
    path = os.path.join(dirname, name + ".policy")
    with open(path, "w") as f:
        f.write("[Gadget]\nName=%s\nExec=%s\n%s" % (name, exec_path or TESTGADGET, body))
    os.chmod(path, 0o644)  # gadgetd (root) refuses policies others may write
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


def wait_for(cond, timeout=20, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    check(False, "timed out waiting for " + what)


class Daemon:
    """A gadgetd on temporary directories, stopped at the end."""

    def __init__(self, tmp, extra=()):
        self.tmp = tmp
        self.pol = os.path.join(tmp, "policy.d")
        os.makedirs(self.pol, exist_ok=True)
        self.sock = os.path.join(tmp, "run", "control.sock")
        self.log = open(os.path.join(tmp, "gadgetd.log"), "w+")
        self.extra = list(extra)
        self.proc = None

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)  # left by a gadgetd killed earlier in the test
        self.proc = subprocess.Popen(
            [GADGETD, "--policy-dir", self.pol, "--state-dir", os.path.join(self.tmp, "state"),
             "--socket", self.sock, "--run-dir", os.path.join(self.tmp, "run"), *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.sock), what="the control socket")
        return self

    def ctl(self, *args, user=None, timeout=60):
        cmd = [GADGETCTL, "--socket", self.sock, *args]
        if user:
            cmd = ["setpriv", "--reuid=%d" % user[0], "--regid=%d" % user[1], "--clear-groups"] + cmd
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def list(self):
        r = self.ctl("--json", "list")
        check(r.returncode == 0, "list failed: %r" % r.stderr)
        return {g["name"]: g for g in json.loads(r.stdout)}

    def state(self, name):
        return self.list().get(name, {}).get("state")

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
        if self.proc and self.proc.poll() is None:
            self.stop()
        # Under the sanitizer build, gadgetd reports what it found at exit.
        text = self.logtext()
        check("Sanitizer" not in text and "runtime error" not in text, "sanitizer report: %s" % text[-3000:])


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Healthy:
    """The healthy caller of the hostile-load tests: while the block runs,
    `callflood --steady` calls gadget.method one call at a time through
    the control socket. At the end, every call it made must have been
    answered without error; counts and latencies are in self.result."""

    def __init__(self, d, gadget, method="echo", args=None):
        cmd = [CALLFLOOD, "--steady", d.sock, gadget, method] + ([args] if args else [])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.result = {}

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
        r = self.finish()
        if exc is None:
            check(r.get("sent", 0) > 0, "the healthy caller made no call")
            check(r.get("ok") == r.get("sent") and r.get("unanswered") == 0,
                  "healthy calls not all answered: %r" % r)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        return 0
    name = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="gadgetd-test-")
    os.chmod(tmp, 0o755)
    try:
        TESTS[name](tmp)
    except Failure as e:
        print("FAIL %s: %s" % (name, e))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % name)
    return 0
