#!/usr/bin/env python3
"""The hostile-load suite: each attack on gadgetd runs, bounded in count
and time, while a healthy gadget is called throughout (harness.Healthy).
Every test asserts that each healthy call was answered, that gadgetd's
fds and memory stay within the stated bounds and come back, that the
attacker got its "busy" or limit errors, and that the log says what was
dropped. The tests live in load/, one module per party or resource; this
runner collects them."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

for name in sorted(os.listdir(os.path.join(HERE, "load"))):
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("load_" + name[:-3], os.path.join(HERE, "load", name))
        spec.loader.exec_module(importlib.util.module_from_spec(spec))

if __name__ == "__main__":
    sys.exit(harness.main())
