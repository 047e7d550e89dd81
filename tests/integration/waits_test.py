#!/usr/bin/env python3
"""Calls wait instead of failing while their gadget is on its way to ready
by a start already asked (a restart, a reload's restart, a Restart= delay,
a load), and a graceful stop drains the calls in flight; told from outside
by a real gadgetd, real gadgets and real callers. The steady caller is
harness.Paced (`callflood --paced`): calls pipelined at a fixed rate over
the control socket, each with its sequence number, which the gadget
echoes; every one must be answered exactly once, with its own number.
Usage: waits_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET,
CALLFLOOD."""
import json
import os
import shutil
import signal
import sys
import subprocess

from gateway_util import Gateway
from harness import CALLFLOOD, GADGETCTL, TESTGADGET, Daemon, Paced, check, main, policy, test, wait_for
from pgnodes import counter_policy

EVENTS = 20         # restarts, reloads


def load(d, name, body=""):
    policy(d.pol, name, body)
    r = d.ctl("reload")
    check(r.returncode == 0, "reload: %r" % r.stderr)
    wait_for(lambda: d.state(name) == "ready", what="%s ready" % name)


@test
def restarts_refuse_and_lose_no_call(tmp):
    """20 `gadgetctl restart`s under a steady 300 calls/s: 0 refused, 0
    lost, 0 answered twice."""
    with Daemon(tmp) as d:
        load(d, "steady")
        caller = Paced(d, "steady", EVENTS * 10)
        caller.answered_some(d, "steady")
        pids = set()
        for _ in range(EVENTS):
            r = d.ctl("restart", "steady")
            check(r.returncode == 0, "restart: %r" % r.stderr)
            pids.add(d.list()["steady"]["pid"])
            caller.answered_some(d, "steady")
        check(len(pids) == EVENTS, "20 new processes: %r" % pids)
        res = caller.finish()
        caller.check_all_answered()
        print("restarts: %r" % res)


@test
def reloads_refuse_and_lose_no_call(tmp):
    """20 policy changes applied with `gadgetctl reload` under a steady
    300 calls/s: each restarts the gadget; 0 refused, 0 lost, 0 twice."""
    with Daemon(tmp) as d:
        load(d, "steady", "CallTimeout=30s\n")
        caller = Paced(d, "steady", EVENTS * 10)
        caller.answered_some(d, "steady")
        for i in range(EVENTS):
            pid = d.list()["steady"]["pid"]
            policy(d.pol, "steady", "CallTimeout=%ds\n" % (31 + i))
            r = d.ctl("--json", "reload")
            check(r.returncode == 0 and json.loads(r.stdout)["restarted"] == ["steady"], "reload: %r" % r)
            wait_for(lambda: d.state("steady") == "ready" and d.list()["steady"]["pid"] != pid,
                     what="steady restarted by reload %d" % (i + 1))
            caller.answered_some(d, "steady")
        res = caller.finish()
        caller.check_all_answered()
        print("reloads: %r" % res)


