"""gadget: the Python SDK for gadgetd's gadgets.

A gadget is a class whose methods are its RPC surface, each declared with
its signature in gadgetd's type language (proto/README.md, "Method
signatures"); gadgetd checks every call's arguments and every result
against it, so the SDK only sends the signatures in its hello:

    from gadget import Gadget, method

    class Counter(Gadget):
        @method("increment() -> int")
        async def increment(self):
            n = await self.kv("COUNT").get("count", default=0) + 1
            await self.kv("COUNT").put("count", n)
            return n

    Counter().run()

A call's arguments (a record of the named parameters) arrive as keyword
arguments. A method may be async: while it awaits a binding call, other
calls are served (calls and binding calls share the one connection,
matched by id). A plain method runs to its end before the next call; it
waits for a binding call with .result(), as the C SDK does (calls that
come meanwhile wait). Errors are GadgetError(code, message) with the
contract's codes (ErrorCode, the table of proto/contract.c).

Standard library only: the protocol's messages are encoded by hand
(_wire.py says why). The event loop is asyncio's, with one change: its
wake-up channel is a pipe, not a socket pair, because a gadget's sandbox
refuses every socket (docs/security.md)."""
import asyncio
import enum
import inspect
import os
import re
import select
import selectors
import sys
import time
import traceback

from . import _wire

__all__ = ["Gadget", "GadgetError", "ErrorCode", "method"]

PROTOCOL_VERSION = 2       # contract.h's GADGET_PROTOCOL_VERSION
_METHOD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")


class ErrorCode(enum.IntEnum):
    """gadget.proto's ErrorCode: the numbers of proto/contract.c."""
    INVALID = 1        # invalid argument
    NO_METHOD = 2      # no such method
    FAILED = 3         # operation failed
    DENIED = 4         # permission denied
    UNAVAILABLE = 5    # the gadget is not running
    TIMEOUT = 6        # no answer in time
    BUSY = 7           # the gadget is busy: too many calls queued
    PROTOCOL = 8       # protocol error
    LIMIT = 9          # a size or quota limit was reached
    NOT_FOUND = 10     # not found
    GONE = 11          # the gadget ended during the call
    INTERNAL = 12      # internal error in gadgetd


def _code(n):
    """An error code as ErrorCode; any other number reads as FAILED."""
    try:
        return ErrorCode(n)
    except ValueError:
        return ErrorCode.FAILED


class GadgetError(Exception):
    """An error answer: raised by a method to answer its call with code
    (an ErrorCode, or its number) and message; raised by a binding call
    that gadgetd answered with an error."""

    def __init__(self, code, message=""):
        self.code = _code(int(code))
        self.message = str(message)
        super().__init__("%s: %s" % (self.code.name.lower(), self.message))


def method(signature=None):
    """Declares a method of the gadget's RPC surface. signature: its
    signature in the type language ("greet(name: string(..100)) ->
    string"), whose name is the method's; None: untyped, named as the
    Python function, given the call's arguments as one value (a gadgetd
    with RequireTypes=yes refuses such a gadget)."""
    def mark(fn):
        fn._gadget_signature = signature
        return fn
    if callable(signature):  # @method without parentheses: untyped
        fn, signature = signature, None
        return mark(fn)
    return mark


class Pending:
    """A binding call in flight: await it (in an async method), or take
    .result() (anywhere: it blocks, and calls that come meanwhile wait)."""
    _NO = object()

    def __init__(self, conn, fut, default=_NO):
        self._conn = conn
        self._fut = fut
        self._default = default

    def __await__(self):
        return self._finish().__await__()

    def _value(self):
        try:
            return self._fut.result()
        except GadgetError as e:
            if e.code != ErrorCode.NOT_FOUND or self._default is Pending._NO:
                raise
            return self._default

    async def _finish(self):
        try:
            await self._fut
        except GadgetError:
            pass
        return self._value()

    def result(self):
        if not self._fut.done():
            self._conn.wait_for(self._fut)
        return self._value()


