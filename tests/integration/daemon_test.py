#!/usr/bin/env python3
"""Integration tests of the daemon: a real gadgetd with real gadgets,
driven with the real gadgetctl. Usage: daemon_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET, CALLFLOOD, EXAMPLES."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

from harness import (CALLFLOOD, EXAMPLES, GADGETCTL, GADGETD, TESTGADGET, Daemon, check, children, main, mounts,
                     pid_alive,
                     policy, skip, spare, test, wait_for, workers)

PROBE = os.environ.get("PROBE", "")
# libevent's timers may end a few ms early as the program's wall clock sees
# it (a coarse monotonic clock; 1.8 ms was seen on a loaded machine).
TIMER_SLACK_MS = 10


@test
def load_list_call_stop(tmp):
    with Daemon(tmp) as d:
        p = policy(tmp, "echoer")
        r = d.ctl("load", p)
        check(r.returncode == 0, "load: %r" % r.stderr)
        wait_for(lambda: d.state("echoer") == "ready", what="echoer ready")
        r = d.ctl("call", "echoer", "echo", '"hi"')
        check(r.returncode == 0 and r.stdout.strip() == '"hi"', "call: %r %r" % (r.stdout, r.stderr))
        r = d.ctl("list")
        check(re.search(r"^echoer\s+ready\s+\d+", r.stdout, re.M), "list: %r" % r.stdout)
        check(d.list()["echoer"]["calls"] == 1, "calls not counted")
        check(d.list()["echoer"]["start_us"] > 0, "start_us not reported for a ready gadget")
        r = d.ctl("stop", "echoer")
        check(r.returncode == 0, "stop: %r" % r.stderr)
        wait_for(lambda: d.state("echoer") == "stopped", what="echoer stopped")
        r = d.ctl("call", "echoer", "echo", '"hi"')
        check(r.returncode != 0 and "not ready" in r.stderr, "call to stopped: %r" % r.stderr)
        r = d.ctl("restart", "echoer")
        wait_for(lambda: d.state("echoer") == "ready", what="echoer ready again")
        check(d.stop() == 0, "gadgetd did not exit cleanly")


@test
def status_and_errors(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "echoer", "[Binding NOTES]\nType=kv\n")
        d.ctl("reload")
        wait_for(lambda: d.state("echoer") == "ready", what="echoer ready")
        r = d.ctl("status", "echoer")
        for want in ("ready", "Policy: %s" % os.path.join(d.pol, "echoer.policy"), "NOTES (kv)",
                     "echo", "CallTimeout"):
            check(want in r.stdout, "status lacks %r: %r" % (want, r.stdout))
        # --json before the command or after it, as scripts write it.
        after = json.loads(d.ctl("status", "echoer", "--json").stdout)
        check(after["name"] == "echoer" and after["state"] == "ready", "status NAME --json: %r" % after)
        r = d.ctl("status", "nope", "-j")
        check(r.returncode == 3 and "no gadget named" in json.loads(r.stderr)["error"]["message"],
              "not found, -j after: %r" % r.stderr)
        r = d.ctl("status", "nope")
        check(r.returncode == 3 and 'no gadget named "nope"' in r.stderr, "not found: %r" % r.stderr)
        r = d.ctl("call", "echoer", "nomethod")
        check(r.returncode != 0 and 'no method "nomethod"' in r.stderr, "no method: %r" % r.stderr)
        for args in (["frobnicate"], ["call", "echoer"]):
            r = d.ctl(*args)
            check(r.returncode == 2 and "--help" in r.stderr, "usage %r: %d %r" % (args, r.returncode, r.stderr))
    # gadgetctl's exit codes (docs/operating.md): 4 when gadgetd is not there.
    r = d.ctl("list")
    check(r.returncode == 4 and "is gadgetd running?" in r.stderr, "no daemon: %d %r" % (r.returncode, r.stderr))
    # A NAME no policy could declare is refused before connecting (2, not 4),
    # by every command that takes one.
    for args in (["stop"], ["start"], ["restart"], ["unload"], ["kill"], ["is-active"], ["is-failed"],
                 ["wake"], ["status"], ["cat"], ["describe"], ["call", "Bad/Name", "m"], ["logs"],
                 ["audit"], ["move", "Bad/Name", "node1"]):
        r = d.ctl(*(args if len(args) > 1 else args + ["Bad/Name"]))
        check(r.returncode == 2 and '"Bad/Name" is not a gadget name' in r.stderr,
              "bad name %r: %d %r" % (args, r.returncode, r.stderr))


@test
def logs_captured(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "talker")
        d.ctl("reload")
        wait_for(lambda: d.state("talker") == "ready", what="talker ready")
        d.ctl("call", "talker", "say", '{"text": "hello from inside"}')
        d.ctl("call", "talker", "say", '{"text": "bad \\u001b[31m bytes"}')
        wait_for(lambda: "hello from inside" in d.ctl("logs", "talker").stdout, what="the log line")
        r = d.ctl("logs", "talker", "-n", "1")
        check("\\x1b" in r.stdout and "\x1b" not in r.stdout, "escape not escaped: %r" % r.stdout)
        check("[talker] hello from inside" in d.logtext(), "gadgetd's log lacks the tagged line")


@test
def output_streams_keep_their_own_lines(tmp):
    """stdout, stderr and log messages each have their own unfinished line:
    half a line on stdout is not joined with what comes on the others."""
    with Daemon(tmp) as d:
        policy(d.pol, "mixer")
        d.ctl("reload")
        wait_for(lambda: d.state("mixer") == "ready", what="mixer ready")
        r = d.ctl("call", "mixer", "interleave")
        check(r.returncode == 0, "call: %r" % r.stderr)
        wait_for(lambda: "out-end" in d.ctl("logs", "mixer").stdout, what="the stdout line")
        lines = d.ctl("logs", "mixer", "-o", "cat").stdout.splitlines()
        for want in ("out-start out-end", "err-line", "log-line"):
            check(want in lines, "no whole line %r in %r" % (want, lines))


@test
def reload_added_removed_changed(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "keep")
        policy(d.pol, "change")
        policy(d.pol, "remove")
        d.ctl("reload")
        # One loaded by hand from elsewhere is no file of the directory's.
        elsewhere = os.path.join(tmp, "elsewhere")
        os.makedirs(elsewhere)
        r = d.ctl("load", policy(elsewhere, "outside"))
        check(r.returncode == 0, "load: %r" % r.stderr)
        for n in ("keep", "change", "remove", "outside"):
            wait_for(lambda n=n: d.state(n) == "ready", what=n)
        pids = {n: g["pid"] for n, g in d.list().items()}
        os.unlink(os.path.join(d.pol, "remove.policy"))
        policy(d.pol, "change", "CallTimeout=7s\n")
        policy(d.pol, "added")
        r = d.ctl("--json", "reload")
        rep = json.loads(r.stdout)
        check(rep["loaded"] == ["added"] and rep["restarted"] == ["change"] and
              rep["stopped"] == ["remove"] and rep["unchanged"] == ["keep"], "reload: %r" % rep)
        wait_for(lambda: "remove" not in d.list(), what="remove unloaded")
        wait_for(lambda: d.state("change") == "ready" and d.state("added") == "ready", what="restarts")
        now = d.list()
        check(now["keep"]["pid"] == pids["keep"], "unchanged gadget was restarted")
        check(now["change"]["pid"] != pids["change"], "changed gadget kept running")
        check(now["outside"]["pid"] == pids["outside"] and now["outside"]["state"] == "ready",
              "a gadget loaded from outside the directory: %r" % now.get("outside"))


@test
def restart_backoff_grows_past_quick_failures(tmp):
    """Failures after a long run are not quick, yet the delay still doubles
    with each failure in a row: 2 slow lives then quick ones wait 100, 200,
    400, 800, 1600 and 3200 ms, and the 5th quick failure parks. A failure
    is quick within QuickFailure=2s here (default 10 s), so a slow life
    lasts 2.5 s, not 10.5: the bound is the configured one, as a slow life
    of 2.5 s under the default would be quick and park the gadget early."""
    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    os.chmod(tmp, 0o755)
    os.chmod(shared, 0o755)
    mode = os.path.join(shared, "mode")

    def set_mode(m):
        with open(mode + ".new", "w") as f:
            f.write(m)
        os.chmod(mode + ".new", 0o644)
        os.rename(mode + ".new", mode)
    set_mode("slow 2500")
    conf = os.path.join(tmp, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nQuickFailure=2s\n")
    with Daemon(tmp, extra=("--config", conf)) as d:
        policy(d.pol, "slowpoke", "Restart=always\nStartTimeout=60s\nReadOnlyPaths=%s\nArguments=lives %s\n"
               % (shared, mode))
        d.ctl("reload")
        wait_for(lambda: len(re.findall(r"\[slowpoke\] life at", d.logtext())) == 2, timeout=60,
                 what="the second slow life")
        set_mode("quick")
        wait_for(lambda: d.state("slowpoke") == "failed", timeout=90, what="slowpoke parked")
        log = d.logtext()

        def times(what):
            return [int(s) * 10**9 + int(ns)
                    for s, ns in re.findall(r"\[slowpoke\] %s at (\d+)\.(\d{9})" % what, log)]
        starts, ends = times("life"), times("ending")
        check(len(starts) == 7 and len(ends) == 7, "lives: %d, ends: %d" % (len(starts), len(ends)))
        for k, want in enumerate((100, 200, 400, 800, 1600, 3200)):
            gap_ms = (starts[k + 1] - ends[k]) / 1e6
            check(gap_ms >= want - TIMER_SLACK_MS,
                  "restart %d came after %.3f ms, promised at least %d" % (k + 1, gap_ms, want))
        g = d.list()["slowpoke"]
        check(g["restarts"] == 6 and "keeps crashing (5 times in a row)" in g["cause"], "parked: %r" % g)


@test
def reload_leaves_stopped_and_failed_alone(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "halted")
        policy(d.pol, "broken", "Arguments=crash\n")
        d.ctl("reload")
        wait_for(lambda: d.state("halted") == "ready", what="halted ready")
        wait_for(lambda: d.state("broken") == "failed", what="broken failed")
        r = d.ctl("stop", "halted")
        check(r.returncode == 0, "stop: %r" % r.stderr)
        wait_for(lambda: d.state("halted") == "stopped", what="halted stopped")
        r = d.ctl("--json", "reload")
        rep = json.loads(r.stdout)
        check(sorted(rep["unchanged"]) == ["broken", "halted"] and rep["restarted"] == [], "reload: %r" % rep)
        time.sleep(1)  # a start it wrongly made would show by now
        now = d.list()
        check(now["halted"]["state"] == "stopped" and now["halted"]["restarts"] == 0, "halted: %r" % now["halted"])
        check(now["broken"]["state"] == "failed" and now["broken"]["restarts"] == 0, "broken: %r" % now["broken"])
        check(len(re.findall(r"\[halted\] started", d.logtext())) == 1, "halted started again")
        # An explicit load of the unchanged file does start it again.
        r = d.ctl("load", os.path.join(d.pol, "halted.policy"))
        check(r.returncode == 0, "load: %r" % r.stderr)
        wait_for(lambda: d.state("halted") == "ready", what="halted started by load")


@test
def sighup_reloads(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "late")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.state("late") == "ready", what="late loaded by SIGHUP")


@test
def crash_restart_backoff_then_failed(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "crasher", "Restart=always\nArguments=crash\n")
        d.ctl("reload")
        wait_for(lambda: d.state("crasher") == "failed", timeout=30, what="crasher parked")
        g = d.list()["crasher"]
        check("keeps crashing (5 times in a row)" in g["cause"] and "SIGABRT" in g["cause"],
              "cause: %r" % g["cause"])
        # Parked at the 5th quick failure: 5 lives, 4 restarts.
        check(g["restarts"] == 4, "restarts: %r" % g["restarts"])
        log = d.logtext()
        starts = len(re.findall(r"\[crasher\] started", log))
        check(starts == 5, "started %d times, want 5" % starts)
        # The delays themselves, from the wall clock of each life: each one at
        # least the promised 100, 200, 400, 800 ms (the gap also holds a start).
        lives = [int(s) * 10**9 + int(ns) for s, ns in re.findall(r"\[crasher\] crashing at (\d+)\.(\d{9})", log)]
        check(len(lives) == 5, "lives: %r" % lives)
        for k, want in enumerate((100, 200, 400, 800)):
            gap_ms = (lives[k + 1] - lives[k]) / 1e6
            check(gap_ms >= want - TIMER_SLACK_MS,
                  "restart %d came after %.3f ms, promised at least %d" % (k + 1, gap_ms, want))
        check(re.findall(r"\[crasher\] restarting in (\d+) ms", log) == ["100", "200", "400", "800"],
              "delays logged: %r" % re.findall(r"\[crasher\] restarting in \d+ ms", log))
        # In the audit: 5 ends by SIGABRT, 4 restarts with their delays, then parked.
        recs = [json.loads(l) for l in d.ctl("--json", "audit", "crasher").stdout.splitlines()]
        life = [(r["op"], r.get("signal") or r.get("delay_ms")) for r in recs if r["binding"] == "lifecycle"
                and r["op"] in ("exited", "restarted", "parked")]
        check(life == [("exited", "SIGABRT"), ("restarted", 100), ("exited", "SIGABRT"), ("restarted", 200),
                       ("exited", "SIGABRT"), ("restarted", 400), ("exited", "SIGABRT"), ("restarted", 800),
                       ("exited", "SIGABRT"), ("parked", None)], "lifecycle records: %r" % life)
        # gadgetctl restart starts the backoff over: from 100 ms, parked
        # again only at the 5th failure in a row of the new series.
        # The restart answers with the first crash of the new series.
        r = d.ctl("restart", "crasher")
        check(r.returncode == 1 and "did not start" in r.stderr and "SIGABRT" in r.stderr, "restart: %r" % (r,))
        wait_for(lambda: len(re.findall(r"\[crasher\] started", d.logtext())) == 10 and
                 d.state("crasher") == "failed", timeout=30, what="crasher parked again")
        delays = re.findall(r"\[crasher\] restarting in (\d+) ms", d.logtext())
        check(delays == ["100", "200", "400", "800"] * 2, "delays after gadgetctl restart: %r" % delays)
        check("keeps crashing (5 times in a row)" in d.list()["crasher"]["cause"], "cause: %r" %
              d.list()["crasher"]["cause"])


@test
def spare_shell_used_by_next_start(tmp):
    """An idle gadgetd keeps one sandbox shell ready; the next start takes
    it (the gadget's PID 1 is that very process), and another is made."""
    with Daemon(tmp) as d:
        policy(d.pol, "quick")
        used = []
        # A few tries: tests running beside this one may mount something,
        # and then the spare is (rightly) dropped instead of used.
        for attempt in range(5):
            shell = wait_for(lambda: spare(d), what="a spare shell")
            before = d.list().get("quick", {}).get("pid")
            d.ctl("reload" if attempt == 0 else "restart", *([] if attempt == 0 else ["quick"]))
            wait_for(lambda: d.state("quick") == "ready" and d.list()["quick"]["pid"] != before,
                     what="quick started")
            used.append((shell, d.list()["quick"]["pid"]))
            if used[-1][0] == used[-1][1]:
                break
        check(used[-1][0] == used[-1][1], "no start used the spare: (spare, started) %r" % used)
        again = wait_for(lambda: spare(d), what="the next spare shell")
        check(again != shell, "the spare was not replaced")
        r = d.ctl("call", "quick", "echo", '"hi"')
        check(r.returncode == 0 and r.stdout.strip() == '"hi"', "call: %r" % r.stderr)
        d.ctl("stop", "quick")
        wait_for(lambda: d.state("quick") == "stopped", what="quick stopped")
        check(workers(d) == [], "a worker is left: %r" % workers(d))
    check(d.proc.returncode == 0, "gadgetd did not exit cleanly")


@test
def spare_shell_made_during_a_burst(tmp):
    """In a burst of starts (first calls to idle gadgets, each taken less
    than SPARE_DELAY_MS after the last start was done, however long a start
    takes), a start makes the next spare shell while it waits for its
    sandbox to be built, so that the start after it finds one; after a
    quiet spell the spare is made later, off any start's path. Seen in the
    order of pids: the third start's PID 1 (a spare) was cloned before the
    second start's program, so while the second start waited; without the
    refill it is cloned by the third start itself, after that program."""
    with Daemon(tmp) as d:
        seen = []
        # The three calls leave in one write (callflood), so they come in
        # one burst even on a busy machine; a few tries all the same (a
        # spare is dropped when the host's mount table changed meanwhile).
        for attempt in range(3):
            names = ["b%d_%d" % (attempt, i) for i in range(3)]
            for n in names:
                policy(d.pol, n, "Start=on-demand\n")
            d.ctl("reload")
            wait_for(lambda: all(d.state(n) == "idle" for n in names), what="the gadgets idle")
            wait_for(lambda: spare(d), what="a spare shell")
            time.sleep(0.05)  # the burst begins after a quiet spell
            r = subprocess.run([CALLFLOOD, d.sock, ",".join(names), "echo", "3", '"hi"'], capture_output=True,
                               text=True, timeout=60, env=dict(os.environ, CALLFLOOD_SILENCE_MS="30000"))
            check("ok 3" in r.stdout, "the burst's calls: %r" % r)
            listed = d.list()
            shells = [listed[n]["pid"] for n in names]
            programs = [int(open("/proc/%d/task/%d/children" % (p, p)).read().split()[0]) for p in shells]
            seen.append((shells, programs))
            if shells[2] < programs[1]:
                break
        check(shells[2] < programs[1], "the third start's shell was not made during the second: (shells, programs) "
              "%r" % seen)


def idmapped(pid):
    """Whether pid's id maps are written: a gadget's start took it (gone: not)."""
    try:
        with open("/proc/%d/uid_map" % pid) as f:
            return f.read().strip() != ""
    except OSError:
        return False


def stopped(pid):
    """Whether pid is stopped (SIGSTOP), as /proc says (gone: not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


@test
def a_slow_sandbox_holds_up_no_call(tmp):
    """While a sandbox builds, the loop serves calls: gadgetd launches a
    start and reads its sandbox's report from the loop. The slow build is
    the spare shell stopped (SIGSTOP) before the start takes it: its id
    maps are written, its setup sent, and it builds nothing until let go.
    Meanwhile calls to a ready gadget are answered, and the slow gadget is
    "starting"; let go, it becomes ready. (Before, gadgetd waited in poll
    for the report, up to 10 s, answering nothing.)"""
    with Daemon(tmp) as d:
        policy(d.pol, "quick")
        d.ctl("reload")
        wait_for(lambda: d.state("quick") == "ready", what="quick ready")
        # A few tries: a spare is (rightly) dropped instead of used when the
        # host's mount table changed since it was made.
        for attempt in range(5):
            shell = wait_for(lambda: spare(d), what="a spare shell")
            os.kill(shell, signal.SIGSTOP)
            name = "slow%d" % attempt
            policy(d.pol, name)
            loading = subprocess.Popen([GADGETCTL, "--socket", d.sock, "reload"], stdout=subprocess.DEVNULL)
            taken = lambda: idmapped(shell)
            # Asked of /proc, not of gadgetd: a gadgetd that waits for the
            # sandbox answers nothing meanwhile.
            wait_for(lambda: taken() or not os.path.exists("/proc/%d" % shell), what="%s's start launched" % name)
            if taken():
                break
            loading.wait(timeout=60)
        check(taken(), "no start took the stopped spare")
        for i in range(5):
            r = d.ctl("call", "quick", "echo", '"%d"' % i)
            check(r.returncode == 0 and r.stdout.strip() == '"%d"' % i, "call %d while %s builds: %r" % (i, name, r))
        check(stopped(shell) and d.state(name) == "starting",
              "the calls were not answered while %s's sandbox was held (%s)" % (name, d.state(name)))
        os.kill(shell, signal.SIGCONT)
        wait_for(lambda: d.state(name) == "ready", what="%s ready once let go" % name)
        check(d.list()[name]["pid"] == shell, "%s does not run in the shell that was held" % name)
        r = d.ctl("call", name, "echo", '"late"')
        check(r.returncode == 0 and r.stdout.strip() == '"late"', "call of %s: %r" % (name, r))
        check(loading.wait(timeout=60) == 0, "reload failed")
        # Stopped while its sandbox is held: ended at once (it served
        # nothing), its start's resources released, nothing left running.
        shell = wait_for(lambda: spare(d), what="another spare shell")
        os.kill(shell, signal.SIGSTOP)
        policy(d.pol, "held")
        loading = subprocess.Popen([GADGETCTL, "--socket", d.sock, "reload"], stdout=subprocess.DEVNULL)
        wait_for(lambda: idmapped(shell) or not os.path.exists("/proc/%d" % shell), what="held's start launched")
        if idmapped(shell):  # else the spare was dropped (a mount meanwhile) and held started as usual
            check(d.ctl("stop", "held").returncode == 0, "stop of held")
            wait_for(lambda: d.state("held") == "stopped" and not os.path.exists("/proc/%d" % shell),
                     what="held stopped, its sandbox gone")
            check(sorted(workers(d)) == sorted([d.list()["quick"]["pid"], d.list()[name]["pid"]]),
                  "workers left: %r" % workers(d))
        loading.wait(timeout=60)


@test
def spare_shell_dropped_after_mount_change(tmp):
    """A spare shell's mount namespace is a copy of the host's from when it
    was made: after the host's mount table changes, a start must not use it,
    or a path mounted meanwhile would be missing in the gadget's sandbox."""
    base = os.path.join(tmp, "private")
    sub = os.path.join(base, "sub")
    os.makedirs(sub)
    # Private: nothing mounted below it later reaches a copy made before.
    subprocess.run(["mount", "--bind", base, base], check=True)
    try:
        subprocess.run(["mount", "--make-private", base], check=True)
        with Daemon(tmp) as d:
            shell = wait_for(lambda: spare(d), what="a spare shell")
            subprocess.run(["mount", "-t", "tmpfs", "late", sub], check=True)
            open(os.path.join(sub, "seen"), "w").close()
            policy(d.pol, "late", "ReadOnlyPaths=%s\nArguments=paths %s\n" % (sub, os.path.join(sub, "seen")),
                   exec_path=PROBE)
            d.ctl("reload")
            want = "stat %s: ok" % os.path.join(sub, "seen")
            wait_for(lambda: want in d.ctl("logs", "late").stdout, what="the probe's report")
            check(d.list()["late"]["pid"] != shell, "the stale spare was used")
    finally:
        subprocess.run(["umount", "-R", base])


@test
def daemon_gadget_cpuset_is_gadgetds(tmp):
    """Under the daemon with a v1 cpuset, each gadget's cpuset is made by
    the kernel with the CPUs of gadgetd's instance cgroup (gadgetd's at its
    start, cgroup.clone_children) instead of written per gadget: a gadget
    gets gadgetd's CPUs and cannot widen past them, also after gadgetd's
    own affinity changed (taskset -p) since it started."""
    mine = sorted(os.sched_getaffinity(0))
    v1, _ = mounts()
    if len(mine) < 2 or "cpuset" not in v1:
        skip("needs two CPUs and a v1 cpuset hierarchy")
    last = str(mine[-1])
    with Daemon(tmp) as d:
        for name, want in (("wide", [str(c) for c in mine]), ("narrow", [last])):
            if name == "narrow":
                subprocess.run(["taskset", "-p", "-c", last, str(d.proc.pid)], check=True, capture_output=True)
            policy(d.pol, name, "MemoryMax=64M\nArguments=cpus-widen\n", exec_path=PROBE)
            d.ctl("reload")
            wait_for(lambda: "cpus:" in d.ctl("logs", name).stdout, what="%s's report" % name)
            wait_for(lambda: d.state(name) not in ("starting", "ready"), what="%s's end" % name)
            got = re.findall(r"cpus: (\d+)", d.ctl("logs", name).stdout)
            check(got == want, "%s: cpus %r, gadgetd's %r" % (name, got, want))


@test
def stop_during_restart_backoff_leaves_no_worker(tmp):
    # While a restart backs off, gadgetd builds the next run's sandbox in
    # advance; a stop then must end that one too.
    with Daemon(tmp) as d:
        policy(d.pol, "looper", "Restart=always\nArguments=crash\n")
        d.ctl("reload")
        wait_for(lambda: d.list()["looper"]["restarts"] >= 2, what="looper restarting")
        r = d.ctl("stop", "looper")
        check(r.returncode == 0, "stop: %r" % r.stderr)
        wait_for(lambda: d.state("looper") == "stopped", what="looper stopped")
        check(d.list()["looper"]["pid"] == 0, "a stopped gadget shows a pid")
        kids = workers(d)
        check(kids == [], "gadgetd still has workers after the stop: %r" % kids)
        check(d.stop() == 0, "gadgetd did not exit cleanly")


@test
def crash_recorded_and_restarted(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "fragile", "Restart=on-failure\n")
        d.ctl("reload")
        wait_for(lambda: d.state("fragile") == "ready", what="fragile ready")
        r = d.ctl("call", "fragile", "crash")
        check(r.returncode != 0 and "SIGSEGV" in r.stderr, "crash call: %r" % r.stderr)
        wait_for(lambda: d.list()["fragile"]["restarts"] == 1 and d.state("fragile") == "ready",
                 what="fragile restarted")


@test
def seccomp_kill_recorded(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "rogue")
        d.ctl("reload")
        wait_for(lambda: d.state("rogue") == "ready", what="rogue ready")
        r = d.ctl("call", "rogue", "sigsys")
        check(r.returncode == 1 and "seccomp violation (SIGSYS)" in r.stderr, "call: %r" % r.stderr)
        wait_for(lambda: d.state("rogue") == "failed", what="rogue failed")
        check(d.list()["rogue"]["cause"] == "seccomp violation (SIGSYS)", "cause: %r" % d.list()["rogue"])


@test
def exit_code_recorded(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "quitter", "Arguments=crash\n")
        d.ctl("reload")
        wait_for(lambda: d.state("quitter") == "failed", what="quitter failed")
        check(d.list()["quitter"]["cause"].startswith("killed by SIGABRT (SI_TKILL) in "), "cause: %r" % d.list()["quitter"])


@test
def stop_kills_after_grace(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "stuck", "CallTimeout=60s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("stuck") == "ready", what="stuck ready")
        call = subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "stuck", "hang"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: d.list()["stuck"]["calls"] == 1, what="the call in flight")
        d.ctl("stop", "stuck")
        check(d.state("stuck") == "stopping", "not stopping: %r" % d.state("stuck"))
        wait_for(lambda: d.state("stuck") == "stopped", timeout=10, what="SIGKILL after the grace period")
        out, err = call.communicate(timeout=10)
        check(call.returncode == 1 and 'gadget "stuck" stopped while the call ran (stopped by gadgetctl: not answered '
              "within the stop's grace of 3000 ms)" in err, "the call: %r" % err)


@test
def long_lines_split(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "talker")
        d.ctl("reload")
        wait_for(lambda: d.state("talker") == "ready", what="talker ready")
        d.ctl("call", "talker", "say", json.dumps({"text": "x" * 5000}))
        lines = wait_for(lambda: [l for l in d.ctl("logs", "talker", "-o", "cat").stdout.splitlines() if l.startswith("x")],
                         what="the long line")
        check([len(l) for l in lines] == [2048, 2048, 904], "pieces: %r" % [len(l) for l in lines])


@test
def logs_follow(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "talker")
        d.ctl("reload")
        wait_for(lambda: d.state("talker") == "ready", what="talker ready")
        f = subprocess.Popen([GADGETCTL, "--socket", d.sock, "logs", "talker", "-f", "-o", "cat"],
                             stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        d.ctl("call", "talker", "say", '{"text": "first"}')
        d.ctl("call", "talker", "say", '{"text": "second"}')
        # Its lifecycle lines (started, ready) come first, gadgetd's own.
        got = [l for l in (f.stdout.readline().strip() for _ in range(4)) if not l.startswith("gadgetd: ")]
        f.kill()
        check(got == ["first", "second"], "followed: %r" % got)


@test
def config_file(tmp):
    conf = os.path.join(tmp, "gadgetd.conf")
    sock = os.path.join(tmp, "other.sock")
    with open(conf, "w") as f:
        f.write("[Daemon]\nSocket=%s\n" % sock)
    p = subprocess.Popen([GADGETD, "--config", conf, "--policy-dir", tmp, "--state-dir",
                          os.path.join(tmp, "s2"), "--run-dir", os.path.join(tmp, "r2")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(sock), what="the configured socket")
    finally:
        p.terminate()
        p.wait()
    with open(conf, "a") as f:
        f.write("Bogus=1\n")
    r = subprocess.run([GADGETD, "--config", conf], capture_output=True, text=True, timeout=10)
    check(r.returncode == 2 and "%s:3:" % conf in r.stderr, "bad config: %r" % r.stderr)


@test
def inflight_calls_fail_when_gadget_dies(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "sleeper", "CallTimeout=60s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("sleeper") == "ready", what="sleeper ready")
        calls = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "sleeper", "sleep", '{"ms": 30000}'],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        wait_for(lambda: d.list()["sleeper"]["calls"] == 3, what="calls in flight")
        start = time.time()
        os.kill(d.list()["sleeper"]["pid"], signal.SIGKILL)
        for c in calls:
            out, err = c.communicate(timeout=10)
            check(c.returncode == 1 and "ended" in err, "in-flight call: %r" % err)
        check(time.time() - start < 5, "calls did not fail at once")


@test
def client_leaves_before_its_answers(tmp):
    """Clients that leave while their calls are in flight: the answers that
    come later go nowhere, and gadgetd and the gadget go on."""
    with Daemon(tmp) as d:
        policy(d.pol, "sleeper", "CallTimeout=60s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("sleeper") == "ready", what="sleeper ready")
        calls = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "sleeper", "sleep", '{"ms": 1500}'],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(5)]
        wait_for(lambda: d.list()["sleeper"]["in_flight"] == 5, what="5 calls in flight")
        for c in calls:
            c.kill()
            c.wait()
        # Their answers come to no one: gadgetd has them all, and holds none.
        wait_for(lambda: d.list()["sleeper"]["in_flight"] == 0, what="the left clients' answers")
        r = d.ctl("call", "sleeper", "sleep", '{"ms": 1}')
        check(r.returncode == 0, "a call after the others' clients left: %r" % r.stderr)
        g = d.list()["sleeper"]
        check(g["state"] == "ready" and g["restarts"] == 0 and g["calls"] == 6, "sleeper: %r" % g)


@test
def late_calls_not_started(tmp):
    """A gadget behind, not stuck (each call takes 300 ms, CallTimeout=1s):
    of 6 calls sent at once, those its caller was answered "it may have
    run" for before the gadget read them are not started (libgadget reads
    the call's deadline, gadget.proto Call.deadline_us): at most the one in
    progress at the deadline runs beside those answered. The gadget is not
    restarted: it answers throughout."""
    with Daemon(tmp) as d:
        policy(d.pol, "behind", "CallTimeout=1s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("behind") == "ready", what="behind ready")
        pid = d.list()["behind"]["pid"]
        r = subprocess.run([CALLFLOOD, d.sock, "behind", "sleep", "6", '{"ms": 300}'], capture_output=True,
                           text=True, timeout=60)
        counts = dict((" ".join(l.split()[:-1]), int(l.split()[-1])) for l in r.stdout.splitlines())
        ok, timeouts = counts.get("ok", 0), counts.get("error 6", 0)
        check(ok + timeouts == 6 and timeouts >= 1, "6 calls, some timed out: %r %r" % (counts, r.stderr))
        # The gadget reads the rest and answers them "not run" at once.
        wait_for(lambda: d.list()["behind"]["in_flight"] == 0, what="nothing in flight")
        started = json.loads(d.ctl("call", "behind", "sleeps").stdout)
        print("answered ok %d, timed out %d; the gadget started %d" % (ok, timeouts, started))
        check(started <= ok + 1, "%d calls started, %d answered ok: some started after their callers were told "
              "they timed out" % (started, ok))
        check(d.list()["behind"]["pid"] == pid, "the gadget was restarted")


@test
def hung_method_times_out(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "hanger", "CallTimeout=1s\nRestart=on-failure\n")
        d.ctl("reload")
        wait_for(lambda: d.state("hanger") == "ready", what="hanger ready")
        pid = d.list()["hanger"]["pid"]
        r = d.ctl("call", "hanger", "hang")
        check(r.returncode == 1 and "CallTimeout" in r.stderr, "timeout: %r" % r.stderr)
        wait_for(lambda: d.state("hanger") == "ready" and d.list()["hanger"]["pid"] != pid,
                 what="hanger restarted")
        # Restart=no holds for a hang too: killed, then left failed.
        policy(d.pol, "stuck", "CallTimeout=1s\nRestart=no\n")
        d.ctl("reload")
        wait_for(lambda: d.state("stuck") == "ready", what="stuck ready")
        r = d.ctl("call", "stuck", "hang")
        check(r.returncode == 1 and "CallTimeout" in r.stderr, "timeout: %r" % r.stderr)
        wait_for(lambda: d.state("stuck") == "failed", what="stuck failed")
        time.sleep(1)
        g = d.list()["stuck"]
        check(g["state"] == "failed" and g["restarts"] == 0 and g["cause"] == "timeout",
              "Restart=no after a hang: %r" % g)


@test
def full_queue_answers_busy(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "slow", "CallTimeout=60s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("slow") == "ready", what="slow ready")
        r = subprocess.run([CALLFLOOD, d.sock, "slow", "hang", "1100"], capture_output=True, text=True,
                           timeout=30)
        # 1024 calls queue; the rest are answered busy (code 7) at once.
        check("error 7 76" in r.stdout, "flood: %r %r" % (r.stdout, r.stderr))
        # CallsQueuedMax= sets how many queue.
        policy(d.pol, "short", "CallTimeout=60s\nCallsQueuedMax=8\n")
        d.ctl("reload")
        wait_for(lambda: d.state("short") == "ready", what="short ready")
        r = subprocess.run([CALLFLOOD, d.sock, "short", "hang", "20"], capture_output=True, text=True, timeout=30)
        check("error 7 12" in r.stdout, "CallsQueuedMax=8: %r %r" % (r.stdout, r.stderr))


@test
def hundred_gadgets_concurrently(tmp):
    # A test of serving 100 gadgets at once, not of how fast they start: on
    # a slow host (the emulated Debian 12 guest) 100 starts at once take
    # longer than the default StartTimeout=10s, and Restart=no leaves the
    # late ones failed.
    with Daemon(tmp) as d:
        for i in range(100):
            policy(d.pol, "g%03d" % i, "StartTimeout=240s\n")
        d.ctl("reload", timeout=120)
        wait_for(lambda: sum(g["state"] == "ready" for g in d.list().values()) == 100, timeout=240,
                 what="100 gadgets ready")
        procs = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "g%03d" % i, "echo", str(i)],
                                  stdout=subprocess.PIPE, text=True) for i in range(100)]
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=60)
            check(p.returncode == 0 and out.strip() == str(i), "g%03d answered %r" % (i, out))


