#!/usr/bin/env python3
"""Attacks on gadgetd's control socket and gateway, for the hostile-load
tests (load/control.py, load/gateway.py) and for benchmarks: each is a
subcommand, bounded in count and time, loopback or Unix socket only, and
prints one line of counts ("key value ...") at the end.

  attacks.py control-idle SOCK N HOLD_S      N idle connections, held HOLD_S s
  attacks.py control-noread SOCK N REQS NAME N clients each pipelining REQS
                                             `status NAME` and never reading
  attacks.py control-load SOCK PATH          one raw `load PATH` request
  attacks.py control-big-answers SOCK N NAME SIZE
                                             N calls of gadget NAME's big
                                             {"n": SIZE} one after another
  attacks.py gateway-hold PORT N HOLD_S      N connections sending half a
                                             request head, held HOLD_S s
  attacks.py gateway-notoken PORT N          N requests without a token
  attacks.py gateway-big PORT TOKENFILE NAME SIZE N
                                             N calls of gadget NAME's big
                                             {"n": SIZE} one after another,
                                             each on 4 connections at once
  attacks.py stall-open PATH HOLD_S          (root) every open() of PATH waits
                                             up to HOLD_S s, as on a FUSE mount
                                             whose server does not answer

Run a control attack as another user with
  setpriv --reuid=UID --regid=GID --clear-groups python3 attacks.py ...
"""
import json
import os
import re
import resource
import select
import socket
import struct
import sys
import time

