/* config: the daemon's options. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <unistd.h>
#include <sys/socket.h>
#include <event2/util.h>

#include "gateway/gateway.h"
#include "metrics/metrics.h"
#include "bindings/http.h"
#include "core/core.h"
#include "contract.h"
#include "system/loader.h"
#include "system/releases.h"
#include "bundle.h"
#include "policy.h"
#include "spawn/uidpool.h"
#include "system/trace.h"

static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetd [--config FILE] [--policy-dir DIR] [--state-dir DIR] [--socket PATH]\n"
                   "               [--run-dir DIR] [--group NAME] [--uid-base N] [--uid-count N]\n"
                   "               [--limits-mode MODE] [--allow-degraded-limits] [--http-requests-max N]\n"
                   "Runs the supervisor in the foreground: loads every *.policy in the policy\n"
                   "directory and serves the control socket (see gadgetctl).\n"
                   "  --config FILE     [Daemon] keys PolicyDirectory, StateDirectory, RuntimeDirectory,\n"
                   "                    Socket, Group, UidBase, UidCount, LimitsMode, AllowDegradedLimits,\n"
                   "                    RequireTypes (every method of a gadget must declare its signature,\n"
                   "                    unless its policy says RequireTypes=no; default no),\n"
                   "                    HTTPRequestsMax, LogLinesPerSecond, LogBytesPerSecond (log budget\n"
                   "                    of a gadget whose policy sets none; defaults %u and %uK),\n"
                   "                    ControlMaxConnections, ControlMaxConnectionsPerUser, ControlQueueSize,\n"
                   "                    ControlMaxLoads, Store=sqlite|postgresql (where kv bindings live,\n"
                   "                    default sqlite), StoreConnection= (libpq connection string, with\n"
                   "                    Store=postgresql), Node= (this gadgetd's name in the store, default\n"
                   "                    the host name), FdStore=yes (SIGTERM under systemd hands the\n"
                   "                    gadgets to the next gadgetd through the fd store), FdStoreTimeout=\n"
                   "                    (how long a sandbox waits for it, default 60s), QuickFailure= (a\n"
                   "                    failure this soon after a gadget's start is quick: the 5th quick\n"
                   "                    one in a row parks it, default 10s), TraceKeep=N (spans\n"
                   "                    kept for gadgetctl trace, default 4096, 0: no tracing),\n"
                   "                    TraceExport=URL (an OTLP/HTTP collector's /v1/traces),\n"
                   "                    TraceSample=F (the share of new traces exported, default 1),\n"
                   "                    MetricsListen=127.0.0.1:PORT or a socket's path (serves /metrics),\n"
                   "                    MetricsToken= (a file with its bearer token)\n"
                   "                    (command-line options win); [Gateway] keys Listen=127.0.0.1:PORT,\n"
                   "                    TokenFile=PATH serve the browser gateway (off without them),\n"
                   "                    MaxConnections, HeaderTimeout;\n"
                   "                    [Audit] keys RecordsPerSecond=N (per gadget, default %u; the rest\n"
                   "                    summarized), MaxFileSize=SIZE (audit.log rotated beyond it, default\n"
                   "                    %lluM), KeepFiles=N (rotated files kept, default %u),\n"
                   "                    StoreKeepDays=N (Store=postgresql: rows kept, default 90);\n"
                   "                    [Releases] keys TrustedKeys= (Ed25519 public keys whose bundles\n"
                   "                    gadgetctl install takes), AllowUnsigned=yes (root may install\n"
                   "                    unsigned ones too), VersionsKept=N (per gadget, default %u)\n"
                   "  --policy-dir DIR  default %s\n"
                   "  --state-dir DIR   default %s\n"
                   "  --socket PATH     default %s\n"
                   "  --run-dir DIR     default %s\n"
                   "  --group NAME      may use the control socket besides root, default %s\n"
                   "  --uid-base N      first host uid for gadgets, default %u\n"
                   "  --uid-count N     how many host uids from there, default %u (held host-wide in\n"
                   "                    %s, so no two gadgetd processes share one)\n"
                   "  --limits-mode MODE  auto (default: cgroup v2, else v1, else rlimits), cgroup-v2,\n"
                   "                    cgroup-v1 or rlimits\n"
                   "  --allow-degraded-limits  start a gadget whose MemoryMax or CPUQuota the mode cannot\n"
                   "                    enforce, with what it can (default: such a gadget does not start)\n"
                   "  --http-requests-max N  HTTP requests in flight for all gadgets together; beyond,\n"
                   "                    a request is answered busy (default %u, at most %u)\n"
                   "Other modes: gadgetd run POLICY ..., gadgetd check FILE... (gadgetd run --help)\n",
                LOGBUF_DEFAULT_LINES, LOGBUF_DEFAULT_BYTES / 1024, AUDIT_DEFAULT_RATE,
                AUDIT_DEFAULT_MAX_SIZE >> 20, AUDIT_DEFAULT_KEEP, RELEASES_KEEP, CONFIG_POLICY_DIR, CONFIG_STATE_DIR,
                CONFIG_SOCKET, CONFIG_RUN_DIR, CONFIG_GROUP, UIDPOOL_DEFAULT_BASE, UIDPOOL_DEFAULT_COUNT,
                UIDPOOL_LOCK_FILE, HTTP_MAX_TOTAL_DEFAULT, HTTP_MAX_TOTAL_LIMIT);
}

static int set_str(char **dst, const char *v)
{
        char *n = strdup(v);
        if (!n)
                return -ENOMEM;
        free(*dst);
        *dst = n;
        return 0;
}

/* A count of at least 1 and at most max. */
static int parse_count(const char *v, uint64_t max, unsigned *out)
{
        uint64_t n;
        if (policy_parse_count(v, &n) < 0 || n == 0 || n > max)
                return -EINVAL;
        *out = (unsigned)n;
        return 0;
}

