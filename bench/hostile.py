"""bench/hostile.py: the hostile-load rows of bench/run (section 6).

One gadgetd serves a healthy gadget, called one call at a time by
`callflood --steady` (the same healthy caller as the hostile-load tests).
Each attack runs for a few seconds while it is called; the
row is the healthy gadget's p50 and p99 during the attack, and the p99
as a ratio to the idle p99 measured just before it in the same run
(idle, attack, idle, attack, ...). Nothing here passes or fails.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import servers  # noqa: E402  the misbehaving HTTP servers of the http hostile-load tests

GROUP = "nogroup"  # the control group of the bench's gadgetd; nobody is a member
NOBODY = (65534, 65534)


class Ctx:
    """What bench/run hands over: exe(rel), policy(name, exec, body),
    the Daemon class, the work directory and QUICK."""

    def __init__(self, exe, policy, daemon, work, quick, commands):
        self.exe, self.policy, self.Daemon, self.work, self.quick = exe, policy, daemon, work, quick
        self.commands = commands


def finish(p):
    """Stops a callflood caller (SIGTERM); returns its "key N" lines."""
    p.send_signal(15)
    out, _ = p.communicate(timeout=120)
    r = {}
    for line in out.splitlines():
        k, _, v = line.rpartition(" ")
        r[k] = int(v)
    return r


def steady(ctx, d, seconds):
    """Runs the healthy caller for seconds; returns its counts and latencies."""
    cmd = [ctx.exe("tests/integration/callflood"), "--steady", d.sock, "healthy", "nop"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    time.sleep(seconds)
    return finish(p)


def http_flood(ctx, name, srv, n):
    """A gadget that pipelines n requests of its http binding to srv."""
    port = srv.port
    return ctx.policy(name, ctx.exe("tests/integration/hostile"),
                      "Arguments=binding-flood WEB request %d http://127.0.0.1:%d/x\n\n"
                      "[Binding WEB]\nType=http\nAllow=http://127.0.0.1:%d/\nTimeout=2s\n" % (n, port, port))


class Attack:
    """One row: start() begins the attack, stop() ends it and cleans up."""

    def __init__(self, name, start, stop=None, party="gadget"):
        self.name, self.start, self.stop = name, start, stop or (lambda: None)
        self.party = party


def process(name, cmd, ctx, party="gadget"):
    """An attack that is one command, killed at the end of the row."""
    procs = []
    ctx.commands.append(" ".join(cmd))

    def start():
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop():
        for p in procs:
            p.kill()
            p.wait()
        procs.clear()
    return Attack(name, start, stop, party)


def gadget(name, d, pol, gname, caller=None):
    """An attack by a gadget: loaded at the start (then the command caller
    started, if given), stopped at the end (caller too)."""
    procs = []

    def start():
        d.ctl("load", "--no-block", pol)  # `yes` never says hello: it stays starting (until StartTimeout=)
        d.wait_state(gname, ("starting", "ready"))
        if caller:
            procs.append(subprocess.Popen(caller, stdout=subprocess.DEVNULL))

    def stop():
        for p in procs:
            p.kill()
            p.wait()
        procs.clear()
        d.ctl("stop", gname)
    return Attack(name, start, stop)


def attacks(ctx, d, gw_port):
    tg = ctx.exe("tests/integration/testgadget")
    flood = ctx.exe("tests/integration/callflood")
    n = 30 if ctx.quick else 1
    out = []
    yes = ctx.policy("yes", "/usr/bin/yes", "SystemLibraries=yes\nCPUQuota=50%\n")
    out.append(gadget("`yes` on stdout (CPUQuota=50%)", d, yes, "yes"))
    slow = ctx.policy("slow", tg, "CallTimeout=2s\n")
    out.append(gadget("a caller queues 1,024 calls of 10 ms to another gadget", d, slow, "slow",
                      caller=[flood, d.sock, "slow", "sleep", "1024", '{"ms": 10}']))
    ctx.commands.append("callflood SOCK slow sleep 1024 '{\"ms\": 10}'")
    hostile = ctx.exe("tests/integration/hostile")
    nl = ctx.policy("newlines", hostile, "Arguments=log-newlines\nCPUQuota=50%\n")
    out.append(gadget("log messages of 4,096 newlines each (CPUQuota=50%)", d, nl, "newlines"))
    bf = ctx.policy("bigframes", hostile, "Arguments=big-frames %d 131000\n" % (150 // n))
    out.append(gadget("150 messages of 131,000 values (the most FrameValuesMax= lets in)", d, bf, "bigframes"))
    sf = ctx.policy("smallframes", hostile, "Arguments=big-frames %d 1\n" % (20000 // n))
    out.append(gadget("20,000 small messages written 1 MiB at a time", d, sf, "smallframes"))
    af = ctx.policy("auditflood", hostile, "Arguments=binding-flood NOPE get %d\n" % (200000 // n))
    out.append(gadget("200,000 denied binding calls (audited)", d, af, "auditflood"))
    kvf = ctx.policy("kvflood", hostile, "Arguments=kv-flood DATA put 3000 3000 64\n\n[Binding DATA]\nType=kv\n")
    out.append(gadget("3,000 pipelined kv puts", d, kvf, "kvflood"))
    # Its value's lookup reads 1 MiB: each get its store thread's, not the loop's.
    kvg = ctx.policy("kvgetflood", hostile,
                     "Arguments=kv-flood DATA get %d 8 1048000 big 1\n\n[Binding DATA]\nType=kv\n" % (5000 // n))
    out.append(gadget("gets of a 1 MiB kv value, 8 in flight", d, kvg, "kvgetflood"))
    srv = servers.NeverAccepts().__enter__()  # both live as long as the bench
    out.append(gadget("30,000 HTTP requests to a listener that never accepts", d,
                      http_flood(ctx, "httpflood", srv, 30000 // n), "httpflood"))
    hdr = servers.ManyHeaders(25000).__enter__()
    out.append(gadget("HTTP answers of 25,000 headers (64 requests)", d, http_flood(ctx, "heady", hdr, 64), "heady"))
    attack = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration", "attacks.py")]
    nobody = ["setpriv", "--reuid=%d" % NOBODY[0], "--regid=%d" % NOBODY[1], "--clear-groups", "python3"]
    hold = "%d" % (3 + (1 if ctx.quick else 5))
    out.append(process("300 idle control connections", nobody + attack + ["control-idle", d.sock, "300", hold], ctx,
                       "group member"))
    out.append(process("100 control clients that never read their answers",
                       nobody + attack + ["control-noread", d.sock, "100", "20000", "healthy"], ctx, "group member"))
    if gw_port:
        out.append(process("2,000 gateway connections (no token, headers never end)",
                           nobody + attack + ["gateway-hold", str(gw_port), "2000", hold], ctx, "local user"))
        out.append(process("256 gateway connections re-sending requests without the token every 0.3 s",
                           nobody + attack + ["gateway-notoken-hold", str(gw_port), "256", hold, "0.3"], ctx,
                           "local user"))
        pg = ctx.policy("bigpage", ctx.exe("tests/integration/testgadget"), "CallTimeout=30s\n")
        row = process("a page asking its gadget for 1 MB results, on 4 connections",
                      ["python3"] + attack + ["gateway-big", str(gw_port), os.path.join(ctx.work, "gateway.token"),
                                              "bigpage", "1000000", "%d" % (400 // n)], ctx, "local user")
        start = row.start

        def load_then_start():
            d.ctl("load", pg)
            d.wait_state("bigpage", ("ready",))
            start()
        row.start = load_then_start
        out.append(row)
    out.append(process("control requests of 500,000 values (2 MiB frames), one after another",
                       nobody + attack + ["control-wide", d.sock, "1000000", "500000"], ctx, "group member"))
    out.append(wake_flood(ctx, d, 300 // n, nobody[:-1]))
    return out


def wake_flood(ctx, d, count, nobody):
    """An attack by a group member: one burst of calls to count idle
    Start=on-demand gadgets, each call starting one (CORE_WAKES_MAX at
    once, CORE_WAKES_PER_PARTY of one caller; the rest queue)."""
    names = ["wake%d" % i for i in range(count)]
    pols = [ctx.policy(nm, ctx.exe("bench/benchgadget"), "Start=on-demand\n") for nm in names]
    flood = nobody + [ctx.exe("tests/integration/callflood"), d.sock, ",".join(names), "nop", str(count)]
    a = process("one burst of calls waking %d idle Start=on-demand gadgets" % count, flood, ctx, "group member")
    start, stop = a.start, a.stop

    def load_then_start():
        for p in pols:
            d.ctl("load", p)
        start()

    def stop_then_stop_them():
        stop()
        for nm in names:
            d.ctl("stop", nm)
    a.start, a.stop = load_then_start, stop_then_stop_them
    return a


def run(ctx):
    """Returns [(attack name, party, idle result, attack result)]."""
    seconds = 1 if ctx.quick else 5
    token = os.path.join(ctx.work, "gateway.token")
    with open(token, "w") as f:
        f.write("bench-token-0123456789abcdef0123456789abcdef\n")
    os.chmod(token, 0o600)
    conf = os.path.join(ctx.work, "hostile.conf")
    with open(conf, "w") as f:
        f.write("[Gateway]\nListen=127.0.0.1:0\nTokenFile=%s\n" % token)
    healthy = ctx.policy("healthy", ctx.exe("bench/benchgadget"), "CallTimeout=30s\n")
    rows = []
    with ctx.Daemon("hostile", ["--config", conf, "--group", GROUP]) as d:
        d.ctl("load", healthy)
        d.wait_state("healthy", ("ready",))
        port = gateway_port(d)
        for a in attacks(ctx, d, port):
            if os.environ.get("HOSTILE_ROWS") and os.environ["HOSTILE_ROWS"] not in a.name:
                continue
            idle = steady(ctx, d, seconds)
            a.start()
            try:
                under = steady(ctx, d, seconds)
            finally:
                a.stop()
            rows.append((a.name, a.party, idle, under))
            time.sleep(0.5)  # let gadgetd settle before the next idle run
    return rows


def gateway_port(d):
    import re
    for _ in range(200):
        with open(d.log.name) as f:
            m = re.search(r"gateway: listening on http://127\.0\.0\.1:(\d+)/", f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.01)
    return None


def worst_of(rows, parties):
    """The worst p99 ratio of the attacks of these parties, and its name."""
    worst = (0.0, "")
    for name, party, idle, under in rows:
        r = under.get("p99_us", 0) / max(1, idle.get("p99_us", 1))
        if party in parties and r > worst[0]:
            worst = (r, name)
    return worst


def report_rows(rows, us):
    """Table rows for bench/run's report, and the goal: the worst ratio
    of a single gadget's attack, and that attack's name."""
    out, worst = [], worst_of(rows, ("gadget",))
    for i, (name, party, idle, under) in enumerate(rows):
        r = under.get("p99_us", 0) / max(1, idle.get("p99_us", 1))
        lost = under.get("sent", 0) - under.get("ok", 0)
        out.append(["6 hostile load" if i == 0 else "", "%s: %s" % (party, name), us(under.get("p50_us", 0) * 1e3),
                    us(under.get("p99_us", 0) * 1e3),
                    "%.2f× idle p99 (%s)%s" % (r, us(idle.get("p99_us", 0) * 1e3),
                                               ", %d calls failed" % lost if lost else "")])
    return out, worst