@test
def reloads_keep_a_kv_gadgets_count(tmp):
    """The counter example (its count in its kv binding) through 10 policy
    changes applied with `reload` while a steady caller increments it: each
    reload starts the new process beside the old, which drains its calls
    and their binding calls; no increment refused, lost or counted twice:
    the count is the calls answered ok."""
    with Daemon(tmp) as d:
        counter_policy(d, call_timeout="30s")
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("counter") == "ready", what="counter ready")
        caller = subprocess.Popen([CALLFLOOD, "--steady", d.sock, "counter", "increment"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        calls = lambda: d.list()["counter"]["calls"]
        for i in range(10):
            pid, n = d.list()["counter"]["pid"], calls()
            counter_policy(d, call_timeout="%ds" % (31 + i))
            r = d.ctl("--json", "reload")
            check(r.returncode == 0 and json.loads(r.stdout)["restarted"] == ["counter"], "reload: %r" % r)
            wait_for(lambda: d.state("counter") == "ready" and d.list()["counter"]["pid"] != pid and
                     calls() > n + 20, what="counter restarted by reload %d, calls after it" % (i + 1))
        caller.send_signal(signal.SIGTERM)
        out, err = caller.communicate(timeout=60)
        res = {" ".join(line.split()[:-1]): int(line.split()[-1]) for line in out.splitlines()}
        print("increments through 10 reloads: %r" % res)
        check(res["sent"] > 100 and res["ok"] == res["sent"] and res.get("unanswered") == 0,
              "every increment answered ok: %r %s" % (res, err))
        r = d.ctl("call", "counter", "get")
        check(r.returncode == 0 and int(r.stdout) == res["ok"], "count %r after %d increments" % (r.stdout, res["ok"]))


def program_inodes(pid):
    """The inodes of the executables the sandbox pid runs (its PID 1, the
    sandbox, and the program, its child)."""
    out = set()
    for p in [str(pid)] + open("/proc/%d/task/%d/children" % (pid, pid)).read().split():
        try:
            out.add(os.stat("/proc/%s/exe" % p).st_ino)
        except OSError:
            pass
    return out


@test
def binary_upgrades_refuse_and_lose_no_call(tmp):
    """A gadget's program upgraded 20 times as docs/operating.md says (the
    new file renamed over Exec=, then `gadgetctl restart`) under a steady
    300 calls/s: each restart runs the new file (the process's executable
    is the file now at Exec=); 0 refused, 0 lost, 0 answered twice."""
    with Daemon(tmp) as d:
        exe = os.path.join(tmp, "steady-bin")
        shutil.copy(TESTGADGET, exe)
        os.chmod(exe, 0o755)
        policy(d.pol, "steady", exec_path=exe)
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("steady") == "ready", what="steady ready")
        caller = Paced(d, "steady", EVENTS * 10)
        caller.answered_some(d, "steady")
        for i in range(EVENTS):
            shutil.copy(TESTGADGET, exe + ".new")
            os.chmod(exe + ".new", 0o755)
            os.rename(exe + ".new", exe)
            r = d.ctl("restart", "steady")
            check(r.returncode == 0, "restart after upgrade %d: %r" % (i + 1, r.stderr))
            check(os.stat(exe).st_ino in program_inodes(d.list()["steady"]["pid"]),
                  "upgrade %d: the new file runs" % (i + 1))
            caller.answered_some(d, "steady")
        res = caller.finish()
        caller.check_all_answered()
        print("binary upgrades: %r" % res)


@test
def stop_drains_a_slow_call(tmp):
    """`gadgetctl stop` lets a call in flight finish (within the stop's
    grace) and refuses new calls at once; a call still running when the
    grace ends is told the gadget stopped while it ran."""
    with Daemon(tmp) as d:
        load(d, "slow")
        slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "slow", "sleep", '{"ms": 1500}'],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.list()["slow"]["in_flight"] == 1, what="the slow call in flight")
        stop = subprocess.Popen([GADGETCTL, "--socket", d.sock, "stop", "slow"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.state("slow") == "stopping", what="slow stopping")
        r = d.ctl("call", "slow", "echo", "1")
        check(r.returncode != 0 and 'gadget "slow" is not ready (stopping' in r.stderr,
              "a new call to a gadget stopping for good: %r" % r.stderr)
        out, err = slow.communicate(timeout=30)
        check(slow.returncode == 0 and out.strip() == '"slept"', "the call in flight at the stop: %r %r" % (out, err))
        check(stop.wait(timeout=30) == 0, "stop: %r" % stop.stderr.read())
        wait_for(lambda: d.state("slow") in ("stopped", "failed"), what="slow's stop to end")
        check(d.state("slow") == "stopped", "stopped: %s" % d.state("slow"))
        # Longer than the grace (3 s): answered with why, never lost.
        check(d.ctl("start", "slow").returncode == 0, "start again")
        slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "slow", "sleep", '{"ms": 20000}'],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.list()["slow"]["in_flight"] == 1, what="the long call in flight")
        check(d.ctl("stop", "slow").returncode == 0, "stop")
        out, err = slow.communicate(timeout=30)
        check(slow.returncode != 0 and 'gadget "slow" stopped while the call ran (stopped by gadgetctl' in err and
              "not answered within the stop's grace of 3000 ms" in err,
              "a call cut by the stop's grace: %r" % err)


