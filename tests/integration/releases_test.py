#!/usr/bin/env python3
"""Signed gadget bundles (docs/releases.md), from outside: gadgetctl keygen
and bundle make one, gadgetctl install puts it into gadgetd's store and
runs it; a bundle with a changed byte, of an unknown key, unsigned, or
with a member that escapes (../, an absolute path), a symlink, a device
or an oversized member is refused with its reason and leaves nothing in
the store; versions lists what is installed, the last VersionsKept= only;
a new version of a running gadget takes over without a refused call;
status and the workshop's list show the version; deploy and rollback
switch between versions without a refused call, and a version whose
start fails is rolled back.
Usage: releases_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET,
CALLFLOOD."""
import grp
import json
import os
import re
import struct
import subprocess
import sys

from bundles import KV, bundle_dir
from gateway_util import Gateway
from harness import CALLFLOOD, GADGETD, TESTGADGET, Healthy, check, main, policy, test


def raw_bundle(members):
    """A bundle of (kind, mode, path, data) records, unsigned: the format
    written by hand, so that records gadgetctl bundle never makes can be."""
    out = b"GDBUNDL1"
    for kind, mode, path, data, *size in members:
        p = path.encode()
        out += struct.pack(">BHHQ", ord(kind), mode, len(p), size[0] if size else len(data)) + p + data
    return out + struct.pack(">BHHQ", ord("E"), 0, 0, 0)


def store_listing(tmp):
    top = os.path.join(tmp, "state", "releases")
    found = []
    for root, dirs, files in os.walk(top):
        found += [os.path.relpath(os.path.join(root, x), top) for x in dirs + files]
    return sorted(found)


