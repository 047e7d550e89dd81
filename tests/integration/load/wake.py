"""A control client against the starts of idle gadgets: one connection
calls 120 idle Start=on-demand gadgets at once (a wake flood)."""
import subprocess

from harness import CALLFLOOD, Daemon, Healthy, check, policy, test, wait_for

# No RSS bound of gadgetd here (tests/integration/load_test.py --rss).
RSS_BOUND = False

# supervisor/core/core_int.h: starts of idle gadgets in flight at once,
# and of one caller's.
CORE_WAKES_MAX = 16
CORE_WAKES_PER_PARTY = 8


@test
def load_wake_flood_queues(tmp):
    """At most CORE_WAKES_PER_PARTY of the 120 start at a time, one
    caller's half of CORE_WAKES_MAX (each start takes 300 ms before its
    hello, so the lists taken during the flood see the starts in flight:
    without the bound, all 120 at once), the rest wait their turn and every
    call is answered; another caller's call to another idle gadget is
    answered while the flood still waits (it does not queue behind it); a
    healthy gadget's calls are answered throughout."""
    names = ["od%d" % i for i in range(120)]
    with Daemon(tmp) as d:
        for n in names + ["other"]:
            policy(d.pol, n, "Start=on-demand\nArguments=slowstart 300\n")
        policy(d.pol, "good")
        check(d.ctl("reload").returncode == 0, "reload")
        wait_for(lambda: d.state("good") == "ready" and all(d.list()[n]["state"] == "idle" for n in names),
                 what="good ready, the 120 idle")
        with Healthy(d, "good"):
            flood = subprocess.Popen([CALLFLOOD, d.sock, ",".join(names), "echo", str(len(names)), "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            most, lists = 0, 0
            wait_for(lambda: any(g["state"] == "starting" for n, g in d.list().items() if n.startswith("od")),
                     what="the flood's first starts")
            other = d.ctl("call", "other", "echo", "1")
            check(other.returncode == 0 and flood.poll() is None,
                  "another caller's call answered while the flood waits: %r, flood %s" % (
                      other, "still running" if flood.poll() is None else "done"))
            while flood.poll() is None:
                states = [g["state"] for n, g in d.list().items() if n.startswith("od")]
                most = max(most, states.count("starting"))
                lists += 1
            out, err = flood.communicate()
        check(("ok %d" % len(names)) in out, "every call of the flood answered: %r %r" % (out, err))
        check(0 < most <= CORE_WAKES_PER_PARTY, "at most %d of one caller started at once: %d seen starting "
              "(%d lists)" % (CORE_WAKES_PER_PARTY, most, lists))
        check(all(g["state"] == "ready" for n, g in d.list().items() if n.startswith("od")), "all 120 ready after")
