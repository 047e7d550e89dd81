#!/usr/bin/env python3
"""FdStore=yes from outside: at SIGTERM gadgetd hands its gadgets to
systemd's fd store and exits; the next gadgetd takes them from its
LISTEN_FDS and adopts them (same pids, kv state) and empties the store;
a store closed (systemd's stop) ends every sandbox at once; a store that
no gadgetd takes within FdStoreTimeout= ends them too. systemd's part is
played by this test: a datagram socket as NOTIFY_SOCKET that keeps the
fds of FDSTORE=1 messages by FDNAME and drops them on FDSTOREREMOVE=1
(and, unless FDPOLL=0, once they hang up), and the fds passed to the next
gadgetd as systemd passes them (from fd 3, LISTEN_FDS, LISTEN_FDNAMES,
LISTEN_PID, blocking). The real systemd's side is the
Debian 12 guest's (tests/vm). Usage: fdstore_test.py TEST. Environment:
GADGETD, GADGETCTL, TESTGADGET."""
import array
import json
import os
import select
import socket
import stat
import subprocess
import sys
import threading

from harness import GADGETD, Daemon, check, main, pid_alive, test, wait_for
from gateway_util import Gateway, GatewayCallers
from metrics_util import Scraper, metrics_listen

FDSTATE = "gadgetd-state"


class Store:
    """systemd's notify socket and fd store, for one service, read by a
    thread as systemd reads it (a sender blocks once 10 datagrams wait)."""

    def __init__(self, tmp):
        self.path = os.path.join(tmp, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.fds = {}  # name -> fd
        self.polled = set()  # names stored without FDPOLL=0
        self.states = 0  # how many states came
        self.cond = threading.Condition()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            msg, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(253 * 4))
            fds = array.array("i")
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            keys = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line)
            with self.cond:
                if keys.get("FDSTORE") == "1":
                    for fd in fds:
                        self.fds[keys["FDNAME"]] = fd
                        if keys.get("FDPOLL") != "0":
                            self.polled.add(keys["FDNAME"])
                    self.states += keys.get("FDNAME") == FDSTATE
                elif keys.get("FDSTOREREMOVE") == "1":
                    fd = self.fds.pop(keys["FDNAME"], None)
                    if fd is not None:
                        os.close(fd)
                else:
                    for fd in fds:
                        os.close(fd)
                self.cond.notify_all()

    def read(self, until_state=False, timeout=20):
        """Waits for the next state (until_state); else returns."""
        with self.cond:
            if until_state:
                n = self.states
                check(self.cond.wait_for(lambda: self.states > n, timeout), "no state came to the fd store")

    def empty(self):
        with self.cond:
            return not self.fds

    def take(self):
        """What the next process gets: as systemd does, a stored fd that
        hung up is dropped first, unless stored with FDPOLL=0."""
        with self.cond:
            for name in list(self.polled & set(self.fds)):
                p = select.poll()
                p.register(self.fds[name], 0)
                if p.poll(0):
                    os.close(self.fds.pop(name))
            return dict(self.fds)

    def close(self, keep_sockets=False):
        """A stop: systemd closes every fd of the store. keep_sockets: the
        sockets stay open (returned), the gadget's link among them, so that
        only its report pipe's closing can tell the sandbox to end."""
        kept = []
        with self.cond:
            for fd in self.fds.values():
                if keep_sockets and stat.S_ISSOCK(os.fstat(fd).st_mode):
                    kept.append(fd)
                else:
                    os.close(fd)
            self.fds = {}
        return kept


def config(tmp, timeout="30s"):
    """FdStore=yes; limits by rlimits: no systemd here to make the gadgets'
    scopes (the guest's service check has them)."""
    path = os.path.join(tmp, "gadgetd.conf")
    with open(path, "w") as f:
        f.write("[Daemon]\nFdStore=yes\nFdStoreTimeout=%s\n" % timeout)
    return ["--config", path, "--limits-mode", "rlimits"]


def handoff(d, store):
    """SIGTERM: gadgetd pushes its state and exits 0 without stopping its gadgets."""
    with store.cond:
        n = store.states
    d.proc.terminate()
    with store.cond:
        check(store.cond.wait_for(lambda: store.states > n, 20), "no state came to the fd store")
    check(d.proc.wait(timeout=30) == 0, "gadgetd's exit after the handoff: %r" % d.proc.returncode)
    check("handed 1 gadgets to the next gadgetd" in d.logtext(), "the handoff's line: %s" % d.logtext()[-1500:])


