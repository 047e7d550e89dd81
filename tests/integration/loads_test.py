#!/usr/bin/env python3
"""gadgetctl load and restart, from outside: a load is recorded in the
state directory and loaded again by the next gadgetd (a file gone or
broken by then is named in the log and skipped), --runtime only until
gadgetd restarts; load and restart answer once the gadget is ready (or
with why it did not start), --no-block at once; restart reads the policy
file again and refuses a file with errors, the gadget running on.
Usage: loads_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import sys

from harness import Daemon, check, main, policy, test, wait_for


def extra_dir(tmp):
    """Policies loaded with gadgetctl load, outside the policy directory."""
    path = os.path.join(tmp, "extra")
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o755)
    return path


def status(d, name):
    r = d.ctl("--json", "status", name)
    check(r.returncode == 0, "status %s: %r" % (name, r.stderr))
    return json.loads(r.stdout)


@test
def load_waits_until_ready(tmp):
    """A gadget whose hello takes a second is ready when load answers:
    the next call goes through, with no wait of the caller's own."""
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "slow", "Arguments=slowstart 1000\n")
        r = d.ctl("load", pol)
        check(r.returncode == 0 and r.stdout.strip() == "loaded slow: ready", "load: %r" % (r,))
        check(d.state("slow") == "ready", "state once load answered: %r" % d.state("slow"))
        r = d.ctl("call", "slow", "echo", '"hi"')
        check(r.returncode == 0 and json.loads(r.stdout) == "hi", "the call after load: %r" % (r,))


@test
def load_no_block_answers_at_once(tmp):
    """load --no-block answers while the gadget starts; a call meanwhile
    waits for its start."""
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "slow", "Arguments=slowstart 3000\n")
        r = d.ctl("load", "--no-block", pol)
        check(r.returncode == 0 and r.stdout.strip() == "loaded slow", "load --no-block: %r" % (r,))
        check(d.state("slow") == "starting", "state: %r" % d.state("slow"))
        # A call made during that start waits for the gadget's hello, then
        # is answered (not refused as not ready).
        r = d.ctl("call", "slow", "echo", '"hi"')
        check(r.returncode == 0 and json.loads(r.stdout) == "hi", "a call during the start: %r" % (r,))
        check(d.state("slow") == "ready", "slow ready: %r" % d.state("slow"))


@test
def load_says_why_it_did_not_start(tmp):
    """A gadget that dies before its hello: load fails (exit 1) and says
    how it ended."""
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "crasher", "Arguments=crash\nRestart=no\n")
        r = d.ctl("load", pol)
        check(r.returncode == 1 and "loaded crasher, but" in r.stderr and "did not start" in r.stderr and
              "SIGABRT" in r.stderr, "load of a crasher: %r" % (r,))
        check(d.state("crasher") == "failed", "state: %r" % d.state("crasher"))


@test
def load_on_demand_is_idle(tmp):
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "od", "Start=on-demand\n")
        r = d.ctl("load", pol)
        check(r.returncode == 0 and r.stdout.strip() == "loaded od: idle (starts at its first call)",
              "load: %r" % (r,))


@test
def load_says_what_it_did(tmp):
    """A stopped gadget's unchanged file starts it, and says so; a running
    one's is left; a changed one restarts it."""
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "t", "")
        check(d.ctl("load", pol).returncode == 0, "first load")
        check(d.ctl("stop", "t").returncode == 0, "stop")
        wait_for(lambda: d.state("t") == "stopped", what="t stopped")
        r = d.ctl("load", pol)
        check(r.returncode == 0 and r.stdout.strip() == "started t (policy unchanged): ready", "load: %r" % (r,))
        r = d.ctl("load", pol)
        check(r.returncode == 0 and r.stdout.strip() == "t is already loaded and unchanged: ready",
              "load of a running one: %r" % (r,))
        policy(extra_dir(tmp), "t", "TasksMax=32\n")
        r = d.ctl("load", pol)
        check(r.returncode == 0 and r.stdout.strip() == "restarted t on its changed policy: ready",
              "load of a changed file: %r" % (r,))


@test
def load_persists_across_gadgetd_restart(tmp):
    """A load is there after gadgetd's restart, a --runtime load (which
    says so) is not; a recorded file that is gone or now broken is named
    in the log and skipped, the others load."""
    extra = extra_dir(tmp)
    keep, gone, broken, rt = (policy(extra, n, "") for n in ("keep", "gone", "broken", "rt"))
    d = Daemon(tmp)
    with d:
        for p in (keep, gone, broken):
            r = d.ctl("load", p)
            check(r.returncode == 0, "load %s: %r" % (p, r))
        r = d.ctl("load", "--runtime", rt)
        check(r.returncode == 0 and "until gadgetd restarts" in r.stdout, "load --runtime: %r" % (r,))
        d.stop()
        os.unlink(gone)
        with open(broken, "a") as f:
            f.write("NoSuchKey=1\n")
        d.start()
        wait_for(lambda: d.state("keep") == "ready", what="keep loaded again")
        names = set(d.list())
        check(names == {"keep"}, "loaded after the restart: %r" % sorted(names))
        log = d.logtext()
        check("%s: cannot open" % gone in log, "the gone file is not named in the log: %s" % log[-2000:])
        check("%s:4" % broken in log, "the broken file's error is not in the log: %s" % log[-2000:])