static int parse_uid(const char *v, uid_t *out)
{
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (errno || end == v || *end || n == 0 || n > 0xfffeffffUL)
                return -EINVAL;
        *out = (uid_t)n;
        return 0;
}

int config_opt_uid_base(const char *prog, const char *v, uid_t *out)
{
        if (parse_uid(v, out) == 0)
                return 0;
        fprintf(stderr, "%s: --uid-base: \"%s\" is not a uid above 0\n", prog, v);
        return -EINVAL;
}

int config_opt_uid_count(const char *prog, const char *v, unsigned *out)
{
        if (parse_count(v, UIDPOOL_MAX_COUNT, out) == 0)
                return 0;
        fprintf(stderr, "%s: --uid-count: \"%s\" is not a number from 1 to %u\n", prog, v, UIDPOOL_MAX_COUNT);
        return -EINVAL;
}

int config_opt_limits_mode(const char *prog, const char *v, enum limiter_mode *out)
{
        if (limiter_parse_mode(v, out) == 0)
                return 0;
        fprintf(stderr, "%s: --limits-mode: \"%s\" is not one of auto, cgroup-v2, cgroup-v1, rlimits\n", prog, v);
        return -EINVAL;
}

/* One parse of the file: the reason for the first bad line, where known. */
struct file_ctx {
        struct config *cfg;
        char why[320];
};

static int file_bad(struct file_ctx *fc, const char *why)
{
        if (!fc->why[0])
                snprintf(fc->why, sizeof fc->why, "%s", why);
        return 0;
}

/* The budgets of the control socket's and the gateway's clients. 1 if key
 * was one of them and its value good, 0 if bad, -1 if not such a key. */
static int budget_key(struct config *cfg, const char *section, const char *key, const char *value)
{
        uint64_t n;
        if (strcmp(section, "Daemon") == 0 && strcmp(key, "ControlMaxConnections") == 0)
                return parse_count(value, 65536, &cfg->control.max_connections) == 0;
        if (strcmp(section, "Daemon") == 0 && strcmp(key, "ControlMaxConnectionsPerUser") == 0)
                return parse_count(value, 65536, &cfg->control.max_per_user) == 0;
        if (strcmp(section, "Daemon") == 0 && strcmp(key, "ControlMaxLoads") == 0)
                return parse_count(value, 1024, &cfg->control_max_loads) == 0;
        if (strcmp(section, "Daemon") == 0 && strcmp(key, "ControlQueueSize") == 0) {
                if (policy_parse_size(value, &n) < 0 || n < 4096 || n > (1ull << 30))
                        return 0;
                cfg->control.queue_bytes = (size_t)n;
                return 1;
        }
        if (strcmp(section, "Gateway") == 0 && strcmp(key, "MaxConnections") == 0)
                return parse_count(value, 65536, &cfg->gateway.max_connections) == 0;
        if (strcmp(section, "Gateway") == 0 && strcmp(key, "HeaderTimeout") == 0)
                return policy_parse_duration(value, &cfg->gateway.header_timeout_ms) == 0 &&
                       cfg->gateway.header_timeout_ms > 0;
        return -1;
}

