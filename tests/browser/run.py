#!/usr/bin/env python3
"""The browser tests' runner (meson test "browser"): starts a real gadgetd
with its gateway and the counter and notes examples, then runs
workshop_test.cjs under the first `node` on PATH (Debian 12's is 18) in
Debian's chromium, driven by playwright-core from tests/browser/node_modules
(`scripts/deps` installs it with `npm ci` from the committed
package-lock.json). A missing chromium, Node.js or playwright-core, or a
chromium that cannot start, is a part scripts/deps promised: a skip on a
developer's machine, a failure under CI (tests/parts.py).
Environment: GADGETD, GADGETCTL, TESTGADGET, EXAMPLES, SCREENSHOT."""
import filecmp
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from gateway_util import Gateway  # noqa: E402
from harness import EXAMPLES, Failure, guard_host_dirs, host_dirs_left, need, policy  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
MODULES = os.path.join(HERE, "node_modules")
# Written by scripts/deps after `npm ci`: the package-lock.json installed.
STAMP = os.path.join(MODULES, ".gadgetd-lock")
# Debian 12's Node.js, what scripts/deps installs on the README's platform.
DEBIAN_NODE = 18


def node_major(node):
    r = subprocess.run([node, "--version"], capture_output=True, text=True)
    v = r.stdout.strip()
    try:
        return int(v.lstrip("v").split(".")[0]), v
    except ValueError:
        return 0, v or r.stderr.strip()


def lock_runs_on_debian_node():
    """Every package in package-lock.json must run on Debian 12's Node.js:
    an engines.node of ">=N" with N above it fails the test, whichever node
    this host has (a newer one would hide it)."""
    with open(os.path.join(HERE, "package-lock.json")) as f:
        lock = json.load(f)
    for name, pkg in sorted(lock.get("packages", {}).items()):
        want = (pkg.get("engines") or {}).get("node", "")
        m = re.fullmatch(r">=\s*v?(\d+)(\.\d+)*", want.strip())
        if want and not (m and int(m.group(1)) <= DEBIAN_NODE):
            raise Failure("%s wants Node.js %s; Debian 12's is %d (pin a release that runs on it)" %
                          (name or "package.json", want, DEBIAN_NODE))


def main():
    try:
        lock_runs_on_debian_node()
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    if not os.access(CHROMIUM, os.X_OK):
        need("chromium", "%s is not installed (scripts/deps installs Debian's chromium)" % CHROMIUM)
    node = shutil.which("node")
    if not node:
        need("Node.js", "no node on PATH (scripts/deps installs Debian's nodejs)")
    major, version = node_major(node)
    if major < 18:
        need("Node.js 18 or later", "%s is %s (playwright-core, package.json, needs 18)" % (node, version))
    if not (os.path.exists(STAMP) and filecmp.cmp(STAMP, os.path.join(HERE, "package-lock.json"), shallow=False)):
        need("playwright-core", "%s is missing or not from package-lock.json: run scripts/deps (npm ci)" % MODULES)
    print("node: %s %s" % (node, version), flush=True)
    guarded = guard_host_dirs()  # as for every integration test (harness.py)
    tmp = tempfile.mkdtemp(prefix="gadgetd-browser-")
    os.chmod(tmp, 0o755)
    try:
        with Gateway(tmp) as g:
            for n in ("counter", "notes"):
                shutil.copy(os.path.join(EXAMPLES, n + ".policy"), g.pol)
            # The counter starts only at its first call (its UI's).
            with open(os.path.join(g.pol, "counter.policy"), "r+") as f:
                text = f.read().replace("[Gadget]", "[Gadget]\nStart=on-demand", 1)
                f.seek(0)
                f.write(text)
            policy(g.pol, "plain")
            # A gadget whose file gets an error once it runs: kept on its
            # previous policy, which its card says.
            policy(g.pol, "kept")
            # The test gadget behind a UI (any page: the gateway gives it
            # gadget.call), for typed calls and broken results from a frame.
            policy(g.pol, "typed", "UI=%s\n" % os.path.join(EXAMPLES, "counter.html"))
            # A UI that keeps its port and posts where the stub never would.
            hostile = os.path.join(HERE, "hostile.html")
            policy(g.pol, "hostile", "UI=%s\n" % hostile)
            # A gatekeeper whose UI and admin UI are that page, another
            # gatekeeper, and a gadget whose binding's calls of keeper's
            # echo wait for a person's approval.
            policy(g.pol, "keeper", "Gatekeeper=yes\nRequireTypes=no\nAdminMethods=say\nAdminUI=%s\nUI=%s\n" % (hostile, hostile))
            policy(g.pol, "keeper2", "Gatekeeper=yes\nRequireTypes=no\nAdminMethods=say\n")
            policy(g.pol, "asker", "UI=%s\n[Binding KEEP]\nType=gadget\nTarget=keeper\nMethods=echo\n"
                                   "Approve=echo\nApproveTimeout=30s\n" % hostile)
            # A gadget that calls plain through a binding (a trace of three
            # spans) and restarts when it crashes (its lifecycle events).
            policy(g.pol, "chain", "Restart=on-failure\n[Binding NEXT]\nType=gadget\nTarget=plain\nMethods=echo\n")
            # The tickets example's gatekeeper, for its admin UI (its admin
            # methods use only its kv; the API's token file must exist).
            token = os.path.join(tmp, "tickets.token")
            tickets_token = secrets.token_hex(24)
            with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(tickets_token + "\n")
            with open(os.path.join(EXAMPLES, "tickets.policy")) as f:
                text = re.sub(r"^Credential=.*$", "Credential=" + token, f.read(), flags=re.M)
            with open(os.path.join(g.pol, "tickets.policy"), "w") as f:
                f.write(text)
            g.ctl("reload")
            g.wait_ready("notes", "plain", "typed", "hostile", "keeper", "keeper2", "asker", "tickets", "kept", "chain")
            policy(g.pol, "kept", "Bogus=1\n")
            g.ctl("reload")
            os.makedirs(os.path.dirname(os.environ["SCREENSHOT"]), exist_ok=True)
            env = dict(os.environ, GATEWAY_URL=g.base, GATEWAY_TOKEN=g.token, CHROMIUM=CHROMIUM,
                       AUDIT_LOG=os.path.join(tmp, "state", "audit.log"),
                       PROFILE_DIR=os.path.join(tmp, "profile"), TICKETS_TOKEN=tickets_token)
            r = subprocess.run([node, os.path.join(HERE, "workshop_test.cjs")], env=env, timeout=240)
            if r.returncode not in (0, 77):
                print("# gadgetd's log, last 60 lines:\n# " + "\n# ".join(g.logtext().splitlines()[-60:]))
        left = host_dirs_left(guarded)
        if left:
            raise Failure("the test wrote to the host's gadgetd directories: %s" % ", ".join(left))
        if r.returncode == 77:
            need("a chromium that starts", "playwright-core could not launch %s (why is above)" % CHROMIUM)
        return r.returncode
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
