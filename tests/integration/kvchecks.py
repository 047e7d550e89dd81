"""The kv checks both stores must pass (SQLite: bindings_test.py,
PostgreSQL: store_pg_test.py), each on a started gadgetd, and the helpers
the binding tests share. No tests are registered here."""
import json
import os
import re
import subprocess

from harness import CALLFLOOD, EXAMPLES, GADGETCTL, check, policy, wait_for


def bcall(d, gadget, binding, op, args=None):
    """Makes the test gadget call a binding; returns (exit status, stdout, stderr)."""
    a = {"binding": binding, "op": op}
    if args is not None:
        a["args"] = args
    r = d.ctl("call", gadget, "binding", json.dumps(a))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def ready(d, *names):
    d.ctl("reload")
    for n in names:
        wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")


def kv_operations_checks(d):
    policy(d.pol, "store", "[Binding DATA]\nType=kv\n")
    ready(d, "store")
    check(bcall(d, "store", "DATA", "get", {"key": "a"})[0] == 3, "missing key is not not-found")
    for k, v in (("a/1", 1), ("a/2", "two"), ("a/3", [1, {"x": None}]), ("b/1", True)):
        rc, out, err = bcall(d, "store", "DATA", "put", {"key": k, "value": v})
        check(rc == 0, "put %s: %s" % (k, err))
    rc, out, _ = bcall(d, "store", "DATA", "get", {"key": "a/3"})
    check(json.loads(out) == [1, {"x": None}], "typed value: %r" % out)
    rc, out, _ = bcall(d, "store", "DATA", "list", {"prefix": "a/", "limit": 2})
    page = json.loads(out)
    check(page == {"keys": ["a/1", "a/2"], "cursor": "a/2"}, "page 1: %r" % page)
    rc, out, _ = bcall(d, "store", "DATA", "list", {"prefix": "a/", "limit": 2, "cursor": "a/2"})
    check(json.loads(out) == {"keys": ["a/3"], "cursor": None}, "page 2: %r" % out)
    rc, out, _ = bcall(d, "store", "DATA", "list", {})
    check(json.loads(out) == {"keys": ["a/1", "a/2", "a/3", "b/1"], "cursor": None}, "all keys: %r" % out)
    check(json.loads(bcall(d, "store", "DATA", "delete", {"key": "a/1"})[1]) is True, "delete")
    check(json.loads(bcall(d, "store", "DATA", "delete", {"key": "a/1"})[1]) is False, "delete again")
    check(bcall(d, "store", "DATA", "get", {"key": "a/1"})[0] == 3, "a deleted key is found")
    rc, out, _ = bcall(d, "store", "DATA", "put", {"key": {"$bytes": "AP8="}, "value": 1})
    rc, out, _ = bcall(d, "store", "DATA", "put", {"key": {"$bytes": "/w=="}, "value": 2})
    rc, out, _ = bcall(d, "store", "DATA", "list", {"prefix": {"$bytes": "AA=="}})
    check(json.loads(out)["keys"] == [{"$bytes": "AP8="}], "bytes key: %r" % out)
    rc, out, _ = bcall(d, "store", "DATA", "list", {"prefix": {"$bytes": "/w=="}})
    check(json.loads(out)["keys"] == [{"$bytes": "/w=="}], "0xff prefix: %r" % out)
    rc, out, _ = bcall(d, "store", "DATA", "get", {"key": "x" * 512})
    check(rc == 3, "a 512-byte key: %r" % out)


def kv_namespaces_checks(d):
    policy(d.pol, "two", "[Binding A]\nType=kv\n[Binding B]\nType=kv\n")
    policy(d.pol, "twin", "[Binding A]\nType=kv\n")
    ready(d, "two", "twin")
    bcall(d, "two", "A", "put", {"key": "k", "value": "in A"})
    check(bcall(d, "two", "B", "get", {"key": "k"})[0] == 3, "B sees A's key")
    check(bcall(d, "twin", "A", "get", {"key": "k"})[0] == 3, "another gadget's A sees two's key")
    check(json.loads(bcall(d, "twin", "A", "list", {})[1])["keys"] == [], "another gadget lists two's keys")
    check(json.loads(bcall(d, "two", "A", "get", {"key": "k"})[1]) == "in A", "A lost its key")


