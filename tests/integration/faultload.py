"""The cluster under faults (faults_pg_test.py in CI, bench/faultsoak.py
for the long soak): PostgreSQL, each node and the clients in network
namespaces of their own (faultnet.py); a workload of clients calling,
through every node's gateway, per gadget, increments of a counter,
reads and writes of kv registers and alarms due soon (testgadget's fop,
which records the node and process instance of each run, and of each
alarm's firing, in the node's log); and the
faults. The checks of what it recorded are faultchecks.py's.

What an answer means to the history: an answer is an operation done
("ok"); a refusal that says it did not run — the connection never made,
one of gadgetd's own refusals (NOT_RUN's codes with NOT_RUN_MSG's text),
the relay's "gateway is down" — leaves it out ("fail"); anything else (no
answer in time, the connection lost after the request was sent, a
timeout, "may have run", a method's own error) is open-ended ("info"): it
may have taken effect, at any time after its call, or never."""
import http.client
import json
import random
import re
import selectors
import signal
import socket
import threading
import time

from faultnet import Fabric
from harness import policy, wait_for
from linearize import COUNTER, Register
from pgnodes import certs, peer_node, start_all, stop_all
from pgserver import PgServer, PgStandby

NODES = ("a", "b")
GADGETS = {"fa": "a b", "fb": "b a"}  # each gadget's Nodes=: one prefers a, the other b
KEYS = {"n": COUNTER, "r0": Register(0), "r1": Register(0)}  # a key never written reads 0


def key_model(key):
    """A key's model (None: not a checked key): KEYS's, or its register's
    for an epoch's key ("r0.3": Workload(epoch_s) starts the registers
    afresh every epoch_s, so that a long run's register histories stay
    short enough for the checker to decide; keys are independent
    histories, so nothing is lost by the cut)."""
    return KEYS.get(key) or KEYS.get(key.split(".", 1)[0])
PEER_PORT, GATEWAY_PORT = 7441, 8080
CALL_TIMEOUT = 3  # s, the gadgets' CallTimeout=
HTTP_TIMEOUT = CALL_TIMEOUT + 3  # a forwarded call's deadline is CallTimeout= + 1 s on the calling node
CONNECT_TIMEOUT = 1.0
# Gateway error codes that say the call was not taken (docs/gateway.md).
NOT_RUN = {"unavailable", "busy", "not_found", "no_method", "invalid", "unauthorized", "forbidden", "bad_json",
           "limit"}
# The server ends a session whose peer stopped acknowledging within 1 s
# (and probes an idle one every second): a node cut off loses its leases
# in about a second, and another takes them (docs/cluster.md).
QUICK_TAKEOVER = ("tcp_user_timeout = 1000\ntcp_keepalives_idle = 1\ntcp_keepalives_interval = 1\n"
                  "tcp_keepalives_count = 2\n")
# ... and whose message is one of gadgetd's own (or the relay's), not the
# method's: its kv error text comes through with the same codes.
NOT_RUN_MSG = r"(gadget \S+ (runs on|does not run|is not|waits)|relay:|no such|node \S+ has no peer|busy|too many)"
# Restart=on-failure as the counter example has: a node resumed after a
# pause past CallTimeout= finds its calls timed out and kills the gadget
# as hung ("failed: timeout"); with Restart=no it would stay failed on a
# node that keeps its lease, unavailable everywhere (this harness found
# that with Restart=no: seed 218160574, its first pause).
POLICY = """Nodes=%s
Restart=on-failure
CallTimeout=%ds
Environment=FAULT_NODE=%s
LogLinesPerSecond=100000
LogBytesPerSecond=32M
CallsQueuedMax=64

[Binding KV]
Type=kv
MaxKeys=100

[Binding WAKE]
Type=alarm
Method=fwake
"""
FREC = re.compile(r"\[(\w+)\] FREC (\S+) (\S+) (\S+) (\w+) (\w+) (-?\d+) (\d+) (\d+) (-?\d+) (\d+) (\d+)$")


