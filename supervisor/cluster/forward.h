/* forward: the calls, wakes and moves that cross between nodes
 * (Store=postgresql with PeerCertificate=): a call or wake of a gadget
 * another node runs is sent to that node over the link and answered as if
 * local; those from other nodes reach the gadgets this node runs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <event2/event.h>

struct core;
struct forward;
struct nodelink_config;

/* Opens the link (its listener if cfg->listen) and routes core's remote
 * calls through it; revoked (PeerRevoked=, may be NULL) names a file of
 * node names refused however valid their certificates. 0, or -errno with
 * err naming what was wrong. */
int forward_new(struct event_base *base, struct core *core, const struct nodelink_config *cfg,
                const char *revoked, struct forward **out, char *err, size_t len);
/* gadgetctl daemon-reexec: nodelink.h's nodelink_reexec_hold and
 * nodelink_reexec_quiet on this node's link, and its listening fd to hand
 * on (-1: none). */
void forward_reexec_hold(struct forward *f, bool hold);
int forward_reexec_quiet(struct forward *f, char *why, size_t len);
int forward_listen_fd(const struct forward *f);
/* Asks for spans refused as busy (NODELINK_TRACES_PER_S), for the metrics. */
uint64_t forward_traces_refused(const struct forward *f);
/* The link's sessions past their handshake, from other nodes and to them
 * (the metrics). */
void forward_sessions(const struct forward *f, unsigned *in, unsigned *out);
/* Calls to other nodes fail from now on (those in flight: gone); frees. */
void forward_free(struct forward *f);
