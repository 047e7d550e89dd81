#!/usr/bin/env python3
"""The browser tests' runner (meson test "browser"): installs playwright-core
into the build directory with `npm ci` when missing (from the committed
package-lock.json, which records no download addresses), starts a real
gadgetd with its gateway and the counter and notes examples, then runs
workshop_test.cjs in Debian's chromium. Exits 77 (skip) with the reason if
chromium, node or the npm packages cannot be had.
Environment: GADGETD, GADGETCTL, TESTGADGET, EXAMPLES, BROWSER_DIR (where
node_modules goes), SCREENSHOT."""
import fcntl
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from gateway_util import Gateway  # noqa: E402
from harness import EXAMPLES, Failure, guard_host_dirs, host_dirs_left, policy, skip  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
NPM_FILES = ("package.json", "package-lock.json", ".npmrc")


def npm_install(dest):
    """node_modules in dest, installed once per package-lock.json (one
    process at a time: meson may run tests in parallel)."""
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = all(os.path.exists(os.path.join(dest, f)) and
                    filecmp.cmp(os.path.join(HERE, f), os.path.join(dest, f), shallow=False) for f in NPM_FILES)
        if fresh and os.path.isdir(os.path.join(dest, "node_modules", "playwright-core")):
            return
        for f in NPM_FILES:
            shutil.copy(os.path.join(HERE, f), dest)
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=dest, capture_output=True, text=True,
                           timeout=300)
        if r.returncode != 0:
            skip("npm ci of playwright-core failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])


def main():
    if not os.access(CHROMIUM, os.X_OK):
        skip("%s is not installed (scripts/deps installs Debian's chromium)" % CHROMIUM)
    if not shutil.which("node") or not shutil.which("npm"):
        skip("node and npm are not installed")
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0] or 0) < 20:
        skip("playwright-core needs Node.js 20 or later, this is %s" % version)
    guarded = guard_host_dirs()  # as for every integration test (harness.py)
    dest = os.environ["BROWSER_DIR"]
    npm_install(dest)
    tmp = tempfile.mkdtemp(prefix="gadgetd-browser-")
    os.chmod(tmp, 0o755)
    try:
        with Gateway(tmp) as g:
            for n in ("counter", "notes"):
                shutil.copy(os.path.join(EXAMPLES, n + ".policy"), g.pol)
            policy(g.pol, "plain")
            g.ctl("reload")
            g.wait_ready("counter", "notes", "plain")
            os.makedirs(os.path.dirname(os.environ["SCREENSHOT"]), exist_ok=True)
            env = dict(os.environ, GATEWAY_URL=g.base, GATEWAY_TOKEN=g.token, CHROMIUM=CHROMIUM,
                       AUDIT_LOG=os.path.join(tmp, "state", "audit.log"),
                       PROFILE_DIR=os.path.join(tmp, "profile"),
                       NODE_PATH=os.path.join(dest, "node_modules"))
            r = subprocess.run(["node", os.path.join(HERE, "workshop_test.cjs")], env=env, timeout=240)
        left = host_dirs_left(guarded)
        if left:
            raise Failure("the test wrote to the host's gadgetd directories: %s" % ", ".join(left))
        return r.returncode
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
