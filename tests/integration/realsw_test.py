#!/usr/bin/env python3
"""Integration tests: real programs of the host (shell tools, Python, a
JVM, Node.js) run under `gadgetd run` with SystemLibraries=yes, and find
what a stock host gives them and the sandbox provides: /etc/alternatives,
a user name, /dev/shm, FIFOs in /tmp, their cgroup limits at
/sys/fs/cgroup; and a program whose interpreter is missing is told so.

Usage: realsw_test.py TEST   (meson runs one process per test)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from harness import GADGETD, Daemon, check, gadgetd_run, main, need, policy, skip, test, wait_for


# The Python these tests run on (Debian's python3 that scripts/deps
# installs, tests/integration/meson.build): a real program, not the shim
# of a version manager that may come first on PATH (a bash script running
# others, which the sandbox does not have).
PYTHON = os.path.realpath(sys.executable)

def sh(tmp, script, body="", name="real", exec_path="/bin/sh", args=None, timeout=120):
    """Runs script with /bin/sh (or args with exec_path) under SystemLibraries=yes."""
    pol = policy(tmp, name, "SystemLibraries=yes\n" + body, exec_path=exec_path)
    argv = args if args is not None else ["-c", script]
    return subprocess.run(gadgetd_run(tmp) + [pol, "--", *argv], capture_output=True, text=True,
                          timeout=timeout)


def host_v1_memory():
    """True where the memory controller is a cgroup v1 hierarchy."""
    for line in open("/proc/self/cgroup"):
        if line.split(":")[1].split(",").count("memory"):
            return True
    return False


# --- /etc -------------------------------------------------------------------

@test
def alternatives_resolve(tmp):
    """awk, which and pager are links through /etc/alternatives."""
    if not os.path.exists("/etc/alternatives/awk"):
        need("/etc/alternatives/awk", "Debian's alternatives system has no awk link here")
    r = sh(tmp, "awk 'BEGIN { print 6 * 7 }'; which ls; readlink -f /usr/bin/awk")
    lines = r.stdout.split()
    check(r.returncode == 0 and lines[:1] == ["42"], "awk: %r %r" % (r.stdout, r.stderr))
    check(len(lines) > 2 and lines[1].endswith("/ls") and lines[2] == os.path.realpath("/usr/bin/awk"),
          "which/readlink: %r" % r.stdout)


@test
def etc_holds_only_listed(tmp):
    """/etc has the loader cache, alternatives, time zone, locale aliases
    (each where the host has it) and the generated passwd and group:
    nothing else of the host's /etc."""
    r = sh(tmp, "ls -A /etc; cat /etc/shadow /etc/ssh/ssh_host_ed25519_key 2>&1")
    want = {"passwd", "group"} | {n for n in ("ld.so.cache", "alternatives", "localtime", "locale.alias")
                                  if os.path.lexists("/etc/" + n)}
    lines = r.stdout.splitlines()
    check(set(lines[:len(want)]) == want and len(lines) == len(want) + 2, "/etc: %r" % lines)
    check(all("No such file" in l for l in lines[len(want):]), "host secrets: %r" % lines[len(want):])


@test
def user_name_known(tmp):
    """whoami and id name the gadget; the host's users are not there."""
    r = sh(tmp, "whoami; id -un; id -gn; grep -c '^root:' /etc/passwd", name="namer")
    check(r.stdout.split() == ["namer", "namer", "namer", "0"], "names: %r %r" % (r.stdout, r.stderr))


# --- /dev/shm, FIFOs ----------------------------------------------------------

@test
def python_multiprocessing(tmp):
    """A Pool (its queues take POSIX semaphores in /dev/shm) maps over two workers."""
    code = ("import multiprocessing as mp\n"
            "def sq(x): return x * x\n"
            "if __name__ == '__main__':\n"
            "    with mp.Pool(2) as p: print(sum(p.map(sq, range(10))))\n")
    r = sh(tmp, None, "MemoryMax=256M\nTasksMax=64\n", exec_path=PYTHON,
           args=["-c", code])
    check(r.returncode == 0 and r.stdout.strip() == "285", "pool: %r %r" % (r.stdout, r.stderr[-2000:]))


