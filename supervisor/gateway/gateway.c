/* gateway: listening, the token, the checks every request passes, routing
 * and the headers every response carries. */
#include "gateway_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include "core/core.h"
#include "system/listener.h"
#include "system/log.h"
#include "system/monotime.h"

#define HEADERS_MAX (16 * 1024)
#define IO_TIMEOUT_S 60

/* One line now, or counted into the window's summary line. */
void gateway_refusal(struct gateway *g, enum gateway_refusal k, const char *fmt, ...)
{
        static const char *const what[GW_REF_N] = {
                [GW_REF_TOKEN] = "gateway requests refused without a valid token",
                [GW_REF_FOREIGN] = "gateway requests refused from another origin or host",
        };
        va_list ap;
        va_start(ap, fmt);
        ratelog_vwarn(&g->rl[k], monotime_ms(), NULL, what[k], fmt, ap);
        va_end(ap);
}

/* The connections' sweep: the windows of the refusals above that closed. */
static void refusals_flush(void *arg)
{
        for (int k = 0; k < GW_REF_N; k++)
                gateway_refusal(arg, (enum gateway_refusal)k, NULL);
}

void gateway_reexec_hold(struct gateway *g, bool hold)
{
        httpconn_hold(&g->conns, hold);
}

int gateway_reexec_quiet(const struct gateway *g, char *why, size_t len)
{
        return httpconn_quiet(&g->conns, why, len);
}

void gateway_reexec_handoff(const struct gateway *g, struct gateway_handoff *h)
{
        h->fd = g->fd;
        memcpy(h->session, g->session, sizeof h->session);
}

void gateway_stats(const struct gateway *g, uint64_t *connections, uint64_t *full, uint64_t *deadline)
{
        *connections = g->conns.n_conns;
        *full = g->conns.refused[HTTPCONN_FULL];
        *deadline = g->conns.refused[HTTPCONN_DEADLINE];
}

int gateway_parse_listen(const char *s, struct sockaddr_storage *sa, socklen_t *len, char *why,
                         size_t whylen)
{
        int e = listener_parse_loopback(s, sa, len);
        if (e == -EADDRNOTAVAIL)
                /* Why loopback only: plain HTTP carries the token in clear. */
                snprintf(why, whylen, "Listen=\"%.64s\": the gateway speaks plain HTTP and listens on "
                         "loopback addresses only (127.0.0.0/8 or [::1]); put a TLS proxy in front for "
                         "other clients", s);
        else if (e < 0)
                snprintf(why, whylen, "Listen=\"%.64s\" is not ADDRESS:PORT with a numeric address "
                         "(for example 127.0.0.1:8080 or [::1]:8080)", s);
        return e < 0 ? -EINVAL : 0;
}

static void hex(const unsigned char *in, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = '\0';
}

static int random_hex(char *out, size_t bytes)
{
        unsigned char buf[GATEWAY_SESSION_BYTES];
        if (bytes > sizeof buf)
                return -EINVAL;
        if (getrandom(buf, bytes, 0) != (ssize_t)bytes)
                return -EIO;
        hex(buf, bytes, out);
        explicit_bzero(buf, sizeof buf);
        return 0;
}

int gateway_nonce(char *buf, size_t len)
{
        return len < 33 ? -EINVAL : random_hex(buf, 16);
}

/* Headers on every response. Why: nosniff keeps a browser from reading
 * JSON or text as HTML; no-referrer keeps URLs (and a ?token=) out of
 * Referer; no-store keeps answers out of caches; CORP stops other origins
 * from embedding any response. */
