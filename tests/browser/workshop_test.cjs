/* Browser tests of the client layer: Debian's chromium, driven headless by
 * playwright-core, against a real gadgetd gateway started by run.py.
 * Prints "ok - NAME" or "not ok - NAME: why" per check; exits 1 if any
 * failed, 77 if chromium cannot start (run.py turns that into a skip, or a
 * failure under CI). Runs on Node.js 18 (Debian 12's) and later.
 * Environment: GATEWAY_URL, GATEWAY_TOKEN, AUDIT_LOG, SCREENSHOT, PROFILE_DIR. */
"use strict";
const fs = require("fs");
const http = require("http");
const { chromium } = require("playwright-core");

const BASE = process.env.GATEWAY_URL;
const TOKEN = process.env.GATEWAY_TOKEN;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
let failed = 0;
/* Polls a frame's condition on a timer: polling on animation frames (the
 * default) sometimes stalls in a sandboxed frame under headless chromium. */
const POLL = { polling: 100 };

async function check(name, fn) {
        try {
                await fn();
                console.log("ok - " + name);
        } catch (e) {
                failed++;
                console.log("not ok - " + name + ": " + (e && e.stack ? e.stack : e));
        }
}

function assert(cond, msg) {
        if (!cond)
                throw new Error(msg);
}

function eq(got, want, what) {
        const g = JSON.stringify(got), w = JSON.stringify(want);
        assert(g === w, what + ": got " + g + ", want " + w);
}

/* Waits for cond() to hold, checking every 20 ms, for at most 15 s. */
async function waitFor(cond, what) {
        for (let i = 0; i < 750; i++) {
                if (await cond())
                        return;
                await new Promise((r) => setTimeout(r, 20));
        }
        throw new Error("timed out waiting for " + what);
}

/* Clicks a button with a click event on the element itself: a mouse
 * click at its place may land elsewhere when the page's layout moves as it
 * is made (the approvals panel or the gadget list re-rendered by the poll;
 * seen losing a click in CI). What is tested is what the click does. */
async function press(locator) {
        await locator.dispatchEvent("click");
}

/* A call through the API with the token, as a script outside the browser. */
async function apiCall(gadget, method, args) {
        const r = await fetch(BASE + "/api/gadgets/" + gadget + "/call/" + method, {
                method: "POST", body: JSON.stringify(args === undefined ? null : args),
                headers: { "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json" },
        });
        return { status: r.status, body: await r.json() };
}

/* A gadget's row of GET /api/gadgets, with the token. */
async function apiGadget(name) {
        const r = await fetch(BASE + "/api/gadgets", { headers: { "Authorization": "Bearer " + TOKEN } });
        return (await r.json()).gadgets.find((g) => g.name === name);
}

/* A server on another loopback port that counts requests: "anywhere else". */
function canary() {
        return new Promise((resolve) => {
                const s = http.createServer((req, res) => {
                        s.hits++;
                        res.setHeader("Access-Control-Allow-Origin", "*");
                        res.end("canary");
                });
                s.hits = 0;
                s.listen(0, "127.0.0.1", () => resolve(s));
        });
}

/* Opens a gadget's UI in the workshop page and returns its frame. */
async function openUi(page, name) {
        await press(page.locator(`li[data-name="${name}"] button.open`));
        const handle = await page.waitForSelector(`iframe[title="${name} UI"]`);
        const frame = await handle.contentFrame();
        await frame.waitForFunction(() => typeof window.gadget === "object");
        return { handle, frame };
}

/* Opens a gatekeeper's admin UI (tests/browser/hostile.html, which keeps
 * its port) beside the UI and returns its frame. */
async function openAdmin(page, name) {
        await press(page.locator(`li[data-name="${name}"] button.open-admin`));
        const handle = await page.waitForSelector(`iframe[title="${name} admin UI"]`);
        const frame = await handle.contentFrame();
        await frame.waitForFunction(() => typeof window.ui === "object" && window.grabbed !== null &&
                                    window.early !== null, null, POLL);
        return { handle, frame };
}

/* A call of asker's binding KEEP (keeper's echo, Approve=echo): it waits
 * for a person's approval. Resolves to {status, body}. */
function askerCall(args) {
        return apiCall("asker", "binding", { binding: "KEEP", op: "call", args: { method: "echo", args: args } });
}

/* p's outcome, or "pending" if it has none within ms. */
function within(p, ms) {
        return Promise.race([p, new Promise((resolve) => setTimeout(() => resolve("pending"), ms))]);
}

/* The pending approvals, with the token. */
async function apiApprovals() {
        const r = await fetch(BASE + "/api/approvals", { headers: { "Authorization": "Bearer " + TOKEN } });
        return r.status === 200 ? (await r.json()).approvals : { status: r.status };
}

async function apiDecide(id, how) {
        const r = await fetch(BASE + "/api/approvals/" + id + "/" + how, {
                method: "POST", body: "{}", headers: { "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json" },
        });
        return r.status;
}

/* The page's item for a waiting call whose arguments hold text. */
function approvalItem(page, text) {
        return page.locator("#approvals li.approval").filter({ hasText: text });
}

/* Sends a raw message on the port a hostile UI kept (tests/browser/
 * hostile.html) and waits for the answer with that id. */
function rawCall(frame, msg) {
        return frame.evaluate((m) => new Promise((resolve) => {
                const port = window.grabbed;
                port.addEventListener("message", function on(ev) {
                        if (ev.data && ev.data.id === m.id) {
                                port.removeEventListener("message", on);
                                resolve(ev.data);
                        }
                });
                port.start();
                port.postMessage(m);
        }), msg);
}

