"""Two or three gadgetd "nodes" on this machine sharing one PostgreSQL
store (pgserver.py): their set-up and what the tests ask of them."""
import contextlib
import json
import os
import re
import subprocess
import threading

from gateway_util import Gateway
from harness import EXAMPLES, Daemon, check, free_port, policy, wait_for


def node(tmp, pg, name, conf_extra=""):
    """A gadgetd named name (Node=), its directories below tmp/name
    (conf_extra: more lines of its [Daemon])."""
    base = os.path.join(tmp, name)
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    conf = os.path.join(base, "gadgetd.conf")
    with open(conf, "w") as f:
        f.write("[Daemon]\nStore=postgresql\nStoreConnection=%s\nNode=%s\n%s" % (pg.conninfo, name, conf_extra))
    return Daemon(base, extra=["--config", conf])


def live_leases(pg, name=None, gadget=None):
    """How many gadget leases are live in the store now (node name's, or
    gadget's, if given): owner rows naming their node's incarnation while
    that node's own lease is unexpired (kvpg_sql.c, version 8)."""
    where = "".join(" AND o.%s = '%s'" % kv for kv in (("node", name), ("gadget", gadget)) if kv[1])
    if pg.psql("SELECT to_regclass('gadgetd_owner') IS NULL OR NOT EXISTS (SELECT 1 FROM information_schema.columns"
               " WHERE table_name = 'gadgetd_owner' AND column_name = 'node_inc')") == "t":
        return 0  # not migrated yet
    return int(pg.psql("SELECT count(*) FROM gadgetd_owner o JOIN gadgetd_node n ON n.name = o.node AND"
                       " n.incarnation = o.node_inc AND n.lease_until > now() WHERE o.node_inc <> 0" + where))


def slow_loop_lease(*ds):
    """LeaseTTL=5s on each node (its config's [Daemon]): for the tests whose
    subject is not the lease but a load that holds a node's loop for long
    turns. Under the sanitizers a turn costs up to 40x a release build's
    (one frame of 120,000 values: half a second of a loaded host), and a
    1 s lease (the node stops serving 920 ms after a renewal's sending)
    does not ride that out; the lease's own timing is lease_pg_test's."""
    for d in ds:
        with open(d.extra[1], "a") as f:
            f.write("LeaseTTL=5s\n")


def counter_policy(d, nodes=None, call_timeout="30s", extra=""):
    """The counter example's policy in d's policy directory (Nodes= if
    given, and the [Gadget] keys in extra)."""
    with open(os.path.join(EXAMPLES, "counter.policy")) as f:
        text = f.read()
    text = re.sub(r"^CallTimeout=.*$", "CallTimeout=" + call_timeout, text, flags=re.M)
    if nodes:
        extra = "Nodes=%s\n%s" % (nodes, extra)
    text = text.replace("[Gadget]\n", "[Gadget]\n" + extra, 1)
    path = os.path.join(d.pol, "counter.policy")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)


def start_all(ds):
    """Starts every node at once."""
    ts = [threading.Thread(target=d.start) for d in ds]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def start_owner_first(ds, owner, gadget):
    """Starts node owner, waits until it runs gadget, then starts the
    others at once: which node of a Nodes= list takes a free gadget first
    is a race of their starts (the second waits two rounds, 0.5 s, which a
    slow start on a loaded host can outlast), not what these tests ask."""
    first = by_name(ds, owner)
    first.start()
    wait_for(lambda: first.state(gadget) == "ready", timeout=20, what="%s running %s" % (owner, gadget))
    start_all([d for d in ds if d is not first])


def stop_all(ds):
    for d in ds:
        d.__exit__(None, None, None)


def states(ds, name):
    out = {}
    for d in ds:
        if d.proc and d.proc.poll() is None:
            g = d.list().get(name, {})
            out[os.path.basename(d.tmp)] = (g.get("state"), g.get("cause") or "")
    return out


