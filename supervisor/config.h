/* config: gadgetd's daemon options, from the command line and an optional
 * configuration file (--config FILE, systemd-style INI). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "system/audit.h"
#include "control/control.h"
#include "gateway/gateway.h"
#include "limits/limiter.h"

#define CONFIG_POLICY_DIR "/etc/gadgetd/policy.d"
#define CONFIG_STATE_DIR "/var/lib/gadgetd"
#define CONFIG_RUN_DIR "/run/gadgetd"
#define CONFIG_SOCKET "/run/gadgetd/control.sock"
#define CONFIG_GROUP "gadgetd"

struct config {
        char *policy_dir, *state_dir, *run_dir, *socket_path, *group;
        uid_t uid_base;
        unsigned uid_count;              /* --uid-count, UidCount= */
        enum limiter_mode limits_mode;   /* --limits-mode, LimitsMode= (default auto) */
        bool allow_degraded_limits;      /* --allow-degraded-limits, AllowDegradedLimits= */
        bool require_types;              /* RequireTypes=: every method typed, unless a policy says no */
        uint64_t log_lines;              /* LogLinesPerSecond= of gadgets without one, 0: built-in */
        uint64_t log_bytes;              /* LogBytesPerSecond= of gadgets without one, 0: built-in */
        char *gateway_listen;            /* [Gateway] Listen=, NULL: no gateway */
        char *gateway_token_file;        /* [Gateway] TokenFile= */
        char *metrics_listen;            /* [Daemon] MetricsListen=, NULL: no metrics endpoint */
        char *metrics_token_file;        /* [Daemon] MetricsToken=, NULL: none */
        unsigned http_requests_max;      /* --http-requests-max, HTTPRequestsMax= (0: default) */
        struct audit_config audit;       /* [Audit] RecordsPerSecond=, MaxFileSize=, KeepFiles= */
        struct control_limits control;   /* [Daemon] ControlMaxConnections=, ... */
        unsigned control_max_loads;      /* [Daemon] ControlMaxLoads= */
        struct gateway_limits gateway;   /* [Gateway] MaxConnections=, HeaderTimeout= */
        bool store_postgresql;           /* Store=postgresql (default sqlite) */
        char *store_connection;          /* StoreConnection=: a libpq connection string; may hold a password */
        char *node;                      /* Node=, default the host name's first label */
        uint64_t node_forget_ms;         /* NodeForget=: a node unseen this long leaves the store (0: a day) */
        uint64_t lease_ttl_ms;           /* LeaseTTL=: a hung node's leases last this long at the store (0: 1 s) */
        uint64_t lease_poll_ms;          /* LeasePoll=: a lease round this often (0: 250 ms) */
        uint64_t quick_failure_ms;       /* QuickFailure=: a failure this soon after its start is quick (0: 10 s) */
        /* The link to other nodes (cluster/nodelink.h): PeerListen=HOST:PORT,
         * and PEM files PeerCertificate=, PeerKey=, PeerCA=; NULL: none. */
        char *peer_listen, *peer_cert, *peer_key, *peer_ca;
        /* PeerRevoked=FILE: node names (one a line) refused on the link
         * however valid their certificates, read again when it changes. */
        char *peer_revoked;
        /* FdStore=yes: at SIGTERM under systemd, hand the gadgets to the next
         * gadgetd through the fd store (fdstore.h) instead of stopping them;
         * FdStoreTimeout=: how long each sandbox waits for it (0: 60 s). */
        bool fd_store;
        uint64_t fd_store_timeout_ms;
        /* TraceKeep=: spans kept for gadgetctl trace (trace_keep_set: given;
         * 0 turns tracing off); TraceExport=URL: an OTLP/HTTP collector's
         * /v1/traces, NULL: no export. */
        unsigned trace_keep;
        bool trace_keep_set;
        double trace_sample;             /* TraceSample=: the share of new traces exported (default 1) */
        char *trace_export;
        /* [Releases] (gadgetctl install, docs/releases.md): TrustedKeys= (Ed25519
         * public keys, 64 hex digits each), AllowUnsigned=, VersionsKept= (0:
         * RELEASES_KEEP). */
        uint8_t (*trusted_keys)[32];
        size_t n_trusted_keys;
        bool allow_unsigned;
        unsigned versions_kept;
};

/* Fills cfg from argv (options override the file). Returns 0, 1 after
 * printing help, or -EINVAL after printing what was wrong. */
int config_parse_args(int argc, char **argv, struct config *cfg);
void config_free(struct config *cfg);

/* The options gadgetd and gadgetd run share (--uid-base, --uid-count,
 * --limits-mode): 0, or -EINVAL after a line on stderr naming prog, the
 * option and what it takes. */
int config_opt_uid_base(const char *prog, const char *v, uid_t *out);
int config_opt_uid_count(const char *prog, const char *v, unsigned *out);
int config_opt_limits_mode(const char *prog, const char *v, enum limiter_mode *out);
