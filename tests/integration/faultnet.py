"""The fault tests' network: the test process enters a network namespace
of its own (the hub, holding a bridge), and each side — the store, each
node, the clients — gets one more, joined to the bridge by a veth pair,
with an address of RFC 2544's benchmarking range (198.18.35.0/24). None
of it is the host's: the hub and everything in it go away with the test
process (each side's namespace is held by a `sleep` that dies with the
test, PR_SET_PDEATHSIG), and no traffic ever leaves this machine.

Faults are nftables rules in the receiving side's own table (`inet
fault`, its input hook): drop(src, dst) drops what src sends to dst (a
one-way cut: dst still reaches src), partition(a, b) both ways, heal()
takes every rule away. Packet loss and delay are made without netem
(this kernel has none): loss(src, dst, P) drops P% of what src sends to
dst at random (`numgen random mod 100 < P drop`, each packet its own
draw); delay(src, dst, D, J) holds each such packet D ms plus up to J ms
(faultdelay.c: an NFQUEUE rule and a program that issues each packet's
verdict when it is due), at most CAP packets at once (more are dropped,
as a full link's). heal() ends those too.
Programs run in a side with its wrap(): `nsenter --net=...`; a thread
enters a side with enter() (setns: network namespaces are per thread)."""
import ctypes
import os
import socket
import time
import shutil
import signal
import subprocess
import threading

from harness import check, need, skip, wait_for

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
NET = "198.18.35."
SO_RCVBUFFORCE = 33
DELAY_CAP = 2000  # packets a delayed link holds at once (faultdelay's queue length)
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _netns(pid):
    return os.readlink("/proc/%d/ns/net" % pid)


class Side:
    def __init__(self, name, holder, ip):
        self.name, self.holder, self.ip = name, holder, ip
        self.ns = "/proc/%d/ns/net" % holder.pid


