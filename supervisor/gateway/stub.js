/* The capability of a sandboxed frame on the workshop page, injected by
 * gadgetd at the top of the frame's HTML as (STUB)("NAME", MAX_JSON, "KIND"):
 * KIND "ui" for a gadget's UI, "admin" for a gatekeeper's admin UI. It is
 * one frozen object, window.ui and window.gadget alike:
 *   {name, kind, call(method, args) -> Promise}
 * It is a convenience, not a guard: the frame's own code can do all it does,
 * and the workshop page checks every message whatever sent it.
 *
 * Protocol. The page makes a MessageChannel per frame and, after the
 * frame's first load, transfers one end to it with a window message:
 *   page -> frame window  {gadgetd: 1, type: "port"}, ports: [PORT]
 * The stub takes exactly one such message whose source is window.parent
 * (never a sibling frame's) and then ignores every window message. All
 * else goes over PORT, never through window.postMessage:
 *   frame -> page  {gadgetd: 1, type: "call", id: N, method: "M", json: "ARGS"}
 *   page -> frame  {gadgetd: 1, type: "result", id: N, ok: true, result: VALUE}
 *                  {gadgetd: 1, type: "result", id: N, ok: false,
 *                   error: {code: "C", message: "...", status: HTTP}}
 * A "ui" frame's port calls only its own gadget's methods, an "admin"
 * frame's only its gatekeeper's admin methods: the page decides by which
 * port a call came, whatever the message says. Calls made before the port
 * arrives wait in the stub, at most MAX_QUEUED of them. */
(function (name, maxJson, kind) {
        "use strict";
        const MAX_QUEUED = 64;
        const parentWindow = window.parent;
        const pending = new Map();
        const queued = [];
        let nextId = 1;
        let port = null;

        /* Why: CSP governs no WebRTC in Chromium or Firefox (the UI's
         * "webrtc 'block'" is the spec's answer, which they ignore), and a
         * peer connection sends UDP (STUN, ICE, data channels) wherever its
         * script says. The frame's own realm loses the constructors before
         * any UI script runs; a nested browsing context of a sandboxed frame
         * has an origin of its own, so this realm cannot borrow its
         * constructors. What remains (docs/gateway.md, "Known limits"): a child
         * frame running a script of its own, such as an iframe's srcdoc. */
        for (const k of ["RTCPeerConnection", "webkitRTCPeerConnection"])
                Object.defineProperty(window, k, { value: undefined, writable: false, configurable: false });

        function onResult(ev) {
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
        }

        /* Why ev.source: a sibling frame can post to this window too, and
         * its origin is "null" like the page's frames; only the parent, the
         * one page allowed to frame this document, hands out the port. */
        function onWindowMessage(ev) {
                const m = ev.data;
                if (port || ev.source !== parentWindow || !ev.ports || ev.ports.length !== 1 ||
                    !m || typeof m !== "object" || m.gadgetd !== 1 || m.type !== "port")
                        return;
                window.removeEventListener("message", onWindowMessage);
                port = ev.ports[0];
                port.onmessage = onResult;
                for (const msg of queued.splice(0))
                        port.postMessage(msg);
        }
        window.addEventListener("message", onWindowMessage);

        function call(method, args) {
                return new Promise(function (resolve, reject) {
                        let json;
                        try {
                                json = JSON.stringify(args === undefined ? null : args);
                        } catch (e) {
                                reject(new TypeError(kind + ".call: the arguments are not JSON: " + e.message));
                                return;
                        }
                        if (json.length > maxJson) {
                                reject(new RangeError(kind + ".call: the arguments are larger than " + maxJson + " bytes"));
                                return;
                        }
                        if (!port && queued.length >= MAX_QUEUED) {
                                const e = new Error(kind + ".call: more than " + MAX_QUEUED + " calls wait for the page");
                                e.code = "busy";
                                e.status = 0;
                                reject(e);
                                return;
                        }
                        const id = nextId++;
                        const msg = { gadgetd: 1, type: "call", id: id, method: String(method), json: json };
                        pending.set(id, { resolve: resolve, reject: reject });
                        if (port)
                                port.postMessage(msg);
                        else
                                queued.push(msg);
                });
        }

        const cap = Object.freeze({ name: name, kind: kind, call: call });
        Object.defineProperty(window, "ui", { value: cap, enumerable: true });
        Object.defineProperty(window, "gadget", { value: cap, enumerable: true });
})
