"""The docs hold together: every relative link of README.md, BENCHMARKS.md
and docs/*.md points at a file that exists (and, with #anchor into a .md
file, at a heading that makes that anchor, as GitHub makes them); every
guide in docs/ is linked from README.md; README.md has at most
README_MAX_LINES lines; and every configuration key the docs write as a
key, `Key=` in backticks (or `[Section] Key=`), is one a man page source
under packaging/man/ documents (the man pages are the keys' reference);
and proto/gadget.proto's ErrorCode says each code's text as proto/contract.c's
table does. Each failure names the file and line. Reads the source tree only:
SOURCE_ROOT, else the tree this file is in."""
import glob
import os
import re
import sys

TOP = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 300
# Keys the docs name that belong to other programs, not to gadgetd, with
# where they are documented: they are not looked for in gadgetd's man pages.
FOREIGN_KEYS = {
    "AllowedCPUs=": "systemd.resource-control(5)",
    "CPUAffinity=": "systemd.exec(5)",
    "keepalives_idle=": "libpq's connection parameters",
}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# Inline code: `x`, ``x``; it may run over a line break, never over a blank line.
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)
# [text](target) and ![alt](target); the text may run over line breaks and
# hold brackets one deep ([a [b] c](d)).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
KEY = re.compile(r"^(?:\[[A-Za-z ]+\]\s+)?([A-Za-z][A-Za-z0-9_]*=)$")


def doc_files():
    files = [os.path.join(TOP, "README.md"), os.path.join(TOP, "BENCHMARKS.md")]
    files += sorted(glob.glob(os.path.join(TOP, "docs", "*.md")))
    return [f for f in files if os.path.exists(f)]


def rel(path):
    return os.path.relpath(path, TOP)


def prose(path):
    """The file's text with its fenced code blocks blanked (their lines
    kept empty, so that offsets still give line numbers)."""
    out = []
    fenced = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = FENCE.match(line)
            if m:
                if fenced is None:
                    fenced = m.group(1)
                elif m.group(1) == fenced:
                    fenced = None
                out.append("\n")
                continue
            out.append("\n" if fenced is not None else line)
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def slug(text):
    """GitHub's anchor of a heading: its text as shown (no markup, a link's
    text only), lower case, punctuation removed, each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors the headings of a markdown file make (a repeated one
    gets -1, -2, ... as on GitHub)."""
    if path not in _anchors:
        seen = {}
        got = set()
        for line in prose(path).split("\n"):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            a = base if base not in seen else "%s-%d" % (base, seen[base])
            seen[base] = seen.get(base, 0) + 1
            got.add(a)
        _anchors[path] = got
    return _anchors[path]


def without_code(text):
    """text with its inline code blanked (line breaks kept)."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def check_links(path, bad):
    """Checks every relative link of the file; returns the files it links
    and how many links it checked."""
    linked = set()
    n_links = 0
    text = prose(path)
    for m in LINK.finditer(without_code(text)):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        n_links += 1
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        where = "%s:%d" % (rel(path), line_of(text, m.start(1)))
        if not os.path.exists(dest):
            bad.append("%s: link to %s: no such file (%s)" % (where, target, rel(dest)))
            continue
        linked.add(dest)
        if anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append("%s: link to %s: %s has no heading that makes #%s" % (where, target, rel(dest), anchor))
    return linked, n_links


def man_text():
    text = ""
    for p in sorted(glob.glob(os.path.join(TOP, "packaging", "man", "*.scd"))):
        with open(p, encoding="utf-8") as f:
            text += f.read() + "\n"
    return text


def check_keys(path, man, bad):
    """Checks every key the file writes as one; returns how many."""
    n_keys = 0
    text = prose(path)
    for m in CODE_SPAN.finditer(text):
        k = KEY.match(" ".join(m.group(2).split()))
        if not k:
            continue
        key = k.group(1)
        n_keys += 1
        if key in FOREIGN_KEYS:
            continue
        if not re.search(r"(?<![A-Za-z0-9_])" + re.escape(key), man):
            bad.append("%s:%d: key `%s` is in no man page under packaging/man/ (the keys' reference)"
                       % (rel(path), line_of(text, m.start(2)), key))
    return n_keys


def check_error_texts(bad):
    """gadget.proto's ErrorCode comments are contract.c's texts."""
    with open(os.path.join(TOP, "proto", "contract.c"), encoding="utf-8") as f:
        table = {n.upper(): t for n, t in re.findall(r'\[GADGET_E[A-Z]+\] = \{ "([a-z_]+)", "([^"]+)" \}', f.read())}
    path = os.path.join(TOP, "proto", "gadget.proto")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    proto = {m.group(1): (m.group(2), line_of(text, m.start())) for m in
             re.finditer(r"^  ([A-Z_]+) = [1-9][0-9]*; +// (.*)$", text, re.M)}
    if len(proto) != len(table):
        bad.append("proto/gadget.proto:1: ErrorCode has %d codes, contract.c %d" % (len(proto), len(table)))
    for name, (comment, line) in proto.items():
        want = table.get(name)
        if comment != want:
            bad.append("proto/gadget.proto:%d: %s says %r, contract.c %r" % (line, name, comment, want))


def main():
    bad = []
    check_error_texts(bad)
    files = doc_files()
    man = man_text()
    linked_from = {}
    n_links = n_keys = 0
    for path in files:
        linked_from[path], n = check_links(path, bad)
        n_links += n
        n_keys += check_keys(path, man, bad)
    readme = os.path.join(TOP, "README.md")
    with open(readme, encoding="utf-8") as f:
        lines = len(f.read().splitlines())
    if lines > README_MAX_LINES:
        bad.append("README.md:%d: README.md has %d lines, more than %d: move the rest to a guide in docs/"
                   % (README_MAX_LINES + 1, lines, README_MAX_LINES))
    for guide in sorted(glob.glob(os.path.join(TOP, "docs", "*.md"))):
        if guide not in linked_from.get(readme, set()):
            bad.append("%s:1: this guide is not linked from README.md" % rel(guide))
    print("%d files: %d relative links, %d keys checked" % (len(files), n_links, n_keys))
    if bad:
        print("FAIL:\n  " + "\n  ".join(bad))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