void gateway_send(struct evhttp_request *req, int status, const char *content_type, struct evbuffer *body)
{
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
        evhttp_add_header(h, "Referrer-Policy", "no-referrer");
        evhttp_add_header(h, "Cache-Control", "no-store");
        evhttp_add_header(h, "Cross-Origin-Resource-Policy", "same-origin");
        if (!evhttp_find_header(h, "Content-Security-Policy")) {
                /* Anything not HTML is data: no scripts, no framing. */
                evhttp_add_header(h, "Content-Security-Policy",
                                  "default-src 'none'; frame-ancestors 'none'; sandbox");
                evhttp_add_header(h, "X-Frame-Options", "DENY");
        }
        if (content_type)
                evhttp_add_header(h, "Content-Type", content_type);
        evhttp_send_reply(req, status, NULL, body);
}

void gateway_send_error(struct evhttp_request *req, int status, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        json_t *o = json_pack("{s:{s:s, s:s%}}", "error", "code", code, "message", msg, strlen(msg));
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        struct evbuffer *b = evbuffer_new();
        if (b)
                evbuffer_add_printf(b, "%s\n", text ? text : "{\"error\":{\"code\":\"internal\"}}");
        gateway_send(req, status, "application/json", b);
        if (b)
                evbuffer_free(b);
        free(text);
        json_decref(o);
}

static const char *header(struct evhttp_request *req, const char *name)
{
        return evhttp_find_header(evhttp_request_get_input_headers(req), name);
}

/* Why: a browser names the page that made a request. Another origin (a
 * page on another port of this host, or a gadget's sandboxed UI, whose
 * origin is "null") is refused, so nothing but the workshop page can use
 * the browser's cookie; a Host other than ours (DNS rebinding) too. */
static const char *foreign(struct gateway *g, struct evhttp_request *req)
{
        const char *host = header(req, "Host"), *origin = header(req, "Origin");
        const char *site = header(req, "Sec-Fetch-Site");
        if (!host || (strcmp(host, g->hosts[0]) != 0 && strcmp(host, g->hosts[1]) != 0))
                return "unexpected Host header";
        if (origin && (strncmp(origin, "http://", 7) != 0 || strcmp(origin + 7, host) != 0))
                return "request from another origin";
        if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
                return "request from another site";
        return NULL;
}

/* The session cookie's value in a Cookie header, or NULL. */
static const char *cookie_value(const char *cookies, size_t *len)
{
        const size_t nlen = strlen(GATEWAY_COOKIE);
        for (const char *p = cookies; p && *p;) {
                p += strspn(p, " ;");
                size_t n = strcspn(p, ";");
                if (n > nlen && strncmp(p, GATEWAY_COOKIE, nlen) == 0 && p[nlen] == '=') {
                        *len = n - nlen - 1;
                        return p + nlen + 1;
                }
                p += n;
        }
        return NULL;
}

static bool authorized(struct gateway *g, struct evhttp_request *req)
{
        const char *auth = header(req, "Authorization"), *cookies = header(req, "Cookie"), *v;
        size_t len;
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
                v = auth + 7 + strspn(auth + 7, " ");
                return httpconn_token_equal(g->token, g->token_len, v, strlen(v));
        }
        if (cookies && (v = cookie_value(cookies, &len)))
                return httpconn_token_equal(g->session, strlen(g->session), v, len);
        return false;
}

/* GET /?token=TOKEN: sets the session cookie and sends the browser on to
 * "/", so the token leaves the address bar and the history. Why the
 * cookie's flags: HttpOnly (no script reads it), SameSite=Strict (no
 * other site's page makes the browser send it), Path=/. False if the
 * query holds no token. */
static bool login(struct gateway *g, struct evhttp_request *req, const char *query)
{
        struct evkeyvalq q = { 0 };
        const char *tok = NULL;
        bool ok;
        if (evhttp_parse_query_str(query, &q) == 0)
                tok = evhttp_find_header(&q, "token");
        if (!tok) {
                evhttp_clear_headers(&q);
                return false;
        }
        ok = httpconn_token_equal(g->token, g->token_len, tok, strlen(tok));
        evhttp_clear_headers(&q);
        if (!ok) {
                gateway_refusal(g, GW_REF_TOKEN, "gateway: refused a login with a wrong token");
                gateway_send_error(req, 401, "unauthorized", "wrong token");
                return true;
        }
        char cookie[160];
        snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict", GATEWAY_COOKIE,
                 g->session);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Set-Cookie", cookie);
        evhttp_add_header(h, "Location", "/");
        httpconn_authed(&g->conns, req);
        gateway_send(req, 303, NULL, NULL);
        return true;
}

