/* bind_http: allow-listed HTTP egress. gadgetd checks the URL against the
 * binding's Allow= prefixes and Methods= before any connection, refuses
 * internal addresses a name resolves to, follows no redirect, bounds time
 * and sizes, and adds the binding's Credential= to allowed requests. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "bindings.h"
#include "netaddr.h"
#include "ops.h"
#include "contract.h"
#include "http.h"
#include "policy.h"
#include "system/secret_file.h"
#include "system/log.h"
#include "value.h"

/* Connecting may take at most this long (or Timeout= if shorter): a
 * listener that never accepts holds a request's slot no longer. */
#define BIND_HTTP_CONNECT_TIMEOUT_MS 10000L

struct url_parts {
        char *scheme, *host, *port, *path;
};

struct fetch {
        struct binding_req *r;
        struct http *http;
        struct http_slot *slot;   /* until the transfer starts, then http's */
        CURL *easy;
        struct curl_slist *req_headers;
        Gadget__Value *resp_headers;
        char *body;
        size_t body_len, max_body;
        size_t n_headers, header_bytes;     /* every header line so far */
        size_t max_headers, max_header_bytes;
        bool too_big;
        bool too_many_headers;
        bool blocked;             /* a resolved address was refused */
        bool literal_host;        /* the Allow= entry names an IP literally */
        char allowed_ip[INET6_ADDRSTRLEN];
        char errbuf[CURL_ERROR_SIZE];
};

static const char *const hop_by_hop[] = {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
};

static bool is_hop_by_hop(const char *name, size_t len)
{
        for (size_t i = 0; i < sizeof hop_by_hop / sizeof *hop_by_hop; i++)
                if (strlen(hop_by_hop[i]) == len && strncasecmp(hop_by_hop[i], name, len) == 0)
                        return true;
        return false;
}

static void url_free(struct url_parts *u)
{
        curl_free(u->scheme);
        curl_free(u->host);
        curl_free(u->port);
        curl_free(u->path);
        *u = (struct url_parts){ 0 };
}

/* What a server could read in a path other than libcurl does (a dot
 * segment, a slash, a NUL) and so take past an Allow= prefix that the path
 * as written stays inside: encoded dots, slashes and backslashes, an
 * encoded '%' (decoded twice: %252e), an encoded NUL, a backslash (read
 * as a slash by some servers) and ';' (a parameter that Tomcat and others
 * strip from "..;/"). The one that is there, or NULL. */
static const char *path_ambiguous(const char *path)
{
        static const char *const bad[] = { "%2e", "%2f", "%5c", "%25", "%00", "\\", ";" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                if (strcasestr(path, bad[i]))
                        return bad[i];
        return NULL;
}

/* Splits an absolute http(s) URL; refuses credentials in it and a path
 * a server could read past the allowed prefix (path_ambiguous). */
static int url_split(const char *url, struct url_parts *out)
{
        CURLU *h = curl_url();
        char *user = NULL;
        int e = -EINVAL;
        if (!h)
                return -ENOMEM;
        *out = (struct url_parts){ 0 };
        if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(h, CURLUPART_SCHEME, &out->scheme, 0) != CURLUE_OK ||
            curl_url_get(h, CURLUPART_HOST, &out->host, 0) != CURLUE_OK ||
            curl_url_get(h, CURLUPART_PORT, &out->port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
            curl_url_get(h, CURLUPART_PATH, &out->path, 0) != CURLUE_OK)
                goto out;
        if (curl_url_get(h, CURLUPART_USER, &user, 0) == CURLUE_OK)
                goto out;
        if (strcasecmp(out->scheme, "http") != 0 && strcasecmp(out->scheme, "https") != 0)
                goto out;
        if (path_ambiguous(out->path))
                goto out;
        e = 0;
out:
        curl_free(user);
        curl_url_cleanup(h);
        if (e < 0)
                url_free(out);
        return e;
}

/* The ambiguous part of url's path (path_ambiguous), or NULL. */
static const char *url_path_ambiguous(const char *url)
{
        CURLU *h = curl_url();
        char *path = NULL;
        const char *bad = NULL;
        if (h && curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_PATH, &path, 0) == CURLUE_OK)
                bad = path_ambiguous(path);
        curl_free(path);
        curl_url_cleanup(h);
        return bad;
}