def kv_limits_checks(d):
    policy(d.pol, "small", "[Binding DATA]\nType=kv\nMaxValueSize=100\nMaxKeys=2\nMaxBytes=150\n")
    ready(d, "small")
    rc, _, err = bcall(d, "small", "DATA", "put", {"key": "x" * 513, "value": 1})
    check(rc == 1 and "1 to 512 bytes" in err, "long key: %r" % err)
    rc, _, err = bcall(d, "small", "DATA", "put", {"key": "big", "value": "v" * 200})
    check(rc == 1 and "MaxValueSize" in err, "big value: %r" % err)
    check(bcall(d, "small", "DATA", "put", {"key": "k1", "value": "one"})[0] == 0, "k1")
    check(bcall(d, "small", "DATA", "put", {"key": "k2", "value": "two"})[0] == 0, "k2")
    rc, _, err = bcall(d, "small", "DATA", "put", {"key": "k3", "value": "three"})
    check(rc == 1 and "quota" in err, "MaxKeys: %r" % err)
    check(bcall(d, "small", "DATA", "get", {"key": "k3"})[0] == 3, "a refused put wrote something")
    # Overwriting within the key count still respects MaxBytes.
    check(bcall(d, "small", "DATA", "put", {"key": "k1", "value": "w" * 90})[0] == 0, "k1 rewritten")
    rc, _, err = bcall(d, "small", "DATA", "put", {"key": "k2", "value": "z" * 95})
    check(rc == 1 and "quota" in err, "MaxBytes: %r" % err)
    check(json.loads(bcall(d, "small", "DATA", "get", {"key": "k2"})[1]) == "two", "partial write")
    # A delete gives its key and bytes back.
    check(json.loads(bcall(d, "small", "DATA", "delete", {"key": "k1"})[1]) is True, "delete k1")
    check(bcall(d, "small", "DATA", "put", {"key": "k3", "value": "z" * 95})[0] == 0, "k3 after a delete")
    rc, _, err = bcall(d, "small", "DATA", "put", {"key": "k9"})
    check(rc == 1 and "value" in err, "missing value: %r" % err)


