/* The workshop page: lists the gadgets and shows one gadget's UI in an
 * <iframe sandbox="allow-scripts">. The frame's only channel is
 * postMessage to this page, which turns a message into a call of that
 * frame's own gadget (POST /api/gadgets/NAME/call/METHOD) and nothing else.
 * The protocol is described in stub.js. No HTML is ever built from text:
 * every name, state and message goes in through textContent. */
"use strict";
(function () {
        const MAX_JSON = Number(document.body.dataset.maxJson) || 1048576;
        const MAX_PENDING = 64;          /* calls in flight per frame */
        const MAX_LOG = 30;              /* lines kept in the call log */
        /* The rule for method names, gadget_method_name_ok of
         * proto/contract.h (no "." or ".." path segments). */
        const METHOD_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
        const $ = (id) => document.getElementById(id);
        const listEl = $("gadgets"), stageEl = $("stage"), titleEl = $("stage-title");
        const callsEl = $("calls"), statusEl = $("status");
        let gadgets = [];
        let current = null;  /* {name, iframe, pending, loads, closed} */

        function el(tag, cls, text) {
                const e = document.createElement(tag);
                if (cls)
                        e.className = cls;
                if (text !== undefined)
                        e.textContent = text;
                return e;
        }

        function render() {
                listEl.replaceChildren();
                for (const g of gadgets) {
                        const li = el("li", "gadget");
                        li.dataset.name = g.name;
                        if (current && current.name === g.name)
                                li.classList.add("selected");
                        const head = el("div", "gadget-head");
                        head.append(el("span", "gadget-name", g.name), el("span", "state state-" + g.state, g.state));
                        li.append(head);
                        /* Each method's signature (what its calls must pass), or its
                         * name for one declared without. */
                        if (!g.methods.length)
                                li.append(el("div", "gadget-meta", g.cause || "no methods yet"));
                        g.methods.forEach((m, i) => {
                                const sig = (g.signatures || [])[i];
                                li.append(el("div", "gadget-sig", sig ? sig : m + " (untyped)"));
                        });
                        li.append(el("div", "gadget-meta", g.calls + (g.calls === 1 ? " call" : " calls") +
                                     (g.ui ? "" : " \u00b7 no UI")));
                        if (g.ui) {
                                const b = el("button", "open", "Open UI");
                                b.type = "button";
                                b.addEventListener("click", () => open(g.name));
                                li.append(b);
                        }
                        listEl.append(li);
                }
        }

        async function refresh() {
                try {
                        const r = await fetch("/api/gadgets", { credentials: "same-origin", cache: "no-store" });
                        if (r.status === 401) {
                                statusEl.textContent = "Not signed in: open /?token=TOKEN again.";
                                return;
                        }
                        if (!r.ok)
                                throw new Error("HTTP " + r.status);
                        gadgets = (await r.json()).gadgets;
                        statusEl.textContent = "";
                        render();
                } catch (e) {
                        statusEl.textContent = "gadgetd does not answer (" + e.message + ")";
                }
        }

        /* The list again after a call (its count changed); one at a time. */
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

        function note(rec, method, outcome, detail) {
                if (rec !== current)
                        return;
                const li = el("li");
                li.append(el("span", "outcome " + outcome, outcome), el("span", "method", method),
                          el("span", "detail", detail));
                callsEl.prepend(li);
                while (callsEl.children.length > MAX_LOG)
                        callsEl.lastChild.remove();
        }

        function close(why) {
                if (!current)
                        return;
                current.closed = true;
                current.iframe.remove();
                if (why)
                        stageEl.replaceChildren(el("p", "hint", why));
                current = null;
                render();
        }

        function open(name) {
                close();
                const iframe = document.createElement("iframe");
                /* Why only allow-scripts: without allow-same-origin the UI
                 * has an opaque origin (no cookies, no storage, no access to
                 * this page or the gateway); no popups, top navigation,
                 * modals or forms either. The UI's own response carries the
                 * same sandbox in its CSP, for when it is opened directly. */
                iframe.setAttribute("sandbox", "allow-scripts");
                iframe.setAttribute("referrerpolicy", "no-referrer");
                iframe.className = "ui-frame";
                iframe.title = name + " UI";
                const rec = { name: name, iframe: iframe, pending: 0, loads: 0, closed: false };
                /* A frame may navigate itself, which no browser policy
                 * forbids: a second load means the UI left its document,
                 * and that frame is closed at once. */
                iframe.addEventListener("load", () => {
                        if (++rec.loads > 1 && !rec.closed && rec === current)
                                close("The " + name + " UI navigated away from itself and was closed.");
                });
                iframe.src = "/gadgets/" + encodeURIComponent(name) + "/ui";
                current = rec;
                titleEl.textContent = name;
                callsEl.replaceChildren();
                stageEl.replaceChildren(iframe);
                render();
        }

        /* Why "*": the frame's origin is opaque and cannot be named. The
         * message goes to that one window object and holds only its own
         * gadget's answer. */
        function reply(rec, msg) {
                if (rec.closed || !rec.iframe.contentWindow)
                        return;
                msg.gadgetd = 1;
                msg.type = "result";
                rec.iframe.contentWindow.postMessage(msg, "*");
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
                const method = typeof m.method === "string" ? m.method.slice(0, 64) : "?";
                /* Why: the frame's gadget is fixed by which frame sent the
                 * message; a message naming any other gadget is refused. */
                if (Object.prototype.hasOwnProperty.call(m, "gadget") && m.gadget !== rec.name)
                        return refuse(rec, id, "refused", "a UI may call only its own gadget (\"" + rec.name + "\")", method);
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
                        return refuse(rec, id, "busy", "too many calls in flight from this UI", method);
                rec.pending++;
                try {
                        const url = "/api/gadgets/" + encodeURIComponent(rec.name) + "/call/" + encodeURIComponent(method);
                        const r = await fetch(url, {
                                method: "POST", body: m.json, credentials: "same-origin", cache: "no-store",
                                redirect: "error", headers: { "Content-Type": "application/json" },
                        });
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

        window.addEventListener("message", (ev) => {
                const rec = current;
                /* Why event.source: every sandboxed frame's origin is "null",
                 * so the origin names nobody; the window of the frame this
                 * page made is the one sure identity. Anything else is
                 * ignored. */
                if (!rec || rec.closed || !ev.source || ev.source !== rec.iframe.contentWindow)
                        return;
                handle(rec, ev.data);
        });

        refreshSoon();
        setInterval(refreshSoon, 5000);
})();