class _PipeEnd:
    """One end of asyncio's self-pipe, made of a pipe: what the event loop
    asks of the socket it would use."""

    def __init__(self, fd):
        self._fd = fd

    def fileno(self):
        return self._fd

    def setblocking(self, flag):
        os.set_blocking(self._fd, flag)

    def recv(self, n):
        return os.read(self._fd, n)

    def send(self, data):
        return os.write(self._fd, data)

    def close(self):
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _Loop(asyncio.SelectorEventLoop):
    """asyncio's loop with a pipe for its wake-ups: the sandbox refuses
    socketpair(), which the stock loop calls when it is made."""

    def _make_self_pipe(self):
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._ssock, self._csock = _PipeEnd(r), _PipeEnd(w)
        self._internal_fds += 1
        self._add_reader(r, self._read_from_self)


class _Conn:
    """The connection to gadgetd: frames in and out, binding calls in
    flight, calls being served."""

    def __init__(self, gadget, fd, loop):
        self.g = gadget
        self.fd = fd
        self.loop = loop
        self.max_frame = _wire.MAX_FRAME
        self.inbuf = bytearray()
        self.out = bytearray()
        self.flush_scheduled = False
        self.next_id = 0
        self.pending = {}          # binding call id -> future
        self.deferred = []         # messages read while a plain method waited
        self.serving = 0           # calls started, not yet answered
        self.stopping = False
        self.done = loop.create_future()

    # --- output: answers leave together at the end of a loop turn ---
    def send(self, msg, now=False):
        self.out += _wire.frame(msg)
        if now:
            self.flush()
        elif not self.flush_scheduled:
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self):
        self.flush_scheduled = False
        view = memoryview(self.out)
        sent = 0
        try:
            while sent < len(view):
                try:
                    sent += os.write(self.fd, view[sent:])
                except BlockingIOError:
                    # gadgetd reads when it can (its flow control): wait.
                    select.select([], [self.fd], [])
        finally:
            view.release()
            del self.out[:sent]

    # --- input ---
    def read_frames(self):
        """Reads what the fd has; the whole frames read so far. Raises
        EOFError at the end of the connection."""
        while True:
            try:
                b = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not b:
                raise EOFError
            self.inbuf += b
            if len(b) < (1 << 16):
                break
        frames = []
        buf = self.inbuf
        i = 0
        while len(buf) - i >= 4:
            n = int.from_bytes(buf[i:i + 4], "little")
            if n > self.max_frame:
                raise _wire.DecodeError("a frame of %d bytes" % n)
            if len(buf) - i - 4 < n:
                break
            frames.append(bytes(buf[i + 4:i + 4 + n]))
            i += 4 + n
        del buf[:i]
        return frames

    def wait_readable(self):
        select.select([self.fd], [], [])

    def handshake(self, name, methods):
        self.send(_wire.hello(name, PROTOCOL_VERSION, [m[0] for m in methods],
                              [m[1] or "" for m in methods]), now=True)
        while True:
            self.wait_readable()
            frames = self.read_frames()
            if frames:
                m = _wire.supervisor_msg(frames[0])
                if m[0] != "welcome":
                    raise _wire.DecodeError("gadgetd did not welcome the gadget")
                if 4096 <= m[1] < self.max_frame:
                    self.max_frame = m[1]
                # Calls that came with the welcome: served once the loop runs.
                for f in frames[1:]:
                    self.handle(f, defer=True)
                return

    def on_readable(self):
        try:
            frames = self.read_frames()
        except EOFError:
            self.finish(0)  # gadgetd went away: a clean end for the gadget
            return
        except Exception as e:
            self.fail(e)
            return
        for f in frames:
            self.handle(f)

    def handle(self, f, defer=False):
        try:
            m = _wire.supervisor_msg(f)
        except Exception as e:
            self.fail(e)
            return
        kind = m[0]
        if kind == "binding_result":
            fut = self.pending.pop(m[1], None)
            if fut is not None and not fut.done():
                if m[3]:
                    fut.set_exception(GadgetError(m[3], m[4]))
                else:
                    fut.set_result(m[2])
        elif defer:
            self.deferred.append(m)
        elif kind == "call":
            self.g._dispatch(self, m[1], m[2], m[3], m[4])
        elif kind == "shutdown":
            self.stopping = True
            self.maybe_done()
        # a stray welcome: nothing waits for it

    def maybe_done(self):
        if self.stopping and self.serving == 0:
            self.finish(0)

    def finish(self, status):
        if not self.done.done():
            self.done.set_result(status)

    def fail(self, e):
        print("gadget: connection to gadgetd failed: %s" % e, file=sys.stderr)
        self.finish(1)

    def wait_for(self, fut):
        """Blocks until fut (a binding call's) is done, reading frames
        meanwhile; calls read meanwhile are served later."""
        if self.out:
            self.flush()
        while not fut.done():
            self.wait_readable()
            try:
                frames = self.read_frames()
            except EOFError:
                raise GadgetError(ErrorCode.PROTOCOL, "gadgetd closed the connection")
            for f in frames:
                self.handle(f, defer=True)
        if self.deferred:
            self.loop.call_soon(self.run_deferred)

    def run_deferred(self):
        msgs, self.deferred = self.deferred, []
        for m in msgs:
            if m[0] == "call":
                self.g._dispatch(self, m[1], m[2], m[3], m[4])
            elif m[0] == "shutdown":
                self.stopping = True
                self.maybe_done()

    def binding_call(self, binding, op, args):
        self.next_id += 1
        fut = self.loop.create_future()
        self.pending[self.next_id] = fut
        try:
            msg = _wire.binding_call(self.next_id, binding, op, _wire.encode_value(args, path="args"))
        except (_wire.EncodeError, UnicodeError) as e:
            del self.pending[self.next_id]
            fut.set_exception(GadgetError(ErrorCode.INVALID, "%s.%s: %s" % (binding, op, e)))
            return fut
        if len(msg) + _wire.HEADER > self.max_frame:
            # gadgetd would end the gadget for it (a protocol violation).
            del self.pending[self.next_id]
            fut.set_exception(GadgetError(ErrorCode.LIMIT, "%s.%s: %d bytes of arguments, over the frame limit"
                                          % (binding, op, len(msg))))
            return fut
        self.send(msg, now=True)
        return fut