@test
def install_verify_versions(tmp):
    # [Releases] read strictly: a key that is not one, a count of 0.
    bad = os.path.join(tmp, "bad.conf")
    for text, want in (("TrustedKeys=abcd\n", "is not an Ed25519 public key"), ("VersionsKept=0\n", ":2: ")):
        with open(bad, "w") as f:
            f.write("[Releases]\n" + text)
        r = subprocess.run([GADGETD, "--config", bad, "--state-dir", os.path.join(tmp, "nostate")],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr, "%r: %r" % (text, r.stderr))
    d = Gateway(tmp, extra=["--group", "nogroup"])
    member = (65534, grp.getgrnam("nogroup").gr_gid)
    r = d.ctl("keygen", "-o", os.path.join(tmp, "key.pem"))
    check(r.returncode == 0, "keygen: %r" % r.stderr)
    pub = r.stdout.split()[-1]
    r = d.ctl("keygen", "-o", os.path.join(tmp, "other.pem"))
    check(r.returncode == 0, "keygen: %r" % r.stderr)
    with open(d.config, "a") as f:
        f.write("[Releases]\nTrustedKeys=%s\nVersionsKept=2\n" % pub)

    def make(version, key="key.pem", name="rel", keys=""):
        out = os.path.join(tmp, "%s-%s-%s.bundle" % (name, version, key))
        r = d.ctl("bundle", bundle_dir(tmp, version, name, keys), "--key", os.path.join(tmp, key), "-o", out)
        check(r.returncode == 0, "bundle: %r" % r.stderr)
        return out

    def refused(path, reason):
        before = store_listing(tmp)
        r = d.ctl("install", path)
        check(r.returncode != 0 and reason in r.stderr, "install %s: want %r, got %r %r" %
              (os.path.basename(path), reason, r.stdout, r.stderr))
        check(store_listing(tmp) == before, "a refused bundle left %r" % (set(store_listing(tmp)) - set(before)))

    def hostile(name, members):
        path = os.path.join(tmp, name + ".bundle")
        with open(path, "wb") as f:
            f.write(raw_bundle(members))
        return path

    with d:
        # A trusted bundle whose policy has errors: unpacked, its policy
        # read, refused; nothing of it stays.
        refused(make("1.0", name="broken", keys="MemoryMax=lots\n"), "MemoryMax=")
        check(not os.path.exists(os.path.join(tmp, "state", "releases", "broken")), "the refused gadget's directory")
        # A trusted key's bundle installs and runs.
        b1 = make("1.0")
        r = d.ctl("install", b1)
        check(r.returncode == 0 and "installed rel 1.0" in r.stdout, "install: %r %r" % (r.stdout, r.stderr))
        r = d.ctl("call", "rel", "echo", '"hi"')
        check(r.returncode == 0 and r.stdout.strip() == '"hi"', "call: %r %r" % (r.stdout, r.stderr))
        st = d.status("rel")
        check(st.get("version") == "1.0", "status version: %r" % st.get("version"))
        exe = os.path.join(tmp, "state", "releases", "rel", "1.0", "files", "bin", "testgadget")
        check(os.stat(exe).st_mode & 0o7777 == 0o755, "program mode %o" % os.stat(exe).st_mode)

        # Refusals, each with its reason, nothing left behind.
        data = bytearray(open(make("1.1"), "rb").read())
        data[200] ^= 1
        changed = os.path.join(tmp, "changed.bundle")
        open(changed, "wb").write(bytes(data))
        refused(changed, "does not match its content")
        refused(make("1.2", key="other.pem"), "not in TrustedKeys=")
        manifest = ("F", 0o644, "manifest", b"Name=rel\nVersion=9\nProtocol=2\n")
        pol = ("F", 0o644, "policy", b"[Gadget]\nName=rel\nExec=bin/x\n")
        prog = ("F", 0o755, "bin/x", b"#!/bin/sh\n")
        refused(hostile("unsigned", [manifest, pol, prog]), "unsigned")
        refused(hostile("dotdot", [manifest, pol, ("F", 0o755, "bin/../../x", b"")]), '".." in its path')
        refused(hostile("absolute", [manifest, pol, ("F", 0o755, "/etc/x", b"")]), "an absolute path")
        refused(hostile("symlink", [manifest, pol, ("L", 0o777, "bin/x", b"/etc/shadow")]), "a symbolic link")
        refused(hostile("device", [manifest, pol, ("C", 0o644, "bin/x", b"")]), "a character device")
        refused(hostile("setuid", [manifest, pol, ("F", 0o4755, "bin/x", b"")]), "is setuid")
        refused(hostile("oversized", [manifest, pol, ("F", 0o755, "bin/x", b"", 33 << 20)]),
                "more than a member may hold")
        # Not a file gadgetd could read to its end: a FIFO (no writer), a device.
        fifo = os.path.join(tmp, "fifo.bundle")
        os.mkfifo(fifo)
        refused(fifo, "must be a regular file")
        refused("/dev/zero", "must be a regular file")

        # A second and a third version: the running gadget moves to each
        # without a refused call; two versions are kept.
        with Healthy(d, "rel"):
            r = d.ctl("install", make("2.0"))
            check(r.returncode == 0, "install 2.0: %r" % r.stderr)
        r = d.ctl("install", make("3.0"))
        check(r.returncode == 0, "install 3.0: %r" % r.stderr)
        r = d.ctl("install", make("3.0"))
        check(r.returncode != 0 and "installed already" in r.stderr, "3.0 again: %r" % r.stderr)
        r = d.ctl("--json", "versions", "rel")
        check(r.returncode == 0, "versions: %r" % r.stderr)
        v = json.loads(r.stdout)
        check([x["version"] for x in v] == ["3.0", "2.0"], "versions kept: %r" % v)
        check(v[0]["current"] and not v[1]["current"] and v[0]["signer"] == pub and v[0]["uid"] == 0,
              "versions: %r" % v)
        check(d.status("rel").get("version") == "3.0", "status after 3.0: %r" % d.status("rel").get("version"))
        r = d.ctl("status", "rel")
        check(re.search(r"^ *Version: 3\.0$", r.stdout, re.M), "status: %r" % r.stdout)
        status, _, body = d.request("GET", "/api/gadgets")
        shown = {g["name"]: g.get("version") for g in json.loads(body)["gadgets"]} if status == 200 else status
        check(shown == {"rel": "3.0"}, "the workshop's list: %r" % shown)
        r = d.ctl("call", "rel", "echo", "1")
        check(r.returncode == 0, "call on 3.0: %r" % r.stderr)

        # The next gadgetd loads the installed version again; with
        # AllowUnsigned=yes root may install an unsigned bundle.
        d.stop()
        with open(d.config, "a") as f:
            f.write("AllowUnsigned=yes\n")
        d.start()
        r = d.ctl("call", "rel", "echo", "2")
        check(r.returncode == 0 and d.status("rel").get("version") == "3.0", "3.0 after a restart: %r" % r.stderr)
        prog = open(TESTGADGET, "rb").read()
        unsigned = hostile("unsigned-4", [("F", 0o644, "manifest", b"Name=rel\nVersion=4.0\nProtocol=2\n"),
                                          ("F", 0o644, "policy", b"[Gadget]\nName=rel\nExec=bin/t\n"),
                                          ("F", 0o755, "bin/t", prog)])
        r = d.ctl("install", unsigned)
        check(r.returncode == 0 and "unsigned" in r.stdout, "unsigned with AllowUnsigned=yes: %r %r" %
              (r.stdout, r.stderr))
        v = json.loads(d.ctl("--json", "versions", "rel").stdout)
        check([(x["version"], x["signer"]) for x in v] == [("4.0", ""), ("3.0", pub)], "versions: %r" % v)

        # A member of the control group: a trusted bundle, yes; an unsigned
        # one, never (its policy would be loaded with gadgetd's rights).
        r = d.ctl("install", hostile("unsigned-5", [("F", 0o644, "manifest", b"Name=rel\nVersion=5\nProtocol=2\n"),
                                                    ("F", 0o644, "policy", b"[Gadget]\nName=rel\nExec=bin/t\n"),
                                                    ("F", 0o755, "bin/t", prog)]), user=member)
        check(r.returncode != 0 and "root alone" in r.stderr, "a member's unsigned bundle: %r" % r.stderr)
        r = d.ctl("install", make("6.0"), user=member)
        check(r.returncode == 0, "a member's trusted bundle: %r" % r.stderr)
        v = json.loads(d.ctl("--json", "versions", "rel").stdout)
        check(v[0]["version"] == "6.0" and v[0]["uid"] == 65534 and v[0]["current"], "by the member: %r" % v[0])
        audit = [json.loads(x) for x in d.ctl("audit", "rel").stdout.splitlines()]
        installs = [(a["outcome"], a.get("uid")) for a in audit if a.get("binding") == "install"]
        check(("ok", 65534) in installs and ("denied", 65534) in installs and ("ok", 0) in installs,
              "install's audit records: %r" % installs)


