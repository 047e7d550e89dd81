"""bench/releases.py: the release rows of bench/run (section 13).

One gadgetd with a trusted key ([Releases] TrustedKeys=), one gadget (the
tests' testgadget) installed from signed bundles of 10 MiB (the program
and a file of random bytes beside it, 10 MiB in all). Measured: `gadgetctl
install` of such a bundle to a running gadget (read, signature check,
unpacking, policy check, load, the new process's hello: the command's
whole time), and `gadgetctl deploy` of an installed version (copy, load,
hello). The calls: `callflood --paced` at 300 calls/s through the control
socket, steady (no event), during a staged rollout at 50% (`gadgetctl
deploy r 1 --percent 50`: two processes serve, each its share of the call
trees), then through alternating deploys and rollbacks (each waits for
10 calls answered after it), then through rollbacks with their state
(`gadgetctl rollback r --with-state`: the gadget held idle, its state
kept, the version before's restored, that one started; its calls wait).
Nothing here
passes or fails: the goal is a line in BENCHMARKS.md.
"""
import json
import os
import shutil
import subprocess
import time

from hostile import finish

RATE = 300
INSTALLS = 5
SWITCHES = 20
STATEFUL = 10
BLOB = 10 << 20


def calls(d):
    return json.loads(d.ctl("--json", "status", "r"))["calls"]


def flowing(d, more):
    """Waits (polling) until the gadget counted `more` calls beyond now."""
    n = calls(d)
    while calls(d) < n + more:
        time.sleep(0.005)


def bundle(ctx, d, key, version):
    """A signed bundle of version: manifest, policy, testgadget, 10 MiB."""
    src = os.path.join(ctx.work, "releases", "src-" + version)
    os.makedirs(os.path.join(src, "bin"), exist_ok=True)
    with open(os.path.join(src, "manifest"), "w") as f:
        f.write("Name=r\nVersion=%s\nProtocol=2\n" % version)
    with open(os.path.join(src, "policy"), "w") as f:
        f.write("[Gadget]\nName=r\nExec=bin/testgadget\nCallTimeout=30s\n[Binding KV]\nType=kv\n")
    shutil.copy(ctx.exe("tests/integration/testgadget"), os.path.join(src, "bin", "testgadget"))
    os.chmod(os.path.join(src, "bin", "testgadget"), 0o755)
    with open(os.path.join(src, "blob"), "wb") as f:  # the bundle 10 MiB in all
        f.write(os.urandom(max(BLOB - os.path.getsize(ctx.exe("tests/integration/testgadget")) - 4096, 0)))
    out = os.path.join(ctx.work, "releases", "r-%s.bundle" % version)
    d.ctl("bundle", src, "--key", key, "-o", out)
    return out


def timed(d, *args):
    t0 = time.monotonic_ns()
    d.ctl(*args)
    return (time.monotonic_ns() - t0) // 1000


