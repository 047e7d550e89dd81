"""A linearizability checker for the fault tests' histories (Wing & Gong's
search with the memoisation of Lowe's, as Knossos and porcupine do): is
there one order of the operations, each taking effect at one instant
between its invocation and its completion, that a single register (or
counter) would have answered exactly as the history says?

An operation is Op(call, ret, kind, arg, out): call and ret are the
caller's monotonic times of invocation and completion; ret None is an
open-ended operation, one whose outcome the caller never learnt ("may have
run"): it may take effect at any instant after its call, or never (placed
last, it changes no answer), and its output is unknown. An operation its
caller was told did not run is left out of the history altogether (the
workload does that; an effect of one shows as a violation, which is the
point). Histories are checked one key at a time (linearizability is
compositional: Herlihy & Wing), which keeps the search small.

Models: REGISTER (kinds read, write, cas: arg (old, new), out True/False)
and COUNTER (incr: out the new count; read). A model's step(state, op)
answers the state after op, or NO if op's output is impossible there.

check(model, ops, budget) -> Verdict: ok True (linearizable), False (a
violation: Verdict.why names the operation no order could place, with what
was linearized before it), or None (the search gave up after budget
steps: undecided, which the tests count as a failure to decide, not as a
pass). Run as a script it checks its own known-good and known-bad
histories (linearize_test.py)."""
import collections

INF = float("inf")
NO = object()  # a step's answer: this operation's output is impossible here

Op = collections.namedtuple("Op", "call ret kind arg out client", defaults=(None,))


class Register:
    """A register holding any value, initially init (None: never written;
    a read of a missing key answers what the workload maps "missing" to)."""

    name = "register"

    def __init__(self, init=None):
        self.init = init

    def step(self, state, op):
        if op.kind == "read":
            if op.ret is None:  # an unanswered read: no effect, any answer
                return state
            return state if op.out == state else NO
        if op.kind == "write":
            return op.arg
        if op.kind == "cas":
            old, new = op.arg
            if op.ret is None:  # its outcome unknown: it did what the state says
                return new if state == old else state
            if op.out:
                return new if state == old else NO
            return state if state != old else NO
        raise ValueError("register: unknown operation %r" % (op.kind,))


class Counter:
    """A counter from init: incr answers the new count; read the count."""

    name = "counter"

    def __init__(self, init=0):
        self.init = init

    def step(self, state, op):
        if op.kind == "incr":
            if op.ret is None:
                return state + 1
            return state + 1 if op.out == state + 1 else NO
        if op.kind == "read":
            if op.ret is None:
                return state
            return state if op.out == state else NO
        raise ValueError("counter: unknown operation %r" % (op.kind,))


REGISTER, COUNTER = Register(), Counter()


class Verdict:
    def __init__(self, ok, steps, why="", prefix=(), culprit=None):
        self.ok, self.steps, self.why, self.prefix, self.culprit = ok, steps, why, list(prefix), culprit

    def __bool__(self):
        return self.ok is True

    def __repr__(self):
        word = {True: "linearizable", False: "NOT linearizable", None: "undecided"}[self.ok]
        return "%s (%d steps)%s" % (word, self.steps, ": " + self.why if self.why else "")


class _Entry:
    __slots__ = ("op", "i", "is_call", "match", "prev", "next")

    def __init__(self, op, i, is_call):
        self.op, self.i, self.is_call = op, i, is_call
        self.match = self.prev = self.next = None


def _lift(e):
    """Takes call entry e and its return entry out of the list."""
    e.prev.next = e.next
    if e.next:
        e.next.prev = e.prev
    r = e.match
    r.prev.next = r.next
    if r.next:
        r.next.prev = r.prev


def _unlift(e):
    r = e.match
    r.prev.next = r
    if r.next:
        r.next.prev = r
    e.prev.next = e
    if e.next:
        e.next.prev = e


def _fmt(op):
    out = "?" if op.ret is None else repr(op.out)
    ret = "open" if op.ret is None else "%.3f" % op.ret
    who = " by %s" % op.client if op.client is not None else ""
    return "%s(%r) -> %s [%.3f, %s]%s" % (op.kind, op.arg, out, op.call, ret, who)