async function main() {
        const other = await canary(), beacon = await canary();
        const otherUrl = "http://127.0.0.1:" + other.address().port + "/";
        const beaconUrl = "http://127.0.0.1:" + beacon.address().port + "/";
        let context;
        try {
                context = await chromium.launchPersistentContext(process.env.PROFILE_DIR, {
                        executablePath: CHROMIUM,
                        headless: true,
                        args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync"],
                        viewport: { width: 1200, height: 760 },
                        timeout: 60000,
                });
        } catch (e) {
                console.log("chromium (" + CHROMIUM + ") cannot start: " + String(e.message).split("\n")[0]);
                other.close();
                beacon.close();
                return 77;
        }
        context.setDefaultTimeout(15000);
        const page = context.pages()[0] || await context.newPage();
        const dialogs = [];
        page.on("dialog", (d) => {
                dialogs.push(d.type());
                d.dismiss().catch(() => {});
        });
        /* The workshop page's own CSP reports (not its frames'), kept in
         * sessionStorage so they survive the page's reloads. */
        await context.addInitScript(() => {
                if (window !== window.top || location.pathname !== "/")
                        return;
                document.addEventListener("securitypolicyviolation", (e) => {
                        const v = JSON.parse(sessionStorage.getItem("violations") || "[]");
                        v.push(e.effectiveDirective + " " + e.blockedURI);
                        sessionStorage.setItem("violations", JSON.stringify(v));
                });
        });

        await check("the page refuses a browser without the token", async () => {
                const r = await page.goto(BASE + "/");
                eq(r.status(), 401, "status");
        });

        await check("GET /?token= sets an HttpOnly SameSite=Strict cookie and leaves the token out of the URL", async () => {
                const r = await page.goto(BASE + "/?token=" + TOKEN);
                eq(r.status(), 200, "status after the redirect");
                eq(page.url(), BASE + "/", "URL");
                const cookies = await context.cookies(BASE);
                const c = cookies.find((x) => x.name === "gadgetd_session");
                assert(c && c.httpOnly && c.sameSite === "Strict", "cookie: " + JSON.stringify(cookies));
                eq(await page.evaluate(() => document.cookie), "", "document.cookie of the page");
        });

        await check("an idle on-demand gadget is shown idle, and its UI's first call starts it", async () => {
                await page.waitForSelector('li[data-name="counter"] .state-idle');
                const meta = await page.locator('li[data-name="counter"]').innerText();
                assert(/starts at its next call/.test(meta) && /last activity never/.test(meta) && /on demand/.test(meta),
                       "the idle gadget's row: " + meta);
                eq((await apiGadget("counter")).state, "idle", "state before any call");
                const idle = await openUi(page, "counter");
                await idle.frame.waitForFunction(() => document.getElementById("count").textContent === "0", null, POLL);
                eq((await apiGadget("counter")).state, "ready", "state after its UI's first call");
                await page.waitForSelector('li[data-name="counter"] .state-ready');
        });

        await check("the workshop page lists the gadgets with their state", async () => {
                await page.waitForSelector('li[data-name="counter"] .state-ready');
                await page.waitForSelector('li[data-name="notes"] .state-ready');
                await page.waitForSelector('li[data-name="plain"]');
                eq(await page.locator('li[data-name="plain"] button.open').count(), 0, "Open UI for a gadget without UI");
        });

        await check("a gadget a reload kept on its previous policy says so on its card", async () => {
                const kept = page.locator('li[data-name="kept"] .kept');
                await kept.waitFor();
                const text = await kept.textContent();
                if (!/^kept on its previous policy: \/.*\/kept\.policy has 1 error \(gadgetctl status kept lists them\)$/.test(text))
                        throw new Error("card: " + JSON.stringify(text));
                eq(await page.locator('li[data-name="plain"] .kept').count(), 0, "a kept line on a gadget that runs its file's policy");
        });

        const { handle, frame } = await openUi(page, "counter");

        await check("the UI runs in <iframe sandbox=\"allow-scripts\"> and nothing more", async () => {
                eq(await handle.getAttribute("sandbox"), "allow-scripts", "sandbox attribute");
                eq(await frame.evaluate(() => self.origin), "null", "the UI's origin");
        });

        await check("a UI calls its gadget and renders the result", async () => {
                await frame.waitForFunction(() => document.getElementById("count").textContent === "0", null, POLL);
                await press(frame.locator("#inc"));
                await frame.waitForFunction(() => document.getElementById("count").textContent === "1", null, POLL);
                await press(frame.locator("#inc"));
                await frame.waitForFunction(() => document.getElementById("count").textContent === "2", null, POLL);
                eq(await apiCall("counter", "get"), { status: 200, body: 2 }, "the count kept by the gadget");
                eq(await frame.evaluate(() => gadget.call("get")), 2, "await gadget.call(\"get\")");
                await page.waitForSelector("#calls li .outcome.ok");
        });

        await check("a gadget error comes back as a rejected promise with code and status", async () => {
                const e = await frame.evaluate(() => gadget.call("nope").then(() => null, (x) => ({ m: x.message, c: x.code, s: x.status })));
                assert(e && e.c === "no_method" && e.s === 404 && e.m.includes("no method"), JSON.stringify(e));
        });

        await check("the page shows each method's signature", async () => {
                const sigs = await page.locator('li[data-name="counter"] .gadget-sig').allTextContents();
                eq(sigs, ["increment() -> int", "get() -> int"], "counter's signatures");
        });

        await check("a UI call of the wrong type is refused before it reaches the gadget", async () => {
                const before = (await apiGadget("counter")).calls;
                const e = await frame.evaluate(() => gadget.call("get", { x: 1 }).then(() => null, (x) => ({ m: x.message, c: x.code, s: x.status })));
                assert(e && e.c === "invalid" && e.s === 400 && e.m === 'get: args: unknown field "x"', JSON.stringify(e));
                eq((await apiGadget("counter")).calls, before, "calls the gadget got");
                const n = await apiCall("counter", "increment", { by: 2 });
                assert(n.status === 400 && n.body.error.message === 'increment: args: unknown field "by"',
                       "API call of the wrong type: " + JSON.stringify(n));
                eq((await apiGadget("counter")).calls, before, "calls the gadget got");
        });

        await check("inside the frame fetch() to the gateway or anywhere else fails", async () => {
                const results = await frame.evaluate(async (urls) => {
                        const out = [];
                        for (const u of urls) {
                                try {
                                        const r = await fetch(u, { credentials: "include" });
                                        out.push("fetched " + u + ": " + r.status);
                                } catch (e) {
                                        out.push("failed");
                                }
                        }
                        return out;
                }, ["/api/gadgets", BASE + "/api/gadgets", BASE + "/api/gadgets/counter/call/increment", otherUrl]);
                eq(results, ["failed", "failed", "failed", "failed"], "fetch results");
        });

        await check("inside the frame XHR, WebSocket and sendBeacon are refused", async () => {
                const results = await frame.evaluate(async (u) => {
                        /* Resolves when the CSP refuses a connection to url's
                         * origin (reports name only the origin). */
                        const refused = (url) => new Promise((resolve) => {
                                document.addEventListener("securitypolicyviolation", function on(e) {
                                        if (e.blockedURI.startsWith(url)) {
                                                document.removeEventListener("securitypolicyviolation", on);
                                                resolve("refused by " + e.effectiveDirective);
                                        }
                                });
                        });
                        const out = [];
                        for (const url of [u.relative, u.gateway, u.other]) {
                                out.push(await new Promise((resolve) => {
                                        try {
                                                const x = new XMLHttpRequest();
                                                x.open("GET", url);
                                                x.onload = () => resolve("loaded " + x.status);
                                                x.onerror = () => resolve("failed");
                                                x.send();
                                        } catch (e) {
                                                resolve("failed");
                                        }
                                }));
                        }
                        const ws = u.other.replace("http:", "ws:").replace(/\/$/, "");
                        const wsRefused = refused(ws);
                        try {
                                new WebSocket(ws);
                        } catch (e) {
                                out.push("WebSocket threw " + e.name);
                        }
                        out.push(await wsRefused);
                        const beaconRefused = refused(u.beacon.replace(/\/$/, ""));
                        navigator.sendBeacon(u.beacon, "secret");
                        out.push(await beaconRefused);
                        return out;
                }, { relative: "/api/gadgets", gateway: BASE + "/api/gadgets", other: otherUrl, beacon: beaconUrl });
                eq(results, ["failed", "failed", "failed", "refused by connect-src", "refused by connect-src"], "results");
        });

        await check("nothing from the frame reached another server", async () => {
                eq(other.hits + beacon.hits, 0, "requests the canary servers got");
        });

        await check("reading parent.document throws", async () => {
                const r = await frame.evaluate(() => {
                        try {
                                return "read " + parent.document.title;
                        } catch (e) {
                                return e.name;
                        }
                });
                eq(r, "SecurityError", "parent.document");
        });

        await check("alert() and confirm() do nothing", async () => {
                const r = await frame.evaluate(() => [alert("hi") === undefined, confirm("sure?"), prompt("name?")]);
                eq(r, [true, false, null], "return values");
                eq(dialogs, [], "dialogs shown");
        });

        await check("document.cookie and storage are unavailable", async () => {
                const r = await frame.evaluate(async () => {
                        const out = {};
                        const probe = (name, fn) => {
                                try {
                                        out[name] = "available: " + String(fn());
                                } catch (e) {
                                        out[name] = e.name;
                                }
                        };
                        probe("cookie", () => document.cookie);
                        probe("setCookie", () => { document.cookie = "a=b"; return document.cookie; });
                        probe("localStorage", () => localStorage.length);
                        probe("sessionStorage", () => sessionStorage.length);
                        out.indexedDB = await new Promise((resolve) => {
                                try {
                                        const rq = indexedDB.open("x");
                                        rq.onsuccess = () => resolve("available");
                                        rq.onerror = () => resolve("error");
                                } catch (e) {
                                        resolve(e.name);
                                }
                        });
                        out.caches = await (async () => {
                                try {
                                        await caches.keys();
                                        return "available";
                                } catch (e) {
                                        return "error";
                                }
                        })();
                        return out;
                });
                eq(r, { cookie: "SecurityError", setCookie: "SecurityError", localStorage: "SecurityError",
                        sessionStorage: "SecurityError", indexedDB: r.indexedDB === "error" ? "error" : "SecurityError",
                        caches: "error" }, "storage");
        });

        const hostile = await openUi(page, "hostile");
        await hostile.frame.waitForFunction(() => window.grabbed !== null && window.early !== null, null, POLL);

        await check("a UI gets one frozen capability, window.ui and window.gadget alike", async () => {
                const r = await hostile.frame.evaluate(() => {
                        const before = window.ui;
                        try {
                                window.ui = { name: "notes" };
                        } catch (e) {
                                /* sloppy or strict, it stays */
                        }
                        return [window.ui === window.gadget, window.ui === before, Object.isFrozen(window.ui),
                                window.ui.name, window.ui.kind];
                });
                eq(r, [true, true, true, "hostile", "ui"], "ui === gadget, unchanged, frozen, name, kind");
        });

        await check("a UI's own scripts have no WebRTC; a child frame's script still has (the limit the README names)", async () => {
                const udp = require("dgram").createSocket("udp4");
                let packets = 0;
                udp.on("message", () => packets++);
                await new Promise((resolve) => udp.bind(0, "127.0.0.1", resolve));
                const port = udp.address().port;
                try {
                        const here = await hostile.frame.evaluate((p) => window.rtcHere(p), port);
                        assert(/^TypeError: /.test(here), "RTCPeerConnection in the UI's realm: " + here);
                        eq(packets, 0, "UDP packets to the STUN port from the UI's realm");
                        /* Chromium 156 enforces no "webrtc 'block'": a child
                         * frame's own script reaches the STUN port. Should
                         * this start failing, the browser closed it too: say
                         * so in docs/gateway.md, "Known limits". */
                        eq(await hostile.frame.evaluate((p) => window.rtcChild(p), port), "rtc sent", "the child frame's report");
                        await waitFor(() => packets > 0, "the child's STUN packets");
                } finally {
                        udp.close();
                }
        });

        await check("a call made before the page hands over the port waits for it, then is answered", async () => {
                eq(await hostile.frame.evaluate(() => window.early), { v: "early" }, "the early call's outcome");
        });

        await check("a message on the port asking for another gadget's method is refused", async () => {
                const before = (await apiGadget("hostile")).calls;
                const a = await rawCall(hostile.frame, { gadgetd: 1, type: "call", id: 9001, gadget: "notes", method: "add",
                                                        json: JSON.stringify({ title: "stolen", text: "x" }) });
                assert(a.ok === false && a.error.code === "refused" && a.error.message.includes("only its own gadget"),
                       "gadget field: " + JSON.stringify(a));
                const b = await rawCall(hostile.frame, { gadgetd: 1, type: "call", id: 9002, method: "../../notes/call/add",
                                                        json: JSON.stringify({ title: "stolen", text: "x" }) });
                assert(b.ok === false && b.error.code === "bad_method", "path in the method: " + JSON.stringify(b));
                const c = await rawCall(hostile.frame, { gadgetd: 1, type: "call", id: 9003, method: "echo",
                                                        json: "x".repeat(1024 * 1024 + 1) });
                assert(c.ok === false && c.error.code === "too_large", "oversized JSON: " + JSON.stringify(c));
                const d = await rawCall(hostile.frame, { gadgetd: 1, type: "call", id: 9004, method: "echo", json: "{nope" });
                assert(d.ok === false && d.error.code === "bad_json", "bad JSON: " + JSON.stringify(d));
                const e = await rawCall(hostile.frame, { gadgetd: 1, type: "call", id: 9005, method: "echo", json: "\"raw\"" });
                eq(e, { id: 9005, ok: true, result: "raw", gadgetd: 1, type: "result" }, "a good raw call on the port");
                const audit = fs.readFileSync(process.env.AUDIT_LOG, "utf8");
                // Its lifecycle (started, ready ...) is audited too; a call is not.
                const seen = audit.split("\n").filter((l) => l).map((l) => JSON.parse(l))
                        .filter((r) => r.gadget === "notes" && r.binding !== "lifecycle");
                assert(seen.length === 0, "notes saw a call: " + JSON.stringify(seen));
                eq(await apiCall("notes", "list", { prefix: "" }), { status: 200, body: [] }, "notes written");
                eq((await apiGadget("hostile")).calls, before + 1, "calls the hostile UI's gadget got");
        });

        await check("a window-level postMessage from a UI is never a call; the same call through gadget.call is", async () => {
                const before = (await apiGadget("hostile")).calls;
                /* The page's fetch is watched while the frame posts the call
                 * to the page's window (and to its own, and top's), and
                 * listens for any answer on its window and its port. */
                await page.evaluate(() => {
                        window.__started = [];
                        window.__realFetch = window.fetch;
                        window.fetch = function (url, opts) {
                                window.__started.push(String(url));
                                return window.__realFetch.call(this, url, opts);
                        };
                });
                const answers = await hostile.frame.evaluate(() => new Promise((resolve) => {
                        const got = [];
                        const m = { gadgetd: 1, type: "call", id: 4242, method: "echo", json: "\"window\"" };
                        window.addEventListener("message", (ev) => {
                                if (ev.data && ev.data.id === 4242)
                                        got.push("window");
                        });
                        window.grabbed.addEventListener("message", (ev) => {
                                if (ev.data && ev.data.id === 4242)
                                        got.push("port");
                        });
                        parent.postMessage(m, "*");
                        top.postMessage(Object.assign({ gadget: "hostile" }, m), "*");
                        setTimeout(() => resolve(got), 1000);
                }));
                const started = await page.evaluate(() => {
                        window.fetch = window.__realFetch;
                        return window.__started.filter((u) => u.includes("/call/"));
                });
                eq(answers, [], "answers to the window-level call");
                eq(started, [], "calls the page started");
                eq((await apiGadget("hostile")).calls, before, "calls the gadget got");
                eq(await hostile.frame.evaluate(() => gadget.call("echo", "port")), "port", "gadget.call(\"echo\")");
                eq((await apiGadget("hostile")).calls, before + 1, "calls the gadget got");
        });

        await check("a frame cannot hand a sibling frame a port of its own", async () => {
                /* A second frame, like one the page makes (a sandboxed UI
                 * that waits for its port), which the page's script here
                 * hands a port after the hostile frame has flooded it with
                 * {type: "port"} messages carrying its own ports. */
                await hostile.frame.evaluate(() => { window.stopFlood = window.floodFakePorts(); });
                await page.evaluate(() => new Promise((resolve) => {
                        const f = document.createElement("iframe");
                        f.setAttribute("sandbox", "allow-scripts");
                        f.title = "victim";
                        const c = new MessageChannel();
                        window.__victim = { frame: f, port: c.port1, got: [] };
                        c.port1.onmessage = (ev) => {
                                window.__victim.got.push(ev.data.method);
                                c.port1.postMessage({ gadgetd: 1, type: "result", id: ev.data.id, ok: true, result: "the page's" });
                        };
                        f.addEventListener("load", () => setTimeout(() => {
                                f.contentWindow.postMessage({ gadgetd: 1, type: "port" }, "*", [c.port2]);
                                resolve();
                        }, 300), { once: true });
                        f.src = "/gadgets/counter/ui";
                        document.body.append(f);
                }));
                const victim = await (await page.waitForSelector('iframe[title="victim"]')).contentFrame();
                const r = await victim.evaluate(() => Promise.race([
                        gadget.call("whose", null).then((v) => ({ v }), (e) => ({ e: e.message })),
                        new Promise((resolve) => setTimeout(() => resolve("no answer"), 2000)),
                ]));
                /* A condition, not a time: the flood has posted fake ports
                 * (Chromium runs a hidden frame's timers about once a
                 * second, so a count reached in a given time says nothing). */
                await hostile.frame.waitForFunction(() => window.fakePosts() > 5, null, { timeout: 60000 });
                const posts = await hostile.frame.evaluate(() => window.stopFlood());
                const fake = await hostile.frame.evaluate(() => window.fakeGot);
                const real = await page.evaluate(() => {
                        window.__victim.frame.remove();
                        window.__victim.port.close();
                        return window.__victim.got;
                });
                assert(posts > 5, "fake ports posted: " + posts);
                eq(fake, [], "messages on the hostile frame's ports");
                eq(r, { v: "the page's" }, "the victim's call");
                assert(real.includes("whose"), "calls on the page's port: " + JSON.stringify(real));
        });

        await check("the page ignores call messages from any window but the frame's", async () => {
                /* The page's fetch is watched; a message from the page itself
                 * (not the frame) must start no call. Messages are delivered
                 * in order, so once the second one arrives the first was
                 * handled. */
                const started = await page.evaluate(() => new Promise((resolve) => {
                        const calls = [];
                        const real = window.fetch;
                        window.fetch = function (url, opts) {
                                calls.push(String(url));
                                return real.call(this, url, opts);
                        };
                        window.addEventListener("message", function on(ev) {
                                if (ev.data === "barrier") {
                                        window.removeEventListener("message", on);
                                        window.fetch = real;
                                        resolve(calls);
                                }
                        });
                        window.postMessage({ gadgetd: 1, type: "call", id: 7777, method: "increment", json: "null" }, "*");
                        window.postMessage("barrier", "*");
                }));
                eq(started, [], "calls started");
                eq(await apiCall("counter", "get"), { status: 200, body: 2 }, "the count");
        });

        await check("calls a UI makes show up in the audit log", async () => {
                const recs = fs.readFileSync(process.env.AUDIT_LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l));
                const ui = recs.filter((r) => r.gadget === "counter" && r.binding === "gateway");
                eq(ui.filter((r) => r.op === "call increment" && r.outcome === "ok").length, 2, "increments");
                assert(ui.some((r) => r.op === "call nope" && r.outcome === "error"), "the failed call: " + JSON.stringify(ui));
        });

        await check("the workshop page runs under its CSP without violations", async () => {
                eq(await page.evaluate(() => sessionStorage.getItem("violations")), null, "CSP reports of the page");
                /* The watch itself works: an image from elsewhere is reported. */
                await page.evaluate((u) => { new Image().src = u; }, otherUrl);
                await page.waitForFunction(() => (sessionStorage.getItem("violations") || "").includes("img-src"));
                await page.evaluate(() => sessionStorage.removeItem("violations"));
        });

        await check("the notes UI works too", async () => {
                const n = await openUi(page, "notes");
                await n.frame.waitForSelector("li.empty");
                await n.frame.locator("#title").fill("groceries");
                await n.frame.locator("#text").fill("milk, bread");
                await press(n.frame.locator("#save"));
                await n.frame.waitForSelector("li.sel");
                eq(await apiCall("notes", "get", { title: "groceries" }), { status: 200, body: "milk, bread" }, "note stored");
        });

        await check("the notes UI's calls of the wrong type are refused, naming the field", async () => {
                const { frame: nf } = await openUi(page, "notes");
                /* Its first list is shown: the UI's own call is done. */
                await nf.waitForSelector("#titles li");
                const before = (await apiGadget("notes")).calls;
                const cases = [[{ title: 5, text: "x" }, "add: args.title: expected string(1..200), got int"],
                               [{ text: "x" }, "add: args.title: missing required field"],
                               [{ title: "t", text: "x", z: 1 }, 'add: args: unknown field "z"'],
                               [{ title: "t", text: ["x"] }, "add: args.text: expected string, got list"]];
                for (const [args, want] of cases) {
                        const e = await nf.evaluate((a) => gadget.call("add", a).then(() => null, (x) => x.message), args);
                        eq(e, want, "add(" + JSON.stringify(args) + ")");
                }
                eq((await apiGadget("notes")).calls, before, "calls notes got");
        });

        await check("a UI's typed calls: wrong arguments and a broken result are errors, the gadget sees neither", async () => {
                const { frame: tf } = await openUi(page, "typed");
                const call = (m, a) => tf.evaluate(([m, a]) => gadget.call(m, a).then((v) => ({ v }),
                        (x) => ({ m: x.message, c: x.code, s: x.status })), [m, a]);
                const bad = await call("shape", { name: "ada", id: [1] });
                eq(bad, { m: "shape: args.id: expected int | string, got list", c: "invalid", s: 400 }, "shape, id a list");
                const lie = await call("liar", { kind: "nested" });
                eq(lie, { m: "liar: result.id: expected int, got string (the result breaks the method's declared signature)",
                          c: "failed", s: 502 }, "a broken result");
                eq(await call("seen", null), { v: 0 }, "shape calls the gadget saw");
                eq(await call("shape", { name: "ada", id: "x", tags: ["a"] }), { v: { ok: true } }, "a good call");
        });

        /* Approvals: asker's binding KEEP calls keeper's echo, and each
         * such call waits for a person (Approve=echo on the binding). */
        await check("a call waiting for approval is listed (what, from whom, the arguments as text); Approve lets it through", async () => {
                const text = "<img src=x onerror=alert(1)> approve me";
                const answer = askerCall(text);
                const li = approvalItem(page, "approve me");
                await li.waitFor();
                eq(await li.locator(".approval-what").textContent(), "keeper.echo", "what");
                const from = await li.locator(".approval-from").textContent();
                assert(from.includes("asker") && from.includes("KEEP"), "from: " + from);
                const args = await li.locator(".approval-args").textContent();
                assert(args.includes(text), "arguments shown: " + args);
                eq(await page.locator("#approvals img").count(), 0, "elements made of the arguments");
                eq(await within(answer, 300), "pending", "the call before the decision");
                await press(li.locator("button.approve"));
                eq(await within(answer, 10000), { status: 200, body: text }, "the approved call's answer");
                await li.waitFor({ state: "detached" });
                eq(dialogs, [], "dialogs shown");
        });

        await check("Deny answers the waiting caller with an error, and the gadget never sees the call", async () => {
                const before = (await apiGadget("keeper")).calls;
                const answer = askerCall("deny me");
                const li = approvalItem(page, "deny me");
                await li.waitFor();
                await press(li.locator("button.deny"));
                const r = await within(answer, 10000);
                assert(r !== "pending" && r.status !== 200 && r.body.error, "the denied call's answer: " + JSON.stringify(r));
                await li.waitFor({ state: "detached" });
                eq((await apiGadget("keeper")).calls, before, "calls keeper got");
                assert(/denied by the workshop/.test(r.body.error.message), "the denied call's error: " + JSON.stringify(r));
                /* Both decisions so far are audit records naming the page. */
                const recs = fs.readFileSync(process.env.AUDIT_LOG, "utf8").trim().split("\n").map((l) => JSON.parse(l))
                        .filter((x) => x.binding === "approval" && x.gadget === "asker");
                eq(recs.map((x) => x.outcome), ["ok", "denied"], "approval records of asker");
                assert(recs.every((x) => x.detail.includes("by the workshop (gateway, from 127.0.0.1)")),
                       "who decided: " + JSON.stringify(recs));
        });

        await check("a call from a UI that waits for approval is listed right after the call, without the 5 s poll", async () => {
                const { frame: af } = await openUi(page, "asker");
                /* The page's timers go: only the refresh after a call is left. */
                await page.evaluate(() => {
                        for (let i = 1; i < 10000; i++)
                                clearInterval(i);
                });
                await af.evaluate(() => {
                        window.answer = null;
                        gadget.call("binding", { binding: "KEEP", op: "call", args: { method: "echo", args: "from the UI" } })
                                .then((v) => { window.answer = { v: v }; }, (e) => { window.answer = { e: e.message }; });
                });
                const li = approvalItem(page, "from the UI");
                try {
                        await li.waitFor({ timeout: 2500 });
                } finally {
                        if (!(await li.count())) {
                                /* Not listed: the call must not hold asker for what follows. */
                                for (const a of await apiApprovals())
                                        await apiDecide(a.id, "deny");
                        }
                }
                await press(li.locator("button.approve"));
                await af.waitForFunction(() => window.answer !== null, null, POLL);
                eq(await af.evaluate(() => window.answer), { v: "from the UI" }, "the UI's call once approved");
                await page.waitForSelector("#calls li .outcome.ok");
        });
        /* The page's timers back. */
        await page.reload();
        await page.waitForSelector('li[data-name="asker"]');

        await check("a decision on a call no longer waiting says so", async () => {
                const answer = askerCall("twice");
                const li = approvalItem(page, "twice");
                await li.waitFor();
                /* No refresh may take the item away before the click. */
                await page.evaluate(() => {
                        for (let i = 1; i < 10000; i++)
                                clearInterval(i);
                });
                const id = Number(await li.getAttribute("data-id"));
                eq(await apiDecide(id, "deny"), 200, "the first decision, from outside");
                eq(await apiDecide(id, "deny"), 404, "a second one");
                await within(answer, 10000);
                await press(li.locator("button.approve"));
                await page.waitForSelector("#approvals-note:has-text(\"no longer waits\")");
                await li.waitFor({ state: "detached" });
        });
        await page.reload();
        await page.waitForSelector('li[data-name="asker"]');

        await check("Approve always lets this caller's later calls through without asking", async () => {
                const answer = askerCall("always 1");
                const li = approvalItem(page, "always 1");
                await li.waitFor();
                await press(li.locator("button.approve-always"));
                eq(await within(answer, 10000), { status: 200, body: "always 1" }, "the approved call");
                const second = askerCall("always 2");
                const r = await within(second, 5000);
                if (r === "pending") {
                        for (const a of await apiApprovals())
                                await apiDecide(a.id, "deny");
                }
                eq(r, { status: 200, body: "always 2" }, "the next call");
        });
        /* A page with nothing waiting. */
        await page.reload();
        await page.waitForSelector('li[data-name="keeper"]');

        /* Admin UIs: keeper is a gatekeeper (AdminMethods=say) whose admin UI
         * and UI are both the hostile page; keeper2 is another gatekeeper. */
        await check("a gatekeeper with an admin UI has Open admin, and its admin methods are shown", async () => {
                eq(await page.locator('li[data-name="keeper"] button.open-admin').count(), 1, "keeper");
                eq(await page.locator('li[data-name="keeper2"] button.open-admin').count(), 0, "keeper2 (no AdminUI=)");
                eq(await page.locator('li[data-name="counter"] button.open-admin').count(), 0, "counter (not a gatekeeper)");
                const meta = await page.locator('li[data-name="keeper"] .gatekeeper').textContent();
                assert(meta.includes("admin methods: say"), "keeper's row: " + meta);
        });

        const keeperUi = await openUi(page, "keeper");
        await keeperUi.frame.waitForFunction(() => window.grabbed !== null && window.early !== null, null, POLL);
        await keeperUi.frame.evaluate(() => { window.stopFlood = window.floodFakePorts(); });
        let admin = null;

        await check("the admin UI opens beside the UI, sandboxed, with one frozen ui capability of kind admin", async () => {
                admin = await openAdmin(page, "keeper");
                eq(await page.locator("iframe.ui-frame").count(), 2, "frames on the page");
                eq(await admin.handle.getAttribute("sandbox"), "allow-scripts", "sandbox attribute");
                const r = await admin.frame.evaluate(() => [self.origin, window.ui === window.gadget, Object.isFrozen(window.ui),
                                                             window.ui.name, window.ui.kind]);
                eq(r, ["null", true, true, "keeper", "admin"], "origin, ui === gadget, frozen, name, kind");
                const parentDoc = await admin.frame.evaluate(() => {
                        try {
                                return "read " + parent.document.title;
                        } catch (e) {
                                return e.name;
                        }
                });
                eq(parentDoc, "SecurityError", "parent.document");
                const f = await admin.frame.evaluate(() => fetch("/api/gadgets").then(() => "fetched", () => "failed"));
                eq(f, "failed", "fetch from the admin UI");
        });

        await check("the admin UI calls its gatekeeper's admin methods through its port, logged in its own list", async () => {
                const before = (await apiGadget("keeper")).calls;
                eq(await admin.frame.evaluate(() => ui.call("say", { text: "from the admin UI" })), null, "ui.call(\"say\")");
                eq((await apiGadget("keeper")).calls, before + 1, "calls keeper got");
                await page.waitForSelector("#admin-calls li .outcome.ok");
                /* Newest first: its say, then the early echo (refused). */
                eq(await page.locator("#admin-calls li .method").allTextContents(), ["say", "echo"], "the admin UI's call log");
        });

        await check("a sibling frame's fake ports did not take over the admin UI's channel", async () => {
                await keeperUi.frame.waitForFunction(() => window.fakePosts() > 5, null, { timeout: 60000 });
                const posts = await keeperUi.frame.evaluate(() => window.stopFlood());
                assert(posts > 5, "fake ports posted: " + posts);
                eq(await keeperUi.frame.evaluate(() => window.fakeGot), [], "messages on the UI frame's fake ports");
        });

        await check("the admin UI can call nothing but its admin methods", async () => {
                const before = (await apiGadget("keeper")).calls, before2 = (await apiGadget("keeper2")).calls;
                const early = await admin.frame.evaluate(() => window.early);
                assert(early.e && /admin|denied|not/i.test(early.e), "echo (a gadget method) before the port: " + JSON.stringify(early));
                const e = await admin.frame.evaluate(() => ui.call("echo", "x").then(() => null, (x) => ({ c: x.code, s: x.status })));
                eq(e, { c: "denied", s: 403 }, "a gadget method");
                const other = await rawCall(admin.frame, { gadgetd: 1, type: "call", id: 9101, gadget: "keeper2", method: "say",
                                                          json: JSON.stringify({ text: "stolen" }) });
                assert(other.ok === false && other.error.code === "refused" && other.error.message.includes("only its own gatekeeper"),
                       "another gatekeeper's admin method: " + JSON.stringify(other));
                const answers = await admin.frame.evaluate(() => new Promise((resolve) => {
                        const got = [];
                        window.addEventListener("message", (ev) => {
                                if (ev.data && ev.data.id === 9102)
                                        got.push("window");
                        });
                        window.grabbed.addEventListener("message", (ev) => {
                                if (ev.data && ev.data.id === 9102)
                                        got.push("port");
                        });
                        parent.postMessage({ gadgetd: 1, type: "call", id: 9102, method: "say", json: "{\"text\":\"w\"}" }, "*");
                        setTimeout(() => resolve(got), 1000);
                }));
                eq(answers, [], "answers to a window-level call");
                eq((await apiGadget("keeper")).calls, before, "calls keeper got");
                eq((await apiGadget("keeper2")).calls, before2, "calls keeper2 got");
                const uiLog = await page.locator("#calls li .method").allTextContents();
                assert(!uiLog.includes("say"), "the UI's call log: " + JSON.stringify(uiLog));
        });

        await check("a gadget UI cannot call its gatekeeper's admin methods, nor can the API's call route", async () => {
                const before = (await apiGadget("keeper")).calls;
                const e = await keeperUi.frame.evaluate(() => gadget.call("say", { text: "x" }).then(() => null,
                        (x) => ({ c: x.code, s: x.status })));
                eq(e, { c: "denied", s: 403 }, "a UI's call of an admin method");
                const raw = await rawCall(keeperUi.frame, { gadgetd: 1, type: "call", id: 9201, method: "say", json: "{\"text\":\"x\"}" });
                eq([raw.ok, raw.error && raw.error.code], [false, "denied"], "the same on the UI's raw port");
                const a = await apiCall("keeper", "say", { text: "x" });
                eq([a.status, a.body.error && a.body.error.code], [403, "denied"], "POST .../call/say");
                eq((await apiGadget("keeper")).calls, before, "calls keeper got");
                eq(await keeperUi.frame.evaluate(() => gadget.call("echo", "still")), "still", "its own gadget method");
        });

        await check("an admin UI that navigates its frame away is closed, the UI stays", async () => {
                await admin.frame.evaluate(() => { location.href = "about:blank"; });
                await page.waitForSelector("text=keeper admin UI navigated away from itself and was closed");
                eq(await page.locator('iframe[title="keeper admin UI"]').count(), 0, "admin frames left");
                eq(await page.locator('iframe[title="keeper UI"]').count(), 1, "UI frames left");
                eq(await keeperUi.frame.evaluate(() => gadget.call("echo", "alive")), "alive", "the UI's calls");
        });

        await check("Close removes the admin pane", async () => {
                await openAdmin(page, "keeper");
                await press(page.locator("#admin-close"));
                eq(await page.locator('iframe[title="keeper admin UI"]').count(), 0, "admin frames left");
                assert(await page.locator("#admin-pane").isHidden(), "the admin pane is hidden");
        });

        await check("the tickets example's admin UI shows and changes its gatekeeper's setting", async () => {
                await press(page.locator('li[data-name="tickets"] button.open-admin'));
                const t = await (await page.waitForSelector('iframe[title="tickets admin UI"]')).contentFrame();
                await t.waitForFunction(() => document.getElementById("created").textContent === "0", null, POLL);
                await t.locator("#newlabel").fill("from-the-browser");
                await press(t.locator("#save"));
                /* Waits for the label or an error, so a failure says which. */
                await t.waitForFunction(() => document.getElementById("label").textContent === "from-the-browser" ||
                                        document.getElementById("error").textContent !== "", null, POLL)
                        .catch(async (e) => {
                                throw new Error(e.message + "; the admin UI's call log: " +
                                                JSON.stringify(await page.locator("#admin-calls li").allTextContents()) +
                                                ", its label: " + JSON.stringify(await t.locator("#label").textContent()));
                        });
                const calls = await page.locator("#admin-calls li").allTextContents();
                eq(await t.locator("#error").textContent(), "", "the admin UI's error line (its call log: " +
                   JSON.stringify(calls) + ")");
                eq(await t.locator("#label").textContent(), "from-the-browser", "the label shown");
                eq(await page.locator("#admin-calls li .method").allTextContents(), ["overview", "set_label", "overview"], "the admin UI's call log");
                const a = await apiCall("tickets", "set_label", { label: "x" });
                eq([a.status, a.body.error && a.body.error.code], [403, "denied"], "set_label through the call route");
                await press(page.locator("#admin-close"));
        });

        await check("the tickets gatekeeper's credential is nowhere in the workshop", async () => {
                const tok = process.env.TICKETS_TOKEN;
                assert(tok && tok.length >= 32, "the test's token");
                await press(page.locator('li[data-name="tickets"] button.open-admin'));
                const t = await (await page.waitForSelector('iframe[title="tickets admin UI"]')).contentFrame();
                await t.waitForFunction(() => document.getElementById("label").textContent !== "", null, POLL);
                const texts = [await page.content(), await t.content()];
                for (const u of ["/api/gadgets", "/api/approvals", "/gadgets/tickets/admin", "/"])
                        texts.push(await page.evaluate(async (x) => (await fetch(x, { cache: "no-store" })).text(), u));
                /* The texts looked in are the real ones: they name the gatekeeper and its file. */
                assert(texts[1].includes("set_label") && texts[2].includes('"name":"tickets"'), "the texts read");
                for (const x of texts)
                        assert(!x.includes(tok) && !x.includes(tok.slice(0, 16)), "the token shows in the workshop");
                await press(page.locator("#admin-close"));
        });

        /* The numbers of GET /api/gadgets/NAME/activity, with the token. */
        async function apiActivity(name) {
                const r = await fetch(BASE + "/api/gadgets/" + name + "/activity", { headers: { "Authorization": "Bearer " + TOKEN } });
                return r.json();
        }

        await check("a gadget's card and activity show the calls and errors the test made, its p99 and memory", async () => {
                const before = await apiActivity("plain");
                for (let i = 0; i < 3; i++)
                        eq((await apiCall("plain", "echo", i)).status, 200, "echo");
                eq((await apiCall("plain", "log", { level: 99 })).status, 400, "a call the gadget refuses");
                eq((await apiCall("plain", "nosuch")).status, 404, "a call of a method it lacks");
                await press(page.locator('li[data-name="plain"] button.activity'));
                const want = (before.calls + 5) + " calls, " + (before.errors + 2) + " errors";
                await page.waitForFunction((w) => document.getElementById("activity-numbers").textContent.startsWith(w), want, POLL);
                eq(await page.locator("#activity-title").textContent(), "plain: activity", "the pane's title");
                const numbers = await page.locator("#activity-numbers").textContent();
                assert(/ p99 \d+(\.\d)? (us|ms) /.test(numbers) && /memory \d+(\.\d)? (KiB|MiB)/.test(numbers),
                       "p99 and memory in the pane: " + numbers);
                const log = await page.locator("#call-log li").allInnerTexts();
                assert(/^no_method\s+_other/.test(log[0]) && /^invalid\s+log/.test(log[1]) && /^ok\s+echo/.test(log[2]),
                       "the call log, newest first: " + JSON.stringify(log.slice(0, 3)));
                const card = page.locator('li[data-name="plain"] .gadget-stats');
                await page.waitForFunction(() => /p99 \d/.test(document.querySelector('li[data-name="plain"] .gadget-stats').textContent),
                                           null, POLL);
                assert(/calls\/s .* errors\/s .* p99 \d+(\.\d)? (us|ms) .* memory \d+(\.\d)? (KiB|MiB)$/.test(await card.textContent()),
                       "the card's line: " + await card.textContent());
        });

        await check("a gadget's card counts the system calls its filter refused, and its activity names them", async () => {
                eq(await apiCall("plain", "deny", { call: "mount", n: 2 }), { status: 200, body: { errno: "EPERM", times: 2 } },
                   "two refused mounts");
                await page.waitForFunction(() => /^2 system calls refused/.test((document.querySelector('li[data-name="plain"] .denied') || {}).textContent || ""),
                                           null, POLL);
                await press(page.locator('li[data-name="plain"] button.activity'));
                await page.waitForFunction(() => /refused system calls: mount EPERM x[12] \/srv\/outside/.test(document.getElementById("events").textContent),
                                           null, POLL);
        });

        await check("a trace id in the call log shows the trace's tree, each span under its parent", async () => {
                const r = await apiCall("chain", "binding", { binding: "NEXT", op: "call", args: { method: "echo", args: "via" } });
                eq(r, { status: 200, body: "via" }, "chain's call of plain");
                await press(page.locator('li[data-name="chain"] button.activity'));
                const link = page.locator("#call-log li:first-child button.trace-link");
                await link.waitFor();
                const id = await link.getAttribute("data-trace");
                assert(/^[0-9a-f]{32}$/.test(id), "trace id: " + id);
                await press(link);
                await page.waitForSelector("#trace li.span");
                eq(await page.locator("#trace-title").textContent(), "Trace " + id, "the trace's title");
                const what = (sel) => page.locator(sel).allTextContents();
                eq(await what("#trace > ul > li > .span-what"), ["call chain binding"], "the root span");
                eq(await what("#trace > ul > li > ul > li > .span-what"), ["binding chain NEXT.call"], "its binding call");
                eq(await what("#trace > ul > li > ul > li > ul > li > .span-what"), ["call plain echo"], "the call it made");
                eq(await page.locator("#trace li.span").count(), 3, "spans in all");
        });

        await check("a gadget's restart shows in its recent events", async () => {
                await press(page.locator('li[data-name="chain"] button.activity'));
                await page.waitForSelector("#call-log li");
                const runs = (await apiActivity("chain")).events.filter((e) => e.stream === "gadgetd").map((e) => e.run);
                eq(Math.max(...runs), 1, "chain's run before its crash");
                eq((await apiCall("chain", "crash")).status, 502, "the crashing call");
                /* Its second run ready (as the API tells), then the pane read
                 * again at once rather than at its next 2 s. */
                await waitFor(async () => (await apiActivity("chain")).events.some((e) => e.run === 2 && e.text === "gadgetd: ready"),
                              "chain's second run ready");
                await press(page.locator('li[data-name="chain"] button.activity'));
                await page.waitForFunction(() => [...document.querySelectorAll("#events li.stream-gadgetd")].some(
                        (li) => li.querySelector(".run").textContent === "run 2" && li.querySelector(".text").textContent === "gadgetd: ready"),
                                           null, POLL);
                const texts = await page.locator("#events li.stream-gadgetd .text").allTextContents();
                assert(texts.some((t) => /^gadgetd: killed by SIGSEGV \(SI_TKILL\) in /.test(t)) && texts.some((t) => /^gadgetd: restarting/.test(t)),
                       "its crash and restart among its events: " + JSON.stringify(texts));
                const warns = await page.locator("#events li.warn .text").allTextContents();
                assert(warns.length === 1 && /^gadgetd: killed by SIGSEGV \(SI_TKILL\) in /.test(warns[0]),
                       "the one warning among them: " + JSON.stringify(warns));
        });

        await check("a screenshot of the workshop page is produced", async () => {
                const c = await openUi(page, "counter");
                await c.frame.waitForFunction(() => document.getElementById("count").textContent === "2", null, POLL);
                await press(c.frame.locator("#inc"));
                await c.frame.waitForFunction(() => document.getElementById("count").textContent === "3", null, POLL);
                await page.waitForSelector("#calls li:nth-child(2)");
                await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
                const png = fs.readFileSync(process.env.SCREENSHOT);
                assert(png.length > 10000 && png.subarray(1, 4).toString() === "PNG", "screenshot: " + png.length + " bytes");
                console.log("# screenshot: " + process.env.SCREENSHOT);
        });

        await check("a UI that navigates its frame away is closed", async () => {
                const c = await openUi(page, "counter");
                await c.frame.waitForFunction(() => document.getElementById("count").textContent === "3", null, POLL);
                await c.frame.evaluate(() => { location.href = "about:blank"; });
                await page.waitForSelector("text=navigated away from itself and was closed");
                eq(await page.locator("iframe").count(), 0, "frames left");
        });

        await check("a direct load of the UI URL carries the CSP sandbox header", async () => {
                const r = await page.goto(BASE + "/gadgets/counter/ui");
                eq(r.status(), 200, "status");
                const csp = r.headers()["content-security-policy"] || "";
                assert(csp.startsWith("sandbox allow-scripts;") && csp.includes("default-src 'none'"), "CSP: " + csp);
                eq(await page.evaluate(() => self.origin), "null", "origin of the directly loaded UI");
                const cookie = await page.evaluate(() => { try { return document.cookie; } catch (e) { return e.name; } });
                eq(cookie, "SecurityError", "document.cookie of the directly loaded UI");
                const f = await page.evaluate(() => fetch("/api/gadgets").then(() => "fetched", () => "failed"));
                eq(f, "failed", "fetch from the directly loaded UI");
        });

        await context.close();
        other.close();
        beacon.close();
        console.log(failed ? failed + " browser check(s) failed" : "all browser checks passed");
        return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
        console.log("not ok - the browser test crashed: " + (e && e.stack ? e.stack : e));
        process.exit(1);
});
