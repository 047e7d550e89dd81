"""The checks of the fault tests' histories (faults_pg_test.py,
bench/faultsoak.py): the operations a Cluster recorded (faultload.py),
the records its gadgets logged, the store. verdicts() runs them all and
answers what failed."""
import json
import os
import re
import time

from faultload import GADGETS, KEYS, Cluster, key_model
from harness import wait_for
from linearize import Op, check as linearizable

trace = Cluster.trace


def histories(ops):
    """{(gadget, key): [Op]} of the operations: answered ones closed,
    open-ended ones open, those that did not run left out."""
    out = {}
    for o in ops:
        if o["status"] == "fail" or key_model(o["key"]) is None:  # an alarm's: alarms_fired()
            continue
        ret = o["t1"] if o["status"] == "ok" else None
        out.setdefault((o["gadget"], o["key"]), []).append(
            Op(o["t0"], ret, o["kind"], o["arg"], o["out"] if ret is not None else None, o["client"]))
    return out


def check_linearizable(ops, budget=10000000):
    """[(gadget, key, verdict, n ops, n open, seconds the check took)]."""
    out = []
    for (g, k), h in sorted(histories(ops).items()):
        t0 = time.monotonic()
        v = linearizable(key_model(k), h, budget=budget)
        out.append((g, k, v, len(h), sum(1 for o in h if o.ret is None), time.monotonic() - t0))
    return out


def acked_in_store(cluster, ops):
    """Every acknowledged write is in the store at the end: read through
    each node once all is healed (ctl_call), each key's final value must
    count every acknowledged increment (and no more than those plus the
    open ones), and be a register value no acknowledged write certainly
    overwrote. The problems found, as text."""
    bad = []
    keys = sorted(set(KEYS) | {o["key"] for o in ops if key_model(o["key"])})
    for g in GADGETS:
        for k in keys:
            finals = set()
            for n in cluster.nodes:
                o = cluster.ctl_call(n, g, {"op": "read", "key": k}, client="final")
                if o["status"] != "ok":
                    bad.append("%s/%s: the final read through %s failed: %s" % (g, k, n, o["err"]))
                else:
                    finals.add(o["out"])
            if len(finals) > 1:
                bad.append("%s/%s: the nodes read different final values %r" % (g, k, sorted(finals)))
            if not finals:
                continue
            final = finals.pop()
            mine = [o for o in ops if o["gadget"] == g and o["key"] == k and o["client"] != "final"]
            if k == "n":
                acked = sum(1 for o in mine if o["kind"] == "incr" and o["status"] == "ok")
                maybe = sum(1 for o in mine if o["kind"] == "incr" and o["status"] == "info")
                if not acked <= final <= acked + maybe:
                    bad.append("%s/%s: count %d in the store, %d increments acknowledged, %d open"
                               % (g, k, final, acked, maybe))
                continue
            writes = [o for o in mine if o["kind"] == "write" and o["status"] in ("ok", "info")]
            acked = [o for o in writes if o["status"] == "ok"]
            if final == 0:
                if acked:
                    bad.append("%s/%s: nothing in the store after %d acknowledged writes" % (g, k, len(acked)))
                continue
            w = [o for o in writes if o["arg"] == final]
            if not w:
                bad.append("%s/%s: the store holds %r, which no write wrote" % (g, k, final))
                continue
            w = w[0]
            end = w["t1"] if w["status"] == "ok" else float("inf")
            later = [o for o in acked if o["t0"] > end]
            if later:
                bad.append("%s/%s: the store holds %r, written by %s, which the acknowledged write of %r by %s "
                           "(called %.3f s after) overwrote: that write is lost"
                           % (g, k, final, w["id"], later[-1]["arg"], later[-1]["id"], later[-1]["t0"] - end))
    return bad


# The kv errors of a write that may have taken effect all the same (a
# timeout, the store gone during it: contract.h's 6 and 11, negated as the
# gadget's records hold them). Any other error says the write was not
# done (a fenced write among them).
MAYBE_WROTE = (-6, -11)


def effects(records):
    """{(gadget, node, inst): [(e0, e1, record)]}: each process's effects,
    sorted, a window each within which the effect took place (the test
    gadget's: a kv write from just before it was sent to just after its
    answer; an alarm set; a firing). A write refused is none; one whose
    error says it may have run is one."""
    out = {}
    for r in records:
        if r.get("effect") and (r["err"] == 0 or r["err"] in MAYBE_WROTE):
            out.setdefault((r["gadget"], r["node"], r["inst"]), []).append((r["effect"][0], r["effect"][1], r))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


