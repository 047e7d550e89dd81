"""bench/hostile_nodes.py: the hostile-load rows of another node (section 6).

Nodes a, b and c share a PostgreSQL store (as section 8), linked by mutual
TLS on loopback with scripts/node-certs' certificates. The healthy gadget
runs on a and is called through b, one call at a time (`callflood
--steady` on b's socket: each call crosses the link), while node c's key
(leaked, or c hostile), a certificate the CA signed for a name that is no
node, or a local user with no rights attacks a's PeerListen= port
(bench/peerattack.py). A row is the healthy calls' p50 and p99 during the
attack, and the p99 as a ratio to the idle p99 measured just before it.
Nothing here passes or fails.
"""
import json
import os
import subprocess
import sys
import time

from hostile import NOBODY, process, steady

HERE = os.path.dirname(os.path.abspath(__file__))
PARTIES = ("another node", "local user (node link)")
ROOT = os.path.join(HERE, "..")


def attacks(ctx, addr, certs):
    # Why nice 19: the attacker stands for another host; here it shares
    # this one's two cores with both nodes and the healthy caller, and
    # one that reconnects in a loop would otherwise measure its own CPU.
    script = ["nice", "-n", "19", "python3", os.path.join(HERE, "peerattack.py")]
    nobody = ["setpriv", "--reuid=%d" % NOBODY[0], "--regid=%d" % NOBODY[1], "--clear-groups"]
    return [
        process("node c: requests of 120,000 values resent on 4 sessions (each within the frame bound)",
                script + ["wide", addr, certs, "c", "a", "4", "120000"], ctx, "another node"),
        process("node c: one session after another, each ended by a frame of 20,000 nested lists",
                script + ["deep", addr, certs, "c", "a"], ctx, "another node"),
        process("a certificate of the CA naming no node: one session after another",
                script + ["stranger", addr, certs, "x", "a"], ctx, "another node"),
        process("64 TCP connections to PeerListen= that never start TLS",
                nobody + script + ["preauth", addr, "64"], ctx, "local user (node link)"),
    ]


def run(ctx):
    """Returns [(attack name, party, idle result, attack result)]."""
    sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "integration")]
    from pgserver import PgServer
    seconds = 1 if ctx.quick else 5
    certs = os.path.join(ctx.work, "certs-hostile")
    subprocess.run([os.path.join(ROOT, "scripts", "node-certs"), certs, "a", "b", "c", "x"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pg = PgServer(ctx.work, "pg-hostile").start()
    rows, node = [], {}
    try:
        for i, n in enumerate("abc"):
            conf = os.path.join(ctx.work, "hostile-%s.conf" % n)
            with open(conf, "w") as f:
                f.write("[Daemon]\nStore=postgresql\nStoreConnection=%s\nNode=%s\n%s"
                        "PeerCertificate=%s/%s.crt\nPeerKey=%s/%s.key\nPeerCA=%s/ca.crt\n"
                        % (pg.conninfo, n, "PeerListen=127.0.0.1:%d\n" % (17450 + i) if n != "c" else "",
                           certs, n, certs, n, certs))
            node[n] = ctx.Daemon("hostile-" + n, ["--config", conf], state="state-hostile-" + n).__enter__()
        healthy = ctx.policy("healthy", ctx.exe("bench/benchgadget"), "Nodes=a\nCallTimeout=30s\n")
        for n in "ab":
            node[n].ctl("load", healthy)
        node["a"].wait_state("healthy", ("ready",))
        for _ in range(1000):  # b knows a's address, and a knows c as a node of the store
            peers = {x["name"]: x.get("peer") for x in json.loads(node["b"].ctl("--json", "nodes"))["nodes"]}
            if peers.get("a") and "c" in peers and "runs on node a" in node["b"].ctl("status", "healthy"):
                break
            time.sleep(0.02)
        for a in attacks(ctx, "127.0.0.1:17450", certs):
            if os.environ.get("HOSTILE_ROWS") and os.environ["HOSTILE_ROWS"] not in a.name:
                continue
            idle = steady(ctx, node["b"], seconds)
            a.start()
            try:
                under = steady(ctx, node["b"], seconds)
            finally:
                a.stop()
            rows.append((a.name, a.party, idle, under))
            time.sleep(0.5)
        return rows
    finally:
        for d in node.values():
            d.__exit__()
        pg.stop()