NOGROUP = 65534
OTHER_GID = 4242  # a group nobody is in, the control group least of all


@test
def unprivileged_client_refused(tmp):
    with Daemon(tmp) as d:
        r = d.ctl("list", user=(65534, 65534))
        check(r.returncode == 4 and "permission denied" in r.stderr, "nobody: %d %r" % (r.returncode, r.stderr))


@test
def control_socket_mode_and_owner(tmp):
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        st = os.lstat(d.sock)
        check(stat.S_ISSOCK(st.st_mode), "not a socket: %o" % st.st_mode)
        check(stat.S_IMODE(st.st_mode) == 0o660, "mode %o, not 0660" % stat.S_IMODE(st.st_mode))
        check(st.st_uid == 0 and st.st_gid == NOGROUP, "owner %d:%d, not root:nogroup" % (st.st_uid, st.st_gid))


@test
def gadgetd_refuses_non_member(tmp):
    # The socket's mode is opened to everyone here, so that the refusal
    # can come only from gadgetd's own check of the peer's credentials.
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        os.chmod(d.sock, 0o666)
        r = d.ctl("list", user=(65534, OTHER_GID))
        check(r.returncode == 4 and "member of the nogroup group" in r.stderr,
              "non-member: %d %r" % (r.returncode, r.stderr))
        wait_for(lambda: "refused a control connection from uid 65534" in d.logtext(),
                 what="gadgetd's own refusal in its log")
        r = d.ctl("list", user=(65534, OTHER_GID), groups=(OTHER_GID + 1,))
        check(r.returncode == 4, "member of other groups only: %d %r" % (r.returncode, r.stderr))
        r = d.ctl("list")
        check(r.returncode == 0, "root refused: %r" % r.stderr)