def frec_records(logtext):
    """The fop records (FREC lines, testgadget.c) of a node's log: dicts of
    gadget, node, inst, id, kind, key, v, t0, t1 (s, monotonic), err, and
    effect: (e0, e1), the window its write took effect in, or None (a
    read)."""
    out = []
    for line in logtext.splitlines():
        m = FREC.search(line)
        if m:
            g, node, inst, oid, kind, key, v, t0, t1, err, e0, e1 = m.groups()
            out.append({"gadget": g, "node": node, "inst": inst, "id": oid, "kind": kind, "key": key,
                        "v": int(v), "t0": int(t0) / 1e9, "t1": int(t1) / 1e9, "err": int(err),
                        "effect": (int(e0) / 1e9, int(e1) / 1e9) if int(e1) else None})
    return out


class Relay:
    """The proxy in front of a node's gateway (which listens on loopback
    only: docs/gateway.md): in the node's side, from NODE_IP:8080 to
    127.0.0.1:8080, byte for byte, so that the callers reach the node over
    the network the faults cut. Nothing reaches gadgetd if its gateway
    does not take the connection: the relay then answers 503
    "unavailable" itself (the call did not run)."""

    _BODY = b'{"error":{"code":"unavailable","message":"relay: gateway is down"}}'
    DOWN = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY))

    def __init__(self, fab, side, ip):
        self.fab, self.side, self.ip = fab, side, ip
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def run(self):
        self.fab.enter(self.side)
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((self.ip, GATEWAY_PORT))
        ls.listen(128)
        sel = selectors.DefaultSelector()
        sel.register(ls, selectors.EVENT_READ, None)
        self.ready.set()
        while not self.stopping.is_set():
            for key, _ in sel.select(0.2):
                if key.data is None:
                    c, _ = ls.accept()
                    try:
                        u = socket.create_connection(("127.0.0.1", GATEWAY_PORT), timeout=1)
                    except OSError:
                        try:
                            c.settimeout(1)
                            c.sendall(self.DOWN)
                        except OSError:
                            pass
                        c.close()
                        continue
                    c.settimeout(HTTP_TIMEOUT)
                    u.settimeout(HTTP_TIMEOUT)
                    sel.register(c, selectors.EVENT_READ, u)
                    sel.register(u, selectors.EVENT_READ, c)
                    continue
                s, peer = key.fileobj, key.data
                try:
                    data = s.recv(65536)
                    if data:
                        peer.sendall(data)
                        continue
                except OSError:
                    pass
                for x in (s, peer):
                    try:
                        sel.unregister(x)
                    except (KeyError, ValueError):
                        pass
                    x.close()
        for key in list(sel.get_map().values()):
            key.fileobj.close()

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=5)


