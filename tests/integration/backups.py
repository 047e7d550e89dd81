"""What the backup tests share (backup_test.py: SQLite, backup_pg_test.py:
across the stores): export, the writes' invariant, and a writer of the
backup format (proto/backup.h) for hostile files. No tests are registered
here."""
import hashlib
import json
import struct

from harness import check

# The keys of binding PAD backup_test.py makes before gadgetd starts.
PAD_KEYS = 40000


def export(d, name):
    r = d.ctl("export", name, "--json")
    check(r.returncode == 0, "export %s: %s" % (name, r.stderr))
    return json.loads(r.stdout)


def state_of(exported):
    """The exported state without what names its file (time, source, sum)."""
    return {"kv": exported["kv"], "alarms": exported["alarms"]}


def check_instant(exported, what):
    """The state the test gadget's writes (testgadget.c's writes) leave at
    any one instant: log/1..K, counter K or K-1, alarms a1..M with M the
    counter or one less. A backup read at two instants breaks it."""
    pads = sum(1 for e in exported["kv"] if e["binding"] == "PAD")
    check(pads in (0, PAD_KEYS), "%s: PAD's keys: %d" % (what, pads))
    logs = sorted(int(e["key"][4:]) for e in exported["kv"] if e["key"].startswith("log/"))
    counter = [e["value"] for e in exported["kv"] if e["key"] == "counter"]
    alarms = sorted(int(e["id"][1:]) for e in exported["alarms"])
    k = len(logs)
    check(logs == list(range(1, k + 1)), "%s: the log is not a prefix of the writes: %r" % (what, logs[-5:]))
    c = counter[0] if counter else 0
    check(c in (k, k - 1), "%s: counter %d beside %d log entries" % (what, c, k))
    m = len(alarms)
    check(alarms == list(range(1, m + 1)) and m in (c, c - 1),
          "%s: alarms 1..%d beside counter %d (a state that was never real)" % (what, m, c))
    check(exported["keys"] == len(exported["kv"]) and exported["alarm_count"] == m, "%s: counts" % what)
    return k


def record(kind, binding, key, value, at=0, due=0, attempts=0):
    b, k = binding.encode(), key.encode()
    out = bytes([ord(kind), len(b)]) + b + struct.pack(">H", len(k)) + k
    if kind == "A":
        out += struct.pack(">qqI", at, due, attempts)
    return out + struct.pack(">I", len(value)) + value


def backup_file(gadget, records, n_kv, n_alarms):
    """A file in proto/backup.h's format, its checksum right (a hostile
    writer can compute it as well as gadgetd)."""
    body = ("GADGETD-BACKUP\nformat: 1\ngadget: %s\ntaken: 0\nsource: sqlite\n\n" % gadget).encode()
    body += b"".join(records) + b"E" + struct.pack(">QQ", n_kv, n_alarms)
    return body + hashlib.sha256(body).digest()


# A packed gadget.Value: int_value (field 3, zigzag varint) of a small number.
def int_value(n):
    return bytes([0x18, 2 * n])


def zigzag_int(b):
    """The number of a packed gadget.Value holding int_value, else None."""
    if not b or b[0] != 0x18:
        return None
    n, shift = 0, 0
    for c in b[1:]:
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            break
    return (n >> 1) ^ -(n & 1)


def read_file(path):
    """A backup file's records, as export prints them (values that are
    ints as ints, others None), its checksum checked: the file itself,
    without gadgetd."""
    with open(path, "rb") as f:
        data = f.read()
    check(hashlib.sha256(data[:-32]).digest() == data[-32:], "%s: checksum" % path)
    pos = data.index(b"\n\n") + 2
    out = {"kv": [], "alarms": []}
    while data[pos:pos + 1] != b"E":
        kind, bl = data[pos:pos + 1], data[pos + 1]
        binding = data[pos + 2:pos + 2 + bl].decode()
        pos += 2 + bl
        kl = struct.unpack(">H", data[pos:pos + 2])[0]
        key = data[pos + 2:pos + 2 + kl].decode()
        pos += 2 + kl
        if kind == b"A":
            pos += 20
        vl = struct.unpack(">I", data[pos:pos + 4])[0]
        value = zigzag_int(data[pos + 4:pos + 4 + vl])
        pos += 4 + vl
        if kind == b"K":
            out["kv"].append({"binding": binding, "key": key, "value": value})
        else:
            out["alarms"].append({"binding": binding, "id": key, "payload": value})
    out["keys"], out["alarm_count"] = struct.unpack(">QQ", data[pos + 1:pos + 17])
    return out