# The records' kinds whose effect is a kv write, which the store fences:
# accepted only while its process's lease (epoch) is the gadget's current
# one (docs/cluster.md, "Ownership and fencing").
FENCED = ("write", "incr")


def double_runs(records):
    """Two processes of one gadget (on two nodes, or one node's old and
    new) that were owners at once: their EFFECTS interleave. Each
    process's effects span [first effect's window start, last one's end];
    two processes are one after the other when every effect of one ends
    before the first of the other begins. Otherwise an effect of one
    landed between two of the other's, or their windows overlap in time:
    what one owner at a time forbids (fencing refuses the kv writes of an
    old epoch; an http request, a call or an alarm has no fence but the
    node's own lease). Not the methods' spans: a process paused after its
    last write ends its method after the pause but does nothing more
    (span_overlaps tells those).

    What the fence adds: the older process (the one whose first method
    started first: the newer one's lease was taken after the older one's)
    had a kv write take effect only before the newer one's lease was
    taken, so before the newer one's first method started: its window
    ends there (a node paused between the write's commit and its answer:
    the gadget waits for the paused gadgetd, and its window would span
    the pause). A kv write of the older process sent after the newer one
    started that may have taken effect is two owners at once, whatever
    the windows say (the fence failed).

    [(gadget, (node, inst, first, last), (node, inst, first, last), how
    long the spans overlap, the effects within the overlap)]."""
    eff = effects(records)
    started = {}
    for r in records:
        k = (r["gadget"], r["node"], r["inst"])
        started[k] = min(started.get(k, r["t0"]), r["t0"])
    out = []
    keys = sorted(eff)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a[0] != b[0]:
                continue
            old, new = (a, b) if started[a] <= started[b] else (b, a)
            fenced_late = [x for x in eff[old] if x[2]["kind"] in FENCED and x[0] >= started[new]]
            eo = [(x[0], min(x[1], started[new]) if x[2]["kind"] in FENCED and x not in fenced_late else x[1], x[2])
                  for x in eff[old]]
            en = eff[new]
            so = (min(x[0] for x in eo), max(x[1] for x in eo))
            sn = (min(x[0] for x in en), max(x[1] for x in en))
            if not fenced_late and (so[1] <= sn[0] or sn[1] <= so[0]):
                continue
            lo, hi = max(so[0], sn[0]), min(so[1], sn[1])
            within = sorted((x[2] for x in eo + en if x[0] <= hi and lo <= x[1]), key=lambda r: r["effect"][0])
            for x in fenced_late:
                if x[2] not in within:
                    within.append(x[2])
            out.append((a[0], (old[1], old[2], so[0], so[1]), (new[1], new[2], sn[0], sn[1]), hi - lo, within))
    return out


def span_overlaps(records):
    """For information, not a failure: two processes of one gadget whose
    runs' spans ([first method start, last method end]) overlap, with or
    without effects in the overlap (double_runs judges those). [(gadget,
    (node, inst, span), (node, inst, span), how long, the runs within the
    overlap)]."""
    spans = {}
    for r in records:
        key = (r["gadget"], r["node"], r["inst"])
        s = spans.setdefault(key, [r["t0"], r["t1"], []])
        s[0], s[1] = min(s[0], r["t0"]), max(s[1], r["t1"])
        s[2].append(r)
    out = []
    keys = sorted(spans)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a[0] != b[0]:
                continue
            sa, sb = spans[a], spans[b]
            lo, hi = max(sa[0], sb[0]), min(sa[1], sb[1])
            if lo < hi:
                within = sorted((r for r in sa[2] + sb[2] if lo <= r["t1"] and r["t0"] <= hi), key=lambda r: r["t0"])
                out.append((a[0], (a[1], a[2], sa[0], sa[1]), (b[1], b[2], sb[0], sb[1]), hi - lo, within))
    return out


def failed_but_ran(ops, records):
    """Operations their callers were told did not run ("fail") that a
    node's records show run."""
    ran = {r["id"]: r for r in records}
    return [(o, ran[o["id"]]) for o in ops if o["status"] == "fail" and o["id"] in ran]


def unanswered(o):
    """Whether a call got no answer from gadgetd at all: its connection
    lost or the client's own timeout (a node SIGKILLed under it, a node
    paused past the client's patience). Such a call may have run and may
    still run: no node told its caller anything, nor can a node stop what
    it already sent on, nor know that a caller gave up. The checks of what
    callers were told leave these out; what gadgetd answers (its own
    timeouts say "may have run", its refusals "not run") they judge."""
    return o.get("code") == "transport"


