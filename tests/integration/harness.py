"""The integration tests' small harness: one test per process, named on
the command line; `--list` prints the names (meson registers each)."""
import os
import shutil
import sys
import tempfile

TESTS = {}


class Failure(Exception):
    pass


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(TESTS))
        return 0
    name = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="gadgetd-test-")
    os.chmod(tmp, 0o755)
    try:
        TESTS[name](tmp)
    except Failure as e:
        print("FAIL %s: %s" % (name, e))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok %s" % name)
    return 0
