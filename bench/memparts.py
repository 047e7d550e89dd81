#!/usr/bin/env python3
"""bench/memparts.py: the kernel memory of each part of a sandbox, apart.

    bench/memparts.py [N]

For each part a gadget's sandbox has, N holder processes each make that
part (with util-linux's unshare, or a cgroup directory) and then wait; the
growth of the kernel's memory (/proc/meminfo: Slab, KernelStack,
PageTables, Percpu, Shmem) over the same N plain holders, divided by N,
is the part's cost. The namespaces are made inside a new user namespace,
as gadgetd makes them (net, mount, PID, IPC, UTS and cgroup namespaces
each counted beyond the user namespace alone). The mount parts mount what
each sandbox mounts (tmpfs root, /tmp, /dev/shm, /proc; on cgroup v1 a
tmpfs for /sys/fs/cgroup): each is a superblock (one tmpfs alone is a row too), and each superblock
registers shrinkers, whose slots every memory cgroup made after it holds
(memory cgroup v1, made after the N holders of the mounts part and before
they end, shows that: its row is measured twice).

The host's other processes allocate meanwhile: a shared host gives a
noisy figure, which a larger N (default 200) divides. As root. Not part of
the test suite.
"""
import os
import shutil
import subprocess
import sys
import time

FIELDS = ("Slab", "KernelStack", "PageTables", "Percpu", "Shmem")
SLEEP = shutil.which("sleep")
UNSHARE = shutil.which("unshare")


def kernel_kib():
    with open("/proc/meminfo") as f:
        m = {line.split(":")[0]: int(line.split()[1]) for line in f}
    return sum(m.get(k, 0) for k in FIELDS)


def settle():
    """Lets RCU-freed objects go before a reading."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    time.sleep(0.5)


def holders(cmd, n, first=""):
    """n processes of cmd, each ready once it wrote a byte to its pipe."""
    procs = []
    for _ in range(n):
        r, w = os.pipe()
        p = subprocess.Popen(cmd + ["sh", "-c", first + "echo >&%d; exec %s 100000" % (w, SLEEP)], pass_fds=(w,),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        os.read(r, 1)
        os.close(r)
        procs.append(p)
    return procs


def end(procs):
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def measure(cmd, n, first=""):
    """first: shell commands the holder runs before it is ready."""
    settle()
    before = kernel_kib()
    procs = holders(cmd, n, first)
    settle()
    after = kernel_kib()
    end(procs)
    return (after - before) / n


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    if os.geteuid() != 0 or not UNSHARE:
        sys.exit(__doc__)
    plain = measure([], n)
    user = measure([UNSHARE, "-U", "--map-root-user"], n)
    rows = [("a process (the holder: sh, then sleep)", plain)]
    rows.append(("user namespace", user - plain))
    for flag, name in (("-n", "network namespace"), ("-m", "mount namespace"), ("-i", "IPC namespace"),
                       ("-u", "UTS namespace"), ("-C", "cgroup namespace"), ("-p --fork", "PID namespace")):
        v = measure([UNSHARE, "-U", "--map-root-user", *flag.split()], n)
        # --fork leaves unshare waiting beside the holder: one process more.
        rows.append((name, v - user - (plain if "--fork" in flag else 0)))
    # One tmpfs more in a mount namespace (a superblock and its mount):
    # what a sandbox saves per tmpfs it does not mount.
    mntns = [UNSHARE, "-U", "--map-root-user", "-m"]
    rows.append(("one tmpfs (a superblock and its mount), beyond its mount namespace",
                 measure(mntns, n, "mount -t tmpfs t /mnt && ") - measure(mntns, n)))
    # Four tmpfs superblocks and a procfs, as a sandbox mounts (its root,
    # /tmp, /dev/shm, /proc; the cgroup tmpfs of v1 is a fifth).
    mounts = ("mount -t tmpfs a /mnt && mkdir -p /mnt/t /mnt/s /mnt/p && mount -t tmpfs b /mnt/t && "
              "mount -t tmpfs c /mnt/s && mount -t tmpfs d /mnt/p && mount -t proc p /proc && ")
    settle()
    before = kernel_kib()
    procs = []
    for _ in range(n):
        r, w = os.pipe()
        procs.append(subprocess.Popen([UNSHARE, "-U", "--map-root-user", "-m", "-p", "--fork", "--mount-proc",
                                       "sh", "-c", mounts + "echo >&%d; exec %s 100000" % (w, SLEEP)],
                                      pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        os.close(w)
        os.read(r, 1)
        os.close(r)
    settle()
    with_mounts = (kernel_kib() - before) / n
    rows.append(("4 tmpfs and a procfs, with their mount and PID namespaces", with_mounts - user - plain))
    # Memory cgroups made while those superblocks exist, and after.
    memcg = "/sys/fs/cgroup/memory"
    if os.path.isdir(memcg):
        def cgroups(tag):
            root = os.path.join(memcg, "memparts-" + tag)
            os.mkdir(root)
            settle()
            b = kernel_kib()
            for i in range(n):
                os.mkdir(os.path.join(root, str(i)))
            settle()
            v = (kernel_kib() - b) / n
            for i in range(n):
                os.rmdir(os.path.join(root, str(i)))
            os.rmdir(root)
            return v
        during = cgroups("during")
        end(procs)
        settle()
        after = cgroups("after")
        rows.append(("memory cgroup (v1), made while the N sandboxes' superblocks exist", during))
        rows.append(("memory cgroup (v1), made after they are gone", after))
    else:
        end(procs)
    for ctrl in ("pids", "cpu", "cpuacct", "cpuset"):
        d = "/sys/fs/cgroup/" + ctrl
        if not os.path.isdir(d) or os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            continue
        root = os.path.join(d, "memparts")
        os.mkdir(root)
        if ctrl == "cpuset":
            for f in ("cpuset.cpus", "cpuset.mems"):
                with open(os.path.join(d, f)) as src, open(os.path.join(root, f), "w") as dst:
                    dst.write(src.read())
        settle()
        b = kernel_kib()
        for i in range(n):
            os.mkdir(os.path.join(root, str(i)))
        settle()
        rows.append(("%s cgroup (v1)" % ctrl, (kernel_kib() - b) / n))
        for i in range(n):
            os.rmdir(os.path.join(root, str(i)))
        os.rmdir(root)
    print("| part (N = %d each) | KiB each |" % n)
    print("|---|---:|")
    for name, v in rows:
        print("| %s | %.1f |" % (name, v))


if __name__ == "__main__":
    main()
