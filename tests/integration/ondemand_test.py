#!/usr/bin/env python3
"""Idle gadgets, from outside: Start=on-demand gadgets are not running
until their first call from any caller (gadgetctl, the gateway, another
gadget), calls that come during the start are delivered in order after
the hello, IdleStop= stops a quiet gadget gracefully and shows it idle,
the next call starts it again with its kv state, and `gadgetctl wake`
starts one without a call. What is running is read from gadgetd's
children in /proc, not from gadgetd's word.
Usage: ondemand_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET,
EXAMPLES."""
import json
import os
import signal
import subprocess
import sys
import time

from gateway_util import Gateway
from harness import CALLFLOOD, GADGETCTL, Daemon, check, gadgetd_run, main, policy, test, wait_for, workers


def load(d, name, body):
    policy(d.pol, name, body)
    r = d.ctl("reload")
    check(r.returncode == 0, "reload: %r" % r.stderr)


def call(d, gadget, method, args=None):
    return d.ctl("call", gadget, method, *([json.dumps(args)] if args is not None else []))


def info(d, name):
    r = d.ctl("--json", "status", name)
    check(r.returncode == 0, "status %s: %r" % (name, r.stderr))
    return json.loads(r.stdout)


@test
def gadgetd_run_ignores_start_and_idle_stop(tmp):
    """gadgetd run is asked to run the program: Start=on-demand does not
    keep it waiting for a call (it has none to wait for), and IdleStop=
    does not end the run."""
    pol = policy(tmp, "oneshot", "Start=on-demand\nIdleStop=500ms\n")
    p = subprocess.Popen(gadgetd_run(tmp) + [pol], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        if p.poll() is not None:
            check(False, "the run ended: %r" % (p.communicate(timeout=5),))
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=15)
    check("idle" not in err, "gadgetd run's log: %r" % err)


@test
def ondemand_not_started_until_first_call(tmp):
    with Daemon(tmp) as d:
        load(d, "od", "Start=on-demand\n")
        check(d.state("od") == "idle", "an on-demand gadget is idle once loaded: %r" % d.state("od"))
        # Give a wrongly eager start time to show: nothing may run.
        time.sleep(0.5)
        check(workers(d) == [], "an on-demand gadget runs before any call: %r" % workers(d))
        j = info(d, "od")
        check(j["start"] == "on-demand" and j["pid"] == 0 and j["active_ago_ms"] == 0, "status: %r" % j)
        r = call(d, "od", "echo", "hi")
        check(r.returncode == 0 and json.loads(r.stdout) == "hi", "first call: %r" % r)
        check(d.state("od") == "ready" and len(workers(d)) == 1, "after its first call: %r" % d.list()["od"])
        st = d.ctl("status", "od").stdout
        check("Start: on-demand" in st and "Last active: now" in st, "status text: %s" % st)
        # Start=always (the default) is as before.
        load(d, "always", "")
        wait_for(lambda: d.state("always") == "ready", what="always ready")


@test
def ondemand_calls_during_start_in_order(tmp):
    with Daemon(tmp) as d:
        load(d, "od", "Start=on-demand\n")
        check(d.state("od") == "idle", "idle once loaded")
        # 60 calls on one connection, written at once while it is idle:
        # the first starts it, the rest wait, each is delivered in order.
        env = dict(os.environ, CALLFLOOD_RESULTS="1", CALLFLOOD_SILENCE_MS="15000")
        out = subprocess.run([CALLFLOOD, d.sock, "od", "next", "60"], capture_output=True, text=True,
                             timeout=60, env=env).stdout
        got = [tuple(map(int, l.split()[1:])) for l in out.splitlines() if l.startswith("result ")]
        check("ok 60" in out and len(got) == 60, "all 60 calls answered: %s" % out)
        check(all(i == n for i, n in got), "delivered out of order (call id, its place): %r" % got)
        check(d.state("od") == "ready", "ready after the calls")


