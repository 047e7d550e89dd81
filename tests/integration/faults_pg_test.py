#!/usr/bin/env python3
"""The cluster under faults, Jepsen-style (faultload.py, faultnet.py,
linearize.py): PostgreSQL, two nodes and their callers each in a network
namespace of its own; while clients call two gadgets through both nodes
(counter increments, register reads and writes, alarms), a random schedule cuts
links (full and one-way, between any two sides; a node from the store
only, from the other node only, from its callers only), pauses a node past
its lease (SIGSTOP, SIGCONT), kills and restarts one, restarts the store,
fails the store over to its synchronous standby, loses or delays packets
on a link (between any two sides, one way or both); each kind once per
run (GADGETD_FAULT_ROUNDS=N: N times each; a CI run makes each kind once,
in the one pass of scripts/test: 164 s under ASan on a slow host). The
seed is printed; GADGETD_FAULT_SEED=N
replays it (GADGETD_FAULT_KINDS="kind ..." runs only those kinds).

Checked, in CI: each key's history is linearizable (the checker decides
each, open-ended operations for the answers a caller never got); every
acknowledged write is in the store at the end (the counts, the
registers, the same through both nodes); no two processes of a gadget
had effects at interleaving times (two owners at once: each kv write's,
alarm set's or firing's window, faultchecks.double_runs; the methods'
spans overlapping are said, not failed); no call whose caller was told it did not run
ran; no call ran after its caller had been answered with an error; no
call answered with an error that does not say "may have run" had its
write accepted; a paused owner's leases moved; every acknowledged alarm
fired, none before it was due, none on two nodes at once (its firing is
an effect of its process); the store's audit copy has a record of every
acknowledged call, without exceptions (a node killed with records not
copied sends them from its audit.log when it starts again:
docs/cluster.md). Usage: faults_pg_test.py TEST."""
import os
import random
import time

import faultload as fl
from faultchecks import summary, verdicts
from faultnet import check_loss_delay
from harness import check, main, test


@test
def pg_faults_schedule(tmp):
    """The CI schedule: every fault kind once (GADGETD_FAULT_ROUNDS times),
    in a random order (about 40 s in all)."""
    seed = int(os.environ.get("GADGETD_FAULT_SEED") or random.SystemRandom().randrange(1 << 31))
    print("fault seed %d (replay with GADGETD_FAULT_SEED=%d)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    t_start = time.monotonic()
    c = fl.Cluster(tmp, standby=True)
    try:
        c.healthy(timeout=30)
        # The loss and delay faults seen from outside first, on a link
        # nothing uses (the clients never talk to the store).
        lost, times = check_loss_delay(c.fab, "clients", "store")
        print("loss 30%%: %.0f%% of datagrams lost; delay 150 ms: handshakes %s s"
              % (100 * lost, " ".join("%.3f" % t for t in times)), flush=True)
        faults = fl.Faults(c)
        only = os.environ.get("GADGETD_FAULT_KINDS", "").split()
        rounds = int(os.environ.get("GADGETD_FAULT_ROUNDS") or 1)
        schedule = [k for k in (only or faults.kinds()) for _ in range(rounds)]
        rng.shuffle(schedule)
        w = fl.Workload(c, rng)
        try:
            done = fl.run_schedule(c, rng, schedule, say=lambda s: print(s, flush=True), faults=faults)
        finally:
            w.stop()
        c.healthy(timeout=60)
        ops = list(c.ops)
        summary(ops, print)
        bad, _ = verdicts(c, ops, lambda s: print(s, flush=True), done)

        made = [d for d in done if "skipped" not in d]
        print("%d faults in %.0f s (%d skipped), recovery after the heal: longest %.2f s"
              % (len(made), time.monotonic() - t_start, len(done) - len(made),
                 max(d["recovery"] for d in made)))
        check(not bad, "seed %d: %d checks failed:\n  %s" % (seed, len(bad), "\n  ".join(bad[:20])))
    finally:
        c.close()


if __name__ == "__main__":
    raise SystemExit(main())