@test
def stop_during_a_restart_calls_it_off(tmp):
    """`gadgetctl stop` while a restart's new process starts beside the old
    one: the stop wins (the new process is killed, the gadget ends stopped,
    not started again), the call in flight on the old process is still
    answered, and the restart that waited is told why it did not happen.
    So does a stop during the stop of a restart of a gadget still
    starting (which stops, then starts)."""
    with Daemon(tmp) as d:
        load(d, "slow", "Arguments=slowstart 1000\n")
        slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "slow", "sleep", '{"ms": 2000}'],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.list()["slow"]["in_flight"] == 1, what="the slow call in flight")
        restart = subprocess.Popen([GADGETCTL, "--socket", d.sock, "restart", "slow"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "restarting without a gap" in d.logtext(), what="the new process starting")
        check(d.ctl("stop", "slow").returncode == 0, "stop")
        err = restart.communicate(timeout=30)[1]
        check(restart.returncode != 0 and "restart of slow failed" in err and "called off: stopped by gadgetctl" in err,
              "the restart that waited: %r" % err)
        out, err = slow.communicate(timeout=30)
        check(slow.returncode == 0 and out.strip() == '"slept"', "the call in flight: %r %r" % (out, err))
        wait_for(lambda: d.state("slow") in ("stopped", "ready", "failed"), what="the stop's end")
        check(d.state("slow") == "stopped", "the stop wins over the restart: %s" % d.state("slow"))
        # A restart of a gadget still starting has no process to switch to:
        # it stops first (a grace of 3 s, the start not answered), then
        # starts. A stop during that stop calls the restart off too: once
        # stopped it stays so (a restart would be starting at that moment).
        # Its stop lasts the grace: one a moment long was missed now and
        # then (the restart's start already under way).
        policy(d.pol, "late", "Arguments=slowstart 5000 noterm\n")
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("late") == "starting", what="late starting")
        restart = subprocess.Popen([GADGETCTL, "--socket", d.sock, "restart", "late"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.state("late") == "stopping", what="the restart's stop")
        check(d.ctl("stop", "late").returncode == 0, "stop late")
        err = restart.communicate(timeout=30)[1]
        check(restart.returncode != 0 and "stopped by gadgetctl" in err, "the restart called off: %r" % err)
        wait_for(lambda: d.state("late") != "stopping", timeout=30, what="the stop's end")
        check(d.state("late") == "stopped", "the stop wins over the restart's start: %s" % d.state("late"))


@test
def restart_starts_the_new_process_beside_the_old(tmp):
    """A restart without a gap, seen from outside: while the new process
    takes its 1 s start, the old one goes on answering (its own count of
    calls goes on: testgadget's next), the gadget stays ready on its pid;
    after the restart's answer the new process answers (its count starts
    over) on a new pid."""
    with Daemon(tmp) as d:
        load(d, "t", "Arguments=slowstart 1000\n")
        old = d.list()["t"]["pid"]
        counts = [json.loads(d.ctl("call", "t", "next").stdout) for _ in range(3)]
        restart = subprocess.Popen([GADGETCTL, "--socket", d.sock, "restart", "t"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "restarting without a gap" in d.logtext(), what="the new process starting")
        during, straddled = [], 0
        for _ in range(100):  # bounded: the new start takes 1 s
            if restart.poll() is not None:
                break
            r = d.ctl("call", "t", "next")
            g = d.list()["t"]
            # A call made around the switch (the new pid shows before the
            # restart's answer reached gadgetctl): either process may have
            # answered it.
            if restart.poll() is None and g["pid"] == old:
                during.append((r.returncode, json.loads(r.stdout or "0"), g["state"], g["pid"]))
            else:
                straddled = 1
                break
        check(len(during) >= 2, "calls answered while the new process started: %r" % during)
        check(all(rc == 0 and st == "ready" and pid == old for rc, _, st, pid in during),
              "the old process served meanwhile: %r" % during)
        check([n for _, n, _, _ in during] == list(range(counts[-1] + 1, counts[-1] + 1 + len(during))),
              "answered by the old process, in order: %r after %r" % (during, counts))
        out, err = restart.communicate(timeout=30)
        check(restart.returncode == 0 and out.strip() == "restarted t: ready", "restart: %r %r" % (out, err))
        new = d.list()["t"]["pid"]
        r = d.ctl("call", "t", "next")
        check(new not in (0, old) and r.returncode == 0 and 1 <= json.loads(r.stdout) <= 1 + straddled,
              "the new process answers: pid %d (old %d), %r" % (new, old, r))
        check(d.list()["t"]["restarts"] == 1, "one restart counted")


@test
def restart_while_the_last_one_drains(tmp):
    """A restart while the last restart's old process still drains a call:
    the new process starts once that one ended (two runs at most beside
    each other: before, the third took the draining one's cgroup name and
    the restart failed, or on cgroup v2 killed the drain). The slow call is
    answered by the old process, both restarts answer ready, and a call
    after them is answered by the newest process."""
    with Daemon(tmp) as d:
        load(d, "t")
        slow = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "t", "sleep", '{"ms": 1500}'],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.list()["t"].get("in_flight", 0) >= 1, what="the slow call sent")
        first = d.ctl("restart", "t")
        check(first.returncode == 0 and first.stdout.strip() == "restarted t: ready", "first restart: %r" % (first,))
        check(slow.poll() is None, "the slow call is still in the old process")
        second = d.ctl("restart", "t")
        check(second.returncode == 0 and second.stdout.strip() == "restarted t: ready",
              "the second restart, while the first one's old process drained: %r" % (second,))
        out, err = slow.communicate(timeout=30)
        check(slow.returncode == 0, "the drained call answered: %r %r" % (out, err))
        check("its new process starts once the previous one" in d.logtext(), "the wait is said")
        r = d.ctl("call", "t", "echo", "1")
        check(r.returncode == 0 and r.stdout.strip() == "1", "a call after both: %r" % (r,))
        check(d.list()["t"]["restarts"] == 2, "two restarts counted")