@test
def deploy_rollback(tmp):
    """deploy and rollback switch between installed versions without a
    refused call; a version that crashes at its start (by install or by
    deploy) is rolled back at once, with the reason in the answer, the
    log, status and the audit. Every deploy keeps the gadget's state with
    the version it leaves (0600, root's; versions shows it); rollback
    --with-state puts it back with the version before, a steady caller
    waiting through it without a refused call; a plain rollback keeps the
    data as it is."""
    d = Gateway(tmp, extra=["--group", "nogroup"])
    r = d.ctl("keygen", "-o", os.path.join(tmp, "key.pem"))
    check(r.returncode == 0, "keygen: %r" % r.stderr)
    with open(d.config, "a") as f:
        # Every record kept: the steady caller's calls would spend the
        # audit's budget of the second the deploys' records come in.
        f.write("[Releases]\nTrustedKeys=%s\n[Audit]\nRecordsPerSecond=infinity\n" % r.stdout.split()[-1])

    def make(version, keys=""):
        out = os.path.join(tmp, "rel-%s.bundle" % version)
        r = d.ctl("bundle", bundle_dir(tmp, version, keys=keys + KV), "--key", os.path.join(tmp, "key.pem"), "-o", out)
        check(r.returncode == 0, "bundle: %r" % r.stderr)
        return out

    def versions():
        st = d.status("rel")
        return st.get("version"), st.get("previous_version")

    with d:
        # 2.0 takes a second to end once asked to stop: the steady caller's
        # calls come during rollback --with-state's stop of it, and wait.
        for v in ("1.0", "2.0"):
            r = d.ctl("install", make(v, keys="Arguments=slowstop 1\n" if v == "2.0" else ""))
            check(r.returncode == 0 and r.stdout.strip().endswith(": ready"), "install %s: %r %r" %
                  (v, r.stdout, r.stderr))
        check(versions() == ("2.0", "1.0"), "after two installs: %r" % (versions(),))
        # The install of 2.0 kept 1.0's state with it.
        v = {x["version"]: x["state_ms"] for x in json.loads(d.ctl("--json", "versions", "rel").stdout)}
        check(v["1.0"] > 0 and v["2.0"] == 0, "the states kept by the installs: %r" % v)
        r = d.ctl("status", "rel")
        check(re.search(r"^ *Previous version: 1\.0$", r.stdout, re.M), "status: %r" % r.stdout)
        crash = make("3.0", keys="Arguments=crash\n")
        with Healthy(d, "rel"):
            r = d.ctl("rollback", "rel")
            check(r.returncode == 0 and "rolled back rel 1.0 (was 2.0): ready" in r.stdout,
                  "rollback: %r %r" % (r.stdout, r.stderr))
            check(versions() == ("1.0", "2.0"), "after the rollback: %r" % (versions(),))
            # No state kept with 2.0 (a plain rollback left it): refused,
            # nothing changed.
            r = d.ctl("rollback", "rel", "--with-state")
            check(r.returncode != 0 and "no state is kept with rel 2.0" in r.stderr and versions() == ("1.0", "2.0"),
                  "rollback --with-state with none kept: %r %r" % (r.stderr, versions()))
            r = d.ctl("deploy", "rel", "2.0")
            check(r.returncode == 0 and "deployed rel 2.0 (was 1.0): ready" in r.stdout,
                  "deploy: %r %r" % (r.stdout, r.stderr))
            check(versions() == ("2.0", "1.0"), "after the deploy: %r" % (versions(),))
            # A version that crashes at its start: installed, not current.
            r = d.ctl("install", crash)
            check(r.returncode != 0 and "version 3.0 of rel did not start" in r.stderr and
                  "rolled back to 2.0" in r.stderr, "the crashing install: %r %r" % (r.stdout, r.stderr))
            check(versions() == ("2.0", "1.0"), "after the crashing install: %r" % (versions(),))
            r = d.ctl("deploy", "rel", "3.0")
            check(r.returncode != 0 and "rolled back to 2.0" in r.stderr, "the crashing deploy: %r" % r.stderr)
            check(versions() == ("2.0", "1.0"), "after the crashing deploy: %r" % (versions(),))
            r = d.ctl("call", "rel", "echo", "7")
            check(r.returncode == 0 and r.stdout.strip() == "7", "2.0 serves on: %r" % r.stderr)
        v = json.loads(d.ctl("--json", "versions", "rel").stdout)
        check([(x["version"], x["current"]) for x in v] == [("3.0", False), ("2.0", True), ("1.0", False)],
              "versions: %r" % v)
        # Refusals: a version not installed, a name that is no version.
        r = d.ctl("deploy", "rel", "9.9")
        check(r.returncode != 0 and 'no installed version "9.9"' in r.stderr, "deploy 9.9: %r" % r.stderr)
        r = d.ctl("deploy", "rel", "../1.0")
        check(r.returncode != 0 and "deploy needs a version" in r.stderr, "deploy ../1.0: %r" % r.stderr)
        r = d.ctl("rollback", "nosuch")
        check(r.returncode != 0 and "no version before" in r.stderr, "rollback nosuch: %r" % r.stderr)
        logs = d.logtext()
        check('version "3.0" rolled back automatically to "2.0"' in logs, "the log: %r" % logs[-2000:])
        audit = [json.loads(x) for x in d.ctl("audit", "rel").stdout.splitlines()]
        ops = [(a["op"], a["outcome"], a.get("detail")) for a in audit if a.get("binding") == "deploy"]
        check(ops == [("rollback", "ok", "version 1.0 (was 2.0)"), ("deploy", "ok", "version 2.0 (was 1.0)"),
                      ("deploy", "error", "version 3.0 (was 2.0): rolled back")], "deploy's audit records: %r" % ops)
        check("restart failed" in d.status("rel").get("cause", ""), "status: %r" % d.status("rel"))
        # rollback goes back to the version before whatever happened since.
        r = d.ctl("rollback", "rel")
        check(r.returncode == 0 and versions() == ("1.0", "2.0"), "rollback: %r %r" % (r.stderr, versions()))
        deploy_state(d, tmp, versions, make)


