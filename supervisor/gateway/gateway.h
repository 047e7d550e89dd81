/* gateway: gadgetd's optional HTTP gateway for browsers (libevent's evhttp
 * on the daemon's loop): the workshop page, a JSON API to list gadgets and
 * call their methods, and each gadget's UI (policy UI=) served sandboxed.
 * Off unless gadgetd's config file has a [Gateway] section. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct core;
struct gateway;

#define GATEWAY_MAX_BODY (1024 * 1024)  /* largest request body (call arguments) */
#define GATEWAY_MAX_CONNECTIONS 256       /* [Gateway] MaxConnections= */
#define GATEWAY_HEADER_TIMEOUT_MS 10000   /* [Gateway] HeaderTimeout= */

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
/* Reads the token from token_file and listens on listen. Errors are logged.
 * 0 or -errno. */
int gateway_open(struct core *core, const char *listen, const char *token_file,
                 const struct gateway_limits *lim, struct gateway **out);
/* Call after every unit is freed (their pending calls are answered then). */
void gateway_free(struct gateway *g);
