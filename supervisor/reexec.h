/* reexec: the state gadgetctl daemon-reexec hands from one gadgetd image
 * to the next (daemon.c), in a memfd passed as --reexec-state FD: a small
 * versioned binary record, read back as hostile input (every length,
 * count, name, state and fd checked; a checksum over the whole). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/control.h"
#include "core/core.h"
#include "gateway/gateway.h"

#define REEXEC_OPTION "--reexec-state"
#define REEXEC_MAX_UNITS 65536u
#define REEXEC_MAX_CLIENTS 65536u
#define REEXEC_MAX_INPUT (8u << 20)  /* of one control connection, read and not handled */
#define REEXEC_NODE_MAX 64u          /* a node's name and its NUL (gadget_name_ok: 63 at most) */
/* How far ahead the time to take the leases back may lie (a mark's
 * length, KVPG_MOVE_MS). */
#define REEXEC_LEASE_AHEAD_MS 10000u

struct reexec_state {
        int listen_fd;          /* the control socket, listening */
        int state_lock, socket_lock, uid_lock; /* the instance's locks and the uid pool's (-1: none) */
        bool activated;         /* made by systemd (gadgetd.socket) */
        int answer_fd;          /* the connection of whoever asked (one of clients), or -1 */
        uint64_t answer_id;     /* its request's id */
        size_t n;
        struct unit_saved *units;
        size_t n_clients;       /* the control connections handed on */
        struct control_handoff *clients;
        struct gateway_handoff gateway; /* its listening socket (-1: no gateway) and session */
        int peer_fd;            /* the node link's listening socket (PeerListen=), -1: none */
        int metrics_fd;         /* the metrics endpoint's listening socket (MetricsListen=), -1: none */
        uint64_t lease_until_ms; /* Store=postgresql: monotime_ms by which the leases must be back (0: none) */
        void *mem;              /* read: what units' strings point into */
        bool read;              /* read whole and checked (reexec_state_read) */
};

/* The state in a new memfd (inherited across exec): its fd, or -errno. */
int reexec_state_write(const struct reexec_state *s);
/* Reads fd's state into s (to free with reexec_state_free): 0, or -EINVAL
 * (-errno) with err saying what is wrong with it. */
int reexec_state_read(int fd, struct reexec_state *s, char *err, size_t len);
void reexec_state_free(struct reexec_state *s);
/* Calls fn(fd, ctx) for each fd s hands on (its listener, locks, gateway,
 * node-link and metrics listeners, control connections, and each ready gadget's
 * link, report, stdout, stderr pipes, pidfd and core memfd), until fn returns nonzero;
 * returns that, or 0. */
int reexec_fds_each(const struct reexec_state *s, int (*fn)(int fd, const void *ctx), const void *ctx);
/* Clears FD_CLOEXEC on exactly the fds s hands on (inherit true), or sets
 * it again (false: the exec failed). */
void reexec_fds_inherit(const struct reexec_state *s, bool inherit);
/* True if fd is one s hands on. */
bool reexec_fd_kept(const struct reexec_state *s, int fd);
