"""Every test depends (meson `depends:`) on every program of this build it
runs, so `meson test NAME` on a partly built tree (after `ninja clean`)
builds them first: each program named in its command or environment, each
program in a directory its environment names (the examples), and what
those programs exec themselves (RUNS). Read from the build's meson-info."""
import json
import os
import sys

BUILD = os.environ["BUILD_ROOT"]
# Programs of this build that exec others of this build.
RUNS = {
    "gadgetd": ["gadgetd-sandbox"],          # every worker starts as it
    "gadgetctl": ["gadgetd", "escape-probe"],  # gadgetctl selftest
}


def main():
    info = os.path.join(BUILD, "meson-info")
    tests = json.load(open(os.path.join(info, "intro-tests.json")))
    targets = [t for t in json.load(open(os.path.join(info, "intro-targets.json")))
               if t["type"] == "executable"]
    by_path = {f: t for t in targets for f in t["filename"]}
    by_name = {t["name"]: t for t in targets}
    bad = []
    for test in tests:
        # LD_LIBRARY_PATH (meson adds it for a test's shared modules) names
        # where libraries are looked for, not programs a test runs
        named = list(test["cmd"][1:]) + [v for k, v in test["env"].items() if k != "LD_LIBRARY_PATH"]
        need = set()
        for v in named:
            if v in by_path:
                need.add(by_path[v]["name"])
            elif os.path.isabs(v):
                need.update(t["name"] for f, t in by_path.items() if os.path.dirname(f) == v)
        todo = list(need)
        while todo:
            for n in RUNS.get(todo.pop(), []):
                if n in by_name and n not in need:
                    need.add(n)
                    todo.append(n)
        missing = sorted(n for n in need if by_name[n]["id"] not in test["depends"])
        if missing:
            bad.append("%s: %s" % (test["name"], ", ".join(missing)))
    print("%d tests checked" % len(tests))
    if bad:
        print("FAIL: tests that run programs they do not depend on:\n  " + "\n  ".join(bad))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
