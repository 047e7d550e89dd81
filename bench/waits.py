"""bench/waits.py: the restart and reload rows of bench/run (section 10).

One gadgetd, one gadget (the tests' testgadget, whose echo returns its
argument), called by `callflood --paced` at 300 calls/s, pipelined over
the control socket, each call with its sequence number (the caller checks
every one is answered once, with its own number). Three runs of the caller,
in this order: steady (no event, 1,500 calls), then through 20 `gadgetctl
restart`s, through 20 policy changes applied with `gadgetctl reload`,
through 20 binary upgrades (a new file renamed over Exec=, then a restart)
and through 5 `gadgetctl daemon-reexec`s of gadgetd itself (each event
waits for 10 calls answered after it before the next).
Each row: the caller's p50, p99, max and its longest gap (the longest
time with calls out and no answer), beside the steady run's p99 and the
gadget's own start (start_us, hello included). Nothing here passes or
fails: the goal is a line in BENCHMARKS.md.
"""
import json
import os
import shutil
import subprocess
import time

from hostile import finish

RATE = 300
EVENTS = 20
REEXECS = 5


def paced(ctx, d):
    cmd = [ctx.exe("tests/integration/callflood"), "--paced", str(RATE), "100000", d.sock, "w", "echo"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def calls(d):
    return json.loads(d.ctl("--json", "status", "w"))["calls"]


def flowing(d, more):
    """Waits (polling) until the gadget counted `more` calls beyond now."""
    n = calls(d)
    while calls(d) < n + more:
        time.sleep(0.005)


def write(ctx, dirname, body, prog=None):
    """w.policy in the policy directory of this section's gadgetd (a reload
    restarts only gadgets of that directory)."""
    path = os.path.join(dirname, "w.policy")
    with open(path, "w") as f:
        f.write("[Gadget]\nName=w\nExec=%s\n%s" % (prog or ctx.exe("tests/integration/testgadget"), body))
    os.chmod(path, 0o644)


def run(ctx):
    pdir = os.path.join(ctx.work, "waits")
    os.makedirs(pdir, exist_ok=True)
    write(ctx, pdir, "CallTimeout=30s\n")
    ctx.commands.append("callflood --paced %d 100000 SOCK w echo  # steady, then through 20 gadgetctl restart w, "
                        "then through 20 reloads of a changed w.policy (CallTimeout=31s, 32s, ...), 20 binary upgrades "
                        "(cp, mv over Exec=, gadgetctl restart w) and 5 gadgetctl daemon-reexec" % RATE)
    out = {}
    with ctx.Daemon("waits", policy_dir=pdir) as d:
        d.wait_state("w", ("ready",))
        p = paced(ctx, d)
        flowing(d, 150 if ctx.quick else 1500)
        out["steady"] = finish(p)
        p = paced(ctx, d)
        flowing(d, 10)
        starts = []
        for _ in range(EVENTS):
            d.ctl("restart", "w")
            starts.append(json.loads(d.ctl("--json", "status", "w"))["start_us"])
            flowing(d, 10)
        out["restarts"] = finish(p)
        p = paced(ctx, d)
        flowing(d, 10)
        for i in range(EVENTS):
            pid = json.loads(d.ctl("--json", "status", "w"))["pid"]
            write(ctx, pdir, "CallTimeout=%ds\n" % (31 + i))
            d.ctl("reload")
            while True:
                st = json.loads(d.ctl("--json", "status", "w"))
                if st["state"] == "ready" and st["pid"] != pid:
                    break
                time.sleep(0.005)
            starts.append(st["start_us"])
            flowing(d, 10)
        out["reloads"] = finish(p)
        # Binary upgrades as docs/operating.md says: a new file renamed
        # over Exec=, then a restart.
        prog = os.path.join(ctx.work, "waits-bin")
        shutil.copy(ctx.exe("tests/integration/testgadget"), prog)
        os.chmod(prog, 0o755)
        write(ctx, pdir, "CallTimeout=30s\n", prog)
        d.ctl("reload")
        d.wait_state("w", ("ready",))
        p = paced(ctx, d)
        flowing(d, 10)
        for _ in range(EVENTS):
            shutil.copy(ctx.exe("tests/integration/testgadget"), prog + ".new")
            os.chmod(prog + ".new", 0o755)
            os.rename(prog + ".new", prog)
            d.ctl("restart", "w")
            starts.append(json.loads(d.ctl("--json", "status", "w"))["start_us"])
            flowing(d, 10)
        out["upgrades"] = finish(p)
        # gadgetd's own restart in place: the gadget keeps running.
        p = paced(ctx, d)
        flowing(d, 10)
        out["reexec_us"] = []
        for _ in range(REEXECS):
            t0 = time.monotonic_ns()
            d.ctl("daemon-reexec")
            out["reexec_us"].append((time.monotonic_ns() - t0) // 1000)
            flowing(d, 10)
        out["reexecs"] = finish(p)
        out["start_us"] = sorted(starts)[len(starts) // 2]
    return out


def rows(v, us):
    """Table rows, and the goals as (met, text) (us() formats ns)."""
    steady_p99 = v["steady"]["p99_us"] * 1e3
    start = v["start_us"] * 1e3
    out, goals = [], []
    for key, what in (("steady", "steady, no event"), ("restarts", "through %d `gadgetctl restart`s" % EVENTS),
                      ("reloads", "through %d reloads of a changed policy" % EVENTS),
                      ("upgrades", "through %d binary upgrades (new file renamed over Exec=, restart)" % EVENTS),
                      ("reexecs", "through %d `gadgetctl daemon-reexec`s (gadgetd's own restart)" % REEXECS)):
        r = v[key]
        lost = r["sent"] - r["ok"]
        out.append(["10 waits" if key == "steady" else "",
                    "paced caller, %d calls/s, %s: %d calls, %d not answered ok, %d twice" %
                    (RATE, what, r["sent"], lost, r["twice"]),
                    us(r["p50_us"] * 1e3), us(r["p99_us"] * 1e3),
                    "max %s, longest gap %s" % (us(r["max_us"] * 1e3), us(r["gap_us"] * 1e3))])
        if key != "steady":
            gap = r["gap_us"] * 1e3
            # gadgetd's own restart: the new process is gadgetd's image,
            # whose start is the whole `daemon-reexec` (hold, exec, adopt).
            own = sorted(v["reexec_us"])[len(v["reexec_us"]) // 2] * 1e3 if key == "reexecs" else start
            goals.append((lost == 0 and r["twice"] == 0 and gap <= 2 * steady_p99 + own,
                          "%s: 0 refused, lost or twice, and no gap longer than 2× the steady p99 plus %s "
                          "(%s + %s): %d not ok, %d twice, gap %s" %
                          (what, "a daemon-reexec (the command, median)" if key == "reexecs" else "a start",
                           us(2 * steady_p99), us(own), lost, r["twice"], us(gap))))
    out.append(["", "the gadget's start (load → hello), median of the %d" % (3 * EVENTS), us(start), "", ""])
    re_us = sorted(v["reexec_us"])
    out.append(["", "`gadgetctl daemon-reexec` (the command: hold, exec, adopt), median of the %d" % len(re_us),
                us(re_us[len(re_us) // 2] * 1e3), "", "max %s" % us(re_us[-1] * 1e3)])
    return out, goals