def owner_of(ds, name, timeout=20):
    """The one node whose gadget name is ready (waits for it); checks the
    others say it is remote, naming that node."""
    found = {}

    def one_ready():
        s = states(ds, name)
        ready = [n for n, (st, _) in s.items() if st == "ready"]
        found["s"] = s
        return len(ready) == 1 and all(st == "remote" and ("runs on node %s" % ready[0]) in cause
                                       for n, (st, cause) in s.items() if n != ready[0])
    wait_for(one_ready, timeout=timeout, what=lambda: "one node running %s: %r" % (name, found.get("s")))
    s = found["s"]
    check(sum(st == "ready" for st, _ in s.values()) == 1, "not one owner: %r" % s)
    return next(n for n, (st, _) in s.items() if st == "ready")


def by_name(ds, n):
    return next(d for d in ds if os.path.basename(d.tmp) == n)


@contextlib.contextmanager
def counter_cluster(ds, nodes, owner, call_timeout="30s"):
    """The counter (Nodes=nodes, CallTimeout=call_timeout) on every node of
    ds, all started; yields ds once owner runs it, and stops them all at
    the end."""
    for d in ds:
        counter_policy(d, nodes=nodes, call_timeout=call_timeout)
    try:
        start_owner_first(ds, owner, "counter")
        check(owner_of(ds, "counter") == owner, "%s runs the counter (Nodes=%s)" % (owner, nodes))
        yield ds
    finally:
        stop_all(ds)


NODE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "node-certs")


def certs(tmp, *names, ca="ca"):
    """Certificates for names from the CA in tmp/ca (made by scripts/node-certs)."""
    d = os.path.join(tmp, ca)
    subprocess.run([NODE_CERTS, d, *names], check=True, stdout=subprocess.DEVNULL)
    return d


def peer_node(tmp, pg, name, certdir, listen=True, cert_name=None, gateway=False):
    """A node with the peer link: PeerListen= on a free loopback port
    (unless listen is false; a string: that ADDRESS:PORT) and name's
    certificate (or cert_name's). gateway: its gateway on (a string: on
    that ADDRESS:PORT)."""
    c = cert_name or name
    conf = ("PeerCertificate=%s\nPeerKey=%s\nPeerCA=%s\n" %
            (os.path.join(certdir, c + ".crt"), os.path.join(certdir, c + ".key"), os.path.join(certdir, "ca.crt")))
    if isinstance(listen, str):
        conf += "PeerListen=%s\n" % listen
    elif listen:
        conf += "PeerListen=127.0.0.1:%d\n" % free_port()
    if not gateway:
        d = node(tmp, pg, name)
        with open(d.extra[1], "a") as f:
            f.write(conf)
        return d
    base = os.path.join(tmp, name)
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    d = Gateway(base, **({"listen": gateway} if isinstance(gateway, str) else {}))
    with open(d.config, "a") as f:
        f.write("[Daemon]\nStore=postgresql\nStoreConnection=%s\nNode=%s\n%s" % (pg.conninfo, name, conf))
    return d


def counter_on_a(tmp, pg, certdir, **counter):
    """Nodes a and b with the link, not started: the counter only a may run
    (Nodes=a; counter_policy's other arguments in counter), and the test
    gadget "good" only b may run (its own calls, while b forwards)."""
    a, b = peer_node(tmp, pg, "a", certdir), peer_node(tmp, pg, "b", certdir)
    for d in (a, b):
        counter_policy(d, nodes="a", **counter)
        policy(d.pol, "good", "Nodes=b\n")
    return a, b


def nodes_seen(d, n):
    """Waits until d's store lists n nodes with peer links."""
    def seen():
        r = d.ctl("--json", "nodes")
        return r.returncode == 0 and sum(1 for x in json.loads(r.stdout)["nodes"] if x.get("peer")) >= n
    wait_for(seen, timeout=15, what="%d nodes with peer links in the store" % n)
