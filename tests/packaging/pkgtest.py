"""The packaging tests' helpers: the Debian packages built as packagers
build them, from the `git archive` tarball of the sources (once per state
of the sources, cached under a stable path, shared by every build
directory), and the Debian mirror apt uses (tests/vm/image's)."""
import fcntl
import glob
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from parts import need  # noqa: E402,F401  (the one skip rule; tests import it from here)

SRC = os.environ.get("SOURCE_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD_ROOT", "")
DEBS_CACHE = "/var/cache/gadgetd-test/debs"
DEB_TIMEOUT = 900


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
    """The files of the source tree a package is built from when it is not a
    git work tree: everything but build directories, hidden files, Debian
    build leftovers and the browser tests' node_modules (scripts/deps
    installs it)."""
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


# The sources are read only: a clone owned by another user than the one
# running the tests (root in CI) is still one to archive.
GIT = ["git", "-c", "safe.directory=*", "-C", SRC]


def git(*args):
    return subprocess.run(GIT + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def source_commit():
    """The commit a release tarball would be made of: HEAD, or, with changes
    to tracked files not yet committed, a commit of the work tree's tracked
    files as they are (`git stash create`, which changes no ref, index or
    file). Untracked files are left out, as a release leaves them out.
    None when SRC is not a git work tree."""
    if not shutil.which("git") or git("rev-parse", "--show-toplevel").stdout.strip() != \
            os.path.realpath(SRC):
        return None
    head = git("rev-parse", "--verify", "HEAD^{commit}").stdout.strip()
    if not head:
        return None
    return git("stash", "create").stdout.strip() or head


# The umask of the packager who unpacks the tarball (tar -x, not as root,
# applies it): files others cannot read, as under a umask of 007 or 027.
PACKAGER_UMASK = 0o007


def packager_modes(tree):
    """Gives every file and directory of tree the mode a packager's own
    `tar -x` under PACKAGER_UMASK gives it. With the tarball's
    group-writable modes, both hazards of a packager's tree are there at
    once: policies others could write (if copied as they are) and UIs
    others cannot read."""
    for top, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~PACKAGER_UMASK)


def unpack_release(commit, tree):
    """Unpacks `git archive` of commit into tree, modes as a packager's tree
    has them: git's default tar.umask 0002 (set here, whatever the user's
    git configuration says) makes every file group-writable, as in the
    release tarballs packagers build from, then packager_modes."""
    os.makedirs(tree)
    arch = subprocess.Popen(GIT + ["-c", "tar.umask=0002", "archive", "--format=tar", commit],
                            stdout=subprocess.PIPE)
    x = subprocess.run(["tar", "-x", "-p", "-C", tree], stdin=arch.stdout)
    arch.stdout.close()
    if arch.wait() != 0 or x.returncode != 0:
        raise Failure("git archive %s | tar -x failed" % commit)
    packager_modes(tree)


def copy_tree(files, tree):
    """Copies files into tree, group-writable as in a git archive tarball,
    then packager_modes."""
    for f in files:
        os.makedirs(os.path.join(tree, os.path.dirname(f)), exist_ok=True)
        dst = os.path.join(tree, f)
        shutil.copy2(os.path.join(SRC, f), dst)
        os.chmod(dst, os.stat(dst).st_mode | 0o020)
    packager_modes(tree)


TREE_REPORT = "== the package build's tree"