def deploy_state(d, tmp, versions, make):
    """deploy_rollback's state: 1.0 current, 2.0 before it."""
    def fop(op, value=0):
        r = d.ctl("call", "rel", "fop", json.dumps({"op": op, "key": "count", "id": "t", "value": value}))
        check(r.returncode == 0, "fop %s: %r" % (op, r.stderr))
        return json.loads(r.stdout)["v"]

    def kept():
        return {x["version"]: (x["state_ms"], x["state_bytes"])
                for x in json.loads(d.ctl("--json", "versions", "rel").stdout)}

    for _ in range(5):
        fop("incr")
    check(fop("read") == 5, "the counter under 1.0")
    # A backup that fails refuses the deploy, nothing changed (its file's
    # place taken by a directory); the one kept before stays.
    path = os.path.join(tmp, "state", "releases", "rel", "1.0", "state.backup")
    os.rename(path, path + ".saved")
    os.mkdir(path)
    r = d.ctl("deploy", "rel", "2.0")
    check(r.returncode != 0 and "before the deploy failed" in r.stderr and versions() == ("1.0", "2.0"),
          "a deploy whose backup failed: %r %r %r" % (r.stdout, r.stderr, versions()))
    # An install that would make a version current the same: refused,
    # nothing of it left.
    r = d.ctl("install", make("4.0"))
    check(r.returncode != 0 and "4.0 was not installed" in r.stderr and "before the deploy failed" in r.stderr and
          not os.path.exists(os.path.join(tmp, "state", "releases", "rel", "4.0")) and versions() == ("1.0", "2.0"),
          "an install whose backup failed: %r %r" % (r.stderr, versions()))
    check(not [x for x in os.listdir(os.path.dirname(os.path.dirname(path))) if x.endswith(".new")],
          "the failed backup's file left behind")
    os.rmdir(path)
    os.rename(path + ".saved", path)
    with Healthy(d, "rel") as steady:
        r = d.ctl("deploy", "rel", "2.0")
        check(r.returncode == 0, "deploy 2.0: %r" % r.stderr)
        # 2.0 changes the data.
        fop("write", 1000)
        check(fop("read") == 1000, "2.0's data")
        st = os.stat(path)
        check(st.st_mode & 0o7777 == 0o600 and st.st_uid == 0, "the kept state's mode: %o" % st.st_mode)
        k = kept()
        check(k["1.0"][0] > 0 and k["1.0"][1] == st.st_size, "versions: the state kept with 1.0: %r" % k)
        r = d.ctl("versions", "rel")
        check(re.search(r"^1\.0 .* %d bytes$" % st.st_size, r.stdout, re.M), "versions: %r" % r.stdout)
        status = d.status("rel")
        check(status.get("previous_state_ms", 0) > 0 and status.get("previous_state_bytes") == st.st_size,
              "status: the state kept with the previous version: %r" % status)
        r = d.ctl("status", "rel")
        check(re.search(r"^ *Previous state: kept .* %d bytes \(rollback --with-state\)$" % st.st_size, r.stdout, re.M),
              "status: %r" % r.stdout)
        # Root's only, as restore: a member of the control group is refused.
        r = d.ctl("rollback", "rel", "--with-state", user=(65534, grp.getgrnam("nogroup").gr_gid))
        check(r.returncode != 0 and "root's only" in r.stderr and versions() == ("2.0", "1.0"),
              "a member's rollback --with-state: %r" % r.stderr)
        r = d.ctl("rollback", "rel", "--with-state")
        check(r.returncode == 0 and "restored the state kept with 1.0" in r.stdout and
              "rolled back rel 1.0 (was 2.0): ready" in r.stdout, "rollback --with-state: %r %r" % (r.stdout, r.stderr))
        check(versions() == ("1.0", "2.0"), "after rollback --with-state: %r" % (versions(),))
        check(fop("read") == 5, "1.0's data as it was at the deploy")
        # 2.0's state was kept as the rollback left it: twice in a row
        # comes back to it. A plain rollback keeps the data as it is.
        r = d.ctl("rollback", "rel", "--with-state")
        check(r.returncode == 0 and versions() == ("2.0", "1.0"), "rollback --with-state to 2.0: %r" % r.stderr)
        check(fop("read") == 1000, "2.0's data back")
        r = d.ctl("rollback", "rel")
        check(r.returncode == 0 and versions() == ("1.0", "2.0"), "rollback: %r" % r.stderr)
        check(fop("read") == 1000, "a plain rollback changed the data")
        # A kept state that does not restore (a changed byte): refused,
        # nothing changed, and the gadget serves again at once.
        kept2 = os.path.join(tmp, "state", "releases", "rel", "2.0", "state.backup")
        data = bytearray(open(kept2, "rb").read())
        data[-1] ^= 1
        open(kept2, "wb").write(bytes(data))
        r = d.ctl("rollback", "rel", "--with-state")
        check(r.returncode != 0 and "was not restored" in r.stderr and "nothing was changed" in r.stderr and
              versions() == ("1.0", "2.0"), "a kept state that does not restore: %r %r" % (r.stderr, versions()))
        check(fop("read") == 1000, "the refused restore changed the data")
    # A call came during a stop and waited through it (2.0's second).
    check(steady.result["max_us"] > 500000, "no call waited through the hold: %r" % steady.result)
    audit = [json.loads(x) for x in d.ctl("audit", "rel").stdout.splitlines()]
    ops = [(a["op"], a["outcome"], a.get("detail")) for a in audit if a.get("binding") == "deploy"][-4:]
    check(ops[:3] == [("rollback", "ok", "version 1.0 (was 2.0), its state restored"),
                      ("rollback", "ok", "version 2.0 (was 1.0), its state restored"),
                      ("rollback", "ok", "version 1.0 (was 2.0)")] and ops[3][1] == "error" and
          ops[3][2].startswith("version 2.0 (was 1.0): refused: the state kept with rel 2.0 was not restored"),
          "the audit of the rollbacks: %r" % ops)


