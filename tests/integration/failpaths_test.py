#!/usr/bin/env python3
"""Failure paths the kernel will not take on its own, driven from outside
gadgetd: a layer of the sandbox setup that fails (through failinject, a
seccomp wrapper, or failshim, an LD_PRELOAD library), the stop grace, the
host uid pool exhausted, a restart after gadgetd was killed. Each test asserts what the user sees:
exit status and stderr of `gadgetd run`, gadgetctl status, gadgetd's log.
Usage: failpaths_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET, FAILINJECT, FAILSHIM."""
import os
import signal
import subprocess
import sys
import time

from harness import (GADGETCTL, Daemon, cgroup_dirs, check, mounts, children, gadgetd_run, main, pid_alive,
                     policy, test, wait_for, workers)

FAILINJECT = os.environ.get("FAILINJECT", "")
FAILSHIM = os.environ.get("FAILSHIM", "")


# --- a sandbox layer that cannot be set up -----------------------------------

def run_injected(tmp, mode):
    """`gadgetd run --call echo` of the test gadget under failinject MODE:
    (status, stdout, stderr). Without the injection the call answers."""
    pol = policy(tmp, "fp")
    cmd = gadgetd_run(tmp) + [pol, "--call", "echo", '"hi"']
    r = subprocess.run([FAILINJECT, mode] + cmd, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def check_not_started(tmp, mode, step):
    rc, out, err = run_injected(tmp, mode)
    want = 'gadgetd: cannot start "fp": %s: Operation not permitted' % step
    check(rc == 125 and want in err, "%s: status %d, stderr %r (wanted %r)" % (mode, rc, err, want))
    check(out == "", "%s: the gadget answered: %r" % (mode, out))


@test
def setup_fails_before_setup(tmp):
    """A step the sandbox shell takes while it waits for its setup (its
    network namespace made, the mount tree made private) fails: that is
    reported as the start's error once the setup came, and the gadget does
    not start (without a network namespace it would share the host's)."""
    check_not_started(tmp, "unshare-net", "network namespace")
    check_not_started(tmp, "mount-private", "make mounts private")


@test
def setup_fails_root_tmpfs(tmp):
    """The root tmpfs cannot be mounted: the gadget does not start, and
    `gadgetd run` says which step failed and why (status 125)."""
    check_not_started(tmp, "mount-root-tmpfs", "mount root tmpfs")


@test
def setup_fails_proc(tmp):
    check_not_started(tmp, "mount-proc", "mount /proc")


@test
def setup_fails_capabilities(tmp):
    """The bounding set cannot be emptied: the program never runs with a
    capability it could keep."""
    check_not_started(tmp, "capabilities", "capabilities")


@test
def setup_fails_no_new_privs(tmp):
    check_not_started(tmp, "no-new-privs", "no_new_privs")


@test
def setup_fails_seccomp(tmp):
    """The seccomp filter cannot be installed: the program is never run
    without it."""
    check_not_started(tmp, "seccomp", "seccomp")


class PreloadedDaemon(Daemon):
    """A gadgetd with failshim preloaded (FAILSHIM_OPEN=name); the
    gadgetctl it is driven with runs without the library."""

    def __init__(self, tmp, name):
        super().__init__(tmp)
        self.env = {"LD_PRELOAD": FAILSHIM, "FAILSHIM_OPEN": name,
                    # under ASan its runtime must come first; the library is not instrumented
                    "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}

    def start(self):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            return super().start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k)
                else:
                    os.environ[k] = v


def daemon_preloaded(tmp, name, body=""):
    """A PreloadedDaemon (not yet started) whose one gadget "fp" has the
    policy body."""
    d = PreloadedDaemon(tmp, name)
    policy(d.pol, "fp", body)
    return d


def check_daemon_refused(d, name, cause, others=0):
    """gadget name is failed with cause, named in gadgetctl status and in
    gadgetd's log, and no worker of it runs (others: how many other
    gadgets' workers do)."""
    wait_for(lambda: d.state(name) == "failed", what=name + " failed")
    g = d.list()[name]
    check(g["cause"] == cause, "cause: %r, wanted %r" % (g["cause"], cause))
    check(not g.get("pid") and len(workers(d)) == others, "a worker runs: %r, %r" % (g, workers(d)))
    r = d.ctl("status", name)
    check(cause in r.stdout, "gadgetctl status: %r" % r.stdout)
    log = d.logtext()
    check("[%s] error: %s" % (name, cause) in log, "gadgetd's log: %r" % log[-2000:])


@test
def setup_fails_id_map(tmp):
    """gadgetd cannot write the worker's uid map: the gadget fails with the
    layer named, and nothing of it runs."""
    with daemon_preloaded(tmp, "uid_map") as d:
        check_daemon_refused(d, "fp", "cannot start: user namespace id map: Operation not permitted")


@test
def setup_fails_setgroups(tmp):
    """gadgetd cannot deny setgroups in the worker's user namespace (which
    must come before the gid map): the gadget does not start."""
    with daemon_preloaded(tmp, "setgroups") as d:
        check_daemon_refused(d, "fp", "cannot start: user namespace id map: Operation not permitted")


@test
def setup_fails_gid_map(tmp):
    with daemon_preloaded(tmp, "gid_map") as d:
        check_daemon_refused(d, "fp", "cannot start: user namespace id map: Operation not permitted")


@test
def setup_fails_cgroup_limit(tmp):
    """gadgetd cannot write the gadget's pids.max: the gadget does not
    start without its tasks limit."""
    with daemon_preloaded(tmp, "pids.max", "TasksMax=16\n") as d:
        wait_for(lambda: d.state("fp") == "failed", what="fp failed")
        cause = d.list()["fp"]["cause"]
        check(cause.startswith("cannot start: cgroup v") and " pids.max=" in cause and cause.endswith(": Operation not permitted"),
              "cause: %r" % cause)
        check_daemon_refused(d, "fp", cause)


# --- the stop grace ----------------------------------------------------------

STOP_GRACE_S = 3.0  # docs/operating.md: "a shutdown message and SIGKILL after 3 s"


def stuck(d):
    """Gadget "stuck", busy in a call that never ends (so it does not heed
    gadgetd's shutdown message): (its pid, the gadgetctl call)."""
    policy(d.pol, "stuck", "CallTimeout=60s\n")
    check(d.ctl("reload").returncode == 0, "reload failed")
    wait_for(lambda: d.state("stuck") == "ready", what="stuck ready")
    pid = d.list()["stuck"]["pid"]
    call = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "stuck", "hang"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: d.list()["stuck"]["calls"] == 1, what="the call in flight")
    return pid, call


