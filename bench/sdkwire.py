#!/usr/bin/env python3
"""bench/sdkwire.py: the Python SDK's hand encoding (sdk/python/gadget/_wire.py)
against python3-protobuf, for one call's work in the SDK: decode a
SupervisorMsg{call} into Python values and encode a WorkerMsg{result} from
a Python value (both must give the same bytes). python3-protobuf is not
among the tree's dependencies: install it to run this (its descriptors are
built here, no protoc needed). The best of 5 runs, microseconds a call.
  bench/sdkwire.py"""
import os
import sys
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
from gadget import _wire
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
fdp = descriptor_pb2.FileDescriptorProto(name="gadget.proto", package="gadget", syntax="proto3")

def msg(name, fields, oneof=None):
    m = fdp.message_type.add(name=name)
    if oneof:
        m.oneof_decl.add(name=oneof)
    for fname, num, typ, tname, label, in_oneof in fields:
        f = m.field.add(name=fname, number=num, type=typ, label=label or F.LABEL_OPTIONAL)
        if tname:
            f.type_name = ".gadget." + tname
        if in_oneof:
            f.oneof_index = 0

O = True
msg("Value", [("null_value", 1, F.TYPE_BOOL, None, 0, O), ("bool_value", 2, F.TYPE_BOOL, None, 0, O),
              ("int_value", 3, F.TYPE_SINT64, None, 0, O), ("double_value", 4, F.TYPE_DOUBLE, None, 0, O),
              ("string_value", 5, F.TYPE_STRING, None, 0, O), ("bytes_value", 6, F.TYPE_BYTES, None, 0, O),
              ("list_value", 7, F.TYPE_MESSAGE, "List", 0, O), ("map_value", 8, F.TYPE_MESSAGE, "Map", 0, O)], "kind")
msg("List", [("items", 1, F.TYPE_MESSAGE, "Value", F.LABEL_REPEATED, False)])
msg("MapEntry", [("key", 1, F.TYPE_STRING, None, 0, False), ("value", 2, F.TYPE_MESSAGE, "Value", 0, False)])
msg("Map", [("entries", 1, F.TYPE_MESSAGE, "MapEntry", F.LABEL_REPEATED, False)])
msg("Error", [("code", 1, F.TYPE_UINT32, None, 0, False), ("message", 2, F.TYPE_STRING, None, 0, False)])
msg("Call", [("id", 1, F.TYPE_UINT64, None, 0, False), ("method", 2, F.TYPE_STRING, None, 0, False),
             ("args", 3, F.TYPE_MESSAGE, "Value", 0, False), ("chain", 4, F.TYPE_STRING, None, F.LABEL_REPEATED, False)])
msg("SupervisorMsg", [("call", 2, F.TYPE_MESSAGE, "Call", 0, O)], "msg")
msg("CallResult", [("id", 1, F.TYPE_UINT64, None, 0, False), ("value", 2, F.TYPE_MESSAGE, "Value", 0, O),
                   ("error", 3, F.TYPE_MESSAGE, "Error", 0, O)], "outcome")
msg("WorkerMsg", [("result", 2, F.TYPE_MESSAGE, "CallResult", 0, O)], "msg")
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
M = {n: message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("gadget." + n))
     for n in ("Value", "SupervisorMsg", "WorkerMsg")}

def to_py(v):
    k = v.WhichOneof("kind")
    if k == "null_value": return None
    if k == "list_value": return [to_py(x) for x in v.list_value.items]
    if k == "map_value": return {e.key: to_py(e.value) for e in v.map_value.entries}
    return getattr(v, k)

def from_py(x, v):
    if x is None: v.null_value = True
    elif isinstance(x, bool): v.bool_value = x
    elif isinstance(x, int): v.int_value = x
    elif isinstance(x, float): v.double_value = x
    elif isinstance(x, str): v.string_value = x
    elif isinstance(x, bytes): v.bytes_value = x
    elif isinstance(x, list):
        v.list_value.SetInParent()
        for y in x: from_py(y, v.list_value.items.add())
    else:
        v.map_value.SetInParent()
        for k, y in x.items():
            e = v.map_value.entries.add(key=k); from_py(y, e.value)

def bench(name, args, result, n=20000):
    sm = M["SupervisorMsg"]()
    sm.call.id = 7; sm.call.method = "greet"; from_py(args, sm.call.args)
    frame = sm.SerializeToString()
    # both decode to the same, both encode to bytes that decode the same
    assert _wire.supervisor_msg(frame)[3] == args
    def hand():
        m = _wire.supervisor_msg(frame)
        return _wire.call_result(m[1], _wire.encode_value(result))
    def pb():
        m = M["SupervisorMsg"](); m.ParseFromString(frame)
        a = to_py(m.call.args)
        w = M["WorkerMsg"](); w.result.id = m.call.id; from_py(result, w.result.value)
        return w.SerializeToString()
    assert hand() == pb(), (hand(), pb())
    out = []
    for f in (hand, pb):
        best = min(timeit(f, n) for _ in range(5))
        out.append(best)
    print("%-28s hand %.1f us  python3-protobuf %.1f us  (%.2fx)" % (name, out[0], out[1], out[1] / out[0]))

def timeit(f, n):
    t = time.perf_counter()
    for _ in range(n): f()
    return (time.perf_counter() - t) / n * 1e6

bench("null -> null", None, None)
bench("{name} -> string", {"name": "ada"}, "hello, ada")
rec = {"id": 12, "title": "a note", "tags": ["a", "b", "c"], "done": False, "score": 1.5}
bench("5-field record both ways", rec, rec)
big = [dict(rec, id=i) for i in range(100)]
bench("100 records both ways", big, big, n=200)