@test
def group_member_allowed(tmp):
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        r = d.ctl("list", user=(65534, 65534))
        check(r.returncode == 0, "member of the group refused: %r" % r.stderr)


@test
def supplementary_group_member_allowed(tmp):
    # The control group is only among the supplementary groups, not the
    # primary one; 0660 lets the kernel admit it, and gadgetd must too.
    with Daemon(tmp, extra=["--group", "nogroup"]) as d:
        r = d.ctl("list", user=(65534, OTHER_GID), groups=(OTHER_GID + 1, NOGROUP))
        check(r.returncode == 0, "supplementary member refused: %d %r" % (r.returncode, r.stderr))
        check("refused a control connection" not in d.logtext(), "gadgetd logged a refusal")


@test
def sigkill_leaves_no_worker(tmp):
    with Daemon(tmp) as d:
        for n in ("a", "b"):
            policy(d.pol, n)
        d.ctl("reload")
        wait_for(lambda: d.state("a") == "ready" and d.state("b") == "ready", what="ready")
        pids = [g["pid"] for g in d.list().values()]
        pids.append(wait_for(lambda: spare(d), what="a spare shell"))  # it dies too
        d.proc.kill()
        d.proc.wait()
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10, what="workers to die")


@test
def sigterm_stops_all(tmp):
    with Daemon(tmp) as d:
        policy(d.pol, "a")
        d.ctl("reload")
        wait_for(lambda: d.state("a") == "ready", what="ready")
        pid = d.list()["a"]["pid"]
        check(d.stop() == 0, "gadgetd did not exit 0")
        check(not pid_alive(pid), "worker survived")
        check(not os.path.exists(d.sock), "socket left behind")


