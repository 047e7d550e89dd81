#!/usr/bin/env python3
"""What `gadgetctl reload` did to each gadget, told from outside: a real
gadgetd with real gadgets, driven with the real gadgetctl. A gadget whose
file has errors keeps running its previous policy, and the reload, status,
list and the workshop's list say so until the file is fixed; restarts are
blamed on what caused them. Usage: reload_test.py TEST.
Environment: GADGETD, GADGETCTL, TESTGADGET."""
import json
import os
import re
import sys

from gateway_util import Gateway
from harness import Daemon, check, main, policy, test, wait_for

# Errors the parser finds in this order: line 4 and 7 as it reads them,
# line 5 (a binding without Method=) only when its section ends.
BROKEN = "Bogus=1\n[Binding W]\nType=alarm\nMaxAlarms=0\n"


def lines_of(text, path):
    """The line numbers of path's errors in text, in the order given."""
    return [int(n) for n in re.findall(re.escape(path) + r":(\d+):", text)]


@test
def reload_keeps_a_broken_gadget_and_says_so(tmp):
    with Daemon(tmp) as d:
        path = policy(d.pol, "brk")
        policy(d.pol, "keep")
        d.ctl("reload")
        wait_for(lambda: d.state("brk") == "ready" and d.state("keep") == "ready", what="both ready")
        pid = d.list()["brk"]["pid"]
        policy(d.pol, "brk", BROKEN)
        r = d.ctl("reload")
        check(r.returncode == 1, "reload with a broken file: exit %d" % r.returncode)
        check("kept on its previous policy: brk" in r.stdout and "unchanged: keep" in r.stdout,
              "reload's stdout: %r" % r.stdout)
        check("kept brk on its previous policy: %s has 3 errors:" % path in r.stderr, "reload's stderr: %r" % r.stderr)
        check(lines_of(r.stderr, path) == [4, 5, 7], "errors in line order: %r" % r.stderr)
        rep = json.loads(d.ctl("--json", "reload").stdout)
        check(rep["errors"] == [] and len(rep["kept"]) == 1, "reload --json: %r" % rep)
        kept = rep["kept"][0]
        check(kept["name"] == "brk" and kept["path"] == path and
              [int(e.split(":")[1]) for e in kept["errors"]] == [4, 5, 7] and
              'unknown key "Bogus"' in kept["errors"][0], "kept: %r" % kept)
        # It runs on, on its previous policy: same process, still answers.
        g = d.list()["brk"]
        check(g["pid"] == pid and g["state"] == "ready" and g["kept_errors"] == 3, "brk: %r" % g)
        r = d.ctl("call", "brk", "echo", '"still"')
        check(r.returncode == 0 and r.stdout.strip() == '"still"', "call: %r %r" % (r.stdout, r.stderr))
        check(d.list()["keep"]["kept_errors"] == 0, "keep marked too: %r" % d.list()["keep"])
        r = d.ctl("status", "brk")
        check("kept on its previous policy: %s has 3 errors" % path in r.stdout and
              lines_of(r.stdout, path) == [4, 5, 7], "status: %r" % r.stdout)
        st = json.loads(d.ctl("--json", "status", "brk").stdout)
        check(st["kept_errors"] == 3 and len(st["kept_error_lines"]) == 3, "status --json: %r" % st)
        r = d.ctl("list")
        check(re.search(r"^brk\s+ready\s.*kept: 3 errors$", r.stdout, re.M) and
              re.search(r"^keep\s+ready\s.*\s-$", r.stdout, re.M), "list: %r" % r.stdout)
        check("[brk] error: kept on its previous policy: %s has 3 errors" % path in d.logtext(),
              "gadgetd's log does not name the gadget")
        # Fixed (and changed): restarted on the new policy, the mark gone,
        # the restart blamed on the reload.
        policy(d.pol, "brk", "CallTimeout=7s\n")
        r = d.ctl("--json", "reload")
        rep = json.loads(r.stdout)
        check(r.returncode == 0 and rep["restarted"] == ["brk"] and rep["kept"] == [] and
              rep["changed"] == [{"name": "brk", "keys": ["CallTimeout"]}], "fixed: %r" % rep)
        wait_for(lambda: d.state("brk") == "ready" and d.list()["brk"]["pid"] != pid, what="brk restarted")
        g = d.list()["brk"]
        check(g["kept_errors"] == 0 and g["cause"] == "policy changed by reload: CallTimeout", "after the fix: %r" % g)
        r = d.ctl("status", "brk")
        check("kept on" not in r.stdout and "CallTimeout=7000ms" in r.stdout, "status after the fix: %r" % r.stdout)
        check("POLICY" not in d.ctl("list").stdout, "list still has its POLICY column")
        check("[brk] policy changed by reload: CallTimeout" in d.logtext(), "the restart's cause in gadgetd's log")