class _Binding:
    def __init__(self, g, name):
        self._g = g
        self._name = name

    def _call(self, op, args, default=Pending._NO):
        conn = self._g._conn_or_fail()
        return Pending(conn, conn.binding_call(self._name, op, args), default)


class KV(_Binding):
    """A kv binding (docs/bindings.md): keys are strings of 1 to 512 bytes."""

    def get(self, key, default=Pending._NO):
        """The value stored under key; GadgetError NOT_FOUND if none,
        unless a default is given."""
        return self._call("get", {"key": key}, default)

    def put(self, key, value):
        """Stores value under key; durable once done."""
        return self._call("put", {"key": key, "value": value})

    def delete(self, key):
        """Whether the key existed."""
        return self._call("delete", {"key": key})

    def list(self, prefix=None, limit=0, cursor=None):
        """{"keys": [...], "cursor": K or None}."""
        a = {}
        if prefix is not None:
            a["prefix"] = prefix
        if cursor is not None:
            a["cursor"] = cursor
        if limit:
            a["limit"] = limit
        return self._call("list", a)

    def cas(self, key, expect=None, value=None):
        """Compare-and-set: writes value (None: deletes) only if the stored
        value equals expect (None: only if the key does not exist).
        {"written": bool, "current": V (when not written and the key
        exists)}."""
        a = {"key": key}
        if expect is not None:
            a["expect"] = expect
        if value is not None:
            a["value"] = value
        return self._call("cas", a)

    def batch(self, ops):
        """ops: 1 to 64 dicts {"op": "put"|"delete"|"cas", "key", "value"?,
        "expect"?}, done all or none. {"applied": True, "results": [...]}
        or {"applied": False, "failed": I, "current"?: V}."""
        return self._call("batch", {"ops": list(ops)})


