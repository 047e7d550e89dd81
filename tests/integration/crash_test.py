#!/usr/bin/env python3
"""Crashes explained: the sandbox's init, the program's tracer, reports
the signal, its code, the fault address and a symbolised backtrace of the
crashing thread; gadgetd puts them in the cause, the lifecycle audit
record and `gadgetctl status`. Usage: crash_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys

from harness import TESTGADGET, Daemon, check, main, need, test, unload, wait_for
from kvchecks import bcall

ONCE = "Restart=no\n"


def crashed(d, name, method, body=ONCE, load=True):
    """Calls method of gadget name (which crashes it), a new one of policy
    body if load, else started again; returns its status once it failed."""
    if load:
        d.add(name, body)
    else:
        check(d.ctl("start", name).returncode == 0, "start " + name)
    wait_for(lambda: d.state(name) == "ready", what=name + " ready")
    r = d.ctl("call", name, method)
    check(r.returncode != 0, "%s answered: %r" % (method, r.stdout))
    wait_for(lambda: d.state(name) == "failed", what=name + " failed")
    return d.status(name)


def audit_exited(d, name):
    """The lifecycle audit record of name's end."""
    path = os.path.join(d.tmp, "state", "audit.log")
    for line in open(path):
        rec = json.loads(line)
        if rec.get("gadget") == name and rec.get("binding") == "lifecycle" and rec.get("op") == "exited":
            return rec
    return None


@test
def crash_null_explained(tmp):
    with Daemon(tmp) as d:
        st = crashed(d, "nul", "crash_null")
        cause = st["crash_cause"]
        check(cause.startswith("killed by SIGSEGV (SEGV_MAPERR at 0x0) in crash_null_here"), "cause: %r" % cause)
        check(st["cause"] == cause, "the gadget's cause is the crash's: %r" % st["cause"])
        bt = st["crash_backtrace"]
        check(bt and bt[0].startswith("crash_null_here+"), "top frame: %r" % bt)
        check(any(f.startswith("crash_null+") for f in bt), "its caller in the backtrace: %r" % bt)
        check(any("testgadget.c:" in f for f in bt), "with file and line: %r" % bt)
        r = d.ctl("status", "nul")
        check("Last crash:" in r.stdout and "crash_null_here+" in r.stdout, "status shows it: %s" % r.stdout)


@test
def crash_abort_explained(tmp):
    with Daemon(tmp) as d:
        st = crashed(d, "abo", "crash_abort")
        check(st["crash_cause"].startswith("killed by SIGABRT (SI_TKILL)"), "cause: %r" % st["crash_cause"])
        check(any(f.startswith("crash_abort_here+") for f in st["crash_backtrace"]),
              "backtrace: %r" % st["crash_backtrace"])


@test
def crash_stack_overflow_explained(tmp):
    with Daemon(tmp) as d:
        st = crashed(d, "deep", "crash_stack")
        check(st["crash_cause"].startswith("killed by SIGSEGV (SEGV_") and "in crash_stack_here" in st["crash_cause"],
              "cause: %r" % st["crash_cause"])
        bt = st["crash_backtrace"]
        check(len(bt) == 16 and all(f.startswith("crash_stack_here+") for f in bt[1:]),
              "a bounded backtrace of the recursion: %r" % bt)


@test
def crash_in_a_thread_explained(tmp):
    with Daemon(tmp) as d:
        st = crashed(d, "thr", "crash_thread")
        check("in crash_null_here" in st["crash_cause"], "cause: %r" % st["crash_cause"])
        bt = st["crash_backtrace"]
        check(any(f.startswith("crash_thread_here+") for f in bt), "the thread's own frames: %r" % bt)
        check(not any(f.startswith("main+") for f in bt), "not the main thread's: %r" % bt)
        rec = audit_exited(d, "thr")
        check(rec is not None and "crash_thread_here+" in json.dumps(rec), "the audit record has it: %r" % rec)


@test
def handled_segv_is_no_crash(tmp):
    with Daemon(tmp) as d:
        d.add("jvmish", ONCE)
        wait_for(lambda: d.state("jvmish") == "ready", what="jvmish ready")
        r = d.ctl("call", "jvmish", "segv_handled")
        check(r.returncode == 0 and r.stdout.strip() == "11", "it survived its own SIGSEGV: %r" % (r,))
        st = d.status("jvmish")
        check(st["crash_cause"] == "" and st["crash_backtrace"] == [], "no crash recorded: %r" % st)
        # A signal it does not handle still ends it as before, explained.
        r = d.ctl("call", "jvmish", "crash_null")
        wait_for(lambda: d.state("jvmish") == "failed", what="jvmish failed")
        check("in crash_null_here" in d.status("jvmish")["crash_cause"], "then its crash is")