def kv_cas_batch_checks(d):
    """cas and batch (the same on both stores): a cas writes only over the
    value it expects (none: only a new key; no value: a delete) and
    otherwise says what is stored; a batch is all or nothing, its failed
    cas named; libgadget's helpers; and hostile arguments refused, saying
    what is wrong."""
    policy(d.pol, "cas", "[Binding DATA]\nType=kv\nMaxValueSize=100\n")
    ready(d, "cas")

    def call(op, args):
        rc, out, err = bcall(d, "cas", "DATA", op, args)
        return json.loads(out) if rc == 0 else ("error", rc, err)

    def get(key):
        rc, out, _ = bcall(d, "cas", "DATA", "get", {"key": key})
        return json.loads(out) if rc == 0 else None

    check(call("cas", {"key": "k", "value": 1}) == {"written": True}, "cas of a new key")
    got = call("cas", {"key": "k", "value": 2})
    check(got == {"written": False, "current": 1}, "cas expecting no key, 1 stored: %r" % (got,))
    check(call("cas", {"key": "k", "expect": None, "value": 2}) == {"written": False, "current": 1},
          "expect null is no key")
    check(call("cas", {"key": "k", "expect": 1, "value": 2}) == {"written": True}, "cas 1 -> 2")
    check(get("k") == 2, "stored: %r" % get("k"))
    got = call("cas", {"key": "k", "expect": 1, "value": 3})
    check(got == {"written": False, "current": 2}, "a retried cas (1 -> 2 again) is not written: %r" % (got,))
    check(call("cas", {"key": "k", "expect": 2.0, "value": 3})["written"] is False, "a double is not an int")
    tree = [1, {"x": None, "y": "z"}, {"$bytes": "AAE="}]
    check(call("put", {"key": "t", "value": tree}) is None, "put a tree")
    check(call("cas", {"key": "t", "expect": get("t"), "value": "new"}) == {"written": True},
          "a value read by get matches")
    check(call("cas", {"key": "k", "expect": 2}) == {"written": True} and get("k") is None,
          "cas without a value deletes")
    check(call("cas", {"key": "k", "expect": 2, "value": 1}) == {"written": False}, "cas of a missing key")
    check(get("k") is None, "a failed cas wrote")
    # batch: all applied, each op's key's existence before it.
    got = call("batch", {"ops": [{"op": "put", "key": "a", "value": 1}, {"op": "put", "key": "b", "value": 2},
                                 {"op": "cas", "key": "c", "value": 3}, {"op": "put", "key": "a", "value": 4}]})
    check(got == {"applied": True, "results": [False, False, False, True]}, "batch: %r" % (got,))
    # A failing cas: nothing written, the op named, what it found.
    got = call("batch", {"ops": [{"op": "put", "key": "a", "value": 10}, {"op": "delete", "key": "b"},
                                 {"op": "put", "key": "new", "value": 0},
                                 {"op": "cas", "key": "c", "expect": 99, "value": 4}]})
    check(got == {"applied": False, "failed": 3, "current": 3}, "batch with a stale cas: %r" % (got,))
    check((get("a"), get("b"), get("c"), get("new")) == (4, 2, 3, None), "a batch not applied wrote: %r"
          % ((get("a"), get("b"), get("c"), get("new")),))
    got = call("batch", {"ops": [{"op": "cas", "key": "zz", "expect": 1, "value": 1}]})
    check(got == {"applied": False, "failed": 0}, "a cas of a missing key: %r" % (got,))
    got = call("batch", {"ops": [{"op": "cas", "key": "a", "expect": 4, "value": 5}, {"op": "delete", "key": "b"},
                                 {"op": "delete", "key": "b"}, {"op": "cas", "key": "c", "expect": 3}]})
    check(got == {"applied": True, "results": [True, True, False, True]}, "batch: %r" % (got,))
    check((get("a"), get("b"), get("c")) == (5, None, None), "applied batch")
    # libgadget's functions.
    r = d.ctl("call", "cas", "kv_helpers", json.dumps({"binding": "DATA"}))
    check(r.returncode == 0 and json.loads(r.stdout) == {
        "first": True, "second": False, "current": 1,
        "batch": {"applied": True, "results": [True, False, False]}}, "libgadget: %r %r" % (r.stdout, r.stderr))
    # docs/writing-gadgets.md's increment: a retried request counts once,
    # answering what it answered; concurrent requests each count.
    def once(rid):
        r = d.ctl("call", "cas", "increment_once", json.dumps({"binding": "DATA", "id": rid}))
        check(r.returncode == 0, "increment_once: %r" % r.stderr)
        return json.loads(r.stdout)
    check([once("r1"), once("r1"), once("r2"), once("r1")] == [1, 1, 2, 1], "retries counted once")
    procs = [subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "cas", "increment_once",
                               json.dumps({"binding": "DATA", "id": "c%d" % (i % 4)})], stdout=subprocess.PIPE,
                              text=True) for i in range(8)]
    answers = sorted(int(p.communicate(timeout=60)[0]) for p in procs)
    check(len(set(answers)) == 4 and min(answers) == 3 and max(answers) == 6 and get("count") == 6,
          "4 ids sent twice each at once: answers %r, count %r" % (answers, get("count")))
    # Hostile arguments: each refused before the store, saying what.
    bad = [
        ("cas", {"value": 1}, "key"),
        ("cas", {"key": "k", "expect": 1, "value": 2, "extra": 1}, "extra"),
        ("cas", {"key": "x" * 513, "value": 1}, "1 to 512 bytes"),
        ("cas", {"key": "k", "value": "v" * 200}, "value of"),
        ("cas", {"key": "k", "expect": "v" * 200}, "expect of"),
        ("batch", {}, "ops"),
        ("batch", {"ops": []}, "ops"),
        ("batch", {"ops": "x"}, "ops"),
        ("batch", {"ops": [{"op": "put", "key": "k", "value": 1}] * 65}, "ops"),
        ("batch", {"ops": [[1]]}, "ops[0]"),
        ("batch", {"ops": [{"op": "frob", "key": "k"}]}, 'ops[0]: "op" must be'),
        ("batch", {"ops": [{"op": "delete", "key": "k"}, {"op": "put", "key": "k"}]}, "ops[1]: a put needs"),
        ("batch", {"ops": [{"op": "delete", "key": "k", "value": 1}]}, "ops[0]: a delete takes no"),
        ("batch", {"ops": [{"op": "put", "key": "k", "value": 1, "expect": 1}]}, "ops[0]: a put takes no"),
        ("batch", {"ops": [{"op": "cas", "key": ""}]}, "ops[0]"),
        ("batch", {"ops": [{"op": "cas", "key": 5}]}, "ops[0]"),
        ("batch", {"ops": [{"op": "put", "key": "k", "value": {"deep": [[[["x" * 200]]]]}}]},
         "ops[0]: value of"),
        ("batch", {"ops": [{"op": "put", "key": "k", "value": 1, "junk": {"a": [1]}}]}, "junk"),
    ]
    for op, args, says in bad:
        got = call(op, args)
        check(isinstance(got, tuple) and says in got[2], "%s %.80r: %r (should say %r)" % (op, args, got, says))
    check((get("a"), get("k")) == (5, None), "a refused call wrote")


