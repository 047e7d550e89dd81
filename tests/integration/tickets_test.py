#!/usr/bin/env python3
"""Integration tests of the tickets example (examples/tickets,
examples/helpdesk): tickets-api on a free loopback port with a random
token, the tickets gatekeeper and the helpdesk gadget under a real
gadgetd. A helpdesk report becomes a ticket of the API with the
gatekeeper's label, though neither gadget ever holds the token.
Usage: tickets_test.py TEST. Environment: GADGETD, GADGETCTL, TESTGADGET,
EXAMPLES, TICKETS_API."""
import json
import os
import re
import secrets
import subprocess
import urllib.error
import urllib.request

from gateway_util import Gateway
from harness import EXAMPLES, GADGETCTL, Daemon, check, main, policy, sanitizer_check, test, wait_for

TICKETS_API = os.environ.get("TICKETS_API", "")


class Api:
    """tickets-api on 127.0.0.1, any free port, with a fresh token in a file
    only root may read."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.token_file = os.path.join(tmp, "tickets.token")
        self.rotate()

    def rotate(self):
        self.token = secrets.token_hex(24)
        with open(os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(self.token + "\n")

    def __enter__(self):
        self.log = open(os.path.join(self.tmp, "tickets-api.log"), "w+")
        self.proc = subprocess.Popen([TICKETS_API, "--listen", "127.0.0.1:0", "--token-file", self.token_file],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.fullmatch(r"tickets-api: listening on http://127\.0\.0\.1:(\d+)\n", line)
        check(m, "tickets-api did not say where it listens: %r" % line)
        self.port = int(m.group(1))
        return self

    def __exit__(self, exc, *rest):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.seek(0)
        text = self.log.read()
        sanitizer_check(text, "tickets-api")
        if exc is None:
            check(self.proc.returncode == 0, "tickets-api ended with %r on SIGTERM:\n%s" % (self.proc.returncode, text))

    def request(self, method, body=None, auth=True, token=None):
        """(status, JSON answer) of METHOD /api/tickets, asked directly."""
        req = urllib.request.Request("http://127.0.0.1:%d/api/tickets" % self.port, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        if auth:
            req.add_header("Authorization", "Bearer " + (token or self.token))
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())


def install(d, api, approve=True, credential=None):
    """The example policies in d's policy dir, naming api's port and token
    file (as scripts/demo does) or another credential file; approve=False
    leaves out the helpdesk binding's Approve= (its creates go through at
    once)."""
    for name in ("tickets", "helpdesk"):
        with open(os.path.join(EXAMPLES, name + ".policy")) as f:
            text = f.read().replace("127.0.0.1:8787", "127.0.0.1:%d" % api.port)
        text = re.sub(r"^Credential=.*$", "Credential=" + (credential or api.token_file), text, flags=re.M)
        if not approve:
            text = re.sub(r"^Approve(Timeout)?=.*\n", "", text, flags=re.M)
        path = os.path.join(d.pol, name + ".policy")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
    d.ctl("reload")
    for n in ("tickets", "helpdesk"):
        wait_for(lambda n=n: d.state(n) == "ready", what=n + " ready")


def call(d, gadget, method, args=None):
    """(exit status, JSON result or the error text) of gadgetctl call."""
    r = d.ctl("call", gadget, method, *([json.dumps(args)] if args is not None else []))
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else r.stderr.strip())


@test
def api_requires_its_token(tmp):
    with Api(tmp) as api:
        for kw in ({"auth": False}, {"token": api.token[:-1]}, {"token": api.token + "0"}):
            status, body = api.request("GET", **kw)
            check(status == 401 and "error" in body, "GET without the token (%r): %d %r" % (kw, status, body))
            status, _ = api.request("POST", {"title": "t"}, **kw)
            check(status == 401, "POST without the token (%r): %d" % (kw, status))
        check(api.request("GET") == (200, []), "GET with the token")
        status, t = api.request("POST", {"title": "Printer on fire", "body": "b", "label": "l"})
        check(status == 201 and t == {"id": 1, "title": "Printer on fire", "body": "b", "label": "l"},
              "POST: %d %r" % (status, t))
        for bad, why in (({"title": ""}, "title"), ({"body": "x"}, "title"), ({"title": "x" * 121}, "title"),
                         ({"title": "t", "body": "x" * 8193}, "body"), ({"title": "t", "label": "x" * 33}, "label"),
                         ({"title": "t", "other": 1}, "unknown"), ([1], "object")):
            status, body = api.request("POST", bad)
            check(status == 400 and why in body.get("error", ""), "POST %r: %d %r" % (bad, status, body))
        old = api.token
        api.rotate()  # read again at each request
        check(api.request("GET", token=old)[0] == 401, "the old token still works after rotation")
        check(api.request("GET")[0] == 200, "the new token is refused after rotation")


@test
def api_listens_on_loopback_only(tmp):
    with open(os.path.join(tmp, "t"), "w") as f:
        f.write("x")
    for listen in ("0.0.0.0:0", "10.0.0.1:0", "[::]:0", "localhost:0", "127.0.0.1"):
        r = subprocess.run([TICKETS_API, "--listen", listen, "--token-file", os.path.join(tmp, "t")],
                           capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and "loopback" in r.stderr, "--listen %s: %d %r" % (listen, r.returncode, r.stderr))


@test
def report_becomes_a_ticket_with_the_gatekeepers_label(tmp):
    with Api(tmp) as api, Daemon(tmp) as d:
        install(d, api, approve=False)
        code, r = call(d, "helpdesk", "report", {"title": "Printer on fire", "body": "third floor"})
        check(code == 0 and r == {"id": 1}, "report: %r %r" % (code, r))
        status, tickets = api.request("GET")
        check(status == 200 and tickets == [{"id": 1, "title": "Printer on fire", "body": "third floor",
                                             "label": "from-gadgets"}], "the API holds %d %r" % (status, tickets))
        code, r = call(d, "helpdesk", "tickets")
        check(code == 0 and r == [{"id": 1, "title": "Printer on fire", "label": "from-gadgets"}],
              "helpdesk tickets: %r %r" % (code, r))
        # A rotated token is the one gadgetd sends from the next request on.
        api.rotate()
        code, r = call(d, "helpdesk", "report", {"title": "Second"})
        check(code == 0 and r == {"id": 2}, "report after rotating the token: %r %r" % (code, r))
        # The longest body the signatures take fits the API's bound in any UTF-8.
        code, r = call(d, "helpdesk", "report", {"title": "Clef", "body": "\U0001d11e" * 2000})
        check(code == 0 and r == {"id": 3}, "a body of 2000 4-byte characters: %r %r" % (code, r))
        # The signature refuses before any gadget sees the call.
        code, r = call(d, "helpdesk", "report", {"title": "x" * 121})
        check(code != 0 and "args.title" in r, "a 121-character title: %r %r" % (code, r))
        check(len(api.request("GET")[1]) == 3, "a refused report reached the API")
        check(api.token not in d.logtext(), "the token reached gadgetd's log")


@test
def gatekeeper_reports_the_apis_refusal(tmp):
    """With a credential the API does not take, the API answers 401 and
    the caller learns that, not the credential."""
    wrong = os.path.join(tmp, "wrong.token")
    with open(os.open(wrong, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("not-the-token-%s\n" % secrets.token_hex(8))
    with Api(tmp) as api, Daemon(tmp) as d:
        install(d, api, approve=False, credential=wrong)
        code, r = call(d, "helpdesk", "report", {"title": "t"})
        check(code != 0 and "answered 401" in r and "not-the-token" not in r,
              "report with a wrong credential: %r %r" % (code, r))
        check(api.request("GET") == (200, []), "a ticket was made with a wrong credential")


@test
def no_credential_in_the_user_gadget(tmp):
    with Api(tmp) as api, Daemon(tmp) as d:
        install(d, api, approve=False)
        with open(os.path.join(d.pol, "helpdesk.policy")) as f:
            text = f.read()
        check("Credential" not in text and not re.search(r"^Type=(http|secret|text)$", text, re.M),
              "the helpdesk policy has a credential or an http binding:\n" + text)
        for args in (("status", "helpdesk"), ("--json", "status", "helpdesk"), ("describe", "helpdesk"),
                     ("--json", "describe", "helpdesk"), ("status", "tickets"), ("--json", "status", "tickets"),
                     ("describe", "tickets")):
            r = d.ctl(*args)
            check(r.returncode == 0, "gadgetctl %s: %r" % (" ".join(args), r.stderr))
            check(api.token not in r.stdout + r.stderr, "the token is in gadgetctl %s" % " ".join(args))
            if "helpdesk" in args:
                check("tickets.token" not in r.stdout and "credential" not in r.stdout.lower(),
                      "gadgetctl %s names a credential:\n%s" % (" ".join(args), r.stdout))
        # The gatekeeper's status names its credential file, not what it holds.
        check("credential " + api.token_file in d.ctl("status", "tickets").stdout,
              "gadgetctl status tickets does not name the credential file")
        check(api.token not in d.logtext(), "the token reached gadgetd's log")


def waiting(d):
    """The calls waiting for an approval (gadgetctl --json approvals)."""
    r = d.ctl("--json", "approvals")
    check(r.returncode == 0, "gadgetctl --json approvals: %r" % r.stderr)
    return json.loads(r.stdout)["approvals"]


def report_in_background(d, title):
    return subprocess.Popen([GADGETCTL, "--socket", d.sock, "call", "helpdesk", "report", json.dumps({"title": title})],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@test
def report_waits_for_approval(tmp):
    """The shipped policies: a report waits, shown by gadgetctl approvals,
    until an operator approves it (then the ticket is made) or denies it
    (then the helpdesk's caller gets an error and the API sees nothing)."""
    with Api(tmp) as api, Daemon(tmp) as d:
        install(d, api)
        p = report_in_background(d, "Needs a yes")
        w = wait_for(lambda: waiting(d), what="the report among the approvals")
        check(len(w) == 1, "approvals: %r" % w)
        a = w[0]
        check(a["caller"] == "helpdesk" and a["target"] == "tickets" and a["method"] == "create"
              and "Needs a yes" in a["args"] and "TICKETS" in a["via"], "the approval shows %r" % a)
        check(p.poll() is None, "the report was answered before its approval")
        check(api.request("GET") == (200, []), "a ticket was made before the approval")
        r = d.ctl("approve", str(a["id"]))
        check(r.returncode == 0, "gadgetctl approve: %r" % r.stderr)
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and json.loads(out) == {"id": 1}, "approved report: %r %r" % (out, err))
        check(api.request("GET")[1][0]["title"] == "Needs a yes", "the approved ticket is not in the API")
        check(waiting(d) == [], "an approved call is still waiting")

        p = report_in_background(d, "Needs a no")
        a = wait_for(lambda: waiting(d), what="the second report among the approvals")[0]
        r = d.ctl("deny", str(a["id"]))
        check(r.returncode == 0, "gadgetctl deny: %r" % r.stderr)
        out, err = p.communicate(timeout=30)
        check(p.returncode != 0 and "den" in err.lower(), "denied report: %r %r" % (out, err))
        check(len(api.request("GET")[1]) == 1, "a denied report reached the API")
        check(api.token not in d.logtext(), "the token reached gadgetd's log")