def run(ctx):
    top = os.path.join(ctx.work, "releases")
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    key = os.path.join(top, "key.pem")
    conf = os.path.join(top, "gadgetd.conf")
    ctx.commands.append("gadgetctl install r-N.bundle  # %d times, each a signed 10 MiB bundle of the running gadget; "
                        "then callflood --paced %d 100000 SOCK r echo, steady, during gadgetctl deploy r 1 --percent "
                        "50, then through %d gadgetctl deploy r 1 / gadgetctl rollback r, then through %d gadgetctl rollback "
                        "r --with-state" % (INSTALLS, RATE, SWITCHES, STATEFUL))
    out = {"install_us": [], "deploy_us": [], "with_state_us": []}
    pub = subprocess.run([ctx.exe("ctl/gadgetctl"), "keygen", "-o", key], capture_output=True, text=True,
                         check=True).stdout.split()[-1]
    with open(conf, "w") as f:
        f.write("[Releases]\nTrustedKeys=%s\nVersionsKept=%d\n" % (pub, INSTALLS + 2))
    shutil.rmtree(os.path.join(ctx.work, "releases-state"), ignore_errors=True)
    with ctx.Daemon("releases", extra=["--config", conf], state="releases-state") as d:
        bundles = [bundle(ctx, d, key, str(i)) for i in range(1, INSTALLS + 1)]
        for b in bundles:
            out["install_us"].append(timed(d, "install", b))
        out["bundle_bytes"] = os.path.getsize(bundles[0])
        p = subprocess.Popen([ctx.exe("tests/integration/callflood"), "--paced", str(RATE), "100000", d.sock, "r",
                              "echo"], stdout=subprocess.PIPE, text=True)
        flowing(d, 150 if ctx.quick else 1500)
        out["steady"] = finish(p)
        d.ctl("deploy", "r", "1", "--percent", "50")
        p = subprocess.Popen([ctx.exe("tests/integration/callflood"), "--paced", str(RATE), "100000", d.sock, "r",
                              "echo"], stdout=subprocess.PIPE, text=True)
        flowing(d, 150 if ctx.quick else 1500)
        out["rollout"] = finish(p)
        d.ctl("rollback", "r")
        p = subprocess.Popen([ctx.exe("tests/integration/callflood"), "--paced", str(RATE), "100000", d.sock, "r",
                              "echo"], stdout=subprocess.PIPE, text=True)
        flowing(d, 10)
        for i in range(SWITCHES):
            if i % 2 == 0:
                out["deploy_us"].append(timed(d, "deploy", "r", "1"))
            else:
                out["deploy_us"].append(timed(d, "rollback", "r"))
            flowing(d, 10)
        out["switches"] = finish(p)
        # A state kept with each of the two versions, then back and forth
        # with it.
        d.ctl("deploy", "r", "1")
        d.ctl("rollback", "r", "--with-state")
        p = subprocess.Popen([ctx.exe("tests/integration/callflood"), "--paced", str(RATE), "100000", d.sock, "r",
                              "echo"], stdout=subprocess.PIPE, text=True)
        flowing(d, 10)
        for i in range(STATEFUL):
            out["with_state_us"].append(timed(d, "rollback", "r", "--with-state"))
            flowing(d, 10)
        out["with_state"] = finish(p)
    return out


def rows(v, us):
    """Table rows, and the goals as (met, text) (us() formats ns)."""
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    out, goals = [], []
    mib = v["bundle_bytes"] / 2**20
    out.append(["13 releases", "`gadgetctl install` of a signed %.1f MiB bundle, gadget running (to its new "
                "hello), median of %d" % (mib, len(v["install_us"])), us(med(v["install_us"]) * 1e3), "",
                "max %s" % us(max(v["install_us"]) * 1e3)])
    out.append(["", "`gadgetctl deploy` / `rollback` of an installed version (to its new hello), median of %d" %
                len(v["deploy_us"]), us(med(v["deploy_us"]) * 1e3), "", "max %s" % us(max(v["deploy_us"]) * 1e3)])
    if v.get("with_state_us"):
        out.append(["", "`gadgetctl rollback --with-state` (stop, keep, restore, start: to its new hello), median "
                    "of %d" % len(v["with_state_us"]), us(med(v["with_state_us"]) * 1e3), "",
                    "max %s" % us(max(v["with_state_us"]) * 1e3)])
    steady_p99 = v["steady"]["p99_us"] * 1e3
    for key, what in (("steady", "steady, no event"), ("rollout", "during a staged rollout at 50%"),
                      ("switches", "through %d deploys and rollbacks" % SWITCHES),
                      ("with_state", "through %d rollbacks with their state" % STATEFUL)):
        if key not in v:
            continue
        r = v[key]
        lost = r["sent"] - r["ok"]
        out.append(["", "paced caller, %d calls/s, %s: %d calls, %d not answered ok" % (RATE, what, r["sent"], lost),
                    us(r["p50_us"] * 1e3), us(r["p99_us"] * 1e3),
                    "%.2f× steady p99, longest gap %s" % (r["p99_us"] * 1e3 / steady_p99, us(r["gap_us"] * 1e3))])
    r = v["rollout"]
    goals.append((r["sent"] == r["ok"] and r["p99_us"] * 1e3 <= 2 * steady_p99,
                  "during a staged rollout at 50%%: 0 refused, p99 ≤ 2× the steady p99: %d not ok, %.2f×" %
                  (r["sent"] - r["ok"], r["p99_us"] * 1e3 / steady_p99)))
    r = v["switches"]
    goals.append((r["sent"] == r["ok"] and r["twice"] == 0,
                  "through %d deploys and rollbacks: 0 refused, lost or twice: %d not ok, %d twice" %
                  (SWITCHES, r["sent"] - r["ok"], r["twice"])))
    r = v.get("with_state")
    if r:
        goals.append((r["sent"] == r["ok"] and r["twice"] == 0,
                      "through %d rollbacks with their state: 0 refused, lost or twice: %d not ok, %d twice" %
                      (STATEFUL, r["sent"] - r["ok"], r["twice"])))
    return out, goals
