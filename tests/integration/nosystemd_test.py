#!/usr/bin/env python3
"""The build without libsystemd (meson -Dsystemd=disabled), as
docs/operating.md promises it: it builds, and the daemon and `gadgetd run` of that build
pass the daemon tests named below (run from daemon_test.py and
sandbox_test.py against its binaries, not copied). The second build lives
in NOSYSTEMD_BUILD, configured once and rebuilt incrementally, one build at
a time (a lock beside it): scripts/test makes it beforehand, in the
background on the CPU the tests leave idle (--build), and the test then
finds nothing or little left to build.
Usage: nosystemd_test.py TEST | --build. Environment: MESON, SOURCE_ROOT, NOSYSTEMD_BUILD."""
import fcntl
import os
import subprocess
import sys

from harness import Failure, check, main, test

MESON = os.environ.get("MESON", "meson")
SOURCE_ROOT = os.environ.get("SOURCE_ROOT", "")
BUILD = os.environ.get("NOSYSTEMD_BUILD", "")
HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["supervisor/gadgetd", "ctl/gadgetctl", "worker/sandbox/gadgetd-sandbox", "tests/integration/testgadget",
           "tests/integration/probe"]
# Tests of the daemon's and gadgetd run's everyday paths, by file.
SMOKE = {"daemon_test.py": ["load_list_call_stop", "sigterm_stops_all"],
         "sandbox_test.py": ["uid_unique_per_gadget"]}


def build():
    with open(BUILD + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build_locked()


def build_locked():
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        r = subprocess.run([MESON, "setup", BUILD, SOURCE_ROOT, "-Dsystemd=disabled", "-Dman=disabled"],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "meson setup -Dsystemd=disabled failed:\n%s%s" % (r.stdout[-3000:], r.stderr[-3000:]))
    # One job: the test runs beside others (meson runs as many tests as
    # there are cores), so its build takes one core as a test does.
    r = subprocess.run(["ninja", "-j1", "-C", BUILD] + TARGETS, capture_output=True, text=True, timeout=1200)
    check(r.returncode == 0, "the build without libsystemd failed:\n%s%s" % (r.stdout[-3000:], r.stderr[-3000:]))


@test
def nosystemd_builds_and_runs(tmp):
    build()
    r = subprocess.run([MESON, "introspect", "--buildoptions", BUILD], capture_output=True, text=True, timeout=60)
    check('"name": "systemd", "value": "disabled"' in r.stdout.replace("\n", ""), "the option did not take")
    gadgetd = os.path.join(BUILD, "supervisor", "gadgetd")
    with open(gadgetd, "rb") as f:
        # the library's file name (sd_dl.c dlopens it by name); a message may name the library
        check(b"libsystemd.so" not in f.read(), "%s still loads libsystemd" % gadgetd)
    env = dict(os.environ, GADGETD=gadgetd, GADGETCTL=os.path.join(BUILD, "ctl", "gadgetctl"),
               TESTGADGET=os.path.join(BUILD, "tests", "integration", "testgadget"),
               PROBE=os.path.join(BUILD, "tests", "integration", "probe"))
    for script, names in SMOKE.items():
        for name in names:
            r = subprocess.run([sys.executable, os.path.join(HERE, script), name], env=env, capture_output=True,
                               text=True, timeout=300)
            check(r.returncode == 0, "%s %s against the build without libsystemd: %s%s" %
                  (script, name, r.stdout[-2000:], r.stderr[-2000:]))


if __name__ == "__main__":
    if sys.argv[1:] == ["--build"]:
        try:
            build()
        except Failure as e:
            raise SystemExit("nosystemd_test.py --build: %s" % e)
        raise SystemExit(0)
    raise SystemExit(main())