@test
def recorded_load_read_with_its_loaders_rights(tmp):
    """At the next start a recorded file is read with the rights of the
    user who loaded it: one she can no longer read is skipped (and named),
    while root's own file of the same mode loads."""
    extra = extra_dir(tmp)
    hers, roots = policy(extra, "hers", ""), policy(extra, "roots", "")
    d = Daemon(tmp, extra=["--group", "nogroup"])
    with d:
        r = d.ctl("load", hers, user=(65534, 65534))
        check(r.returncode == 0, "load as a member of the control group: %r" % (r,))
        check(d.ctl("load", roots).returncode == 0, "load as root")
        d.stop()
        os.chmod(hers, 0o600)
        os.chmod(roots, 0o600)
        d.start()
        wait_for(lambda: d.state("roots") == "ready", what="root's load again")
        check("hers" not in d.list(), "a file its loader cannot read was loaded: %r" % sorted(d.list()))
        log = d.logtext()
        check("%s: cannot open: Permission denied" % hers in log, "the log does not name it: %s" % log[-2000:])


@test
def runtime_load_replaces_the_record(tmp):
    """A later load of the same name replaces its record: --runtime drops it."""
    pol = policy(extra_dir(tmp), "t", "")
    d = Daemon(tmp)
    with d:
        check(d.ctl("load", pol).returncode == 0, "load")
        check(d.ctl("load", "--runtime", pol).returncode == 0, "load --runtime")
        d.stop()
        d.start()
        wait_for(lambda: d.ctl("list").returncode == 0, what="gadgetd answering")
        check("t" not in d.list(), "a --runtime load came back: %r" % d.list())
        check(d.ctl("load", pol).returncode == 0, "load again")
        d.stop()
        d.start()
        wait_for(lambda: d.state("t") == "ready", what="t loaded again")


@test
def restart_rereads_the_policy(tmp):
    """An edited TasksMax= applies at restart; a file with errors is refused,
    its errors listed by file and line, the gadget running on as it was."""
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "t", "TasksMax=16\n")
        check(d.ctl("load", pol).returncode == 0, "load")
        policy(extra_dir(tmp), "t", "TasksMax=32\nArguments=slowstart 1000\n")
        r = d.ctl("restart", "t")
        check(r.returncode == 0 and r.stdout.strip() == "restarted t on its changed policy: ready",
              "restart: %r" % (r,))
        st = status(d, "t")
        check("TasksMax=32" in st["limits"] and st["state"] == "ready", "after restart: %r" % st)
        pid = st["pid"]
        policy(extra_dir(tmp), "t", "TasksMax=lots\n")
        r = d.ctl("restart", "t")
        check(r.returncode == 1 and "restart of t refused" in r.stderr and "%s:4" % pol in r.stderr,
              "restart with a broken file: %r" % (r,))
        st = status(d, "t")
        check("TasksMax=32" in st["limits"] and st["state"] == "ready" and st["pid"] == pid,
              "after the refused restart: %r" % st)
        # A file that now names another gadget is refused too.
        with open(pol, "w") as f:
            f.write("[Gadget]\nName=other\nExec=%s\n" % os.environ["TESTGADGET"])
        r = d.ctl("restart", "t")
        check(r.returncode == 1 and 'now names gadget "other"' in r.stderr, "restart, renamed: %r" % (r,))
        check(status(d, "t")["pid"] == pid and "other" not in d.list(), "after the renamed file's refusal")


@test
def restart_no_block_answers_at_once(tmp):
    with Daemon(tmp) as d:
        pol = policy(extra_dir(tmp), "t", "Arguments=slowstart 1000\n")
        check(d.ctl("load", pol).returncode == 0, "load")
        r = d.ctl("restart", "--no-block", "t")
        check(r.returncode == 0 and r.stdout.strip() == "restarting t", "restart --no-block: %r" % (r,))
        check(d.state("t") == "ready", "the old process serves while the new one starts: %r" % d.state("t"))
        r = d.ctl("restart", "t")
        check(r.returncode == 0 and r.stdout.strip() == "restarted t: ready", "restart: %r" % (r,))
        check(d.state("t") == "ready", "state: %r" % d.state("t"))


@test
def unloaded_gadget_stays_unloaded(tmp):
    """gadgetctl unload forgets the load's record too: the gadget does not
    come back at gadgetd's next start, while another recorded load does."""
    extra = extra_dir(tmp)
    gone, kept = policy(extra, "gone", ""), policy(extra, "kept", "")
    d = Daemon(tmp)
    with d:
        for p in (gone, kept):
            check(d.ctl("load", p).returncode == 0, "load %s" % p)
        r = d.ctl("unload", "gone")
        check(r.returncode == 0 and r.stdout.strip() == "unloading gone", "unload: %r" % (r,))
        wait_for(lambda: "gone" not in d.list(), what="gone unloaded")
        d.stop()
        d.start()
        wait_for(lambda: d.state("kept") == "ready", what="kept loaded again")
        check(set(d.list()) == {"kept"}, "after the restart: %r" % sorted(d.list()))


if __name__ == "__main__":
    sys.exit(main())
