"""bench/metrics.py: the metrics endpoint's rows of bench/run (section 11).

A scrape of 10,000 gadgets (declared Start=on-demand: no process each, so
only gadgetd's side is timed): the time from the GET to the last byte,
and how long the loop's longest turn was meanwhile, seen from outside — a
second client sends one small request after another on a kept-alive
connection to the same endpoint (answered 404 at once) and its longest
round trip bounds the longest turn from above (the round trip itself
included; the scrape is read by a process of its own; only the round
trips that overlap the scrape, from its GET to its last byte, count; the
same prober with no scrape, as long, gives the host's own), and gadgetd's own
lag probe (gadgetd_loop_lag_seconds: a timer due every 100 ms) says how
often it ran more than 5 ms late meanwhile. Five scrapes.

Then a call with the endpoint on and scraped 10 times a second beside a
call with no endpoint, two gadgetd side by side, in alternating blocks
(off on, on off, ...) of callbench's sequential calls (the ratio of each
pair of adjacent blocks' medians) and its pipelined ones, 64 in flight
(the ratio of each pair's time per call). The counters themselves (core/unit_stats.c)
are always kept: bench/ab of the tree before them against this one is
their cost. Nothing here passes or fails: the goals are lines in
BENCHMARKS.md.
"""
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time


def conf(ctx, tag):
    """A config file whose MetricsListen= picks a free port (gadgetd logs it)."""
    path = os.path.join(ctx.work, tag + ".conf")
    with open(path, "w") as f:
        f.write("[Daemon]\nMetricsListen=127.0.0.1:0\n")
    return path


def port_of(ctx, tag):
    """The port gadgetd tag's log says its endpoint listens on."""
    for _ in range(2000):
        with open(os.path.join(ctx.work, tag + ".log")) as f:
            m = re.search(r"metrics: serving /metrics, listener on 127\.0\.0\.1:(\d+)", f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.005)
    raise SystemExit("bench/run: gadgetd %s did not say where its metrics are" % tag)


SCRAPER = """
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=120)
t0 = time.monotonic_ns()
c.request("GET", "/metrics")
body = c.getresponse().read()
print(time.monotonic_ns() - t0, len(body), t0)
"""


def scrape(port):
    """(ns, bytes, start) of one whole scrape, made by a process of its own
    (so that the prober beside it never waits for this one's interpreter);
    start: when its GET went (CLOCK_MONOTONIC, ns)."""
    out = subprocess.run([sys.executable, "-c", SCRAPER, str(port)], stdout=subprocess.PIPE, text=True,
                         check=True).stdout.split()
    return int(out[0]), int(out[1]), int(out[2])


