"""Who may use whom, checked: every `#include "..."` of the C sources is a
header of the including file's own folder or of a folder its row of
docs/ARCHITECTURE.md's table ("| Folder | Process | Privilege | May use |")
lists under May use; a private header (NAME_int.h) is included only from
its own folder; and every folder with C sources has a row. A folder is the
longest row whose path starts the file's path (`supervisor` is the files at
the top of supervisor/). An include is found as the compiler would: beside
the including file, then under each folder the build names as an include
directory (INCLUDE_ROOTS), and a header no root holds is named. Each
failure names the file and line. Reads the source tree only: SOURCE_ROOT,
else the tree this file is in."""
import os
import re
import sys

TOP = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE_HEAD = "| Folder | Process | Privilege | May use |"
# The include directories the meson.build files give (include_directories):
# an include is looked for under these, in this order, after its own folder.
INCLUDE_ROOTS = ["supervisor", "proto", "policy", "worker/filter", "worker/libgadget", "worker/sandbox",
                 "ctl", "tests", "bench"]
SKIP_DIRS = {".git", "node_modules", "subprojects"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def rows():
    path = os.path.join(TOP, "docs", "ARCHITECTURE.md")
    out = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index(TABLE_HEAD)
    except ValueError:
        sys.exit("docs/ARCHITECTURE.md: no table with the header %r" % TABLE_HEAD)
    for n, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        folder = cells[0].strip("`")
        uses = set(re.findall(r"`([^`]+)`", cells[3]))
        out[folder] = (uses, n)
    return out


def sources():
    for d, dirs, files in os.walk(TOP):
        # build trees (meson's, whatever their name: build/, a package
        # build's obj-*/) hold generated sources, not the tree's
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and
                         not os.path.isdir(os.path.join(d, x, "meson-private")))
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), TOP)


def folder_of(path, folders):
    best = None
    for f in folders:
        if (path.startswith(f + "/") and "/" not in path[len(f) + 1:] if f == "supervisor" else
                path.startswith(f + "/")):
            if best is None or len(f) > len(best):
                best = f
    return best


def resolve(src, name):
    here = os.path.dirname(src)
    for base in [here] + INCLUDE_ROOTS:
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(TOP, p)):
            return p
    return None


def main():
    table = rows()
    folders = list(table)
    bad = []
    for src in sources():
        own = folder_of(src, folders)
        if own is None:
            bad.append("%s: its folder has no row in docs/ARCHITECTURE.md's table" % src)
            continue
        with open(os.path.join(TOP, src), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                hdr = resolve(src, m.group(1))
                if hdr is None:
                    # generated at build time (control.pb-c.h, filter_bpf.h, ...)
                    continue
                theirs = folder_of(hdr, folders)
                if theirs is None:
                    bad.append("%s:%d: includes %s, whose folder has no row in docs/ARCHITECTURE.md's table"
                               % (src, n, hdr))
                    continue
                if theirs == own:
                    continue
                if hdr.endswith("_int.h"):
                    bad.append("%s:%d: includes %s, the private header of %s" % (src, n, hdr, theirs))
                elif theirs not in table[own][0]:
                    bad.append("%s:%d: includes %s, of %s, which docs/ARCHITECTURE.md:%d does not let %s use"
                               % (src, n, hdr, theirs, table[own][1], own))
    for b in bad:
        print(b)
    print("%d include(s) against the rules" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
