#!/usr/bin/python3
"""counter, in Python: a durable count in a kv binding (examples/counter
in C). increment() -> the new count; get() -> the count."""
from gadget import Gadget, method


class Counter(Gadget):
    @method("increment() -> int")
    async def increment(self):
        n = await self.kv("COUNT").get("count", default=0) + 1
        await self.kv("COUNT").put("count", n)
        return n

    @method("get() -> int")
    async def get(self):
        return await self.kv("COUNT").get("count", default=0)


if __name__ == "__main__":
    Counter().run()