@test
def ondemand_from_gateway_and_gadget_binding(tmp):
    with Gateway(tmp) as g:
        load(g, "viaweb", "Start=on-demand\n")
        load(g, "viabind", "Start=on-demand\n")
        load(g, "caller", "[Binding T]\nType=gadget\nTarget=viabind\n")
        wait_for(lambda: g.state("caller") == "ready", what="caller ready")
        check(g.gadgets()["viaweb"]["state"] == "idle", "the gateway shows idle: %r" % g.gadgets()["viaweb"])
        status, body = g.call("viaweb", "echo", "web")
        check(status == 200 and body == "web", "a gateway call starts it: %d %r" % (status, body))
        check(g.state("viabind") == "idle", "viabind idle before its call")
        r = call(g, "caller", "binding", {"binding": "T", "op": "call", "args": {"method": "echo", "args": "b"}})
        check(r.returncode == 0 and json.loads(r.stdout) == "b", "a gadget binding's call starts it: %r" % r)
        check(g.state("viabind") == "ready", "viabind ready after its call")


@test
def idle_stop_then_next_call_with_kv_state(tmp):
    with Daemon(tmp) as d:
        load(d, "kv", "Start=on-demand\nIdleStop=1s\n[Binding KV]\nType=kv\n")
        r = call(d, "kv", "binding", {"binding": "KV", "op": "put", "args": {"key": "k", "value": "kept"}})
        check(r.returncode == 0, "put: %r" % r)
        t0 = time.monotonic()
        wait_for(lambda: d.state("kv") == "idle", timeout=15, what="the idle stop")
        quiet = time.monotonic() - t0
        check(quiet >= 0.9, "stopped before IdleStop=1s had passed: %.2f s" % quiet)
        check(workers(d) == [], "an idle gadget still runs: %r" % workers(d))
        j = info(d, "kv")
        check("idle" in j["cause"] and "IdleStop=1000ms" in j["cause"], "the idle stop's cause: %r" % j["cause"])
        check(j["active_ago_ms"] >= 900, "last activity: %r" % j["active_ago_ms"])
        check("stopping it" in d.logtext() and "failed" not in d.list()["kv"]["state"], "log: %s" % d.logtext()[-800:])
        # Graceful: the gadget got its shutdown message and ended by itself.
        check("killed" not in j["cause"], "the idle stop was not graceful: %r" % j["cause"])
        r = call(d, "kv", "binding", {"binding": "KV", "op": "get", "args": {"key": "k"}})
        check(r.returncode == 0 and json.loads(r.stdout) == "kept", "the next call, with its kv state: %r" % r)
        check(d.state("kv") == "ready", "ready again")
        # A call in flight holds the idle stop off: a 2 s call outlasts IdleStop=1s.
        pid = info(d, "kv")["pid"]
        r = call(d, "kv", "sleep", {"ms": 2500})
        check(r.returncode == 0, "a call longer than IdleStop= was cut: %r" % r)
        j = info(d, "kv")
        check(j["state"] == "ready" and j["pid"] == pid, "stopped during a call in flight: %r" % j)


@test
def idle_stop_with_restart_always_stays_idle(tmp):
    # Restart= is for failures: an idle stop is not one, even with always.
    with Daemon(tmp) as d:
        load(d, "ra", "IdleStop=500ms\nRestart=always\n")
        wait_for(lambda: d.state("ra") == "ready", what="ready (Start=always)")
        wait_for(lambda: d.state("ra") == "idle", timeout=15, what="the idle stop")
        time.sleep(1)
        check(d.state("ra") == "idle" and workers(d) == [], "Restart=always restarted an idle gadget")
        r = call(d, "ra", "echo", 1)
        check(r.returncode == 0 and d.state("ra") == "ready", "woken by a call: %r" % r)


@test
def wake_starts_without_a_call(tmp):
    with Daemon(tmp) as d:
        load(d, "od", "Start=on-demand\n")
        r = d.ctl("wake", "od")
        check(r.returncode == 0 and d.state("od") == "ready", "wake: %r, state %s" % (r, d.state("od")))
        check(info(d, "od")["calls"] == 0, "wake made a call")
        r = d.ctl("wake", "od")
        check(r.returncode == 0, "wake of a ready gadget: %r" % r)
        check(d.ctl("stop", "od").returncode == 0, "stop")
        wait_for(lambda: d.state("od") == "stopped", what="stopped")
        r = d.ctl("wake", "od")
        check(r.returncode != 0 and "stopped, not idle" in r.stderr, "wake of a stopped gadget: %r" % r)
        r = call(d, "od", "echo", 1)
        check(r.returncode != 0 and "not ready (stopped" in r.stderr,
              "a call started a gadget an operator stopped: %r" % r)
        check(d.ctl("restart", "od").returncode == 0 and d.state("od") == "idle",
              "restart of a stopped on-demand gadget makes it idle: %s" % d.state("od"))
        r = d.ctl("wake", "nosuch")
        check(r.returncode != 0 and "no gadget named" in r.stderr, "wake of an unknown gadget: %r" % r)