def tally(d, n, gadget, method):
    """n calls of gadget.method (64 in flight): their string results counted."""
    r = subprocess.run([CALLFLOOD, "--tally", str(n), d.sock, gadget, method], capture_output=True, text=True,
                       timeout=120)
    check(r.returncode == 0, "callflood --tally: %r" % r.stderr)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[0] == "value":
            out[parts[1]] = int(parts[2])
        elif parts[0] in ("ok", "other", "unanswered"):
            out[parts[0]] = int(parts[1])
        elif parts[0] == "error":
            out["error " + parts[1]] = int(parts[2])
    return out


@test
def staged_rollout(tmp):
    """deploy --percent: the new version serves that share of the call
    trees beside the old one (within 2 points over 10,000 calls), one tree
    never mixes versions (a gadget calling the rolled-out one twice per
    call), the share changes, the rollout completes and goes back, all
    without a refused call; a version that crashes at its start, or passes
    its error bound, is rolled back automatically, and status, the log and
    the audit say why."""
    d = Gateway(tmp)
    r = d.ctl("keygen", "-o", os.path.join(tmp, "key.pem"))
    check(r.returncode == 0, "keygen: %r" % r.stderr)
    with open(d.config, "a") as f:
        f.write("[Releases]\nTrustedKeys=%s\n[Audit]\nRecordsPerSecond=infinity\n" % r.stdout.split()[-1])

    def make(version, args):
        out = os.path.join(tmp, "rel-%s.bundle" % version)
        r = d.ctl("bundle", bundle_dir(tmp, version, keys="Arguments=%s\n" % args), "--key",
                  os.path.join(tmp, "key.pem"), "-o", out)
        check(r.returncode == 0, "bundle: %r" % r.stderr)
        return out

    def split(n, percent):
        t = tally(d, n, "rel", "tag")
        check(t.get("ok") == n and t.get("1.0", 0) + t.get("2.0", 0) == n, "tally at %d%%: %r" % (percent, t))
        share = 100.0 * t.get("2.0", 0) / n
        check(abs(share - percent) <= 2, "at %d%%, 2.0 answered %.2f%% of %d calls" % (percent, share, n))

    def status():
        st = d.status("rel")
        return st.get("version"), st.get("rollout_version"), st.get("rollout_percent")

    with d:
        for v, args in (("3.0", "tag 3.0 fail"), ("2.0", "tag 2.0"), ("1.0", "tag 1.0")):
            r = d.ctl("install", make(v, args))
            check(r.returncode == 0, "install %s: %r" % (v, r.stderr))
        front = policy(tmp, "front", "Arguments=tag front\n[Binding B]\nType=gadget\nTarget=rel\nMethods=tag\n")
        r = d.ctl("load", front)
        check(r.returncode == 0, "load front: %r" % r.stderr)
        with Healthy(d, "rel"):
            r = d.ctl("deploy", "rel", "2.0", "--percent", "10")
            check(r.returncode == 0 and "rolling out rel 2.0 to 10% of the call trees (was 1.0)" in r.stdout,
                  "deploy --percent 10: %r %r" % (r.stdout, r.stderr))
            check(status() == ("1.0", "2.0", 10), "status at 10%%: %r" % (status(),))
            st, _, body = d.request("GET", "/api/gadgets")
            g = [x for x in json.loads(body)["gadgets"] if x["name"] == "rel"][0] if st == 200 else {}
            check((g.get("rollout_version"), g.get("rollout_percent")) == ("2.0", 10), "the workshop: %r" % g)
            split(10000, 10)
            r = d.ctl("deploy", "rel", "2.0", "--percent", "50")
            check(r.returncode == 0 and "to 50%" in r.stdout, "--percent 50: %r %r" % (r.stdout, r.stderr))
            split(10000, 50)
            # One tree: front calls rel twice while serving one call.
            t = tally(d, 2000, "front", "tagchain")
            check(t.get("ok") == 2000 and set(t) - {"ok", "other", "unanswered"} == {"1.0/1.0", "2.0/2.0"},
                  "call trees: %r" % t)
            r = d.ctl("deploy", "rel", "2.0")
            check(r.returncode == 0 and "its rollout completed" in r.stdout, "complete: %r %r" % (r.stdout, r.stderr))
            check(status() == ("2.0", "", 0), "completed: %r" % (status(),))
            check(tally(d, 200, "rel", "tag").get("2.0") == 200, "2.0 serves every call")
            r = d.ctl("rollback", "rel")
            check(r.returncode == 0 and status() == ("1.0", "", 0), "rollback: %r %r" % (r.stderr, status()))
            # A rollout sent back by the operator.
            r = d.ctl("deploy", "rel", "2.0", "--percent", "50")
            check(r.returncode == 0, "--percent 50 again: %r" % r.stderr)
            r = d.ctl("rollback", "rel")
            check(r.returncode == 0 and "version 2.0 gets no more calls" in r.stdout, "rollback: %r" % r.stdout)
            check(status() == ("1.0", "", 0), "rolled back: %r" % (status(),))
            check(tally(d, 200, "rel", "tag").get("1.0") == 200, "1.0 serves every call")
            # A restart during a rollout: the rollout goes back (its new
            # process drains), then the restart's process starts.
            r = d.ctl("deploy", "rel", "2.0", "--percent", "50")
            check(r.returncode == 0, "--percent 50 once more: %r" % r.stderr)
            r = d.ctl("restart", "rel")
            check(r.returncode == 0, "restart during a rollout: %r %r" % (r.stdout, r.stderr))
            st = d.status("rel")
            check((st.get("version"), st.get("rollout_version")) == ("1.0", "") and
                  "restart" in st.get("rollout_back", ""), "after the restart: %r" % st)
            check(tally(d, 200, "rel", "tag").get("1.0") == 200, "1.0 serves every call after the restart")
            # A rollout while a restart's old process drains a slow call:
            # it waits for that end (two processes at most), then serves.
            slow = subprocess.Popen([os.environ["GADGETCTL"], "--socket", d.sock, "call", "rel", "sleep",
                                     '{"ms": 400}'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            while d.status("rel").get("in_flight", 0) < 1:
                pass
            r = d.ctl("restart", "rel")
            check(r.returncode == 0, "restart: %r" % r.stderr)
            r = d.ctl("deploy", "rel", "2.0", "--percent", "50")
            out, err = slow.communicate(timeout=30)
            check(slow.returncode == 0 and out.strip() == '"slept"', "the drained call: %r %r" % (out, err))
            check(r.returncode == 0 and "to 50%" in r.stdout, "a rollout after a drain: %r %r" % (r.stdout, r.stderr))
            check(status() == ("1.0", "2.0", 50), "rolling out after the drain: %r" % (status(),))
            r = d.ctl("rollback", "rel")
            check(r.returncode == 0 and status() == ("1.0", "", 0), "rollback: %r %r" % (r.stderr, status()))
        # A version that crashes at its start: the staged deploy fails,
        # and nothing of it serves.
        r = d.ctl("install", make("4.0", "crash"))
        check(r.returncode != 0 and "rolled back to 1.0" in r.stderr, "install 4.0: %r" % r.stderr)
        r = d.ctl("deploy", "rel", "4.0", "--percent", "10")
        check(r.returncode != 0 and "version 4.0 of rel did not start" in r.stderr and "rolled back to 1.0" in r.stderr,
              "deploy 4.0 --percent 10: %r %r" % (r.stdout, r.stderr))
        check(status() == ("1.0", "", 0), "after the crashing rollout: %r" % (status(),))
        # Past its error bound (its echo fails): back by itself.
        r = d.ctl("deploy", "rel", "3.0", "--percent", "50", "--min-calls", "20", "--max-errors", "10")
        check(r.returncode == 0 and "rolling out rel 3.0" in r.stdout, "deploy 3.0: %r %r" % (r.stdout, r.stderr))
        for _ in range(50):
            tally(d, 100, "rel", "echo")
            if not d.status("rel").get("rollout_version"):
                break
        st = d.status("rel")
        check(st.get("version") == "1.0" and not st.get("rollout_version") and
              "error rate passed the bound" in st.get("rollout_back", ""), "after its bound: %r" % st)
        check('its rollout of version "3.0" went back automatically' in d.logtext(), "the log")
        audit = [json.loads(x) for x in d.ctl("audit", "rel").stdout.splitlines()]
        ro = [(a["outcome"], a.get("detail", "")) for a in audit if a.get("op") == "rollout"]
        check(ro and ro[-1][0] == "error" and "3.0" in ro[-1][1], "the rollout's audit: %r" % ro[-3:])
        v = json.loads(d.ctl("--json", "versions", "rel").stdout)
        check([x["version"] for x in v if x["current"]] == ["1.0"], "versions: %r" % v)


if __name__ == "__main__":
    sys.exit(main())