def start_from_store(d, store, env):
    """The next gadgetd, passed the store's fds as systemd passes them."""
    held = store.take()
    names = list(held)
    fds = [held[n] for n in names]

    def place():
        high = [os.dup(fd) for fd in fds]  # above 3 + len(fds): the test holds more than that
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i, inheritable=True)
            # As systemd (NonBlocking=no): the open file loses O_NONBLOCK.
            os.set_blocking(3 + i, True)
    e = dict(env, LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=":".join(names))
    cmd = ["sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"', "sh", GADGETD, "--policy-dir", d.pol,
           "--state-dir", os.path.join(d.tmp, "state"), "--socket", d.sock, "--run-dir", os.path.join(d.tmp, "run"),
           *d.extra]
    d.proc = subprocess.Popen(cmd, stdout=d.log, stderr=subprocess.STDOUT, env=e, preexec_fn=place, close_fds=False)
    # The control socket was handed on, bound: its path stays.
    wait_for(lambda: d.ctl("list", timeout=10).returncode == 0 or d.proc.poll() is not None,
             what="the next gadgetd to answer")
    check(d.proc.poll() is None, "the next gadgetd ended: %s" % d.logtext()[-2000:])


def kv(d, op, args):
    r = d.ctl("call", "store", "binding", json.dumps({"binding": "DATA", "op": op, "args": args}))
    check(r.returncode == 0, "kv %s: %r" % (op, r.stderr))
    return json.loads(r.stdout)


@test
def fdstore_restart_keeps_gadgets(tmp):
    store = Store(tmp)
    env = dict(os.environ, NOTIFY_SOCKET=store.path)
    with Daemon(tmp, extra=config(tmp), env=env) as d:
        d.add("store", "Restart=always\n[Binding DATA]\nType=kv\n")
        wait_for(lambda: d.state("store") == "ready", what="store ready")
        kv(d, "put", {"key": "count", "value": 1})
        pid = d.status("store")["pid"]
        for round in range(3):
            # A control connection open across the handoff, whose client
            # leaves before the next gadgetd comes (systemd sees it hang up).
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(d.sock)
            check(d.ctl("list").returncode == 0, "list")  # accepted by now: the backlog is taken in order
            handoff(d, store)
            client.close()
            check(pid_alive(pid), "round %d: the worker %d ended with gadgetd" % (round, pid))
            start_from_store(d, store, env)
            wait_for(lambda: d.state("store") == "ready", what="store adopted: %s" % d.logtext()[-3000:])
            check(d.status("store")["pid"] == pid, "round %d: a new worker: %r" % (round, d.status("store")))
            check(kv(d, "get", {"key": "count"}) == 1, "round %d: the kv value" % round)
            # The next gadgetd empties the store: no copy of its ends is left there.
            wait_for(store.empty, what="the store emptied: %r" % store.take())
        check("adopted" in d.logtext(), "the adoption's line")
        # A stop: the handoff again, then systemd closes the store: the
        # sandbox ends by itself, told by its report pipe alone (its link
        # kept open here: the test gadget would end at its end of file).
        handoff(d, store)
        kept = store.close(keep_sockets=True)
        check(kept, "no socket among the store's fds")
        wait_for(lambda: not pid_alive(pid), timeout=10, what="the sandbox's end once the store closed")
        for fd in kept:
            os.close(fd)


@test
def fdstore_keeps_a_runs_core(tmp):
    """CoreDump=: a run handed on through the fd store keeps its core
    memfd, so its crash under the next gadgetd is kept."""
    store = Store(tmp)
    env = dict(os.environ, NOTIFY_SOCKET=store.path)
    with Daemon(tmp, extra=config(tmp), env=env) as d:
        d.add("dump", "Restart=no\nCoreDump=64K\n")
        wait_for(lambda: d.state("dump") == "ready", what="dump ready")
        handoff(d, store)
        start_from_store(d, store, env)
        wait_for(lambda: d.state("dump") == "ready", what="dump adopted: %s" % d.logtext()[-3000:])
        d.ctl("call", "dump", "crash_null")
        wait_for(lambda: d.state("dump") == "failed", what="dump failed")
        c = json.loads(d.ctl("--json", "cores", "dump").stdout)
        check(len(c) == 1 and c[0]["run"] == 1 and 0 < c[0]["size"] <= 65536, "its core kept: %r %s"
              % (c, d.logtext()[-1500:]))