/* [Gateway]: Listen=ADDRESS:PORT and TokenFile=PATH (checked here, read
 * when the gateway opens). 1 to go on, 0 marks the line as an error. */
static int gateway_key(struct file_ctx *fc, const char *key, const char *value)
{
        struct sockaddr_storage sa;
        socklen_t len;
        char why[300];
        if (strcmp(key, "Listen") == 0) {
                if (gateway_parse_listen(value, &sa, &len, why, sizeof why) < 0)
                        return file_bad(fc, why);
                return set_str(&fc->cfg->gateway_listen, value) == 0;
        }
        if (strcmp(key, "TokenFile") == 0) {
                if (value[0] != '/') {
                        snprintf(why, sizeof why, "TokenFile=\"%.200s\" is not an absolute path", value);
                        return file_bad(fc, why);
                }
                return set_str(&fc->cfg->gateway_token_file, value) == 0;
        }
        snprintf(why, sizeof why, "unknown key \"%.64s\" in [Gateway] (Listen=, TokenFile=, MaxConnections=, "
                 "HeaderTimeout=)", key);
        return file_bad(fc, why);
}

/* [Daemon] PeerListen=, PeerCertificate=, PeerKey=, PeerCA=, PeerRevoked=. 1 if good, 0
 * if bad, -1 if not such a key. */
static int peer_key(struct file_ctx *fc, const char *key, const char *value)
{
        static const char *const files[] = { "PeerCertificate", "PeerKey", "PeerCA", "PeerRevoked" };
        char **const dest[] = { &fc->cfg->peer_cert, &fc->cfg->peer_key, &fc->cfg->peer_ca, &fc->cfg->peer_revoked };
        char why[300];
        if (strcmp(key, "PeerListen") == 0) {
                struct sockaddr_storage sa;
                int len = sizeof sa;
                /* Numeric only: other nodes are told this address as it is. */
                if (strlen(value) > 100 || evutil_parse_sockaddr_port(value, (struct sockaddr *)&sa, &len) < 0 ||
                    !strchr(value, ':')) {
                        snprintf(why, sizeof why, "PeerListen=\"%.100s\" is not a numeric ADDRESS:PORT "
                                 "(e.g. 192.0.2.7:7443 or [2001:db8::7]:7443)", value);
                        return file_bad(fc, why);
                }
                return set_str(&fc->cfg->peer_listen, value) == 0;
        }
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
                if (strcmp(key, files[i]) != 0)
                        continue;
                if (value[0] != '/') {
                        snprintf(why, sizeof why, "%s=\"%.200s\" is not an absolute path", key, value);
                        return file_bad(fc, why);
                }
                return set_str(dest[i], value) == 0;
        }
        return -1;
}

/* [Daemon] Store=, StoreConnection=, Node= (and the peer link's keys). 1
 * if good, 0 if bad, -1 if not such a key. */
