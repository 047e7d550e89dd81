#!/usr/bin/env python3
"""Integration tests of an http binding's Credential=: gadgetd adds the
credential to allowed requests only, the gadget never sees it (nor does
any answer, log, audit record or status), a gadget cannot set that header
itself, a rotated file counts at the next request, and a bad file fails
the request naming the file. A loopback server records what arrives.
Usage: credential_test.py TEST."""
import json
import os
import secrets
import sys

from harness import Daemon, check, free_port, main, policy, test, wait_for
from servers import Recorder


def token():
    """A long random credential, so that finding it anywhere means a leak."""
    return "cred-" + secrets.token_hex(32)


def write(path, text, atomic=False):
    """Writes text (str or bytes) to path, in place or by a rename."""
    data = text.encode() if isinstance(text, str) else text
    tmp = path + ".new" if atomic else path
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    if atomic:
        os.rename(tmp, path)


def bcall(d, binding, url, **more):
    """The test gadget "web" calls binding's request; (status, stdout, stderr)."""
    args = dict(url=url, **more)
    r = d.ctl("call", "web", "binding", json.dumps({"binding": binding, "op": "request", "args": args}))
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def start(d, body):
    policy(d.pol, "web", body)
    d.ctl("reload")
    wait_for(lambda: d.state("web") == "ready", what="web ready")


def audit(d):
    """The gadget's audit records of its binding calls, oldest first (not
    those of its lifecycle or of the gadgetctl calls that drive it)."""
    recs = [json.loads(x) for x in d.ctl("--json", "audit", "web").stdout.splitlines()]
    return [r for r in recs if r["binding"] not in ("lifecycle", "gadgetctl")]


def everything(d, tmp, answers):
    """Every text gadgetd gave out: the answers, gadgetctl status, logs and
    audit (text and JSON), then (gadgetd stopped) its log and audit.log."""
    texts = list(answers)
    for args in (("status", "web"), ("logs", "web"), ("audit", "web")):
        texts += [d.ctl(*args).stdout, d.ctl("--json", *args).stdout]
    d.stop()
    texts.append(d.logtext())
    with open(os.path.join(tmp, "state", "audit.log")) as f:
        texts.append(f.read())
    return "\n".join(texts)