def admin_refused(code, r, what):
    check(code != 0, "%s: the admin method answered %r" % (what, r))
    check("admin" in r or "denied" in r or "not allowed" in r, "%s: refused for another reason: %r" % (what, r))


@test
def admin_methods_only_for_the_admin_ui(tmp):
    """overview and set_label are AdminMethods=: neither gadgetctl call nor
    a gadget binding (even one allowing every method) reaches them."""
    with Api(tmp) as api, Daemon(tmp) as d:
        install(d, api, approve=False)
        policy(d.pol, "prober", "[Binding TICKETS]\nType=gadget\nTarget=tickets\n")
        d.ctl("reload")
        wait_for(lambda: d.state("prober") == "ready", what="prober ready")
        for method, args in (("overview", None), ("set_label", {"label": "stolen"})):
            code, r = call(d, "tickets", method, args)
            admin_refused(code, r, "gadgetctl call tickets " + method)
            a = {"binding": "TICKETS", "op": "call", "args": {"method": method, "args": args}}
            code, r = call(d, "prober", "binding", a)
            admin_refused(code, r, "a gadget binding's call of " + method)
        code, r = call(d, "prober", "binding", {"binding": "TICKETS", "op": "call",
                                                 "args": {"method": "create", "args": {"title": "ok"}}})
        check(code == 0 and r == {"id": 1}, "create through an open binding: %r %r" % (code, r))
        check(api.request("GET")[1][0]["label"] == "from-gadgets", "the label changed")