static int store_key(struct file_ctx *fc, const char *key, const char *value)
{
        char why[300];
        if (strcmp(key, "Store") == 0) {
                if (strcmp(value, "sqlite") != 0 && strcmp(value, "postgresql") != 0) {
                        snprintf(why, sizeof why, "Store=\"%.64s\" is not sqlite or postgresql", value);
                        return file_bad(fc, why);
                }
                fc->cfg->store_postgresql = strcmp(value, "postgresql") == 0;
                return 1;
        }
        if (strcmp(key, "StoreConnection") == 0) {
                /* Never quoted back: it may hold a password. */
                if (!*value || strpbrk(value, "\n\r"))
                        return file_bad(fc, "StoreConnection= must be one non-empty line");
                return set_str(&fc->cfg->store_connection, value) == 0;
        }
        if (strcmp(key, "Node") == 0) {
                if (!gadget_name_ok(value)) {
                        snprintf(why, sizeof why, "Node=\"%.64s\" is not a name of 1 to 63 of a-z 0-9 _ -, "
                                 "starting with a letter or digit", value);
                        return file_bad(fc, why);
                }
                return set_str(&fc->cfg->node, value) == 0;
        }
        if (strcmp(key, "NodeForget") == 0) {
                /* Why a floor: a node seen within its down time may hold
                 * leases (its session alive); it is never forgotten. */
                if (policy_parse_duration(value, &fc->cfg->node_forget_ms) < 0 ||
                    fc->cfg->node_forget_ms < CONTROL_NODE_DOWN_MS) {
                        snprintf(why, sizeof why, "NodeForget=\"%.64s\" is not a time of at least %ds (the time "
                                 "after which a node counts as down)", value, CONTROL_NODE_DOWN_MS / 1000);
                        return file_bad(fc, why);
                }
                return 1;
        }
        if (strcmp(key, "LeaseTTL") == 0) {
                /* Why a floor: a round's takes wait up to 200 ms for
                 * writes in flight (kvpg_sql.c), well within the lease. */
                if (policy_parse_duration(value, &fc->cfg->lease_ttl_ms) < 0 || fc->cfg->lease_ttl_ms < 1000 ||
                    fc->cfg->lease_ttl_ms > 600000) {
                        snprintf(why, sizeof why, "LeaseTTL=\"%.64s\" is not a time from 1s to 10min", value);
                        return file_bad(fc, why);
                }
                return 1;
        }
        if (strcmp(key, "LeasePoll") == 0) {
                /* At most a quarter of LeaseTTL= (the store module keeps it
                 * so, whatever the order of the keys). */
                if (policy_parse_duration(value, &fc->cfg->lease_poll_ms) < 0 || fc->cfg->lease_poll_ms < 50 ||
                    fc->cfg->lease_poll_ms > 150000) {
                        snprintf(why, sizeof why, "LeasePoll=\"%.64s\" is not a time from 50ms to 150s", value);
                        return file_bad(fc, why);
                }
                return 1;
        }
        return peer_key(fc, key, value);
}

/* [Daemon] MetricsListen=, MetricsToken=. 1 if good, 0 if bad, -1 if
 * not such a key. */
static int metrics_key(struct file_ctx *fc, const char *key, const char *value)
{
        char why[300];
        if (strcmp(key, "MetricsListen") == 0) {
                if (metrics_parse_listen(value, why, sizeof why) < 0)
                        return file_bad(fc, why);
                return set_str(&fc->cfg->metrics_listen, value) == 0;
        }
        if (strcmp(key, "MetricsToken") == 0) {
                if (value[0] != '/') {
                        snprintf(why, sizeof why, "MetricsToken=\"%.200s\" is not an absolute path", value);
                        return file_bad(fc, why);
                }
                return set_str(&fc->cfg->metrics_token_file, value) == 0;
        }
        return -1;
}

/* [Releases]: whose bundles gadgetctl install takes, and how many
 * versions of each gadget the store keeps. TrustedKeys= may repeat; each
 * holds keys separated by blanks. 1 if good, 0 if bad. */
static int releases_key(struct file_ctx *fc, const char *key, const char *value)
{
        struct config *cfg = fc->cfg;
        char why[300];
        if (strcmp(key, "TrustedKeys") == 0) {
                char *copy = strdup(value), *save = NULL;
                int ok = copy != NULL;
                for (char *w = copy ? strtok_r(copy, " \t", &save) : NULL; w && ok; w = strtok_r(NULL, " \t", &save)) {
                        uint8_t (*v)[32] = realloc(cfg->trusted_keys, (cfg->n_trusted_keys + 1) * sizeof *v);
                        if (!v || bundle_key_unhex(w, v[cfg->n_trusted_keys]) < 0) {
                                if (v)
                                        cfg->trusted_keys = v;
                                snprintf(why, sizeof why, "TrustedKeys=: \"%.80s\" is not an Ed25519 public key "
                                         "(64 hex digits, as gadgetctl keygen prints)", w);
                                ok = file_bad(fc, why);
                                break;
                        }
                        cfg->trusted_keys = v;
                        cfg->n_trusted_keys++;
                }
                free(copy);
                return ok;
        }
        if (strcmp(key, "AllowUnsigned") == 0)
                return policy_parse_bool(value, &cfg->allow_unsigned) == 0;
        if (strcmp(key, "VersionsKept") == 0)
                return parse_count(value, 1000, &cfg->versions_kept) == 0;
        return 0;
}

