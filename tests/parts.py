"""The one rule for a test that cannot run here, used by every Python test
(integration, hostile-load, browser, packaging).

need(part, why): something the README's platform has is missing — a
package `scripts/deps` installs, root, IPv6. On a developer's machine the
test is skipped (exit 77) with the reason; under CI (CI set to anything but
"", "0" or "false"), where scripts/deps has run, it fails (exit 1): a green
run must not hide a part the suite was promised.

skip(why): a property this host may lack by design of the host, not of
the setup — which cgroup hierarchies are mounted, which controllers are
delegated. Always a skip, in CI too.

Either way the reason is printed on a "SKIP: " or "FAIL: " line, which
meson keeps in its test log and `scripts/skips` lists."""
import os
import sys


def in_ci():
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def skip(why):
    print("SKIP: " + why, flush=True)
    sys.exit(77)


def need(part, why):
    if in_ci():
        print("FAIL: %s is missing, and under CI that is a failure: %s" % (part, why), flush=True)
        sys.exit(1)
    skip("%s is missing: %s" % (part, why))