def core_files(root):
    """Every file under root that is an ELF core (e_type ET_CORE)."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    head = fh.read(18)
            except OSError:
                continue
            if head[:4] == b"\x7fELF" and head[16:18] == b"\x04\x00":
                out.append(p)
    return out


def cores(d, name):
    r = d.ctl("--json", "cores", name)
    check(r.returncode == 0, "cores %s: %r" % (name, r))
    return json.loads(r.stdout)


@test
def core_kept_and_read_by_gdb(tmp):
    if not shutil.which("gdb"):
        need("gdb", "it reads the core gadgetd kept")
    with Daemon(tmp) as d:
        crashed(d, "dump", "crash_thread", ONCE + "CoreDump=1M\n")
        c = cores(d, "dump")
        check(len(c) == 1 and c[0]["signal"] == "SEGV" and c[0]["run"] == 1 and 0 < c[0]["size"] <= 1 << 20,
              "one core of the crash: %r" % c)
        check(os.path.getsize(c[0]["path"]) == c[0]["size"] and c[0]["path"].startswith(os.path.join(tmp, "state")),
              "in gadgetd's state directory: %r" % c)
        check(c[0]["path"] in d.ctl("cores", "dump").stdout, "listed")
        r = subprocess.run(["gdb", "-batch", "-ex", "bt", "-ex", "info threads", TESTGADGET, c[0]["path"]],
                           capture_output=True, text=True, timeout=60)
        check(re.search(r"#0 .*crash_null_here", r.stdout) and "crash_thread_here" in r.stdout,
              "gdb shows the same top frame, in the crashing thread: %s" % r.stdout[-2000:])
        threads = re.findall(r"^\*? +\d+ +Thread.*$", r.stdout, re.M)
        check(len(threads) == 2 and not any("<unavailable>" in t for t in threads),
              "both threads in it, with their registers: %s" % r.stdout[-2000:])
        r = d.ctl("cores", "dump", user=(65534, 65534))
        check(r.returncode != 0, "root only: %r" % (r,))


@test
def cores_bounded_in_count_and_size(tmp):
    with Daemon(tmp) as d:
        for i in range(4):
            crashed(d, "many", "crash_null", ONCE + "CoreDump=64K\n", load=(i == 0))
        c = cores(d, "many")
        check([x["run"] for x in c] == [2, 3, 4], "the last 3 kept: %r" % c)
        check(all(0 < x["size"] <= 65536 and os.path.getsize(x["path"]) == x["size"] for x in c),
              "each at most CoreDump=: %r" % c)
        check(len(core_files(os.path.join(tmp, "state"))) == 3, "no other core left: %r" % core_files(tmp))


@test
def cores_within_the_state_quota(tmp):
    """StateMax=, the gadget's state quota, counts its kv store's files and
    its cores: the oldest cores go to stay within it, and a core that does
    not fit beside the kv store is not kept (the store's data stays)."""
    body = ONCE + "CoreDump=64K\nStateMax=100K\n[Binding DATA]\nType=kv\n"
    with Daemon(tmp) as d:
        for i in range(2):
            crashed(d, "quota", "crash_null", body, load=(i == 0))
        c = cores(d, "quota")
        check([x["run"] for x in c] == [2] and c[0]["size"] > 50 << 10, "one core of 64K fits in 100K: %r" % c)
        check("CoreDump=65536 StateMax=102400" in d.ctl("status", "quota").stdout, "status shows the quota")
        check(d.ctl("start", "quota").returncode == 0, "start quota")
        wait_for(lambda: d.state("quota") == "ready", what="quota ready")
        rc, _, err = bcall(d, "quota", "DATA", "put", {"key": "k", "value": "v" * (60 << 10)})
        check(rc == 0, "a put the kv binding allows: %s" % err)
        r = d.ctl("call", "quota", "crash_null")
        wait_for(lambda: d.state("quota") == "failed", what="quota failed")
        check(cores(d, "quota") == [], "no core kept beside 60K of kv data, and the old one gone: %r"
              % cores(d, "quota"))
        wait_for(lambda: re.search(r"core not kept: its \d+ bytes do not fit in StateMax=102400 beside the gadget's "
                                   r"kv store \(\d+ bytes left for cores\)", d.logtext()),
                 what=lambda: "the log to say why: %s" % d.logtext()[-1500:])
        check(d.ctl("start", "quota").returncode == 0, "start quota")
        wait_for(lambda: d.state("quota") == "ready", what="quota ready")
        rc, out, _ = bcall(d, "quota", "DATA", "get", {"key": "k"})
        check(rc == 0 and len(json.loads(out)) == 60 << 10, "the kv data stays")


@test
def no_core_without_coredump(tmp):
    """Without CoreDump= no core exists anywhere: not gadgetd's, and not the
    kernel's (the program's RLIMIT_CORE is 1, which the kernel takes as no
    core at all, for a pipe handler such as systemd-coredump too, and the
    program cannot change it)."""
    with Daemon(tmp) as d:
        d.add("limits", ONCE)
        wait_for(lambda: d.state("limits") == "ready", what="limits ready")
        pid = d.status("limits")["program_pid"]
        core = [l.split()[4:6] for l in open("/proc/%d/limits" % pid) if l.startswith("Max core file size")]
        check(core == [["1", "1"]], "the program's RLIMIT_CORE: %r" % core)
        st = crashed(d, "nodump", "crash_null")
        check("in crash_null_here" in st["crash_cause"], "its crash is explained: %r" % st["crash_cause"])
        check(cores(d, "nodump") == [], "no core listed")
        check(core_files(tmp) == [] and not os.path.exists(os.path.join(tmp, "state", "cores")),
              "no core anywhere: %r" % core_files(tmp))


def tracer(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("TracerPid:")).split()[1])