@test
def credential_only_on_allowed_requests(tmp):
    """The server sees the credential on the binding's allowed requests,
    in the header CredentialHeader= says; a refused URL or method never
    arrives; a redirect is not followed; a second binding without
    Credential= to the same server sends none. No answer, log, audit or
    status holds it; the audit and status name the file."""
    tok = token()
    cred = os.path.join(tmp, "api.token")
    write(cred, tok + "\n")
    dead = free_port()
    with Recorder() as srv, Daemon(tmp) as d:
        base = "http://127.0.0.1:%d" % srv.port
        start(d, "[Binding API]\nType=http\nAllow=%s/api/\nAllow=http://127.0.0.1:%d/\nCredential=%s\n"
                 "[Binding KEYED]\nType=http\nAllow=%s/api/\nCredential=%s\nCredentialHeader=X-Api-Key: k={};v=1\n"
                 "[Binding PLAIN]\nType=http\nAllow=%s/\n" % (base, dead, cred, base, cred, base))
        answers = []

        def req(binding, url, **more):
            rc, out, err = bcall(d, binding, url, **more)
            answers.extend((out, err))
            return rc, out, err

        rc, out, err = req("API", base + "/api/items")
        check(rc == 0 and json.loads(out)["status"] == 200, "allowed request: %d %r %r" % (rc, out, err))
        check(srv.headers(-1, "Authorization") == ["Bearer " + tok], "the server saw %r" % srv.seen[-1:])
        rc, out, err = req("KEYED", base + "/api/k")
        check(rc == 0, "CredentialHeader=: %r" % err)
        check(srv.headers(-1, "X-Api-Key") == ["k=%s;v=1" % tok] and not srv.headers(-1, "Authorization"),
              "CredentialHeader=: the server saw %r" % srv.seen[-1:])

        arrived = len(srv.seen)
        for url, more in ((base + "/private/x", {}), (base + "/api/x", {"method": "POST"}),
                          ("http://127.0.0.1:%d/api/x" % (srv.port + 1), {}), (base + "/api/%2e%2e/private", {})):
            rc, _, err = req("API", url, **more)
            check(rc != 0 and ("not allowed" in err or "url" in err), "%s %r: %d %r" % (url, more, rc, err))
        check(len(srv.seen) == arrived, "a refused request arrived: %r" % srv.seen[arrived:])
        # Paths a server could read past the prefix though they start with
        # it: each refused, naming what is ambiguous, and nothing arrives.
        for path, bad in (("/api/..;/private", ";"), ("/api/%252e%252e/private", "%25"), ("/api/..\\private", "\\"),
                          ("/api/.%00./private", "%00"), ("/api/%2fprivate", "%2f"), ("/api/%5cprivate", "%5c"),
                          ("/api/%2E%2E/private", "%2e")):
            rc, _, err = req("API", base + path)
            check(rc != 0 and ('holds "%s"' % bad) in err, "%s: %d %r" % (path, rc, err))
        check(len(srv.seen) == arrived, "an ambiguous path arrived: %r" % srv.seen[arrived:])

        rc, out, _ = req("API", base + "/api/redirect")
        check(rc == 0 and json.loads(out)["status"] == 302, "redirect: %r" % out)
        check([p for _, p, _ in srv.seen[arrived:]] == ["/api/redirect"], "followed: %r" % srv.seen[arrived:])

        for url in (base + "/api/x", base + "/private/x"):
            rc, _, err = req("PLAIN", url)
            check(rc == 0, "PLAIN %s: %r" % (url, err))
            check(not any(tok in v for _, v in srv.seen[-1][2]), "PLAIN sent the credential: %r" % srv.seen[-1:])

        # An error after the credential was attached: nothing listens there.
        rc, _, err = req("API", "http://127.0.0.1:%d/x" % dead)
        check(rc != 0 and "Connection refused" in err, "dead port: %r" % err)

        seen = [v for _, _, h in srv.seen for _, v in h if tok in v]
        check(len(seen) == 3, "the credential arrived %d times, not 3: %r" % (len(seen), seen))
        # Each request that carried the credential: the 200s, the 302, the refused connection.
        recs = [r for r in audit(d) if r["outcome"] == "ok" and r["binding"] != "PLAIN" or
                "Connection refused" in r.get("detail", "")]
        check(len(recs) == 4 and all(r.get("detail", "").startswith("credential " + cred) for r in recs),
              "the audit does not name the credential: %r" % recs)
        status = d.ctl("status", "web").stdout
        check("credential " + cred in status, "status does not name the credential: %r" % status)
        st = json.loads(d.ctl("--json", "status", "web").stdout)
        creds = {b["name"]: b.get("credential") for b in st["bindings"]}
        check(creds == {"API": cred, "KEYED": cred, "PLAIN": None}, "status --json: %r" % creds)
        text = everything(d, tmp, answers)
        for part in (tok, tok[5:21], tok[-16:]):
            check(part not in text, "the credential (%s...) is in gadgetd's output" % part[:8])


@test
def credential_header_set_by_gadget_refused(tmp):
    """A gadget that sets the credential's header itself, in any case, is
    refused (denied) before anything is sent, and so is a header name that
    is no HTTP token (a server might trim it into the credential's); on a
    binding without Credential= the same header is the gadget's to send."""
    cred = os.path.join(tmp, "api.token")
    write(cred, token())
    with Recorder() as srv, Daemon(tmp) as d:
        base = "http://127.0.0.1:%d" % srv.port
        start(d, "[Binding API]\nType=http\nAllow=%s/api/\nCredential=%s\n"
                 "[Binding KEYED]\nType=http\nAllow=%s/api/\nCredential=%s\nCredentialHeader=X-Api-Key: {}\n"
                 "[Binding PLAIN]\nType=http\nAllow=%s/\n" % (base, cred, base, cred, base))
        for binding, name, header in (("API", "Authorization", "Authorization"),
                                      ("API", "Authorization", "authorization"),
                                      ("API", "Authorization", "AUTHORIZATION"),
                                      ("KEYED", "X-Api-Key", "x-API-key")):
            rc, out, err = bcall(d, binding, base + "/api/x", headers={"X-Other": "1", header: "Bearer mine"})
            want = "header %s is set by gadgetd for binding %s (Credential=); a gadget cannot set it" % (name, binding)
            check(rc != 0 and want in err, "%s %s: %d %r %r" % (binding, header, rc, out, err))
            rec = audit(d)[-1]
            check(rec["outcome"] == "denied" and want in rec.get("detail", ""), "audit: %r" % rec)
        # Names a lenient server might trim or fold into Authorization are no header names.
        for header in ("Authorization\u000b", "Authorization ", " Authorization", "Authorization;", "Autho\u0301rization"):
            rc, out, err = bcall(d, "API", base + "/api/x", headers={header: "Bearer mine"})
            check(rc != 0 and "is not a valid name" in err, "%r: %d %r %r" % (header, rc, out, err))
        check(srv.seen == [], "a refused request arrived: %r" % srv.seen)
        rc, _, err = bcall(d, "PLAIN", base + "/api/x", headers={"authorization": "Bearer mine"})
        check(rc == 0 and srv.headers(-1, "Authorization") == ["Bearer mine"], "PLAIN: %r %r" % (err, srv.seen))