@test
def failed_start_fails_waiting_calls(tmp):
    with Daemon(tmp) as d:
        # It crashes before its hello: every waiting call is told why.
        load(d, "bad", "Start=on-demand\nArguments=crash\n")
        r = call(d, "bad", "echo", 1)
        check(r.returncode != 0 and 'gadget "bad" did not start' in r.stderr, "call to a crashing start: %r" % r)
        check(d.state("bad") == "failed", "state after a failed start: %s" % d.state("bad"))
        # One that never says hello: calls wait no longer than CallTimeout.
        load(d, "mute", "Start=on-demand\nArguments=mute 30\nCallTimeout=1s\nStartTimeout=20s\n")
        t0 = time.monotonic()
        r = call(d, "mute", "echo", 1)
        took = time.monotonic() - t0
        check(r.returncode != 0 and "was still starting" in r.stderr, "call to a mute start: %r" % r)
        check(took < 10, "a waiting call outlived its CallTimeout: %.1f s" % took)


@test
def waiting_calls_counted_in_flight(tmp):
    """`gadgetctl list --json` counts the calls that wait for a start as in
    flight (and `status` says so), and none once they have their answers."""
    with Daemon(tmp) as d:
        load(d, "mute", "Start=on-demand\nArguments=mute 30\nCallTimeout=30s\nStartTimeout=3s\n")
        calls = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "mute", "echo", "1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        wait_for(lambda: d.list()["mute"]["in_flight"] == 3, what="3 calls waiting for the start")
        r = d.ctl("status", "mute")
        check("Calls: 0, 3 in flight" in r.stdout, "status while 3 wait: %r" % r.stdout)
        for c in calls:
            err = c.communicate(timeout=30)[1]
            check(c.returncode != 0 and 'did not start' in err, "a call to a start that timed out: %r" % err)
        check(d.list()["mute"]["in_flight"] == 0, "in flight once answered: %r" % d.list()["mute"])


@test
def waiting_calls_bounded_in_bytes(tmp):
    """Calls that wait for a start hold a copy of their arguments: all
    together at most what the worker link lets wait for a running gadget
    (8 MiB); beyond, "busy" at once. 120 calls of 100 KB to a gadget that
    never says hello: about 80 wait (and time out), the rest are busy."""
    with Daemon(tmp) as d:
        load(d, "mute", "Start=on-demand\nArguments=mute 30\nCallTimeout=2s\nStartTimeout=20s\n")
        big = json.dumps("x" * 100000)
        out = subprocess.run([CALLFLOOD, d.sock, "mute", "echo", "120", big], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, CALLFLOOD_SILENCE_MS="10000")).stdout
        counts = dict((int(l.split()[1]), int(l.split()[2])) for l in out.splitlines() if l.startswith("error "))
        busy, timeouts = counts.get(7, 0), counts.get(6, 0)
        check(busy > 0 and 60 <= timeouts <= 90 and busy + timeouts == 120,
              "120 calls of 100 KB to a starting gadget: %s" % out)
        check(d.proc.poll() is None, "gadgetd ended")


@test
def start_and_idle_stop_keys_checked(tmp):
    for body, want in [("Start=sometimes\n", ':4: Start="sometimes" is not one of always, on-demand'),
                       ("IdleStop=soon\n", ':4: IdleStop="soon" is not a duration'),
                       ("Start=on-demand\nStart=always\n", ":5: Start= given twice (first on line 4)")]:
        path = policy(tmp, "p", body)
        r = subprocess.run([GADGETCTL, "check", path], capture_output=True, text=True)
        check(r.returncode != 0 and path + want in r.stdout + r.stderr, "%r: %r" % (body, r))
    path = policy(tmp, "p", "Start=on-demand\nIdleStop=infinity\n")
    r = subprocess.run([GADGETCTL, "check", path], capture_output=True, text=True)
    check(r.returncode == 0, "a good policy refused: %r" % r.stderr)


if __name__ == "__main__":
    sys.exit(main())