@test
def debug_lets_a_debugger_attach(tmp):
    if not shutil.which("gdb"):
        need("gdb", "it attaches to the program after gadgetctl debug")
    with Daemon(tmp) as d:
        d.add("dbg", ONCE)
        wait_for(lambda: d.state("dbg") == "ready", what="dbg ready")
        pid = d.status("dbg")["program_pid"]
        check(pid > 0 and tracer(pid) != 0, "the program is traced by its sandbox (pid %d)" % pid)
        r = d.ctl("debug", "dbg")
        check(r.returncode == 0 and "gdb -p %d" % pid in r.stdout, "debug: %r" % (r,))
        wait_for(lambda: tracer(pid) == 0, what="the sandbox to let go of the program")
        r = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "bt"], capture_output=True, text=True,
                           timeout=60)
        check("gadget_serve" in r.stdout, "gdb attached and shows its stack: %r" % r.stdout[-1500:])
        r = d.ctl("call", "dbg", "echo", '"x"')
        check(r.returncode == 0 and r.stdout.strip() == '"x"', "it serves on after gdb left: %r" % (r,))
        d.ctl("call", "dbg", "crash_null")
        wait_for(lambda: d.state("dbg") == "failed", what="dbg failed")
        check(d.status("dbg")["crash_cause"] == "", "no crash explained once let go")
        check(d.status("dbg")["cause"] == "killed by signal SIGSEGV", "its plain cause: %r" % d.status("dbg"))


@test
def status_counts_ready_and_failed(tmp):
    """The daemon's STATUS= (sd_notify; systemctl status shows it) counts
    the gadgets, the ready and the failed ones: a crash takes one from
    ready to failed, a start back, an unload of a failed one away
    (counted as they change, not by walking every gadget at each change)."""
    path = os.path.join(tmp, "notify.sock")
    sk = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sk.bind(path)
    sk.setblocking(False)
    seen = []

    def status():
        while True:
            try:
                msg = sk.recv(4096).decode()
            except BlockingIOError:
                break
            seen.extend(line[7:] for line in msg.split("\n") if line.startswith("STATUS="))
        return seen[-1] if seen else None

    def says(want):
        wait_for(lambda: status() == want, what="STATUS=%s (last: %r)" % (want, status()))

    with Daemon(tmp, env=dict(os.environ, NOTIFY_SOCKET=path)) as d:
        d.add("one", ONCE)
        d.add("two", ONCE)
        says("2 gadgets: 2 ready, 0 failed")
        r = d.ctl("call", "two", "crash_null")
        check(r.returncode != 0, "crash_null answered: %r" % r.stdout)
        wait_for(lambda: d.state("two") == "failed", what="two failed")
        # STATUS= is written at a gadget's exit, before it is marked
        # failed: the next change (a reload here) brings the count.
        check(d.ctl("reload").returncode == 0, "reload")
        says("2 gadgets: 1 ready, 1 failed")
        check(d.ctl("start", "two").returncode == 0, "start two")
        says("2 gadgets: 2 ready, 0 failed")
        check(d.ctl("call", "two", "crash_null").returncode != 0, "crash_null answered")
        wait_for(lambda: d.state("two") == "failed", what="two failed again")
        unload(d, "two")  # unloaded while failed
        says("1 gadget: 1 ready, 0 failed")
    sk.close()


if __name__ == "__main__":
    sys.exit(main())
