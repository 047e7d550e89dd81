#!/usr/bin/env python3
"""The operator's verbs like systemctl's, from outside: `gadgetctl start`
of a stopped, failed, running or idle gadget, `unload` (and its refusal
for a gadget of the policy directory), `kill NAME [SIGNAL]` and its
Restart=, `is-active` and `is-failed` with their exit statuses. What runs
is read from gadgetd's children in /proc as well as from its word.
`exec` runs a command in a gadget's world and no further, `status` names
the program's host pid. `trace NAME` follows a gadget's frames (root
only, secrets withheld, a stopped reader costing the gadget nothing), and
`trace ID` is still a trace's spans. Usage: verbs_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import attacks
from harness import (GADGETCTL, GADGETD, TESTGADGET, Daemon, check, children, fd_count, fd_map, main, policy,
                     spare, test, wait_for, workers)


def load(d, name, body):
    d.add(name, body)


def info(d, name):
    return d.status(name)


def ready(d, name):
    wait_for(lambda: d.state(name) == "ready", what="%s ready (it is %s)" % (name, d.state(name)))
    return info(d, name)["pid"]


@test
def start_stopped_failed_and_running(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "Restart=no\n")
        ready(d, "g")
        r = d.ctl("start", "g")
        check(r.returncode == 0 and "already active" in r.stdout, "start of a ready gadget: %r" % r)
        check(d.ctl("stop", "g").returncode == 0, "stop")
        wait_for(lambda: d.state("g") == "stopped" and not workers(d), what="g stopped")
        r = d.ctl("start", "g")
        check(r.returncode == 0 and r.stdout.strip() == "started g: ready", "start of a stopped gadget: %r" % r)
        check(d.state("g") == "ready", "ready once start answered: %r" % d.state("g"))
        pid = ready(d, "g")
        check(workers(d) == [pid], "its process runs: %r, %r" % (workers(d), pid))
        # Failed (Restart=no, killed): start again.
        check(d.ctl("kill", "g", "KILL").returncode == 0, "kill -KILL")
        wait_for(lambda: d.state("g") == "failed" and not workers(d), what="g failed")
        r = d.ctl("start", "--no-block", "g")
        check(r.returncode == 0 and r.stdout.strip() == "starting g", "start --no-block of a failed gadget: %r" % r)
        check(ready(d, "g") != pid, "a new process")
        r = d.ctl("start", "nosuch")
        check(r.returncode == 3 and 'no gadget named "nosuch"' in r.stderr, "start of an unknown gadget: %r" % r)


@test
def start_wakes_an_idle_gadget(tmp):
    with Daemon(tmp) as d:
        load(d, "od", "Start=on-demand\n")
        check(d.state("od") == "idle" and not workers(d), "idle once loaded")
        r = d.ctl("start", "od")
        check(r.returncode == 0 and r.stdout.strip() == "ready", "start of an idle gadget: %r" % r)
        # Answered once ready: no wait needed.
        check(d.state("od") == "ready" and len(workers(d)) == 1, "ready: %r" % d.list()["od"])
        # Stopped, Start=on-demand: start runs it, as a wake.
        check(d.ctl("stop", "od").returncode == 0, "stop")
        wait_for(lambda: d.state("od") == "stopped" and not workers(d), what="od stopped")
        r = d.ctl("start", "od")
        check(r.returncode == 0 and r.stdout.strip() == "ready", "start of a stopped on-demand gadget: %r" % r)
        check(d.state("od") == "ready" and len(workers(d)) == 1, "ready again: %r" % d.list()["od"])


@test
def kill_signals_the_program(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "Restart=no\n")
        pid = ready(d, "g")
        r = d.ctl("kill", "g")
        check(r.returncode == 0 and "sent SIGTERM to g" in r.stdout, "kill: %r" % r)
        wait_for(lambda: d.state("g") == "failed", what="g ended by its SIGTERM")
        cause = info(d, "g")["cause"]
        check("SIGTERM" in cause, "the cause names the signal: %r" % cause)
        check(pid not in workers(d), "its sandbox is gone: %r" % workers(d))
        # A gadget with no process: refused, saying so.
        r = d.ctl("kill", "g", "HUP")
        check(r.returncode == 1 and "no process" in r.stderr, "kill of a failed gadget: %r" % r)
        # Bad signals are refused by name, before anything is sent.
        for bad in ("STOP", "SIGCONT", "19", "NOPE", "0"):
            r = d.ctl("kill", "g", bad)
            check(r.returncode == 2 and '"%s" is not a signal' % bad in r.stderr, "kill %s: %r" % (bad, r))
        r = d.ctl("kill", "nosuch", "TERM")
        check(r.returncode == 3, "kill of an unknown gadget: %r" % r)


@test
def kill_then_restart_applies(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "Restart=always\n")
        pid = ready(d, "g")
        for sig, name in (("usr1", "USR1"), ("SIGKILL", "KILL"), ("9", "KILL")):
            r = d.ctl("kill", "g", sig)
            check(r.returncode == 0 and "sent SIG%s to g (pid %d)" % (name, pid) in r.stdout, "kill %s: %r" % (sig, r))
            # One status read: its state and pid of one moment.
            wait_for(lambda: (lambda g: g["state"] == "ready" and g["pid"] not in (0, pid))(info(d, "g")),
                     what="g restarted after SIG%s" % name)
            new = info(d, "g")["pid"]
            # A sandbox being made for the next start may show for a moment.
            wait_for(lambda: workers(d) == [new], what="one sandbox, the new one: %r, %r" % (workers(d), new))
            pid = new
        check(info(d, "g")["restarts"] == 3, "three restarts: %r" % info(d, "g"))


@test
def lost_prewarmed_sandbox_starts_cold(tmp):
    """While a crashed gadget's restart backs off, gadgetd builds its next
    sandbox ahead (pre-warmed). If that sandbox dies before the restart's
    go, the restart starts cold, saying so, and what the lost sandbox held
    (its host uid, its cgroup, its process) is given back: the gadget runs
    again in one sandbox, and (under the sanitizers) nothing leaks."""
    with Daemon(tmp) as d:
        load(d, "g", "Restart=always\n")
        pid = ready(d, "g")
        # Quick crashes until a restart backs off 800 ms (the fourth).
        while "restarting in 800 ms" not in d.logtext():
            d.ctl("call", "g", "crash")
            wait_for(lambda: (d.state("g") == "ready" and info(d, "g")["pid"] != pid) or
                     "restarting in 800 ms" in d.logtext(), what="g restarted after a crash")
            pid = info(d, "g")["pid"]
        # The crashed process is gone: the one sandbox is the pre-warmed one.
        warm = wait_for(lambda: workers(d) or None, what="the pre-warmed sandbox")
        check(d.state("g") == "starting", "g waits out its restart delay: %s" % d.state("g"))
        os.kill(warm[0], 9)
        wait_for(lambda: d.state("g") == "ready", what="g ready after the lost sandbox")
        check("pre-warmed sandbox lost" in d.logtext(), "the cold start is logged: %s" % d.logtext()[-1500:])
        new = info(d, "g")["pid"]
        check(new != warm[0], "a new sandbox: %d" % new)
        wait_for(lambda: workers(d) == [new], what="one sandbox, the new one: %r, %r" % (workers(d), new))
        r = d.ctl("call", "g", "echo", "1")
        check(r.returncode == 0 and r.stdout.strip() == "1", "a call after it: %r" % r)


@test
def unload_forgets_a_loaded_gadget(tmp):
    with Daemon(tmp) as d:
        other = os.path.join(tmp, "elsewhere")
        os.makedirs(other)
        pol = policy(other, "loaded", "")
        r = d.ctl("load", pol)
        check(r.returncode == 0, "load: %r" % r)
        pid = ready(d, "loaded")
        r = d.ctl("unload", "loaded")
        check(r.returncode == 0 and "unloading loaded" in r.stdout, "unload: %r" % r)
        wait_for(lambda: "loaded" not in d.list(), what="loaded gone from the list")
        wait_for(lambda: pid not in workers(d), what="its sandbox gone")
        check(d.ctl("status", "loaded").returncode == 3, "status of the unloaded gadget fails")
        # Loaded again, it is new: no restart counted.
        check(d.ctl("load", pol).returncode == 0, "load again")
        ready(d, "loaded")
        check(info(d, "loaded")["restarts"] == 0, "a new gadget: %r" % info(d, "loaded"))
        # A stopped one is forgotten at once.
        check(d.ctl("stop", "loaded").returncode == 0, "stop")
        wait_for(lambda: d.state("loaded") == "stopped", what="stopped")
        check(d.ctl("unload", "loaded").returncode == 0, "unload of a stopped gadget")
        check("loaded" not in d.list(), "gone at once: %r" % d.list())


@test
def unload_refuses_a_policy_directory_gadget(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "")
        pid = ready(d, "g")
        r = d.ctl("unload", "g")
        check(r.returncode == 1 and "policy directory" in r.stderr and "reload" in r.stderr,
              "unload of a policy directory's gadget: %r" % r)
        check(d.state("g") == "ready" and workers(d) == [pid], "it still runs: %r" % d.list())
        r = d.ctl("unload", "nosuch")
        check(r.returncode == 3, "unload of an unknown gadget: %r" % r)


@test
def is_active_and_is_failed(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "Restart=no\n")
        ready(d, "g")
        r = d.ctl("is-active", "g")
        check(r.returncode == 0 and r.stdout == "ready\n", "is-active of a ready gadget: %r" % r)
        r = d.ctl("is-failed", "g")
        check(r.returncode == 1 and r.stdout == "ready\n", "is-failed of a ready gadget: %r" % r)
        check(d.ctl("stop", "g").returncode == 0, "stop")
        wait_for(lambda: d.state("g") == "stopped", what="g stopped")
        r = d.ctl("is-active", "g")
        check(r.returncode == 3 and r.stdout == "stopped\n", "is-active of a stopped gadget: %r" % r)
        check(d.ctl("start", "g").returncode == 0, "start")
        ready(d, "g")
        check(d.ctl("kill", "g").returncode == 0, "kill")
        wait_for(lambda: d.state("g") == "failed", what="g failed")
        r = d.ctl("is-failed", "g")
        check(r.returncode == 0 and r.stdout == "failed\n", "is-failed of a failed gadget: %r" % r)
        r = d.ctl("is-active", "g")
        check(r.returncode == 3 and r.stdout == "failed\n", "is-active of a failed gadget: %r" % r)
        r = d.ctl("--json", "is-failed", "g")
        check(r.returncode == 0 and json.loads(r.stdout) == {"name": "g", "state": "failed"}, "--json: %r" % r)
        load(d, "od", "Start=on-demand\n")
        r = d.ctl("is-active", "od")
        check(r.returncode == 3 and r.stdout == "idle\n", "is-active of an idle gadget: %r" % r)
        for verb in ("is-active", "is-failed"):
            r = d.ctl(verb, "nosuch")
            check(r.returncode == 4 and 'no gadget named "nosuch"' in r.stderr and not r.stdout,
                  "%s of an unknown gadget: %r" % (verb, r))


CAT_POLICY = """# a comment the file keeps
MemoryMax=16M
CallTimeout=30s
Arguments=a "b c"
Environment="Y=two words"
Restart=on-failure

