"""A hostile peer of the node link: a TLS client holding a certificate of
the cluster's CA (any name it was given, a node's or not) that sends the
frames it likes to a node's PeerListen= port — hand-made control.proto,
as attacks.py makes them for the control socket — and a fake node on the
server side (FakeNode) that answers what a node forwards to it."""
import socket
import ssl
import struct
import threading

from attacks import CONTROL_PROTOCOL_VERSION, field, int_map, parse, varint  # noqa: F401 (int_map: for tests)

NULL = varint(1 << 3) + varint(1)  # gadget.Value {null_value: true}


def string_value(s):
    return field(5, s.encode())


def list_value(items):
    return field(7, b"".join(field(1, i) for i in items))


def nested(depth):
    """A value of depth nested lists around a null."""
    v = NULL
    for _ in range(depth):
        v = field(7, field(1, v))
    return v


def call(rid, name, method, args=NULL, caller="", via="", admin=False, approved=False,
         version=CONTROL_PROTOCOL_VERSION, traceparent="", timeout_ms=0):
    """A whole control.Request frame carrying a Call, with the record a
    node would send (caller, via, traceparent, what is left of its
    caller's wait) and the claims it must not be trusted for (admin,
    approved)."""
    c = field(1, name.encode()) + field(2, method.encode()) + field(3, args)
    if caller:
        c += field(6, caller.encode())
    if via:
        c += field(7, via.encode())
    if admin:
        c += varint(8 << 3) + varint(1)
    if approved:
        c += varint(9 << 3) + varint(1)
    if traceparent:
        c += field(10, traceparent.encode())
    if timeout_ms:
        c += varint(11 << 3) + varint(timeout_ms)
    msg = varint(1 << 3) + varint(rid) + field(7, c)
    if version is not None:
        msg += varint(11 << 3) + varint(version)
    return struct.pack("<I", len(msg)) + msg


def trace(rid, trace_id, version=CONTROL_PROTOCOL_VERSION):
    """A whole control.Request frame asking for a node's spans of trace_id
    (32 hex digits), as gadgetctl trace on another node does."""
    t = field(1, trace_id.encode()) + varint(2 << 3) + varint(1)
    msg = varint(1 << 3) + varint(rid) + field(27, t)
    if version is not None:
        msg += varint(11 << 3) + varint(version)
    return struct.pack("<I", len(msg)) + msg


class Peer:
    """One session to addr ("127.0.0.1:PORT") as the holder of certdir's
    NAME.crt and NAME.key, expecting the server to be node `server`."""

    def __init__(self, addr, certdir, name, server):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain("%s/%s.crt" % (certdir, name), "%s/%s.key" % (certdir, name))
        ctx.load_verify_locations("%s/ca.crt" % certdir)
        host, port = addr.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=10)
        self.s = ctx.wrap_socket(raw, server_hostname=server)
        self.buf = bytearray()  # appended to in place: an answer of 1 MiB comes in 64 reads

    def send(self, data):
        self.s.sendall(data)

    def answer(self, timeout=10):
        """The next answer — {"kind": "error", "code", "message"},
        {"kind": "done"} or {"kind": "other"} (a result) — or None once the
        node closed the session or after timeout s without one."""
        self.s.settimeout(timeout)
        try:
            while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack("<I", self.buf[:4])[0]:
                chunk = self.s.recv(65536)
                if not chunk:
                    return None
                self.buf += chunk
        except (ConnectionError, ssl.SSLError, OSError):
            return None
        n = struct.unpack("<I", self.buf[:4])[0]
        m = parse(bytes(self.buf[4:4 + n]))
        del self.buf[:4 + n]
        if 2 in m:
            sub = parse(m[2][0])
            return {"kind": "error", "code": sub.get(1, [0])[0], "message": sub.get(2, [b""])[0].decode()}
        return {"kind": "done" if 3 in m else "other"}

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


GOODBYE = field(11, b"")  # control.Response {goodbye: {}}, id 0


class FakeNode:
    """A hostile node on the server side of the link: a TLS server holding
    certdir's NAME.crt and NAME.key (a certificate of the cluster's CA,
    as the real node NAME has), asking for the client's, that reads each
    request frame and answers it with a Goodbye — a node's last word
    before its re-exec — as often as it is asked; or, with close=True,
    that closes each session as soon as its handshake is done. requests
    counts the frames read, sessions the sessions accepted."""

    def __init__(self, certdir, name, close=False):
        self.close_at_once = close
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        self.ctx.load_cert_chain("%s/%s.crt" % (certdir, name), "%s/%s.key" % (certdir, name))
        self.ctx.load_verify_locations("%s/ca.crt" % certdir)
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.requests = self.sessions = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        raw.settimeout(30)
        try:
            s = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        with self.lock:
            self.sessions += 1
        if self.close_at_once:
            s.close()
            return
        buf = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack("<I", buf[:4])[0]:
                    buf = buf[4 + struct.unpack("<I", buf[:4])[0]:]
                    with self.lock:
                        self.requests += 1
                    s.sendall(struct.pack("<I", len(GOODBYE)) + GOODBYE)
        except (ssl.SSLError, OSError):
            pass
        s.close()

    def close(self):
        self.sock.close()