def check(model, ops, budget=2000000, init=None):
    """Decides whether ops (one key's) are linearizable for model (whose
    initial state is init, or the model's own)."""
    # An unanswered read has no effect and no answer to check: it can
    # always be placed, so it is left out.
    ops = [op for op in ops if not (op.ret is None and op.kind == "read")]
    state = model.init if init is None else init
    if not ops:
        return Verdict(True, 0)
    # Events by time; at equal times a call comes before a return (the
    # two operations then overlap: the lenient reading of a tie).
    events = []
    for i, op in enumerate(ops):
        if op.ret is not None and op.ret < op.call:
            raise ValueError("operation completes before it starts: %s" % _fmt(op))
        events.append((op.call, 0, i))
        events.append((INF if op.ret is None else op.ret, 1, i))
    events.sort()
    head = _Entry(None, -1, False)
    calls = {}
    prev = head
    for t, kind, i in events:
        e = _Entry(ops[i], i, kind == 0)
        if kind == 0:
            calls[i] = e
        else:
            calls[i].match = e
        prev.next, e.prev = e, prev
        prev = e
    # Open operations alike (the same kind and argument) are
    # interchangeable once called, as none has an answer to meet: any
    # order placing one of them could place the earliest called instead.
    # So only the earliest unplaced one of each class is tried, and the
    # memo counts how many of each class are placed rather than which —
    # without that, k open increments make 2^k states (each caller that
    # timed out would double the search).
    klass, rank, counts = {}, {}, {}
    for t, kind, i in events:
        op = ops[i]
        if kind == 0 and op.ret is None:
            c = klass.setdefault((op.kind, repr(op.arg)), len(klass))
            rank[i] = (c, counts.get(c, 0))
            counts[c] = counts.get(c, 0) + 1
    placed = [0] * len(klass)
    closed_left = sum(1 for op in ops if op.ret is not None)
    linearized = 0  # the closed operations placed
    cache = set()
    stack = []
    steps = 0
    best, best_len = [], 0  # the end of the longest order found, for the report
    stuck, stuck_at = None, -1
    # Each point of the search tries the answered operations first and
    # the open ones only when none of those fits (phase 0, then 1): an
    # open one is needed only where an answer shows its effect, so a long
    # history with many callers that timed out is not searched through
    # every place each open one could take.
    phase = 0
    e = head.next
    while closed_left:
        steps += 1
        if steps > budget:
            return Verdict(None, steps, "gave up after %d steps (%d of %d operations placed)" %
                           (budget, best_len, len(ops)))
        if e is None:
            # Only open operations' returns (at infinity) are left after
            # a prefix whose closed ones are all placed: that cannot be
            # reached while closed_left, but stays safe.
            break
        if e.is_call:
            is_open = e.op.ret is None
            if is_open != (phase == 1) or (is_open and placed[rank[e.i][0]] != rank[e.i][1]):
                e = e.next  # not this phase's, or an earlier one of its class is still unplaced
                continue
            new = model.step(state, e.op)
            if new is not NO:
                if is_open:
                    placed[rank[e.i][0]] += 1
                    bits = linearized
                else:
                    bits = linearized | (1 << e.i)
                key = (bits, new, tuple(placed))
                if key not in cache:
                    cache.add(key)
                    stack.append((e, state, phase))
                    state, linearized = new, bits
                    if not is_open:
                        closed_left -= 1
                    _lift(e)
                    if len(stack) > best_len:
                        best_len, best = len(stack), [x[0].op for x in stack[-8:]]
                    e, phase = head.next, 0
                    continue
                if is_open:
                    placed[rank[e.i][0]] -= 1
            e = e.next
        elif phase == 0:
            e, phase = head.next, 1  # no answered one fits here: the open ones
        else:
            # An operation completed that no order placed before its
            # completion: undo the last choice and try the next. The one
            # met after the longest order is the one reported.
            if len(stack) >= best_len and (stuck is None or len(stack) >= stuck_at):
                stuck, stuck_at = e.op, len(stack)
                best_len, best = len(stack), [x[0].op for x in stack[-8:]]
            if not stack:
                culprit = stuck or e.op
                return Verdict(False, steps, "no order places %s; the longest order found ends: %s" %
                               (_fmt(culprit), " ; ".join(_fmt(o) for o in best) or "(none)"),
                               best, culprit)
            top, state, phase = stack.pop()
            if top.op.ret is None:
                placed[rank[top.i][0]] -= 1
            else:
                linearized &= ~(1 << top.i)
                closed_left += 1
            _unlift(top)
            e = top.next
    return Verdict(True, steps)


def check_keys(history, models, budget=2000000):
    """{key: Verdict} for history {key: [Op]}, each key's model from
    models (a dict, or one model for all)."""
    out = {}
    for key, ops in sorted(history.items()):
        m = models[key] if isinstance(models, dict) else models
        out[key] = check(m, ops, budget)
    return out