/* inih handler: 1 to go on, 0 marks the line as an error. */
static int file_key(void *arg, const char *section, const char *key, const char *value)
{
        struct file_ctx *fc = arg;
        struct config *cfg = fc->cfg;
        int b = budget_key(cfg, section, key, value);
        if (b >= 0)
                return b;
        if (strcmp(section, "Gateway") == 0)
                return gateway_key(fc, key, value);
        if (strcmp(section, "Audit") == 0) {
                char why[300];
                if (audit_config_key(&cfg->audit, key, value, why, sizeof why) < 0)
                        return file_bad(fc, why);
                return 1;
        }
        if (strcmp(section, "Releases") == 0)
                return releases_key(fc, key, value);
        if (strcmp(section, "Daemon") != 0)
                return 0;
        if ((b = store_key(fc, key, value)) >= 0)
                return b;
        if ((b = metrics_key(fc, key, value)) >= 0)
                return b;
        if (strcmp(key, "PolicyDirectory") == 0)
                return set_str(&cfg->policy_dir, value) == 0;
        if (strcmp(key, "StateDirectory") == 0)
                return set_str(&cfg->state_dir, value) == 0;
        if (strcmp(key, "RuntimeDirectory") == 0)
                return set_str(&cfg->run_dir, value) == 0;
        if (strcmp(key, "Socket") == 0)
                return set_str(&cfg->socket_path, value) == 0;
        if (strcmp(key, "Group") == 0)
                return set_str(&cfg->group, value) == 0;
        if (strcmp(key, "UidBase") == 0)
                return parse_uid(value, &cfg->uid_base) == 0;
        if (strcmp(key, "UidCount") == 0)
                return parse_count(value, UIDPOOL_MAX_COUNT, &cfg->uid_count) == 0;
        if (strcmp(key, "LimitsMode") == 0)
                return limiter_parse_mode(value, &cfg->limits_mode) == 0;
        if (strcmp(key, "AllowDegradedLimits") == 0)
                return policy_parse_bool(value, &cfg->allow_degraded_limits) == 0;
        if (strcmp(key, "RequireTypes") == 0)
                return policy_parse_bool(value, &cfg->require_types) == 0;
        if (strcmp(key, "FdStore") == 0)
                return policy_parse_bool(value, &cfg->fd_store) == 0;
        if (strcmp(key, "FdStoreTimeout") == 0)
                return policy_parse_duration(value, &cfg->fd_store_timeout_ms) == 0 && cfg->fd_store_timeout_ms > 0 &&
                       cfg->fd_store_timeout_ms <= 3600000;
        /* At least 1 s: a gadget that dies at once is quick whatever the
         * setting, so a gadget that keeps crashing is still parked. */
        if (strcmp(key, "QuickFailure") == 0)
                return policy_parse_duration(value, &cfg->quick_failure_ms) == 0 && cfg->quick_failure_ms >= 1000 &&
                       cfg->quick_failure_ms <= 3600000;
        if (strcmp(key, "HTTPRequestsMax") == 0)
                return parse_count(value, HTTP_MAX_TOTAL_LIMIT, &cfg->http_requests_max) == 0;
        if (strcmp(key, "TraceKeep") == 0) {
                uint64_t n;
                cfg->trace_keep_set = true;
                if (policy_parse_count(value, &n) < 0 || n > TRACE_KEEP_MAX)
                        return 0;
                cfg->trace_keep = (unsigned)n;
                return 1;
        }
        if (strcmp(key, "TraceSample") == 0) {
                char *end;
                errno = 0;
                cfg->trace_sample = strtod(value, &end);
                return !errno && end != value && !*end && cfg->trace_sample >= 0 && cfg->trace_sample <= 1;
        }
        if (strcmp(key, "TraceExport") == 0)
                return (strncmp(value, "http://", 7) == 0 || strncmp(value, "https://", 8) == 0) &&
                       strlen(value) < 2048 && !strpbrk(value, " \t\r\n") && set_str(&cfg->trace_export, value) == 0;
        if (strcmp(key, "LogLinesPerSecond") == 0)
                return policy_parse_count(value, &cfg->log_lines) == 0 && cfg->log_lines > 0 &&
                       cfg->log_lines <= 1000000;
        if (strcmp(key, "LogBytesPerSecond") == 0)
                return policy_parse_size(value, &cfg->log_bytes) == 0 && cfg->log_bytes > 0 &&
                       cfg->log_bytes <= 64ull << 20;
        return 0;
}

