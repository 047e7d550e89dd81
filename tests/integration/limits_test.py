#!/usr/bin/env python3
"""Integration tests of resource limits: real gadgets (testgadget, probe)
in a real gadgetd or `gadgetd run`, misbehaving on purpose. Each test
asserts what a user relies on: the limit holds, only the gadget suffers,
and the operator sees what happened. Nothing waits on timing except the
one latency bound of cpu_quota_leaves_others_responsive.

Usage: limits_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET, PROBE."""
import json
import os
import resource
import subprocess
import sys
import time

from harness import (GADGETCTL, GADGETD, PROBE, Daemon, cgroup_dirs, check, gadgetd_run, main, mounts, policy,
                     run_probe, skip, test, wait_for)


# Stated bound for cpu_quota_leaves_others_responsive: every call to the
# other gadget answers within this many seconds (a few ms when idle).
LATENCY_BOUND_S = 1.0


# --- what the machine offers --------------------------------------------------

def v1_available():
    v1, _ = mounts()
    return all(c in v1 for c in ("memory", "pids", "cpu"))


def v2_controllers():
    """Controllers the v2 hierarchy offers to our own cgroup."""
    d = cgroup_dirs(os.getpid()).get("v2")
    try:
        with open(os.path.join(d, "cgroup.controllers")) as f:
            return f.read().split()
    except (OSError, TypeError):
        return []


def v2_root_controllers():
    """Controllers of the v2 hierarchy's root (what a delegated scope can get)."""
    _, v2 = mounts()
    try:
        with open(os.path.join(v2[1], "cgroup.controllers")) as f:
            return f.read().split()
    except (OSError, TypeError):
        return []


def systemd_v2_why_not():
    """None on a unified cgroup v2 host with systemd as init (where gadgetd
    asks systemd for a delegated scope when its cgroup is not one), else why
    this host is not one."""
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not the init system here (no /run/systemd/system)"
    _, v2 = mounts()
    if not v2 or v2[1] != "/sys/fs/cgroup":
        return "no unified cgroup v2 hierarchy at /sys/fs/cgroup (cgroup2 at %s)" % (v2[1] if v2 else "none")
    have = v2_root_controllers()
    if not all(c in have for c in ("memory", "pids", "cpu")):
        return "cgroup v2 offers %s, not memory, pids and cpu" % (have or "no controller")
    if cgroup_dirs(os.getpid())["v2"].endswith(".service"):
        return "this test runs in a service's cgroup, where gadgetd asks for no scope"
    return None


