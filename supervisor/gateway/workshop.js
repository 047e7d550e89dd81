/* The workshop page: lists the gadgets, the calls waiting for a person's
 * approval, and shows a gadget's UI and a gatekeeper's admin UI, each in
 * its own <iframe sandbox="allow-scripts">. A frame's only channel is the
 * MessagePort this page made for it (the protocol is in stub.js): a UI's
 * port becomes calls of its own gadget (POST /api/gadgets/NAME/call/METHOD),
 * an admin UI's port calls of its own gatekeeper's admin methods
 * (POST /api/gadgets/NAME/admin/METHOD), and nothing else. The page has no
 * window "message" listener at all: what a frame posts to the window is
 * never a call. No HTML is ever built from text: every name, state,
 * argument and message goes in through textContent. Each gadget's numbers
 * and its activity (events, call log, traces) are activity.js's. */
"use strict";
(function () {
        const MAX_JSON = Number(document.body.dataset.maxJson) || 1048576;
        const MAX_PENDING = 64;          /* calls in flight per frame */
        const MAX_LOG = 30;              /* lines kept in a frame's call log */
        const MAX_ARGS_SHOWN = 4000;     /* characters of an approval's arguments */
        const MAX_LIST_PAGES = 64;       /* answers of GET /api/gadgets read per refresh (256 gadgets each) */
        /* The rule for method names, gadget_method_name_ok of
         * proto/contract.h (no "." or ".." path segments). */
        const METHOD_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
        const $ = (id) => document.getElementById(id);
        const listEl = $("gadgets"), statusEl = $("status");
        const approvalsPaneEl = $("approvals-pane"), approvalsEl = $("approvals"), decidedEl = $("approvals-note");
        /* The two places a frame can be shown, one frame each: a gadget's
         * UI and a gatekeeper's admin UI. path: the frame's document under
         * /gadgets/NAME/; route: where its port's calls go under
         * /api/gadgets/NAME/. */
        const slots = {
                ui: { path: "ui", route: "call", label: "UI", whose: "gadget", rec: null,
                      paneEl: $("ui-pane"), stageEl: $("stage"), titleEl: $("stage-title"), callsEl: $("calls") },
                admin: { path: "admin", route: "admin", label: "admin UI", whose: "gatekeeper", rec: null,
                         paneEl: $("admin-pane"), stageEl: $("admin-stage"), titleEl: $("admin-title"),
                         callsEl: $("admin-calls") },
        };
        let gadgets = [];
        const activity = self.workshopActivity;

        function el(tag, cls, text) {
                const e = document.createElement(tag);
                if (cls)
                        e.className = cls;
                if (text !== undefined)
                        e.textContent = text;
                return e;
        }

        function button(cls, text, onClick) {
                const b = el("button", cls, text);
                b.type = "button";
                b.addEventListener("click", onClick);
                return b;
        }

        function openName(slot) {
                return slot.rec ? slot.rec.name : null;
        }

        /* "now", "12 s ago", "3 min ago", "2 h ago", "4 d ago"; "never" for 0. */
        /* "next alarm in 5 min" (or "due"), from ms since the epoch; "" if none. */
        function nextAlarm(at) {
                if (!(Number(at) > 0))
                        return "";
                const s = Math.floor((Number(at) - Date.now()) / 1000);
                const left = s < 1 ? "due" : s < 60 ? "in " + s + " s" : s < 3600 ? "in " + Math.floor(s / 60) +
                        " min" : s < 86400 ? "in " + Math.floor(s / 3600) + " h" : "in " + Math.floor(s / 86400) + " d";
                return " \u00b7 next alarm " + left;
        }

        function ago(ms) {
                const s = Math.floor(Number(ms) / 1000);
                if (!(Number(ms) > 0))
                        return "never";
                if (s < 1)
                        return "now";
                if (s < 60)
                        return s + " s ago";
                if (s < 3600)
                        return Math.floor(s / 60) + " min ago";
                if (s < 86400)
                        return Math.floor(s / 3600) + " h ago";
                return Math.floor(s / 86400) + " d ago";
        }

        function render() {
                listEl.replaceChildren();
                for (const g of gadgets) {
                        const li = el("li", "gadget");
                        li.dataset.name = g.name;
                        if (openName(slots.ui) === g.name)
                                li.classList.add("selected");
                        if (openName(slots.admin) === g.name)
                                li.classList.add("admin-open");
                        const head = el("div", "gadget-head");
                        head.append(el("span", "gadget-name", g.name), el("span", "state state-" + g.state, g.state));
                        /* Installed from a bundle: the version it runs. */
                        if (g.version)
                                head.append(el("span", "gadget-version", "v" + g.version));
                        /* A staged rollout: its version and share. */
                        if (g.rollout_version)
                                head.append(el("span", "gadget-version", "rolling out v" + g.rollout_version + ": " +
                                               g.rollout_percent + "%"));
                        li.append(head);
                        if (g.kept_errors)
                                li.append(el("div", "gadget-meta kept", "kept on its previous policy: " + g.kept_file +
                                             " has " + g.kept_errors + (g.kept_errors === 1 ? " error" : " errors") +
                                             " (gadgetctl status " + g.name + " lists them)"));
                        const admin = Array.isArray(g.admin_methods) ? g.admin_methods : [];
                        if (g.gatekeeper)
                                li.append(el("div", "gadget-meta gatekeeper", "gatekeeper" +
                                             (admin.length ? " \u00b7 admin methods: " + admin.join(", ") : "")));
                        /* Each method's signature (what its calls must pass), or its
                         * name for one declared without. */
                        if (!g.methods.length)
                                li.append(el("div", "gadget-meta", g.state === "idle" ?
                                             "idle: starts at its next call (its methods are known once it runs)" :
                                             g.cause || "no methods yet"));
                        g.methods.forEach((m, i) => {
                                const sig = (g.signatures || [])[i];
                                li.append(el("div", "gadget-sig", (sig ? sig : m + " (untyped)") +
                                             (admin.includes(m) ? " \u00b7 admin only" : "")));
                        });
                        li.append(el("div", "gadget-meta", g.calls + (g.calls === 1 ? " call" : " calls") +
                                     " \u00b7 last activity " + ago(g.active_ago_ms) +
                                     (g.start === "on-demand" ? " \u00b7 on demand" : "") + nextAlarm(g.next_alarm_ms) +
                                     (g.ui ? "" : " \u00b7 no UI")));
                        li.append(el("div", "gadget-stats", activity.line(g)));
                        if (g.denials)
                                li.append(el("div", "gadget-meta denied", g.denials + (g.denials === 1 ? " system call" : " system calls") +
                                             " refused by its filter (gadgetctl denials " + g.name + " names them)"));
                        if (activity.shownName() === g.name)
                                li.classList.add("activity-open");
                        li.append(button("activity", "Activity", () => {
                                activity.open(g.name);
                                refreshSoon();
                        }));
                        if (g.ui)
                                li.append(button("open", "Open UI", () => open(slots.ui, g.name)));
                        if (g.gatekeeper && g.admin_ui)
                                li.append(button("open-admin", "Open admin", () => open(slots.admin, g.name)));
                        listEl.append(li);
                }
        }

        function renderApprovals(list, total) {
                approvalsEl.replaceChildren();
                if (total > list.length)
                        approvalsEl.append(el("li", "hint", total + " calls wait; the first " + list.length + " are shown."));
                if (!list.length) {
                        approvalsEl.append(el("li", "hint", "Nothing is waiting."));
                        return;
                }
                for (const a of list) {
                        const li = el("li", "approval");
                        li.dataset.id = String(a.id);
                        li.append(el("div", "approval-what", String(a.target) + "." + String(a.method)));
                        li.append(el("div", "approval-from", "from " + String(a.caller) +
                                     (a.via ? " via " + String(a.via) : "")));
                        const args = typeof a.args === "string" ? a.args : String(JSON.stringify(a.args));
                        li.append(el("pre", "approval-args", args.length > MAX_ARGS_SHOWN ?
                                     args.slice(0, MAX_ARGS_SHOWN) + "\u2026" : args));
                        const secs = (ms) => Math.round(Number(ms) / 1000);
                        li.append(el("div", "approval-meta", "waiting " + secs(a.age_ms) + " s; denied after " +
                                     secs(a.timeout_ms) + " s"));
                        const row = el("div", "approval-actions");
                        row.append(button("approve", "Approve", () => decide(li, a.id, "approve")),
                                   button("approve-always", "Approve always", () => decide(li, a.id, "always")),
                                   button("deny", "Deny", () => decide(li, a.id, "deny")));
                        li.append(row);
                        approvalsEl.append(li);
                }
        }

        /* GET as the signed-in page; null when gadgetd has no such route. */
        async function getJson(url) {
                const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
                if (r.status === 401)
                        throw Object.assign(new Error("unauthorized"), { unauthorized: true });
                if (r.status === 404)
                        return null;
                if (!r.ok)
                        throw new Error("HTTP " + r.status);
                return r.json();
        }

        async function refresh() {
                try {
                        /* The list comes in pages, each one turn of gadgetd's loop. */
                        let list = await getJson("/api/gadgets"), all = [];
                        for (let i = 0; list; i++) {
                                activity.reading(list.gadgets, list.at_ms);
                                all = all.concat(list.gadgets);
                                if (!list.more || !all.length || i + 1 === MAX_LIST_PAGES)
                                        break;
                                list = await getJson("/api/gadgets?after=" + encodeURIComponent(all[all.length - 1].name));
                        }
                        if (!list)
                                throw new Error("HTTP 404");
                        gadgets = all;
                        const waiting = await getJson("/api/approvals");
                        statusEl.textContent = "";
                        render();
                        /* Why the id check: it goes into a URL. */
                        approvalsPaneEl.hidden = !waiting;
                        if (waiting)
                                renderApprovals(waiting.approvals.filter((a) => Number.isSafeInteger(a.id) && a.id >= 0),
                                                Number(waiting.total) || 0);
                } catch (e) {
                        statusEl.textContent = e.unauthorized ? "Not signed in: open /?token=TOKEN again." :
                                "gadgetd does not answer (" + e.message + ")";
                }
        }

        /* The lists again after a call or a decision; one at a time. */
        let refreshing = false, again = false;
        async function refreshSoon() {
                if (refreshing) {
                        again = true;
                        return;
                }
                refreshing = true;
                do {
                        again = false;
                        await refresh();
                } while (again);
                refreshing = false;
        }

        /* A person's answer to a waiting call: approve (once or always for
         * this caller) or deny. */
        async function decide(li, id, how) {
                for (const b of li.querySelectorAll("button"))
                        b.disabled = true;
                decidedEl.textContent = "";
                try {
                        const r = await fetch("/api/approvals/" + id + "/" + (how === "deny" ? "deny" : "approve"), {
                                method: "POST", body: JSON.stringify(how === "always" ? { always: true } : {}),
                                credentials: "same-origin", cache: "no-store", redirect: "error",
                                headers: { "Content-Type": "application/json" },
                        });
                        if (r.status === 404)
                                decidedEl.textContent = "Call " + id + " no longer waits for approval.";
                        else if (!r.ok)
                                decidedEl.textContent = "Call " + id + ": the decision failed (HTTP " + r.status + ").";
                } catch (e) {
                        decidedEl.textContent = "Call " + id + ": gadgetd does not answer (" + e.message + ")";
                }
                refreshSoon();
        }

        function note(rec, method, outcome, detail) {
                const slot = rec.slot;
                if (rec !== slot.rec)
                        return;
                const li = el("li");
                li.append(el("span", "outcome " + outcome, outcome), el("span", "method", method),
                          el("span", "detail", detail));
                slot.callsEl.prepend(li);
                while (slot.callsEl.children.length > MAX_LOG)
                        slot.callsEl.lastChild.remove();
        }

        /* Ends a slot's frame and its port; why, if given, replaces it. */
        function close(slot, why) {
                const rec = slot.rec;
                if (!rec)
                        return;
                rec.closed = true;
                rec.port.close();
                rec.iframe.remove();
                slot.rec = null;
                if (why)
                        slot.stageEl.replaceChildren(el("p", "hint", why));
                else if (slot === slots.admin)
                        slot.paneEl.hidden = true;
                render();
        }

        function open(slot, name) {
                close(slot);
                const iframe = document.createElement("iframe");
                /* Why only allow-scripts: without allow-same-origin the frame
                 * has an opaque origin (no cookies, no storage, no access to
                 * this page or the gateway); no popups, top navigation,
                 * modals or forms either. The frame's own response carries
                 * the same sandbox in its CSP, for when it is opened directly. */
                iframe.setAttribute("sandbox", "allow-scripts");
                iframe.setAttribute("referrerpolicy", "no-referrer");
                iframe.className = "ui-frame";
                iframe.title = name + " " + slot.label;
                const channel = new MessageChannel();
                const rec = { slot: slot, name: name, iframe: iframe, port: channel.port1,
                              pending: 0, loads: 0, closed: false };
                /* Why the port is the identity: only the frame it was given
                 * to holds its other end, whatever origin or window a message
                 * claims, so a message on it is that frame's. */
                channel.port1.onmessage = (ev) => {
                        if (!rec.closed)
                                handle(rec, ev.data);
                };
                /* The port goes at the first load, to the document gadgetd
                 * served (the stub takes it only from this page). A frame may
                 * navigate itself, which no browser policy forbids: a second
                 * load means it left its document, and it is closed at once,
                 * its port with it. */
                iframe.addEventListener("load", () => {
                        if (rec.closed)
                                return;
                        if (++rec.loads > 1) {
                                close(slot, "The " + name + " " + slot.label + " navigated away from itself and was closed.");
                                return;
                        }
                        /* Why "*": the frame's origin is opaque and cannot be
                         * named; the message goes to that one window object. */
                        iframe.contentWindow.postMessage({ gadgetd: 1, type: "port" }, "*", [channel.port2]);
                });
                iframe.src = "/gadgets/" + encodeURIComponent(name) + "/" + slot.path;
                slot.rec = rec;
                slot.titleEl.textContent = slot === slots.admin ? name + " (admin)" : name;
                slot.callsEl.replaceChildren();
                slot.paneEl.hidden = false;
                slot.stageEl.replaceChildren(iframe);
                render();
        }

        function reply(rec, msg) {
                if (rec.closed)
                        return;
                msg.gadgetd = 1;
                msg.type = "result";
                rec.port.postMessage(msg);
        }

        function refuse(rec, id, code, message, method) {
                note(rec, method, "refused", message);
                reply(rec, { id: id, ok: false, error: { code: code, message: message, status: 0 } });
        }

        async function handle(rec, m) {
                if (!m || typeof m !== "object" || m.gadgetd !== 1 || m.type !== "call")
                        return;
                const id = m.id;
                if (!Number.isSafeInteger(id) || id < 0)
                        return;
                const slot = rec.slot;
                const method = typeof m.method === "string" ? m.method.slice(0, 64) : "?";
                /* Why: the frame's gadget and route are fixed by which port
                 * the message came on; a message naming another is refused. */
                if (Object.prototype.hasOwnProperty.call(m, "gadget") && m.gadget !== rec.name)
                        return refuse(rec, id, "refused", (slot === slots.admin ? "an admin UI" : "a UI") +
                                      " may call only its own " + slot.whose + " (\"" + rec.name + "\")", method);
                if (typeof m.method !== "string" || !METHOD_RE.test(m.method))
                        return refuse(rec, id, "bad_method", "not a method name", method);
                if (typeof m.json !== "string")
                        return refuse(rec, id, "bad_json", "the arguments must be a JSON string", method);
                if (m.json.length > MAX_JSON || new TextEncoder().encode(m.json).length > MAX_JSON)
                        return refuse(rec, id, "too_large", "the arguments are larger than " + MAX_JSON + " bytes", method);
                try {
                        JSON.parse(m.json);
                } catch (e) {
                        return refuse(rec, id, "bad_json", "the arguments are not valid JSON", method);
                }
                if (rec.pending >= MAX_PENDING)
                        return refuse(rec, id, "busy", "too many calls in flight from this " + slot.label, method);
                rec.pending++;
                try {
                        const url = "/api/gadgets/" + encodeURIComponent(rec.name) + "/" + slot.route + "/" +
                                    encodeURIComponent(method);
                        const answer = fetch(url, {
                                method: "POST", body: m.json, credentials: "same-origin", cache: "no-store",
                                redirect: "error", headers: { "Content-Type": "application/json" },
                        });
                        /* A call may wait for a person: show it soon. */
                        setTimeout(refreshSoon, 300);
                        const r = await answer;
                        const text = await r.text();
                        let body = null;
                        try {
                                body = JSON.parse(text);
                        } catch (e) {
                                body = null;
                        }
                        if (r.ok) {
                                note(rec, method, "ok", text.length > 200 ? text.slice(0, 200) + "\u2026" : text);
                                reply(rec, { id: id, ok: true, result: body });
                        } else {
                                const err = body && body.error ? body.error : {};
                                const message = typeof err.message === "string" ? err.message : "HTTP " + r.status;
                                note(rec, method, "error", r.status + " " + message);
                                reply(rec, { id: id, ok: false,
                                             error: { code: String(err.code || "http"), message: message, status: r.status } });
                        }
                } catch (e) {
                        note(rec, method, "error", "gadgetd does not answer");
                        reply(rec, { id: id, ok: false, error: { code: "unreachable", message: "gadgetd does not answer", status: 0 } });
                } finally {
                        rec.pending--;
                        refreshSoon();
                }
        }

        $("admin-close").addEventListener("click", () => close(slots.admin));
        activity.init({ el: el, button: button, getJson: getJson });
        refreshSoon();
        setInterval(refreshSoon, 5000);
})();
