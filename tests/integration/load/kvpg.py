"""The kv binding on the PostgreSQL store under load: gadgetd's one
connection serves the gadgets with operations queued in turn, so a gadget
that keeps its whole queue full (CallsMax=64 puts in flight) delays
another gadget's put by about one query, not by its 64. A real PostgreSQL
server is started by the test (pgserver.py)."""
import json
import os
import statistics
import time

from harness import Daemon, check, policy, test, wait_for
from pgserver import PgServer

# No RSS bound of gadgetd here (tests/integration/load_test.py --rss).
RSS_BOUND = False

HOSTILE = os.environ.get("HOSTILE", "")


def put_durations(d, gadget, n=150):
    """duration_us of the gadget's last put records (at most n)."""
    out = d.ctl("--json", "audit", gadget, "-n", str(n)).stdout
    recs = [json.loads(x) for x in out.splitlines()]
    return [r["duration_us"] for r in recs if r.get("op") == "put" and r.get("outcome") == "ok"
            and "summarized" not in r]


@test
def load_kv_pg_flood_takes_turns(tmp):
    with PgServer(tmp) as pg:
        conf = os.path.join(tmp, "gadgetd.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\nStore=postgresql\nStoreConnection=%s\nNode=load\n" % pg.conninfo)
        with Daemon(tmp, extra=["--config", conf]) as d:
            policy(d.pol, "good", "[Binding DATA]\nType=kv\n")
            d.ctl("reload")
            wait_for(lambda: d.state("good") == "ready", what="good ready")
            policy(d.pol, "flood", "Arguments=kv-flood DATA put 30000 64 64\n[Binding DATA]\nType=kv\nCallsMax=64\n",
                   exec_path=HOSTILE)
            d.ctl("reload")
            wait_for(lambda: len(put_durations(d, "flood", 20)) >= 10, what="the flood's first puts")
            good = json.dumps({"binding": "DATA", "op": "put", "args": {"key": "h", "value": "healthy"}})
            for _ in range(30):
                r = d.ctl("call", "good", "binding", good)
                check(r.returncode == 0, "good's put: %r" % r.stderr)
                time.sleep(0.02)
            still = "kv-flood:" not in d.ctl("logs", "flood").stdout
            flood_us = put_durations(d, "flood")
            good_us = put_durations(d, "good", 60)  # each put's record and its gadgetctl call's
            check(still, "the flood ended before good's puts did: make it longer")
            check(len(good_us) == 30 and len(flood_us) >= 20, "audit records: %d good, %d flood" %
                  (len(good_us), len(flood_us)))
            g, f = statistics.median(good_us), statistics.median(flood_us)
            print("median put: good %d us, flood %d us (64 queued)" % (g, f))
            check(g * 4 < f, "good's put waits behind the flood's queue: median %d us against the flood's %d us"
                  % (g, f))