class Cluster:
    """The store, the nodes and the clients' side, started; close() ends
    them all (the namespaces go with the test process)."""

    def __init__(self, tmp, nodes=NODES, standby=False):
        """standby: the store has a synchronous hot standby in its side
        (another port), which the store-failover fault promotes, and
        StoreConnection= names both."""
        self.fab = Fabric()
        self.nodes = list(nodes)
        self.tmp = tmp
        self.standby, self.retired = None, []
        try:
            self.fab.side("store")
            for n in nodes:
                self.fab.side(n)
            self.fab.side("clients")
            self.pg = PgServer(tmp, wrap=self.fab.wrap("store"), listen=self.fab.sides["store"].ip,
                               settings=QUICK_TAKEOVER + (STANDBY_SYNC if standby else ""))
            self.pg.start()
            if standby:
                self.standby = new_standby(self, STORE_PORTS[1], 1)
                self.pg.conninfo = ("host={0},{0} port={1},{2} dbname=postgres user=gadgetd connect_timeout=2"
                                    .format(self.fab.sides["store"].ip, *STORE_PORTS))
            cd = certs(tmp, *nodes)
            self.ds, self.relays = {}, []
            for n in nodes:
                ip = self.fab.sides[n].ip
                d = peer_node(tmp, self.pg, n, cd, listen="%s:%d" % (ip, PEER_PORT),
                              gateway="127.0.0.1:%d" % GATEWAY_PORT)
                d.wrap = self.fab.wrap(n)
                self.relays.append(Relay(self.fab, n, ip))
                for g, pref in GADGETS.items():
                    policy(d.pol, g, POLICY % (pref, CALL_TIMEOUT, n))
                self.ds[n] = d
            start_all(list(self.ds.values()))
        except BaseException:
            self.close()
            raise
        self.ids = 0
        self.lock = threading.Lock()
        self.ops = []  # every operation, as a dict (call's)

    def next_id(self, prefix):
        with self.lock:
            self.ids += 1
            return "%s%d" % (prefix, self.ids)

    @staticmethod
    def trace(oid):
        """The trace id an operation's call carries (traceparent): the
        audit's records of the call name it."""
        return "fa17%028x" % int(oid[1:])

    def close(self):
        for r in getattr(self, "relays", []):
            r.stop()
        ds = getattr(self, "ds", {})
        for d in ds.values():  # a paused node must hear its SIGTERM
            if d.proc and d.proc.poll() is None:
                d.proc.send_signal(signal.SIGCONT)
        stop_all(list(ds.values()))
        for pg in [getattr(self, "pg", None), getattr(self, "standby", None)] + getattr(self, "retired", []):
            if pg:
                pg.stop()
        self.fab.close()

    # -- calls ---------------------------------------------------------

    def call(self, node, gadget, args, client):
        """One fop call through node's gateway, from the calling thread
        (which must be in the clients' side); its operation record."""
        d, ip = self.ds[node], self.fab.sides[node].ip
        op = {"id": self.next_id("o"), "client": client, "via": node, "gadget": gadget, "key": args["key"],
              "kind": args["op"], "arg": args.get("value"), "status": None, "out": None, "err": ""}
        body = json.dumps(dict(args, id=op["id"])).encode()
        headers = {"Host": "127.0.0.1:%d" % GATEWAY_PORT, "Authorization": "Bearer " + d.token,
                   "Content-Type": "application/json",
                   "traceparent": "00-%s-%016x-01" % (self.trace(op["id"]), 1)}
        op["t0"] = time.monotonic()
        sent = False
        try:
            c = http.client.HTTPConnection(ip, GATEWAY_PORT, timeout=CONNECT_TIMEOUT)
            try:
                c.connect()
                c.sock.settimeout(HTTP_TIMEOUT)
                sent = True
                c.request("POST", "/api/gadgets/%s/call/fop" % gadget, body=body, headers=headers)
                r = c.getresponse()
                status, text = r.status, r.read()
            finally:
                c.close()
            op["t1"] = time.monotonic()
            answer = json.loads(text) if text else {}
            if status == 200:
                result = answer.get("result", answer)
                op.update(status="ok", out=result.get("v"), served=(result.get("node"), result.get("inst")))
            else:
                err = answer.get("error", {}) if isinstance(answer, dict) else {}
                op["code"] = err.get("code", str(status))
                op["err"] = "%s %s: %s" % (status, op["code"], err.get("message", ""))
                # A method's own error passes through with its code (a kv
                # write that failed may still have committed): only
                # gadgetd's and the relay's refusals say "not run".
                msg = err.get("message", "")
                op["status"] = "fail" if op["code"] in NOT_RUN and re.match(NOT_RUN_MSG, msg) else "info"
        except (OSError, http.client.HTTPException, ValueError) as e:
            op["t1"] = time.monotonic()
            op["err"] = "%s: %s" % (type(e).__name__, e)
            op["code"] = "transport"
            # Not connected: nothing was sent. Sent and then no answer:
            # it may have run.
            op["status"] = "info" if sent else "fail"
        with self.lock:
            self.ops.append(op)
        return op

    def ctl_call(self, node, gadget, args, client="ctl"):
        """The same call through gadgetctl on node's control socket (from
        anywhere: a Unix socket is no network's)."""
        d = self.ds[node]
        op = {"id": self.next_id("c"), "client": client, "via": node, "gadget": gadget, "key": args["key"],
              "kind": args["op"], "arg": args.get("value"), "status": None, "out": None, "err": ""}
        op["t0"] = time.monotonic()
        r = d.ctl("call", "--traceparent", "00-%s-%016x-01" % (self.trace(op["id"]), 1), gadget, "fop",
                  json.dumps(dict(args, id=op["id"])), timeout=HTTP_TIMEOUT + 5)
        op["t1"] = time.monotonic()
        if r.returncode == 0:
            res = json.loads(r.stdout)
            op.update(status="ok", out=res.get("v"), served=(res.get("node"), res.get("inst")))
        else:
            op["err"] = r.stderr.strip()
            # gadgetctl's refusals that say nothing ran: the gadget runs
            # nowhere yet, or elsewhere without a way there.
            op["status"] = "fail" if re.search(r"runs on node|does not run|no node|waits for its lease|busy|"
                                               r"no peer address",
                                               op["err"]) and "may have run" not in op["err"] else "info"
        with self.lock:
            self.ops.append(op)
        return op

    def healthy(self, timeout=30):
        """Waits until every gadget answers a read of each key through every
        node (gadgetctl); how long that took."""
        t0 = time.monotonic()
        for n in self.nodes:
            for g in GADGETS:
                for k in KEYS:
                    wait_for(lambda: self.ctl_call(n, g, {"op": "read", "key": k})["status"] == "ok",
                             timeout=timeout, what="%s answering through node %s" % (g, n))
        return time.monotonic() - t0

    def diagnose(self):
        """What each node says of the gadgets, and the last errors of the
        health calls: text for a failure."""
        out = []
        for n, d in self.ds.items():
            if d.proc and d.proc.poll() is None:
                r = d.ctl("list", timeout=10)
                out.append("node %s: %s" % (n, (r.stdout + r.stderr).strip().replace("\n", " / ")))
            else:
                out.append("node %s: not running (%r)" % (n, d.proc and d.proc.returncode))
        errs = [o["err"] for o in self.ops[-400:] if o["client"] == "ctl" and o["status"] != "ok"]
        out.append("last health-call errors: %s" % " | ".join(sorted(set(errs))[-4:]))
        out.append("owner rows: %s" % self.pg.psql("SELECT gadget || '=' || node || '@' || epoch FROM gadgetd_owner"
                                                  ).replace("\n", " "))
        return "; ".join(out)

    def owner_rows(self):
        """{gadget: (node, epoch)} of the store's owner rows."""
        out = {}
        for line in self.pg.psql("SELECT gadget, node, epoch FROM gadgetd_owner").splitlines():
            g, n, e = line.split("|")
            out[g] = (n, int(e))
        return out

    def owner(self, gadget):
        """The node the store names as gadget's owner."""
        row = self.pg.psql("SELECT node FROM gadgetd_owner WHERE gadget = '%s'" % gadget)
        return row or None

    # -- the records ---------------------------------------------------

    def records(self):
        """Every fop run the nodes' logs recorded (frec_records)."""
        return [r for d in self.ds.values() for r in frec_records(d.logtext())]


