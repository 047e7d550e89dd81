#!/usr/bin/env python3
"""The sanitizer build's instruments (registered only in an ASan+UBSan
build, which needs `meson test --setup sanitize`): a report ends the
program with a status of its own, and the harness fails a test on a report
in any output of a process it started."""
import os
import subprocess
import sys

from harness import Failure, check, main, skip, test

SANITIZED = os.environ.get("SANITIZED", "")
SANITIZE = os.environ.get("SANITIZE", "none")


def need(kind, option):
    if kind not in SANITIZE:
        skip("not a %s build" % kind)
    # In a sanitizer build the setup is required, not optional: without it
    # a report exits 1 (ASan) or nothing at all (UBSan).
    check("exitcode=" in os.environ.get(option, ""),
          "%s sets no exitcode: run the sanitizer build with `meson test --setup sanitize`" % option)


def caught(arg):
    """Runs the faulty program with a captured stderr: (exit status,
    whether the harness called it a sanitizer report)."""
    p = subprocess.Popen([SANITIZED, arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        p.communicate(timeout=60)
    except Failure:
        return p.wait(), True
    return p.returncode, False


@test
def ubsan_report_has_its_own_status(tmp):
    need("undefined", "UBSAN_OPTIONS")
    status, reported = caught("ub")
    check(status == 87 and reported, "UBSan: exit %d, reported %r" % (status, reported))


@test
def asan_report_has_its_own_status(tmp):
    need("address", "ASAN_OPTIONS")
    status, reported = caught("heap")
    check(status == 86 and reported, "ASan: exit %d, reported %r" % (status, reported))


@test
def report_on_uncaptured_stderr_fails_the_test(tmp):
    need("undefined", "UBSAN_OPTIONS")
    # A test whose child writes its report to the stderr it inherited (the
    # inner test's stderr goes to a file, which nothing checks).
    with open(os.path.join(tmp, "inner.stderr"), "w") as err:
        r = subprocess.run([sys.executable, __file__, "inner_uncaptured"], stdout=subprocess.PIPE,
                           stderr=err, text=True, timeout=60)
    check(r.returncode == 1 and "FAIL inner_uncaptured: sanitizer report" in r.stdout,
          "the inner test: %d %r" % (r.returncode, r.stdout))


if len(sys.argv) > 1 and sys.argv[1] == "inner_uncaptured":
    @test
    def inner_uncaptured(tmp):
        subprocess.run([SANITIZED, "ub"], timeout=60)


if __name__ == "__main__":
    sys.exit(main())
