"""confgadget: the conformance suite's gadget on the Python SDK, the twin
of confgadget.c (the same methods, signatures and answers)."""
import os
import time

from gadget import ErrorCode, Gadget, GadgetError, method


class Conf(Gadget):
    @method("echo(v: any) -> any")
    def echo(self, v):
        return v

    @method("nop()")
    def nop(self):
        return None

    @method("greet(name: string(..100), times?: int(1..10)) -> string")
    def greet(self, name, times=1):
        return " ".join(["hello, " + name] * times)

    @method("fail(code: int, message: string)")
    def fail(self, code, message):
        raise GadgetError(code, message)

    @method("crash()")
    def crash(self):
        raise RuntimeError("a method that fails without saying how")

    @method("kv() -> any")
    async def kv_ops(self):
        kv = self.kv("DATA")
        r = {}
        try:
            await kv.get("a/1")
        except GadgetError as e:
            r["missing"] = int(e.code)
        await kv.put("a/1", 1)
        await kv.put("a/2", {"x": [1, "two", None, True, 1.5, b"\0\xff"]})
        r["got"] = await kv.get("a/2")
        r["list"] = await kv.list(prefix="a/", limit=1)
        r["cas_miss"] = await kv.cas("a/1", expect=2, value=3)
        r["cas_hit"] = await kv.cas("a/1", expect=1, value=5)
        r["batch"] = await kv.batch([{"op": "put", "key": "b/1", "value": True},
                                     {"op": "delete", "key": "a/2"},
                                     {"op": "cas", "key": "a/1", "expect": 5, "value": 6}])
        r["deleted"] = await kv.delete("a/1")
        r["deleted_again"] = await kv.delete("a/1")
        r["keys"] = await kv.list()
        return r

    @method("http(url: string) -> {status: int, body: string}")
    async def http_get(self, url):
        resp = await self.http("WEB").get(url)
        return {"status": resp["status"], "body": resp["body"].decode("utf-8", "replace")}

    @method("slow(url: string) -> string")
    async def slow(self, url):
        return (await self.http("WEB").get(url))["body"].decode("utf-8", "replace")

    @method("peer(method: string, args: any) -> any")
    async def peer(self, method, args):
        return await self.gadget("PEER").call(method, args)

    @method("alarms() -> any")
    async def alarm_ops(self):
        clock = self.alarms("CLOCK")
        r = {"id": await clock.set(delay=3600000, payload={"n": 1}, id="later")}
        page = await clock.list()
        r["listed"] = [{"id": a["id"], "payload": a["payload"]} for a in page["alarms"]]
        r["cancelled"] = await clock.cancel("later")
        r["cancelled_again"] = await clock.cancel("later")
        await clock.set(delay=0, payload="rang", id="now")
        return r

    @method("ring(binding: string, id: string, at: int, payload: any, attempt: int)")
    async def ring(self, binding, id, at, payload, attempt):
        await self.kv("DATA").put("rung", {"id": id, "payload": payload, "attempt": attempt})

    @method("rung() -> any")
    def rung(self):
        return self.kv("DATA").get("rung", default=None).result()

    @method("texts() -> {text: string, secret: string}")
    def texts(self):
        # A plain method: it waits for its binding calls (the sync API).
        return {"text": self.text("GREETING").result(), "secret": self.secret("TOKEN").result()}

    @method("log(text: string, level: int(0..7))")
    def log_(self, text, level):
        self.log(text, level)

    @method("violate()")
    def violate(self):
        # Breaks the protocol: a frame header announcing 4 GiB.
        os.write(int(os.environ.get("GADGET_FD", "3")), b"\xff\xff\xff\xff")

    naps = 0

    @method("nap(ms: int(0..2000)) -> int")
    def nap(self, ms):
        # Sleeps, blocking the gadget; the naps started so far.
        Conf.naps += 1
        time.sleep(ms / 1000)
        return Conf.naps


Conf().run()
