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
takes every rule away. netem(side, ...) adds loss or delay on a side's
link where the kernel has `tc netem` (netem_missing() says why not).
Programs run in a side with its wrap(): `nsenter --net=...`; a thread
enters a side with enter() (setns: network namespaces are per thread)."""
import ctypes
import os
import shutil
import signal
import subprocess
import threading

from harness import check, need, skip, wait_for

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
NET = "198.18.35."
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
        self._netem = None
        self._netem_on = set()
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
        for name in self.sides:
            self.nft(name, "flush chain inet fault input\n")
            if name in self._netem_on:
                subprocess.run([*self.wrap(name), "tc", "qdisc", "del", "dev", "eth0", "root"], check=True)
        self._netem_on.clear()

    def netem_missing(self):
        """Why `tc netem` cannot be used here, or None (tried once, on a
        side's link, and taken away again)."""
        if self._netem is None:
            name = next(iter(self.sides))
            r = subprocess.run([*self.wrap(name), "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                                "1ms"], capture_output=True, text=True)
            if r.returncode == 0:
                subprocess.run([*self.wrap(name), "tc", "qdisc", "del", "dev", "eth0", "root"], check=True)
                self._netem = ""
            else:
                self._netem = "this kernel has no netem queueing discipline (tc: %s)" % \
                    (r.stderr.strip().splitlines() or ["?"])[-1]
        return self._netem or None

    def netem(self, name, *args):
        """tc netem ARGS on side name's link (e.g. "loss", "30%", "delay",
        "50ms"), until heal()."""
        subprocess.run([*self.wrap(name), "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", *args],
                       check=True)
        self._netem_on.add(name)

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
        for s in self.sides.values():
            if s.holder.poll() is None:
                s.holder.kill()
                s.holder.wait()