def tree_report(tree):
    """What the packager's tree shows besides the packages, for the build
    log (deb_test reads it): the mode the tarball gave a source file, and
    `gadgetd check` of the example policies the build made there (as root,
    gadgetd refuses a policy others may write)."""
    out = [TREE_REPORT] + ["source mode %s %o" % (f, stat.S_IMODE(os.stat(os.path.join(tree, f)).st_mode))
                           for f in ("tests/policies/good.policy", "examples/counter/counter.html")]
    for build in glob.glob(os.path.join(tree, "obj-*")):
        pols = sorted(p for p in glob.glob(os.path.join(build, "examples", "*.policy"))
                      if not p.endswith(".installed.policy"))
        c = subprocess.run([os.path.join(build, "supervisor", "gadgetd"), "check", *pols],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out.append("gadgetd check of %d example policies of the build: exit %d" % (len(pols), c.returncode))
        out.append(c.stdout.replace(build + "/", "BUILD/").rstrip())
    return "\n" + "\n".join(out) + "\n"


def debs_cache():
    """Where built packages are kept: under /var/cache, shared by every
    build directory of the same sources; else in the build directory."""
    base = DEBS_CACHE
    try:
        os.makedirs(base, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return os.path.join(BUILD or tempfile.gettempdir(), "packaging")


def package_build(commit, files, tree, check=True):
    """dpkg-buildpackage -us -uc -b of the sources (commit, or else a copy
    of files) unpacked into tree, as a packager builds them: with its unit
    tests (debian/rules), or with DEB_BUILD_OPTIONS=nocheck if not check.
    The .deb files land beside tree. Returns the finished process."""
    if commit:
        log("git archive %s, unpacked in %s" % (commit, tree))
        unpack_release(commit, tree)
    else:
        log("not a git work tree: building from a copy of " + SRC)
        copy_tree(files, tree)
    # dpkg-buildpackage wants debian/ at the top of the tree.
    shutil.copytree(os.path.join(tree, "packaging", "debian"), os.path.join(tree, "debian"))
    # Nothing of the test's build reaches the package build's tests.
    env = {k: v for k, v in os.environ.items() if k not in (
        "SOURCE_ROOT", "BUILD_ROOT", "GADGETD", "GADGETCTL", "UNIT_DIR", "MAN_DIR")}
    env["DEB_BUILD_OPTIONS"] = "parallel=%d%s" % (os.cpu_count() or 1, "" if check else " nocheck")
    log("dpkg-buildpackage -us -uc -b in " + tree)
    try:
        p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=tree, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=DEB_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("dpkg-buildpackage took more than %d s" % DEB_TIMEOUT)
    if p.returncode != 0:
        raise Failure("dpkg-buildpackage failed:\n" + p.stdout[-6000:])
    return p


def build_debs():
    """The .deb files built as a packager builds them: `dpkg-buildpackage
    -us -uc -b` (with its unit tests) in the unpacked `git archive` of the
    sources (source_commit; a tree that is not a git work tree is copied
    instead), cached by the commit's tree (debs_cache), so the packaging
    tests of every build directory build once per state of the sources.
    Returns (directory, list of .deb paths, build log)."""
    for tool in ("dpkg-buildpackage", "dh"):
        if not shutil.which(tool):
            need(tool, "not installed (scripts/deps installs it)")
    commit = source_commit()
    if commit:
        key = "git-" + git("rev-parse", commit + "^{tree}").stdout.strip()[:16]
    else:
        files = source_files()
        key = "copy-" + source_hash(files)
    base = debs_cache()
    out = os.path.join(base, "debs-" + key)
    with locked(os.path.join(base, "lock")):
        debs = sorted(glob.glob(os.path.join(out, "*.deb")))
        if debs:
            log("using the packages built from these sources before: " + out)
            os.utime(out)  # in use: kept by the pruning below
            return out, debs, open(os.path.join(out, "build.log")).read()
        # A few stay, and any used in the last hour: other build directories
        # and work trees of these sources may be testing with them.
        old = sorted(glob.glob(os.path.join(base, "debs-*")), key=os.path.getmtime)
        for d in old[:-3]:
            if os.path.getmtime(d) < time.time() - 3600:
                shutil.rmtree(d, ignore_errors=True)
        # A fixed path, held by the lock: the compiler cache (ccache, which
        # meson uses where it is installed) then finds each object an
        # earlier build of other sources compiled from the same file with
        # the same command line, which names this path (dpkg's
        # -ffile-prefix-map); a fresh temporary path compiled everything.
        tmp = os.path.join(base, "build")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        try:
            tree = os.path.join(tmp, "gadgetd")
            p = package_build(commit, files if not commit else None, tree, check=True)
            build_log = p.stdout + tree_report(tree)
            os.makedirs(out + ".tmp", exist_ok=True)
            for f in glob.glob(os.path.join(tmp, "*.deb")) + glob.glob(os.path.join(tmp, "*.changes")):
                shutil.copy2(f, out + ".tmp")
            with open(os.path.join(out + ".tmp", "build.log"), "w") as fp:
                fp.write(build_log)
            os.rename(out + ".tmp", out)
            return out, sorted(glob.glob(os.path.join(out, "*.deb"))), build_log
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


if __name__ == "__main__":
    if sys.argv[1:] == ["debs"]:
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