@test
def bad_policy_reported_good_ones_start(tmp):
    policy_dir = os.path.join(tmp, "policy.d")
    os.makedirs(policy_dir)
    policy(policy_dir, "good")
    with open(os.path.join(policy_dir, "bad.policy"), "w") as f:
        f.write("[Gadget]\nName=bad\nExec=%s\nTasksMax=many\n" % TESTGADGET)
    with Daemon(tmp) as d:
        wait_for(lambda: d.state("good") == "ready", what="good ready")
        check(re.search(r"bad\.policy:4:.*TasksMax", d.logtext()), "no file:line error: %r" % d.logtext())
        check("bad" not in d.list(), "the bad policy was loaded")
        r = d.ctl("load", os.path.join(policy_dir, "bad.policy"))
        check(r.returncode == 1 and "bad.policy:4:" in r.stderr, "load of bad: %r" % r.stderr)



@test
def one_program_under_two_policies(tmp):
    """gadget_new(NULL): the hello example takes the name gadgetd gives it
    (GADGET_NAME), so one program serves under two policies' names."""
    hello = os.path.join(EXAMPLES, "hello")
    with Daemon(tmp) as d:
        policy(d.pol, "hello", "", exec_path=hello)
        policy(d.pol, "greeter", "", exec_path=hello)
        check(d.ctl("reload").returncode == 0, "reload")
        for name in ("hello", "greeter"):
            wait_for(lambda n=name: d.state(n) == "ready", what=name + " ready: %r" % d.list())
            r = d.ctl("call", name, "greet", '{"name": "%s"}' % name)
            check(r.returncode == 0 and json.loads(r.stdout) == "Hello, %s!" % name, "%s: %r" % (name, r))