class Fabric:
    """The hub and its sides. Made by Fabric(); close() ends the sides."""

    def __init__(self):
        if os.geteuid() != 0:
            skip("the fault tests make network namespaces (root only)")
        for tool in ("nft", "ip", "nsenter", "unshare"):
            if not shutil.which(tool):
                need("nftables" if tool == "nft" else "iproute2",
                     "the fault tests cut links with nftables rules in network namespaces of their own")
        if threading.active_count() > 2:
            # The harness's stderr copier is one; anything more would stay
            # in the host's namespace (namespaces are per thread).
            raise RuntimeError("Fabric() must come before the test starts threads")
        if _libc.unshare(CLONE_NEWNET) != 0:
            skip("unshare(CLONE_NEWNET) refused: errno %d" % ctypes.get_errno())
        self.sides = {}
        self._ip("link", "set", "lo", "up")
        self._ip("link", "add", "fbr", "type", "bridge")
        self._ip("link", "set", "fbr", "up")
        self._delays = []  # faultdelay processes, until heal()
        self._queues = 0  # the netfilter queue numbers given out
        r = subprocess.run(["nft", "-f", "-"], input="add table inet probe\ndelete table inet probe\n", text=True,
                           capture_output=True)
        if r.returncode != 0:  # a host property: the kernel's (no nf_tables)
            skip("nftables rules cannot be made here (the kernel has no nf_tables?): %s" % r.stderr.strip())

    def _ip(self, *args, side=None):
        cmd = ["ip", *args] if side is None else [*self.wrap(side), "ip", *args]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    def side(self, name):
        """A new side called name: its namespace, link and address."""
        holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"], preexec_fn=_die_with_parent)
        mine = _netns(os.getpid())
        wait_for(lambda: _netns(holder.pid) != mine, timeout=10, what="side %s's network namespace" % name)
        ip = NET + str(10 + len(self.sides))
        s = Side(name, holder, ip)
        self.sides[name] = s
        self._ip("link", "add", "f-" + name, "type", "veth", "peer", "name", "eth0", "netns", str(holder.pid))
        self._ip("link", "set", "f-" + name, "master", "fbr", "up")
        self._ip("link", "set", "lo", "up", side=name)
        self._ip("addr", "add", ip + "/24", "dev", "eth0", side=name)
        self._ip("link", "set", "eth0", "up", side=name)
        self.nft(name, "add table inet fault\n"
                       "add chain inet fault input { type filter hook input priority 0; policy accept; }\n")
        return s

    def wrap(self, name):
        """The command line prefix that runs a program in side name."""
        return ["nsenter", "--net=" + self.sides[name].ns]

    def nft(self, name, script):
        r = subprocess.run([*self.wrap(name), "nft", "-f", "-"], input=script, text=True, capture_output=True)
        check(r.returncode == 0, "nft in %s: %s (%r)" % (name, r.stderr.strip(), script))

    def drop(self, src, dst):
        """What src sends to dst is lost (dst's replies still reach src)."""
        self.nft(dst, "add rule inet fault input ip saddr %s drop\n" % self.sides[src].ip)

    def partition(self, a, b):
        self.drop(a, b)
        self.drop(b, a)

    def isolate(self, name, others):
        """name cut both ways from each of others."""
        for o in others:
            self.partition(name, o)

    def heal(self):
        for p in self._delays:  # each takes its rule away and lets what it holds through
            p.terminate()
        for p in self._delays:
            p.wait(timeout=10)
            check(p.returncode == 0, "faultdelay ended with %r" % p.returncode)
        self._delays.clear()
        for name in self.sides:
            self.nft(name, "flush chain inet fault input\n")

    def loss(self, src, dst, pct):
        """About pct% of what src sends to dst is lost, until heal()."""
        self.nft(dst, "add rule inet fault input ip saddr %s numgen random mod 100 < %d drop\n"
                 % (self.sides[src].ip, pct))

    def delay(self, src, dst, ms, jitter=0, cap=DELAY_CAP):
        """What src sends to dst arrives ms (+ 0..jitter) ms late, until
        heal(): faultdelay in dst's side, ready when this returns."""
        prog = os.environ.get("FAULTDELAY")
        if not prog:
            need("FAULTDELAY", "the delay fault holds packets with tests/integration/faultdelay (meson builds it)")
        self._queues += 1
        p = subprocess.Popen([*self.wrap(dst), prog, str(self._queues), self.sides[src].ip, str(ms), str(jitter),
                              str(cap)], stdout=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        line = p.stdout.readline()  # "ready", or nothing if it failed (its stderr says why)
        self._delays.append(p)
        check(line.strip() == "ready", "faultdelay %s -> %s did not start (exit %r)" % (src, dst, p.poll()))

    def enter(self, name):
        """Moves the calling thread into side name (its sockets made
        afterwards are that side's)."""
        fd = os.open(self.sides[name].ns, os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into side %s" % name)
        finally:
            os.close(fd)

    def close(self):
        for p in self._delays:
            p.kill()
            p.wait()
        for s in self.sides.values():
            if s.holder.poll() is None:
                s.holder.kill()
                s.holder.wait()


def socket_in(fab, name, *args):
    """A socket of side name's network (made by a thread that enters it)."""
    out = []

    def make():
        fab.enter(name)
        out.append(socket.socket(*args))
    t = threading.Thread(target=make)
    t.start()
    t.join()
    return out[0]


def check_loss_delay(fab, src, dst, pct=30, ms=150, n=400):
    """Loss and delay seen from outside, on the link from side src to dst
    (which nothing else uses): of n datagrams about pct% are lost; a TCP
    connection's handshake (its SYN held) takes at least ms. Returns the
    share lost and the connections' times (s)."""
    port = 7999
    rx = socket_in(fab, dst, socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket_in(fab, src, socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind((fab.sides[dst].ip, port))
    rx.settimeout(10)
    rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)  # all n held until read
    tx.sendto(b"first", (fab.sides[dst].ip, port))  # the neighbour resolved before the count
    check(rx.recv(64) == b"first", "the datagram before the loss")
    fab.loss(src, dst, pct)
    for i in range(n):
        tx.sendto(b"%d" % i, (fab.sides[dst].ip, port))
    fab.heal()
    tx.sendto(b"end", (fab.sides[dst].ip, port))  # after the heal: it arrives, after the others (one path)
    got = 0
    while rx.recv(64) != b"end":
        got += 1
    rx.close()
    tx.close()
    lost = 1 - got / n
    check(abs(lost - pct / 100) < 0.12, "loss %d%% on %s -> %s: %d of %d datagrams lost" % (pct, src, dst, n - got, n))

    ls = socket_in(fab, dst, socket.AF_INET, socket.SOCK_STREAM)
    ls.bind((fab.sides[dst].ip, port))
    ls.listen(8)
    fab.delay(src, dst, ms)
    times = []
    try:
        for _ in range(3):
            c = socket_in(fab, src, socket.AF_INET, socket.SOCK_STREAM)
            c.settimeout(10)
            t0 = time.monotonic()
            c.connect((fab.sides[dst].ip, port))
            times.append(time.monotonic() - t0)
            c.close()
            ls.accept()[0].close()
    finally:
        fab.heal()
        ls.close()
    check(min(times) >= ms / 1000 and max(times) < ms / 1000 + 1,
          "delay %d ms on %s -> %s: handshakes took %s s" % (ms, src, dst, " ".join("%.3f" % t for t in times)))
    return lost, times
