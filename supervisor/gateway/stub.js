/* The `gadget` object of a gadget's UI, injected by gadgetd at the top of
 * the UI's HTML as (STUB)("NAME", MAX_JSON). It is a convenience, not a
 * guard: the UI could post messages itself, and the workshop page checks
 * every message whatever sent it.
 *
 * Protocol (postMessage, structured data):
 *   UI -> page  {gadgetd: 1, type: "call", id: N, method: "M", json: "ARGS"}
 *   page -> UI  {gadgetd: 1, type: "result", id: N, ok: true, result: VALUE}
 *               {gadgetd: 1, type: "result", id: N, ok: false,
 *                error: {code: "C", message: "...", status: HTTP}}
 * The UI's origin is opaque ("null"), so it posts with targetOrigin "*";
 * its parent is the workshop page, the only page allowed to frame it. */
(function (name, maxJson) {
        "use strict";
        const parentWindow = window.parent;
        const pending = new Map();
        let nextId = 1;

        window.addEventListener("message", function (ev) {
                if (ev.source !== parentWindow)
                        return;
                const m = ev.data;
                if (!m || typeof m !== "object" || m.gadgetd !== 1 || m.type !== "result")
                        return;
                const p = pending.get(m.id);
                if (!p)
                        return;
                pending.delete(m.id);
                if (m.ok) {
                        p.resolve(m.result);
                        return;
                }
                const e = new Error(m.error && typeof m.error.message === "string" ?
                                    m.error.message : "the call failed");
                e.code = m.error && m.error.code;
                e.status = m.error && m.error.status;
                p.reject(e);
        });

        function call(method, args) {
                return new Promise(function (resolve, reject) {
                        let json;
                        try {
                                json = JSON.stringify(args === undefined ? null : args);
                        } catch (e) {
                                reject(new TypeError("gadget.call: the arguments are not JSON: " + e.message));
                                return;
                        }
                        if (json.length > maxJson) {
                                reject(new RangeError("gadget.call: the arguments are larger than " + maxJson + " bytes"));
                                return;
                        }
                        const id = nextId++;
                        pending.set(id, { resolve: resolve, reject: reject });
                        parentWindow.postMessage({ gadgetd: 1, type: "call", id: id, method: String(method), json: json }, "*");
                });
        }

        Object.defineProperty(window, "gadget", {
                value: Object.freeze({ name: name, call: call }),
                enumerable: true,
        });
})