@test
def dev_shm_size_limited(tmp):
    """/dev/shm is the gadget's own tmpfs of TmpSize, not executable."""
    r = sh(tmp, "head -c 8M /dev/zero > /dev/shm/big; echo $?; stat -c %s /dev/shm/big; "
                "grep ' /dev/shm ' /proc/mounts", "TmpSize=4M\n")
    lines = r.stdout.splitlines()
    check(len(lines) == 3 and lines[0] != "0" and int(lines[1]) <= 4 << 20, "8M into 4M: %r %r" % (lines, r.stderr))
    check("noexec" in lines[2] and "nosuid" in lines[2] and "nodev" in lines[2], "options: %r" % lines[2])
    # /tmp and /dev/shm are two directories of the root tmpfs (one
    # superblock, not three): TmpSize bounds them together.
    r = sh(tmp, "head -c 3M /dev/zero > /tmp/a; echo $?; head -c 3M /dev/zero > /dev/shm/b; echo $?; "
                "awk '$5 == \"/\" || $5 == \"/tmp\" || $5 == \"/dev/shm\" {print $3}' /proc/self/mountinfo | sort -u",
           "TmpSize=4M\n")
    lines = r.stdout.splitlines()
    check(len(lines) == 3 and lines[0] == "0" and lines[1] != "0", "3M and 3M into 4M together: %r %r" %
          (lines, r.stderr))
    check(len(lines) == 3 and ":" in lines[2], "/, /tmp and /dev/shm on one superblock: %r" % lines[2:])


@test
def dev_shm_counts_in_memory_max(tmp):
    """What /dev/shm holds is memory of the gadget's cgroup: 48M cannot
    be written under MemoryMax=24M (and can without it)."""
    if not host_v1_memory() and not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        skip("no cgroup memory controller on this host (neither v1 nor v2)")
    script = "head -c 48M /dev/zero > /dev/shm/x; stat -c %s /dev/shm/x"
    r = sh(tmp, script, "TmpSize=64M\n")
    check(r.stdout.strip() == str(48 << 20), "without MemoryMax: %r %r" % (r.stdout, r.stderr))
    r = sh(tmp, script, "TmpSize=64M\nMemoryMax=24M\n")
    check(r.stdout.strip() != str(48 << 20), "48M written under MemoryMax=24M: %r %r" % (r.stdout, r.stderr))


@test
def fifo_in_tmp(tmp):
    """mkfifo works in /tmp; other node types stay refused."""
    r = sh(tmp, "mkfifo /tmp/f && (echo through > /tmp/f &) && cat /tmp/f; "
                "mknod /tmp/c c 1 3 2>&1; mknod /tmp/b b 8 0 2>&1; echo done")
    lines = r.stdout.splitlines()
    check(lines[:1] == ["through"], "fifo: %r %r" % (r.stdout, r.stderr))
    check(len(lines) == 4 and all("Operation not permitted" in l for l in lines[1:3]), "devices: %r" % lines)
    # The kernel itself refuses devices; a regular file or socket node only
    # the filter does.
    code = ("import os, stat\n"
            "for t in (stat.S_IFREG, 0, stat.S_IFSOCK):\n"
            "    try: os.mknod('/tmp/n%o' % t, 0o600 | t); print('made')\n"
            "    except PermissionError: print('EPERM')\n")
    r = sh(tmp, None, exec_path=PYTHON, args=["-c", code])
    check(r.stdout.split() == ["EPERM"] * 3, "other nodes: %r %r" % (r.stdout, r.stderr))


# --- /sys/fs/cgroup -----------------------------------------------------------