[Binding NOTES]
Type=kv
MaxValueSize=64K
"""


def effect(out):
    """The "as in effect" part of cat's output."""
    marker = "# as in effect, defaults included\n"
    check(marker in out, "cat shows what is in effect: %r" % out)
    return out.split(marker, 1)[1]


@test
def cat_as_written_and_in_effect(tmp):
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        path = policy(d.pol, "g", CAT_POLICY)
        written = open(path).read()
        check(d.ctl("reload").returncode == 0, "reload")
        r = d.ctl("cat", "g")
        check(r.returncode == 0, "cat: %r" % r)
        check(r.stdout.startswith("# %s, as gadgetd read it" % path), "names the file: %r" % r.stdout[:200])
        check(written in r.stdout, "the file as written, comments included: %r" % r.stdout)
        now = effect(r.stdout)
        for line in ("MemoryMax=16M", "CallTimeout=30s", "TmpSize=16M", "StateMax=1G", "StartTimeout=10s", "TasksMax=infinity",
                     "Restart=on-failure", 'Arguments=a "b c"', 'Environment="Y=two words"', "[Binding NOTES]",
                     "MaxValueSize=64K", "MaxBytes=16M", "ApproveTimeout=5min"):
            check(line in now.splitlines(), "%s in effect: %s" % (line, now))
        # What is in effect is itself a valid policy, of the same values.
        again = os.path.join(tmp, "again.policy")
        with open(again, "w") as f:
            f.write(now)
        r = d.ctl("check", again)
        check(r.returncode == 0, "the policy in effect checks: %r" % r)
        # An edit not loaded yet is not shown: the text is the one read.
        with open(path, "a") as f:
            f.write("\n[Binding EXTRA]\nType=kv\n")
        r = d.ctl("cat", "g")
        check(r.returncode == 0 and "EXTRA" not in r.stdout and written in r.stdout, "the text read: %r" % r)
        check(d.ctl("reload").returncode == 0, "reload")
        r = d.ctl("cat", "g")
        check("[Binding EXTRA]" in effect(r.stdout) and "[Binding EXTRA]" in r.stdout.split("# as in effect")[0],
              "after the reload, the new text and values: %r" % r.stdout)
        r = d.ctl("cat", "nosuch")
        check(r.returncode == 3 and 'no gadget named "nosuch"' in r.stderr, "cat of an unknown gadget: %r" % r)
        # A member of the control group is not root: the text may hold
        # what only root may read.
        r = d.ctl("cat", "g", user=(65534, 65534))
        check(r.returncode != 0 and "root only" in r.stderr and "16M" not in r.stdout, "cat as a member: %r" % r)
        check(d.ctl("list", user=(65534, 65534)).returncode == 0, "the member may list")



