/* gateway_page: the workshop page and each gadget's UI, with the content
 * security policies that confine them. */
#include "gateway_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <event2/buffer.h>

#include "contract.h"
#include "core/core.h"
#include "system/log.h"
#include "policy.h"

/* Why: no camera, microphone, location, USB and the like for the page or
 * any frame in it. */
#define PERMISSIONS "camera=(), microphone=(), geolocation=(), usb=(), serial=(), hid=(), " \
                    "bluetooth=(), payment=(), display-capture=(), clipboard-read=()"

/* The UI's policy. Why each part: "sandbox allow-scripts" gives the
 * document an opaque origin even when it is opened directly (no cookies,
 * storage, popups, modals, forms or top navigation); default-src 'none'
 * allows no connection (fetch, XHR, WebSocket, EventSource, beacons),
 * no frames, workers or external scripts, styles, images or fonts; inline
 * script and style are the UI itself; data: images only; no <base>, no
 * form targets; only this gateway's pages may frame it; no WebRTC where
 * a browser enforces the directive (Chromium 156 and Firefox do not: the
 * stub takes the constructors out of the frame's realm, see stub.js). */
#define UI_CSP "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; " \
               "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; " \
               "frame-ancestors 'self'; webrtc 'block'"

void gateway_page_workshop(struct gateway *g, struct evhttp_request *req)
{
        char nonce[40], csp[400];
        struct evbuffer *b = evbuffer_new();
        if (!b || gateway_nonce(nonce, sizeof nonce) < 0) {
                gateway_send_error(req, 500, "internal", "cannot build the page");
                if (b)
                        evbuffer_free(b);
                return;
        }
        /* Why: scripts and styles only with this response's nonce (no
         * injected markup can run), connections and frames only to this
         * gateway, never framed itself, and Trusted Types so no script
         * can turn text into HTML. */
        snprintf(csp, sizeof csp,
                 "default-src 'none'; script-src 'nonce-%s'; style-src 'nonce-%s'; connect-src 'self'; "
                 "frame-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
                 "frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'",
                 nonce, nonce);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Security-Policy", csp);
        evhttp_add_header(h, "X-Frame-Options", "DENY");
        evhttp_add_header(h, "Cross-Origin-Opener-Policy", "same-origin");
        evhttp_add_header(h, "Permissions-Policy", PERMISSIONS);
        evbuffer_add_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                            "<title>gadgetd workshop</title>\n<style nonce=\"%s\">\n", nonce);
        evbuffer_add(b, gateway_asset_workshop_css, strlen(gateway_asset_workshop_css));
        evbuffer_add_printf(b, "</style>\n</head>\n<body data-max-json=\"%d\">\n", GATEWAY_MAX_BODY);
        evbuffer_add(b, gateway_asset_workshop_html, strlen(gateway_asset_workshop_html));
        evbuffer_add_printf(b, "<script nonce=\"%s\">\n", nonce);
        evbuffer_add(b, gateway_asset_activity_js, strlen(gateway_asset_activity_js));
        evbuffer_add_printf(b, "</script>\n<script nonce=\"%s\">\n", nonce);
        evbuffer_add(b, gateway_asset_workshop_js, strlen(gateway_asset_workshop_js));
        evbuffer_add_printf(b, "</script>\n</body>\n</html>\n");
        gateway_send(req, 200, "text/html; charset=utf-8", b);
        evbuffer_free(b);
}

/* Reads the UI file into a new buffer. Why the checks again (the policy
 * checked them at load): the file may have changed since; a FIFO put in
 * its place must not block gadgetd (O_NONBLOCK, then regular only). */
static int read_ui(const char *path, char **out, size_t *out_len)
{
        struct stat st;
        int e = 0;
        char *buf = NULL;
        size_t n = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                e = -errno;
                goto out;
        }
        if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH) || st.st_size > POLICY_UI_MAX) {
                e = -EPERM;
                goto out;
        }
        if (!(buf = malloc((size_t)POLICY_UI_MAX + 1))) {
                e = -ENOMEM;
                goto out;
        }
        for (;;) {
                ssize_t r = read(fd, buf + n, (size_t)POLICY_UI_MAX + 1 - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        e = -errno;
                        goto out;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
                if (n > POLICY_UI_MAX) {
                        e = -EFBIG;
                        goto out;
                }
        }
        *out = buf;
        *out_len = n;
        buf = NULL;
out:
        free(buf);
        close(fd);
        return e;
}

/* Where the stub goes: after a UTF-8 BOM and a doctype, if there are. */
static size_t stub_at(const char *html, size_t len)
{
        size_t i = 0;
        if (len >= 3 && memcmp(html, "\xef\xbb\xbf", 3) == 0)
                i = 3;
        size_t j = i;
        while (j < len && strchr(" \t\r\n", html[j]))
                j++;
        if (len - j >= 9 && strncasecmp(html + j, "<!doctype", 9) == 0) {
                const char *gt = memchr(html + j, '>', len - j);
                if (gt)
                        return (size_t)(gt - html) + 1;
        }
        return i;
}

/* Why the admin UI is served like a UI, with the same CSP and stub: it is
 * as untrusted; only the stub's kind differs, and the gateway (not the
 * frame) decides which methods each kind reaches. */
void gateway_page_ui(struct gateway *g, struct evhttp_request *req, const char *name, bool admin)
{
        struct unit *u = gadget_name_ok(name) ? core_find(g->core, name) : NULL;
        const char *file = u ? admin ? unit_policy(u)->admin_ui : unit_policy(u)->ui : NULL;
        const char *key = admin ? "AdminUI" : "UI";
        char *html = NULL;
        size_t len = 0;
        int e;

        if (!file) {
                gateway_send_error(req, 404, "not_found", "no gadget named \"%.64s\" with %s", name,
                                   admin ? "an admin UI" : "a UI");
                return;
        }
        if ((e = read_ui(file, &html, &len)) < 0) {
                log_msg(L_ERR, name, "gateway: cannot serve %s=%s: %s", key, file,
                        e == -EPERM ? "not a regular file readable by every user, of at most 1M" :
                        strerror(-e));
                gateway_send_error(req, 500, "internal", "the UI of \"%s\" cannot be read", name);
                return;
        }
        struct evbuffer *b = evbuffer_new();
        if (!b) {
                free(html);
                gateway_send_error(req, 500, "internal", "out of memory");
                return;
        }
        size_t at = stub_at(html, len);
        evbuffer_add(b, html, at);
        /* The name is a policy name ([a-z0-9_-]): safe inside a JS string. */
        evbuffer_add_printf(b, "<script>\n");
        evbuffer_add(b, gateway_asset_stub_js, strlen(gateway_asset_stub_js));
        evbuffer_add_printf(b, "(\"%s\", %d, \"%s\");\n</script>\n", name, GATEWAY_MAX_BODY, admin ? "admin" : "ui");
        evbuffer_add(b, html + at, len - at);
        free(html);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Security-Policy", UI_CSP);
        evhttp_add_header(h, "X-Frame-Options", "SAMEORIGIN");
        evhttp_add_header(h, "Permissions-Policy", PERMISSIONS);
        gateway_send(req, 200, "text/html; charset=utf-8", b);
        evbuffer_free(b);
}