class Workload:
    """Clients in the clients' side, one thread each, each calling through
    one node (len(nodes) × per_node clients), one operation at a time,
    paced at rate operations a second each, until stop(). epoch_s: the
    registers' keys change every epoch_s (key_model)."""

    def __init__(self, cluster, rng, per_node=2, rate=25, epoch_s=None):
        self.c, self.rng, self.rate, self.epoch_s = cluster, rng, rate, epoch_s
        self.t0 = time.monotonic()
        self.stopping = threading.Event()
        self.threads = []
        self.values = iter(range(1, 1 << 60))
        self.vlock = threading.Lock()
        for n in cluster.nodes:
            for i in range(per_node):
                seed = rng.randrange(1 << 30)
                self.threads.append(threading.Thread(target=self.run, args=(n, "%s%d" % (n, i), seed),
                                                     daemon=True))
        for t in self.threads:
            t.start()

    def run(self, node, client, seed):
        self.c.fab.enter("clients")
        rng = random.Random(seed)
        while not self.stopping.is_set():
            g = rng.choice(sorted(GADGETS))
            x = rng.random()
            if x < 0.4:
                args = {"op": "incr", "key": "n"}
            elif x < 0.5:
                args = {"op": "read", "key": "n"}
            elif x < 0.53:  # an alarm due soon: it fires at least once, on one node at a time
                args = {"op": "alarm", "key": "w", "value": rng.randrange(100, 1500)}
            elif x < 0.75:
                with self.vlock:
                    v = next(self.values)
                args = {"op": "write", "key": self.register(rng), "value": v}
            else:
                args = {"op": "read", "key": self.register(rng)}
            self.c.call(node, g, args, client)
            self.stopping.wait(rng.random() * 2.0 / self.rate)  # pacing: about rate a second

    def register(self, rng):
        k = rng.choice(["r0", "r1"])
        return k if not self.epoch_s else "%s.%d" % (k, (time.monotonic() - self.t0) // self.epoch_s)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=HTTP_TIMEOUT + 10)


# -- the faults ----------------------------------------------------------

# Loss and delay (faultnet.py: nftables and faultdelay): each packet's
# chance of loss; the delay each way, plus up to a quarter more (jitter).
# 50 ms a slow link; 600 ms (+150) on a node's link to the store can keep
# its lease session unacknowledged past the server's 1 s TCP user timeout
# (QUICK_TAKEOVER): the lease then moves, as it does under heavy loss.
LOSS_PCT = (10, 30, 50)
DELAY_MS = (50, 200, 600)
PAUSE_S = 3.5  # a SIGSTOP past the lease (a node that does not answer its lease ping for 2 s loses it)
# The store's standby (Cluster(standby=True)): the primary waits for it at
# every commit; the two servers' ports, in the store's side.
STANDBY_SYNC = "synchronous_standby_names = 'standby'\n"
STORE_PORTS = (5432, 5433)


def new_standby(cluster, port, n):
    """A synchronous standby of cluster.pg (the n-th made), streaming."""
    sb = PgStandby(cluster.tmp, cluster.pg, name="standby%d" % n, wrap=cluster.fab.wrap("store"),
                   listen=cluster.fab.sides["store"].ip, port=port).start()
    wait_for(lambda: sb.streaming() in ("sync", "async"), timeout=30, what="the store's standby streaming")
    return sb


def store_failover(cluster):
    """The store-failover fault: the primary goes silent (SIGSTOP: its
    sessions open and unanswered, as a host that lost power) and the
    standby is promoted; the store is the promoted server from now on."""
    old = cluster.pg
    old.signal_all(signal.SIGSTOP)
    cluster.standby.promote()
    cluster.pg, cluster.standby = cluster.standby, None
    cluster.retired.append(old)
    return "primary (port %d) stopped, the standby (port %d) promoted" % (old.port, cluster.pg.port)


def store_failover_heal(cluster):
    """After a store-failover: the old primary killed, and a new
    synchronous standby of the promoted server on its port (made while
    calls go on: a base backup, then the primary waits for it again)."""
    old = cluster.retired[-1]
    old.signal_all(signal.SIGKILL)
    cluster.standby = new_standby(cluster, old.port, len(cluster.retired) + 1)
    cluster.pg.psql("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
    cluster.pg.psql("SELECT pg_reload_conf()")
    wait_for(lambda: cluster.standby.streaming() == "sync", timeout=30, what="the new standby synchronous")


class Faults:
    """Each fault kind: inject(node) makes it (on a node chosen by the
    schedule, the owner of a gadget most of the time) and says what it did;
    heal() takes it away. Kinds the host cannot make say why in missing()."""

    def __init__(self, cluster, pause_s=PAUSE_S):
        self.c, self.fab = cluster, cluster.fab
        self.paused = None
        self.pause_s = pause_s

    def kinds(self):
        return ["partition", "oneway", "store-cut", "store-oneway", "lease-flow", "nodes-cut", "callers-cut",
                "pause", "kill", "store-restart", "loss", "delay", "store-failover"]

    def missing(self, kind):
        if kind == "store-failover" and not self.c.standby:
            return "the store has no standby (Cluster(standby=True))"
        return None

    def inject(self, kind, node, rng):
        c, fab = self.c, self.fab
        others = [n for n in c.nodes if n != node]
        if kind == "partition":  # any two sides, both ways
            x, y = rng.sample(sorted(fab.sides), 2)
            fab.partition(x, y)
            return "%s | %s" % (x, y)
        if kind == "oneway":  # any two sides, one way
            x, y = rng.sample(sorted(fab.sides), 2)
            fab.drop(x, y)
            return "%s -/-> %s" % (x, y)
        if kind == "store-cut":
            fab.partition(node, "store")
            return "%s | store" % node
        if kind == "store-oneway":  # what the store sends the node is lost
            fab.drop("store", node)
            return "store -/-> %s" % node
        if kind == "lease-flow":
            # Only the node's lease session loses what the store sends
            # (one TCP flow: a middlebox's dropped state, say): its kv
            # session still works, so an owner that does not notice the
            # loss in time can still write — fencing's case.
            port = c.pg.psql("SELECT client_port FROM pg_stat_activity WHERE application_name = 'gadgetd %s lease'"
                             % node)
            if not port.strip().isdigit():
                return "no lease session of %s to cut (%r)" % (node, port)
            fab.nft(node, "add rule inet fault input ip saddr %s tcp sport %d tcp dport %s drop\n"
                    % (fab.sides["store"].ip, c.pg.port, port.strip()))
            return "store -/-> %s's lease session (port %s)" % (node, port.strip())
        if kind == "nodes-cut":
            fab.isolate(node, others)
            return "%s | %s" % (node, " ".join(others))
        if kind == "callers-cut":
            fab.partition(node, "clients")
            return "%s | clients" % node
        if kind == "pause":
            d = c.ds[node]
            d.proc.send_signal(signal.SIGSTOP)
            self.paused = d
            return "SIGSTOP %s" % node
        if kind == "kill":
            d = c.ds[node]
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait()
            return "SIGKILL %s" % node
        if kind == "store-restart":
            c.pg.restart()
            return "store restarted"
        if kind in ("loss", "delay"):  # any two sides, both ways or one
            x, y = rng.sample(sorted(fab.sides), 2)
            ways = [(x, y), (y, x)] if rng.random() < 0.5 else [(x, y)]
            if kind == "loss":
                pct = rng.choice(LOSS_PCT)
                for s, d in ways:
                    fab.loss(s, d, pct)
                return "%s %s %s lose %d%%" % (x, "<->" if len(ways) == 2 else "->", y, pct)
            ms = rng.choice(DELAY_MS)
            for s, d in ways:
                fab.delay(s, d, ms, ms // 4)
            return "%s %s %s delayed %d+%d ms" % (x, "<->" if len(ways) == 2 else "->", y, ms, ms // 4)
        if kind == "store-failover":
            return store_failover(c)
        raise ValueError(kind)

    def heal(self, kind, node):
        self.fab.heal()
        if kind == "pause" and self.paused:
            self.paused.proc.send_signal(signal.SIGCONT)
            self.paused = None
        if kind == "kill":
            self.c.ds[node].start()
        if kind == "store-failover":
            store_failover_heal(self.c)


def run_schedule(cluster, rng, schedule, say=print, faults=None):
    """Runs schedule ([kind]) against cluster while a workload runs: each
    fault on the owner of a gadget chosen at random (or a random node),
    held for a random 1-2.5 s (a pause: faults.pause_s), then healed, then the
    wait until every gadget answers through every node again (its
    takeover/recovery time). Returns the faults' records."""
    faults = faults or Faults(cluster)
    done = []
    for kind in schedule:
        why = faults.missing(kind)
        if why:
            say("fault %-13s SKIPPED: %s" % (kind, why))
            done.append({"kind": kind, "skipped": why})
            continue
        g = rng.choice(sorted(GADGETS))
        node = cluster.owner(g) or rng.choice(cluster.nodes)
        before = cluster.owner_rows()
        hold = faults.pause_s if kind == "pause" else rng.uniform(1.0, 2.5)
        t0 = time.monotonic()
        what = faults.inject(kind, node, rng)
        say("fault %-13s %s at %.3f ..." % (kind, what, t0))
        # The fault's length is the schedule itself, not a wait for a
        # condition: what the system does meanwhile is what is measured.
        time.sleep(hold)
        t1 = time.monotonic()
        faults.heal(kind, node)
        try:
            back = cluster.healthy(timeout=60)
        except Exception:
            say("NOT BACK 60 s after the heal of %s (%s): %s" % (kind, what, cluster.diagnose()))
            raise
        t2 = time.monotonic()
        ops = [o for o in cluster.ops if t0 <= o["t0"] < t2 and o["client"] not in ("ctl", "final")]
        ok = sum(1 for o in ops if o["status"] == "ok")
        rec = {"kind": kind, "what": what, "gadget_owner": (g, node), "t0": t0, "t1": t1, "t2": t2,
               "recovery": back, "ops": len(ops), "ok": ok, "owners_before": before,
               "owners_after": {x: cluster.owner(x) for x in GADGETS}}
        if kind == "pause":
            # Past its lease, a paused owner's gadgets should have moved
            # (a new epoch on another node) by the time it resumes.
            rows = cluster.owner_rows()
            rec["kept"] = [x for x, (n, e) in before.items() if n == node and rows.get(x) == (n, e)]
        done.append(rec)
        say("fault %-13s %-24s %.3f-%.3f (%.1f s), all answering %.2f s after the heal; %d/%d calls answered "
            "ok; owners now %s" % (kind, what, t0, t1, t1 - t0, back, ok, len(ops),
                               " ".join("%s=%s" % kv for kv in sorted(rec["owners_after"].items()))))
    return done