@test
def cgroup_limits_visible(tmp):
    """The gadget's own cgroup is read-only at /sys/fs/cgroup, rooted there."""
    if host_v1_memory():
        script = ("cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; "
                  "ls /sys/fs/cgroup/memory | grep -c '^gadget'; "
                  "echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes || echo refused")
        want = [str(96 << 20), "17", "0", "refused"]
    elif os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        script = ("cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max; "
                  "ls /sys/fs/cgroup | grep -c '^gadget'; echo 1 > /sys/fs/cgroup/memory.max || echo refused")
        want = [str(96 << 20), "17", "0", "refused"]
    else:
        skip("no cgroup memory controller on this host (neither v1 nor v2)")
    r = sh(tmp, script, "MemoryMax=96M\nTasksMax=16\n")
    if "falls back" in r.stderr or "rlimits" in r.stderr:
        skip("gadgetd has no cgroup here: %s" % r.stderr.strip())
    check(r.stdout.split() == want, "limits: %r, want %r (stderr %r)" % (r.stdout, want, r.stderr))


@test
def jvm_sees_memory_max(tmp):
    """OpenJDK sizes its heap by MemoryMax (not by the host's memory)."""
    java = shutil.which("java")
    conf = [d for d in ("/etc/java-17-openjdk", "/etc/java-21-openjdk") if os.path.isdir(d)]
    if not java or not conf:
        need("OpenJDK", "no java and /etc/java-17-openjdk here (scripts/deps installs openjdk-17-jre-headless)")
    r = sh(tmp, None, "MemoryMax=256M\nTasksMax=256\nReadOnlyPaths=%s\n" % conf[0],
           exec_path=os.path.realpath(java), args=["-XX:+PrintFlagsFinal", "-version"])
    m = re.search(r"\bMaxHeapSize\s*=\s*(\d+)", r.stdout)
    check(r.returncode == 0 and m, "java: %r" % r.stderr[-2000:])
    check(0 < int(m.group(1)) <= 256 << 20, "MaxHeapSize %s under MemoryMax=256M" % m.group(1))


def learn_until_it_runs(tmp, name, exec_path, args, body=""):
    """gadgetd run --learn from a bare policy, each run on the policy the
    last one wrote, until the program ends well (at most 3 runs); then the
    last policy without --learn. Returns (the runs, the policies' texts,
    the last plain run)."""
    pol = policy(tmp, name, body, exec_path=exec_path)
    runs, texts = [], []
    for i in range(3):
        out = os.path.join(tmp, "%s.learned%d.policy" % (name, i + 1))
        r = subprocess.run(gadgetd_run(tmp, "--learn", out) + [pol, "--", *args], capture_output=True, text=True,
                           timeout=120)
        check(os.path.exists(out) and "what it needs is in %s" % out in r.stderr, "run %d wrote no policy: %r"
              % (i + 1, r.stderr[-2000:]))
        runs.append(r)
        texts.append(open(out).read())
        pol = out
        if r.returncode == 0:
            break
    text = texts[-1]
    plain = subprocess.run(gadgetd_run(tmp) + [pol, "--", *args], capture_output=True, text=True, timeout=120)
    check(plain.returncode == 0, "%s under its learned policy: %r\n%s" % (name, plain.stderr[-2000:], text))
    # Every key the learning added has its reason above it; the filter
    # has no key, and none was made up.
    lines = text.splitlines()
    for t in texts:
        lines = t.splitlines()
        for i, l in enumerate(lines):
            if l.startswith("ReadOnlyPaths=") and " " not in l and "ReadOnlyPaths=" not in body:
                check(lines[i - 1].startswith("# it looked for "), "no reason above %r: %r" % (l, lines[i - 1]))
    return runs, "".join(texts), plain


