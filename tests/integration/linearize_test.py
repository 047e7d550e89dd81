#!/usr/bin/env python3
"""The linearizability checker (linearize.py) on histories whose answer is
known: each good one must be found linearizable, each bad one not, with
the operation no order can place named; and random histories of a real
atomic register and counter (every operation given an instant inside its
interval) are linearizable, and stop being so when one answer is
changed to one never possible. Pure Python, no root, a second or two.
Usage: linearize_test.py [NAME]."""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from linearize import COUNTER, REGISTER, Op, check  # noqa: E402

TESTS = {}


def test(fn):
    TESTS[fn.__name__] = fn
    return fn


def expect(model, ops, ok, what):
    v = check(model, ops)
    if v.ok is not ok:
        raise AssertionError("%s: expected %s, got %r" % (what, ok, v))
    return v


@test
def good_register():
    expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, 3, "read", None, 1)], True, "write then read")
    # A read overlapping a write may see the old value or the new.
    expect(REGISTER, [Op(0, 10, "write", 1, None), Op(1, 2, "read", None, None), Op(3, 4, "read", None, 1)],
           True, "reads during a write")
    # Two overlapping writes: later reads agree on one winner.
    expect(REGISTER, [Op(0, 5, "write", 1, None), Op(1, 6, "write", 2, None), Op(7, 8, "read", None, 1),
                      Op(9, 10, "read", None, 1)], True, "the first write wins")
    # An open write may take effect late (after a read of the old value) ...
    expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, None, "write", 2, None), Op(3, 4, "read", None, 1),
                      Op(5, 6, "read", None, 2)], True, "an open write taking effect late")
    # ... or never.
    expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, None, "write", 2, None), Op(30, 40, "read", None, 1)],
           True, "an open write never taking effect")
    expect(REGISTER, [Op(0, 1, "cas", (None, 1), True), Op(2, 3, "cas", (None, 2), False),
                      Op(4, 5, "read", None, 1)], True, "cas")


@test
def good_counter():
    expect(COUNTER, [Op(0, 5, "incr", None, 2), Op(1, 6, "incr", None, 1), Op(7, 8, "read", None, 2)], True,
           "overlapping increments answered out of order")
    # An increment whose caller timed out may have counted ...
    expect(COUNTER, [Op(0, 1, "incr", None, 1), Op(2, None, "incr", None, None), Op(3, 4, "incr", None, 3)],
           True, "an open increment that counted")
    # ... or not.
    expect(COUNTER, [Op(0, 1, "incr", None, 1), Op(2, None, "incr", None, None), Op(3, 4, "incr", None, 2)],
           True, "an open increment that did not")


@test
def bad_register():
    v = expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, 3, "read", None, None)], False, "a stale read")
    assert v.culprit.kind == "read" and "read(None) -> None" in v.why, v.why
    # Once a read saw the new value, a later read cannot see the old.
    expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, 10, "write", 2, None), Op(3, 4, "read", None, 2),
                      Op(5, 6, "read", None, 1)], False, "a value going back")
    expect(REGISTER, [Op(0, 5, "cas", (None, 1), True), Op(1, 6, "cas", (None, 2), True)], False,
           "two compare-and-sets from the same value both succeeding")
    # A lost acknowledged write: the store's value at the end (a read
    # after everything) is an older one.
    expect(REGISTER, [Op(0, 1, "write", 1, None), Op(2, 3, "write", 2, None), Op(100, 101, "read", None, 1)],
           False, "an acknowledged write lost")


@test
def bad_counter():
    v = expect(COUNTER, [Op(0, 1, "incr", None, 1), Op(2, 3, "incr", None, 1)], False,
               "two increments answered the same count (two owners at once, unfenced)")
    assert v.culprit.out == 1 and v.culprit.call == 2, v.why
    expect(COUNTER, [Op(0, 1, "incr", None, 1), Op(2, 3, "incr", None, 2), Op(100, 101, "read", None, 1)], False,
           "an acknowledged increment lost")
    # An operation its caller was told did not run (left out) that ran.
    expect(COUNTER, [Op(0, 1, "incr", None, 1), Op(5, 6, "read", None, 2)], False,
           "an increment told 'not run' that ran")


def simulate(model, n_clients, n_ops, rng, kinds, open_share=0.05):
    """A history of a real atomic object: each operation takes effect at one
    instant inside its interval; some outcomes are then hidden (open)."""
    state, t = model.init, 0.0
    busy = [0.0] * n_clients
    pending = []
    for _ in range(n_ops):
        c = rng.randrange(n_clients)
        call = max(busy[c], t - rng.random() * 3)
        t = max(t, call) + rng.random()
        at = t
        kind = rng.choice(kinds)
        if kind == "write":
            arg = rng.randrange(5)
            state, out = arg, None
        elif kind == "incr":
            arg = None
            state += 1
            out = state
        else:
            arg, out = None, state
        ret = at + rng.random() * 3
        busy[c] = ret
        if rng.random() < open_share:
            pending.append(Op(call, None, kind, arg, None, c))
        else:
            pending.append(Op(call, ret, kind, arg, out, c))
    return pending


