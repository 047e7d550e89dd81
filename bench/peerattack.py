#!/usr/bin/env python3
"""bench/peerattack.py: the attacks of another node on a node's PeerListen=
port, for bench/hostile_nodes.py's rows; each runs until killed.

    peerattack.py wide ADDR CERTDIR NAME SERVER SESSIONS VALUES
        SESSIONS sessions as NAME, each resending requests of VALUES nulls
        (within the frame bound) and reading their answers.
    peerattack.py deep ADDR CERTDIR NAME SERVER
        one session after another as NAME, each ended by a frame of 20,000
        nested lists.
    peerattack.py stranger ADDR CERTDIR NAME SERVER
        sessions of a certificate the CA signed for a name that is no node,
        one after another.
    peerattack.py preauth ADDR COUNT
        COUNT TCP connections that never start TLS, opened again as the
        node closes them.
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from peerclient import NULL, Peer, call, list_value, nested  # noqa: E402


def wide(addr, certdir, name, server, sessions, values):
    frame = call(1, "healthy", "nosuch", list_value([NULL] * int(values)))

    def one():
        while True:
            try:
                p = Peer(addr, certdir, name, server)
                while True:
                    p.send(frame)
                    if p.answer(timeout=30) is None:
                        break
                p.close()
            except OSError:
                time.sleep(0.05)
    for _ in range(int(sessions)):
        threading.Thread(target=one, daemon=True).start()
    while True:
        time.sleep(3600)


def again(addr, certdir, name, server, frame):
    while True:
        try:
            p = Peer(addr, certdir, name, server)
            if frame:
                p.send(frame)
            p.answer(timeout=10)
            p.close()
        except OSError:
            time.sleep(0.01)


def preauth(addr, count):
    host, port = addr.rsplit(":", 1)
    held = []
    while True:
        held = [s for s in held if s.fileno() >= 0]
        while len(held) < int(count):
            try:
                held.append(socket.create_connection((host, int(port)), timeout=5))
            except OSError:
                break
        for s in list(held):
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    s.close()
                    held.remove(s)
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                held.remove(s)
        time.sleep(0.05)


def main():
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "wide":
        wide(*args)
    elif kind == "deep":
        again(*args, frame=call(1, "healthy", "nosuch", nested(20000)))
    elif kind == "stranger":
        again(*args, frame=call(1, "healthy", "nosuch"))
    elif kind == "preauth":
        preauth(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