@test
def learn_writes_policies_real_programs_run_under(tmp):
    """gadgetd run --learn on real programs from a policy that names only
    the program: a dynamically linked tool (its loader: SystemLibraries=yes),
    a Python script (and the script: ReadOnlyPaths=, a socket it tried
    named as refused), a JVM (its configuration in /etc/java-*); each runs
    under the policy the learning wrote, within three learning runs."""
    runs, text, plain = learn_until_it_runs(tmp, "lister", "/usr/bin/ls", ["-d", "/usr"])
    check(runs[0].returncode != 0 and "# it looked for /lib64/ld-linux-x86-64.so.2, the interpreter of /usr/bin/ls"
          in text and "\nSystemLibraries=yes\n" in text and plain.stdout == "/usr\n", "ls: %r" % text)
    # The script outside /tmp, which the sandbox has of its own.
    work = tempfile.mkdtemp(dir="/var/tmp", prefix="gadgetd-learn-")
    try:
        os.chmod(work, 0o755)
        script = os.path.join(work, "hello.py")
        with open(script, "w") as f:
            f.write("import socket\ntry:\n    socket.socket()\nexcept OSError as e:\n    print('socket:', e.errno)\n"
                    "print('hello from python')\n")
        os.chmod(script, 0o644)
        runs, text, plain = learn_until_it_runs(tmp, "py", "/usr/bin/python3", [script])
        check("\nReadOnlyPaths=%s\n" % script in text and "# refused: socket (EACCES)" in text and
              plain.stdout == "socket: 13\nhello from python\n", "python: %r %r" % (plain.stdout, text))
    finally:
        shutil.rmtree(work)
    java = shutil.which("java")
    if not java:
        need("OpenJDK", "no java here (scripts/deps installs openjdk-17-jre-headless)")
    runs, text, plain = learn_until_it_runs(tmp, "jvm", os.path.realpath(java), ["-Xmx64m", "-version"],
                                            "MemoryMax=512M\nTasksMax=256\n")
    check(re.search(r"\nReadOnlyPaths=/etc/java-\d+-openjdk", text) and "openjdk" in plain.stderr.lower(),
          "jvm: %r %r" % (plain.stderr[-500:], text))


@test
def node_sees_memory_max(tmp):
    """Node.js's process.constrainedMemory() is MemoryMax. Debian 12's
    Node.js 18 takes it from libuv 1.44, which reads only cgroup v1 files:
    on a unified-v2 host it answers undefined, and the test checks that
    Node reads MemoryMax from the cgroup v2 file newer libuv reads."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        need("Node.js", "no node here (scripts/deps installs nodejs)")
    r = sh(tmp, None, "MemoryMax=256M\nTasksMax=256\n", exec_path=os.path.realpath(node),
           args=["-e", "let f = 'none'; try { f = require('fs').readFileSync('/sys/fs/cgroup/memory.max', 'utf8')"
                       ".trim(); } catch (e) {} console.log(String(typeof process.constrainedMemory === 'function' ? "
                       "process.constrainedMemory() : 'none') + ' ' + f)"])
    check(r.returncode == 0 and len(r.stdout.split()) == 2, "node: %r %r" % (r.stdout, r.stderr))
    got, v2file = r.stdout.split()
    if got == "none":
        need("process.constrainedMemory()", "%s has none (Node.js 18.15 or later has it, Debian 12's 18.20 too)"
             % node)
    if got == "undefined" and not host_v1_memory():
        check(v2file == str(256 << 20), "node reads memory.max %r, want %d" % (v2file, 256 << 20))
        print("constrainedMemory() is undefined (this Node's libuv reads cgroup v1 only); memory.max is %s" % v2file)
        return
    check(got == str(256 << 20), "node: constrainedMemory() %r, memory.max %r" % (got, v2file))


@test
def daemon_gadget_sees_cgroups(tmp):
    """Under the daemon, a gadget's /sys/fs/cgroup holds its own cgroups
    (v1: memory, pids, cpu, cpuacct and cpuset; v2: the unified one)."""
    with Daemon(tmp) as d:
        policy(d.pol, "viewer", "SystemLibraries=yes\nMemoryMax=80M\n"
               "Arguments=-c 'echo view $(ls /sys/fs/cgroup); sleep 60'\n", exec_path="/bin/sh")
        d.ctl("reload")
        line = wait_for(lambda: [l for l in d.ctl("logs", "viewer", "-o", "cat").stdout.splitlines()
                                     if l.startswith("view ")],
                        what="the gadget's listing")[0]
        names = set(line.split("view", 1)[1].split())
        if host_v1_memory():
            want = {n for n in ("memory", "pids", "cpu", "cpuacct", "cpuset")
                    if any(n in l.split(":")[1].split(",") for l in open("/proc/self/cgroup"))}
            check(want <= names, "v1 view: %r, want %r" % (names, want))
        else:
            check("memory.max" in names, "v2 view: %r" % names)


@test
def daemon_status_names_interpreter(tmp):
    """The daemon's status of a gadget whose loader is missing names it."""
    with Daemon(tmp) as d:
        policy(d.pol, "lister", exec_path=os.path.realpath("/bin/ls"))
        d.ctl("reload")
        wait_for(lambda: d.state("lister") == "failed", what="lister failed")
        cause = d.list()["lister"]["cause"]
        check(re.search(r"its interpreter /\S*ld-linux\S* is not in the sandbox", cause), "cause: %r" % cause)