class HTTP(_Binding):
    """An http binding: request() -> {"status", "headers", "body": bytes}."""

    def request(self, url, method="GET", headers=None, body=None):
        a = {"url": url, "method": method}
        if headers is not None:
            a["headers"] = headers
        if body is not None:
            a["body"] = body.encode() if isinstance(body, str) else bytes(body)
        return self._call("request", a)

    def get(self, url, headers=None):
        return self.request(url, "GET", headers)


class Peer(_Binding):
    """A gadget binding: call(method, args) on its target gadget."""

    def call(self, method, args=None):
        return self._call("call", {"method": method, "args": args})


class Alarms(_Binding):
    """An alarm binding: gadgetd calls its Method= with {binding, id, at,
    payload, attempt} once an alarm is due."""

    def set(self, at=None, delay=None, payload=None, id=None):
        """at: ms since the epoch, or delay: ms from now. The alarm's id."""
        a = {"at": int(at)} if at is not None else {"delay": int(delay or 0)}
        if payload is not None:
            a["payload"] = payload
        if id is not None:
            a["id"] = id
        return self._call("set", a)

    def list(self, limit=0, cursor=None):
        a = {}
        if cursor is not None:
            a["cursor"] = cursor
        if limit:
            a["limit"] = limit
        return self._call("list", a)

    def cancel(self, id):
        """Whether there was such an alarm."""
        return self._call("cancel", {"id": id})


