#!/usr/bin/env python3
"""gadgetd's metrics endpoint (MetricsListen=): scraped by a real
Prometheus after real calls, a limit hit (CallTimeout) and a restart; its
exposition accepted by promtool and checked line by line (histograms
cumulative, labels bounded); the token; the config's refusals."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request

import harness
from harness import Daemon, check, free_port, need, policy, test, wait_for
from metrics_util import Metrics, check_histograms, parse, promtool_check, value


def call(d, method, args="{}", gadget="good"):
    return d.ctl("call", gadget, method, args)


def tail_dropped(d, name):
    """gadgetctl status' "Tail: Q events queued, D dropped" as (Q, D)."""
    for line in d.status(name)["limits"]:
        m = re.fullmatch(r"Tail: (\d+) events queued, (\d+) dropped", line)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def prometheus(tmp, d):
    """A real Prometheus scraping d every second; its API's address."""
    binary = shutil.which("prometheus")
    if not binary:
        need("prometheus", "the metrics test scrapes gadgetd with a real Prometheus (scripts/deps installs it)")
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                "  - job_name: gadgetd\n    authorization:\n      credentials_file: %s\n"
                "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % (d.token_file, d.port))
    log = open(os.path.join(tmp, "prometheus.log"), "w")
    p = subprocess.Popen([binary, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                          "--web.listen-address=127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    return p, "http://127.0.0.1:%d" % port


def query(api, q):
    """The vector Prometheus returns for q now: {frozenset(labels): value}."""
    try:
        with urllib.request.urlopen(api + "/api/v1/query?" + urllib.parse.urlencode({"query": q}), timeout=5) as r:
            body = json.load(r)
    except OSError:
        return {}
    return {frozenset((k, v) for k, v in x["metric"].items() if k not in ("job", "instance")): float(x["value"][1])
            for x in body["data"]["result"]}


@test
def metrics_scraped_by_prometheus(tmp):
    """Prometheus scrapes gadgetd (OpenMetrics, with the token) and its API
    returns what happened: a fork refused at TasksMax (a limit hit), 5
    calls ok, 2 of an undeclared method counted under _other, 1 over
    CallTimeout (outcome timeout), the restart that followed, the
    call-duration histogram's count, the gadget's state; a gadget woken by
    a call and parked idle by IdleStop= has seconds awake and idle (the
    always-ready one none idle); a tail binding whose every batch fails
    (no such method) has its dropped events counted, as status counts
    them."""
    d = Metrics(tmp)
    with d:
        d.add("good", "CallTimeout=1s\nRestart=always\nTasksMax=3\n")
        policy(d.pol, "lazy", "Start=on-demand\nIdleStop=200ms\n")
        d.add("tailer", "[Binding T]\nType=tail\nOf=lazy\nMethod=nosuch\n")
        wait_for(lambda: d.state("good") == "ready" and d.state("lazy") == "idle", what="good ready, lazy idle")
        p, api = prometheus(tmp, d)
        try:
            # lazy: woken by 3 calls, then parked idle 200 ms after them
            for i in range(3):
                check(call(d, "echo", str(i), gadget="lazy").returncode == 0, "lazy's echo")
            wait_for(lambda: d.state("lazy") == "idle", what="lazy parked idle again")
            # its events (the calls, its lines, its exit) all dropped: no method takes them
            wait_for(lambda: tail_dropped(d, "tailer")[0] == 0 and tail_dropped(d, "tailer")[1] >= 3,
                     what="the tail's batches, failed and dropped")
            dropped = tail_dropped(d, "tailer")[1]
            # the limit hit: a fork refused at TasksMax=3 (the children
            # before it spin until the restart below ends them)
            check(call(d, "spin", '{"procs": 8}').returncode != 0, "8 children within TasksMax=3")
            for _ in range(5):
                check(call(d, "echo", '{"x": 1}').returncode == 0, "echo")
            for _ in range(2):
                check(call(d, "nosuch").returncode != 0, "an undeclared method answered")
            check(call(d, "deny", '{"call": "socket", "n": 2}').returncode == 0, "2 refused sockets")
            check(call(d, "sleep", '{"ms": 5000}').returncode != 0, "a call past CallTimeout answered")
            wait_for(lambda: d.state("good") == "ready" and d.status("good").get("restarts", 0) >= 1,
                     what="good restarted after its timeout")

            def got(q, want):
                v = query(api, q)
                return v if list(v.values()) == [want] else None
            wait_for(lambda: got('gadgetd_gadget_calls_total{gadget="good",method="echo",outcome="ok"}', 5),
                     timeout=30, what="Prometheus to have the 5 echo calls")
            got_q = [('gadgetd_gadget_calls_total{gadget="good",method="_other",outcome="no_method"}', 2),
                     ('gadgetd_gadget_calls_total{gadget="good",method="sleep",outcome="timeout"}', 1),
                     ('gadgetd_gadget_restarts_total{gadget="good",cause="exit"}', 1),
                     ('gadgetd_gadget_call_duration_seconds_count{gadget="good"}', 10),
                     ('gadgetd_gadget_state{gadget="good",state="ready"}', 1),
                     ('gadgetd_gadgets', 3),
                     ('gadgetd_gadget_limit_hits_total{gadget="good",limit="TasksMax"}', 1),
                     ('gadgetd_gadget_denials_total{gadget="good",call="socket",answer="EACCES"}', 2),
                     ('gadgetd_gadget_tail_events_dropped_total{gadget="tailer",binding="T"}', dropped),
                     ('gadgetd_gadget_state_seconds_total{gadget="good",state="idle"}', 0),
                     ('gadgetd_gadget_state_seconds_total{gadget="lazy",state="awake"} > bool 0', 1),
                     ('gadgetd_gadget_state_seconds_total{gadget="lazy",state="idle"} > bool 0', 1),
                     ('gadgetd_gadget_state_seconds_total{gadget="good",state="awake"} > bool 0', 1)]
            for q, want in got_q:
                wait_for(lambda q=q, want=want: got(q, want), timeout=30, what="%s == %s" % (q, want))
            # the timed-out call took at least its CallTimeout: not in the 0.5 s bucket
            v = query(api, 'gadgetd_gadget_call_duration_seconds_bucket{gadget="good",le="0.5"}')
            check(list(v.values()) == [9], "calls within 0.5 s: %r" % v)
            check(list(query(api, 'up{job="gadgetd"}').values()) == [1.0], "the target is not up")
        finally:
            p.terminate()
            p.wait(timeout=30)


@test
def metrics_exposition_checked(tmp):
    """promtool check metrics accepts the text exposition; each sample line
    parses, carries only bounded labels (a binding call of an undeclared
    binding, or of an operation its type lacks, counts as _other), and
    every histogram is
    cumulative; the audit records summarized over RecordsPerSecond= are
    counted per gadget too; OpenMetrics when asked ends with # EOF, counters' families
    without _total."""
    d = Metrics(tmp, more="[Audit]\nRecordsPerSecond=2\n")
    with d:
        d.add("good", "\n[Binding KV]\nType=kv\n")
        wait_for(lambda: d.state("good") == "ready", what="good ready")
        check(call(d, "echo", "{}").returncode == 0, "echo")
        check(call(d, "nosuch").returncode != 0, "nosuch answered")
        put = {"binding": "KV", "op": "put", "args": {"key": "k", "value": "v"}}
        check(call(d, "binding", json.dumps(put)).returncode == 0, "a kv put")
        for b, op in (("KV", "nosuch-op"), ("NOSUCH_BINDING", "put")):
            bad = {"binding": b, "op": op, "args": None}
            check(call(d, "binding", json.dumps(bad)).returncode != 0, "%s.%s answered" % (b, op))
        rep = {"binding": "KV", "op": "get", "args": {"key": "k"}, "n": 20}
        check(call(d, "repeat", json.dumps(rep)).returncode == 0, "20 kv gets")
        status, headers, text = d.get()
        check(status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4"), "GET: %d %r" % (
            status, headers))
        promtool_check(text)
        check("gadgetd_cluster_" not in text and "gadgetd_store_" not in text, "cluster series without a shared store")
        series = parse(text)
        check_histograms(series)
        check(value(series, "gadgetd_gadget_calls_total", gadget="good", method="echo", outcome="ok") == 1,
              "echo's count")
        check(value(series, "gadgetd_gadget_binding_calls_total", gadget="good", binding="KV", op="put",
                    outcome="ok") == 1, "the kv put's count")
        # Neither the undeclared binding nor the type's missing operation becomes a label.
        check(value(series, "gadgetd_gadget_binding_calls_total", gadget="good", binding="_other", op="_other",
                    outcome="denied") == 1 and value(series, "gadgetd_gadget_binding_calls_total", gadget="good",
                                                     binding="_other", op="_other", outcome="error") == 1,
              "the bad binding calls under _other: %r" % [k for k in series if "binding" in k[0]])
        # 23 binding calls at RecordsPerSecond=2: most are summarized
        summarized = value(series, "gadgetd_audit_records_dropped_total", why="summarized")
        check(summarized >= 10, "audit records summarized: %r" % summarized)
        # ... all of them good's, the one gadget
        check(value(series, "gadgetd_gadget_audit_records_dropped_total", gadget="good", why="summarized") == summarized
              and value(series, "gadgetd_gadget_audit_records_dropped_total", gadget="good", why="unwritten") == 0,
              "good's audit records dropped: %r" % [(k, v) for k, v in series.items() if "audit" in k[0]])
        check(value(series, "gadgetd_open_fds") > 0 and value(series, "gadgetd_resident_memory_bytes") > 0,
              "gadgetd's own")
        status, headers, om = d.get(accept="application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
        check(headers["content-type"].startswith("application/openmetrics-text"), "OpenMetrics: %r" % headers)
        check(om.endswith("# EOF\n") and "# TYPE gadgetd_gadget_calls counter" in om, "OpenMetrics text")


@test
def metrics_token_and_config(tmp):
    """Without the token (or with another) nothing but 401; a path other
    than /metrics is 404; a non-loopback MetricsListen= and a relative
    MetricsToken= are refused naming the file and line; a Unix socket
    serves too, and is kept (the same socket) across daemon-reexec, unless
    MetricsListen= names another since."""
    d = Metrics(tmp)
    with d:
        check(d.get(token=False)[0] == 401, "no token")
        check(d.get(token="x" * 48)[0] == 401, "a wrong token")
        status, _, body = d.get(token=False)
        check("gadgetd_" not in body, "a series without the token")
        check(d.get("/other")[0] == 404, "another path")
    conf = os.path.join(tmp, "bad.conf")
    for text, line, want in (("[Daemon]\nMetricsListen=0.0.0.0:9464\n", 2, "speaks plain HTTP"),
                             ("[Daemon]\nMetricsListen=localhost:9464\n", 2, "is not a numeric ADDRESS:PORT"),
                             ("[Daemon]\nMetricsListen=127.0.0.1:1\nMetricsToken=t\n", 3, "not an absolute path")):
        with open(conf, "w") as f:
            f.write(text)
        r = subprocess.run([harness.GADGETD, "--config", conf, "--policy-dir", tmp, "--state-dir",
                            os.path.join(tmp, "s"), "--socket", os.path.join(tmp, "r", "c.sock"), "--run-dir",
                            os.path.join(tmp, "r")], capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and "bad.conf:%d: " % line in r.stderr and want in r.stderr,
              "%r: %r" % (text, r.stderr))
    path = os.path.join(tmp, "m.sock")
    os.makedirs(os.path.join(tmp, "u"))
    u = Metrics(os.path.join(tmp, "u"), listen=path)
    with u:
        def unix_scrape(path=path):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.sendall(("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n"
                       % u.token).encode())
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
            return data
        data = unix_scrape()
        check(data.startswith(b"HTTP/1.1 200") and b"gadgetd_gadgets 0" in data, "over the Unix socket: %r" % data[:300])
        ino = os.stat(path).st_ino
        r = u.ctl("daemon-reexec")
        check(r.returncode == 0 and "the socket kept across gadgetd's re-exec" in u.logtext(),
              "the Unix socket kept across daemon-reexec: %r %s" % (r, u.logtext()[-1500:]))
        check(os.stat(path).st_ino == ino, "the Unix socket's file made again")
        data = unix_scrape()
        check(data.startswith(b"HTTP/1.1 200"), "over the Unix socket after the re-exec: %r" % data[:300])
        # MetricsListen= changed meanwhile: the socket handed on is not one
        # on it, so the next image listens afresh where it says
        moved = os.path.join(tmp, "m2.sock")
        conf = os.path.join(tmp, "u", "gadgetd.conf")
        with open(conf) as f:
            text = f.read()
        with open(conf, "w") as f:
            f.write(text.replace(path, moved))
        r = u.ctl("daemon-reexec")
        check(r.returncode == 0 and "is not one on %s: listening again" % moved in u.logtext(),
              "a moved MetricsListen= after daemon-reexec: %r %s" % (r, u.logtext()[-1500:]))
        check(unix_scrape(moved).startswith(b"HTTP/1.1 200"), "over the moved Unix socket")


@test
def top_counts_and_views(tmp):
    """gadgetctl --json top: after 4 echo calls and 1 call of an undeclared
    method, good's calls are 5 and its errors 1, its state ready, its
    memory known, its p99 too; a member of the control group sees the same. top -n 2
    -d 0.1 into a pipe prints two plain views (no terminal codes), a blank
    line between, with rates and a P99 column."""
    d = Daemon(tmp, extra=["--group", "nogroup"])  # the control group: nogroup (65534)
    with d:
        d.add("good")
        wait_for(lambda: d.state("good") == "ready", what="good ready")
        for _ in range(4):
            check(call(d, "echo", "{}").returncode == 0, "echo")
        check(call(d, "nosuch").returncode != 0, "nosuch answered")
        r = d.ctl("--json", "top")
        check(r.returncode == 0, "top --json: %r" % r.stderr)
        g = {x["name"]: x for x in json.loads(r.stdout)}["good"]
        check(g["calls"] == 5 and g["errors"] == 1 and g["state"] == "ready", "good in top: %r" % g)
        check(g["memory_bytes"] > 0, "good's memory unknown: %r" % g)
        check(0 < g["p99_us"] <= 5000000, "good's p99 after 5 calls: %r" % g)
        r = d.ctl("--json", "top", user=(65534, 65534))
        check(r.returncode == 0 and {x["name"]: x for x in json.loads(r.stdout)}["good"]["calls"] == 5,
              "a member's top: %r" % r)
        r = d.ctl("--json", "top", user=(65534, 4242))
        check(r.returncode != 0, "top for a user outside the control group: %r" % r)
        r = d.ctl("top", "-n", "2", "-d", "0.1")
        check(r.returncode == 0, "top -n 2: %r" % r.stderr)
        views = r.stdout.split("\n\n")
        check(len(views) == 2 and "\033" not in r.stdout, "two plain views: %r" % r.stdout)
        for v in views:
            lines = v.strip().splitlines()
            check(lines[0].split()[:3] == ["GADGET", "STATE", "CPU%"] and lines[1].split()[:2] == ["good", "ready"],
                  "a view: %r" % v)
            check(re.match(r"^[0-9.]+$", lines[1].split()[2]) and lines[1].split()[5] == "0.0", "rates: %r" % v)
            check(lines[0].split()[-1] == "P99" and re.search(r" [0-9.]+ (us|ms)$", lines[1]), "P99: %r" % v)
        r = d.ctl("top", "-d", "0")
        check(r.returncode == 2 and "-d needs seconds" in r.stderr, "-d 0: %r" % r.stderr)


if __name__ == "__main__":
    sys.exit(harness.main())
