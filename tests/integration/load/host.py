"""The host around gadgetd: secret files in directories others may write,
a second gadgetd on the same socket or state directory, host uids across
every gadgetd of the host, and `gadgetd run`'s stdio and signals
(issue 13, items 13-16)."""
import os
import signal
import subprocess
import time

from harness import PROBE, Daemon, Healthy, check, gadgetd_run, policy, test, wait_for


# --- gadgetd run: stdio and signals -----------------------------------------

@test
def host_run_append_keeps_file(tmp):
    """`gadgetd run POLICY >> file`: the program gets a pipe, not the file;
    its ftruncate(1, 0) cannot erase what the file held, and its output is
    appended after it."""
    out = os.path.join(tmp, "out.txt")
    with open(out, "w") as f:
        f.write("kept line\n")
    pol = policy(tmp, "probe", exec_path=PROBE)
    with open(out, "a") as f:
        r = subprocess.run(gadgetd_run(tmp) + [pol, "--", "truncate"], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    check(r.returncode == 0, "gadgetd run failed: %r" % r.stderr)
    text = open(out).read()
    check(text.startswith("kept line\n"), "the caller's file was changed: %r" % text)
    check("truncate: EINVAL" in text and text.endswith("written after the truncate\n"),
          "the program's output was not appended as written: %r" % text)


def caller_with_ignored_and_blocked():
    """As a careless caller would start gadgetd run: SIGPIPE and SIGUSR1
    ignored, SIGUSR2 blocked."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})


@test
def host_run_signals_default_at_exec(tmp):
    """The program starts with every disposition at default and an empty
    mask, whatever gadgetd (SIGPIPE ignored) or its caller ignored or
    blocked."""
    pol = policy(tmp, "probe", exec_path=PROBE)
    r = subprocess.run(gadgetd_run(tmp) + [pol, "--", "signals"], capture_output=True, text=True, timeout=60,
                       preexec_fn=caller_with_ignored_and_blocked)
    check(r.returncode == 0, "probe failed: %r" % r.stderr)
    facts = dict(l.split(": ", 1) for l in r.stdout.splitlines() if ": " in l)
    check(facts.get("sigpipe") == "default", "SIGPIPE at exec: %r" % facts)
    check(facts.get("ignored") == "0", "signals ignored at exec: %r" % facts)
    check(facts.get("blocked") == "0", "signals blocked at exec: %r" % facts)


@test
def host_run_signals_forwarded(tmp):
    """HUP, USR1, USR2 and ALRM sent to gadgetd run reach the program (they
    would otherwise end gadgetd run without a word); TERM ends it with the
    program's own status."""
    pol = policy(tmp, "trap", "SystemLibraries=yes\n", exec_path="/bin/sh")
    script = ("for s in HUP USR1 USR2 ALRM; do trap \"echo got-$s\" $s; done; "
              "trap 'echo got-TERM; exit 7' TERM; echo ready; while :; do sleep 0.05; done")
    p = subprocess.Popen(gadgetd_run(tmp) + [pol, "--", "-c", script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        for sig in (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
            p.send_signal(sig)
            line = p.stdout.readline().strip()
            check(line == "got-" + sig.name[3:], "after %s: %r (gadgetd run %s)" %
                  (sig.name, line, "alive" if p.poll() is None else "ended %s" % p.returncode))
        p.terminate()
        out, err = p.communicate(timeout=30)
        check("got-TERM" in out and p.returncode == 7, "status %s out %r err %r" % (p.returncode, out, err))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