class Gadget:
    """Subclass it; its @method functions are the gadget's methods."""

    def __init__(self, name=None):
        # gadgetd gives the policy's Name= as GADGET_NAME, always.
        self.name = name if name is not None else os.environ.get("GADGET_NAME", "")
        self._conn = None
        self._methods = {}
        order = []
        for cls in reversed(type(self).__mro__):
            for attr, fn in vars(cls).items():
                if callable(fn) and hasattr(fn, "_gadget_signature"):
                    if hasattr(Gadget, attr):
                        raise ValueError("method %s hides Gadget.%s: name the Python function otherwise "
                                         "(the signature names the method)" % (attr, attr))
                    sig = fn._gadget_signature
                    mname = re.split(r"[(\s]", sig.strip(), maxsplit=1)[0] if sig else attr
                    if not _METHOD_NAME.match(mname):
                        raise ValueError("not a valid method name: %r" % mname)
                    if mname not in self._methods:
                        order.append(mname)
                    self._methods[mname] = (attr, sig)
        self._order = order

    # --- bindings ---
    def kv(self, binding):
        return KV(self, binding)

    def http(self, binding):
        return HTTP(self, binding)

    def gadget(self, binding):
        return Peer(self, binding)

    def alarms(self, binding):
        return Alarms(self, binding)

    def text(self, binding):
        """A text binding's value (a str)."""
        return _Binding(self, binding)._call("get", None)

    secret = text  # a secret binding's value, the same operation

    def binding_call(self, binding, op, args=None):
        """Any operation of any binding (docs/bindings.md)."""
        return _Binding(self, binding)._call(op, args)

    def log(self, text, level=6):
        """A log line for gadgetd (syslog priority 0..7), sent at once."""
        # At most 4095 bytes, cut at a character, as libgadget's gadget_log.
        b = str(text).encode("utf-8", "replace")[:4095].decode("utf-8", "ignore")
        self._conn_or_fail().send(_wire.log(max(0, min(7, int(level))), b), now=True)

    def _conn_or_fail(self):
        if self._conn is None:
            raise GadgetError(ErrorCode.UNAVAILABLE, "the gadget is not serving")
        return self._conn

    # --- serving ---
    def _dispatch(self, conn, id_, name, args, deadline_us=0):
        entry = self._methods.get(name)
        if entry is None:
            conn.send(_wire.call_result(id_, None, ErrorCode.NO_METHOD, 'no method "%s"' % name))
            return
        if deadline_us and time.monotonic_ns() // 1000 > deadline_us:
            # Its caller may have been answered already: a call never starts
            # after that (gadget.proto, Call.deadline_us).
            conn.send(_wire.call_result(id_, None, ErrorCode.TIMEOUT, "%s: not run: read after its deadline" % name))
            return
        attr, sig = entry
        fn = getattr(self, attr)
        conn.serving += 1
        t0 = time.monotonic()
        try:
            if sig is None:
                r = fn(args)
            elif isinstance(args, dict):
                r = fn(**args)
            elif args is None:
                r = fn()
            else:
                r = fn(args)
        except BaseException as e:
            self._answer(conn, id_, name, None, e)
            return
        if inspect.isawaitable(r):
            task = conn.loop.create_task(self._await(conn, id_, name, r))
            task.add_done_callback(lambda t: None)
        else:
            # A slow method's answer goes at once: answers wait to be sent
            # together only behind quick ones, or a batch of slow calls read
            # at once would answer nothing for their sum (gadgetd ends a
            # gadget that answers nothing for CallTimeout=), as libgadget.
            self._answer(conn, id_, name, r, None, now=time.monotonic() - t0 > 0.001)

    async def _await(self, conn, id_, name, aw):
        try:
            r = await aw
        except BaseException as e:
            self._answer(conn, id_, name, None, e)
            return
        self._answer(conn, id_, name, r, None)

    def _answer(self, conn, id_, name, result, exc, now=False):
        conn.serving -= 1
        code, message, packed = 0, "", None
        if exc is None:
            try:
                packed = _wire.encode_value(result, path="result")
            except (_wire.EncodeError, UnicodeError) as e:
                code, message = ErrorCode.FAILED, "%s: %s" % (name, e)
            else:
                if len(packed) + 32 > conn.max_frame:
                    code, message, packed = ErrorCode.LIMIT, "%s: a result of %d bytes is over the frame limit" % (
                        name, len(packed)), None
        elif isinstance(exc, GadgetError):
            code, message = exc.code, exc.message
        elif isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise exc
        else:
            traceback.print_exception(exc, file=sys.stderr)
            code, message = ErrorCode.FAILED, 'method "%s" failed: %s: %s' % (name, type(exc).__name__, exc)
        if packed is None:
            # At most 511 bytes, cut at a character, as libgadget's messages.
            message = message.encode("utf-8", "replace")[:511].decode("utf-8", "ignore")
        conn.send(_wire.call_result(id_, packed, int(code), message), now=now)
        conn.maybe_done()

    def serve(self):
        """Says hello and serves calls until gadgetd asks the gadget to
        stop; calls already started then finish and are answered (drain).
        0 then, 1 if the connection failed."""
        fd = int(os.environ.get("GADGET_FD", "3"))
        loop = _Loop(selectors.EpollSelector())
        asyncio.set_event_loop(loop)
        conn = _Conn(self, fd, loop)
        try:
            os.set_blocking(fd, False)
            conn.handshake(self.name, [(n, self._methods[n][1]) for n in self._order])
        except (OSError, EOFError, _wire.DecodeError) as e:
            print("gadget: no welcome from gadgetd: %s" % (e or "the connection ended"), file=sys.stderr)
            loop.close()
            return 1
        self._conn = conn
        loop.add_reader(fd, conn.on_readable)
        if conn.deferred:
            loop.call_soon(conn.run_deferred)
        try:
            status = loop.run_until_complete(conn.done)
            if conn.out:
                conn.flush()
        except OSError as e:
            print("gadget: cannot write to gadgetd: %s" % e, file=sys.stderr)
            status = 1
        finally:
            self._conn = None
            for t in asyncio.all_tasks(loop):
                t.cancel()
            loop.remove_reader(fd)
            loop.close()
        return status

    def run(self):
        """serve(), then exit with its status."""
        sys.exit(self.serve())
