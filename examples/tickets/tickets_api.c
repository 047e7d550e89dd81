/* tickets-api: the outside service of the tickets example, a small HTTP API
 * on a loopback address that wants a bearer token. It is not a gadget: it
 * runs on the host as any service would, and the gatekeeper gadget reaches
 * it through an http binding whose token only gadgetd reads.
 *
 *   tickets-api --listen 127.0.0.1:PORT --token-file FILE
 *
 *   GET  /api/tickets   -> 200 [{"id", "title", "body", "label"}, ...]
 *   POST /api/tickets   {"title", "body"?, "label"?} -> 201 {"id", "title", "body", "label"}
 *
 * Every request needs "Authorization: Bearer TOKEN", TOKEN being the file's
 * content without one final newline, read again at each request so a
 * rotated token works at once. Tickets are kept in memory, bounded. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TICKETS_MAX 1000
#define TITLE_MAX 120        /* characters */
#define BODY_MAX 8192        /* bytes: 2000 characters of any UTF-8 fit */
#define LABEL_MAX 32         /* characters */
#define REQUEST_MAX 16384    /* bytes of a request body */
#define TOKEN_MAX 4096

struct ticket {
        json_int_t id;
        char *title, *body, *label;
};

/* The one context of this process. */
struct api {
        const char *token_file;
        struct event_base *base;
        struct ticket tickets[TICKETS_MAX];
        size_t n;
};

/* Reads the token file into buf (its content without one final newline).
 * 0, or -errno (-EINVAL: empty or too long). */
static int api_token_read(const char *path, char buf[static TOKEN_MAX + 1])
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        size_t len = 0;
        int r = 0;

        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n = read(fd, buf + len, TOKEN_MAX + 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        goto out;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > TOKEN_MAX) {
                        r = -EINVAL;
                        goto out;
                }
        }
        /* One trailing newline is not part of the token, as for gadgetd's Credential=. */
        if (len > 0 && buf[len - 1] == '\n')
                len--;
        if (len > 0 && buf[len - 1] == '\r')
                len--;
        buf[len] = '\0';
        if (len == 0 || strlen(buf) != len)
                r = -EINVAL;
out:
        close(fd);
        return r;
}

/* Compares in time that depends on the lengths only, not on where the
 * first difference is. */
static bool api_equal(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char d = la != lb;

        for (size_t i = 0; i < la && i < lb; i++)
                d |= (unsigned char)(a[i] ^ b[i]);
        return d == 0;
}

/* Answers with v (consumed) and logs the request's line (never its
 * headers: the token is in one). */
static void api_send_json(struct evhttp_request *req, int status, const char *reason, json_t *v)
{
        struct evbuffer *out = evbuffer_new();
        char *text = json_dumps(v, JSON_COMPACT);
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

        fprintf(stderr, "tickets-api: %s %s: %d\n",
                cmd == EVHTTP_REQ_GET ? "GET" : cmd == EVHTTP_REQ_POST ? "POST" : "(other method)",
                path ? path : "?", status);

        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
        if (out && text) {
                evbuffer_add(out, text, strlen(text));
                evbuffer_add(out, "\n", 1);
                evhttp_send_reply(req, status, reason, out);
        } else {
                evhttp_send_error(req, 500, "Out of memory");
        }
        free(text);
        if (out)
                evbuffer_free(out);
        json_decref(v);
}

/* Answers {"error": message}. */
static void api_send_error(struct evhttp_request *req, int status, const char *reason, const char *message)
{
        api_send_json(req, status, reason, json_pack("{s:s}", "error", message));
}

/* Whether the request carries the token; answers 401 (or 500) if not. */
static bool api_authorized(struct api *api, struct evhttp_request *req)
{
        char token[TOKEN_MAX + 1];
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        int r = api_token_read(api->token_file, token);
        bool ok;

        if (r < 0) {
                fprintf(stderr, "tickets-api: cannot read the token file %s: %s\n", api->token_file,
                        r == -EINVAL ? "empty or longer than 4096 bytes" : strerror(-r));
                api_send_error(req, 500, "Internal Server Error", "the service cannot read its token");
                return false;
        }
        ok = h && strncmp(h, "Bearer ", 7) == 0 && api_equal(h + 7, token);
        explicit_bzero(token, sizeof(token));
        if (ok)
                return true;
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
        api_send_error(req, 401, "Unauthorized", "a bearer token is required");
        return false;
}

/* A ticket as the API shows it. */
static json_t *api_ticket_json(const struct ticket *t)
{
        return json_pack("{s:I,s:s,s:s,s:s}", "id", t->id, "title", t->title, "body", t->body, "label", t->label);
}

