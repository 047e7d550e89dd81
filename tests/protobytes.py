"""Protocol buffers and gadgetd's framing by hand, for tests and seed
generators that write the bytes a client or a worker sends: a frame (a
4-byte little-endian length, then the message), a varint, a
length-delimited field."""


def frame(msg):
    return len(msg).to_bytes(4, "little") + msg


def varint(n):
    out = b""
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(num, data):
    """A length-delimited field (string, message)."""
    return varint(num << 3 | 2) + varint(len(data)) + data
