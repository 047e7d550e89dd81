#!/usr/bin/env python3
"""bench/timeline.py: where a `gadgetd run` start goes, step by step.

    bench/timeline.py [-n RUNS] [--bwrap] [--raw] [--vs 'OTHER COMMAND'] -- COMMAND...

Runs COMMAND (a `gadgetd run POLICY`, or with --bwrap a bwrap command
line) RUNS times (default 30, after one unrecorded run) under `perf record`
with a few scheduler and system-call tracepoints only (no call graph, no
sampling): each run records some 150 events, a microsecond or two each,
where strace would stop the processes at each of their ~1,200 system
calls. Then `perf script` gives each event with the kernel's timestamp, and
each run is cut into steps at marker events (the table below); the output
is each step's median and p90 over the runs, and the median of the whole
(from the exec of the first process to the exit of the last).

With --vs, OTHER (a second `gadgetd run` line, split as a shell splits
words: another build, say) runs in turn with COMMAND, run for run, and the
table has its column beside: a load that comes and goes on the host then
falls on both alike.

A step ends where the next one's marker is first seen; a marker that is not
seen (a step the run skipped) leaves its step out of that run. The steps
are those of the code today: a change of the start's order needs a change
of MARKS. As root (perf reads the tracepoints). Not part of the test suite.
"""
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

EVENTS = ",".join([
    "sched:sched_process_exec", "sched:sched_process_fork", "sched:sched_process_exit",
    "syscalls:sys_enter_execve", "syscalls:sys_enter_execveat",
    "syscalls:sys_enter_clone", "syscalls:sys_exit_clone", "syscalls:sys_enter_clone3",
    "syscalls:sys_enter_mkdir", "syscalls:sys_enter_readlink", "syscalls:sys_enter_socketpair",
    "syscalls:sys_enter_mount", "syscalls:sys_enter_open_tree", "syscalls:sys_enter_pivot_root",
    "syscalls:sys_enter_umount", "syscalls:sys_exit_umount",
    "syscalls:sys_enter_sethostname", "syscalls:sys_enter_unshare", "syscalls:sys_enter_setresuid",
    "syscalls:sys_enter_seccomp", "syscalls:sys_enter_capset",
    "syscalls:sys_enter_sendmsg", "syscalls:sys_enter_recvmsg", "syscalls:sys_exit_recvmsg",
    "syscalls:sys_enter_exit_group", "syscalls:sys_enter_prlimit64",
])

# (step name, role, marker): the step starts at the first event of role
# whose text matches marker (a regular expression over "event: fields"),
# after the previous step's start. Roles: G gadgetd, H the sandbox helper
# (PID 1), P the program (PID 2, before and after its exec).
GADGETD_MARKS = [
    ("gadgetd: exec, dynamic linking, policy read", "G", r"sched_process_exec"),
    ("gadgetd: state lock, core, helper, uid lock", "G", r"sys_enter_mkdir"),
    ("gadgetd: helper, bindings, fds, limiter (v1: after the clone)", "G", r"sys_enter_readlink"),
    ("clone: new namespaces (user, mount, PID, IPC, UTS, cgroup)", "G", r"sys_enter_clone:"),
    ("trampoline: keep capabilities, exec of gadgetd-sandbox", "H", r"sys_exit_clone: 0x0"),
    ("helper: start, bounding set, network namespace, device nodes", "H", r"sched_process_exec"),
    ("helper: waits for the setup (id maps, setup frame)", "H", r"sys_enter_recvmsg"),
    ("helper: program's mount source, uid switch, tmpfs root, mounts", "H", r"sys_exit_recvmsg"),
    ("helper: pivot_root, detach of the old root", "H", r"sys_enter_pivot_root"),
    ("helper: cgroups joined, cgroup namespace and mount", "H", r"sys_enter_sethostname"),
    ("helper: rlimits, user namespace counters", "H", r"sys_enter_prlimit64"),
    ("helper: capabilities dropped, no_new_privs, session", "H", r"sys_enter_capset"),
    ("helper: init's seccomp filter, init's set-up", "H", r"sys_enter_seccomp"),
    ("helper: clone of PID 2", "H", r"sys_enter_clone:"),
    ("PID 2: its seccomp, the listener sent", "P", r"sys_exit_clone: 0x0"),
    ("PID 2: exec of the program", "P", r"sys_enter_execve"),
    ("program runs (nop: exits)", "P", r"sched_process_exec"),
    ("init sees the exit, reports, ends", "P", r"sched_process_exit"),
    ("gadgetd sees it, writes its records, ends", "H", r"sched_process_exit"),
]
BWRAP_MARKS = [
    ("bwrap: exec, set-up, argument parsing", "G", r"sched_process_exec"),
    ("clone: new namespaces", "G", r"sys_enter_clone:"),
    ("child: mounts up to pivot_root", "H", r"sys_exit_clone: 0x0"),
    ("child: pivot_root, mounts, detach of the old root", "H", r"sys_enter_pivot_root"),
    ("child: capabilities, clone of PID 2", "H", r"sys_enter_capset"),
    ("PID 2: seccomp, exec of the program", "P", r"sys_exit_clone: 0x0"),
    ("program runs (nop: exits)", "P", r"sched_process_exec"),
    ("bwrap sees the exit, ends", "P", r"sched_process_exit"),
]
END = "the whole start, exec to the last exit"

LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)$")


def parse(text):
    """perf script lines -> [(t, pid, comm, 'event: fields')]."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            comm, pid, t, ev, rest = m.groups()
            out.append((float(t), int(pid), comm, ev.split(":", 1)[-1] + ": " + rest))
    return out


def roles(events):
    """pid -> role: the first process G, the child of G's namespace clone H
    (bwrap: the child of its first clone), H's first child P."""
    role, first = {}, None
    for t, pid, comm, text in events:
        if first is None:
            first = pid
            role[pid] = "G"
        m = re.search(r"sched_process_fork: .*child_pid=(\d+)", text)
        if m:
            child = int(m.group(1))
            parent = role.get(pid)
            if parent == "G" and "H" not in role.values():
                role[child] = "H"
            elif parent == "H" and "P" not in role.values():
                role[child] = "P"
    return role


def steps(events, marks):
    role = roles(events)
    if not events:
        return {}
    starts, i = [], 0
    after = events[0][0]
    for name, who, pat in marks:
        rx = re.compile(pat)
        hit = next((t for t, pid, _, text in events if t >= after and role.get(pid) == who and rx.search(text)), None)
        starts.append((name, hit))
        if hit is not None:
            after = hit
    end = max(t for t, _, _, text in events if "sched_process_exit" in text)
    out = {}
    seen = [(n, t) for n, t in starts if t is not None]
    for k, (name, t) in enumerate(seen):
        nxt = seen[k + 1][1] if k + 1 < len(seen) else end
        out[name] = (nxt - t) * 1e6
    out[END] = (end - seen[0][1]) * 1e6 if seen else 0
    return out


def record(cmd, data):
    subprocess.run(["perf", "record", "-q", "-o", data, "-e", EVENTS, "--", *cmd],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,time,event,trace"],
                          capture_output=True, text=True).stdout


def stats(runs, name):
    v = sorted(r[name] for r in runs if name in r)
    return (statistics.median(v), v[int(0.9 * (len(v) - 1))], len(v)) if v else None


def main():
    args = sys.argv[1:]
    n, marks, raw, other = 30, GADGETD_MARKS, False, None
    while args and args[0] != "--":
        a = args.pop(0)
        if a == "-n":
            n = int(args.pop(0))
        elif a == "--bwrap":
            marks = BWRAP_MARKS
        elif a == "--raw":
            raw = True
        elif a == "--vs":
            other = shlex.split(args.pop(0))
        else:
            sys.exit(__doc__)
    if not args or not shutil.which("perf"):
        sys.exit(__doc__)
    cmds = [args[1:]] + ([other] if other else [])
    runs = [[] for _ in cmds]
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        for cmd in cmds:
            record(cmd, data)
        for _ in range(n):
            for cmd, into in zip(cmds, runs):
                text = record(cmd, data)
                if raw:
                    print(text)
                into.append(steps(parse(text), marks))
    names = [m[0] for m in marks] + [END]
    if not other:
        print("| step | median µs | p90 µs | runs |")
        print("|---|---:|---:|---:|")
    else:
        print("| step | median µs | p90 µs | runs | --vs: median µs | p90 µs | runs |")
        print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        cols = [stats(r, name) for r in runs]
        if any(cols):
            print("| %s | %s |" % (name, " | ".join("%.0f | %.0f | %d" % c if c else "– | – | 0" for c in cols)))


if __name__ == "__main__":
    main()
