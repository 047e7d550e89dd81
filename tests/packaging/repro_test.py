#!/usr/bin/env python3
"""The packages are reproducible: built a second time from the same
sources in another directory (a longer path, another name; with
DEB_BUILD_OPTIONS=nocheck, which runs no test and builds none of the tests
and benchmarks, -Dtests=false in debian/rules: that changes what is built
besides the packages, never what is in them), every .deb is byte for byte
the one built first (pkgtest.build_debs). A path of the build tree
compiled into a program, a time stamp, or a packaged file that nocheck
changes makes them differ; the test names the package and its files that
differ."""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkgtest import build_debs, check, debs_cache, locked, package_build, run, source_commit, source_files  # noqa: E402


def members(deb):
    """{path: sha256} of the files in deb's data."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
        out = {}
        for top, _, files in os.walk(tmp):
            for f in files:
                p = os.path.join(top, f)
                if not os.path.islink(p):
                    out[os.path.relpath(p, tmp)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        return out


def main():
    _, first, _ = build_debs()
    commit = source_commit()
    # A fixed path (as build_debs' own, for the compiler cache: the same
    # command lines as the last run's second build), held by a lock.
    base = debs_cache()
    lock = locked(os.path.join(base, "again.lock"))
    tmp = os.path.join(base, "again")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        tree = os.path.join(tmp, "a", "longer", "path", "gadgetd-again")
        os.makedirs(os.path.dirname(tree))
        package_build(commit, None if commit else source_files(), tree, check=False)
        again = {os.path.basename(d): d for d in glob.glob(os.path.join(os.path.dirname(tree), "*.deb"))}
        check(sorted(again) == sorted(os.path.basename(d) for d in first),
              "the second build made other packages: %r" % sorted(again))
        for deb in first:
            other = again[os.path.basename(deb)]
            if open(deb, "rb").read() == open(other, "rb").read():
                print("ok - %s is the same" % os.path.basename(deb))
                continue
            a, b = members(deb), members(other)
            differ = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
            check(False, "%s differs between the two builds: %s" % (os.path.basename(deb),
                                                                     ", ".join(differ[:10]) or "its control data"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        lock.close()


if __name__ == "__main__":
    run(main)