@test
def network_namespace_shared(tmp):
    """NetworkNamespace=shared: the gadgets with it are in one network
    namespace (gadgetd's, made once: neither the host's nor a private
    one), each other gadget in one of its own; a command run in a shared
    gadget through gadgetctl exec joins it, and can create no socket
    there. A bad value is refused with FILE:LINE."""
    with Daemon(tmp) as d:
        for name in ("s1", "s2"):
            d.add(name, "NetworkNamespace=shared\nReadOnlyPaths=%s\n" % PROBE)
        for name in ("p1", "p2"):
            d.add(name)
        wait_for(lambda: all(d.state(n) == "ready" for n in ("s1", "s2", "p1", "p2")), what="all ready")
        net = {n: os.readlink("/proc/%d/ns/net" % g["pid"]) for n, g in d.list().items()}
        host = os.readlink("/proc/self/ns/net")
        check(net["s1"] == net["s2"], "shared gadgets in two network namespaces: %r" % net)
        check(len({host, net["s1"], net["p1"], net["p2"]}) == 4, "a namespace shared that must not be: %r" % net)
        out = {}
        for what in ("ns", "sockets"):
            r = d.ctl("exec", "s1", "--", PROBE, what)
            check(r.returncode == 0, "exec in s1: %r" % r)
            out.update(l.split(": ", 1) for l in r.stdout.splitlines())
        check(out.get("ns net") == net["s1"], "exec in s1 not in its network namespace: %r" % out)
        for fam in ("AF_INET", "AF_UNIX", "AF_NETLINK"):
            check(out.get("socket " + fam) == "EACCES", "socket(%s) in s1: %r" % (fam, out.get("socket " + fam)))
        check(out.get("socketpair") == "EACCES", "socketpair in s1: %r" % out.get("socketpair"))
    bad = policy(tmp, "bad", "NetworkNamespace=host\n")
    r = subprocess.run([GADGETD, "check", bad], capture_output=True, text=True, timeout=60)
    check(r.returncode == 1 and (bad + ':4: NetworkNamespace="host" is not one of private, shared') in r.stdout,
          "bad NetworkNamespace=: %r" % r)