NS = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")


def proc_view(pid):
    """What the host sees of pid: its namespaces, cgroups and status lines."""
    ns = {n: os.readlink("/proc/%d/ns/%s" % (pid, n)) for n in NS}
    status = dict(l.split(":", 1) for l in open("/proc/%d/status" % pid).read().splitlines() if ":" in l)
    return ns, open("/proc/%d/cgroup" % pid).read(), {k: v.split() for k, v in status.items()}


def first_child(pid):
    kids = open("/proc/%d/task/%d/children" % (pid, pid)).read().split()
    return int(kids[0]) if kids else None


def exec_command_pid(d, init):
    """The host pid of the command an exec runs: under the probe (gadgetd's
    child that is neither the gadget's init nor a spare shell) and its
    reaper."""
    for pid, idmap in children(d):
        reaper = first_child(pid) if pid != init and idmap else None
        if reaper:
            return first_child(reaper)
    return None


@test
def exec_runs_in_the_gadgets_world(tmp):
    """gadgetctl exec NAME -- COMMAND: seen from the host, the command has
    the program's namespaces, cgroups, uid and gid, no groups and no
    capability, no_new_privs and a seccomp filter, with gadgetctl's stdio
    and its exit status; a control-group member is refused and audited, a
    request with fds other than exec's refused and its fds closed, a
    gadget with no process refused by name. status names the program's
    host pid beside its init's."""
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        load(d, "g", "SystemLibraries=yes\nRestart=no\n")
        init = ready(d, "g")
        prog = info(d, "g")["program_pid"]
        check(prog not in (0, init) and os.readlink("/proc/%d/exe" % prog) == os.path.realpath(TESTGADGET),
              "status's program pid is the program: %r (init %d)" % (prog, init))
        check("Program PID: %d" % prog in d.ctl("status", "g").stdout, "status shows it as text")
        p = subprocess.Popen([GADGETCTL, "--socket", d.sock, "exec", "g", "--", "cat"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cmd = wait_for(lambda: exec_command_pid(d, init), what="the exec's command")
        wait_for(lambda: os.readlink("/proc/%d/exe" % cmd) == "/usr/bin/cat", what="the command exec'd")
        # The probe and its reaper hold the command's stdio and their report
        # pipe, nothing of gadgetd's (in a coverage build, besides the
        # sandbox's measuring aid: fd 1000 on the build tree, close-on-exec,
        # tests/coverage/sandbox_gcov.c).
        probe = [pid for pid, idmap in children(d) if pid != init and idmap][0]
        aid = os.path.dirname(os.path.dirname(os.path.realpath(GADGETD)))
        held = [l for pid in (probe, first_child(probe)) for fd, l in fd_map(pid).items()
                if not (fd == 1000 and l == aid)]
        check(held and all(l.startswith("pipe:") for l in held), "the probe's fds: %r" % held)
        ns, cg, st = proc_view(cmd)
        pns, pcg, pst = proc_view(prog)
        check(ns == pns and ns != proc_view(os.getpid())[0], "the program's namespaces: %r, %r" % (ns, pns))
        check(cg == pcg, "the program's cgroups: %r, %r" % (cg, pcg))
        check(st["Uid"] == pst["Uid"] and st["Gid"] == pst["Gid"] and st["Groups"] == [],
              "the program's ids, no groups: %r" % st)
        check(st["CapEff"] == st["CapPrm"] == st["CapBnd"] == ["0000000000000000"] and st["NoNewPrivs"] == ["1"]
              and st["Seccomp"] == ["2"] and st["NSpid"][-1] != "2", "no capability, nnp, seccomp: %r" % st)
        r = d.ctl("daemon-reexec")
        check(r.returncode == 1 and "a gadgetctl exec (pid %d) runs" % p.pid in r.stderr, "re-exec during an exec: %r" % r)
        out, err = p.communicate("through the sandbox\n", timeout=30)
        check(p.returncode == 0 and out == "through the sandbox\n", "gadgetctl's stdio: %r" % ((p.returncode, out, err),))
        r = d.ctl("exec", "g", "--", "sh", "-c", "cat /proc/2/cmdline; hostname; exit 7")
        check(r.returncode == 7 and r.stdout == TESTGADGET + "\0g\n", "its world, its exit status: %r" % r)
        # What the command leaves running ends with it: the gadget's tasks
        # are its program's alone again.
        r = d.ctl("exec", "g", "--", "sh", "-c", "sleep 600 & sleep 600 & exit 3")
        check(r.returncode == 3, "exec of a command that leaves children: %r" % r)
        wait_for(lambda: info(d, "g")["tasks"] == 1, what="the exec's leftovers gone: %r" % info(d, "g")["tasks"])
        # gadgetctl gone (killed), its command ends, and what it started.
        p = subprocess.Popen([GADGETCTL, "--socket", d.sock, "exec", "g", "--", "sh", "-c", "sleep 600 & cat"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: info(d, "g")["tasks"] == 6, what="the exec's probe, reaper, sh, sleep and cat in g: %r"
                 % info(d, "g")["tasks"])
        p.kill()
        p.wait()
        wait_for(lambda: info(d, "g")["tasks"] == 1, what="the exec gone with gadgetctl: %r" % info(d, "g")["tasks"])
        r = d.ctl("exec", "g", "--", "nosuch")
        check(r.returncode == 1 and "exec nosuch: No such file or directory" in r.stderr, "no such command: %r" % r)
        # The exec counts against the gadget's limits: at TasksMax=2 (its
        # init and program), nothing more starts.
        load(d, "tight", "SystemLibraries=yes\nTasksMax=2\n")
        ready(d, "tight")
        r = d.ctl("exec", "tight", "--", "id")
        check(r.returncode == 1 and "fork: Resource temporarily unavailable" in r.stderr and not r.stdout,
              "exec in a gadget at its TasksMax: %r" % r)
        r = d.ctl("exec", "g", "--", "id", user=(65534, 65534))
        check(r.returncode == 4 and "root's only" in r.stderr and r.stdout == "", "a member is refused: %r" % r)
        recs = lambda: [(a["op"], a["outcome"], a.get("uid")) for a in
                        (json.loads(l) for l in d.ctl("--json", "audit", "g").stdout.splitlines())
                        if a["binding"] == "exec"]
        wait_for(lambda: recs().count(("start", "denied", 65534)) == 1 and recs().count(("end", "ok", 0)) == 3
                 and recs().count(("end", "error", 0)) == 2,
                 what="the execs' records: %r" % recs())
        # fds with another request, or too many with exec: refused, all closed
        # (counted with the spare sandbox shell in place: its fds come and go
        # with it).
        wait_for(lambda: spare(d), what="a spare shell")
        base = fd_count(d.proc.pid)
        exec_req = attacks.varint(1 << 3) + attacks.varint(1) + attacks.field(
            28, attacks.field(1, b"g") + attacks.field(2, b"id")) + attacks.varint(11 << 3) + attacks.varint(
            attacks.CONTROL_PROTOCOL_VERSION)
        install_req = attacks.varint(1 << 3) + attacks.varint(1) + attacks.field(40, b"") + attacks.varint(
            11 << 3) + attacks.varint(attacks.CONTROL_PROTOCOL_VERSION)
        backup_req = attacks.varint(1 << 3) + attacks.varint(1) + attacks.field(46, attacks.field(1, b"g")) + \
            attacks.varint(11 << 3) + attacks.varint(attacks.CONTROL_PROTOCOL_VERSION)
        for frame, fds, want in ((attacks.request(1, 5), [0, 1, 2], "go with exec, install, backup and restore only"),
                                 (attacks.struct.pack("<I", len(backup_req)) + backup_req, [0, 1], "exactly 1"),
                                 (attacks.struct.pack("<I", len(exec_req)) + exec_req, [0, 1], "exactly 3"),
                                 (attacks.struct.pack("<I", len(exec_req)) + exec_req, [0, 1, 2, 0, 1], "exactly 3"),
                                 (attacks.struct.pack("<I", len(install_req)) + install_req, [0, 1], "exactly 1")):
            with attacks.connect_unix(d.sock) as s:
                s.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, attacks.struct.pack("%di" % len(fds), *fds))])
                a = attacks.answer(s)
                check(a and a["kind"] == "error" and want in a["message"], "refused (%r): %r" % (want, a))
        wait_for(lambda: fd_count(d.proc.pid) <= base,
                 what=lambda: "the fds closed: %d, were %d" % (fd_count(d.proc.pid), base))
        check(d.ctl("stop", "g").returncode == 0, "stop")
        wait_for(lambda: d.state("g") == "stopped", what="g stopped")
        r = d.ctl("exec", "g", "--", "id")
        check(r.returncode == 1 and "no process running" in r.stderr, "exec of a stopped gadget: %r" % r)
        check(info(d, "g").get("program_pid", 0) == 0, "no program pid once stopped")