/* Splits "a/b/c" into at most max segments (NUL-terminated in buf);
 * max + 1 if there are more, 0 if it does not fit. "" is one empty segment. */
static size_t segments(const char *path, char *buf, size_t len, char **seg, size_t max)
{
        size_t n = 0;
        if (strlen(path) >= len)
                return 0;
        strcpy(buf, path);
        for (char *p = buf;; n++) {
                if (n == max)
                        return max + 1;
                seg[n] = p;
                p = strchr(p, '/');
                if (!p)
                        return n + 1;
                *p++ = '\0';
        }
}

/* The routes: a path pattern ("*" matches one segment), the method, and
 * the handler, called with the matched segments. */
enum route_kind {
        R_PAGE, R_LIST, R_CALL, R_UI, R_ADMIN_CALL, R_ADMIN_UI, R_APPROVALS, R_APPROVE, R_DENY, R_ACTIVITY, R_TRACE
};
static const struct {
        const char *pattern;
        enum evhttp_cmd_type cmd;
        enum route_kind kind;
} routes[] = {
        { "", EVHTTP_REQ_GET, R_PAGE },
        { "api/gadgets", EVHTTP_REQ_GET, R_LIST },
        { "api/gadgets/*/call/*", EVHTTP_REQ_POST, R_CALL },
        { "gadgets/*/ui", EVHTTP_REQ_GET, R_UI },
        { "api/gadgets/*/admin/*", EVHTTP_REQ_POST, R_ADMIN_CALL },
        { "gadgets/*/admin", EVHTTP_REQ_GET, R_ADMIN_UI },
        { "api/approvals", EVHTTP_REQ_GET, R_APPROVALS },
        { "api/approvals/*/approve", EVHTTP_REQ_POST, R_APPROVE },
        { "api/approvals/*/deny", EVHTTP_REQ_POST, R_DENY },
        { "api/gadgets/*/activity", EVHTTP_REQ_GET, R_ACTIVITY },
        { "api/traces/*", EVHTTP_REQ_GET, R_TRACE },
};

/* Whether the path's segments (s, n) match pattern; wild gets the "*" ones. */
static bool match(const char *pattern, char **s, size_t n, char **wild)
{
        char buf[64], *p[5];
        size_t m = segments(pattern, buf, sizeof buf, p, 5), w = 0;
        if (m != n)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(p[i], "*") == 0)
                        wild[w++] = s[i];
                else if (strcmp(p[i], s[i]) != 0)
                        return false;
        }
        return true;
}

static void route(struct gateway *g, struct evhttp_request *req, const char *path)
{
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        char buf[512], *s[5], *w[2] = { NULL, NULL };
        size_t n = segments(path + 1, buf, sizeof buf, s, 5);

        for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
                if (!match(routes[i].pattern, s, n, w))
                        continue;
                if (cmd != routes[i].cmd) {
                        const char *allow = routes[i].cmd == EVHTTP_REQ_GET ? "GET" : "POST";
                        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
                        gateway_send_error(req, 405, "method_not_allowed", "use %s here", allow);
                        return;
                }
                switch (routes[i].kind) {
                case R_PAGE: gateway_page_workshop(g, req); break;
                case R_LIST: gateway_api_list(g, req); break;
                case R_CALL: gateway_api_call(g, req, w[0], w[1], false); break;
                case R_UI: gateway_page_ui(g, req, w[0], false); break;
                case R_ADMIN_CALL: gateway_api_call(g, req, w[0], w[1], true); break;
                case R_ADMIN_UI: gateway_page_ui(g, req, w[0], true); break;
                case R_APPROVALS: gateway_api_approvals(g, req); break;
                case R_APPROVE: gateway_api_decide(g, req, w[0], true); break;
                case R_DENY: gateway_api_decide(g, req, w[0], false); break;
                case R_ACTIVITY: gateway_api_activity(g, req, w[0]); break;
                case R_TRACE: gateway_api_trace(g, req, w[0]); break;
                }
                return;
        }
        gateway_send_error(req, 404, "not_found", "no such page (the API is below /api/gadgets)");
}