# --- a missing interpreter --------------------------------------------------

@test
def missing_interpreter_named(tmp):
    """A dynamically linked program without SystemLibraries: the policy
    check warns, naming its loader and the key that adds it, and the
    start fails naming it again."""
    pol = policy(tmp, "lister", exec_path=os.path.realpath("/bin/ls"))
    want = r"needs its interpreter \"/[^\"]*ld-linux[^\"]*\".*SystemLibraries=yes"
    r = subprocess.run([GADGETD, "check", pol], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and re.search(r":3: warning: Exec=.*" + want, r.stdout), "check: %r" % r.stdout)
    r = subprocess.run(gadgetd_run(tmp) + [pol], capture_output=True, text=True, timeout=60)
    check(r.returncode == 125 and re.search(want, r.stderr), "run: %d %r" % (r.returncode, r.stderr))
    check(re.search(r"exec /\S*ls: its interpreter /\S*ld-linux\S* is not in the sandbox "
                    r"\(SystemLibraries=yes adds the system's\)", r.stderr), "start error: %r" % r.stderr)


@test
def missing_interpreter_at_exec(tmp):
    """A script whose #! interpreter is not in the sandbox: the start's
    error names it, not just ENOENT."""
    libdir = os.path.join(tmp, "lib")
    os.mkdir(libdir)
    script = os.path.join(tmp, "script")
    with open(script, "w") as f:
        f.write("#!%s/gone -x\necho never\n" % libdir)
    os.chmod(script, 0o755)
    pol = policy(tmp, "scripted", "ReadOnlyPaths=%s\n" % libdir, exec_path=script)
    r = subprocess.run(gadgetd_run(tmp) + [pol], capture_output=True, text=True, timeout=60)
    check(r.returncode == 125, "status %d: %r" % (r.returncode, r.stderr))
    check("exec %s: its interpreter %s/gone is not in the sandbox" % (script, libdir) in r.stderr,
          "stderr: %r" % r.stderr)


# --- Loopback= --------------------------------------------------------------

@test
def loopback_deprecated(tmp):
    """Loopback=yes still loads, with a warning, and changes nothing."""
    if not os.path.exists("/proc/net/if_inet6"):
        need("IPv6", "it is disabled on this host: lo's ::1 cannot tell up from down")
    pol = policy(tmp, "old", "Loopback=yes\nSystemLibraries=yes\n", exec_path="/bin/sh")
    r = subprocess.run([GADGETD, "check", pol], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "Loopback= is deprecated" in r.stdout and "%s: ok" % pol in r.stdout,
          "check: %r" % r.stdout)
    r = sh(tmp, "wc -l < /proc/net/if_inet6",
           "Loopback=yes\n", name="old")
    check(r.returncode == 0 and "Loopback= is deprecated" in r.stderr, "run: %r" % r.stderr)
    check(r.stdout.split()[:1] == ["0"], "lo is up: %r" % r.stdout)


if __name__ == "__main__":
    sys.exit(main())