def check_lived(t0, pid):
    wait_for(lambda: not pid_alive(pid), timeout=30, what="the worker killed")
    lived = time.monotonic() - t0
    check(lived >= STOP_GRACE_S - 0.1, "killed %.3f s after stop, before the %.0f s grace" % (lived, STOP_GRACE_S))


@test
def stop_grace_lower_bound(tmp):
    """A gadget that does not heed the shutdown message lives at least the
    grace period after `gadgetctl stop`, and is killed after it. The
    bound is generous below (timer slack) and there is no tight one
    above."""
    with Daemon(tmp) as d:
        pid, call = stuck(d)
        t0 = time.monotonic()
        r = d.ctl("stop", "stuck")
        check(r.returncode == 0, "stop: %r" % r.stderr)
        check_lived(t0, pid)
        wait_for(lambda: d.state("stuck") == "stopped", what="stuck stopped")
        call.communicate(timeout=30)


@test
def stop_grace_on_gadgetd_sigterm(tmp):
    """gadgetd stopping on SIGTERM gives such a gadget the same grace
    before it kills it, then exits 0: with many gadgets, those that stop at
    once do not end gadgetd before it (their ends are counted, not walked:
    core_running)."""
    with Daemon(tmp) as d:
        names = ["quick%d" % i for i in range(12)]
        for n in names:
            policy(d.pol, n)
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: all(d.state(n) == "ready" for n in names), what="the quick gadgets ready")
        pids = [d.list()[n]["pid"] for n in names]
        pid, call = stuck(d)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10, what="the quick gadgets ended")
        check(d.proc.poll() is None, "gadgetd exited before its stuck gadget's grace: %r" % d.proc.returncode)
        check_lived(t0, pid)
        check(d.proc.wait(timeout=30) == 0, "gadgetd exited %r" % d.proc.returncode)
        call.communicate(timeout=30)


# --- the host uid pool -------------------------------------------------------

@test
def uid_pool_exhausted_in_daemon(tmp):
    """With --uid-count 1, the daemon's second gadget does not start and
    says why (gadgetctl status, gadgetd's log); once the first stops, its
    uid is free and the second starts on it."""
    base = uid_base() + 16
    with Daemon(tmp, extra=["--uid-base", str(base), "--uid-count", "1"]) as d:
        policy(d.pol, "a")
        check(d.ctl("reload").returncode == 0, "reload failed")
        wait_for(lambda: d.state("a") == "ready", what="a ready")
        policy(d.pol, "b")
        check(d.ctl("reload").returncode == 0, "reload failed")
        check_daemon_refused(d, "b", "cannot start: no free host uid: all 1 of %d..%d are held by gadgets of "
                             "gadgetd processes on this host (see --uid-base, --uid-count)" % (base, base), others=1)
        check(d.state("a") == "ready", "a: %r" % d.state("a"))
        check(d.ctl("stop", "a").returncode == 0, "stop a failed")
        wait_for(lambda: d.state("a") == "stopped", what="a stopped")
        r = d.ctl("restart", "b")
        check(r.returncode == 0, "restart b: %r" % r.stderr)
        wait_for(lambda: d.state("b") == "ready", what="b ready on the freed uid")
        check([m.split()[1] for _, m in children(d) if m] == [str(base)], "host uids: %r" % children(d))