/* The Allow= entry that admits url, or NULL. */
static const char *allowed_by(const struct policy_binding *b, const struct url_parts *u)
{
        for (size_t i = 0; i < b->n_allow; i++) {
                struct url_parts a;
                if (url_split(b->allow[i], &a) < 0)
                        continue;
                bool ok = strcasecmp(a.scheme, u->scheme) == 0 && strcasecmp(a.host, u->host) == 0 &&
                          strcmp(a.port, u->port) == 0 && strncmp(u->path, a.path, strlen(a.path)) == 0;
                url_free(&a);
                if (ok)
                        return b->allow[i];
        }
        return NULL;
}

static bool method_allowed(const struct policy_binding *b, const char *m)
{
        if (b->n_methods == 0)
                return strcmp(m, "GET") == 0;
        for (size_t i = 0; i < b->n_methods; i++)
                if (strcmp(b->methods[i], m) == 0)
                        return true;
        return false;
}

/* Why this is safe: every address curl is about to connect to passes here,
 * after name resolution, so a name cannot be made to resolve to an
 * internal address; only an Allow= entry naming that address literally
 * admits one. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *addr)
{
        struct fetch *f = arg;
        char ip[INET6_ADDRSTRLEN] = "";
        if (addr->family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&addr->addr)->sin_addr, ip, sizeof ip);
        else if (addr->family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&addr->addr)->sin6_addr, ip, sizeof ip);
        if (net_internal(&addr->addr) && !(f->literal_host && strcmp(ip, f->allowed_ip) == 0)) {
                f->blocked = true;
                return CURL_SOCKET_BAD;
        }
        return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
        struct fetch *f = arg;
        size_t len = size * n;
        if (f->body_len + len > f->max_body) {
                f->too_big = true;
                return 0; /* ends the transfer */
        }
        char *nb = realloc(f->body, f->body_len + len + 1);
        if (!nb)
                return 0;
        f->body = nb;
        memcpy(f->body + f->body_len, data, len);
        f->body_len += len;
        return len;
}

/* Each header line is counted (bytes and lines, whatever it holds) before
 * anything else is done with it; over MaxResponseHeaders= or
 * MaxResponseHeaderSize= the transfer ends. Why this is safe: the work
 * and memory one response's headers cost are bounded by the policy, and
 * value_map_set's search runs over at most MaxResponseHeaders entries. */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
        struct fetch *f = arg;
        size_t len = size * n;
        char *colon = memchr(data, ':', len);
        f->header_bytes += len;
        if (colon)
                f->n_headers++;
        if (f->n_headers > f->max_headers || f->header_bytes > f->max_header_bytes) {
                f->too_many_headers = true;
                return 0; /* ends the transfer */
        }
        if (!colon || is_hop_by_hop(data, (size_t)(colon - data)))
                return len; /* status lines, blank line, hop-by-hop headers */
        char name[128], value[4096];
        size_t nl = (size_t)(colon - data);
        if (nl == 0 || nl >= sizeof name)
                return len;
        for (size_t i = 0; i < nl; i++)
                name[i] = (char)tolower((unsigned char)data[i]);
        name[nl] = '\0';
        const char *v = colon + 1, *end = data + len;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
                end--;
        snprintf(value, sizeof value, "%.*s", (int)(end - v), v);
        if (!value_utf8_valid(name, nl) || !value_utf8_valid(value, strlen(value)))
                return len;
        value_map_set(f->resp_headers, name, value_new_string(value));
        return len;
}

/* Request header lines are wiped before they are freed: one of them may
 * hold the binding's credential. */
static void headers_free(struct curl_slist *l)
{
        for (struct curl_slist *s = l; s; s = s->next)
                explicit_bzero(s->data, strlen(s->data));
        curl_slist_free_all(l);
}

