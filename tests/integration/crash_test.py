#!/usr/bin/env python3
"""Crashes explained: the sandbox's init, the program's tracer, reports
the signal, its code, the fault address and a symbolised backtrace of the
crashing thread; gadgetd puts them in the cause, the lifecycle audit
record and `gadgetctl status`. Usage: crash_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import shutil
import subprocess
import sys

from harness import Daemon, check, main, need, test, wait_for

ONCE = "Restart=no\n"


def crashed(d, name, method):
    """Calls method of a new gadget name (which crashes it) and returns
    its status once it failed."""
    d.add(name, ONCE)
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


if __name__ == "__main__":
    sys.exit(main())
