"""The systemd units pass `systemd-analyze verify` (with the built gadgetd,
gadgetctl and man pages standing in for the installed ones), keep their
security exposure below a bound, and deny no system call a gadget is
allowed (the unit's filter passes to every sandbox)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkgtest import SRC, run, check, need  # noqa: E402

UNIT_DIR = os.environ["UNIT_DIR"]
MAN_DIR = os.environ["MAN_DIR"]
EXPOSURE_MAX = "50"  # systemd-analyze's scale: 5.0 is "MEDIUM"


def units(tmp):
    """Copies of the built units whose commands name the built programs."""
    out = os.path.join(tmp, "units")
    os.makedirs(out)
    for u in ("gadgetd.service", "gadgetd.socket"):
        text = open(os.path.join(UNIT_DIR, u)).read()
        text = re.sub(r"^ExecStart=\S+/gadgetd", "ExecStart=" + os.environ["GADGETD"], text, flags=re.M)
        text = re.sub(r"^ExecReload=\S+/gadgetctl", "ExecReload=" + os.environ["GADGETCTL"], text, flags=re.M)
        with open(os.path.join(out, u), "w") as f:
            f.write(text)
    return out


def manpath(tmp):
    """A MANPATH holding the built pages, so Documentation= is checked."""
    root = os.path.join(tmp, "man")
    for page in os.listdir(MAN_DIR):
        section = page.rsplit(".", 1)[-1]
        if not section.isdigit():
            continue
        os.makedirs(os.path.join(root, "man" + section), exist_ok=True)
        os.symlink(os.path.join(MAN_DIR, page), os.path.join(root, "man" + section, page))
    return root


def syscalls(group, seen=None):
    out = subprocess.run(["systemd-analyze", "syscall-filter", group], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    names = set()
    for line in out.splitlines()[1:]:
        w = line.strip()
        if not w or w.startswith("#"):
            continue
        names |= syscalls(w) if w.startswith("@") else {w}
    return names


def check_filter(service):
    """No system call of the gadgets' allowlist (worker/filter/filter.c) is in the
    unit's deny list: a gadget would get EPERM for it under systemd; nor of
    the calls the sandbox's init makes beyond it (init_only: ptrace)."""
    denied = set()
    for line in open(service):
        if line.startswith("SystemCallFilter=~"):
            for w in line.split("=~", 1)[1].split():
                denied |= syscalls(w) if w.startswith("@") else {w}
    check(denied, "the unit has no SystemCallFilter= deny list")
    src = open(os.path.join(SRC, "worker", "filter", "filter.c")).read()
    start = src.index("allowed[] = {")
    allowed = set(re.findall(r'"([a-z0-9_]+)"', src[start:src.index("};", start)]))
    check(len(allowed) > 50, "could not read the gadgets' allowlist from worker/filter/filter.c")
    both = sorted(allowed & denied)
    check(not both, "the unit denies system calls gadgets are allowed: " + ", ".join(both))
    # ... nor of what the sandbox's init needs beyond them (it traces its
    # program to explain its crashes).
    start = src.index("init_only[] = {")
    init = set(re.findall(r'"([a-z0-9_]+)"', src[start:src.index("};", start)]))
    check(init and not (init & denied), "the unit denies the sandbox init's own calls: %s" % sorted(init & denied))


def main():
    if not shutil.which("systemd-analyze"):
        need("systemd-analyze", "not installed (scripts/deps installs systemd)")
    with tempfile.TemporaryDirectory() as tmp:
        udir = units(tmp)
        service = os.path.join(udir, "gadgetd.service")
        env, man = dict(os.environ), []
        if os.path.isdir(MAN_DIR):
            env["MANPATH"] = manpath(tmp)
        else:
            man = ["--man=no"]
            print("the man pages are not built (-Dman=disabled): Documentation= is not checked")
        p = subprocess.run(["systemd-analyze", "verify", *man, service, os.path.join(udir, "gadgetd.socket")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        print(p.stdout, end="")
        check(p.returncode == 0 and not p.stdout.strip(),
              "systemd-analyze verify failed (%d): %s" % (p.returncode, p.stdout))
        p = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=" + EXPOSURE_MAX,
                            "--no-pager", service], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        level = [ln for ln in p.stdout.splitlines() if "Overall exposure" in ln]
        print(level[-1] if level else p.stdout[-2000:])
        check(p.returncode == 0 and level, "exposure above %s/10 or no verdict:\n%s" % (
            int(EXPOSURE_MAX) / 10, p.stdout[-3000:]))
        check_filter(service)
    print("ok")


if __name__ == "__main__":
    run(main)
