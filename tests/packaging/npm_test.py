#!/usr/bin/env python3
"""The JavaScript SDK's npm tarball (`ninja npm-pack`, `npm pack` of
sdk/js): it holds the package's files as the tree has them and nothing
else, installs offline with npm into a fresh folder, and a gadget on the
installed copy (examples/js/counter.js) answers a call under the sandbox.
Usage: npm_test.py TEST."""
import os
import shutil
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import check, gadgetd_run, main, need, test  # noqa: E402

SRC = os.environ.get("SOURCE_ROOT", "")
TARBALL = os.environ.get("NPM_TARBALL", "")
FILES = ["README.md", "index.d.ts", "index.js", "package.json", "wire.js"]


@test
def npm_tarball_installs_and_serves(tmp):
    npm = shutil.which("npm")
    node = shutil.which("node") or shutil.which("nodejs")
    if not npm or not node:
        need("npm and Node.js", "not installed (scripts/deps installs nodejs and npm)")
    sdk = os.path.join(SRC, "sdk", "js")
    with tarfile.open(TARBALL) as t:
        names = sorted(m.name for m in t.getmembers() if m.isfile())
        check(names == ["package/" + f for f in FILES], "the tarball's files: %r" % names)
        for f in FILES:
            check(t.extractfile("package/" + f).read() == open(os.path.join(sdk, f), "rb").read(),
                  "%s differs from the tree's" % f)
    prefix = os.path.join(tmp, "app")
    os.mkdir(prefix)
    # Offline, with a cache of its own: nothing but the tarball is there to install.
    r = subprocess.run([npm, "install", "--offline", "--no-audit", "--no-fund", "--no-save", "--cache",
                        os.path.join(tmp, "npm-cache"), "--prefix", prefix, TARBALL],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "npm install: %r %r" % (r.stdout[-1000:], r.stderr[-1000:]))
    modules = os.path.join(prefix, "node_modules")
    check(os.path.isfile(os.path.join(modules, "@gadgetd", "gadget", "index.js")), "not installed: %r" %
          os.listdir(modules))
    program = os.path.join(SRC, "examples", "js", "counter.js")
    pol = os.path.join(tmp, "counter.policy")
    with open(pol, "w") as f:
        f.write("[Gadget]\nName=counter-npm\nExec=%s\nArguments=%s\nSystemLibraries=yes\nReadOnlyPaths=%s %s\n"
                "Environment=NODE_PATH=%s\n[Binding COUNT]\nType=kv\n" % (os.path.realpath(node), program, program,
                                                                       modules, modules))
    os.chmod(pol, 0o644)
    for root, dirs, files in os.walk(prefix):  # the gadget's uid reads them, whatever npm's umask was
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755 if n in dirs else 0o644)
    os.chmod(prefix, 0o755)
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--call", "increment"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.strip() == "1", "the installed SDK's counter: %r" % (r,))


if __name__ == "__main__":
    sys.exit(main())