/* GET /api/tickets: every ticket, oldest first. */
static void api_list(struct api *api, struct evhttp_request *req)
{
        json_t *all = json_array();

        for (size_t i = 0; all && i < api->n; i++)
                json_array_append_new(all, api_ticket_json(&api->tickets[i]));
        api_send_json(req, 200, "OK", all);
}

/* The characters of a UTF-8 string (jansson has checked its encoding). */
static size_t api_chars(const char *s)
{
        size_t n = 0;

        for (; *s; s++)
                n += ((unsigned char)*s & 0xc0) != 0x80;
        return n;
}

/* The string field key of obj, or dflt if absent; NULL with *why set if it
 * is not a string without NUL of at most max_chars characters and
 * max_bytes bytes. */
static const char *api_field(json_t *obj, const char *key, const char *dflt, size_t max_chars, size_t max_bytes,
                             const char **why)
{
        json_t *v = json_object_get(obj, key);
        const char *s;

        if (!v)
                return dflt;
        s = json_string_value(v);
        if (!s || strlen(s) != json_string_length(v))
                *why = "is not a string (without NUL characters)";
        else if (strlen(s) > max_bytes || api_chars(s) > max_chars)
                *why = "is too long";
        else
                return s;
        return NULL;
}

/* Checks a new ticket's JSON; NULL if it is good, else why not. */
static const char *api_ticket_check(json_t *obj, const char **title, const char **body, const char **label,
                                    char why[static 96])
{
        const char *bad = NULL, *key;
        json_t *v;

        if (!json_is_object(obj))
                return "the body must be a JSON object {\"title\", \"body\", \"label\"}";
        json_object_foreach(obj, key, v) {
                if (strcmp(key, "title") && strcmp(key, "body") && strcmp(key, "label"))
                        return "unknown field (only title, body and label)";
        }
        *title = api_field(obj, "title", NULL, TITLE_MAX, SIZE_MAX, &bad);
        if (!*title || !**title) {
                snprintf(why, 96, "title %s (1 to 120 characters)", bad ? bad : "is required");
                return why;
        }
        *body = api_field(obj, "body", "", SIZE_MAX, BODY_MAX, &bad);
        if (!*body) {
                snprintf(why, 96, "body %s (at most 8192 bytes)", bad);
                return why;
        }
        *label = api_field(obj, "label", "", LABEL_MAX, SIZE_MAX, &bad);
        if (!*label) {
                snprintf(why, 96, "label %s (at most 32 characters)", bad);
                return why;
        }
        return NULL;
}

/* POST /api/tickets: checks the ticket, keeps it, answers it with its id. */
static void api_create(struct api *api, struct evhttp_request *req)
{
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        const char *title, *body, *label, *why;
        json_error_t jerr;
        json_t *obj;
        char msg[300], whybuf[96];

        obj = json_loadb((const char *)evbuffer_pullup(in, -1), len, JSON_REJECT_DUPLICATES, &jerr);
        if (!obj) {
                snprintf(msg, sizeof(msg), "bad JSON: %s (line %d)", jerr.text, jerr.line);
                api_send_error(req, 400, "Bad Request", msg);
                return;
        }
        why = api_ticket_check(obj, &title, &body, &label, whybuf);
        if (why) {
                api_send_error(req, 400, "Bad Request", why);
        } else if (api->n == TICKETS_MAX) {
                api_send_error(req, 507, "Insufficient Storage", "full: at most 1000 tickets");
        } else {
                struct ticket *t = &api->tickets[api->n];
                t->id = (json_int_t)api->n + 1;
                t->title = strdup(title);
                t->body = strdup(body);
                t->label = strdup(label);
                if (!t->title || !t->body || !t->label) {
                        free(t->title);
                        free(t->body);
                        free(t->label);
                        api_send_error(req, 500, "Internal Server Error", "out of memory");
                } else {
                        api->n++;
                        api_send_json(req, 201, "Created", api_ticket_json(t));
                }
        }
        json_decref(obj);
}

/* Every request: the token first, then the one route. */
static void api_request(struct evhttp_request *req, void *data)
{
        struct api *api = data;
        const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);

        if (!api_authorized(api, req))
                return;
        if (!path || strcmp(path, "/api/tickets") != 0) {
                api_send_error(req, 404, "Not Found", "no such resource (only /api/tickets)");
        } else if (cmd == EVHTTP_REQ_GET) {
                api_list(api, req);
        } else if (cmd == EVHTTP_REQ_POST) {
                api_create(api, req);
        } else {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, POST");
                api_send_error(req, 405, "Method Not Allowed", "only GET and POST");
        }
}

/* Splits "127.0.0.1:PORT" or "[::1]:PORT" into host and port; only a
 * loopback address is taken, since the API is plain HTTP. */