def ran_after_answer(ops, records):
    """Calls that ran only after gadgetd had answered their caller with an
    error (a timeout, a refusal): the call waited somewhere (a link's
    queue, a paused node) and ran late, without its caller's deadline. Not
    one that got no answer (unanswered)."""
    ran = {}
    for r in records:
        ran.setdefault(r["id"], r)
    return [(o, ran[o["id"]]) for o in ops if o["status"] != "ok" and o["id"] in ran and ran[o["id"]]["t0"] > o["t1"]
            and not unanswered(o)]


def wrote_but_errored(ops, records):
    """Calls whose caller got an error that does not say "may have run"
    (a timeout, a lost connection, a refusal) while the gadget ran them
    and their kv write was accepted: the caller cannot tell them from
    calls that did nothing. Not one that got no answer (unanswered)."""
    wrote = {r["id"] for r in records if r["kind"] in ("write", "incr") and r["err"] == 0}
    return [o for o in ops if o["status"] != "ok" and o["id"] in wrote and "may have run" not in o["err"]
            and not unanswered(o)]


def alarms_fired(cluster, ops, timeout=20):
    """The alarms the workload set (fop "alarm", fired to fwake): every
    acknowledged one fires at least once (waited for: the last are due
    after the schedule, and a gadget's new owner reads its alarms from the
    store), none before it is due, none whose set was refused ("not run").
    Firing on two nodes at once is double_runs()'s: a firing is a run of
    its process. Problems as text; and the counts."""
    sets = {"w" + o["id"]: o for o in ops if o["kind"] == "alarm"}
    acked = {a for a, o in sets.items() if o["status"] == "ok"}
    got = {}

    def all_fired():
        got["fires"] = [r for r in cluster.records() if r["kind"] == "fire" and r["id"] in sets]
        return acked <= {r["id"] for r in got["fires"]}
    try:
        wait_for(all_fired, timeout=timeout, what="every acknowledged alarm's firing")
    except Exception:  # what has not fired then is the answer
        pass
    fires = got["fires"]
    fired = {r["id"] for r in fires}
    bad = ["alarm %s (set by %s through %s, acknowledged, due at %d ms since the epoch) never fired"
           % (a, sets[a]["id"], sets[a]["via"], sets[a]["out"]) for a in sorted(acked - fired)]
    for r in fires:
        o = sets[r["id"]]
        if o["status"] == "ok" and r["v"] < o["out"]:
            bad.append("alarm %s fired on %s %d ms before it was due" % (r["id"], r["node"], o["out"] - r["v"]))
        if o["status"] == "fail":
            bad.append("alarm %s fired on %s, but its set was answered %r (not run)" % (r["id"], r["node"], o["err"]))
    twice = len(fires) - len(fired)
    return bad, {"set": len(sets), "acked": len(acked), "fired": len(fired), "again": twice}