def kv_batch_quota_checks(d):
    """A batch's writes are each checked against MaxKeys=/MaxBytes= as
    a put alone would be, counting its earlier operations: one past the
    quota mid-batch fails it whole (the op named), writing nothing; a
    delete in the same batch makes room first."""
    policy(d.pol, "small", "[Binding DATA]\nType=kv\nMaxKeys=2\nMaxBytes=100\n")
    ready(d, "small")
    check(bcall(d, "small", "DATA", "put", {"key": "k1", "value": 1})[0] == 0, "k1")
    rc, out, err = bcall(d, "small", "DATA", "batch", {"ops": [{"op": "put", "key": "k2", "value": 2},
                                                               {"op": "put", "key": "k3", "value": 3}]})
    check(rc == 1 and "quota of binding DATA exceeded by ops[1], so nothing was written" in err and
          "MaxKeys=2" in err, "MaxKeys mid-batch: %r %r" % (out, err))
    check(bcall(d, "small", "DATA", "get", {"key": "k2"})[0] == 3, "a batch over the quota wrote its first put")
    rc, out, err = bcall(d, "small", "DATA", "batch", {"ops": [{"op": "put", "key": "k2", "value": "v" * 60},
                                                               {"op": "cas", "key": "k1", "expect": 1,
                                                                "value": "w" * 60}]})
    check(rc == 1 and "by ops[1]" in err, "MaxBytes mid-batch: %r" % err)
    check(bcall(d, "small", "DATA", "get", {"key": "k2"})[0] == 3, "a batch over MaxBytes wrote")
    rc, out, err = bcall(d, "small", "DATA", "cas", {"key": "k2", "value": "v" * 120})
    check(rc == 1 and "quota of binding DATA exceeded (MaxKeys=2" in err, "cas over MaxBytes: %r" % err)
    rc, out, err = bcall(d, "small", "DATA", "batch", {"ops": [{"op": "delete", "key": "k1"},
                                                               {"op": "put", "key": "k2", "value": "v" * 60},
                                                               {"op": "put", "key": "k3", "value": 3}]})
    check(rc == 0 and json.loads(out) == {"applied": True, "results": [True, False, False]},
          "a delete makes room in the same batch: %r %r" % (out, err))


def counter_thousand_concurrent_checks(d):
    """The counter example counts 1,000 increments sent by four callers at
    once exactly (each a get and a durable put, in order)."""
    # The example as shipped, but for its CallTimeout=5s: each increment is
    # a durable put, and on a slow host (an emulated VM, ASan) the last
    # flood's first answer comes after 750 others, later than 5 s (the
    # Debian 12 guest saw 29 calls time out).
    with open(os.path.join(EXAMPLES, "counter.policy")) as f:
        text = re.sub(r"^CallTimeout=.*$", "CallTimeout=120s", f.read(), flags=re.M)
    check("CallTimeout=120s" in text, "the example counter policy has no CallTimeout= line")
    with open(os.path.join(d.pol, "counter.policy"), "w") as f:
        f.write(text)
    ready(d, "counter")
    env = dict(os.environ, CALLFLOOD_SILENCE_MS="60000")
    floods = [subprocess.Popen([CALLFLOOD, d.sock, "counter", "increment", "250"], stdout=subprocess.PIPE,
                               text=True, env=env) for _ in range(4)]
    for f in floods:
        out, _ = f.communicate(timeout=120)
        check("ok 250" in out, "flood: %r" % out)
    r = d.ctl("call", "counter", "get")
    check(r.stdout.strip() == "1000", "count: %r" % r.stdout)
