/* daemon: gadgetd as a long-running supervisor — options, the registry of
 * loaded gadgets, the policy directory, signals — on one libevent loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <event2/event.h>

#include "system/audit.h"
#include "bindings/bindings.h"
#include "control/control.h"
#include "core/unit.h"
#include "filter.h"
#include "gateway/gateway.h"
#include "limits/limiter.h"
#include "control/loader.h"
#include "spawn/spare.h"
#include "spawn/spawn.h"
#include "spawn/uidpool.h"

struct unit;
struct control;
struct peercred;

struct daemon {
        struct event_base *base;
        const char *policy_dir;
        const char *state_dir;
        const char *socket_path;
        const char *run_dir;
        const char *group;         /* may use the control socket besides root */
        gid_t group_gid;           /* (gid_t)-1 if the group does not exist */
        uid_t uid_base;
        unsigned uid_count;        /* host uids base..base+count-1 (0: UIDPOOL_DEFAULT_COUNT) */
        const char *limits_mode;   /* how resource limits are enforced (limiter.mode) */
        enum limiter_mode limits_want;  /* --limits-mode */
        bool allow_degraded_limits;
        uint64_t log_lines, log_bytes; /* [Daemon] LogLinesPerSecond=, LogBytesPerSecond= (0: default) */
        struct limiter limiter;
        struct gadget_filter filter;
        struct spawn_helper helper; /* gadgetd-sandbox, every worker starts as it */
        struct spare spare;        /* a sandbox shell ready for the next start (not in gadgetd run) */
        struct uidpool uids;
        int state_lock;            /* STATE_DIR/gadgetd.lock (instance.h), or -1 */
        int socket_lock;           /* SOCKET.lock, or -1 (the daemon only) */
        struct unit *units;        /* every loaded gadget */
        struct control *control;
        struct loader loader;      /* policy files being read for load requests */
        struct control_limits control_limits;  /* [Daemon] ControlMaxConnections=, ... */
        struct gateway_limits gateway_limits;  /* [Gateway] MaxConnections=, HeaderTimeout= */
        const char *gateway_listen;      /* [Gateway] Listen=, NULL: no gateway */
        const char *gateway_token_file;  /* [Gateway] TokenFile= */
        struct gateway *gateway;         /* the browser gateway, if configured */
        struct audit *audit;       /* STATE_DIR/audit.log */
        struct audit_config audit_cfg;  /* [Audit] */
        struct http *http;         /* HTTP requests of http bindings */
        unsigned http_requests_max; /* HTTPRequestsMax=, 0: the default */
        struct event *ev_term, *ev_int, *ev_hup, *ev_quit;
        bool quitting;
        struct run_ctx *run;       /* gadgetd run: its one gadget (NULL in the daemon) */
        struct unit_hooks unit_hooks; /* what the units of the daemon call (daemon_unit_hooks) */
        struct bindings_env bindings; /* what their bindings may use (daemon_core_open) */
        struct notify *notify;     /* sd_notify, watchdog (NULL in gadgetd run) */
};

enum daemon_reload_what {
        RELOAD_LOADED, RELOAD_STOPPED, RELOAD_RESTARTED, RELOAD_UNCHANGED, RELOAD_ERROR,
};
typedef void daemon_reload_fn(void *arg, enum daemon_reload_what what, const char *text);

int daemon_main(int argc, char **argv);
struct unit *daemon_find(struct daemon *d, const char *name);
/* The end of a load: 0 with the gadget's name and a summary in msg, or
 * -errno with every error in msg ("FILE:LINE: ..." lines). */
typedef void daemon_load_fn(void *arg, int err, const char *name, const char *msg);
/* Loads one policy file and starts its gadget; a loaded gadget of the same
 * file is restarted if the file changed. The file is read off the loop
 * with cred's rights (NULL: gadgetd's), and for a cred other than root the
 * messages show no text of the file. done runs later, on the loop. 0,
 * -EBUSY if cred's user has as many loads in flight as it may, -errno. */
int daemon_load(struct daemon *d, const char *path, const struct peercred *cred, daemon_load_fn *done,
                void *arg);
/* Re-reads the policy directory: new files start, removed ones stop,
 * changed ones restart, unchanged ones stay. */
void daemon_reload(struct daemon *d, daemon_reload_fn *note, void *arg);
/* What both modes need to run gadgets (audit, HTTP, filters, uid pool),
 * and its end (every unit freed first). */
int daemon_core_open(struct daemon *d);
/* Takes the lock file of d->state_dir (made if missing): exclusive for the
 * daemon, shared among gadgetd run processes. On refusal, logs which
 * process holds it. 0 or -errno. */
int daemon_lock_state(struct daemon *d, bool shared);
/* Logs why a lock file of an instance was refused. */
void daemon_lock_refused(const char *what, const char *subject, const char *lock, int e, pid_t holder);
void daemon_core_close(struct daemon *d);
/* The daemon's hooks of its units (d->unit_hooks, struct unit_hooks);
 * gadgetd run installs its own, calling these two. */
void daemon_unit_hooks(struct daemon *d, struct unit_hooks *h);
void daemon_unit_stopped(struct daemon *d, struct unit *u);
void daemon_log_added(struct daemon *d, struct unit *u, size_t lines);
void daemon_status_changed(struct daemon *d);
