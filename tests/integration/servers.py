"""Loopback HTTP servers that misbehave, for the http binding's
hostile-load tests (load/http.py) and for bench/hostile.py."""
import socket
import threading


class NeverAccepts:
    """A loopback listener with a backlog of 1 that never accepts: past the
    first connections, SYNs go unanswered and connects hang."""

    def __enter__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        return self

    def __exit__(self, *exc):
        self.sock.close()


class ManyHeaders:
    """A loopback server answering every request with n distinct headers."""

    def __init__(self, n):
        lines = ["HTTP/1.1 200 OK", "Content-Length: 2", "Connection: close"]
        lines += ["X%05d:a" % i for i in range(n)]
        self.response = ("\r\n".join(lines) + "\r\n\r\nok").encode()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(c,), daemon=True).start()

    def answer(self, c):
        try:
            c.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = c.recv(4096)
                if not chunk:
                    return
                data += chunk
            c.sendall(self.response)
        except OSError:
            pass
        finally:
            c.close()

    def __enter__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.sock.close()


class Recorder:
    """A loopback HTTP server that records every request it receives
    (method, path, header lines as received) and answers 200 "ok PATH";
    /api/redirect answers 302 to /private/ on the same server. It never
    echoes a request header back."""

    def __init__(self):
        import http.server
        outer = self
        self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self):
                outer.seen.append((self.command, self.path, self.headers.items()))
                if self.path.startswith("/api/redirect"):
                    self.send_response(302)
                    self.send_header("Location", "http://127.0.0.1:%d/private/" % outer.port)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b"ok " + self.path.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = reply

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def headers(self, i, name):
        """The values of header name (any case) in the i-th request seen."""
        return [v for k, v in self.seen[i][2] if k.lower() == name.lower()]

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