class Follower:
    """gadgetctl ARGS... (trace NAME) running, its stdout and stderr lines
    gathered as they come; ready once gadgetd's first part said it
    follows."""

    def __init__(self, d, *args):
        self.proc = subprocess.Popen([GADGETCTL, "--socket", d.sock, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out, self.err = [], []
        self.threads = [threading.Thread(target=self._read, args=(f, l), daemon=True)
                        for f, l in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.threads:
            t.start()
        wait_for(lambda: any("following" in l for l in self.err) or self.proc.poll() is not None,
                 what=lambda: "the follower to start: %r" % self.err)

    @staticmethod
    def _read(f, lines):
        for line in f:
            lines.append(line)

    def frames(self):
        return [json.loads(l) for l in list(self.out)]

    def end(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
        self.proc.wait(timeout=10)
        for t in self.threads:
            t.join(timeout=10)


def secret_file(tmp):
    path = os.path.join(tmp, "token")
    with open(path, "w") as f:
        f.write("s3cr3t-VALUE-42\n")
    os.chmod(path, 0o600)
    return path


@test
def trace_name_shows_a_calls_frames(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "[Binding NOTE]\nType=text\nValue=hello there\n"
                     "[Binding TOKEN]\nType=secret\nFile=%s\n" % secret_file(tmp))
        ready(d, "g")
        f = Follower(d, "--json", "trace", "-n", "8", "g")
        r = d.ctl("call", "g", "binding", '{"binding": "NOTE", "op": "get"}')
        check(r.returncode == 0 and r.stdout.strip() == '"hello there"', "the text binding: %r" % r)
        # The secret is used, never returned: only its frames could show it.
        r = d.ctl("call", "g", "repeat", '{"binding": "TOKEN", "op": "get", "n": 1}')
        check(r.returncode == 0, "the secret binding: %r" % r)
        f.proc.wait(timeout=20)
        f.end()
        fr = f.frames()
        seen = [(x["dir"], x["kind"], x["name"], x["outcome"]) for x in fr]
        check(seen == [("out", "call", "binding", ""), ("in", "binding_call", "NOTE.get", ""),
                       ("out", "binding_result", "", "ok"), ("in", "result", "", "ok"),
                       ("out", "call", "repeat", ""), ("in", "binding_call", "TOKEN.get", ""),
                       ("out", "binding_result", "", "ok"), ("in", "result", "", "ok")],
              "the frames in order: %r" % seen)
        call, bcall, banswer, result = fr[:4]
        check(call["id"] == result["id"] and bcall["id"] == banswer["id"], "answers match calls: %r" % fr[:4])
        check(call["preview"] == '{"binding":"NOTE","op":"get"}' and banswer["preview"] == '"hello there"'
              and result["preview"] == '"hello there"', "previews: %r" % fr[:4])
        # SupervisorMsg{binding_result{id 1, value{string "hello there"}}}:
        # 2 + (2 + (2 + 11)) bytes encoded.
        check(banswer["bytes"] == 19 and result["bytes"] > 11 and call["bytes"] > len("binding"),
              "sizes: %r" % fr[:4])
        check(result["duration_us"] >= banswer["duration_us"] > 0, "durations: %r" % fr[:4])
        check(fr[5]["withheld"] and fr[6]["withheld"] and fr[5]["preview"] == fr[6]["preview"] == "",
              "the secret binding's values withheld: %r" % fr[4:])
        check("s3cr3t" not in "".join(f.out + f.err), "the secret in the frames: %r" % f.out)
        check(f.proc.returncode == 0, "trace -n 8 ends by itself: %r" % f.err)


@test
def trace_name_is_roots_only(tmp):
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        load(d, "g", "")
        ready(d, "g")
        r = d.ctl("trace", "g", user=(65534, 65534))
        check(r.returncode == 4 and "root only" in r.stderr and r.stdout == "", "a member is refused: %r" % r)
        r = d.ctl("trace", "nosuch")
        check(r.returncode == 3 and 'no gadget named "nosuch"' in r.stderr, "an unknown gadget: %r" % r)
        # Followers are bounded per gadget and in all: the one past them is
        # refused, the bound named.
        fs = [Follower(d, "trace", "g") for _ in range(4)]
        r = d.ctl("trace", "g")
        check(r.returncode == 1 and "4 followers of its frames already" in r.stderr, "a fifth follower: %r" % r)
        for name in ("h", "i", "j", "k"):
            policy(d.pol, name)
        check(d.ctl("reload").returncode == 0, "reload")
        fs += [Follower(d, "trace", name) for name in ("h", "i", "j") for _ in range(4)]
        r = d.ctl("trace", "k")
        check(r.returncode == 1 and "16 followers of frames already" in r.stderr, "a 17th follower: %r" % r)
        fs.pop().end()

        def admitted():
            f = Follower(d, "trace", "k")
            if f.proc.poll() is None:
                fs.append(f)
                return True
            f.end()
            return False
        wait_for(admitted, what="a follower taken once one left")
        for f in fs:
            f.end()


@test
def trace_stopped_follower_costs_the_gadget_nothing(tmp):
    with Daemon(tmp) as d:
        load(d, "g", "[Binding NOTE]\nType=text\nValue=hello there\n")
        ready(d, "g")
        many = '{"binding": "NOTE", "op": "get", "n": 20000}'

        def timed():
            t0 = time.monotonic()
            r = d.ctl("call", "g", "repeat", many)
            check(r.returncode == 0, "repeat: %r" % r)
            return time.monotonic() - t0
        alone = min(timed() for _ in range(2))
        f = Follower(d, "--json", "trace", "g")
        f.proc.send_signal(signal.SIGSTOP)
        # 40,000 frames: far past its queue and its socket's buffer.
        stopped = min(timed() for _ in range(2))
        check(stopped < 3 * alone + 1, "a stopped follower slowed the calls: %.2fs, %.2fs alone" % (stopped, alone))
        f.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: any(x.get("dropped", 0) > 0 for x in f.frames()),
                 what=lambda: "the follower told of the frames dropped: %r" % f.out[-3:])
        # Once its queue was sent it follows on; a call before that may
        # find the queue still full, its frames dropped in turn (a loaded
        # host drains it slowly): called again until the follower shows one.
        def after():
            r = d.ctl("call", "g", "echo", '"after"')
            check(r.returncode == 0, "a call after: %r" % r)
            return any(x.get("preview") == '"after"' for x in f.frames())
        wait_for(after, timeout=30, what=lambda: "the follower's new frames: %r" % f.out[-3:])
        f.end()


@test
def trace_id_is_still_a_traces_spans(tmp):
    hexname = "0123456789abcdef0123456789abcdef"
    with Daemon(tmp) as d:
        load(d, "g", "")
        load(d, hexname, "")
        ready(d, "g")
        ready(d, hexname)
        r = d.ctl("call", "--trace", "g", "echo", '"hi"')
        check(r.returncode == 0 and r.stderr.startswith("trace "), "a traced call: %r" % r)
        tid = r.stderr.split()[1]
        r = wait_for(lambda: (lambda x: x if x.returncode == 0 else None)(d.ctl("--json", "trace", tid)),
                     what="the trace's spans")
        spans = json.loads(r.stdout)["spans"]
        check(any(s["gadget"] == "g" and s["name"] == "echo" for s in spans), "the call's span: %r" % spans)
        # A gadget named by 32 hex digits: a trace id unless --frames says otherwise.
        r = d.ctl("trace", hexname)
        check(r.returncode == 3 and "no span of trace %s" % hexname in r.stderr, "32 hex digits: %r" % r)
        f = Follower(d, "--json", "trace", "--frames", "-n", "2", hexname)
        check(d.ctl("call", hexname, "echo", '"x"').returncode == 0, "a call")
        f.proc.wait(timeout=20)
        f.end()
        check([x["kind"] for x in f.frames()] == ["call", "result"], "its frames: %r" % f.out)


if __name__ == "__main__":
    sys.exit(main())