@test
def admin_ui_sets_the_label(tmp):
    """Through the gateway's admin route (what the admin UI calls): the
    label goes on the next tickets and survives a restart of the
    gatekeeper (kv); the admin UI page is served; a UI's call of an admin
    method is refused."""
    with Api(tmp) as api, Gateway(tmp) as g:
        install(g, api, approve=False)

        def admin(method, args=None):
            status, _, raw = g.request("POST", "/api/gadgets/tickets/admin/" + method, json.dumps(args))
            check(status == 200, "admin %s: %d %r" % (method, status, raw))
            return json.loads(raw)
        check(admin("overview") == {"label": "from-gadgets", "created": 0, "recent": []}, "a new overview")
        check(admin("set_label", {"label": "urgent"}) is None, "set_label")
        code, r = call(g, "helpdesk", "report", {"title": "Labelled"})
        check(code == 0 and r == {"id": 1}, "report: %r %r" % (code, r))
        check(api.request("GET")[1][0]["label"] == "urgent", "the new label is not on the ticket")
        check(g.ctl("restart", "tickets").returncode == 0, "restart tickets")
        wait_for(lambda: g.state("tickets") == "ready", what="tickets ready again")
        check(admin("overview") == {"label": "urgent", "created": 1,
                                    "recent": [{"id": 1, "title": "Labelled", "label": "urgent"}]},
              "the overview after a restart: %r" % admin("overview"))
        status, _, raw = g.request("POST", "/api/gadgets/tickets/admin/set_label", json.dumps({"label": "x" * 33}))
        check(status == 400, "a 33-character label: %d %r" % (status, raw))
        status, body = g.call("tickets", "set_label", {"label": "from-a-ui"})
        check(status == 403 and "admin method" in body["error"]["message"], "a UI's call of set_label: %r" % body)
        status, h, raw = g.request("GET", "/gadgets/tickets/admin")
        check(status == 200 and b"Tickets gatekeeper" in raw, "the admin UI page: %d" % status)
        check(api.token not in g.logtext(), "the token reached gadgetd's log")


if __name__ == "__main__":
    raise SystemExit(main())