static int read_file(const char *path, struct config *cfg)
{
        struct file_ctx fc = { .cfg = cfg };
        int line = ini_parse(path, file_key, &fc);
        if (line == -1) {
                fprintf(stderr, "gadgetd: %s: cannot open: %s\n", path, strerror(errno));
                return -EINVAL;
        }
        if (line != 0) {
                fprintf(stderr, "gadgetd: %s:%d: %s\n", path, line,
                        fc.why[0] ? fc.why : "unknown section or key, or bad value");
                return -EINVAL;
        }
        if (cfg->metrics_token_file && !cfg->metrics_listen) {
                fprintf(stderr, "gadgetd: %s: [Daemon] MetricsToken= needs MetricsListen=\n", path);
                return -EINVAL;
        }
        if (!cfg->gateway_listen != !cfg->gateway_token_file) {
                fprintf(stderr, "gadgetd: %s: [Gateway] needs both Listen= and TokenFile=\n", path);
                return -EINVAL;
        }
        if (cfg->store_postgresql != !!cfg->store_connection) {
                fprintf(stderr, "gadgetd: %s: [Daemon] %s\n", path, cfg->store_postgresql ?
                        "Store=postgresql needs StoreConnection=" : "StoreConnection= needs Store=postgresql");
                return -EINVAL;
        }
        if (cfg->peer_listen && !cfg->store_postgresql) {
                fprintf(stderr, "gadgetd: %s: [Daemon] PeerListen= needs Store=postgresql (the nodes find each "
                        "other in the store)\n", path);
                return -EINVAL;
        }
        int files = !!cfg->peer_cert + !!cfg->peer_key + !!cfg->peer_ca;
        if (files && !cfg->store_postgresql) {
                fprintf(stderr, "gadgetd: %s: [Daemon] PeerCertificate=, PeerKey= and PeerCA= need Store=postgresql\n",
                        path);
                return -EINVAL;
        }
        if (cfg->peer_revoked && files != 3) {
                fprintf(stderr, "gadgetd: %s: [Daemon] PeerRevoked= needs the link between nodes (PeerCertificate=, "
                        "PeerKey=, PeerCA=)\n", path);
                return -EINVAL;
        }
        if ((cfg->peer_listen || files) && files != 3) {
                fprintf(stderr, "gadgetd: %s: [Daemon] the link between nodes is always mutual TLS: "
                        "PeerListen= and each of PeerCertificate=, PeerKey=, PeerCA= need all three files\n", path);
                return -EINVAL;
        }
        return 0;
}

/* Node='s default: the host name up to its first dot, in lower case. */
static int default_node(struct config *cfg)
{
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) < 0)
                host[0] = '\0';
        host[strcspn(host, ".")] = '\0';
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        if (!gadget_name_ok(host)) {
                fprintf(stderr, "gadgetd: the host name \"%.64s\" is not a node name: set [Daemon] Node=\n", host);
                return -EINVAL;
        }
        return set_str(&cfg->node, host);
}