@test
def calls_wait_while_a_hung_up_gadget_ends(tmp):
    """A gadget that hung up its channel but whose process has not ended
    yet (Restart=on-failure): gadgetd no longer sends it calls, and those
    that come meanwhile wait for its restart and are answered by the new
    process, not refused with the closed channel's error."""
    with Daemon(tmp) as d:
        load(d, "t", "Restart=on-failure\n")
        old = d.list()["t"]["pid"]
        hup = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "t", "hangup", '{"ms": 1000}'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "hung up" in d.logtext(), what="the gadget's channel closed")
        answers = [d.ctl("call", "t", "echo", str(i)) for i in range(3)]
        check(all(a.returncode == 0 and a.stdout.strip() == str(i) for i, a in enumerate(answers)),
              "calls while it ended: %r" % [(a.returncode, a.stdout, a.stderr) for a in answers])
        g = d.list()["t"]
        check(g["pid"] != old and g["restarts"] == 1, "answered by its restart: %r" % g)
        out, err = hup.communicate(timeout=30)
        check(hup.returncode != 0 and "the gadget ended" in err, "the hangup call: %r %r" % (out, err))


@test
def failed_new_process_leaves_the_old_serving(tmp):
    """A restart whose new process does not start — a changed policy whose
    program aborts before its hello, then an Exec= that is missing — leaves
    the old process serving on its policy: the restart's answer says why
    (non-zero exit), and status shows it."""
    with Daemon(tmp) as d:
        prog = os.path.join(tmp, "prog")
        shutil.copy(TESTGADGET, prog)
        load(d, "t")
        policy(d.pol, "t", "", exec_path=prog)
        check(d.ctl("restart", "t").returncode == 0, "restart on its copy")
        old = d.list()["t"]["pid"]
        # A policy change whose program aborts before its hello, then a
        # broken upgrade: a file that is no program renamed over Exec=.
        for body, what, why in (("Arguments=crash\n", " on its changed policy",
                                 "did not start (killed by SIGABRT (SI_TKILL) in "), (None, "", "did not start")):
            if body is None:
                policy(d.pol, "t", "", exec_path=prog)
                d.ctl("restart", "t")  # back on the policy that runs, with the good file
                old = d.list()["t"]["pid"]
                with open(prog + ".new", "w") as f:
                    f.write("not a program\n")
                os.chmod(prog + ".new", 0o755)
                os.rename(prog + ".new", prog)
            else:
                policy(d.pol, "t", body, exec_path=prog)
            r = d.ctl("restart", "t")
            check(r.returncode != 0 and ("restart of t%s failed" % what) in r.stderr and why in r.stderr and
                  "serves on with its previous process (pid %d)" % old in r.stderr, "restart's answer: %r" % r.stderr)
            g = d.list()["t"]
            check(g["state"] == "ready" and g["pid"] == old, "still served by the old process: %r" % g)
            check("restart failed" in d.status("t")["cause"] and why in d.status("t")["cause"],
                  "status: %r" % d.status("t")["cause"])
            r = d.ctl("call", "t", "echo", "1")
            check(r.returncode == 0 and r.stdout.strip() == "1", "a call after it: %r" % r.stderr)


@test
def failed_gadget_refuses_at_once(tmp):
    """A gadget that failed (Restart=no) or was stopped on purpose is not
    on its way anywhere: calls are refused at once, with the cause."""
    with Daemon(tmp) as d:
        load(d, "dies", "Restart=no\n")
        d.ctl("call", "dies", "crash")
        wait_for(lambda: d.state("dies") == "failed", what="dies failed")
        # Refused, not waiting (a call that waited would say "did not start"
        # or time out).
        r = d.ctl("call", "dies", "echo", "1")
        check(r.returncode != 0 and 'gadget "dies" is not ready (failed' in r.stderr, "call to failed: %r" % r.stderr)
        load(d, "off")
        check(d.ctl("stop", "off").returncode == 0, "stop off")
        wait_for(lambda: d.state("off") == "stopped", what="off stopped")
        r = d.ctl("call", "off", "echo", "1")
        check(r.returncode != 0 and 'gadget "off" is not ready (stopped' in r.stderr, "call to stopped: %r" % r.stderr)


