#!/usr/bin/python3
"""notes, in Python: titled notes in a kv binding (examples/notes in C).
add(title, text); get(title) -> text; list(prefix?) -> [titles];
delete(title) -> whether it existed."""
from gadget import Gadget, method


class Notes(Gadget):
    # The signatures are the argument checks: a method runs only with what
    # its signature allows.
    @method("add(title: string(1..200), text: string) -> null")
    async def add(self, title, text):
        await self.kv("NOTES").put(title, text)

    @method("get(title: string(1..200)) -> string")
    async def get(self, title):
        return await self.kv("NOTES").get(title)

    @method("list(prefix?: string) -> list<string>")
    async def list_titles(self, prefix=""):
        # Page through every key with the cursor.
        titles, cursor = [], None
        while True:
            page = await self.kv("NOTES").list(prefix, 100, cursor)
            titles += page["keys"]
            cursor = page.get("cursor")
            if not cursor:
                return titles

    @method("delete(title: string(1..200)) -> bool")
    async def delete(self, title):
        return await self.kv("NOTES").delete(title)


if __name__ == "__main__":
    Notes().run()
