#!/usr/bin/env python3
"""The Python SDK's hand encoding (sdk/python/gadget/_wire.py) against
bytes worked out from gadget.proto by hand, and back: every kind, the
int64 ends (sint64: zigzag), depth as gadgetd counts it (lists and maps),
what is no gadget value. The conformance suite checks the same code
against gadgetd itself; this pins the bytes."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
from gadget import _wire  # noqa: E402

KNOWN = [
    (None, b"\x08\x01"),
    (True, b"\x10\x01"),
    (False, b"\x10\x00"),
    (0, b"\x18\x00"),
    (-1, b"\x18\x01"),
    (1, b"\x18\x02"),
    (2**63 - 1, b"\x18\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    (-2**63, b"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    (1.5, b"\x21\x00\x00\x00\x00\x00\x00\xf8\x3f"),
    ("a", b"\x2a\x01a"),
    ("é", b"\x2a\x02\xc3\xa9"),
    (b"\x00\xff", b"\x32\x02\x00\xff"),
    ([], b"\x3a\x00"),
    ([1], b"\x3a\x04\x0a\x02\x18\x02"),
    ({}, b"\x42\x00"),
    ({"k": None}, b"\x42\x09\x0a\x07\x0a\x01k\x12\x02\x08\x01"),
]


def main():
    failed = []
    for v, want in KNOWN:
        got = _wire.encode_value(v)
        if got != want:
            failed.append("encode %r: %r, want %r" % (v, got, want))
        back = _wire.decode_value(want, 0, len(want))
        if back != v or type(back) is not type(v):
            failed.append("decode %r: %r" % (want, back))
    nan = _wire.encode_value(float("nan"))
    if not math.isnan(_wire.decode_value(nan, 0, len(nan))):
        failed.append("NaN")
    deep = "x"
    for _ in range(_wire.MAX_DEPTH):
        deep = [deep]
    packed = _wire.encode_value(deep)
    if _wire.decode_value(packed, 0, len(packed)) != deep:
        failed.append("32 deep")
    for bad in ([deep], 2**63, -2**63 - 1, {1: 2}, {"a"}, object(), "\ud800"):
        try:
            _wire.encode_value(bad)
            failed.append("encoded %r" % (bad,))
        except (_wire.EncodeError, UnicodeError):
            pass
    for junk in (b"\x2a\x05ab", b"\x07", b"\x3a\x02\x0a\x05"):
        try:
            _wire.decode_value(junk, 0, len(junk))
            failed.append("decoded %r" % junk)
        except (_wire.DecodeError, IndexError):
            pass
    for f in failed:
        print("FAIL", f)
    print("ok" if not failed else "%d failed" % len(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
