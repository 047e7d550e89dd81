#!/usr/bin/env python3
"""The dev loop and gadget tests, from outside. `gadgetctl dev DIR` on a
small C gadget in a temporary folder, with its gadget.dev naming the
build: a changed source is built and answers with its new version while a
steady caller sees no refused call; a broken build prints the compiler's
output and the old version serves on; a policy error is printed with its
FILE:LINE and the old version serves on; the workshop link is printed;
Ctrl-C ends it and unloads the gadget it loaded. `gadgetd test FILE`: a
passing file, a failing one naming the failing call's line, and a fake
http answer in place of the request, and the Python notes example's
own test file. Usage: dev_test.py TEST.
Environment: GADGETD, GADGETCTL, CALLFLOOD, EXAMPLES, LIBGADGET_CFLAGS,
LIBGADGET_A."""
import os
import shutil
import signal
import subprocess
import sys
import threading

from gateway_util import Gateway
from harness import GADGETCTL, GADGETD, EXAMPLES, Paced, check, main, need, sanitizer_check, test, wait_for

SOURCE = """#include <gadget.h>
static gadget_value *version(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_int(%d);
}
static gadget_value *echo(struct gadget_call *call, const gadget_value *args, void *data)
{
        return gadget_copy(args);
}
int main(void)
{
        struct gadget *g = gadget_new(NULL);
        gadget_method(g, "version", version, NULL);
        gadget_method(g, "echo", echo, NULL);
        int e = gadget_serve(g);
        gadget_free(g);
        return e < 0 ? 1 : 0;
}
"""


def write(path, text, mode=0o644):
    """Writes path as an editor does: a new file renamed over the old."""
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".new")
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