@test
def random_histories():
    rng = random.Random(int(os.environ.get("GADGETD_FAULT_SEED", "35")))
    t0 = time.monotonic()
    for round_ in range(30):
        for model, kinds in ((REGISTER, ["read", "write"]), (COUNTER, ["incr", "read"])):
            h = simulate(model, 4, 120, rng, kinds)
            v = check(model, h)
            assert v.ok is True, "round %d %s: %r" % (round_, model.name, v)
            # One answer changed to one no state ever had: a violation.
            closed = [i for i, op in enumerate(h) if op.ret is not None and op.kind in ("read", "incr")]
            i = rng.choice(closed)
            h[i] = h[i]._replace(out=10 ** 6)
            v = check(model, h)
            assert v.ok is False, "round %d %s, answer %d changed: %r" % (round_, model.name, i, v)
    took = time.monotonic() - t0
    assert took < 20, "the checker took %.1f s" % took


@test
def long_history_decided():
    """3,000 operations of 6 clients with 2% open: decided in budget."""
    rng = random.Random(7)
    h = simulate(COUNTER, 6, 3000, rng, ["incr", "incr", "read"], open_share=0.02)
    t0 = time.monotonic()
    v = check(COUNTER, h)
    assert v.ok is True, repr(v)
    print("3000 counter operations, 6 clients: %r in %.2f s" % (v, time.monotonic() - t0))


@test
def many_open_increments_decided():
    """60 increments whose callers timed out among 200 answered ones: both
    a good and a bad ending are decided (not given up on) in few steps."""
    ops, t = [], 0.0
    for i in range(260):
        if i % 13 in (3, 7, 11) and sum(1 for o in ops if o.ret is None) < 60:
            ops.append(Op(t, None, "incr", None, None))
        else:
            ops.append(Op(t, t + 0.5, "incr", None, None))
        t += 1
    opens = sum(1 for o in ops if o.ret is None)
    # The answers of an atomic counter where the first 10 open ones
    # counted (at their call) and the others never did.
    count, fixed, counted = 0, [], 0
    for o in ops:
        if o.ret is None:
            if counted < 10:
                count += 1
                counted += 1
            fixed.append(o)
        else:
            count += 1
            fixed.append(o._replace(out=count))
    good = fixed + [Op(t + 1, t + 2, "read", None, count)]
    v = check(COUNTER, good, budget=200000)
    assert v.ok is True, "%d open: %r" % (opens, v)
    bad = fixed + [Op(t + 1, t + 2, "read", None, count - 11)]
    v = check(COUNTER, bad, budget=200000)
    assert v.ok is False, "%d open, a final count below the acknowledged: %r" % (opens, v)


@test
def soak_sized_history_decided():
    """A counter history of the half-hour soak's size (10,000 operations of
    4 callers, 2% of them open), and the same with one answer impossible:
    both decided, within seconds."""
    rng = random.Random(11)
    h = simulate(COUNTER, 4, 10000, rng, ["incr", "incr", "read"], open_share=0.02)
    t0 = time.monotonic()
    v = check(COUNTER, h, budget=5000000)
    took = time.monotonic() - t0
    assert v.ok is True, repr(v)
    i = max(i for i, op in enumerate(h) if op.ret is not None and op.kind == "incr")
    h[i] = h[i]._replace(out=h[i].out - 3)
    v2 = check(COUNTER, h, budget=5000000)
    assert v2.ok is False, repr(v2)
    print("10000 counter operations, %d open: %r in %.2f s; one answer changed: %r in %.2f s"
          % (sum(1 for o in h if o.ret is None), v, took, v2, time.monotonic() - t0 - took))
    assert time.monotonic() - t0 < 30


def rec(node, inst, kind, t0, t1, effect=None, err=0, gadget="fb"):
    """A test gadget's record (faultload.frec_records' shape)."""
    return {"gadget": gadget, "node": node, "inst": inst, "id": "%s%.3f" % (node, t0), "kind": kind, "key": "n",
            "v": 0, "t0": t0, "t1": t1, "err": err, "effect": effect}


