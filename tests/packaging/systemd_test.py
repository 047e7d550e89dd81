"""gadgetd under a real systemd: the built packages are installed with dpkg
in a minimal Debian tree (cached, see pkgtest.ensure_root) that boots with
systemd-nspawn; the test checks READY (the unit is active only after
READY=1), STATUS=, `gadgetctl list` and calls through the socket unit, the
journal fields (GADGET=, BINDING=, OP=, OUTCOME=), reload and `systemctl
stop`."""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkgtest import Failure, run, build_debs, check, ensure_root, log, need  # noqa: E402

# nspawn's own seccomp allowlist answers the new mount API and openat2 with
# ENOSYS; a sandbox needs them (and sethostname in its own UTS namespace).
NSPAWN_SYSCALLS = ("@mount open_tree move_mount mount_setattr fsopen fsmount fsconfig fspick "
                   "openat2 sethostname")
BOOT_TIMEOUT = 120
PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"


class Container:
    """A throw-away copy (an overlay) of the cached tree, booted by nspawn."""

    def __init__(self, tmp, lower):
        self.tmp, self.lower = tmp, lower
        self.root = os.path.join(tmp, "root")
        self.name = "gadgetd-test-%d" % os.getpid()
        self.overlay = False
        self.proc = None
        self.leader = None
        self.console = os.path.join(tmp, "console.log")

    def prepare(self):
        for d in ("root", "upper", "work"):
            os.makedirs(os.path.join(self.tmp, d))
        opts = "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (self.lower, self.tmp, self.tmp)
        if subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, self.root]).returncode == 0:
            self.overlay = True
        else:
            log("no overlayfs here: copying the tree")
            subprocess.run(["cp", "-a", self.lower + "/.", self.root], check=True)

    def run(self, script, binds=()):
        """A shell script in the tree, without booting it (nspawn as chroot)."""
        cmd = ["systemd-nspawn", "-q", "--register=no", "--keep-unit", "-D", self.root,
               "-M", self.name + "-setup"]
        cmd += ["--bind-ro=%s:%s" % b for b in binds]
        p = subprocess.run(cmd + ["/usr/bin/env", "-i", PATH, "/bin/sh", "-ec", script], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        check(p.returncode == 0, "in the tree, %r failed:\n%s" % (script, p.stdout[-4000:]))
        return p.stdout

    def boot(self):
        """Boots the tree; returns systemd's state once it is up. Readiness
        comes from nspawn itself, through a notify socket of the test's:
        X_NSPAWN_LEADER_PID= names the container's init (nspawn forks a
        short-lived outer child before it, so a child of nspawn seen first
        may be that one) and, with --notify-ready=yes, READY=1 follows once
        systemd in the container sent its own."""
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        path = os.path.join(self.tmp, "notify")
        notify.bind(path)
        cmd = ["systemd-nspawn", "-q", "--register=no", "--keep-unit", "--boot", "--private-users=no",
               "--notify-ready=yes", "--console=pipe", "--system-call-filter=" + NSPAWN_SYSCALLS,
               "-D", self.root, "-M", self.name]
        log("booting: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=open(self.console, "w"),
                                     stderr=subprocess.STDOUT, env=dict(os.environ, NOTIFY_SOCKET=path))
        end = time.time() + BOOT_TIMEOUT
        ready = False
        try:
            while not ready and time.time() < end and self.proc.poll() is None:
                if not select.select([notify], [], [], max(0, min(1, end - time.time())))[0]:
                    continue
                for line in notify.recv(4096).decode(errors="replace").splitlines():
                    if line.startswith("X_NSPAWN_LEADER_PID="):
                        self.leader = int(line.split("=", 1)[1])
                    elif line == "READY=1":
                        ready = True
        finally:
            notify.close()
        if not ready or not self.leader:
            need("systemd-nspawn --boot", "it did not report a container ready (leader %s, exit %s): %s" % (
                self.leader, self.proc.poll(), self.console_tail()))
        comm = open("/proc/%d/comm" % self.leader).read().strip()
        check(comm == "systemd", "the container's leader %d is %r, not systemd" % (self.leader, comm))
        log("container ready, its init is pid %d" % self.leader)
        state = ""
        while time.time() < end and self.proc.poll() is None:
            p = self.sh("systemctl is-system-running --wait", timeout=max(1, end - time.time()))
            state = p.stdout.strip()
            if state in ("running", "degraded"):
                return state
            time.sleep(0.5)
        need("systemd in the container", "it did not come up (state %r): %s" % (state, self.console_tail()))

    def sh(self, script, timeout=60):
        """A shell script inside the booted container (all its namespaces)."""
        return subprocess.run(["nsenter", "-t", str(self.leader), "-a", "/usr/bin/env", "-i", PATH,
                               "/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)

    def ok(self, script, timeout=60):
        p = self.sh(script, timeout)
        check(p.returncode == 0, "in the container, %r failed (%d):\n%s" % (script, p.returncode, p.stdout))
        return p.stdout

    def console_tail(self):
        try:
            return open(self.console, errors="replace").read()[-3000:]
        except OSError:
            return ""

    def close(self):
        if self.proc and self.proc.poll() is None:
            if self.leader:
                self.sh("systemctl poweroff", timeout=10)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.overlay:
            subprocess.run(["umount", "-l", self.root])


def journal(c, *match):
    out = c.ok("journalctl -q -o json --no-pager -u gadgetd " + " ".join(match))
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def checks(c):
    # The installed units, with the installed programs (no man-db in the tree).
    c.ok("systemd-analyze verify --man=no gadgetd.service gadgetd.socket")
    # READY: Type=notify, so the unit is active only once gadgetd sent READY=1,
    # after loading the policy directory with the control socket listening.
    end = time.time() + 30
    while c.sh("systemctl is-active gadgetd").stdout.strip() != "active" and time.time() < end:
        time.sleep(0.2)
    status = c.ok("systemctl status --no-pager gadgetd || true")
    print(status)
    check(c.sh("systemctl is-active gadgetd").stdout.strip() == "active", "gadgetd.service is not active")
    check(c.sh("systemctl is-active gadgetd.socket").stdout.strip() == "active", "gadgetd.socket is not active")
    check("control socket passed by systemd" in c.ok("journalctl -q -b -u gadgetd --no-pager"),
          "gadgetd did not take the socket from gadgetd.socket")
    # STATUS= with the number of gadgets (may lag a gadget's hello).
    end = time.time() + 20
    while "3 gadgets: 3 ready" not in c.ok("systemctl show -p StatusText gadgetd") and time.time() < end:
        time.sleep(0.2)
    text = c.ok("systemctl show -p StatusText gadgetd")
    check("3 gadgets: 3 ready, 0 failed" in text, "STATUS= is not 3 gadgets ready: " + text)
    # gadgetctl through the socket, as root and as a member of the gadgetd group.
    listing = c.ok("gadgetctl list")
    print(listing)
    for name in ("hello", "counter", "relay"):
        check(any(l.split()[:2] == [name, "ready"] for l in listing.splitlines()), name + " is not ready")
    member = c.ok("runuser -u gadgetop -- gadgetctl call hello greet '{\"name\": \"Ada\"}'")
    check(member.strip() == '"Hello, Ada!"', "hello greet as a gadgetd member: " + member)
    stranger = c.sh("runuser -u outsider -- gadgetctl list")
    check(stranger.returncode == 4 and "permission denied" in stranger.stdout,
          "a user outside the gadgetd group was not refused: %d %s" % (stranger.returncode, stranger.stdout))
    check(c.ok("gadgetctl call relay bump").strip() == "1", "relay bump did not count 1")
    # The journal: structured entries with the gadget and the audit fields.
    hello = journal(c, "GADGET=hello")
    check(hello and all(e.get("GADGET") == "hello" and "PRIORITY" in e for e in hello),
          "no journal entries with GADGET=hello")
    check(any(e["MESSAGE"] == "[hello] ready" for e in hello), "no [hello] ready entry: %s" % hello)
    puts = journal(c, "GADGET=counter", "BINDING=COUNT", "OP=put", "OUTCOME=ok")
    check(puts, "no audit entry GADGET=counter BINDING=COUNT OP=put OUTCOME=ok in the journal")
    e = puts[-1]
    check(e.get("MESSAGE_ID") and e.get("BYTES") and "DURATION_US" in e and e.get("PRIORITY") == "6",
          "the audit entry lacks fields: %s" % e)
    # WATCHDOG=1: with WatchdogSec=2s, gadgetd still runs, never restarted, 5 s on.
    check("watchdog: pinging systemd every 1000 ms" in c.ok("journalctl -q -b -u gadgetd --no-pager"),
          "gadgetd does not ping the watchdog")
    time.sleep(5)
    restarts = c.ok("systemctl show -p NRestarts -p ActiveState gadgetd")
    check("NRestarts=0" in restarts and "ActiveState=active" in restarts,
          "gadgetd did not survive its watchdog: " + restarts)
    # Reload (ExecReload= runs gadgetctl reload): a removed policy is unloaded.
    c.ok("rm /etc/gadgetd/policy.d/relay.policy && systemctl reload gadgetd")
    check("relay" not in c.ok("gadgetctl list"), "relay is still loaded after systemctl reload")
    # Stop: gadgetd stops every gadget and exits cleanly, or (FdStore=yes,
    # packaged, where systemd gives each gadget a scope) hands them to the
    # fd store, which systemd closes at the stop: they end by themselves.
    c.ok("systemctl stop gadgetd")
    state = c.sh("systemctl is-active gadgetd").stdout.strip()
    check(state == "inactive", "gadgetd.service is %s after systemctl stop" % state)
    log_text = c.ok("journalctl -q -b -u gadgetd --no-pager -o cat")
    check(("stopping every gadget" in log_text and "\nstopped" in log_text) or
          "handed 2 gadgets to the next gadgetd" in log_text, "no clean stop in the journal")
    end = time.time() + 10
    while c.ok("grep -l -x -E 'hello|counter' /proc/[0-9]*/comm 2>/dev/null || true").strip() and time.time() < end:
        time.sleep(0.2)
    left = c.ok("grep -l -x -E 'hello|counter' /proc/[0-9]*/comm 2>/dev/null || true")
    check(not left.strip(), "gadget processes outlived gadgetd: " + left)
    print(c.ok("systemd-analyze security --no-pager gadgetd.service | tail -n 1"))


def main():
    # meson's timeout sends SIGTERM: unwind, so the container stops and the
    # overlay is unmounted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: stopped by SIGTERM (a timeout?)"))
    if os.geteuid() != 0:
        need("root", "systemd-nspawn needs it")
    for tool in ("systemd-nspawn", "nsenter"):
        if not shutil.which(tool):
            need(tool, "not installed (scripts/deps installs systemd-container)")
    lower = ensure_root()
    debdir, debs, _ = build_debs()
    # The daemon's package and the library (the -dev package needs a compiler's world).
    names = " ".join("/mnt/debs/" + os.path.basename(d) for d in debs
                     if os.path.basename(d).startswith(("gadgetd_", "libgadget0_")))
    with tempfile.TemporaryDirectory(prefix="gadgetd-nspawn-") as tmp:
        c = Container(tmp, lower)
        try:
            c.prepare()
            print(c.run("dpkg -i %s\n"
                        "cp /usr/share/gadgetd/examples/hello.policy /usr/share/gadgetd/examples/counter.policy "
                        "/usr/share/gadgetd/examples/relay.policy /etc/gadgetd/policy.d/\n"
                        "useradd -M -G gadgetd gadgetop\nuseradd -M outsider\n"
                        # A short watchdog: missing pings would get gadgetd killed and restarted.
                        "mkdir -p /etc/systemd/system/gadgetd.service.d\n"
                        "printf '[Service]\\nWatchdogSec=2s\\n' > /etc/systemd/system/gadgetd.service.d/watchdog.conf\n"
                        "systemctl is-enabled gadgetd.service gadgetd.socket" % names,
                        binds=[(debdir, "/mnt/debs")]))
            log("systemd in the container: " + c.boot())
            checks(c)
        except Failure:
            print("console:\n" + c.console_tail())
            raise
        finally:
            c.close()
    print("ok")


if __name__ == "__main__":
    run(main)