@test
def fdstore_nobody_comes_back(tmp):
    """The store kept but no gadgetd takes it: the sandbox ends within FdStoreTimeout=."""
    store = Store(tmp)
    env = dict(os.environ, NOTIFY_SOCKET=store.path)
    with Daemon(tmp, extra=config(tmp, "1s"), env=env) as d:
        d.add("plain", "Restart=always\n")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = d.status("plain")["pid"]
        handoff(d, store)
        check(pid_alive(pid), "the worker ended with gadgetd")
        wait_for(lambda: not pid_alive(pid), what="the sandbox's end after FdStoreTimeout=1s")
        store.close()


@test
def fdstore_without_manager_stops(tmp):
    """FdStore=yes but no NOTIFY_SOCKET: SIGTERM is a stop, as without it."""
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    with Daemon(tmp, extra=config(tmp), env=env) as d:
        d.add("plain", "Restart=always\n")
        wait_for(lambda: d.state("plain") == "ready", what="plain ready")
        pid = d.status("plain")["pid"]
        d.stop()
        check("stopping every gadget instead: no service manager" in d.logtext(), "the stop's reason")
        wait_for(lambda: not pid_alive(pid), what="the worker's end")


@test
def fdstore_with_the_gateway(tmp):
    """The gateway and the metrics endpoint across two handoffs through the
    fd store: their listening sockets are stored and taken back (the same
    ports), 2 callers through the gateway and a scraper of /metrics see
    every call and scrape answered, none refused or lost, and a browser's
    session cookie from before is still valid."""
    store = Store(tmp)
    env = dict(os.environ, NOTIFY_SOCKET=store.path)
    g = Gateway(tmp, extra=["--limits-mode", "rlimits"])
    with open(g.config, "a") as f:
        f.write("[Daemon]\nFdStore=yes\nFdStoreTimeout=30s\n")
    m = metrics_listen(tmp, g.config)
    g.env = env
    with g:
        g.add("plain", "")
        g.wait_ready("plain")
        pid = g.status("plain")["pid"]
        st, hd, _ = g.request("GET", "/?token=" + g.token, auth=False)
        check(st == 303, "login: %d" % st)
        cookie = hd["set-cookie"].split(";")[0]
        with GatewayCallers(g, "plain", 2) as callers, Scraper(m, "gadgetd_gadgets 1\n") as scraper:
            for i in range(2):
                callers.more(50, "50 calls before handoff %d" % i)
                scraper.more(2, "2 scrapes before handoff %d" % i)
                handoff(g, store)
                start_from_store(g, store, env)
                wait_for(lambda: g.state("plain") == "ready", what="plain adopted: %s" % g.logtext()[-3000:])
            callers.more(50, "50 calls after the last handoff")
            scraper.more(2, "2 scrapes after the last handoff")
        print("through the gateway, 2 handoffs: %d ok, %d refused, %d lost; scrapes: %d ok, %d refused, %d lost"
              % (callers.ok(), callers.refused(), callers.lost(), scraper.ok, scraper.refused, scraper.lost))
        check(callers.refused() == 0 and callers.lost() == 0, "calls refused or lost: %r" % callers.errors())
        check(scraper.refused == 0 and scraper.lost == 0, "scrapes refused or lost: %r" % scraper.errors[:5])
        check(g.logtext().count("its socket kept across gadgetd's re-exec") == 2, "the gateway's socket not kept")
        check(g.logtext().count("the socket kept across gadgetd's re-exec") == 2, "the metrics socket not kept")
        st, _, body = g.request("GET", "/api/gadgets", auth=False, headers={"Cookie": cookie})
        check(st == 200, "the session cookie from before the handoffs: %d %r" % (st, body))
        check(g.status("plain")["pid"] == pid, "the gadget's pid changed")


if __name__ == "__main__":
    sys.exit(main())
