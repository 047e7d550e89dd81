"""bench/sigs.py: what the sandbox's tracing costs a program that takes
many signals (bench/run section 12). The sandbox's PID 1 traces the
program to explain its crashes, so every signal delivered to the program
stops the thread it is delivered to once (docs/operating.md, Crashes).
One gadgetd, one benchgadget, whose `signals` method sends itself N
SIGUSR1s (handled) and times each kill() inside the sandbox; per round,
a fresh run (traced), then the same after `gadgetctl debug` (the tracer
lets go): interleaved, traced and untraced, in the same process. Nothing
here passes or fails: the goal is a line in BENCHMARKS.md.
"""
import json
import time


def program_pid(d, name):
    return json.loads(d.ctl("--json", "status", name)).get("program_pid", 0)


def tracer(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(line for line in f if line.startswith("TracerPid:")).split()[1])


def run(ctx):
    n = 2000 if ctx.quick else 20000
    rounds = 2 if ctx.quick else 5
    pol = ctx.policy("sig", ctx.exe("bench/benchgadget"))
    out = {"n": n, "traced_ns": [], "untraced_ns": []}
    ctx.commands.append("gadgetctl call sig signals '{\"n\": %d}'  # %d rounds: restart sig, the call (traced), "
                        "gadgetctl debug sig, the call again (untraced)" % (n, rounds))
    with ctx.Daemon("sigs") as d:
        d.ctl("load", pol)
        d.wait_state("sig", ("ready",))
        arg = json.dumps({"n": n})
        for _ in range(rounds):
            d.ctl("restart", "sig")
            d.wait_state("sig", ("ready",))
            out["traced_ns"] += json.loads(d.ctl("call", "sig", "signals", arg))["ns"]
            d.ctl("debug", "sig")
            pid = program_pid(d, "sig")
            while pid and tracer(pid) != 0:
                time.sleep(0.001)
            out["untraced_ns"] += json.loads(d.ctl("call", "sig", "signals", arg))["ns"]
    return out


def rows(v, us, median, p99, ratio):
    t, u = median(v["traced_ns"]), median(v["untraced_ns"])
    rows = [["12 signals", "a signal to itself (kill, handled), traced by the sandbox (crashes explained)", us(t),
             us(p99(v["traced_ns"])), ratio(t, u) + " untraced"],
            ["", "the same after gadgetctl debug (not traced)", us(u), us(p99(v["untraced_ns"])), "1.00×"]]
    goals = [(True, "the tracing that explains crashes costs a signal-heavy program %s per signal (%s); a "
              "program's calls and system calls are not stopped" % (us(t - u), ratio(t, u)))]
    return rows, goals