@test
def calls_wait_out_a_restart_delay(tmp):
    """Restart=always after a crash: the calls that come during its restart
    delay wait for the new process and are answered by it."""
    with Daemon(tmp) as d:
        load(d, "phoenix", "Restart=always\n")
        pid = d.list()["phoenix"]["pid"]
        r = d.ctl("call", "phoenix", "crash")
        check(r.returncode != 0, "crash answered: %r" % r.stdout)
        r = d.ctl("call", "phoenix", "echo", "7")
        check(r.returncode == 0 and r.stdout.strip() == "7", "call during the restart delay: %r" % r.stderr)
        check(d.list()["phoenix"]["pid"] != pid, "answered by the new process")


@test
def gateway_and_binding_calls_wait_out_a_restart_delay(tmp):
    """The gateway's calls and a gadget binding's wait as gadgetctl's do:
    both made during the target's Restart= delay are answered by its new
    process."""
    with Gateway(tmp) as g:
        load(g, "target", "Restart=always\n")
        load(g, "caller", "[Binding T]\nType=gadget\nTarget=target\n")
        for via in ("gateway", "binding"):
            pid = g.list()["target"]["pid"]
            check(g.ctl("call", "target", "crash").returncode != 0, "crash answered")
            if via == "gateway":
                status, body = g.call("target", "echo", "web")
                check(status == 200 and body == "web", "a gateway call during the delay: %d %r" % (status, body))
            else:
                r = g.ctl("call", "caller", "binding", json.dumps({"binding": "T", "op": "call",
                                                                   "args": {"method": "echo", "args": "b"}}))
                check(r.returncode == 0 and json.loads(r.stdout) == "b", "a binding's call during the delay: %r" % r)
            check(g.list()["target"]["pid"] not in (0, pid), "answered by the new process")


@test
def failed_restart_answers_waiting_calls_with_its_cause(tmp):
    """A stopped gadget's restart whose process never says hello: the calls
    that waited for it are answered with the start's failure cause."""
    with Daemon(tmp) as d:
        load(d, "mute", "CallTimeout=30s\n")
        check(d.ctl("stop", "mute").returncode == 0, "stop")
        wait_for(lambda: d.state("mute") == "stopped", what="mute stopped")
        # Stopped: its restart is a plain start (nothing serves meanwhile).
        policy(d.pol, "mute", "CallTimeout=30s\nArguments=mute 30\nStartTimeout=2s\nRestart=no\n")
        check(d.ctl("restart", "--no-block", "mute").returncode == 0, "restart")
        wait_for(lambda: d.state("mute") == "starting", what="mute starting again")
        r = d.ctl("call", "mute", "echo", "1")
        check(r.returncode != 0 and 'gadget "mute" did not start: start timeout' in r.stderr,
              "a call that waited for a failed start: %r" % r.stderr)


@test
def calls_queued_max_holds_while_restarting(tmp):
    """Hostile load: 300 calls at once to a gadget restarting (it never
    says hello): CallsQueuedMax= of them wait, the rest are refused "busy"
    at once, and gadgetd answers others meanwhile."""
    with Daemon(tmp) as d:
        load(d, "other")
        policy(d.pol, "mute", "Arguments=mute 30\nStartTimeout=3s\nCallTimeout=3s\nCallsQueuedMax=20\n")
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("mute") == "starting", what="mute starting")
        flood = subprocess.Popen([CALLFLOOD, d.sock, "mute", "echo", "300"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, CALLFLOOD_SILENCE_MS="10000"))
        r = d.ctl("call", "other", "echo", "5")
        check(r.returncode == 0 and r.stdout.strip() == "5", "another gadget during the flood: %r" % r.stderr)
        out = flood.communicate(timeout=60)[0]
        counts = dict((int(l.split()[1]), int(l.split()[2])) for l in out.splitlines() if l.startswith("error "))
        busy = counts.get(7, 0)
        check(busy == 280 and sum(counts.values()) == 300, "300 calls, CallsQueuedMax=20: %s" % out)
        check(d.proc.poll() is None, "gadgetd ended")


if __name__ == "__main__":
    sys.exit(main())