@test
def credential_rotation(tmp):
    """A new credential file (renamed over the old one, or rewritten in
    place) is what the next request carries: no restart of gadgetd or the
    gadget, no reload. A CRLF line end is not part of the credential, and
    one of POLICY_CREDENTIAL_SIZE (4096) bytes is taken whole."""
    cred = os.path.join(tmp, "api.token")
    write(cred, token())
    with Recorder() as srv, Daemon(tmp) as d:
        url = "http://127.0.0.1:%d/api/x" % srv.port
        start(d, "[Binding API]\nType=http\nAllow=%s\nCredential=%s\n" % (url, cred))
        pid = d.list()["web"]["pid"]
        for how, text, want in (("first", None, None), ("renamed", "%s\n", None), ("in place", "%s", None),
                                ("CRLF", "%s\r\n", None), ("4096 bytes", "%s", 4096)):
            tok = token()
            if want:
                tok = (tok * 100)[:want]
            if text:
                write(cred, text % tok, atomic=how == "renamed")
            else:
                with open(cred) as f:
                    tok = f.read()
            rc, _, err = bcall(d, "API", url)
            check(rc == 0, "%s: %r" % (how, err))
            check(srv.headers(-1, "Authorization") == ["Bearer " + tok], "%s: the server saw %r" %
                  (how, srv.headers(-1, "Authorization")))
        check(d.list()["web"]["pid"] == pid and d.proc.poll() is None, "the gadget or gadgetd restarted")


@test
def credential_file_problems(tmp):
    """A missing, empty, oversized, unreadable or malformed credential
    file fails the request (an error naming the binding and the file,
    never the content, in the answer and the audit) and nothing is sent;
    once the file is good again, the next request carries it."""
    creds = os.path.join(tmp, "creds")
    os.mkdir(creds)
    os.chmod(creds, 0o1777)  # others may write: a symlink here is not followed
    cred = os.path.join(creds, "api.token")
    tok = token()
    write(cred, tok)
    with Recorder() as srv, Daemon(tmp) as d:
        url = "http://127.0.0.1:%d/api/x" % srv.port
        start(d, "[Binding API]\nType=http\nAllow=%s\nCredential=%s\n" % (url, cred))
        real = os.path.join(tmp, "real.token")
        write(real, tok)
        cases = [
            ("missing", None, "No such file or directory"),
            ("empty", "", "it is empty"),
            ("a newline alone", "\n", "it is empty"),
            ("too big", tok * 70, "it is larger than 4096 bytes"),
            ("4096 bytes and a newline", (tok * 70)[:4096] + "\n", "it is larger than 4096 bytes"),
            ("a line break inside", tok + "\n" + tok[::-1] + "\n", "line break"),
            ("a CR inside", tok + "\r" + tok[::-1], "line break"),
            ("a NUL inside", tok.encode() + b"\0" + tok[::-1].encode(), "NUL"),
            ("a directory", "dir", "not a regular file"),
            ("a symlink", "link", "a symlink in a directory others may write"),
        ]
        for how, content, want in cases:
            if os.path.isdir(cred):
                os.rmdir(cred)
            elif os.path.lexists(cred):
                os.unlink(cred)
            if content == "dir":
                os.mkdir(cred)
            elif content == "link":
                os.symlink(real, cred)
            elif content is not None:
                write(cred, content)
            rc, out, err = bcall(d, "API", url)
            check(rc != 0 and "binding API: cannot use credential \"%s\": " % cred in err and want in err,
                  "%s: %d %r %r" % (how, rc, out, err))
            check(tok not in err and tok[::-1] not in err and tok[:16] not in err, "%s: the content is in %r" %
                  (how, err))
            rec = audit(d)[-1]
            check(rec["outcome"] == "error" and rec.get("detail") in err, "%s: audit %r" % (how, rec))
        check(srv.seen == [], "a request arrived: %r" % srv.seen)
        os.unlink(cred)
        write(cred, tok + "\n")
        rc, _, err = bcall(d, "API", url)
        check(rc == 0 and srv.headers(-1, "Authorization") == ["Bearer " + tok], "fixed: %r %r" % (err, srv.seen))
        check(d.proc.poll() is None, "gadgetd ended")


if __name__ == "__main__":
    sys.exit(main())
