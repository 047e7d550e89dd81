"""`dpkg-buildpackage -us -uc -b` builds the four packages from the
`git archive` tarball of the sources (group-writable files, as a packager
gets them), running the unit tests as a packager's build does (pkgtest.py);
each holds what an operator or a gadget author needs, the maintainer
scripts set up the group and directories, and lintian reports no errors."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkgtest import TREE_REPORT, run, build_debs, check, need  # noqa: E402

MA = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], stdout=subprocess.PIPE,
                    text=True).stdout.strip() if shutil.which("dpkg-architecture") else ""

EXPECTED = {
    "gadgetd": [
        "usr/sbin/gadgetd", "usr/bin/gadgetctl",
        "lib/systemd/system/gadgetd.service", "lib/systemd/system/gadgetd.socket",
        "usr/lib/sysusers.d/gadgetd.conf", "usr/lib/tmpfiles.d/gadgetd.conf", "usr/lib/systemd/catalog/gadgetd.catalog",
        "etc/gadgetd/gadgetd.conf", "etc/gadgetd/policy.d/",
        "usr/libexec/gadgets/hello", "usr/libexec/gadgets/wordcount", "usr/libexec/gadgets/counter",
        "usr/libexec/gadgetd/gadgetd-sandbox",
        "usr/share/gadgetd/examples/hello.policy", "usr/share/gadgetd/examples/counter.policy",
        "usr/share/man/man8/gadgetd.8.gz", "usr/share/man/man1/gadgetctl.1.gz",
        "usr/share/man/man5/gadget.policy.5.gz",
        "usr/share/bash-completion/completions/gadgetctl",
    ],
    "libgadget0": ["usr/lib/%s/libgadget.so.0" % MA],
    "libgadget-dev": [
        "usr/include/gadget/gadget.h", "usr/include/gadget/contract.h", "usr/lib/%s/libgadget.so" % MA,
        "usr/lib/%s/libgadget-static.a" % MA, "usr/lib/%s/libgadget.a" % MA, "usr/lib/%s/pkgconfig/libgadget.pc" % MA,
        "usr/share/man/man3/libgadget.3.gz", "usr/share/gadget/proto/gadget.proto",
        "usr/share/gadget/proto/control.proto", "usr/share/gadget/proto/README.md",
    ],
    "python3-gadget": ["usr/lib/python3/dist-packages/gadget/__init__.py",
                       "usr/lib/python3/dist-packages/gadget/_wire.py"],
}
# Files that belong to one package only.
NOT_IN = {"gadgetd": ["usr/include/", "libgadget.so", "dist-packages"], "libgadget0": ["usr/sbin/", "usr/include/"],
          "python3-gadget": ["usr/sbin/", "usr/include/", ".so"]}


def contents(deb):
    out = subprocess.run(["dpkg-deb", "-c", deb], stdout=subprocess.PIPE, text=True, check=True).stdout
    paths = set()
    for line in out.splitlines():
        path = line.split(None, 5)[5].split(" -> ")[0]
        paths.add(path[2:] if path.startswith("./") else path)
    return paths


def sdk_compiles(dev_deb):
    """A gadget's source that includes <gadget/gadget.h> as the SDK's
    manual page says compiles against the headers the -dev package
    installs (gadget.h includes contract.h beside it)."""
    cc = shutil.which("cc")
    if not cc:
        need("cc", "no C compiler (scripts/deps installs build-essential)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["dpkg-deb", "-x", dev_deb, tmp], check=True)
        src = os.path.join(tmp, "g.c")
        with open(src, "w") as f:
            f.write("#include <gadget/gadget.h>\n"
                    "static gadget_value *m(struct gadget_call *c, const gadget_value *a, void *d)\n"
                    "{ (void)c; (void)a; (void)d; return NULL; }\n"
                    "int main(void) { struct gadget *g = gadget_new(\"g\");\n"
                    "  return g && gadget_method(g, \"m\", m, NULL) == 0 &&\n"
                    "         gadget_method_name_ok(\"m\") && CONTROL_PROTOCOL_VERSION > 0 ? 0 : 1; }\n")
        r = subprocess.run([cc, "-fsyntax-only", "-Wall", "-Werror", "-I", os.path.join(tmp, "usr", "include"), src],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "a gadget does not compile against libgadget-dev's headers:\n" + r.stderr)
        # A static gadget, linked as the manual says, through pkg-config
        # (the package's libgadget.pc, its files where dpkg-deb put them).
        pcdir = os.path.join(tmp, "usr", "lib", MA, "pkgconfig")
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=tmp)
        flags = subprocess.run(["pkg-config", "--static", "--cflags", "--libs", "libgadget"], env=env,
                               capture_output=True, text=True)
        check(flags.returncode == 0, "pkg-config --static libgadget: " + flags.stderr)
        out = os.path.join(tmp, "g")
        r = subprocess.run([cc, "-static", src, "-o", out, *flags.stdout.split()], capture_output=True, text=True,
                           timeout=120)
        check(r.returncode == 0, "a static gadget does not link with pkg-config --static:\n" + r.stderr)
        heads = subprocess.run(["readelf", "-l", out], capture_output=True, text=True).stdout
        check("LOAD" in heads and "INTERP" not in heads, "the gadget is not static:\n%s" % heads)
    print("a gadget compiles against libgadget-dev's headers, and links statically through pkg-config")


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


def control_file(deb, name):
    p = subprocess.run(["dpkg-deb", "--ctrl-tarfile", deb], stdout=subprocess.PIPE, check=True)
    t = subprocess.run(["tar", "-xOf", "-", "./" + name], input=p.stdout, stdout=subprocess.PIPE)
    return t.stdout.decode()


def unit_text(deb):
    p = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE, check=True)
    t = subprocess.run(["tar", "-xOf", "-", "./lib/systemd/system/gadgetd.service"], input=p.stdout,
                       stdout=subprocess.PIPE, check=True)
    return t.stdout.decode()


def main():
    if not MA:
        need("dpkg-architecture", "not installed (scripts/deps installs dpkg-dev)")
    _, debs, build_log = build_debs()
    # As a packager's build: the unit suite ran on the tarball's files (the
    # policy test reads fixtures that are group-writable there) and passed.
    ran = re.findall(r"gadgetd:unit / (\S+) +OK", build_log)
    check("policy" in ran and re.search(r"^Fail: +0\b", build_log, re.M),
          "the package build did not run and pass the unit tests (%s):\n%s" % (ran, build_log[-3000:]))
    print("the package build ran the unit tests: " + " ".join(ran))
    # Its tree was a tarball's as a packager unpacks it (group-writable
    # files others cannot read), and the example policies the build made
    # there, with the UIs they name, are ones gadgetd (root) accepts.
    report = build_log[build_log.rfind(TREE_REPORT):]
    print(report)
    mode = re.search(r"^source mode tests/policies/good.policy ([0-7]+)$", report, re.M)
    check(mode and int(mode.group(1), 8) & 0o020, "the sources were not group-writable as in a git archive "
          "tarball:\n" + report)
    ui = re.search(r"^source mode examples/counter/counter.html ([0-7]+)$", report, re.M)
    check(ui and not int(ui.group(1), 8) & 0o004, "the sources were readable by others, unlike a tree "
          "unpacked under a packager's umask:\n" + report)
    checked = re.search(r"^gadgetd check of (\d+) example policies of the build: exit (\d+)$", report, re.M)
    check(checked and int(checked.group(1)) >= 6 and checked.group(2) == "0",
          "gadgetd check of the build's example policies failed:\n" + report)
    by_name = {}
    for d in debs:
        by_name[os.path.basename(d).split("_")[0]] = d
    for pkg, paths in EXPECTED.items():
        check(pkg in by_name, "no %s package among %s" % (pkg, [os.path.basename(d) for d in debs]))
        have = contents(by_name[pkg])
        missing = [p for p in paths if p not in have]
        check(not missing, "%s lacks %s" % (pkg, ", ".join(missing)))
        for bad in NOT_IN.get(pkg, []):
            wrong = sorted(p for p in have if bad in p)
            check(not wrong, "%s holds %s" % (pkg, ", ".join(wrong)))
        print("%s: %d paths, all expected ones present" % (pkg, len(have)))
    gd = by_name["gadgetd"]
    check("libsystemd0" in field(gd, "Depends"), "gadgetd does not depend on libsystemd0: built without it")
    dev_deps = field(by_name["libgadget-dev"], "Depends")
    check("libgadget0 (= " in dev_deps, "libgadget-dev does not pin libgadget0: " + dev_deps)
    sdk_compiles(by_name["libgadget-dev"])
    unit = unit_text(gd)
    check("ExecStart=/usr/sbin/gadgetd --config /etc/gadgetd/gadgetd.conf" in unit,
          "the packaged unit does not start /usr/sbin/gadgetd")
    postinst = control_file(gd, "postinst")
    for what in ("systemd-sysusers", "systemd-tmpfiles", "deb-systemd-helper enable 'gadgetd.service'",
                 "deb-systemd-helper enable 'gadgetd.socket'"):
        check(what in postinst, "gadgetd's postinst does not run " + what)
    if not shutil.which("lintian"):
        need("lintian", "the packages are right, but lintian is not installed (scripts/deps installs it)")
    p = subprocess.run(["lintian", "--tag-display-limit", "0", *debs], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    print("lintian:\n" + p.stdout)
    errors = [ln for ln in p.stdout.splitlines() if ln.startswith("E:")]
    check(not errors and p.returncode == 0, "lintian reports errors:\n" + "\n".join(errors or [p.stdout]))
    print("ok")


if __name__ == "__main__":
    run(main)