def audit_missing(cluster, ops, faults=(), timeout=25):
    """The audit of the acknowledged calls (each call's trace id is in its
    records), once the store's copy has caught up (it is sent in batches,
    after the answers; a node killed and started again sends from its
    audit.log what it had not copied): {"missing": calls with a record in
    no node's audit.log and not in the store, "not_copied": calls in a
    file but not in the store, "unsent": the records the nodes say they
    could not copy (said, not excused), "killed": calls through a node
    killed later (said, not excused), "checked": how many}. The copy is
    whole when not_copied is empty."""
    kills = [(f["t0"], f["gadget_owner"][1]) for f in faults if f.get("kind") == "kill"]
    acked = [o for o in ops if o["status"] == "ok"]
    got = {}

    def killed(o):
        # Called before the kill: an answer sent just before it may reach
        # its caller (through the relay) just after.
        return any(o["via"] == n and o["t0"] <= t for t, n in kills)

    def caught_up():
        lines = cluster.pg.psql("SELECT line FROM gadgetd_audit WHERE gadget IN (%s) AND line LIKE "
                                "'%%\"op\":\"call fop\"%%' AND line LIKE '%%\"outcome\":\"ok\"%%'"
                                % ", ".join("'%s'" % g for g in GADGETS))
        seen = set(re.findall(r'"trace":"(fa17[0-9a-f]{28})"', lines))
        unsent, got["why"] = 0, {}
        for n, d in cluster.ds.items():
            if d.proc and d.proc.poll() is None:
                r = d.ctl("--json", "status", sorted(GADGETS)[0])
                if r.returncode != 0:  # not summed then: said
                    got["why"][n] = "status failed: %s" % r.stderr.strip()[:200]
                    continue
                st = json.loads(r.stdout)
                unsent += st.get("audit_unsent", 0) or 0
                got["why"][n] = "%d unsent: %s" % (st.get("audit_unsent", 0) or 0, st.get("audit_unsent_error", ""))
        got["store"] = [o for o in acked if trace(o["id"]) not in seen]
        got["unsent"] = unsent
        return not got["store"]
    try:
        wait_for(caught_up, timeout=timeout, what="the audit copy")
    except Exception:  # what is still missing then is the answer
        pass
    files, calls = "", {}
    for n, d in cluster.ds.items():
        try:
            with open(os.path.join(d.tmp, "state", "audit.log")) as f:
                text = f.read()
        except OSError:
            continue
        files += text
        for line in text.splitlines():  # the call's own records, by node
            if '"op":"call fop"' in line and '"outcome":"ok"' in line:
                m = re.search(r'"trace":"(fa17[0-9a-f]{28})"', line)
                if m:
                    calls[m.group(1)] = "%s's audit.log at %s" % (n, line[9:33])
    in_files = set(re.findall(r'"trace":"(fa17[0-9a-f]{28})"', files))
    out = {"missing": [o["id"] for o in got["store"] if trace(o["id"]) not in in_files],
           "not_copied": [o["id"] for o in got["store"] if trace(o["id"]) in in_files],
           "killed": [o["id"] for o in got["store"] if killed(o)],
           "killed_answered_after": [o["id"] for o in got["store"]
                                     if any(o["via"] == n and o["t0"] <= t < o["t1"] for t, n in kills)],
           "unsent": got["unsent"], "checked": len(acked), "nodes": got["why"]}
    # What is known of each call not copied: where its record is, and the
    # faults within 15 s before its answer (for a finding to be explained).
    by_id = {o["id"]: o for o in acked}
    out["detail"] = []
    for i in out["not_copied"][:10]:
        o = by_id[i]
        near = ["%s %s at %+.1f s" % (f["kind"], f.get("what", ""), f["t0"] - o["t1"]) for f in faults
                if "t0" in f and -15 <= f["t0"] - o["t1"] <= 5]
        out["detail"].append("%s via %s (%s/%s %s, answered at %.3f): record in %s; faults: %s" % (
            i, o["via"], o["gadget"], o["key"], o["kind"], o["t1"], calls.get(trace(i), "no node's call record"),
            "; ".join(near) or "none"))
    return out


def errors(ops, n=8):
    """The commonest (status, error) of the operations that failed."""
    count = {}
    for o in ops:
        if o["status"] != "ok":
            k = (o["status"], re.sub(r"\d+", "N", o["err"])[:110])
            count[k] = count.get(k, 0) + 1
    return sorted(count.items(), key=lambda kv: -kv[1])[:n]