# The control protocol version every Request carries (proto/contract.h).
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "contract.h")) as _f:
    CONTROL_PROTOCOL_VERSION = int(re.search(r"#define CONTROL_PROTOCOL_VERSION (\d+)", _f.read()).group(1))


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    """A length-delimited protobuf field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def request(rid, kind, name=None, version=CONTROL_PROTOCOL_VERSION):
    """A control.Request: kind is the oneof field number (2 load, 6 status, 5
    list); version that of the control protocol (None: left out, as an older
    client leaves it)."""
    body = field(1, name.encode()) if name is not None else b""
    msg = varint(1 << 3) + varint(rid) + field(kind, body)
    if version is not None:
        msg += varint(11 << 3) + varint(version)
    return struct.pack("<I", len(msg)) + msg


def parse(buf):
    """{field number: [values]} of one protobuf message (varints and bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def answers(s, k, timeout=10, buf=None):
    """Up to k control.Responses read from s (fewer at EOF), each
    {"kind": "error"/"done"/..., "code", "message"}; buf (a bytearray) keeps
    what was read past the k-th for the next call."""
    s.settimeout(timeout)
    buf = bytearray() if buf is None else buf
    out = []
    while len(out) < k:
        if len(buf) >= 4 and len(buf) >= 4 + struct.unpack("<I", buf[:4])[0]:
            n = struct.unpack("<I", buf[:4])[0]
            m = parse(bytes(buf[4:4 + n]))
            del buf[:4 + n]
            if 2 in m:
                sub = parse(m[2][0])
                out.append({"kind": "error", "code": sub.get(1, [0])[0],
                            "message": sub.get(2, [b""])[0].decode(errors="replace")})
            elif 3 in m:
                sub = parse(m[3][0])
                out.append({"kind": "done", "message": sub.get(1, [b""])[0].decode(errors="replace")})
            else:
                out.append({"kind": "other"})
            continue
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return out


def answer(s, timeout=10):
    """One control.Response (as answers'), or None at EOF."""
    a = answers(s, 1, timeout)
    return a[0] if a else None


def connect_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def refused(socks, wait=1.0):
    """How many of socks gadgetd answered at once (a refusal) or closed."""
    time.sleep(wait)
    poll = select.poll()
    for s in socks:
        poll.register(s, select.POLLIN)
    return len(poll.poll(0))


def control_idle(path, n, hold):
    socks = []
    for _ in range(n):
        try:
            socks.append(connect_unix(path))
        except OSError:
            break  # the listen queue is full: gadgetd is not accepting
    ref = refused(socks)
    print("connected %d accepted %d refused %d" % (len(socks), len(socks) - ref, ref), flush=True)
    end = time.time() + hold
    while time.time() < end:
        if select.select([sys.stdin], [], [], 0.2)[0] and not sys.stdin.read(1):
            break  # the test closed our stdin: the attack is over
    for s in socks:
        s.close()


def control_noread(path, n, reqs, name, limit_s=20):
    """n clients each sending up to reqs `status NAME` requests, 500 at a
    time, reading nothing; a client counts as dropped once a send fails
    because gadgetd closed it."""
    socks = []
    for _ in range(n):
        try:
            s = connect_unix(path)
        except OSError:
            break
        s.setblocking(False)
        socks.append(s)
    chunk = b"".join(request(i + 1, 6, name) for i in range(500))
    left = {s: reqs for s in socks}
    dropped, sent = set(), 0
    end = time.time() + limit_s
    while time.time() < end and len(dropped) < len(socks):
        for s in socks:
            if s in dropped:
                continue
            try:
                k = s.send(chunk if left[s] > 0 else request(1, 5))
                sent += k
                left[s] -= 500
            except BlockingIOError:
                pass
            except OSError:
                dropped.add(s)  # EPIPE, ECONNRESET: gadgetd closed it
        time.sleep(0.05)
    print("connections %d sent_bytes %d dropped %d" % (len(socks), sent, len(dropped)), flush=True)
    for s in socks:
        s.close()


def control_wide(path, n, values):
    """n connections in turn, each sending one call whose arguments are a
    list of `values` nulls (the frame under the 2 MiB bound): how many
    were answered (an error: the gadget named is not there) and how many
    gadgetd closed unanswered."""
    items = field(1, varint(1 << 3) + varint(1)) * values
    call = field(1, b"nosuch") + field(2, b"m") + field(3, field(7, items))
    msg = varint(1 << 3) + varint(1) + field(7, call) + varint(11 << 3) + varint(CONTROL_PROTOCOL_VERSION)
    frame = struct.pack("<I", len(msg)) + msg
    answered = closed = 0
    for _ in range(n):
        s = connect_unix(path)
        try:
            s.sendall(frame)
            if answer(s, timeout=30) is None:
                closed += 1
            else:
                answered += 1
        except OSError:
            closed += 1
        s.close()
    print("answered %d closed %d" % (answered, closed), flush=True)


def int_map(key, n):
    """A gadget.Value {key: n} (n >= 0)."""
    return field(8, field(1, field(1, key.encode()) + field(2, varint(3 << 3) + varint(2 * n))))


def control_big_answers(path, n, name, size):
    """n calls of gadget name's big {"n": size} one after another on one
    connection: how many were answered with a result."""
    call = field(1, name.encode()) + field(2, b"big") + field(3, int_map("n", size))
    s = connect_unix(path)
    got = 0
    for i in range(n):
        msg = varint(1 << 3) + varint(i + 1) + field(7, call) + varint(11 << 3) + varint(CONTROL_PROTOCOL_VERSION)
        s.sendall(struct.pack("<I", len(msg)) + msg)
        a = answer(s, timeout=60)
        got += a is not None and a["kind"] == "other"
    s.close()
    print("answered %d" % got, flush=True)


def control_load(path, policy_path):
    s = connect_unix(path)
    s.sendall(request(1, 2, policy_path))
    t = time.time()
    a = answer(s, timeout=60)
    a = a or {"kind": "eof"}
    a["seconds"] = round(time.time() - t, 3)
    print(json.dumps(a), flush=True)


def control_waits(path, n, first, policy_path):
    """n `load`s of policy_path pipelined on one connection (each answered
    once its gadget is ready); reads `first` answers, prints what they
    were, waits for a line on standard input, then reads the rest (60 s at
    most) and prints those."""
    s = connect_unix(path)
    s.sendall(b"".join(request(i + 1, 2, policy_path) for i in range(n)))
    buf = bytearray()

    def read(k):
        got = {"answered": 0, "busy_connection": 0, "busy_queued": 0, "done": 0}
        for a in answers(s, k, 60, buf):
            got["answered"] += 1
            m = a.get("message", "")
            got["busy_connection"] += "this connection awaits" in m
            got["busy_queued"] += "CallsQueuedMax" in m
            got["done"] += a["kind"] == "done"
        return " ".join("%s %d" % kv for kv in got.items())

    print(read(first), flush=True)
    sys.stdin.readline()
    print(read(n - first), flush=True)
    s.close()


def gateway_hold(port, n, hold):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, n + 64)), hard))
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            break
        socks.append(s)
    time.sleep(0.3)
    for s in socks:
        try:
            s.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the end of the head
        except OSError:
            pass
    closed = set()
    poll = select.poll()
    byfd = {s.fileno(): s for s in socks}
    for fd in byfd:
        poll.register(fd, select.POLLIN)
    end = time.time() + hold
    while time.time() < end:
        for fd, _ in poll.poll(200):
            try:
                data = byfd[fd].recv(4096)
            except OSError:
                data = b""
            if not data:
                closed.add(fd)
                poll.unregister(fd)
    print("opened %d closed %d" % (len(socks), len(closed)), flush=True)
    for s in socks:
        s.close()