static int api_listen_parse(const char *arg, char host[static INET6_ADDRSTRLEN], unsigned *port)
{
        const char *colon = strrchr(arg, ':');
        unsigned char addr[16];
        char *end;
        size_t hl;
        unsigned long p;

        if (!colon || !colon[1])
                return -EINVAL;
        p = strtoul(colon + 1, &end, 10);
        if (*end || p > 65535 || colon[1] == '-' || colon[1] == '+')
                return -EINVAL;
        hl = (size_t)(colon - arg);
        if (hl >= 2 && arg[0] == '[' && arg[hl - 1] == ']') {
                if (hl - 2 >= INET6_ADDRSTRLEN)
                        return -EINVAL;
                memcpy(host, arg + 1, hl - 2);
                host[hl - 2] = '\0';
                if (inet_pton(AF_INET6, host, addr) != 1 || memcmp(addr, &in6addr_loopback, 16) != 0)
                        return -EINVAL;
        } else {
                if (hl >= INET6_ADDRSTRLEN)
                        return -EINVAL;
                memcpy(host, arg, hl);
                host[hl] = '\0';
                if (inet_pton(AF_INET, host, addr) != 1 || addr[0] != 127)
                        return -EINVAL;
        }
        *port = (unsigned)p;
        return 0;
}

/* The port a bound socket got (for port 0). */
static int api_bound_port(struct evhttp_bound_socket *bound)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = evhttp_bound_socket_get_fd(bound);

        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return -errno;
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* SIGINT, SIGTERM: the loop ends and main frees everything. */
static void api_stop(evutil_socket_t sig, short what, void *data)
{
        struct api *api = data;
        event_base_loopbreak(api->base);
}

static void usage(FILE *f)
{
        fprintf(f, "usage: tickets-api --listen 127.0.0.1:PORT --token-file FILE\n"
                   "  a tickets API on a loopback address (PORT 0: any free port), answering only\n"
                   "  requests with \"Authorization: Bearer TOKEN\", TOKEN the file's content\n");
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "listen", required_argument, NULL, 'l' },
                { "token-file", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        static struct api api; /* large (the ticket table): not on the stack */
        const char *listen = NULL;
        char host[INET6_ADDRSTRLEN], token[TOKEN_MAX + 1];
        struct evhttp *http = NULL;
        struct evhttp_bound_socket *bound;
        struct event *sigint = NULL, *sigterm = NULL;
        unsigned port;
        int c, r, status = 1;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'l': listen = optarg; break;
                case 't': api.token_file = optarg; break;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        }
        if (!listen || !api.token_file || optind != argc) {
                usage(stderr);
                return 2;
        }
        if (api_listen_parse(listen, host, &port) < 0) {
                fprintf(stderr, "tickets-api: --listen %s: not a loopback address and port "
                                "(127.0.0.0/8 or [::1]; it is plain HTTP)\n", listen);
                return 2;
        }
        r = api_token_read(api.token_file, token);
        if (r < 0) {
                fprintf(stderr, "tickets-api: --token-file %s: %s\n", api.token_file,
                        r == -EINVAL ? "empty or longer than 4096 bytes" : strerror(-r));
                return 2;
        }
        explicit_bzero(token, sizeof(token));
        signal(SIGPIPE, SIG_IGN);
        api.base = event_base_new();
        http = api.base ? evhttp_new(api.base) : NULL;
        if (!http)
                goto out;
        evhttp_set_max_body_size(http, REQUEST_MAX);
        evhttp_set_max_headers_size(http, 16384);
        evhttp_set_timeout(http, 10);
        evhttp_set_gencb(http, api_request, &api);
        bound = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
        if (!bound) {
                fprintf(stderr, "tickets-api: cannot listen on %s: %s\n", listen, strerror(errno));
                goto out;
        }
        r = api_bound_port(bound);
        if (r < 0)
                goto out;
        sigint = evsignal_new(api.base, SIGINT, api_stop, &api);
        sigterm = evsignal_new(api.base, SIGTERM, api_stop, &api);
        if (!sigint || !sigterm || evsignal_add(sigint, NULL) < 0 || evsignal_add(sigterm, NULL) < 0)
                goto out;
        printf("tickets-api: listening on http://%s%s%s:%d\n", strchr(host, ':') ? "[" : "", host,
               strchr(host, ':') ? "]" : "", r);
        fflush(stdout);
        status = event_base_dispatch(api.base) < 0;
out:
        if (sigint)
                event_free(sigint);
        if (sigterm)
                event_free(sigterm);
        if (http)
                evhttp_free(http);
        if (api.base)
                event_base_free(api.base);
        for (size_t i = 0; i < api.n; i++) {
                free(api.tickets[i].title);
                free(api.tickets[i].body);
                free(api.tickets[i].label);
        }
        return status;
}
