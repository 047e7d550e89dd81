#!/usr/bin/env python3
"""bench/sdkbench.py: each SDK's gadget beside the C one (issue 37's
bench): the conformance gadget of each SDK (tests/conformance: C,
Python, JavaScript) under one gadgetd, measured for
  call   one call at a time of its nop() method: the round trip through
         gadgetd (bench/callbench's seq, p50 and p99, ns), and pipelined
         calls per second (64 in flight); the SDKs' rounds interleaved
  start  a cold start: the gadget's own start_us (hello included) after
         a stop, the median of 10; and the same for 10 restarts without
         a gap (the new process beside the old one, which drains)
  idle   memory of the idle gadget (its cgroup's, status memory_bytes)
Nothing here passes or fails: the numbers go to BENCHMARKS.md.
  GADGETD=... GADGETCTL=... CONFGADGET=... CALLBENCH=... JS_NODE_PATH=BUILD/sdk/js/node_modules \
  bench/sdkbench.py [ROUNDS SEQ PIPE]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "conformance"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from harness import Daemon, wait_for  # noqa: E402
from conformance_test import ready, write_policy  # noqa: E402

SDKS = ("c", "python", "js", "js-jitless")


def write(d, sdk, name):
    """The policy of sdk's gadget; js-jitless: the JavaScript one with
    node --jitless (V8 without its JIT: no memory both writable and
    executable, docs/writing-gadgets.md)."""
    path = write_policy(d, "js" if sdk == "js-jitless" else sdk, name)
    if sdk == "js-jitless":
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("\nArguments=", "\nArguments=--jitless "))
    return path


def main():
    rounds, seq, pipe = (sys.argv[1:4] if len(sys.argv) >= 4 else ("5", "2000", "20000"))
    tmp = tempfile.mkdtemp(prefix="sdkbench-")
    os.chmod(tmp, 0o755)
    out = {}
    with Daemon(tmp) as d:
        for sdk in SDKS:
            write(d, sdk, "b-" + sdk)
        ready(d, *("b-" + s for s in SDKS))
        # The rounds interleaved, one of each SDK's in turn: on a shared
        # host the load moves, and each SDK gets its share of every phase.
        seq_ns, pipe_rates = {s: [] for s in SDKS}, {s: [] for s in SDKS}
        for _ in range(int(rounds)):
            for sdk in SDKS:
                r = subprocess.run([os.environ["CALLBENCH"], d.sock, "b-" + sdk, "nop", "1", seq, pipe, "64"],
                                   capture_output=True, text=True, check=True)
                raw = json.loads(r.stdout)
                seq_ns[sdk] += raw["seq_ns"]
                pipe_rates[sdk] += raw["pipe_per_s"]
        for sdk in SDKS:
            name = "b-" + sdk
            ns = sorted(seq_ns[sdk])
            out[sdk] = {"call_p50_us": round(ns[len(ns) // 2] / 1000, 1),
                        "call_p99_us": round(ns[len(ns) * 99 // 100] / 1000, 1),
                        "pipelined_calls_per_s": round(statistics.median(pipe_rates[sdk]))}
            starts, restarts = [], []
            for _ in range(10):
                d.ctl("stop", name)
                wait_for(lambda: d.state(name) == "stopped")
                d.ctl("start", name)
                wait_for(lambda: d.state(name) == "ready")
                starts.append(d.status(name)["start_us"])
            for _ in range(10):
                d.ctl("restart", name)  # without a gap: the new process starts beside the old
                wait_for(lambda: d.state(name) == "ready")
                restarts.append(d.status(name)["start_us"])
            out[sdk]["start_us_median"] = statistics.median(starts)
            out[sdk]["restart_start_us_median"] = statistics.median(restarts)
            out[sdk]["idle_memory_bytes"] = d.status(name)["memory_bytes"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
