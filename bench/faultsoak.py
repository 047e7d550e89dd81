#!/usr/bin/env python3
"""bench/faultsoak.py: the cluster under faults for a long while (issue 35's
soak; not run in CI, nor by bench/run).

The set-up of tests/integration/faults_pg_test.py (faultload.py: the
store, nodes a and b and the clients each in a network namespace of its
own; the workload through both nodes' gateways) with faults every few
seconds for MINUTES (default 30): a random kind each time, held 1-2.5 s
(a pause 8 s, past the callers' deadline), then healed, then a quiet 2-4 s. At the end the same
checks as the test, and per fault kind: how many were made, the share of
calls answered ok while it lasted (from its start to all answering again),
the time until every gadget answered through every node after the heal,
and the takeover time (a gadget whose owner changed: from the fault's
start to its first call answered by the new owner). Nothing passes or
fails; violations are printed and counted (goal: 0).

Usage, as root, from the top of a built tree:
    python3 bench/faultsoak.py BUILD_DIR [MINUTES] [SEED]
(SEED replays a schedule; the order of faults, not their timing.)"""
import os
import random
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    build = os.path.abspath(argv[1])
    minutes = float(argv[2]) if len(argv) > 2 else 30.0
    seed = int(argv[3]) if len(argv) > 3 else random.SystemRandom().randrange(1 << 31)
    os.environ.update(GADGETD=os.path.join(build, "supervisor", "gadgetd"),
                      GADGETCTL=os.path.join(build, "ctl", "gadgetctl"),
                      TESTGADGET=os.path.join(build, "tests", "integration", "testgadget"),
                      FAULTDELAY=os.path.join(build, "tests", "integration", "faultdelay"),
                      EXAMPLES=os.path.join(build, "examples"))
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import faultload as fl  # noqa: E402 (needs the environment above)
    import faultchecks as fc  # noqa: E402
    from harness import guard_host_dirs  # noqa: E402

    guard_host_dirs()
    tmp = tempfile.mkdtemp(prefix="gadgetd-soak-")
    os.chmod(tmp, 0o755)
    print("soak: %.0f min, seed %d" % (minutes, seed), flush=True)
    rng = random.Random(seed)
    c = fl.Cluster(tmp, standby=True)
    try:
        c.healthy(timeout=30)
        faults = fl.Faults(c, pause_s=8.0)  # as issue 35's: 4 leases long, past a call's deadline
        kinds = [k for k in faults.kinds() if not faults.missing(k)]
        for k in faults.kinds():
            if faults.missing(k):
                print("fault %s skipped: %s" % (k, faults.missing(k)))
        # Registers afresh every 2 minutes: a 30-minute register history
        # (5,000 operations, 70-90 open) was undecided after 10 M steps.
        # Two keys an epoch: 30 in 30 minutes, within the gadgets' MaxKeys=.
        w = fl.Workload(c, rng, rate=8, epoch_s=120)
        done = []
        end = time.monotonic() + minutes * 60
        try:
            while time.monotonic() < end:
                done += fl.run_schedule(c, rng, [rng.choice(kinds)], say=lambda s: print(s, flush=True),
                                        faults=faults)
                time.sleep(rng.uniform(2, 4))  # the quiet between faults: part of the schedule
        finally:
            w.stop()
        c.healthy(timeout=60)
        ops = list(c.ops)
        fc.summary(ops, print)
        bad, _ = fc.verdicts(c, ops, lambda s: print(s, flush=True), done)
        print("\nper fault kind: count, calls answered ok while it lasted, all answering after the heal "
              "(median, max), takeover (median, max, how many moved)")
        for k in kinds:
            fs = [f for f in done if f["kind"] == k]
            if not fs:
                continue
            avail = sum(f["ok"] for f in fs) / max(1, sum(f["ops"] for f in fs))
            rec = sorted(f["recovery"] for f in fs)
            takes = sorted(t for f in fs for t in takeovers(c, ops, f))
            print("  %-13s %3d  %5.1f%%  %5.2f s %5.2f s   %s" % (
                k, len(fs), 100 * avail, rec[len(rec) // 2], rec[-1],
                "%5.2f s %5.2f s %d" % (takes[len(takes) // 2], takes[-1], len(takes)) if takes else "-"))
        print("\nviolations: %d (linearizability, lost writes, two owners, calls that ran when told otherwise, "
              "alarms, the audit copy)" % len(bad))
        return 0
    finally:
        c.close()
        shutil.rmtree(tmp, ignore_errors=True)


def takeovers(c, ops, f):
    """For each gadget whose owner changed during fault f: seconds from the
    fault's start to the first call the new owner answered."""
    out = []
    for g, (n0, _) in f["owners_before"].items():
        n1 = f["owners_after"].get(g)
        if n1 and n1 != n0:
            first = [o["t1"] for o in ops if o["gadget"] == g and o["status"] == "ok" and o["t0"] >= f["t0"]
                     and o.get("served", (None,))[0] == n1]
            if first:
                out.append(min(first) - f["t0"])
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv))