def owners(records, n, what, spans=None):
    from faultchecks import double_runs, span_overlaps
    got = double_runs(records)
    if len(got) != n:
        raise AssertionError("%s: %d pairs of processes with interleaving effects, expected %d: %r"
                             % (what, len(got), n, got))
    if spans is not None and len(span_overlaps(records)) != spans:
        raise AssertionError("%s: %d span overlaps, expected %d" % (what, len(span_overlaps(records)), spans))
    return got


@test
def two_owners_by_effects():
    """faultchecks.double_runs judges the effects' windows, not the
    methods' spans."""
    # The second soak's case: b paused 14 ms into an increment whose write
    # had been acknowledged; its method ends after the 8 s pause, its
    # span overlapping a's run, but no effect of b after a's first one.
    soak = [rec("b", "B", "incr", 100.000, 100.004, (100.002, 100.004)),
            rec("b", "B", "incr", 100.010, 108.030, (100.012, 100.018)),
            rec("a", "A", "incr", 104.200, 104.203, (104.201, 104.203)),
            rec("a", "A", "read", 104.300, 104.301),
            rec("a", "A", "incr", 108.100, 108.104, (108.102, 108.104))]
    owners(soak, 0, "a write committed before a long pause, the method ended after it", spans=1)
    # A real one: an effect of the old process after the new one's first.
    late = soak + [rec("b", "B", "incr", 108.040, 108.050, (108.045, 108.049))]
    got = owners(late, 1, "the old process wrote after the new one's first write", spans=1)
    if [(r["node"], r["effect"][0]) for r in got[0][4]] != [("a", 104.201), ("b", 108.045)]:
        raise AssertionError("the effects within the overlap: %r" % got[0][4])
    # As the soak paused it: gadgetd SIGSTOPped after the write committed,
    # before its answer reached the gadget, whose window then spans the
    # pause. The fence: a's lease was taken after b's write committed, so
    # before a's first method began. Not two owners.
    spanning = [rec("b", "B", "incr", 100.000, 100.004, (100.002, 100.004)),
                rec("b", "B", "incr", 100.010, 108.030, (100.012, 108.029)),
                rec("a", "A", "incr", 104.200, 104.203, (104.201, 104.203))]
    owners(spanning, 0, "a kv write's window spanning the pause (the fence bounds it)", spans=1)
    # An alarm set has no such bound here: spanning the other's effect, it
    # is two owners as far as times can tell.
    alarm = [dict(r, kind="alarm") if r["t1"] > 108 else r for r in spanning]
    owners(alarm, 1, "an alarm set's window spanning the other's write")
    # Two unfenced windows overlapping in time, each process's only effect.
    owners([rec("a", "A", "alarm", 1.0, 1.3, (1.1, 1.3)), rec("b", "B", "alarm", 1.2, 1.5, (1.25, 1.4))], 1,
           "overlapping effect windows")
    # A write refused (fenced: "not run") is no effect; one that may have
    # run (a timeout, 6) is one.
    fenced = soak + [rec("b", "B", "incr", 108.040, 108.050, (108.045, 108.049), err=-5)]
    owners(fenced, 0, "the old process's write refused after the pause")
    maybe = soak + [rec("b", "B", "incr", 108.040, 108.050, (108.045, 108.049), err=-6)]
    owners(maybe, 1, "the old process's write that may have run after the pause")
    # An alarm firing is an effect: the old process's after the new one's
    # first write.
    owners([rec("b", "B", "incr", 1.5, 2.5, (1.9, 2.4)), rec("b", "B", "fire", 2.2, 2.201, (2.2, 2.201)),
            rec("a", "A", "incr", 2.0, 2.1, (2.05, 2.1))], 1, "the old process's firing after the new one's write")
    # Handed over cleanly, with reads (no effect) overlapping: none.
    owners([rec("a", "A", "incr", 1.0, 1.1, (1.05, 1.1)), rec("a", "A", "read", 1.2, 3.0),
            rec("b", "B", "incr", 2.0, 2.1, (2.05, 2.1)), rec("b", "B", "incr", 3.5, 3.6, (3.55, 3.6))], 0,
           "a read of the old process overlapping the new one's writes", spans=1)
    # Other gadgets, or one process alone, are never two owners.
    owners([rec("a", "A", "incr", 1.0, 2.0, (1.1, 1.9)), rec("b", "B", "incr", 1.0, 2.0, (1.1, 1.9), gadget="fa"),
            rec("a", "A", "incr", 1.5, 1.6, (1.55, 1.58))], 0, "two gadgets")


def main():
    names = sys.argv[1:] or list(TESTS)
    if names == ["--list"]:
        print("\n".join(TESTS))
        return 0
    failed = 0
    for n in names:
        try:
            TESTS[n]()
            print("ok %s" % n)
        except AssertionError as e:
            failed += 1
            print("FAIL %s: %s" % (n, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