int config_parse_args(int argc, char **argv, struct config *cfg)
{
        static const struct option opts[] = {
                { "help", no_argument, NULL, 'h' },
                { "config", required_argument, NULL, 'c' },
                { "policy-dir", required_argument, NULL, 'p' },
                { "state-dir", required_argument, NULL, 's' },
                { "socket", required_argument, NULL, 'S' },
                { "run-dir", required_argument, NULL, 'r' },
                { "group", required_argument, NULL, 'g' },
                { "uid-base", required_argument, NULL, 'u' },
                { "uid-count", required_argument, NULL, 'U' },
                { "limits-mode", required_argument, NULL, 'l' },
                { "allow-degraded-limits", no_argument, NULL, 'D' },
                { "http-requests-max", required_argument, NULL, 'H' },
                { 0 },
        };
        *cfg = (struct config){
                .uid_base = UIDPOOL_DEFAULT_BASE,
                .uid_count = UIDPOOL_DEFAULT_COUNT,
                .audit = AUDIT_DEFAULT_CONFIG,
                .control = { CONTROL_MAX_CONNECTIONS, CONTROL_MAX_PER_USER, CONTROL_QUEUE_BYTES },
                .gateway = { GATEWAY_MAX_CONNECTIONS, GATEWAY_HEADER_TIMEOUT_MS },
                .control_max_loads = LOADER_MAX_LOADS,
                .trace_sample = 1,
        };
        const char *file = NULL;
        int opt, e = 0;

        /* The file first, so options given on the command line win. */
        for (int i = 1; i + 1 < argc; i++)
                if (strcmp(argv[i], "--config") == 0)
                        file = argv[i + 1];
        if (file && read_file(file, cfg) < 0)
                goto fail;
        optind = 1;
        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (opt) {
                case 'h': usage(stdout); config_free(cfg); return 1;
                case 'c': break;
                case 'p': e = set_str(&cfg->policy_dir, optarg); break;
                case 's': e = set_str(&cfg->state_dir, optarg); break;
                case 'S': e = set_str(&cfg->socket_path, optarg); break;
                case 'r': e = set_str(&cfg->run_dir, optarg); break;
                case 'g': e = set_str(&cfg->group, optarg); break;
                case 'u': e = config_opt_uid_base("gadgetd", optarg, &cfg->uid_base); break;
                case 'U': e = config_opt_uid_count("gadgetd", optarg, &cfg->uid_count); break;
                case 'l': e = config_opt_limits_mode("gadgetd", optarg, &cfg->limits_mode); break;
                case 'D': cfg->allow_degraded_limits = true; break;
                case 'H':
                        if ((e = parse_count(optarg, HTTP_MAX_TOTAL_LIMIT, &cfg->http_requests_max)) < 0)
                                fprintf(stderr, "gadgetd: --http-requests-max: \"%s\" is not a number from 1 to %u\n",
                                        optarg, HTTP_MAX_TOTAL_LIMIT);
                        break;
                default: usage(stderr); goto fail;
                }
                if (e < 0)
                        goto fail;
        }
        if (uidpool_check_range(cfg->uid_base, cfg->uid_count) < 0) {
                fprintf(stderr, "gadgetd: host uids %u + %u: the range must end below 4294967294\n",
                        (unsigned)cfg->uid_base, cfg->uid_count);
                goto fail;
        }
        if (optind < argc) {
                fprintf(stderr, "gadgetd: unexpected argument \"%s\"\n", argv[optind]);
                usage(stderr);
                goto fail;
        }
        if ((!cfg->policy_dir && set_str(&cfg->policy_dir, CONFIG_POLICY_DIR) < 0) ||
            (!cfg->state_dir && set_str(&cfg->state_dir, CONFIG_STATE_DIR) < 0) ||
            (!cfg->run_dir && set_str(&cfg->run_dir, CONFIG_RUN_DIR) < 0) ||
            (!cfg->socket_path && set_str(&cfg->socket_path, CONFIG_SOCKET) < 0) ||
            (!cfg->group && set_str(&cfg->group, CONFIG_GROUP) < 0))
                goto fail;
        if (cfg->store_postgresql && !cfg->node && default_node(cfg) < 0)
                goto fail;
        return 0;
fail:
        config_free(cfg);
        return -EINVAL;
}

void config_free(struct config *cfg)
{
        free(cfg->policy_dir);
        free(cfg->state_dir);
        free(cfg->run_dir);
        free(cfg->socket_path);
        free(cfg->group);
        free(cfg->gateway_listen);
        free(cfg->gateway_token_file);
        free(cfg->metrics_listen);
        free(cfg->metrics_token_file);
        free(cfg->store_connection);
        free(cfg->node);
        free(cfg->peer_listen);
        free(cfg->trace_export);
        free(cfg->peer_cert);
        free(cfg->peer_key);
        free(cfg->peer_ca);
        free(cfg->peer_revoked);
        free(cfg->trusted_keys);
        *cfg = (struct config){ 0 };
}