def verdicts(cluster, ops, say, faults=()):
    """Every check: the failures, and the records."""
    bad = []
    # The final reads (through each node, all healed) first: they end the
    # histories too, so a lost write is also a linearizability violation.
    lost = acked_in_store(cluster, ops)
    ops = list(cluster.ops)
    for g, k, v, n, n_open, took in check_linearizable(ops):
        say("history %s/%s (%s): %d operations, %d open: %r, checked in %.2f s" % (g, k, key_model(k).name, n,
                                                                                 n_open, v, took))
        if v.ok is not True:
            bad.append("%s/%s: %r" % (g, k, v))
    for p in lost:
        say("LOST: " + p)
        bad.append(p)
    # The alarms' firings, waited for, before the records are read: a
    # firing is a run of its process for double_runs().
    alarm_bad, al = alarms_fired(cluster, ops)
    say("alarms: %d set, %d acknowledged, %d fired (%d firings more than once: at least once is the promise)"
        % (al["set"], al["acked"], al["fired"], al["again"]))
    for line in alarm_bad:
        say(line)
    bad += alarm_bad
    records = cluster.records()  # with the last firings
    def runs_said(r):
        e = r.get("effect")
        return "    %s on %s (%s): %s %s %s -> %d, kv error %d, method %.3f-%.3f, effect %s" % (
            r["gadget"], r["node"], r["inst"][:6], r["id"], r["kind"], r["key"], r["v"], r["err"], r["t0"], r["t1"],
            "%.3f-%.3f" % e if e else "none")
    for g, a, b, overlap, within in span_overlaps(records):
        say("(information) the methods' spans of two processes overlap: %s on node %s (process %s, %.3f-%.3f) and "
            "on node %s (process %s, %.3f-%.3f), %.0f ms; two owners only if their effects interleave (below)"
            % (g, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], overlap * 1000))
        for r in within[:3] + (within[-3:] if len(within) > 6 else within[3:]):
            say(runs_said(r))
    for g, a, b, overlap, within in double_runs(records):
        line = ("two owners at once: the effects of %s on node %s (process %s, %.3f-%.3f) and on node %s "
                "(process %s, %.3f-%.3f) interleave, overlapping %.0f ms" % (g, a[0], a[1], a[2], a[3], b[0], b[1],
                                                                           b[2], b[3], overlap * 1000))
        say(line)
        for r in within[:3] + (within[-3:] if len(within) > 6 else within[3:]):
            say(runs_said(r))
        bad.append(line)
    for o, r in failed_but_ran(ops, records):
        line = ("told it did not run, but ran: %s %s %s/%s through %s, answered %r at +%.3f s; ran on %s at "
                "+%.3f s" % (o["id"], o["kind"], o["gadget"], o["key"], o["via"], o["err"], o["t1"] - o["t0"],
                             r["node"], r["t0"] - o["t0"]))
        say(line)
        bad.append(line)
    for d in faults:
        if d.get("kept"):
            line = ("a paused owner never replaced: %s kept %s, same epoch, through a %.1f s pause (the lease is "
                    "1 s)" % (d["what"], " ".join(d["kept"]), d["t1"] - d["t0"]))
            say(line)
            bad.append(line)
    late = ran_after_answer(ops, records)
    for o, r in late[:5]:
        say("ran after its caller's answer: %s %s %s/%s through %s, answered %r after %.3f s; ran on %s %.3f s "
            "after that answer" % (o["id"], o["kind"], o["gadget"], o["key"], o["via"], o["err"][:80],
                                   o["t1"] - o["t0"], r["node"], r["t0"] - o["t1"]))
    if late:
        line = "%d calls ran after their callers had been answered with an error (the longest %.3f s after)" % (
            len(late), max(r["t0"] - o["t1"] for o, r in late))
        say(line)
        bad.append(line)
    silent = wrote_but_errored(ops, records)
    if silent:
        kinds = {}
        for o in silent[:5]:
            say("    %s %s %s/%s through %s, %.3f-%.3f: %s" % (o["id"], o["kind"], o["gadget"], o["key"], o["via"],
                                                        o["t0"], o["t1"], o["err"][:100]))
        for o in silent:
            k = re.sub(r"\d+", "N", o["err"])[:70]
            kinds[k] = kinds.get(k, 0) + 1
        line = ("%d calls answered with an error not saying \"may have run\" had their write accepted: %s"
                % (len(silent), "; ".join("%d × %s" % (n, k) for k, n in sorted(kinds.items(), key=lambda x: -x[1]))))
        say(line)
        bad.append(line)
    a = audit_missing(cluster, ops, faults)
    say("audit: %d acknowledged calls; in no node's audit.log nor the store: %d; in a file but not the store's "
        "copy: %d (records the nodes counted as not copied: %d; calls through a node killed later: %d, of "
        "them answered just after the kill: %d)" % (a["checked"], len(a["missing"]), len(a["not_copied"]),
                                                    a["unsent"], len(a["killed"]), len(a["killed_answered_after"])))
    if a["missing"]:
        bad.append("audit: %d acknowledged calls in no audit at all: %s" % (len(a["missing"]),
                                                                          " ".join(a["missing"][:10])))
    for line in a["detail"]:
        say("  not in the store's copy: " + line)
    if a["not_copied"]:
        say("  the nodes' count of records not copied: %s" % "; ".join("%s: %s" % kv for kv in
                                                                       sorted(a["nodes"].items())))
    # The audit copy has every acknowledged call, without exceptions: a
    # node killed sends what it had not copied when it starts again.
    if a["not_copied"]:
        bad.append("audit copy: %d acknowledged calls not in the store (%d counted as not copied, %d through a "
                   "node killed later): %s" % (len(a["not_copied"]), a["unsent"], len(a["killed"]),
                                              " ".join(a["not_copied"][:10])))
    return bad, records


def summary(ops, say):
    by = {}
    for o in ops:
        by.setdefault(o["status"], 0)
        by[o["status"]] += 1
    say("operations: %d (%s); the commonest errors:" % (len(ops), ", ".join("%s %d" % kv
                                                                            for kv in sorted(by.items()))))
    for (status, err), n in errors(ops):
        say("  %5d %-4s %s" % (n, status, err))