static void fetch_free(struct fetch *f)
{
        http_slot_put(f->http, f->slot);
        curl_easy_cleanup(f->easy);
        headers_free(f->req_headers);
        value_free(f->resp_headers);
        free(f->body);
        free(f);
}

static void fetch_done(void *arg, CURL *easy, CURLcode res)
{
        struct fetch *f = arg;
        char msg[CURL_ERROR_SIZE + 64];
        long status = 0;
        if (f->blocked) {
                bindings_reply(f->r, NULL, GADGET_EDENIED, "the host resolves to an internal address", 0);
        } else if (f->too_many_headers) {
                snprintf(msg, sizeof msg, "response headers over the limit: more than %zu headers "
                         "(MaxResponseHeaders=) or %zu bytes (MaxResponseHeaderSize=)", f->max_headers,
                         f->max_header_bytes);
                bindings_reply(f->r, NULL, GADGET_ELIMIT, msg, 0);
        } else if (f->too_big || res == CURLE_FILESIZE_EXCEEDED) {
                snprintf(msg, sizeof msg, "response larger than MaxResponseSize (%zu bytes)", f->max_body);
                bindings_reply(f->r, NULL, GADGET_ELIMIT, msg, 0);
        } else if (res != CURLE_OK) {
                /* libcurl's message leaves out the system's reason for a
                 * failed connect (refused, unreachable): it is added. */
                long os_errno = 0;
                char reason[64] = "";
                if (res == CURLE_COULDNT_CONNECT && curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno) ==
                    CURLE_OK && os_errno > 0)
                        snprintf(reason, sizeof reason, " (%s)", strerror((int)os_errno));
                snprintf(msg, sizeof msg, "request failed: %s%s", f->errbuf[0] ? f->errbuf : curl_easy_strerror(res),
                         reason);
                bindings_reply(f->r, NULL, res == CURLE_OPERATION_TIMEDOUT ? GADGET_ETIMEOUT : GADGET_EFAILED,
                               msg, 0);
        } else {
                curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
                Gadget__Value *v = value_new_map();
                if (v) {
                        value_map_set(v, "status", value_new_int(status));
                        value_map_set(v, "headers", f->resp_headers);
                        f->resp_headers = NULL;
                        value_map_set(v, "body", value_new_bytes(f->body ? f->body : "", f->body_len));
                }
                if (v)
                        bindings_reply(f->r, v, 0, NULL, f->body_len);
                else
                        bindings_reply(f->r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                value_free(v);
        }
        fetch_free(f);
}

/* Whether name is an HTTP header name (RFC 9110 token): nothing a lenient
 * server could trim or fold into another name, such as the credential's. */
static bool header_name_ok(const char *name)
{
        return *name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                     "!#$%&'*+-.^_`|~") == strlen(name);
}

/* The header the binding's credential goes in (its name is what comes
 * before the colon), or NULL without Credential=. */
static const char *credential_header(const struct policy_binding *b)
{
        return b->credential ? b->credential_header : NULL;
}