static void on_request(struct evhttp_request *req, void *arg)
{
        struct gateway *g = arg;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
        const char *why = foreign(g, req);
        char esc[200];

        httpconn_request(&g->conns, req);
        if (!path || path[0] != '/')
                path = "/";
        if (why) {
                gateway_refusal(g, GW_REF_FOREIGN, "gateway: refused %s: %s",
                                log_escape(path, strlen(path), esc, sizeof esc), why);
                gateway_send_error(req, 403, "forbidden", "%s", why);
        } else if (strcmp(path, "/") == 0 && query && evhttp_request_get_command(req) == EVHTTP_REQ_GET &&
                   login(g, req, query)) {
                return;
        } else if (!authorized(g, req)) {
                /* Why before routing: without the token nothing, not even
                 * which paths exist, is told. */
                gateway_refusal(g, GW_REF_TOKEN, "gateway: refused %s: no valid token",
                                log_escape(path, strlen(path), esc, sizeof esc));
                evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                                  "Bearer realm=\"gadgetd\"");
                gateway_send_error(req, 401, "unauthorized",
                                   "a valid token is needed: \"Authorization: Bearer TOKEN\", "
                                   "or open /?token=TOKEN in the browser");
        } else {
                httpconn_authed(&g->conns, req);
                route(g, req, path);
        }
}

/* The Host values a browser sends for the bound address. */
static int bound_hosts(struct gateway *g, int fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        char addr[INET6_ADDRSTRLEN];
        unsigned port;
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return -errno;
        if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &a6->sin6_addr, addr, sizeof addr);
                port = ntohs(a6->sin6_port);
                snprintf(g->hosts[0], sizeof g->hosts[0], "[%s]:%u", addr, port);
        } else {
                struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &a4->sin_addr, addr, sizeof addr);
                port = ntohs(a4->sin_port);
                snprintf(g->hosts[0], sizeof g->hosts[0], "%s:%u", addr, port);
        }
        snprintf(g->hosts[1], sizeof g->hosts[1], "localhost:%u", port);
        return 0;
}

/* A listening socket, close-on-exec from birth (evhttp's own binding
 * would not promise that). */
static int listen_on(const char *listen_str, int *out)
{
        struct sockaddr_storage sa;
        socklen_t len;
        char why[256];
        int one = 1, e;
        if (gateway_parse_listen(listen_str, &sa, &len, why, sizeof why) < 0) {
                log_msg(L_ERR, NULL, "gateway: %s", why);
                return -EINVAL;
        }
        int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 128) < 0) {
                e = -errno;
                log_msg(L_ERR, NULL, "gateway: cannot listen on %s: %s", listen_str, strerror(errno));
                if (fd >= 0)
                        close(fd);
                return e;
        }
        *out = fd;
        return 0;
}

_Static_assert(sizeof ((struct gateway_handoff *)0)->session == sizeof ((struct gateway *)0)->session,
               "a handed-on session is the gateway's");
_Static_assert(GATEWAY_SESSION_BYTES == 32, "gateway_session_ok counts 64 digits");

/* The previous image's listening socket (gadgetctl daemon-reexec): a
 * stream socket that listens, on the address Listen= names. Why the
 * check: the fd number comes from the handed-on state, read as hostile. */