def lag(port):
    """gadgetd's own count of its lag probes (a timer due every 100 ms):
    (late by more than 5 ms, all)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    le5 = float(re.search(r'^gadgetd_loop_lag_seconds_bucket\{le="0.005"\} (\S+)$', text, re.M).group(1))
    total = float(re.search(r'^gadgetd_loop_lag_seconds_count (\S+)$', text, re.M).group(1))
    return total - le5, total


class Prober(threading.Thread):
    """Small requests one after another: each one's start and round trip."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.trips = port, False, []

    def run(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self.stop:
            t0 = time.monotonic_ns()
            c.request("GET", "/probe")
            c.getresponse().read()
            self.trips.append((t0, time.monotonic_ns() - t0))
        c.close()

    def during(self, start, ns):
        """The round trips that overlapped [start, start + ns): their
        number and the longest (the scraper's start-up before its GET,
        another interpreter competing for the 2 CPUs, is left out)."""
        rts = [rt for t0, rt in self.trips if t0 < start + ns and t0 + rt > start]
        return len(rts), max(rts, default=0)


def probe_alone(port, ns):
    """The longest round trip over ns with no scrape: the host's own."""
    p = Prober(port)
    p.start()
    while not p.trips:
        time.sleep(0.001)
    start = time.monotonic_ns()
    time.sleep(ns / 1e9)
    p.stop = True
    p.join()
    return p.during(start, ns)[1]


def run(ctx):
    n = 1000 if ctx.quick else 10000
    d_all = os.path.join(ctx.work, "metrics-idle")
    os.makedirs(d_all, exist_ok=True)
    prog = ctx.exe("bench/benchgadget")
    for i in range(n):
        path = os.path.join(d_all, "m%d.policy" % i)
        with open(path, "w") as f:
            f.write("[Gadget]\nName=m%d\nExec=%s\nStart=on-demand\n" % (i, prog))
        os.chmod(path, 0o644)
    out = {"n": n, "scrape_ns": [], "turn_ns": [], "probes": [], "bytes": 0, "off_seq": [], "on_seq": [],
           "pair": [], "lag_late": 0, "lag_probes": 0, "alone_ns": [], "off_pipe": [], "on_pipe": [],
           "pipe_pair": []}
    path = conf(ctx, "metrics")
    ctx.commands.append("gadgetd --config %s --policy-dir bench-run/metrics-idle (%d Start=on-demand files); "
                        "GET /metrics, 5 times, with GET /probe in a loop beside it" % (path, n))
    with ctx.Daemon("metrics", ["--config", path], policy_dir=d_all) as d:
        port = port_of(ctx, "metrics")
        while json.loads(d.ctl("--json", "status", "m%d" % (n - 1)) or "{}").get("state") != "idle":
            time.sleep(0.05)
        scrape(port)  # the first: every page gadgetd touches is in
        late0, all0 = lag(port)
        for _ in range(5):
            p = Prober(port)
            p.start()
            while not p.trips:
                time.sleep(0.001)
            t, b, start = scrape(port)
            p.stop = True
            p.join()
            n_probes, longest = p.during(start, t)
            out["scrape_ns"].append(t)
            out["turn_ns"].append(longest)
            out["probes"].append(n_probes)
            out["bytes"] = b
            out["alone_ns"].append(probe_alone(port, t))
        late1, all1 = lag(port)
        out["lag_late"], out["lag_probes"] = late1 - late0, all1 - all0
    pol = ctx.policy("mcallee", prog, "CallTimeout=30s\n")
    path_on = conf(ctx, "metrics-on")
    ctx.commands.append("two gadgetd, without and with MetricsListen= (scraped every 100 ms); callbench SOCKET "
                        "mcallee nop 1 SEQ PIPE 64 against each in turn, 10 blocks each, the order swapped every round")
    with ctx.Daemon("calls-off", state="state-moff") as off, \
            ctx.Daemon("calls-on", ["--config", path_on], state="state-mon") as on:
        port_on = port_of(ctx, "calls-on")
        for d in (off, on):
            d.ctl("load", pol)
            d.wait_state("mcallee", ("ready",))
        stop = threading.Event()

        def scraper():
            # As Prometheus does: one kept-alive connection (a fresh
            # interpreter for each scrape would cost the 2 CPUs more than
            # the scrape, and only during the blocks with the endpoint).
            c = http.client.HTTPConnection("127.0.0.1", port_on, timeout=60)
            while not stop.wait(0.1):
                c.request("GET", "/metrics")
                c.getresponse().read()
            c.close()
        t = threading.Thread(target=scraper, daemon=True)
        t.start()
        seq, pipe = ("300", "3000") if ctx.quick else ("3000", "30000")
        for k in range(4 if ctx.quick else 10):
            blocks = {}
            # off on, then on off: an order effect falls on both
            for d, key in ((off, "off"), (on, "on"))[::1 if k % 2 == 0 else -1]:
                cmd = [ctx.exe("bench/callbench"), d.sock, "mcallee", "nop", "1", seq, pipe, "64"]
                r = json.loads(subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout)
                out[key + "_seq"] += r["seq_ns"]
                out[key + "_pipe"] += r["pipe_per_s"]
                blocks[key] = statistics.median(r["seq_ns"]), r["pipe_per_s"][0]
            out["pair"].append(blocks["on"][0] / blocks["off"][0])
            out["pipe_pair"].append(blocks["off"][1] / blocks["on"][1])  # time per call, on over off
        stop.set()
        t.join()
    return out


def rows(v, us):
    s, turn = statistics.median(v["scrape_ns"]), max(v["turn_ns"])
    off, on, pair = statistics.median(v["off_seq"]), statistics.median(v["on_seq"]), statistics.median(v["pair"])
    r = [["11 metrics", "GET /metrics of %d gadgets (%.1f MiB)" % (v["n"], v["bytes"] / 2**20), us(s),
          "max " + us(max(v["scrape_ns"])), ""],
         ["", "longest round trip of a request beside it (bounds the loop's longest turn)",
          us(statistics.median(v["turn_ns"])), "max " + us(turn), "%d requests a scrape" % statistics.median(v["probes"])],
         ["", "longest round trip of the same requests with no scrape, as long (the host's own)",
          us(statistics.median(v["alone_ns"])), "max " + us(max(v["alone_ns"])), ""],
         ["", "gadgetd's lag probe (due every 100 ms) late by more than 5 ms during them", "%d of %d" % (
             v["lag_late"], v["lag_probes"]), "", "(the scrapes, the windows without and the two reads of the "
                                                 "probe's counts)"],
         ["", "sequential call, no metrics endpoint", us(off), "", "1.00×"],
         ["", "sequential call, endpoint scraped every 100 ms", us(on), "", "%.3f× (paired blocks)" % pair],
         ["", "pipelined, 64 in flight, no endpoint / scraped every 100 ms", "%.0f / %.0f calls/s" % (
             statistics.median(v["off_pipe"]), statistics.median(v["on_pipe"])), "",
          "%.3f× (time per call, paired blocks)" % statistics.median(v["pipe_pair"])]]
    goals = [(turn <= 5e6, "a scrape of %d gadgets never holds the loop over 5 ms: longest round trip beside it %s "
              "(%s with no scrape); gadgetd's lag probe late by over 5 ms %d times of %d" % (
                  v["n"], us(turn), us(max(v["alone_ns"])), v["lag_late"], v["lag_probes"])),
             (max(pair, statistics.median(v["pipe_pair"])) <= 1.03, "a call with metrics on ≤ 1.03× off (paired "
              "blocks): %.3f× sequential, %.3f× pipelined" % (pair, statistics.median(v["pipe_pair"])))]
    return r, goals