/* One request header line more: 0, or -ENOMEM with why. */
static int header_add(struct fetch *f, const char *line, char *why, size_t len)
{
        struct curl_slist *n = curl_slist_append(f->req_headers, line);
        if (!n) {
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        f->req_headers = n;
        return 0;
}

/* Request headers from the "headers" map; hop-by-hop ones are dropped and
 * names or values that could split a header line are refused. Why this is
 * safe: the header gadgetd fills with b's credential cannot be set by the
 * gadget (-EPERM), in any case of its name, and every name is a token, so
 * the gadget can neither replace the credential nor send a second value
 * beside it. */
static int add_headers(struct fetch *f, const struct policy_binding *b, const Gadget__Value *hdrs, char *why,
                       size_t len)
{
        const char *cred = credential_header(b);
        size_t cred_len = cred ? strcspn(cred, ":") : 0;
        if (!hdrs)
                return 0;
        if (hdrs->kind_case != GADGET__VALUE__KIND_MAP_VALUE) {
                snprintf(why, len, "\"headers\" must be a map of strings");
                return -EINVAL;
        }
        for (size_t i = 0; i < hdrs->map_value->n_entries; i++) {
                const char *k = hdrs->map_value->entries[i]->key;
                const char *v = value_string(hdrs->map_value->entries[i]->value);
                if (!v || !header_name_ok(k) || strpbrk(v, "\r\n")) {
                        snprintf(why, len, "header %zu is not a valid name: string", i);
                        return -EINVAL;
                }
                if (cred && strlen(k) == cred_len && strncasecmp(k, cred, cred_len) == 0) {
                        snprintf(why, len, "header %.*s is set by gadgetd for binding %s (Credential=); a gadget "
                                 "cannot set it", (int)cred_len, cred, b->name);
                        return -EPERM;
                }
                if (is_hop_by_hop(k, strlen(k)) || (f->r->traced && strcasecmp(k, "traceparent") == 0))
                        continue; /* gadgetd's traceparent wins: see add_traceparent */
                char line[8300];
                snprintf(line, sizeof line, "%s: %s", k, v);
                if (header_add(f, line, why, len) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The request carries its binding call's span as its traceparent, so the
 * service called continues the chain's trace (the W3C header, which a
 * gadget's own is replaced by). */
static int add_traceparent(struct fetch *f, char *why, size_t len)
{
        char line[32 + TRACEPARENT_LEN];
        if (!f->r->traced)
                return 0;
        memcpy(line, "traceparent: ", 13);
        traceparent_format(&f->r->trace, line + 13);
        return header_add(f, line, why, len);
}

/* Whether s holds a byte that has no place in a header value: CR, LF,
 * NUL and the other controls but tab. */
static bool has_control(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (((unsigned char)s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f)
                        return true;
        return false;
}

/* Appends b's credential header: CredentialHeader= with {} replaced by
 * the Credential= file's content, read now, so a rotated file counts at
 * the next request. 0, or -errno with why naming the binding and the file,
 * never the content. Why this is safe: the caller has checked the URL
 * against Allow= and the method first, so the credential goes only to the
 * binding's own prefixes (and no redirect is followed); the file is read
 * as a secret is, at most POLICY_CREDENTIAL_SIZE bytes, at once; every
 * copy gadgetd makes is wiped when no longer needed (the header list's
 * when the request ends, headers_free). */
static int add_credential(struct fetch *f, const struct policy_binding *b, char *why, size_t len)
{
        const char *tmpl = credential_header(b), *at = strstr(tmpl, "{}");
        char *cred = NULL, *line = NULL, q[256], big[64];
        size_t n = 0, line_len = 0;
        const char *bad = NULL;
        int e = secret_file_read(b->credential, POLICY_CREDENTIAL_SIZE, SECRET_ANY_MODE, NULL, &cred, &n);
        if (e == 0 && n > 0 && cred[n - 1] == '\r') /* a CRLF line end */
                cred[--n] = '\0';
        snprintf(big, sizeof big, "it is larger than %d bytes", POLICY_CREDENTIAL_SIZE);
        if (e == -EFBIG)
                bad = big;
        else if (e < 0)
                bad = secret_file_why(e);
        else if (n == 0)
                bad = "it is empty";
        else if (has_control(cred, n))
                bad = "it holds a line break, NUL or other control character";
        else if (!(line = malloc((line_len = strlen(tmpl) - 2 + n) + 1))) {
                e = -ENOMEM;
                bad = "out of memory";
        }
        if (bad) {
                log_escape(b->credential, strlen(b->credential), q, sizeof q);
                snprintf(why, len, "binding %s: cannot use credential %s: %s", b->name, q, bad);
                secret_file_free(cred, n);
                return e < 0 ? e : -EINVAL;
        }
        size_t head = (size_t)(at - tmpl);
        memcpy(line, tmpl, head);
        memcpy(line + head, cred, n);
        memcpy(line + head + n, at + 2, strlen(at + 2) + 1);
        secret_file_free(cred, n);
        struct curl_slist *l = curl_slist_append(f->req_headers, line);
        secret_file_free(line, line_len);
        if (l)
                f->req_headers = l;
        if (!l || asprintf(&f->r->audit_note, "credential %s", b->credential) < 0) {
                f->r->audit_note = NULL;
                snprintf(why, len, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static bool is_ip_literal(const char *host, char *out, size_t len)
{
        char h[INET6_ADDRSTRLEN + 2];
        struct in6_addr a6;
        struct in_addr a4;
        snprintf(h, sizeof h, "%s", host);
        if (h[0] == '[') { /* curl returns IPv6 hosts in brackets */
                memmove(h, h + 1, strlen(h));
                h[strcspn(h, "]")] = '\0';
        }
        if (inet_pton(AF_INET, h, &a4) == 1)
                return inet_ntop(AF_INET, &a4, out, (socklen_t)len) != NULL;
        if (inet_pton(AF_INET6, h, &a6) == 1)
                return inet_ntop(AF_INET6, &a6, out, (socklen_t)len) != NULL;
        return false;
}

static int check_request(const Gadget__Value *args, char *why, size_t len)
{
        if (!value_string(value_map_get(args, "url"))) {
                snprintf(why, len, "\"url\" must be an absolute http or https URL");
                return -EINVAL;
        }
        return 0;
}

static void request(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args, bool approved);

/* Approved: the request is made. */
static void go(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        request(r, b, args, true);
}

static void http_request(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args)
{
        request(r, b, args, false);
}

static void request(struct binding_req *r, const struct policy_binding *b, const Gadget__Value *args, bool approved)
{
        char why[600];
        struct url_parts u = { 0 };
        /* libcurl is loaded here, at the first request: URL checks use it. */
        char err[200];
        if (http_ready(r->g->env->http, err, sizeof err) < 0) {
                snprintf(why, sizeof why, "HTTP is unavailable: %s", err);
                bindings_reply(r, NULL, GADGET_EUNAVAILABLE, why, 0);
                return;
        }
        const char *url = value_string(value_map_get(args, "url"));
        const char *method = value_string(value_map_get(args, "method"));
        const Gadget__Value *body = value_map_get(args, "body");
        if (!method)
                method = "GET";
        if (!url || url_split(url, &u) < 0) {
                const char *amb = url ? url_path_ambiguous(url) : NULL;
                if (amb)
                        snprintf(why, sizeof why, "\"url\": its path holds \"%s\", which a server could read "
                                 "past the binding's Allow= prefix: refused", amb);
                else
                        snprintf(why, sizeof why, "\"url\" must be an absolute http or https URL");
                bindings_reply(r, NULL, GADGET_EINVAL, why, 0);
                return;
        }
        const char *entry = allowed_by(b, &u);
        if (!entry || !method_allowed(b, method)) {
                snprintf(why, sizeof why, "%s %.200s is not allowed by binding %s", method, url, b->name);
                url_free(&u);
                bindings_reply(r, NULL, GADGET_EDENIED, why, 0);
                return;
        }
        if (!approved && policy_listed(b->approve, method)) {
                const struct binding_ask q = { .b = b, .target = url, .method = method, .args = args,
                                               .timeout_ms = b->approve_timeout_ms };
                bindings_ask(r, &q, go);
                url_free(&u);
                return;
        }
        const void *data = NULL;
        size_t dlen = 0;
        if (body && body->kind_case == GADGET__VALUE__KIND_STRING_VALUE) {
                data = body->string_value;
                dlen = strlen(body->string_value);
        } else if (body && body->kind_case == GADGET__VALUE__KIND_BYTES_VALUE) {
                data = body->bytes_value.data;
                dlen = body->bytes_value.len;
        } else if (body) {
                url_free(&u);
                bindings_reply(r, NULL, GADGET_EINVAL, "\"body\" must be a string or bytes", 0);
                return;
        }
        if (dlen > b->max_request) {
                url_free(&u);
                bindings_reply(r, NULL, GADGET_ELIMIT, "request body larger than MaxRequestSize", 0);
                return;
        }
        struct http *h = r->g->env->http;
        struct http_slot *slot = NULL;
        int taken = http_slot_take(h, r->g->policy->name, b->name, (unsigned)b->calls_max, &slot);
        if (taken == -EBUSY || taken == -EAGAIN) {
                if (taken == -EBUSY)
                        snprintf(why, sizeof why, "busy: binding %s has %llu HTTP requests in flight "
                                 "(CallsMax=%llu)", b->name, (unsigned long long)b->calls_max,
                                 (unsigned long long)b->calls_max);
                else
                        snprintf(why, sizeof why, "busy: gadgetd has its most HTTP requests in flight "
                                 "for all gadgets (HTTPRequestsMax=)");
                url_free(&u);
                bindings_reply(r, NULL, GADGET_EBUSY, why, 0);
                return;
        }
        struct fetch *f = taken < 0 ? NULL : calloc(1, sizeof *f);
        if (!f || !(f->easy = curl_easy_init()) || !(f->resp_headers = value_new_map())) {
                if (f)
                        fetch_free(f);
                http_slot_put(h, slot);
                url_free(&u);
                bindings_reply(r, NULL, GADGET_EINTERNAL, "out of memory", 0);
                return;
        }
        f->r = r;
        f->http = h;
        f->slot = slot;
        f->max_body = b->max_response;
        f->max_headers = b->max_resp_headers;
        f->max_header_bytes = b->max_resp_header_bytes;
        struct url_parts a;
        if (url_split(entry, &a) == 0) {
                f->literal_host = is_ip_literal(a.host, f->allowed_ip, sizeof f->allowed_ip);
                url_free(&a);
        }
        url_free(&u);
        int rc = add_headers(f, b, value_map_get(args, "headers"), why, sizeof why);
        if (rc == 0)
                rc = add_traceparent(f, why, sizeof why);
        if (rc < 0) {
                fetch_free(f);
                bindings_reply(r, NULL, rc == -EPERM ? GADGET_EDENIED : GADGET_EINVAL, why, 0);
                return;
        }
        /* Only here, with the URL and method allowed: see add_credential. */
        if (b->credential && (rc = add_credential(f, b, why, sizeof why)) < 0) {
                fetch_free(f);
                bindings_reply(r, NULL, rc == -ENOMEM ? GADGET_EINTERNAL : GADGET_EUNAVAILABLE, why, 0);
                return;
        }
        CURL *e = f->easy;
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        if (data || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0) {
                curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)dlen);
                curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, data ? data : "");
                curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->req_headers);
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)b->timeout_ms);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)b->timeout_ms < BIND_HTTP_CONNECT_TIMEOUT_MS
                                                               ? (long)b->timeout_ms
                                                               : BIND_HTTP_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, f);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->errbuf);
        curl_easy_setopt(e, CURLOPT_USERAGENT, "gadgetd");
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)b->max_response);
        /* Why this is safe: CAFile= replaces the system's roots (no CA
         * directory beside it), so a binding that names its service's CA
         * trusts that CA alone; verification itself stays on. */
        if (b->ca_file) {
                curl_easy_setopt(e, CURLOPT_CAINFO, b->ca_file);
                curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
        }
        if (http_start(h, f->slot, e, fetch_done, f) < 0) {
                fetch_free(f);
                bindings_reply(r, NULL, GADGET_EINTERNAL, "cannot start the request", 0);
                return;
        }
        f->slot = NULL; /* http's now, given back when the transfer ends */
}

static struct binding_op ops[] = {
        BINDING_OP("request(url: string, method?: string, headers?: map<string>, body?: string | bytes) -> "
                   "{status: int, headers: map<string>, body: bytes}", check_request, http_request),
};

const struct binding_type_ops bind_http_type = {
        .type = BINDING_HTTP, .ops = ops, .n_ops = sizeof ops / sizeof *ops,
};