def nice(path):
    """The nice value of the task at /proc/PATH (stat's 19th field)."""
    with open("/proc/%s/stat" % path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


@test
def loop_ahead_gadgets_at_zero(tmp):
    """gadgetd's loop runs at nice -10 (it was started at 0, as root may
    lower its own); every process and thread it starts is at 0: a sandbox's
    PID 1, its program, the spare shell, gadgetd's other threads. A gadget
    that inherited the loop's -10 would run ahead of the host's work."""
    with Daemon(tmp) as d:
        d.ctl("load", policy(tmp, "echoer", "[Binding DATA]\nType=kv\n"))
        wait_for(lambda: d.state("echoer") == "ready", what="echoer ready")
        # A kv write: the store's thread is started.
        r = d.ctl("call", "echoer", "increment_once", '{"binding": "DATA", "id": "1"}')
        check(r.returncode == 0, "increment: %r" % r.stderr)
        main_pid = d.proc.pid
        check(nice("%d/task/%d" % (main_pid, main_pid)) == -10, "loop's nice %d" % nice("%d" % main_pid))
        wait_for(lambda: spare(d), what="the spare shell")
        started = [str(p) for p, _ in children(d)]
        started += [c for w in workers(d) for c in open("/proc/%d/task/%d/children" % (w, w)).read().split()]
        started += ["%d/task/%s" % (main_pid, t) for t in os.listdir("/proc/%d/task" % main_pid)
                    if t != str(main_pid)]
        check(len(started) >= 4, "too few processes and threads seen: %r" % started)
        for p in started:
            check(nice(p) == 0, "%s (%s) at nice %d" % (p, open("/proc/%s/comm" % p).read().strip(), nice(p)))

if __name__ == "__main__":
    sys.exit(main())