class Lines(threading.Thread):
    """Every line a process writes on stdout, kept as it comes."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.lines = stream, []
        self.start()

    def run(self):
        for line in self.stream:
            self.lines.append(line.rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)

    def count(self, s):
        return sum(1 for line in list(self.lines) if s in line)


@test
def dev_loop(tmp):
    if not shutil.which("cc"):
        need("cc", "gadgetctl dev's test builds a C gadget")
    d = Gateway(tmp)
    with d:
        src = os.path.join(tmp, "g")
        os.makedirs(src)
        os.chmod(src, 0o755)
        write(os.path.join(src, "g.c"), SOURCE % 1)
        pol = os.path.join(src, "devg.policy")
        policy_text = "[Gadget]\nName=devg\nExec=%s\n" % os.path.join(src, "g")
        write(pol, policy_text)
        write(os.path.join(src, "gadget.dev"), "# the test's gadget\nBuild=cc -static %s -o g g.c %s -lprotobuf-c\n"
              % (os.environ["LIBGADGET_CFLAGS"], os.environ["LIBGADGET_A"]))
        dev = subprocess.Popen([GADGETCTL, "--socket", d.sock, "dev", src], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        out = Lines(dev.stdout)
        try:
            wait_for(lambda: out.count("workshop: ") or dev.poll() is not None, what=lambda: "dev's first load: "
                     + out.text())
            check("workshop: http://127.0.0.1:%d/" % d.port in out.text(), "the workshop link: " + out.text())

            def version():
                r = d.ctl("call", "devg", "version")
                check(r.returncode == 0, "call version: %r" % r.stderr)
                return int(r.stdout)
            check(version() == 1, "the first version answers")

            # A changed source: built, restarted without a gap.
            paced = Paced(d, "devg", min_sent=20)
            paced.answered_some(d, "devg")
            write(os.path.join(src, "g.c"), SOURCE % 2)
            wait_for(lambda: version() == 2, what=lambda: "version 2: " + out.text())

            # A broken build: the compiler's output, and version 2 serves on,
            # not restarted.
            restarts = d.status("devg")["restarts"]
            failed = out.count("build failed")
            write(os.path.join(src, "g.c"), SOURCE.replace("gadget_int(%d)", "gadget_int(3) oops"))
            wait_for(lambda: out.count("build failed") > failed, what=lambda: "the failed build: " + out.text())
            check("g.c:4:" in out.text() and "error" in out.text(), "the compiler's output: " + out.text())
            check(version() == 2, "version 2 serves on after a failed build")

            # A policy with an error: its FILE:LINE, and version 2 serves on.
            write(pol, policy_text + "Bogus=1\n")
            wait_for(lambda: out.count("%s:4: " % pol), what=lambda: "the policy's error: " + out.text())
            check(version() == 2, "version 2 serves on after a policy error")
            check(d.status("devg")["restarts"] == restarts, "no restart after a failed build or a policy error")

            # Both fixed: version 3, on the changed policy.
            write(pol, policy_text + "CallTimeout=7s\n")
            write(os.path.join(src, "g.c"), SOURCE % 3)
            wait_for(lambda: version() == 3, what=lambda: "version 3: " + out.text())
            paced.answered_some(d, "devg")
            paced.finish()
            paced.check_all_answered()
        finally:
            if dev.poll() is None:
                dev.send_signal(signal.SIGINT)
            dev.wait(timeout=30)
            out.join(timeout=10)
        # Its output is read here, not by the harness: looked at here.
        sanitizer_check(out.text(), "gadgetctl dev")
        check(dev.returncode == 0, "dev ended with %r: %s" % (dev.returncode, out.text()))
        check("unloading devg" in out.text(), "dev unloads the gadget it loaded: " + out.text())
        wait_for(lambda: "devg" not in d.list(), what="the gadget dev loaded unloaded")


def gadgetd_test(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return subprocess.run([GADGETD, "test", path], capture_output=True, text=True, timeout=60)


@test
def test_files(tmp):
    counter = os.path.join(EXAMPLES, "counter.policy")
    good = ("policy %s\ncall get\nexpect 0\ncall increment\nexpect 1\ncall increment\nexpect 2\n"
            "call nosuch\nerror no_method\n" % counter)
    r = gadgetd_test(tmp, "good.test", good)
    check(r.returncode == 0, "a passing file: %r %r" % (r.stdout, r.stderr))
    check("4 calls, 0 failed" in r.stdout, "its report: %r" % r.stdout)
    # The store is the run's own: the count starts at 0 again.
    r = gadgetd_test(tmp, "good.test", good)
    check(r.returncode == 0, "a second run on a fresh store: %r %r" % (r.stdout, r.stderr))

    bad = "policy %s\ncall increment\nexpect 1\n# wrong:\ncall get\nexpect 5\ncall get\nexpect 1\n" % counter
    r = gadgetd_test(tmp, "bad.test", bad)
    check(r.returncode == 1, "a failing file exits 1: %r %r" % (r.stdout, r.stderr))
    check("FAIL %s:5: call get: expected 5, got 1" % os.path.join(tmp, "bad.test") in r.stdout,
          "the failing call's line named: %r" % r.stdout)
    check("3 calls, 1 failed" in r.stdout, "its report: %r" % r.stdout)

    # fetch's http binding answered by the file: no request is made
    # (nothing listens on the allowed port).
    fetch = ("policy %s\n"
             "fake WEB request {\"status\": 200, \"headers\": {}, \"body\": {\"$bytes\": \"aGk=\"}}\n"
             "fake WEB request error unavailable no network in tests\n"
             "call get {\"url\": \"http://127.0.0.1:8080/a\"}\nexpect {\"body\": \"hi\", \"status\": 200}\n"
             "call get {\"url\": \"http://127.0.0.1:8080/b\"}\nerror unavailable\n"
             % os.path.join(EXAMPLES, "fetch.policy"))
    r = gadgetd_test(tmp, "fetch.test", fetch)
    check(r.returncode == 0, "fake http answers: %r %r" % (r.stdout, r.stderr))

    # The Python notes example (examples/python/notes.py) by its own test
    # file: its methods on a fresh store.
    r = subprocess.run([GADGETD, "test", os.path.join(EXAMPLES, "notes-py.test")], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0 and "10 calls, 0 failed" in r.stdout, "the Python notes: %r %r" % (r.stdout, r.stderr))

    r = gadgetd_test(tmp, "typo.test", "policy %s\nfake NOPE request null\ncall get\nexpect 0\n" % counter)
    check(r.returncode == 2 and "typo.test:2: no binding NOPE" in r.stderr, "a fake of no binding: %r" % r.stderr)


if __name__ == "__main__":
    sys.exit(main())