def gateway_big(port, token_file, name, size, n):
    """As a page asking its gadget for big results as fast as it can: four
    connections, each calling NAME.big {"n": SIZE} n times in turn."""
    import http.client
    import threading
    with open(token_file) as f:
        token = f.read().strip()
    body = json.dumps({"n": size})
    got = {"ok": 0, "other": 0}

    def one():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for _ in range(n):
            try:
                c.request("POST", "/api/gadgets/%s/call/big" % name, body=body,
                          headers={"Authorization": "Bearer " + token, "Content-Type": "application/json",
                                   "Host": "127.0.0.1:%d" % port})
                r = c.getresponse()
                r.read()
                got["ok" if r.status == 200 else "other"] += 1
            except OSError:
                got["other"] += 1
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok %d other %d" % (got["ok"], got["other"]), flush=True)


def gateway_notoken(port, n):
    statuses = {}
    s = None
    for _ in range(n):
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /api/gadgets HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("closed")
                head += chunk
            status = int(head.split(b" ", 2)[1])
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = head.split(b"\r\n\r\n", 1)[1]
            while len(body) < length:
                body += s.recv(65536)
        except OSError:
            status = "closed"
            if s:
                s.close()
            s = None
        statuses[status] = statuses.get(status, 0) + 1
    print(" ".join("status_%s %d" % kv for kv in sorted(statuses.items(), key=str)), flush=True)


def gateway_notoken_hold(port, n, hold, every):
    """n connections, each sending a request without the token every
    `every` s (each answered 401) for hold s, opening a new one for each
    that gadgetd closes: how many requests were answered, and closed."""
    socks, answered, closed = [], 0, 0
    end = time.time() + hold

    def opened():
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return None
    socks = [opened() for _ in range(n)]
    while time.time() < end:
        for i, s in enumerate(socks):
            try:
                if s is None:
                    raise OSError("not open")
                s.sendall(b"GET /api/gadgets HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
                data = s.recv(65536)
                if not data:
                    raise OSError("closed")
                answered += 1
            except OSError:
                closed += 1
                if s:
                    s.close()
                socks[i] = opened()
        time.sleep(every)
    print("answered %d closed %d" % (answered, closed), flush=True)


def stall_open(path, hold):
    """A fanotify permission mark on path that is never answered: each
    open() of it waits until this ends (then the kernel allows it)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fan_class_content, fan_mark_add, fan_open_perm, at_fdcwd = 0x4, 0x1, 0x10000, -100
    fd = libc.fanotify_init(fan_class_content | 0x1, os.O_RDONLY)  # FAN_CLOEXEC
    if fd < 0 or libc.fanotify_mark(fd, fan_mark_add, ctypes.c_uint64(fan_open_perm), at_fdcwd,
                                    path.encode()) < 0:
        print("error %d" % ctypes.get_errno(), flush=True)
        return 1
    print("stalling 1", flush=True)
    end = time.time() + hold
    while time.time() < end:
        if select.select([sys.stdin], [], [], 0.2)[0] and not sys.stdin.read(1):
            break
    os.close(fd)
    return 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "control-idle":
        control_idle(args[0], int(args[1]), float(args[2]))
    elif cmd == "control-noread":
        control_noread(args[0], int(args[1]), int(args[2]), args[3])
    elif cmd == "control-wide":
        control_wide(args[0], int(args[1]), int(args[2]))
    elif cmd == "control-big-answers":
        control_big_answers(args[0], int(args[1]), args[2], int(args[3]))
    elif cmd == "control-load":
        control_load(args[0], args[1])
    elif cmd == "control-waits":
        control_waits(args[0], int(args[1]), int(args[2]), args[3])
    elif cmd == "gateway-hold":
        gateway_hold(int(args[0]), int(args[1]), float(args[2]))
    elif cmd == "gateway-big":
        gateway_big(int(args[0]), args[1], args[2], int(args[3]), int(args[4]))
    elif cmd == "gateway-notoken":
        gateway_notoken(int(args[0]), int(args[1]))
    elif cmd == "gateway-notoken-hold":
        gateway_notoken_hold(int(args[0]), int(args[1]), float(args[2]), float(args[3]))
    elif cmd == "stall-open":
        return stall_open(args[0], float(args[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