# --- gadgetd killed, then started again --------------------------------------

def uid_base():
    """A range of host uids for this test alone (as load/host.py's)."""
    return 0x50000000 + (os.getpid() % 4096) * 4096


# Joins the cgroups named (their cgroup.procs, ":"-separated) and execs
# the rest of the command line.
JOIN = ("import os, sys\n"
        "for p in sys.argv[1].split(':'):\n"
        "    with open(p, 'w') as f:\n"
        "        f.write(str(os.getpid()))\n"
        "os.execv(sys.argv[2], sys.argv[2:])\n")


def private_cgroups(tmp):
    """A cgroup of its own below this test's in every hierarchy, for
    gadgetd alone: no other gadgetd of the host (a test running beside
    this one) shares its parent, so none sweeps its stale directories
    before the gadgetd under test does. Returns (the directories, a
    prefix that starts gadgetd in them)."""
    dirs = []
    for parent in sorted(set(cgroup_dirs(os.getpid()).values())):
        d = os.path.join(parent, "failpaths-%d" % os.getpid())
        try:
            os.mkdir(d)
        except OSError:
            continue  # a hierarchy this test may not make cgroups in: gadgetd skips it too
        dirs.append(d)
        for f in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset: no task joins without them
            if os.path.exists(os.path.join(d, f)):
                with open(os.path.join(parent, f)) as src, open(os.path.join(d, f), "w") as dst:
                    dst.write(src.read().strip() or "\n")
    return dirs, [sys.executable, "-c", JOIN, ":".join(os.path.join(d, "cgroup.procs") for d in dirs)]


def remove_cgroups(dirs):
    for d in dirs:
        for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])):
            try:
                os.rmdir(sub)
            except OSError:
                pass


@test
def restart_after_sigkill_cleans_up(tmp):
    """gadgetd killed with SIGKILL leaves its control socket, its cgroup
    directories and (until the kernel drops them) its uid locks; started
    again it removes the socket and the cgroups of the dead gadgetd and
    its gadgets start again on the same two host uids, the whole pool."""
    base = uid_base()
    d = Daemon(tmp, extra=["--uid-base", str(base), "--uid-count", "2"])
    for n in ("a", "b"):
        policy(d.pol, n, "TasksMax=16\n")
    # On a unified-v2 host with systemd gadgetd gets a scope of its own
    # from systemd (restart_cycle); elsewhere private cgroups keep other
    # gadgetds from sweeping its stale ones first.
    mine = []
    if mounts()[0] or not os.path.isdir("/run/systemd/system"):
        mine, d.wrap = private_cgroups(tmp)
    try:
        with d:
            restart_cycle(d, base, mine)
    finally:
        remove_cgroups(mine)


def restart_cycle(d, base, mine):
    wait_for(lambda: d.state("a") == "ready" and d.state("b") == "ready", what="a and b ready")
    old = d.proc.pid
    pids = [g["pid"] for g in d.list().values()]
    # Started in a cgroup that is not delegated (a login shell's scope on a
    # systemd host with cgroup v2), gadgetd is in a scope systemd made for
    # it: systemd removes that scope, stale directories and all, once its
    # last process is gone.
    v2 = cgroup_dirs(old).get("v2", "")
    scope = v2[:v2.index("/gadgetd-%d.scope/" % old) + len("/gadgetd-%d.scope" % old)] \
        if "/gadgetd-%d.scope/" % old in v2 else None
    stale = [c for c in (os.path.join(m, "gadgetd.%d" % old) for m in mine) if os.path.isdir(c)]
    check(stale or scope, "gadgetd made no cgroup directory in %r" % mine)
    d.proc.kill()
    d.proc.wait()
    wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10, what="the workers to die")
    check(os.path.exists(d.sock), "no stale socket: nothing to test")
    if scope:
        wait_for(lambda: not os.path.exists(scope), what="systemd to remove the dead gadgetd's scope " + scope)
    check(all(os.path.isdir(c) for c in stale), "the cgroups went with gadgetd: nothing to test")
    d.start(stale_socket=True)
    check(d.proc.pid != old, "the same gadgetd")
    wait_for(lambda: all(d.state(n) in ("ready", "failed") for n in "ab"), what="a and b started again")
    got = {n: (g["state"], g.get("cause")) for n, g in d.list().items()}
    check(all(s == "ready" for s, _ in got.values()), "after the restart: %r" % got)
    uids = sorted(int(m.split()[1]) for _, m in children(d) if m)
    check(uids == [base, base + 1], "host uids %r, wanted the pool %d..%d" % (uids, base, base + 1))
    left = [c for c in stale if os.path.exists(c)]
    check(not left, "stale cgroups left: %r" % left)
    check(d.ctl("call", "a", "echo", '"hi"').stdout.strip() == '"hi"', "a does not answer")


if __name__ == "__main__":
    raise SystemExit(main())
