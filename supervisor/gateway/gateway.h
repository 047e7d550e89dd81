/* gateway: gadgetd's optional HTTP gateway for browsers (libevent's evhttp
 * on the daemon's loop): the workshop page, a JSON API to list gadgets and
 * call their methods, and each gadget's UI (policy UI=) served sandboxed.
 * Off unless gadgetd's config file has a [Gateway] section. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct core;
struct gateway;

#define GATEWAY_MAX_BODY (1024 * 1024)  /* largest request body (call arguments) */
#define GATEWAY_MAX_CONNECTIONS 256       /* [Gateway] MaxConnections= */
#define GATEWAY_HEADER_TIMEOUT_MS 10000   /* [Gateway] HeaderTimeout= */
/* What calls through the gateway to one gadget may cost the loop
 * (gateway_budget.c): the JSON bytes of their bodies and answers a second,
 * and calls in flight; past either, the next call waits its turn. */
#define GATEWAY_BYTES_PER_S (4u << 20)
#define GATEWAY_CALLS_PER_GADGET 16

/* What the gateway's clients (any local user) may cost gadgetd. */
struct gateway_limits {
        unsigned max_connections;    /* open at once; beyond, the listener waits */
        uint64_t header_timeout_ms;  /* from connect or the last answer to the next complete request */
};

/* Parses a Listen= value, "127.0.0.1:PORT" or "[::1]:PORT" (PORT 0 picks a
 * free port). Only loopback addresses are accepted: the gateway speaks plain
 * HTTP. 0, or -EINVAL with the reason in why. */
int gateway_parse_listen(const char *s, struct sockaddr_storage *sa, socklen_t *len, char *why,
                         size_t whylen);
/* What gadgetd's previous image hands on to the gateway of the next
 * (gadgetctl daemon-reexec): its listening socket and the session
 * cookie's value, so that the port stays and browsers stay logged in. */
struct gateway_handoff {
        int fd;                      /* listening, -1: none (bind Listen=) */
        char session[2 * 32 + 1];    /* GATEWAY_SESSION_BYTES in hex, "" with fd -1 */
};

/* Reads the token from token_file and listens on listen (or on h's
 * socket, if h names one: listen is not bound again). Errors are logged.
 * 0 or -errno. */
int gateway_open(struct core *core, const char *listen, const char *token_file,
                 const struct gateway_limits *lim, const struct gateway_handoff *h, struct gateway **out);
/* Whether s is a session value gateway_open takes from a handoff: 64
 * lower-case hexadecimal digits (inline: the re-exec state's reader and
 * its unit test check it too). */
static inline bool gateway_session_ok(const char *s)
{
        size_t n = 0;
        for (; s[n]; n++)
                if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
                        return false;
        return n == 64;
}
/* gadgetctl daemon-reexec: no new connection is accepted (they wait in
 * the listener's backlog for the next image), and every answer from now
 * on closes its connection (Connection: close); false undoes it. */
void gateway_reexec_hold(struct gateway *g, bool hold);
/* Whether the gateway can be left now: no request read and unanswered,
 * none half read, no connection accepted that has not sent its first
 * request. 0, or -EBUSY with why. The connections left are idle between
 * requests: closed by the exec. */
int gateway_reexec_quiet(const struct gateway *g, char *why, size_t len);
/* What the next image needs, in h. */
void gateway_reexec_handoff(const struct gateway *g, struct gateway_handoff *h);
/* Its connections open, those refused over MaxConnections and closed at
 * HeaderTimeout, since it opened. */
void gateway_stats(const struct gateway *g, uint64_t *connections, uint64_t *full, uint64_t *deadline);
/* Where it listens, "127.0.0.1:PORT" or "[::1]:PORT" (the port it got
 * for Listen=...:0), for links to its pages. */
const char *gateway_address(const struct gateway *g);
/* Call after every unit is freed (their pending calls are answered then). */
void gateway_free(struct gateway *g);
