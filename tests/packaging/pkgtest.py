"""The packaging tests' helpers: the Debian packages built once per source
tree (cached by a hash of the sources), and a minimal Debian tree with
systemd for systemd-nspawn, built once per machine under a stable path."""
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parts import need  # noqa: E402,F401  (the one skip rule; tests import it from here)

SRC = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD_ROOT", "")
ROOT_CACHE = os.environ.get("GADGETD_TEST_ROOT", "/var/cache/gadgetd-test/bookworm")
DEB_TIMEOUT = 900
ROOT_TIMEOUT = 1200
# What the container needs besides systemd: the run-time libraries of the
# packages (their Depends), so `dpkg -i` works there without a network.
ROOT_PACKAGES = ["systemd", "dbus", "libevent-2.1-7", "libevent-pthreads-2.1-7", "libseccomp2",
                 "libcap2", "libnl-3-200", "libnl-route-3-200", "libprotobuf-c1", "libsqlite3-0",
                 "libinih1", "libjansson4", "libcurl4", "libsystemd0"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def log(msg):
    print(msg, flush=True)


def locked(path):
    """An exclusive lock on path (created), held while the file stays open."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    f = open(path, "a")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def source_files():
    """The files of the source tree a package is built from: everything but
    build directories, hidden files, Debian build leftovers and the browser
    tests' node_modules (scripts/deps installs it)."""
    out = []
    for top, dirs, files in os.walk(SRC):
        rel = os.path.relpath(top, SRC)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules" and
                         not (rel == "." and (d.startswith("build") or d in ("subprojects", "debian"))) and
                         not os.path.exists(os.path.join(top, d, "meson-private")))
        for f in sorted(files):
            if not f.startswith("."):
                out.append(os.path.normpath(os.path.join(rel, f)))
    return out


def source_hash(files):
    h = hashlib.sha256()
    for f in files:
        h.update(f.encode() + b"\0")
        with open(os.path.join(SRC, f), "rb") as fp:
            h.update(hashlib.sha256(fp.read()).digest())
    return h.hexdigest()[:16]


def debs_cache():
    """Where built packages are kept: beside the container tree, shared by
    every build directory of the same sources; else in the build directory."""
    base = os.path.join(os.path.dirname(ROOT_CACHE), "debs")
    try:
        os.makedirs(base, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return os.path.join(BUILD or tempfile.gettempdir(), "packaging")


def build_debs():
    """The .deb files built by `dpkg-buildpackage -us -uc -b` from a copy of
    the sources, cached by the sources' hash (debs_cache). Returns
    (directory, list of .deb paths, build log)."""
    for tool in ("dpkg-buildpackage", "dh"):
        if not shutil.which(tool):
            need(tool, "not installed (scripts/deps installs it)")
    files = source_files()
    key = source_hash(files)
    base = debs_cache()
    out = os.path.join(base, "debs-" + key)
    with locked(os.path.join(base, "lock")):
        debs = sorted(glob.glob(os.path.join(out, "*.deb")))
        if debs:
            log("using the packages built from these sources before: " + out)
            return out, debs, open(os.path.join(out, "build.log")).read()
        old = sorted(glob.glob(os.path.join(base, "debs-*")), key=os.path.getmtime)
        for d in old[:-2]:  # a few stay, for other build directories of other trees
            shutil.rmtree(d, ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix="gadgetd-deb-")
        try:
            tree = os.path.join(tmp, "gadgetd")
            for f in files:
                os.makedirs(os.path.join(tree, os.path.dirname(f)), exist_ok=True)
                shutil.copy2(os.path.join(SRC, f), os.path.join(tree, f))
            # dpkg-buildpackage wants debian/ at the top of the tree.
            shutil.copytree(os.path.join(tree, "packaging", "debian"), os.path.join(tree, "debian"))
            env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d" % (os.cpu_count() or 1))
            log("dpkg-buildpackage -us -uc -b in " + tree)
            try:
                p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=tree, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=DEB_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise Failure("dpkg-buildpackage took more than %d s" % DEB_TIMEOUT)
            if p.returncode != 0:
                raise Failure("dpkg-buildpackage failed:\n" + p.stdout[-6000:])
            os.makedirs(out + ".tmp", exist_ok=True)
            for f in glob.glob(os.path.join(tmp, "*.deb")) + glob.glob(os.path.join(tmp, "*.changes")):
                shutil.copy2(f, out + ".tmp")
            with open(os.path.join(out + ".tmp", "build.log"), "w") as fp:
                fp.write(p.stdout)
            os.rename(out + ".tmp", out)
            return out, sorted(glob.glob(os.path.join(out, "*.deb"))), p.stdout
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def apt_mirror():
    """The Debian mirror apt is configured with (its main archive, not the
    security one), read from /etc/apt/sources.list*."""
    def pick(uri, suites, comps):
        return uri if "bookworm" in suites and "main" in comps else None

    paths = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")) + \
        sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    for path in paths:
        try:
            text = open(path).read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if ":" in line and not line.startswith(("#", " ")):
                        k, v = line.split(":", 1)
                        fields[k.strip().lower()] = v.split()
                if "deb" not in fields.get("types", []) or fields.get("enabled", ["yes"])[0] == "no":
                    continue
                for uri in fields.get("uris", []):
                    if pick(uri, fields.get("suites", []), fields.get("components", [])):
                        return uri
        else:
            for line in text.splitlines():
                w = line.split("#", 1)[0].split()
                w = [x for x in w if not x.startswith("[")]
                if len(w) >= 4 and w[0] == "deb" and pick(w[1], [w[2]], w[3:]):
                    return w[1]
    return None


def ensure_root():
    """The cached minimal Debian tree with systemd, built once per machine
    (again only if its package list changed). Returns its path, or ends
    the test through need()."""
    stamp_text = " ".join(ROOT_PACKAGES) + "\n"
    stamp = os.path.join(ROOT_CACHE, "etc", "gadgetd-test-packages")
    with locked(ROOT_CACHE + ".lock"):
        if os.path.exists(stamp) and open(stamp).read() == stamp_text:
            return ROOT_CACHE
        if not shutil.which("debootstrap"):
            need("debootstrap", "not installed (scripts/deps installs it)")
        mirror = apt_mirror()
        if not mirror:
            need("a Debian mirror", "none is configured in /etc/apt/sources.list*")
        tmp = ROOT_CACHE + ".new"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = ["debootstrap", "--variant=minbase", "--include=" + ",".join(ROOT_PACKAGES),
               "bookworm", tmp, mirror]
        log("building the cached container tree: " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=ROOT_TIMEOUT)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            need("the container tree", "debootstrap took more than %d s" % ROOT_TIMEOUT)
        if p.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            need("the container tree", "debootstrap failed: " + p.stdout[-2000:])
        with open(os.path.join(tmp, "etc", "gadgetd-test-packages"), "w") as fp:
            fp.write(stamp_text)
        shutil.rmtree(ROOT_CACHE, ignore_errors=True)
        os.rename(tmp, ROOT_CACHE)
        return ROOT_CACHE


if __name__ == "__main__":
    if sys.argv[1:] == ["root"]:
        print(ensure_root())
    elif sys.argv[1:] == ["debs"]:
        print(build_debs()[1])
    elif sys.argv[1:] == ["mirror"]:
        print(apt_mirror())


def run(main):
    """Runs a test's main: FAIL and exit 1 on a failed check."""
    try:
        main()
    except Failure as e:
        print("FAIL: %s" % e)
        sys.exit(1)
