/* What the workshop shows of each gadget's work, from gadgetd's own
 * counters: its calls/s and errors/s (two readings of GET /api/gadgets
 * apart, as gadgetctl top makes them), its p99 call duration and its
 * memory on its card; for the gadget picked, its recent events (its last
 * log lines, lifecycle events among them) and its call log
 * (GET /api/gadgets/NAME/activity), refreshed while shown; a call's trace
 * id opens that trace's spans, from every node it passed through, as a tree
 * (GET /api/traces/ID).
 * workshop.js calls it (self.workshopActivity). As there, no HTML is ever
 * built from text: everything goes in through textContent. */
"use strict";
self.workshopActivity = (function () {
        const POLL_MS = 2000;            /* the activity shown, read again */
        const TRACE_RE = /^[0-9a-f]{32}$/;
        const $ = (id) => document.getElementById(id);
        let h = null;                    /* workshop.js's el, button, getJson */
        const last = new Map();          /* name -> {calls, errors, at}: the previous reading */
        const rates = new Map();         /* name -> {calls, errors} a second */
        let shown = null, timer = null, loading = false;

        /* As gadgetctl's: "850 us" under 10 ms, then "12.3 ms". */
        function duration(us) {
                us = Number(us);
                return us < 10000 ? us + " us" : (Math.floor(us / 100) / 10).toFixed(1) + " ms";
        }

        function size(bytes) {
                const units = ["B", "KiB", "MiB", "GiB", "TiB"];
                let v = Number(bytes), i = 0;
                while (v >= 1024 && i < units.length - 1) {
                        v /= 1024;
                        i++;
                }
                return (i ? v.toFixed(1) : String(v)) + " " + units[i];
        }

        /* A reading of the list: rates since the last one (none across a
         * counter that went back, as after gadgetd's re-exec). */
        function reading(gadgets, atMs) {
                const at = Number(atMs);
                for (const g of gadgets) {
                        const p = last.get(g.name), calls = Number(g.calls_total), errors = Number(g.errors);
                        if (p && at > p.at && calls >= p.calls && errors >= p.errors)
                                rates.set(g.name, { calls: (calls - p.calls) * 1000 / (at - p.at),
                                                    errors: (errors - p.errors) * 1000 / (at - p.at) });
                        else
                                rates.delete(g.name);
                        last.set(g.name, { calls: calls, errors: errors, at: at });
                }
        }

        /* A card's line: "0.4 calls/s, 0.0 errors/s, p99 1.8 ms, memory 12.3 MiB" (dots between)
         * ("-" where a rate is not known yet). */
        function line(g) {
                const r = rates.get(g.name), dot = " \u00b7 ";
                return (r ? r.calls.toFixed(1) : "-") + " calls/s" + dot + (r ? r.errors.toFixed(1) : "-") + " errors/s" +
                        dot + "p99 " + (Number(g.p99_us) > 0 ? duration(g.p99_us) : "-") + dot + "memory " +
                        (Number(g.memory_bytes) > 0 ? size(g.memory_bytes) : "-");
        }

        function clock(ms) {
                const d = new Date(Number(ms));
                return isNaN(d) ? "" : d.toISOString().slice(11, 23);
        }

        function render(a) {
                $("activity-numbers").textContent = a.calls + (a.calls === 1 ? " call, " : " calls, ") + a.errors +
                        (a.errors === 1 ? " error" : " errors") + " \u00b7 p99 " + (a.p99_us ? duration(a.p99_us) : "-") +
                        " \u00b7 memory " + (a.memory_bytes ? size(a.memory_bytes) : "-") + " \u00b7 " + a.state;
                const events = $("events");
                events.replaceChildren();
                for (const e of a.events) {
                        /* Warnings and worse (syslog's 0 to 4) stand out. */
                        const li = h.el("li", "event stream-" + String(e.stream) + (Number(e.priority) <= 4 ? " warn" : ""));
                        li.append(h.el("span", "time", clock(e.time_ms)), h.el("span", "stream", String(e.stream)),
                                  h.el("span", "run", "run " + e.run), h.el("span", "text", String(e.text)));
                        events.append(li);
                }
                if (!a.events.length)
                        events.append(h.el("li", "hint", "No events kept."));
                const calls = $("call-log");
                calls.replaceChildren();
                for (const c of a.call_log) {
                        const li = h.el("li");
                        li.append(h.el("span", "outcome " + (c.outcome === "ok" ? "ok" : "error"), String(c.outcome)),
                                  h.el("span", "method", String(c.method)), h.el("span", "detail", duration(c.duration_us) +
                                  " \u00b7 " + Math.floor(Number(c.ago_ms) / 1000) + " s ago"));
                        /* Why the check: it goes into a URL. */
                        if (TRACE_RE.test(c.trace)) {
                                const b = h.button("trace-link", "trace " + c.trace.slice(0, 8), () => showTrace(c.trace));
                                b.dataset.trace = c.trace;
                                b.title = c.trace;
                                li.append(b);
                        }
                        calls.append(li);
                }
                if (!a.call_log.length)
                        calls.append(h.el("li", "hint", "No calls yet."));
        }

        async function load() {
                if (!shown || loading)
                        return;
                loading = true;
                const name = shown;
                try {
                        const a = await h.getJson("/api/gadgets/" + encodeURIComponent(name) + "/activity");
                        if (name === shown && a)
                                render(a);
                        else if (name === shown)
                                $("activity-numbers").textContent = "no longer loaded";
                } catch (e) {
                        if (name === shown)
                                $("activity-numbers").textContent = "gadgetd does not answer (" + e.message + ")";
                } finally {
                        loading = false;
                }
        }

        /* The spans as a tree: each under its parent, roots (no parent
         * among them) first, each level by its start. */
        function tree(spans) {
                const ids = new Set(spans.map((s) => s.span_id)), kids = new Map(), seen = new Set();
                const byStart = (x, y) => Number(x.start_us) - Number(y.start_us);
                for (const s of spans) {
                        const p = ids.has(s.parent_id) ? s.parent_id : "";
                        if (!kids.has(p))
                                kids.set(p, []);
                        kids.get(p).push(s);
                }
                function level(parent) {
                        const ul = h.el("ul", "trace-level");
                        for (const s of (kids.get(parent) || []).sort(byStart)) {
                                if (seen.has(s.span_id))
                                        continue;
                                seen.add(s.span_id);
                                const li = h.el("li", "span");
                                li.dataset.span = String(s.span_id);
                                li.append(h.el("span", "span-what", s.kind + " " + s.gadget + " " + s.name),
                                          h.el("span", "outcome " + (s.outcome === "ok" ? "ok" : "error"), String(s.outcome)),
                                          h.el("span", "detail", duration(s.duration_us) + (s.node ? " on " + s.node : "") +
                                               (s.peer ? " \u00b7 peer " + s.peer : "")));
                                if (kids.has(s.span_id))
                                        li.append(level(s.span_id));
                                ul.append(li);
                        }
                        return ul;
                }
                return level("");
        }

        async function showTrace(id) {
                const box = $("trace-box"), out = $("trace");
                box.hidden = false;
                $("trace-title").textContent = "Trace " + id;
                out.replaceChildren(h.el("p", "hint", "Loading\u2026"));
                try {
                        const r = await fetch("/api/traces/" + id, { credentials: "same-origin", cache: "no-store" });
                        const body = await r.json();
                        if (!r.ok) {
                                out.replaceChildren(h.el("p", "hint", body && body.error ? String(body.error.message) :
                                                         "HTTP " + r.status));
                                return;
                        }
                        out.replaceChildren(tree(body.spans));
                        if (body.unreached && body.unreached.length)
                                out.append(h.el("p", "hint", "Not answered by node " + body.unreached.join(", ") +
                                                ": the tree is shown without its spans."));
                } catch (e) {
                        out.replaceChildren(h.el("p", "hint", "gadgetd does not answer (" + e.message + ")"));
                }
        }

        function open(name) {
                shown = name;
                $("activity-title").textContent = name + ": activity";
                $("activity-numbers").textContent = "";
                $("events").replaceChildren();
                $("call-log").replaceChildren();
                $("trace-box").hidden = true;
                $("activity-pane").hidden = false;
                if (!timer)
                        timer = setInterval(load, POLL_MS);
                load();
        }

        function close() {
                shown = null;
                clearInterval(timer);
                timer = null;
                $("activity-pane").hidden = true;
        }

        function init(helpers) {
                h = helpers;
                $("activity-close").addEventListener("click", close);
        }

        return Object.freeze({ init: init, reading: reading, line: line, open: open, refresh: load,
                               shownName: () => shown });
})();