@test
def reload_names_the_changed_keys(tmp):
    """A restarted gadget is listed with the keys and bindings that changed
    (set, changed or removed); comments and order are no change."""
    with Daemon(tmp) as d:
        policy(d.pol, "ch", "CallTimeout=5s\nMemoryMax=64M\n[Binding N]\nType=kv\n[Binding T]\nType=text\nValue=a\n")
        policy(d.pol, "calm", "CallTimeout=5s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("ch") == "ready" and d.state("calm") == "ready", what="both ready")
        policy(d.pol, "ch", "# now\nTasksMax=64\nCallTimeout=5s\n[Binding T]\nType=text\nValue=b\n[Binding N]\nType=kv\n")
        policy(d.pol, "calm", "# a comment only\nCallTimeout=5s\n")
        r = d.ctl("reload")
        check(r.returncode == 0 and "restarted: calm, ch (TasksMax, [Binding T], MemoryMax)\n" in r.stdout,
              "reload: %r %r" % (r.stdout, r.stderr))
        wait_for(lambda: d.state("ch") == "ready", what="ch restarted")
        check(d.list()["ch"]["cause"] == "policy changed by reload: TasksMax, [Binding T], MemoryMax",
              "cause: %r" % d.list()["ch"])
        check(d.list()["calm"]["cause"] == "policy changed by reload", "a comment's change: %r" % d.list()["calm"])


@test
def reload_waits_for_its_restarts_and_names_the_failed(tmp):
    """A reload answers once the gadgets it restarted serve on their new
    process: one whose changed policy starts is "restarted" and serves on
    its new pid at the answer; one whose new process does not start (its
    program aborts before the hello) is "not restarted", with why, exit
    status 1, and serves on with its previous process."""
    with Daemon(tmp) as d:
        policy(d.pol, "good", "CallTimeout=5s\n")
        policy(d.pol, "bad", "CallTimeout=5s\n")
        d.ctl("reload")
        wait_for(lambda: d.state("good") == "ready" and d.state("bad") == "ready", what="both ready")
        pids = {n: d.list()[n]["pid"] for n in ("good", "bad")}
        policy(d.pol, "good", "CallTimeout=6s\nArguments=slowstart 500\n")
        policy(d.pol, "bad", "CallTimeout=6s\nArguments=crash\n")
        r = d.ctl("reload")
        check(r.returncode == 1 and "restarted: good (CallTimeout, Arguments)\n" in r.stdout and
              "not restarted: bad\n" in r.stdout, "reload: %r" % r)
        check(re.search(r"^bad: its changed policy's new process .*did not start \(killed by SIGABRT.*; it "
                        r"serves on with its previous process and policy$", r.stderr, re.M), "why: %r" % r.stderr)
        g = d.list()
        check(g["good"]["state"] == "ready" and g["good"]["pid"] != pids["good"], "good on its new process: %r"
              % g["good"])
        check(g["bad"]["state"] == "ready" and g["bad"]["pid"] == pids["bad"], "bad on its old process: %r" % g["bad"])
        j = json.loads(d.ctl("--json", "reload").stdout)
        check(j["restarted"] == [] and [f["name"] for f in j["failed"]] == ["bad"] and
              "did not start" in j["failed"][0]["cause"], "--json: %r" % j)


@test
def reload_of_the_running_file_again_clears_the_mark(tmp):
    """A file broken, then put back as it was: unchanged, not restarted,
    and no longer marked; a new broken file is an error of its own."""
    with Daemon(tmp) as d:
        path = policy(d.pol, "back")
        with open(path) as f:
            good = f.read()
        d.ctl("reload")
        wait_for(lambda: d.state("back") == "ready", what="back ready")
        pid = d.list()["back"]["pid"]
        policy(d.pol, "back", "Bogus=1\n")
        new = policy(d.pol, "newbad", "Bogus=1\n")
        rep = json.loads(d.ctl("--json", "reload").stdout)
        check([k["name"] for k in rep["kept"]] == ["back"] and len(rep["errors"]) == 1 and
              rep["errors"][0].startswith(new + ":4: "), "reload: %r" % rep)
        check(d.list()["back"]["kept_errors"] == 1 and "newbad" not in d.list(), "list: %r" % d.list())
        with open(path, "w") as f:
            f.write(good)
        os.unlink(new)
        rep = json.loads(d.ctl("--json", "reload").stdout)
        check(rep["unchanged"] == ["back"] and rep["kept"] == [] and rep["errors"] == [], "put back: %r" % rep)
        g = d.list()["back"]
        check(g["kept_errors"] == 0 and g["pid"] == pid, "back: %r" % g)


@test
def workshop_list_says_kept(tmp):
    """The gateway's list (the workshop's cards) gives a kept gadget's file
    and the count of its errors, not their text, until the file is fixed."""
    with Gateway(tmp) as g:
        path = policy(g.pol, "card")
        g.ctl("reload")
        g.wait_ready("card")
        check(g.gadgets()["card"]["kept_errors"] == 0 and g.gadgets()["card"]["kept_file"] == "",
              "before: %r" % g.gadgets()["card"])
        policy(g.pol, "card", "Secretish=hunter2\n")
        g.ctl("reload")
        card = g.gadgets()["card"]
        check(card["kept_errors"] == 1 and card["kept_file"] == path and card["state"] == "ready", "kept: %r" % card)
        check("hunter2" not in json.dumps(card), "the file's text in the gateway's list: %r" % card)
        policy(g.pol, "card", "CallTimeout=9s\n")
        g.ctl("reload")
        wait_for(lambda: g.gadgets()["card"]["kept_errors"] == 0, what="the mark gone")
        check(g.gadgets()["card"]["kept_file"] == "", "after: %r" % g.gadgets()["card"])


@test
def restart_cause_names_the_client(tmp):
    """gadgetctl restart is blamed on the user who asked (the socket's
    peer credentials), in status, list and gadgetd's log."""
    with Daemon(tmp) as d:
        policy(d.pol, "again")
        d.ctl("reload")
        wait_for(lambda: d.state("again") == "ready", what="again ready")
        pid = d.list()["again"]["pid"]
        r = d.ctl("restart", "again")
        check(r.returncode == 0, "restart: %r" % r.stderr)
        wait_for(lambda: d.state("again") == "ready" and d.list()["again"]["pid"] != pid, what="restarted")
        check(d.list()["again"]["cause"] == "gadgetctl restart by uid 0", "cause: %r" % d.list()["again"])
        check("(last stop: gadgetctl restart by uid 0)" in d.ctl("status", "again").stdout, "status")
        check("[again] gadgetctl restart by uid 0" in d.logtext(), "gadgetd's log")


if __name__ == "__main__":
    sys.exit(main())
