#!/usr/bin/env python3
"""The hostile-load suite: each attack on gadgetd runs, bounded in count
and time, while a healthy gadget is called throughout (harness.Healthy).
Every test asserts that each healthy call was answered, that gadgetd's
fds and memory stay within the stated bounds and come back, that the
attacker got its "busy" or limit errors, and that the log says what was
dropped. The tests live in load/, one module per party or resource; this
runner collects them. --rss lists those that bound gadgetd's RSS."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

# The tests of modules that bound gadgetd's RSS (every one but those
# saying RSS_BOUND = False): the RSS pass of scripts/test runs them again
# in a build without ASan, which keeps freed memory resident.
RSS_TESTS = []
for name in sorted(os.listdir(os.path.join(HERE, "load"))):
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("load_" + name[:-3], os.path.join(HERE, "load", name))
        module = importlib.util.module_from_spec(spec)
        before = set(harness.TESTS)
        spec.loader.exec_module(module)
        if getattr(module, "RSS_BOUND", True):
            RSS_TESTS += sorted(set(harness.TESTS) - before)

if __name__ == "__main__":
    if sys.argv[1:] == ["--rss"]:
        print("\n".join(RSS_TESTS))
        sys.exit(0)
    sys.exit(harness.main())
