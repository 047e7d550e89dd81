#!/usr/bin/env python3
"""Integration tests of the sandbox: a real probe program runs under a real
`gadgetd run` and reports from inside; each test asserts one property.

Usage: sandbox_test.py TEST   (meson runs one process per test)
Environment: GADGETD, PROBE, HELLO, WORDCOUNT (paths of built programs),
EXAMPLES (the build's examples directory with the configured policies).
"""
import os
import re
import shutil
import signal
import subprocess
import sys

from harness import GADGETD, PROBE, check, gadgetd_run, main, mounts, policy, run_probe, need, skip, test, wait_for

EXAMPLES = os.environ.get("EXAMPLES", "")


def gadgetd(*args, timeout=60):
    return subprocess.run([GADGETD, *args], capture_output=True, text=True, timeout=timeout)


def gadgetd_run_in(tmp, *args, timeout=60):
    """gadgetd run on tmp's own state and run directories."""
    return subprocess.run(gadgetd_run(tmp) + list(args), capture_output=True, text=True, timeout=timeout)


# --- namespaces and identity ------------------------------------------------

@test
def namespaces_differ(tmp):
    r, out = run_probe(tmp, "ns")
    check(r.returncode == 0, "probe failed: %r" % r.stderr)
    for t in ("user", "net", "mnt", "pid", "ipc", "uts", "cgroup"):
        host = os.readlink("/proc/self/ns/" + t)
        inside = out.get("ns " + t, ["?"])[0]
        check(inside.startswith(t + ":["), "ns %s unreadable inside: %s" % (t, inside))
        check(inside != host, "%s namespace is the host's (%s)" % (t, host))


@test
def uid_map_single_nonroot(tmp):
    r, out = run_probe(tmp, "ids")
    check(r.returncode == 0, r.stderr)
    for m in ("uid_map", "gid_map"):
        lines = out.get(m, [])
        check(len(lines) == 1, "%s has %d lines: %r" % (m, len(lines), lines))
        inner, host, count = lines[0].split()
        check(inner == "1000" and count == "1", "%s: %r" % (m, lines[0]))
        check(int(host) != 0 and int(host) >= 1 << 16, "%s maps onto host id %s" % (m, host))
    check(out.get("setgroups") == ["deny"], "setgroups: %r" % out.get("setgroups"))