static int adopt_listener(const struct gateway_handoff *h, const char *listen_str, int *out)
{
        struct sockaddr_storage want;
        socklen_t wlen;
        char why[256];
        if (gateway_parse_listen(listen_str, &want, &wlen, why, sizeof why) < 0 ||
            listener_adopt(h->fd, want.ss_family) < 0 || !gateway_session_ok(h->session)) {
                log_msg(L_ERR, NULL, "gateway: the listening socket handed on (fd %d) is not one on %s", h->fd,
                        listen_str);
                return -EINVAL;
        }
        *out = h->fd;
        return 0;
}

int gateway_open(struct core *core, const char *listen_str, const char *token_file,
                 const struct gateway_limits *lim, const struct gateway_handoff *h, struct gateway **out)
{
        struct gateway *g = calloc(1, sizeof *g);
        struct evhttp_bound_socket *bound;
        int fd = -1, e;
        bool kept = h && h->fd >= 0;
        if (!g) {
                if (kept)
                        close(h->fd);
                return -ENOMEM;
        }
        g->core = core;
        g->conns = (struct httpconns){ .who = "gateway", .max_key = "MaxConnections", .timeout_key = "HeaderTimeout",
                                       .max_connections = lim->max_connections,
                                       .header_timeout_ms = lim->header_timeout_ms, .sweep = refusals_flush,
                                       .arg = g };
        if (kept && (e = adopt_listener(h, listen_str, &fd)) < 0) {
                close(h->fd);
                goto fail;
        }
        if ((e = httpconn_token_read(token_file, "gateway", "TokenFile", &g->token, &g->token_len)) < 0)
                goto fail;
        if (kept)
                memcpy(g->session, h->session, sizeof g->session);
        else if ((e = random_hex(g->session, GATEWAY_SESSION_BYTES)) < 0) {
                log_msg(L_ERR, NULL, "gateway: no random bytes for the session: %s", strerror(-e));
                goto fail;
        }
        if (!kept && (e = listen_on(listen_str, &fd)) < 0)
                goto fail;
        g->fd = fd;
        if ((e = bound_hosts(g, fd)) < 0 || !(g->http = evhttp_new(core_base(core)))) {
                e = e < 0 ? e : -ENOMEM;
                goto fail;
        }
        /* Why these limits: a body over GATEWAY_MAX_BODY is refused (413)
         * by libevent before it is buffered, as are huge headers; idle or
         * slow clients are dropped. */
        evhttp_set_max_body_size(g->http, GATEWAY_MAX_BODY);
        evhttp_set_max_headers_size(g->http, HEADERS_MAX);
        evhttp_set_timeout(g->http, IO_TIMEOUT_S);
        evhttp_set_allowed_methods(g->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
        evhttp_set_default_content_type(g->http, "text/plain; charset=utf-8");
        evhttp_set_flags(g->http, EVHTTP_SERVER_LINGERING_CLOSE);
        evhttp_set_gencb(g->http, on_request, g);
        if (!(bound = evhttp_accept_socket_with_handle(g->http, fd))) {
                close(fd);
                fd = -1;
                e = -ENOMEM;
                goto fail;
        }
        if ((e = httpconn_setup(&g->conns, core_base(core), g->http, bound)) < 0)
                goto fail;
        log_msg(L_INFO, NULL, "gateway: listening on http://%s/%s", g->hosts[0],
                kept ? " (its socket kept across gadgetd's re-exec)" : "");
        *out = g;
        return 0;
fail:
        if (fd >= 0 && !g->http)
                close(fd);
        gateway_free(g);
        return e;
}

const char *gateway_address(const struct gateway *g)
{
        return g->hosts[0];
}

void gateway_free(struct gateway *g)
{
        if (!g)
                return;
        gateway_budget_free(g);
        gateway_api_orphan(g);
        gateway_activity_orphan(g);
        g->conns.lev = NULL; /* evhttp_free frees it before the connections */
        if (g->http)
                evhttp_free(g->http);
        httpconn_free(&g->conns);
        if (g->token) {
                explicit_bzero(g->token, g->token_len);
                free(g->token);
        }
        explicit_bzero(g->session, sizeof g->session);
        free(g);
}