def unit_property(unit, prop):
    r = subprocess.run(["systemctl", "show", "-P", prop, unit], capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def read(path):
    with open(path) as f:
        return f.read().strip()


# --- helpers -------------------------------------------------------------------

def audit(d):
    path = os.path.join(d.tmp, "state", "audit.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def limit_hits(d, gadget, op):
    return [r for r in audit(d) if r["gadget"] == gadget and r["binding"] == "limit" and r["op"] == op]


def status(d, name):
    r = d.ctl("--json", "status", name)
    check(r.returncode == 0, "status: %r" % r.stderr)
    return json.loads(r.stdout)


def mode_of(d):
    """The mode gadgetd logged at start."""
    for line in d.logtext().splitlines():
        if "limits mode: " in line:
            return line.split("limits mode: ", 1)[1].split(",")[0]
    check(False, "gadgetd did not log its limits mode: %r" % d.logtext())


def needs_cgroups(d, *ctrls):
    for c in ctrls:
        if "limits: %s controller: cgroup" % c not in d.logtext():
            skip("gadgetd has no cgroup %s controller here (limits mode %s)" % (c, mode_of(d)))


# --- the mode ------------------------------------------------------------------

@test
def limits_mode_reported(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "plain")
        d.ctl("reload")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        mode = mode_of(d)
        if not v2_controllers() and v1_available():
            check(mode == "cgroup v1", "this machine offers cgroup v1 only, gadgetd says %r" % mode)
        for limit in ("MemoryMax", "TasksMax", "CPUQuota", "LimitNOFILE"):
            check("limits: %s" % limit in d.logtext(), "no mechanism logged for %s" % limit)
        st = status(d, "plain")
        check(st["limits_mode"] == mode, "status says %r, the log %r" % (st["limits_mode"], mode))
        text = d.ctl("status", "plain").stdout
        check("Limits mode: %s" % mode in text, "status text: %r" % text)
        if "limits: pids controller: cgroup" in d.logtext():
            check(st["memory_bytes"] > 0 and st["tasks"] == 1, "usage from the cgroup: %r" % st)
            check("MEMORY" in d.ctl("list").stdout and "TASKS" in d.ctl("list").stdout, "list columns")


# --- tasks ---------------------------------------------------------------------

@test
def fork_bomb_held_at_tasks_max(tmp):
    with Daemon(tmp) as d:
        needs_cgroups(d, "pids")
        policy(d.pol, "bomb", "TasksMax=16\n")
        policy(d.pol, "other")
        d.ctl("reload")
        wait_for(lambda: d.state("bomb") == "ready" and d.state("other") == "ready", what="ready")
        r = d.ctl("call", "bomb", "forkbomb")
        check(r.returncode == 0, "forkbomb: %r" % r.stderr)
        wait_for(lambda: d.list()["bomb"]["tasks"] == 16, what="the bomb at 16 tasks")
        wait_for(lambda: limit_hits(d, "bomb", "TasksMax"), what="an audit record of the TasksMax hit")
        for i in range(5):
            check(d.list()["bomb"]["tasks"] <= 16, "the bomb grew past TasksMax: %r" % d.list()["bomb"])
            r = d.ctl("call", "other", "echo", str(i))
            check(r.returncode == 0 and r.stdout.strip() == str(i), "the other gadget: %r" % r.stderr)
        r = d.ctl("call", "bomb", "echo", '"still here"')
        check(r.returncode == 0, "the bomb's own main process stopped answering: %r" % r.stderr)
        d.ctl("stop", "bomb")
        wait_for(lambda: d.state("bomb") == "stopped", what="the bomb stopped")
        check(d.list()["bomb"]["tasks"] == 0, "tasks left: %r" % d.list()["bomb"])


@test
def tasks_max_by_rlimit_alone(tmp):
    """Without cgroups, RLIMIT_NPROC of the gadget's own uid holds it."""
    r, out = run_probe(tmp, "forkmany", body="TasksMax=8\n", opts=["--limits-mode", "rlimits"])
    check(r.returncode == 0, "probe: %r" % r.stderr)
    # 8 tasks: the probe and 7 children (the sandbox's init is not counted).
    check(out.get("forkmany") == ["EAGAIN 7"], "forkmany: %r" % out.get("forkmany"))


@test
def tasks_max_in_default_mode(tmp):
    r, out = run_probe(tmp, "forkmany", body="TasksMax=8\n")
    check(r.returncode == 0 and out.get("forkmany") == ["EAGAIN 7"], "forkmany: %r %r" % (out, r.stderr))


# --- memory --------------------------------------------------------------------

@test
def memory_max_kills_and_restarts(tmp):
    with Daemon(tmp) as d:
        needs_cgroups(d, "memory")
        policy(d.pol, "hog", "MemoryMax=32M\nRestart=on-failure\n")
        policy(d.pol, "once", "MemoryMax=32M\n")
        d.ctl("reload")
        wait_for(lambda: d.state("hog") == "ready" and d.state("once") == "ready", what="ready")
        r = d.ctl("call", "hog", "alloc", '{"mb": 16}')
        check(r.returncode == 0 and r.stdout.strip() == "16", "16M below the limit: %r" % r.stderr)
        pid = d.list()["hog"]["pid"]
        r = d.ctl("call", "hog", "alloc", '{"mb": 128}')
        check(r.returncode == 1 and "out of memory" in r.stderr, "the call: %r" % r.stderr)
        wait_for(lambda: d.list()["hog"]["restarts"] == 1 and d.state("hog") == "ready", what="hog restarted")
        g = d.list()["hog"]
        # Both the cause and how the program ended.
        check(g["pid"] != pid and g["cause"] == "out of memory (killed by signal SIGKILL)", "after the restart: %r" % g)
        check(limit_hits(d, "hog", "MemoryMax"), "no audit record: %r" % audit(d))
        check("ready (last stop: out of memory (killed by signal SIGKILL))" in d.ctl("status", "hog").stdout, "status text")
        # Restart=no: it stays down, and says why.
        r = d.ctl("call", "once", "alloc", '{"mb": 128}')
        wait_for(lambda: d.state("once") == "failed", what="once failed")
        check(d.list()["once"]["cause"] == "out of memory (killed by signal SIGKILL)", "cause: %r" % d.list()["once"])


@test
def memory_max_too_small_refused_by_check(tmp):
    """A MemoryMax= that cannot hold the sandbox setup is refused where the
    file is read, naming FILE:LINE, not at start as "sandbox setup ended
    without a report"."""
    pol = policy(tmp, "tiny", "MemoryMax=1K\n")
    r = subprocess.run([GADGETCTL, "check", pol], capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    check(r.returncode == 1 and "%s:4: MemoryMax=" % pol in out and "at least 1M" in out,
          "check: %d %r" % (r.returncode, out))
    with Daemon(tmp) as d:
        policy(d.pol, "tiny", "MemoryMax=1K\n")
        r = d.ctl("reload")
        check(r.returncode != 0 and "at least 1M" in r.stderr and "tiny" not in d.list(), "reload: %r" % r.stderr)


@test
def memory_max_in_gadgetd_run(tmp):
    """gadgetd run gives its one gadget a cgroup only where a limit needs
    one, directly as OWN/gadgetd.PID: the limit holds, the cause is told,
    and no directory is left in any hierarchy; the directory a gadgetd
    that is gone left there is removed (while the sandbox builds)."""
    v1, v2 = mounts()
    if "memory" not in v1 and "memory" not in v2_controllers() and systemd_v2_why_not():
        skip("no cgroup memory controller here")
    pol = policy(tmp, "hog", "MemoryMax=32M\n")
    run = gadgetd_run(tmp) + [pol]
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = []
    # Where gadgetd run makes its gadget's cgroup in this process's own (a
    # v1 hierarchy; v2 without systemd). Under systemd on v2 it moves into
    # a scope of its own (this login scope is not delegated), and a
    # directory here is no gadgetd's to tidy.
    own_v2 = not v1 and not os.path.exists("/run/systemd/system")
    for c, d in cgroup_dirs(os.getpid()).items():
        if c in ("memory", "pids", "cpu", "cpuacct", "cpuset") or c == "v2" and own_v2:
            try:
                os.mkdir(os.path.join(d, "gadgetd.%d" % gone.pid))
                stale.append(os.path.join(d, "gadgetd.%d" % gone.pid))
            except OSError:
                pass
    try:
        r = subprocess.run(run + ["--call", "alloc", '{"mb": 16}'], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and r.stdout.strip() == "16", "16M below the limit: %r %r" % (r.stdout, r.stderr))
        left = [c for c in stale if os.path.exists(c)]
        check(not left, "a gone gadgetd's cgroups left: %r" % left)
    finally:
        for c in stale:
            if os.path.exists(c):
                os.rmdir(c)
    p = subprocess.Popen(run + ["--call", "alloc", '{"mb": 128}'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    _, err = p.communicate(timeout=60)
    check(p.returncode == 1 and "out of memory (killed by signal SIGKILL)" in err,
          "over the limit: %d %r" % (p.returncode, err))
    left = []
    for d in cgroup_dirs(os.getpid()).values():
        left += [os.path.join(d, e) for e in os.listdir(d) if e == "gadgetd.%d" % p.pid]
    check(not left, "left behind: %r" % left)


# --- CPU -----------------------------------------------------------------------

@test
def cpu_quota_leaves_others_responsive(tmp):
    with Daemon(tmp) as d:
        needs_cgroups(d, "cpu", "CPU accounting")
        policy(d.pol, "spinner", "CPUQuota=20%\n")
        policy(d.pol, "other")
        d.ctl("reload")
        wait_for(lambda: d.state("spinner") == "ready" and d.state("other") == "ready", what="ready")
        r = d.ctl("call", "spinner", "spin", '{"procs": %d}' % max(2, os.cpu_count() or 2))
        check(r.returncode == 0, "spin: %r" % r.stderr)
        wait_for(lambda: d.list()["spinner"]["tasks"] >= 3, what="the spinners")
        t0, cpu0 = time.monotonic(), d.list()["spinner"]["cpu_usec"]
        worst = 0.0
        for i in range(10):
            start = time.monotonic()
            r = d.ctl("call", "other", "echo", str(i))
            worst = max(worst, time.monotonic() - start)
            check(r.returncode == 0 and r.stdout.strip() == str(i), "the other gadget: %r" % r.stderr)
            time.sleep(0.15)
        t1, cpu1 = time.monotonic(), d.list()["spinner"]["cpu_usec"]
        check(worst < LATENCY_BOUND_S, "a call took %.3f s with the spinner at CPUQuota=20%%" % worst)
        # Unthrottled, the spinners would use every core (100% each);
        # CPUQuota=20% holds them near 0.2 CPU, asserted at 0.5.
        share = (cpu1 - cpu0) / 1e6 / (t1 - t0)
        check(share < 0.5, "the spinner used %.2f CPUs, CPUQuota=20%%" % share)
        wait_for(lambda: limit_hits(d, "spinner", "CPUQuota"), what="an audit record of the throttling")


# --- files -----------------------------------------------------------------------

@test
def tmp_size_enospc(tmp):
    r, out = run_probe(tmp, "tmpfull", body="TmpSize=1M\n")
    check(r.returncode == 0, "probe: %r" % r.stderr)
    err, total = out["fill"][0].split()
    check(err == "ENOSPC" and 1024 * 1024 - 65536 < int(total) <= 1024 * 1024, "fill: %r" % out["fill"])
    err, files = out["inodes"][0].split()
    # nr_inodes is 256 for 1M (size/4K, at least 256); the root and /tmp/fill use two.
    check(err == "ENOSPC" and 240 <= int(files) <= 256, "inodes: %r" % out["inodes"])
    # The file-size limit (one page above TmpSize) stops a sparse file.
    check(out.get("sparse") == ["EFBIG"], "sparse: %r" % out.get("sparse"))


@test
def limit_nofile_emfile(tmp):
    r, out = run_probe(tmp, "nofile", body="LimitNOFILE=64\n")
    # fds 0-3 are open: 60 more.
    check(r.returncode == 0 and out.get("nofile") == ["EMFILE 60"], "nofile: %r %r" % (out, r.stderr))
    # Above gadgetd's own hard limit: no start, naming the step (not a
    # quietly lower limit).
    pol = policy(tmp, "probe", "LimitNOFILE=512\n", exec_path=PROBE)
    r = subprocess.run(["prlimit", "--nofile=256:256", "--"] + gadgetd_run(tmp) + [pol, "--", "nofile"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 125 and "limit open files" in r.stderr, "LimitNOFILE over the hard limit: %d %r" %
          (r.returncode, r.stderr))


@test
def rlimit_defaults(tmp):
    r, out = run_probe(tmp, "rlimits", body="TmpSize=1M\n")
    check(r.returncode == 0, "probe: %r" % r.stderr)
    got = {k[len("rlimit "):]: v[0] for k, v in out.items() if k.startswith("rlimit ")}

    def capped(res, v):
        hard = resource.getrlimit(res)[1]
        return v if hard == resource.RLIM_INFINITY else min(v, hard)

    nproc = 1024 + (2 if "pids" in mounts()[0] or "pids" in v2_controllers() else 1)
    want = {
        "CORE": "1 1", "NOFILE": "1024 1024", "AS": "infinity infinity",
        "FSIZE": "%d %d" % ((1 << 20) + 4096, (1 << 20) + 4096),
        "MEMLOCK": "%d %d" % ((capped(resource.RLIMIT_MEMLOCK, 65536),) * 2),
        "MSGQUEUE": "0 0",
        "SIGPENDING": "%d %d" % ((capped(resource.RLIMIT_SIGPENDING, 1024),) * 2),
        "NPROC": "%d %d" % ((capped(resource.RLIMIT_NPROC, nproc),) * 2),
    }
    check(got == want, "rlimits inside: %r, want %r" % (got, want))


@test
def user_namespace_counters_zero(tmp):
    """The gadget's user namespace belongs to root: what it took of inotify
    (or namespaces) would count against root's own limits in the host."""
    r, out = run_probe(tmp, "userns")
    check(r.returncode == 0, "probe: %r" % r.stderr)
    # Every counter, whether set while the shell waited for its setup or
    # once the worker was done with mount and cgroup namespaces.
    counters = [k for k in out if k.startswith("max_")]
    check("max_cgroup_namespaces" in counters and "max_mnt_namespaces" in counters, "counters: %r" % counters)
    for k in counters:
        check(out.get(k) == ["0"], "%s: %r" % (k, out.get(k)))
    check(out.get("inotify_init") == ["EMFILE"], "inotify_init: %r" % out.get("inotify_init"))


# --- fail closed -----------------------------------------------------------------

@test
def unenforceable_limit_refused(tmp):
    for body, limit in (("MemoryMax=32M\n", "MemoryMax=32M"), ("CPUQuota=20%\n", "CPUQuota=20%")):
        r, out = run_probe(tmp, "exit", "0", body=body, opts=["--limits-mode", "rlimits"])
        check(r.returncode == 125, "%s in rlimits mode: exit status %d" % (limit, r.returncode))
        check("%s cannot be enforced in limits mode rlimits" % limit in r.stderr, "stderr: %r" % r.stderr)
        check("degraded limits" in r.stderr, "the error does not say how to allow it: %r" % r.stderr)
    # Allowed degraded: MemoryMax becomes RLIMIT_AS per process.
    r, out = run_probe(tmp, "rlimits", body="MemoryMax=32M\n",
                       opts=["--limits-mode", "rlimits", "--allow-degraded-limits"])
    check(r.returncode == 0 and out.get("rlimit AS") == ["33554432 33554432"], "degraded: %r %r" % (out, r.stderr))


@test
def daemon_fail_closed_and_degraded(tmp):
    with Daemon(tmp, extra=["--limits-mode", "rlimits"]) as d:
        check(mode_of(d) == "rlimits", "mode: %r" % mode_of(d))
        policy(d.pol, "quota", "CPUQuota=20%\n")
        policy(d.pol, "plain", "TasksMax=4\n")
        d.ctl("reload")
        wait_for(lambda: d.state("quota") == "failed" and d.state("plain") == "ready", what="states")
        cause = d.list()["quota"]["cause"]
        check("CPUQuota=20% cannot be enforced" in cause and "no cgroup cpu controller" in cause, "cause: %r" % cause)
    conf = os.path.join(tmp, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nLimitsMode=rlimits\nAllowDegradedLimits=yes\n")
    with Daemon(tmp, extra=["--config", conf]) as d:
        wait_for(lambda: d.state("quota") == "ready", what="quota ready with degraded limits")
        st = status(d, "quota")
        check(st["limits_mode"] == "rlimits; degraded: CPUQuota not enforced", "mode: %r" % st["limits_mode"])


@test
def runtime_max_kills(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "brief", "RuntimeMax=300ms\n")
        d.ctl("reload")
        wait_for(lambda: d.state("brief") == "failed", what="brief killed")
        check(d.list()["brief"]["cause"] == "runtime limit", "cause: %r" % d.list()["brief"])
        check(limit_hits(d, "brief", "RuntimeMax"), "no audit record: %r" % audit(d))


@test
def runtime_max_before_hello(tmp):
    """RuntimeMax= shorter than the start (as on a slow host): the gadget is
    killed before or while it says hello, and its cause stays "runtime
    limit", never a bare signal; it never shows ready."""
    with Daemon(tmp) as d:
        for i in range(10):
            policy(d.pol, "rush%d" % i, "RuntimeMax=1ms\n")
        d.ctl("reload")
        for i in range(10):
            name = "rush%d" % i
            wait_for(lambda n=name: d.state(n) == "failed", what=name + " killed")
            check(d.list()[name]["cause"] == "runtime limit", "cause: %r" % d.list()[name])


# --- the cgroups themselves ------------------------------------------------------

SWAP_FILES = {"memory.swap.max", "memory.memsw.limit_in_bytes"}


def check_cgroup_tree(d, name, files):
    """The gadget's cgroups hold its worker, sit below gadgetd's own and hold
    the values written; files: {controller: {file: value}}."""
    gadget = cgroup_dirs(d.list()[name]["pid"])
    own = cgroup_dirs(d.proc.pid)
    for ctrl, want in files.items():
        g = gadget.get(ctrl, "")
        check(g.endswith("/gadget-" + name), "%s cgroup of the gadget: %r" % (ctrl, g))
        base = os.path.dirname(os.path.dirname(g))
        check(base == own[ctrl] or own[ctrl].startswith(base + "/"),
              "%s cgroup %s is not below gadgetd's own %s" % (ctrl, g, own[ctrl]))
        for f, v in want.items():
            path = os.path.join(g, f)
            if (f in SWAP_FILES and not os.path.exists(path)
                    and not os.path.exists(os.path.join(os.path.dirname(g), f))):
                continue  # no swap accounting here: gadgetd's cgroup of gadgets has no such file either
            check(os.path.exists(path), "%s is missing: the limit was not written" % path)
            check(read(path) == v, "%s = %r, want %r" % (path, read(path), v))
    return gadget


@test
def cgroup_v1_fallback(tmp):
    if not v1_available():
        skip("no cgroup v1 memory, pids and cpu hierarchies are mounted here")
    with Daemon(tmp, extra=["--limits-mode", "cgroup-v1"]) as d:
        check(mode_of(d) == "cgroup v1", "mode: %r" % mode_of(d))
        policy(d.pol, "lim", "MemoryMax=48M\nTasksMax=10\nCPUQuota=30%\n")
        d.ctl("reload")
        wait_for(lambda: d.state("lim") == "ready", what="lim ready")
        dirs = check_cgroup_tree(d, "lim", {
            "memory": {"memory.limit_in_bytes": str(48 << 20), "memory.memsw.limit_in_bytes": str(48 << 20)},
            "pids": {"pids.max": "11"},
            "cpu": {"cpu.cfs_quota_us": "30000", "cpu.cfs_period_us": "100000"},
        })
        d.ctl("stop", "lim")
        wait_for(lambda: d.state("lim") == "stopped", what="lim stopped")
        check(not any(os.path.exists(p) for p in dirs.values() if p.endswith("/gadget-lim")),
              "cgroups left after the stop: %r" % dirs)
        instance = os.path.dirname(dirs["pids"])
        check(os.path.isdir(instance), "no instance directory %s" % instance)
    check(not os.path.exists(instance), "%s left after gadgetd ended" % instance)


@test
def cgroup_v2_delegated(tmp):
    """The daemon in cgroup v2 mode: where this test's cgroup (which its
    Python shares) cannot be taken over and systemd runs, in a delegated
    scope of its own; the gadget's cgroup has every limit and an OOM is told."""
    # gadgetd must hold its cgroup alone to hand controllers down (systemd's
    # Delegate=yes): a scope of its own from systemd, or a cgroup v2 here
    # that no other process shares.
    r, out = run_probe(tmp, "exit", "0", opts=["--limits-mode", "cgroup-v2"])
    if r.returncode == 125 and "is not available" in r.stderr:
        # With systemd and a unified v2 hierarchy it must have its scope.
        check(systemd_v2_why_not(), "no cgroup v2 on a systemd v2 host: %s" % r.stderr.strip()[-400:])
        skip("gadgetd cannot take this cgroup over for v2: %s" % r.stderr.strip()[-300:])
    with Daemon(tmp, extra=["--limits-mode", "cgroup-v2"]) as d:
        check(mode_of(d) == "cgroup v2", "mode: %r" % mode_of(d))
        if not systemd_v2_why_not():
            scope = "gadgetd-%d.scope" % d.proc.pid
            own = cgroup_dirs(d.proc.pid)["v2"]
            check("/%s/" % scope in own, "gadgetd is in %s, not in a scope %s of its own" % (own, scope))
            check(unit_property(scope, "Delegate") == "yes", "%s is not delegated" % scope)
        policy(d.pol, "lim", "MemoryMax=32M\nTasksMax=10\nCPUQuota=30%\nRestart=no\n")
        d.ctl("reload")
        wait_for(lambda: d.state("lim") == "ready", what="lim ready")
        check_cgroup_tree(d, "lim", {"v2": {"memory.max": str(32 << 20), "memory.swap.max": "0",
                                            "pids.max": "11", "cpu.max": "30000 100000"}})
        d.ctl("call", "lim", "alloc", '{"mb": 128}')
        wait_for(lambda: d.state("lim") == "failed", what="lim killed")
        check(d.list()["lim"]["cause"] == "out of memory (killed by signal SIGKILL)", "cause: %r" % d.list()["lim"])


@test
def cgroup_v2_scope_for_gadgetd_run(tmp):
    """From a cgroup it cannot take over (a login shell's session scope, or
    this test's own, which the test's Python shares), gadgetd run gets a
    delegated scope of its own from systemd. Seen from outside: gadgetd is in
    gadgetd-run-PID.scope (Delegate=yes), its gadget's cgroup there holds the
    worker and every limit, nothing is said about a fallback, and the scope
    is gone after the run."""
    why = systemd_v2_why_not()
    if why:
        skip(why)
    pol = policy(tmp, "held", "MemoryMax=32M\nTasksMax=10\nCPUQuota=30%\n")
    p = subprocess.Popen(gadgetd_run(tmp) + [pol, "--call", "sleep", '{"ms": 60000}'], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    scope = "gadgetd-run-%d.scope" % p.pid
    try:
        def gadget():
            own = cgroup_dirs(p.pid).get("v2", "")
            g = os.path.join(os.path.dirname(own), "gadget-held")
            return g if own.endswith("/%s/gadgetd.%d/supervisor" % (scope, p.pid)) and os.path.isdir(g) else None
        wait_for(lambda: p.poll() is not None or gadget(), what="gadgetd run in %s with its gadget" % scope)
        g = gadget()
        check(g, "gadgetd run is in %r (exit %r): %r" % (cgroup_dirs(p.pid).get("v2") if p.poll() is None
                                                          else None, p.returncode, p.stderr.read()
                                                          if p.poll() is not None else ""))
        check(unit_property(scope, "Delegate") == "yes", "%s is not delegated" % scope)
        wait_for(lambda: read(os.path.join(g, "cgroup.procs")), what="the worker in %s" % g)
        for f, v in {"memory.max": str(32 << 20), "memory.swap.max": "0", "pids.max": "11",
                     "cpu.max": "30000 100000"}.items():
            check(read(os.path.join(g, f)) == v, "%s/%s = %r, want %r" % (g, f, read(os.path.join(g, f)), v))
    finally:
        if p.poll() is None:
            p.terminate()
        _, err = p.communicate(timeout=60)
    check("cgroup v2 not used" not in err, "gadgetd run warned: %r" % err)
    wait_for(lambda: unit_property(scope, "ActiveState") in ("inactive", ""), what="%s gone" % scope)
    check(not os.path.exists(os.path.dirname(os.path.dirname(g))), "%s left behind" % g)


@test
def cgroup_v2_delegated_scope_kept(tmp):
    """In a delegated cgroup of its own (systemd-run --scope -p Delegate=yes,
    as under gadgetd.service), gadgetd run asks for no other scope: it stays
    in the one it was given, its gadget's cgroup below it with the limit."""
    why = systemd_v2_why_not()
    if why:
        skip(why)
    unit = "gadgetd-test-%d.scope" % os.getpid()
    pol = policy(tmp, "kept", "MemoryMax=32M\n")
    # systemd-run --scope execs the command: p.pid is gadgetd run's.
    p = subprocess.Popen(["systemd-run", "--quiet", "--scope", "-p", "Delegate=yes", "--unit", unit,
                          *gadgetd_run(tmp), pol, "--call", "sleep", '{"ms": 60000}'],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def gadget():
            own = cgroup_dirs(p.pid).get("v2", "")
            g = os.path.join(os.path.dirname(own), "gadget-kept")
            return g if own.endswith("/%s/gadgetd.%d/supervisor" % (unit, p.pid)) and os.path.isdir(g) else None
        wait_for(lambda: p.poll() is not None or gadget(), what="gadgetd run in %s with its gadget" % unit)
        g = gadget()
        check(g, "gadgetd run is in %r, not in %s (exit %r)" % (cgroup_dirs(p.pid).get("v2") if p.poll() is None
                                                             else None, unit, p.returncode))
        # gadgetd writes the limits, then puts the worker in: once it is
        # there, memory.max is what it will be (read before, it was 'max')
        wait_for(lambda: read(os.path.join(g, "cgroup.procs")), what="the worker in %s" % g)
        check(read(os.path.join(g, "memory.max")) == str(32 << 20), "%s/memory.max: %r" %
              (g, read(os.path.join(g, "memory.max"))))
        check(unit_property("gadgetd-run-%d.scope" % p.pid, "ActiveState") in ("inactive", ""),
              "gadgetd run asked for a scope though it had a delegated one")
    finally:
        if p.poll() is None:
            p.terminate()
        _, err = p.communicate(timeout=60)
    check("cgroup v2 not used" not in err, "gadgetd run warned: %r" % err)


@test
def cgroup_v2_no_scope_says_why(tmp):
    """Where systemd cannot give gadgetd run a delegated scope (here: no
    system bus), one line says why and what to run instead, and a MemoryMax
    it cannot enforce is refused as before (fail closed)."""
    why = systemd_v2_why_not()
    if why:
        skip(why)
    if v1_available():
        skip("cgroup v1 hierarchies are mounted here: gadgetd would fall back to them")
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/gadgetd-test-bus")
    pol = policy(tmp, "hog", "MemoryMax=32M\n")
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "alloc", '{"mb": 1}'], capture_output=True, text=True,
                       env=env, timeout=60)
    lines = [l for l in r.stderr.splitlines() if "cgroup v2 not used" in l]
    check(r.returncode != 0 and "MemoryMax=32M cannot be enforced" in r.stderr, "started: %r" % r.stderr)
    check(len(lines) == 1, "want one line on cgroup v2: %r" % r.stderr)
    check("cannot connect to the system bus" in lines[0] and
          "systemd-run --scope -p Delegate=yes gadgetd run" in lines[0], "the line: %r" % lines[0])


@test
def cgroup_namespace_rooted(tmp):
    r, out = run_probe(tmp, "cgroup")
    check(r.returncode == 0 and out.get("cgroup"), "probe: %r" % r.stderr)
    for line in out["cgroup"]:
        check(line.endswith(":/"), "the gadget sees a cgroup path of the host: %r" % out["cgroup"])


if __name__ == "__main__":
    sys.exit(main())