@test
def uid_unique_per_gadget(tmp):
    """Two gadgets of the same name running at once (two `gadgetd run`
    on one run directory) get different host uids: the name alone would
    hash both to the same one."""
    other = os.path.join(tmp, "sh")
    os.mkdir(other)
    # /bin/sh is dynamically linked: SystemLibraries is needed.
    slow = policy(other, "probe", "SystemLibraries=yes\n", exec_path="/bin/sh")
    p = subprocess.Popen(gadgetd_run(tmp) + [slow, "--", "-c", "cat /proc/self/uid_map; sleep 2"],
                         stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline().split()
    r, out = run_probe(tmp, "ids")
    p.wait(timeout=30)
    second = out["uid_map"][0].split()
    check(first and first[1] != second[1], "both gadgets got host uid %s" % second[1])


@test
def capabilities_all_zero(tmp):
    r, out = run_probe(tmp, "status")
    check(r.returncode == 0, r.stderr)
    caps = {l.split(":")[0]: l.split(":")[1].strip() for l in out["status"] if l.startswith("Cap")}
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        check(caps.get(k) == "0000000000000000", "%s = %s" % (k, caps.get(k)))
    # securebits: NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE set and
    # locked, KEEP_CAPS locked off (<linux/securebits.h>: bits 0-7).
    want = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
    bits = [l.split("\t")[-1] for l in out["status"] if l.startswith("Securebits:")]
    check(bits == [hex(want)], "securebits %r, want %s" % (bits, hex(want)))


@test
def no_new_privs(tmp):
    r, out = run_probe(tmp, "status")
    check("NoNewPrivs:\t1" in out["status"], "status: %r" % out["status"])


@test
def seccomp_filter_mode(tmp):
    r, out = run_probe(tmp, "status")
    check("Seccomp:\t2" in out["status"], "status: %r" % out["status"])


# --- network ----------------------------------------------------------------

@test
def sockets_refused_eacces(tmp):
    r, out = run_probe(tmp, "sockets")
    for fam in ("AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK", "AF_PACKET"):
        check(out.get("socket " + fam) == ["EACCES"], "socket(%s): %r" % (fam, out.get("socket " + fam)))
    check(out.get("socketpair") == ["EACCES"], "socketpair: %r" % out.get("socketpair"))


def interfaces(out):
    return {l.split(":")[0].strip(): l for l in out.get("netdev", [])[2:]}


@test
def only_loopback(tmp):
    r, out = run_probe(tmp, "ifaces")
    check(list(interfaces(out)) == ["lo"], "interfaces: %r" % list(interfaces(out)))


@test
def loopback_down(tmp):
    # lo gets its ::1 address (listed in /proc/net/if_inet6) only once up;
    # Loopback=yes is ignored (realsw_test.py loopback_deprecated).
    if not os.path.exists("/proc/net/if_inet6"):
        need("IPv6", "it is disabled on this host")
    r, out = run_probe(tmp, "ifaces")
    check(out.get("inet6", []) == [], "lo is up: %r" % out.get("inet6"))


# --- filesystem -------------------------------------------------------------

@test
def root_read_only(tmp):
    r, out = run_probe(tmp, "writes")
    check(out.get("create /x") == ["EROFS"], "create /x: %r" % out.get("create /x"))
    check(out.get("mkdir /d") == ["EROFS"], "mkdir /d: %r" % out.get("mkdir /d"))
    check(out.get("create /tmp/x") == ["ok"], "/tmp must be writable: %r" % out.get("create /tmp/x"))


@test
def host_files_invisible(tmp):
    listed = os.path.join(tmp, "listed")
    os.mkdir(listed)
    open(os.path.join(listed, "seen"), "w").close()
    hidden = os.path.join(tmp, "hidden")
    open(hidden, "w").close()
    r, out = run_probe(tmp, "paths", "/etc/passwd", "/etc/shadow", "/home", "/usr", hidden,
                   os.path.join(listed, "seen"), body="ReadOnlyPaths=%s\n" % listed)
    for p in ("/etc/shadow", "/home", "/usr", hidden):
        check(out.get("stat " + p) == ["ENOENT"], "%s visible: %r" % (p, out.get("stat " + p)))
    # /etc/passwd is the sandbox's own (realsw_test.py user_name_known).
    check(out.get("stat /etc/passwd") == ["ok"], "no /etc/passwd: %r" % out.get("stat /etc/passwd"))
    check(out.get("stat " + os.path.join(listed, "seen")) == ["ok"], "listed path not visible")


@test
def read_only_paths_read_only_whatever_their_modes(tmp):
    """ReadOnlyPaths= is read-only by its mount, not by file modes: a
    directory and a file every user may write (0777, 0666), listed, can
    be neither created in nor written inside the sandbox (EROFS)."""
    listed = os.path.join(tmp, "open")
    os.mkdir(listed)
    os.chmod(listed, 0o777)
    existing = os.path.join(listed, "file")
    open(existing, "w").close()
    os.chmod(existing, 0o666)
    r, out = run_probe(tmp, "create", os.path.join(listed, "new"), existing, body="ReadOnlyPaths=%s\n" % listed)
    for p in (os.path.join(listed, "new"), existing):
        check(out.get("create " + p) == ["EROFS"], "create %s: %r" % (p, out.get("create " + p)))
    check(not os.path.exists(os.path.join(listed, "new")), "a file was made in the listed directory")


@test
def root_holds_only_expected(tmp):
    r, out = run_probe(tmp, "ls", "/")
    top = PROBE.split("/")[1]
    check(sorted(out["ls"]) == sorted({"dev", "etc", "proc", "sys", "tmp", top}), "root: %r" % out["ls"])
    r, out = run_probe(tmp, "ls", "/dev")
    check(sorted(out["ls"]) == sorted(["null", "zero", "full", "random", "urandom", "fd",
                                       "stdin", "stdout", "stderr", "shm"]), "/dev: %r" % out["ls"])
    r, out = run_probe(tmp, "ls", "/etc")
    check(sorted(out["ls"]) == ["group", "passwd"], "/etc without SystemLibraries: %r" % out["ls"])


@test
def only_expected_fds(tmp):
    r, out = run_probe(tmp, "fds")
    check(sorted(out["fd"]) == ["0", "1", "2", "3"], "open fds: %r" % out["fd"])


@test
def own_pid_namespace(tmp):
    r, out = run_probe(tmp, "pid")
    check(out["pid"] == ["2"], "pid: %r" % out["pid"])
    check(out["hostname"] == ["probe"], "hostname: %r" % out["hostname"])


def cgroup_cpuset_here():
    """Whether gadgetd can give a gadget a cpuset here: a v1 cpuset
    hierarchy, or cpuset among the v2 hierarchy's controllers."""
    v1, v2 = mounts()
    if "cpuset" in v1:
        return True
    try:
        with open(os.path.join(v2[1], "cgroup.controllers")) as f:
            return "cpuset" in f.read().split()
    except (OSError, TypeError):
        return False


@test
def cpu_affinity_is_gadgetds(tmp):
    """The sandbox is built on other CPUs than gadgetd's own, but the
    program runs on the CPUs gadgetd may use, no more, no fewer; where its
    cgroup has a cpuset it cannot widen its own affinity past them.
    gadgetd is pinned with taskset, or, under systemd on cgroup v2, with
    AllowedCPUs= on its scope: there systemd turns cpuset on and off as
    units come and go, and before kernel 6.2 each time resets every
    process's affinity to all CPUs (two runs in a row showed it), so only
    a cpuset pins gadgetd for sure."""
    mine = sorted(os.sched_getaffinity(0))
    r, out = run_probe(tmp, "cpus")
    check(out.get("cpus") == [str(c) for c in mine], "cpus %r, gadgetd's %r" % (out.get("cpus"), mine))
    if len(mine) < 2:
        return
    last = str(mine[-1])
    _, v2 = mounts()
    if os.path.isdir("/run/systemd/system") and v2 and v2[1] == "/sys/fs/cgroup":
        pin = ["systemd-run", "--quiet", "--scope", "-p", "Delegate=yes", "-p", "AllowedCPUs=" + last]
    else:
        pin = ["taskset", "-c", last]
    for mode, body in (("cpus", ""), ("cpus-widen", "MemoryMax=64M\n")):
        if mode == "cpus-widen" and not cgroup_cpuset_here():
            continue
        pol = policy(tmp, "probe", body, exec_path=PROBE)
        r = subprocess.run(pin + gadgetd_run(tmp) + [pol, "--", mode], capture_output=True, text=True, timeout=60)
        check(r.stdout.split() == ["cpus:", last], "%s under %s: %r %r" % (mode, pin[0], r.stdout, r.stderr))


@test
def environment_is_clean(tmp):
    os.environ["SECRET_FROM_HOST"] = "leak"
    r, out = run_probe(tmp, "env", body="Environment=A=1 \"B=two words\"\n")
    env = dict(e.split("=", 1) for e in out["env"])
    check("SECRET_FROM_HOST" not in env, "host environment leaked")
    check(env.get("GADGET_FD") == "3" and env.get("A") == "1" and env.get("B") == "two words",
          "env: %r" % env)


# --- system calls -----------------------------------------------------------

@test
def dangerous_syscalls_fail(tmp):
    r, out = run_probe(tmp, "syscalls")
    for name in ("io_uring_setup", "ptrace", "unshare", "mount"):
        v = out.get(name, ["missing"])[0]
        check(v in ("EPERM", "ENOSYS", "EACCES"), "%s: %s" % (name, v))
    check(out.get("clone3") == ["ENOSYS"], "clone3: %r" % out.get("clone3"))
    for fd in range(3):
        for k in ("TIOCSTI %d" % fd, "TIOCSTI high %d" % fd):
            check(out.get(k) == ["EPERM"], "%s: %r" % (k, out.get(k)))


@test
def int80_kills(tmp):
    # Outside any sandbox first: a kernel without the i386 entry (no IA32
    # emulation, or turned off) faults int $0x80 before a filter sees it.
    bare = subprocess.run([PROBE, "int80"], capture_output=True, text=True, timeout=30)
    if bare.returncode == -signal.SIGSEGV:
        skip("this kernel has no i386 system call entry (int $0x80 faults outside the sandbox too); "
             "x32_kills checks the filter's kill of other ABIs")
    check(bare.returncode == 0 and "int80: survived" in bare.stdout, "int $0x80 outside the sandbox: %r" % (bare,))
    r, out = run_probe(tmp, "int80")
    check("int80" not in out, "the i386 syscall returned: %r" % out.get("int80"))
    check(r.returncode == 128 + 31, "exit status %d, want 159 (SIGSYS)" % r.returncode)
    check("SIGSYS" in r.stderr, "stderr does not name SIGSYS: %r" % r.stderr)


@test
def x32_kills(tmp):
    r, out = run_probe(tmp, "x32")
    check("x32" not in out, "the x32 syscall returned: %r" % out.get("x32"))
    check(r.returncode == 128 + 31, "exit status %d, want 159 (SIGSYS)" % r.returncode)
    check("SIGSYS" in r.stderr, "stderr does not name SIGSYS: %r" % r.stderr)


@test
def fork_and_reap(tmp):
    r, out = run_probe(tmp, "fork")
    check(r.returncode == 0 and out.get("fork") == ["ok"], "fork: %r %r" % (out, r.stderr))


@test
def orphan_reaped(tmp):
    # The grandchild of the program outlives its parent: the sandbox's
    # PID 1 inherits it and must reap it, or it stays a zombie.
    r, out = run_probe(tmp, "orphan")
    check(r.returncode == 0 and out.get("orphan") == ["reaped"], "orphan: %r %r" % (out, r.stderr))


def init_kept(pid):
    """What the sandbox's PID 1 keeps of its own (Private_Dirty, KiB) on
    its heap, and on mappings of no file besides its .bss (the one right
    after its image): (heap, other), None once it is gone."""
    heap = other = 0
    part, last = "named", ""
    try:
        with open("/proc/%d/smaps" % pid) as f:
            for line in f:
                head = line.split()
                if "-" in head[0] and not head[0].endswith(":"):
                    name = head[5] if len(head) > 5 else ""
                    part = ("heap" if name == "[heap]" else "named" if name
                            else "bss" if last.endswith("gadgetd-sandbox") else "other")
                    last = name
                elif head[0] == "Private_Dirty:":
                    heap += int(head[1]) if part == "heap" else 0
                    other += int(head[1]) if part == "other" else 0
    except OSError:
        return None
    return heap, other


@test
def sigterm_forwarded(tmp):
    """SIGTERM to gadgetd reaches the program through the sandbox's PID 1.
    Meanwhile, the program running, PID 1 keeps nothing of its start: the
    setup's mappings unmapped, what it freed given back (two pages of heap
    at most, its thread's block and the allocator's; before: 36 KiB)."""
    pol = policy(tmp, "trap", "SystemLibraries=yes\n", exec_path="/bin/sh")
    p = subprocess.Popen(gadgetd_run(tmp) + [pol, "--", "-c",
                          "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            init = [int(c) for c in f.read().split() if open("/proc/%s/uid_map" % c).read().strip()]
        check(len(init) == 1, "PID 1 of the sandbox: %r" % init)
        seen = []
        # PID 1 lets go once the program's exec is done, which the
        # program's first line may come before.
        wait_for(lambda: seen.append(init_kept(init[0])) or (seen[-1] and seen[-1][0] <= 8 and seen[-1][1] == 0),
                 timeout=10, what=lambda: "PID 1 to keep at most 8 KiB of heap and no other mapping: %r" % seen[-1:])
    finally:
        p.terminate()
    out, err = p.communicate(timeout=30)
    check("got-term" in out and p.returncode == 3, "status %d out %r err %r" % (p.returncode, out, err))


@test
def exit_status_passed(tmp):
    r, out = run_probe(tmp, "exit", "42")
    check(r.returncode == 42, "exit status %d" % r.returncode)


# --- fail closed ------------------------------------------------------------

@test
def unmountable_path_refused(tmp):
    """A listed path inside another user's private directory: the sandbox
    cannot reach it without capabilities over that user's files."""
    private = os.path.join(tmp, "private")
    os.mkdir(private, 0o700)
    data = os.path.join(private, "data")
    open(data, "w").close()
    os.chown(private, 4321, 4321)
    r, out = run_probe(tmp, "exit", "0", body="ReadOnlyPaths=%s\n" % data)
    check(r.returncode == 125, "exit status %d, want 125" % r.returncode)
    check(("bind %s: Permission denied" % data) in r.stderr, "error does not name the step: %r" % r.stderr)
    check(out == {}, "the gadget ran: %r" % out)


@test
def failing_step_refused(tmp):
    """A program the gadget's uid may not execute: the exec step fails."""
    prog = os.path.join(tmp, "private-probe")
    shutil.copy(PROBE, prog)
    os.chmod(prog, 0o700)
    pol = policy(tmp, "probe", exec_path=prog)
    r = gadgetd_run_in(tmp, pol, "--", "exit", "0")
    check(r.returncode == 125, "exit status %d, want 125" % r.returncode)
    check("exec %s: Permission denied" % prog in r.stderr, "stderr: %r" % r.stderr)


# --- calls ------------------------------------------------------------------

@test
def call_hello(tmp):
    r = gadgetd_run_in(tmp, os.path.join(EXAMPLES, "hello.policy"), "--call", "greet", '{"name": "Ada"}')
    check(r.returncode == 0 and r.stdout == '"Hello, Ada!"\n', "hello: %r %r" % (r.stdout, r.stderr))


@test
def call_dynamic_example(tmp):
    r = gadgetd_run_in(tmp, os.path.join(EXAMPLES, "wordcount.policy"), "--call", "count",
                '{"text": "one two\\nthree é"}')
    check(r.returncode == 0, "wordcount: %r" % r.stderr)
    check(r.stdout.strip() == '{"lines":1,"words":4,"chars":15}', "result: %r" % r.stdout)


@test
def call_waits_for_a_hello_within_start_timeout(tmp):
    """--call needs the program's hello: one that never says it (a plain
    program) is ended at StartTimeout=, not waited on until it exits."""
    pol = os.path.join(tmp, "mute.policy")
    with open(pol, "w") as f:
        f.write("[Gadget]\nName=mute\nExec=/bin/sleep\nArguments=60\nSystemLibraries=yes\nStartTimeout=500ms\n")
    try:
        r = gadgetd_run_in(tmp, pol, "--call", "greet", "{}", timeout=20)
    except subprocess.TimeoutExpired:
        check(False, "gadgetd run --call waited for a program that never says hello")
    check(r.returncode == 1 and "no hello within StartTimeout=500ms" in r.stderr,
          "status %d err %r" % (r.returncode, r.stderr))


@test
def call_unknown_method(tmp):
    r = gadgetd_run_in(tmp, os.path.join(EXAMPLES, "hello.policy"), "--call", "nope", "{}")
    check(r.returncode == 1 and r.stdout == "", "status %d out %r" % (r.returncode, r.stdout))
    check('no method "nope"' in r.stderr, "stderr: %r" % r.stderr)


@test
def call_bad_argument(tmp):
    r = gadgetd_run_in(tmp, os.path.join(EXAMPLES, "hello.policy"), "--call", "greet", '{"nom": 1}')
    check(r.returncode == 1 and 'greet: args: unknown field "nom"' in r.stderr,
          "status %d err %r" % (r.returncode, r.stderr))


@test
def call_malformed_json(tmp):
    r = gadgetd_run_in(tmp, os.path.join(EXAMPLES, "hello.policy"), "--call", "greet", '{"name": ')
    check(r.returncode == 2 and "bad JSON" in r.stderr, "status %d err %r" % (r.returncode, r.stderr))
    # Options are checked as gadgetd's own are (config.c), naming what they take.
    hello = os.path.join(EXAMPLES, "hello.policy")
    for opt, val, says in (("--uid-base", "12ab", "is not a uid above 0"), ("--uid-base", "0", "is not a uid"),
                           ("--uid-count", "0", "is not a number from 1 to"),
                           ("--limits-mode", "v3", "is not one of auto")):
        r = subprocess.run([GADGETD, "run", opt, val, hello], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and ("gadgetd run: %s: \"%s\" %s" % (opt, val, says)) in r.stderr,
              "%s %s: %d %r" % (opt, val, r.returncode, r.stderr))


@test
def check_command(tmp):
    good = os.path.join(EXAMPLES, "hello.policy")
    bad = os.path.join(tmp, "bad.policy")
    with open(bad, "w") as f:
        f.write("[Gadget]\nName=bad\nExec=relative/path\nMemoryMax=lots\n")
    r = gadgetd("check", good)
    check(r.returncode == 0, "check of a good policy: %d %r" % (r.returncode, r.stdout))
    r = gadgetd("check", good, bad)
    check(r.returncode == 1, "check of a bad policy: exit %d" % r.returncode)
    check(("%s: ok" % good) in r.stdout, "good policy not ok: %r" % r.stdout)
    check(re.search(re.escape(bad) + r":3:.*Exec", r.stdout), "no Exec error with line: %r" % r.stdout)
    check(re.search(re.escape(bad) + r":4:.*MemoryMax", r.stdout), "no MemoryMax error: %r" % r.stdout)


if __name__ == "__main__":
    sys.exit(main())
