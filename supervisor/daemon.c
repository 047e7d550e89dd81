/* daemon: gadgetd's long-running mode. */
#include "daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdint.h>
#include <unistd.h>

#include "system/audit.h"
#include "config.h"
#include "cluster/forward.h"
#include "cluster/nodelink.h"
#include "control/control.h"
#include "gateway/gateway.h"
#include "metrics/metrics.h"
#include "system/instance.h"
#include "system/log.h"
#include "system/notify.h"
#include "system/loader.h"
#include "system/loads.h"
#include "system/releases.h"
#include "system/peercred.h"
#include "system/priority.h"
#include "alarms/alarms.h"
#include "tail/tail.h"
#include "core/core.h"
#include "policy.h"
#include "system/timer.h"
#include "system/monotime.h"
#include "contract.h"
#include "adopt.h"
#include "reexec.h"
#include "system/trace.h"
#include "trace_export.h"
#include "fdstore.h"

#define QUIT_TIMEOUT_MS 5000
/* gadgetctl daemon-reexec: how long it waits for the gadgets' calls in
 * flight to end, and how often it looks. */
#define REEXEC_WAIT_MS 2000
#define REEXEC_POLL_MS 2

struct daemon {
        struct event_base *base;
        struct config cfg;
        gid_t group_gid;           /* (gid_t)-1 if cfg.group does not exist */
        int state_lock;            /* STATE_DIR/gadgetd.lock (instance.h), or -1 */
        int socket_lock;           /* SOCKET.lock, or -1 */
        struct core *core;         /* every loaded gadget */
        struct control *control;
        struct loader loader;      /* policy files being read for load requests */
        struct gateway *gateway;   /* the browser gateway, if configured */
        struct metrics *metrics;   /* the metrics endpoint, if configured (MetricsListen=) */
        struct forward *forward;   /* the link to other nodes, if configured (PeerCertificate=) */
        struct traces *traces;     /* the spans of calls (TraceKeep=) */
        struct trace_export *trace_export; /* to a collector (TraceExport=), or NULL */
        struct event *ev_term, *ev_int, *ev_hup, *ev_quit;
        struct notify *notify;     /* sd_notify, watchdog */
        /* gadgetctl daemon-reexec: the binary's path when gadgetd started
         * (the file there now is run), its arguments, the wait for quiet. */
        char self_path[4096];
        char **argv;
        struct event *ev_reexec;
        uint64_t reexec_deadline_ms;
        /* The next image: what the previous one handed on (-1: none). */
        int reexec_fd;
        bool reexeced;
        bool adopted;              /* its state read: it runs what the previous image ran, as it was */
        bool from_store;           /* that state came from systemd's fd store (fdstore.h) */
        bool handoff;              /* SIGTERM with FdStore=yes: the quiet is for the fd store */
        struct reexec_state adopt;
        /* Loads answered once their records are written (load_persist):
         * those of one turn of the loop together, oldest first. */
        struct load_record *records, **records_tail;
        struct event *ev_records;
};

/* What the metrics endpoint tells of gadgetd's own clients. */
static void metrics_self(void *arg, struct metrics_self *out)
{
        struct daemon *d = arg;
        if (d->control)
                control_stats(d->control, &out->control_connections,
                              &out->refused[METRICS_BUDGET_CONTROL_CONNECTIONS], &out->refused[METRICS_BUDGET_CONTROL_SLOW]);
        if (d->gateway)
                gateway_stats(d->gateway, &out->gateway_connections, &out->refused[METRICS_BUDGET_GATEWAY_CONNECTIONS],
                              &out->refused[METRICS_BUDGET_GATEWAY_DEADLINE]);
        if (d->traces)
                out->spans_dropped = traces_dropped(d->traces);
        if (d->forward) {
                out->refused[METRICS_BUDGET_NODE_TRACES] = forward_traces_refused(d->forward);
                forward_sessions(d->forward, &out->link_in, &out->link_out);
        }
}

static void status_changed(struct daemon *d)
{
        size_t n, ready, failed;
        core_count(d->core, &n, &ready, &failed);
        notify_status(d->notify, n, ready, failed);
}

/* The keys and bindings new changes from old's, one a line, in keys;
 * the restart's cause naming them (by reload or a load) in why. */
static void changed_keys(const struct policy *old, const struct policy *new, bool from_dir, char *keys,
                         size_t keys_len, char *why, size_t why_len)
{
        const char *v[64];
        size_t n = policy_changed(old, new, v, sizeof v / sizeof *v), o = 0, w;
        keys[0] = '\0';
        w = (size_t)snprintf(why, why_len, "policy changed by %s%s", from_dir ? "reload" : "gadgetctl load",
                             n ? ": " : "");
        for (size_t i = 0; i < n; i++) {
                if (o < keys_len)
                        o += (size_t)snprintf(keys + o, keys_len - o, "%s%s", i ? "\n" : "", v[i]);
                if (w < why_len)
                        w += (size_t)snprintf(why + w, why_len - w, "%s%s", i ? ", " : "", v[i]);
        }
}

/* Installs policy p (taken over) of hash: loads, restarts or leaves its
 * gadget; what tells the caller what happened, keys (with RELOAD_RESTARTED,
 * if not NULL) the keys that changed, one a line. */
static int install(struct daemon *d, struct policy *p, uint64_t hash, bool from_dir,
                   enum control_reload_what *what, char **name, char *keys, size_t keys_len, char *msg, size_t len)
{
        const char *path = p->path;
        struct unit *u = core_find(d->core, p->name);
        char why[256] = "", none[1];
        struct unit_origin o = { .hash = hash, .from_dir = from_dir, .why = why };
        if (!keys)
                keys = none, keys_len = sizeof none;
        keys[0] = '\0';
        if (name)
                *name = strdup(p->name);
        if (u && strcmp(unit_policy(u)->path, p->path) != 0) {
                snprintf(msg, len, "%s: a gadget named \"%s\" is already loaded from %s", path, p->name,
                         unit_policy(u)->path);
                policy_free(p);
                return -EEXIST;
        }
        if (u && unit_policy_hash(u) == hash) {
                *what = RELOAD_UNCHANGED;
                snprintf(msg, len, "%s is already loaded and unchanged", p->name);
                /* A reload leaves it as it is, stopped or failed too; only
                 * an explicit load asks for it to run again. */
                enum unit_state st = unit_state_of(u);
                if (!from_dir && (st == UNIT_STOPPED || st == UNIT_FAILED)) {
                        unit_restart(u, "gadgetctl load");
                        snprintf(msg, len, "started %s (policy unchanged)", p->name);
                }
                /* Its file holds the policy it runs again. */
                unit_keep_policy(u, NULL, 0);
                policy_free(p);
                return 0;
        }
        if (u) {
                *what = RELOAD_RESTARTED;
                snprintf(msg, len, "restarting %s on its changed policy", p->name);
                changed_keys(unit_policy(u), p, from_dir, keys, keys_len, why, sizeof why);
                unit_replace_policy(u, p, &o);
                return 0;
        }
        if (!(u = core_add(d->core, p, &o))) {
                snprintf(msg, len, "out of memory");
                return -ENOMEM;
        }
        *what = RELOAD_LOADED;
        unit_activate(u);
        if (unit_state_of(u) == UNIT_FAILED)
                snprintf(msg, len, "loaded %s, but it failed: %s", unit_name(u), unit_cause(u));
        else
                snprintf(msg, len, "loaded %s", unit_name(u));
        return 0;
}

/* A load request's file has been read: install it, answer the caller. */
struct load_req {
        struct daemon *d;
        bool runtime;              /* gadgetctl load --runtime: not recorded */
        uid_t uid;                 /* who loads it, for its record */
        gid_t gid;
        control_load_done *done;
        void *arg;
};

/* A load's record in the state directory (system/loads.h) to be made, or
 * dropped for a load --runtime of the name, with the answer that waits for
 * it. */
struct load_record {
        struct load_req *r;
        char *name, *path;
        char out[8192];
        struct load_record *next;
};

/* What became of each record goes at the end of its load's answer,
 * failures too: a load is never forgotten silently. */
static void records_write(struct daemon *d)
{
        struct load_record *head = d->records;
        size_t n = 0, i = 0;
        d->records = NULL;
        d->records_tail = &d->records;
        for (struct load_record *w = head; w; w = w->next)
                n++;
        struct loads_change *c = calloc(n ? n : 1, sizeof *c);
        for (struct load_record *w = head; c && w; w = w->next, i++)
                c[i] = (struct loads_change){ .name = w->name, .path = w->r->runtime ? NULL : w->path,
                                              .uid = w->r->uid, .gid = w->r->gid };
        if (c)
                loads_apply(d->cfg.state_dir, c, n);
        i = 0;
        for (struct load_record *w = head, *next; w; w = next, i++) {
                struct load_req *r = w->r;
                size_t len = strlen(w->out);
                int e = c ? c[i].result : -ENOMEM;
                next = w->next;
                if (e < 0) {
                        log_msg(L_ERR, w->name, "cannot %s its load in %s/%s: %s", r->runtime ? "drop" : "record",
                                d->cfg.state_dir, LOADS_FILE, strerror(-e));
                        snprintf(w->out + len, sizeof w->out - len,
                                 r->runtime ? " (until gadgetd restarts; but its earlier record could not be "
                                              "dropped: %s)"
                                            : " (until gadgetd restarts only: it could not be recorded: %s)",
                                 strerror(-e));
                } else if (r->runtime) {
                        snprintf(w->out + len, sizeof w->out - len, " (until gadgetd restarts: --runtime)");
                }
                r->done(r->arg, 0, w->name, w->out);
                free(w->name);
                free(w->path);
                free(w);
                free(r);
        }
        free(c);
}

static void records_cb(evutil_socket_t fd, short what, void *arg)
{
        records_write(arg);
}

/* Queues the record of a load that installed name from path, and its
 * answer out: 1, or 0 if none is to be made (the policy directory's
 * gadgets are loaded at each start anyway), or -ENOMEM. Written at the end of this
 * turn of the loop, with the other loads of the turn: a burst of 1,000
 * loads writes and syncs the list a few times, not 1,000 (each write is
 * the whole list, so one each was quadratic). */
static int load_persist(struct load_req *r, const char *name, const char *path, const char *out)
{
        struct daemon *d = r->d;
        struct unit *u = core_find(d->core, name);
        if (!u || unit_from_dir(u))
                return 0;
        if (!d->ev_records)
                d->ev_records = evtimer_new(d->base, records_cb, d);
        struct load_record *w = calloc(1, sizeof *w);
        if (w && (w->name = strdup(name)) && (w->path = strdup(path))) {
                w->r = r;
                snprintf(w->out, sizeof w->out, "%s", out);
                if (!d->records_tail)
                        d->records_tail = &d->records;
                *d->records_tail = w;
                d->records_tail = &w->next;
                if (d->ev_records)
                        timer_arm_ms(d->ev_records, 0);
                else
                        records_write(d);
                return 1;
        }
        if (w)
                free(w->name);
        free(w);
        return -ENOMEM;
}

static void load_read(void *arg, int err, struct policy *p, uint64_t hash, const char *msg)
{
        struct load_req *r = arg;
        char out[8192];
        char *name = NULL;
        char *path = p ? strdup(p->path) : NULL;
        enum control_reload_what what;
        if (err >= 0 && !path) {
                policy_free(p);
                p = NULL;
                err = -ENOMEM;
                msg = "out of memory";
        }
        if (err >= 0)
                err = install(r->d, p, hash, false, &what, &name, NULL, 0, out, sizeof out);
        int queued = err >= 0 && name ? load_persist(r, name, path, out) : 0;
        if (queued > 0) { /* answered once written */
                free(path);
                free(name);
                return;
        }
        if (queued < 0) {
                size_t n = strlen(out);
                snprintf(out + n, sizeof out - n, " (until gadgetd restarts only: it could not be recorded: %s)",
                         strerror(-queued));
        }
        r->done(r->arg, err, name, err < 0 && !p ? msg : out);
        free(path);
        free(name);
        free(r);
}

/* The control socket's load (struct control_env). */
static int load(void *arg, const char *path, bool runtime, const struct peercred *cred, control_load_done *done,
                void *done_arg)
{
        struct daemon *d = arg;
        struct load_req *r = malloc(sizeof *r);
        int e;
        if (!r)
                return -ENOMEM;
        *r = (struct load_req){ .d = d, .runtime = runtime, .uid = cred->uid, .gid = cred->gid, .done = done,
                                .arg = done_arg };
        if ((e = loader_start(&d->loader, path, cred, load_read, r)) < 0)
                free(r);
        return e;
}

/* A restart's policy file, read again. */
struct restart_req {
        struct daemon *d;
        char *name;
        char why[64];               /* the stop's cause: who asked, from the socket's credentials */
        control_load_done *done;
        void *arg;
};

/* Restarts the gadget on what its file holds now; a file with errors, or
 * one that names another gadget, leaves it as it is. */
static void restart_read(void *arg, int err, struct policy *p, uint64_t hash, const char *msg)
{
        struct restart_req *r = arg;
        struct unit *u = core_find(r->d->core, r->name);
        char out[8192];
        if (!u) {
                policy_free(p);
                snprintf(out, sizeof out, "gadget \"%s\" was unloaded while its policy file was read", r->name);
                err = -ENOENT;
        } else if (err < 0) {
                snprintf(out, sizeof out, "restart of %s refused: its policy file has errors, and it keeps its "
                         "current policy:\n%s", r->name, msg);
        } else if (strcmp(p->name, r->name) != 0) {
                snprintf(out, sizeof out, "restart of %s refused: %s now names gadget \"%s\" (load it to add that "
                         "gadget); %s keeps its current policy", r->name, p->path, p->name, r->name);
                policy_free(p);
                err = -EINVAL;
        } else if (hash == unit_policy_hash(u)) {
                policy_free(p);
                unit_restart(u, r->why);
                snprintf(out, sizeof out, "restarting %s", r->name);
        } else {
                const struct unit_origin o = { .hash = hash, .from_dir = unit_from_dir(u), .why = r->why };
                log_msg(L_INFO, r->name, "restart: its policy file changed, restarting on it");
                unit_replace_policy(u, p, &o);
                snprintf(out, sizeof out, "restarting %s on its changed policy", r->name);
        }
        if (err < 0 && u)
                log_msg(L_WARN, r->name, "%s", out);
        r->done(r->arg, err, r->name, out);
        status_changed(r->d);
        free(r->name);
        free(r);
}

/* The control socket's forget (struct control_env): gadgetctl unload. */
static int forget(void *arg, const char *name)
{
        struct daemon *d = arg;
        /* After the loads before it, whose records may still wait. */
        if (d->records)
                records_write(d);
        return loads_forget(d->cfg.state_dir, name);
}

/* The control socket's restart (struct control_env): the file is read
 * again as a load reads it, with the requester's rights; the policy
 * directory's as a reload reads it (gadgetd's own, links followed). */
static int restart(void *arg, const char *name, const struct peercred *cred, control_load_done *done,
                   void *done_arg)
{
        struct daemon *d = arg;
        struct unit *u = core_find(d->core, name);
        struct restart_req *r = malloc(sizeof *r);
        int e = 0;
        if (!u)
                e = -ENOENT;
        else if (!r || !(r->name = strdup(name)))
                e = -ENOMEM;
        if (e < 0) {
                free(r);
                return e;
        }
        r->d = d;
        r->done = done;
        r->arg = done_arg;
        /* Who asked, from the socket's peer credentials (never from
         * anything the client says). */
        snprintf(r->why, sizeof r->why, "gadgetctl restart by uid %u", (unsigned)cred->uid);
        const char *path = unit_policy(u)->path;
        if (unit_from_dir(u)) {
                struct policy *p = NULL;
                uint64_t hash = 0;
                char msg[8192];
                e = loader_read(path, NULL, true, &p, &hash, msg, sizeof msg);
                restart_read(r, e, p, hash, msg);
                return 0;
        }
        if ((e = loader_start(&d->loader, path, cred, restart_read, r)) < 0) {
                free(r->name);
                free(r);
        }
        return e;
}

static bool is_policy_name(const char *f)
{
        size_t n = strlen(f);
        return n > 7 && strcmp(f + n - 7, ".policy") == 0 && f[0] != '.';
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.policy files of the policy directory, sorted, as full paths. */
static char **list_policies(const char *dir, size_t *n)
{
        DIR *dp = opendir(dir);
        struct dirent *de;
        char **v = NULL;
        *n = 0;
        if (!dp)
                return NULL;
        while ((de = readdir(dp))) {
                if (!is_policy_name(de->d_name))
                        continue;
                char **nv = realloc(v, (*n + 1) * sizeof *v);
                if (!nv)
                        break;
                v = nv;
                if (asprintf(&v[*n], "%s/%s", dir, de->d_name) < 0)
                        break;
                (*n)++;
        }
        closedir(dp);
        if (v)
                qsort(v, *n, sizeof *v, cmp_str);
        return v;
}

/* The unit whose policy is read from path, or NULL. */
static struct unit *unit_of_file(struct daemon *d, const char *path)
{
        for (struct unit *u = core_first(d->core); u; u = unit_next(u))
                if (strcmp(unit_policy(u)->path, path) == 0)
                        return u;
        return NULL;
}

/* The lines of msg. */
static unsigned count_lines(const char *msg)
{
        unsigned n = *msg ? 1 : 0;
        for (const char *s = msg; (s = strchr(s, '\n')); s++)
                n++;
        return n;
}

/* Re-reads the policy directory: new files start, removed ones stop,
 * changed ones restart, unchanged ones stay, and a gadget whose file has
 * errors keeps the policy it runs (its info says so until a reload reads
 * its file whole). */
static void reload(void *arg, control_reload_note *note, void *note_arg)
{
        struct daemon *d = arg;
        const char *dir = d->cfg.policy_dir;
        size_t n;
        char **files = list_policies(dir, &n);
        char msg[8192];

        log_msg(L_INFO, NULL, "reloading %s", dir);
        for (size_t i = 0; i < n; i++) {
                enum control_reload_what what = RELOAD_ERROR;
                char *name = NULL, keys[1024] = "";
                struct policy *p = NULL;
                uint64_t hash = 0;
                int e = loader_read(files[i], NULL, true, &p, &hash, msg, sizeof msg);
                if (e >= 0)
                        e = install(d, p, hash, true, &what, &name, keys, sizeof keys, msg, sizeof msg);
                struct unit *kept = NULL;
                if (e < 0 && e != -EEXIST && (kept = unit_of_file(d, files[i]))) {
                        unsigned n_err = count_lines(msg);
                        log_msg(L_ERR, unit_name(kept), "kept on its previous policy: %s has %u error%s:\n%s",
                                files[i], n_err, n_err == 1 ? "" : "s", msg);
                        unit_keep_policy(kept, msg, n_err);
                        what = RELOAD_KEPT;
                        free(name);
                        name = strdup(unit_name(kept));
                } else if (e < 0) {
                        log_msg(L_ERR, NULL, "%s", msg);
                        what = RELOAD_ERROR;
                }
                if (note)
                        note(note_arg, what, what == RELOAD_ERROR ? msg : name ? name : "", keys);
                free(name);
        }
        /* Gadgets whose file left the directory are stopped and unloaded. */
        for (struct unit *u = core_first(d->core), *next; u; u = next) {
                next = unit_next(u);
                const char *path = unit_policy(u)->path;
                bool present = files && bsearch(&path, files, n, sizeof *files, cmp_str);
                if (!unit_from_dir(u) || present)
                        continue;
                if (note)
                        note(note_arg, RELOAD_STOPPED, unit_name(u), "");
                core_unload(d->core, u, "its policy file was removed");
        }
        for (size_t i = 0; i < n; i++)
                free(files[i]);
        free(files);
        status_changed(d);
}

/* At start, after the policy directory: the files gadgetctl load added
 * before (system/loads.h), each read with its loader's rights. One that is
 * gone or now has errors is logged, naming its file, and skipped. */
static void load_recorded(struct daemon *d)
{
        struct loads_entry *v;
        size_t n, bad;
        char msg[8192];
        size_t swept = releases_sweep(d->cfg.state_dir);
        if (swept)
                log_msg(L_INFO, NULL, "%s/%s: removed %zu leftovers of installs cut short", d->cfg.state_dir,
                        RELEASES_DIR, swept);
        int e = loads_read(d->cfg.state_dir, &v, &n, &bad);
        if (e < 0) {
                log_msg(L_ERR, NULL, "cannot read the recorded loads %s/%s: %s", d->cfg.state_dir, LOADS_FILE,
                        strerror(-e));
                return;
        }
        if (bad)
                log_msg(L_WARN, NULL, "%s/%s: %zu lines are not records of a load, skipped", d->cfg.state_dir,
                        LOADS_FILE, bad);
        for (size_t i = 0; i < n; i++) {
                struct peercred cred = { .uid = v[i].uid, .gid = v[i].gid };
                struct policy *p = NULL;
                uint64_t hash = 0;
                enum control_reload_what what;
                e = loader_read(v[i].path, v[i].uid ? &cred : NULL, false, &p, &hash, msg, sizeof msg);
                if (e >= 0)
                        e = install(d, p, hash, false, &what, NULL, NULL, 0, msg, sizeof msg);
                if (e < 0)
                        log_msg(L_ERR, v[i].name, "not loaded again (gadgetctl load of %s): %s", v[i].path, msg);
                else
                        log_msg(L_INFO, v[i].name, "loaded again from %s (gadgetctl load)", v[i].path);
        }
        loads_free(v, n);
        status_changed(d);
}

static void maybe_quit(struct daemon *d)
{
        if (core_stopping(d->core) && core_running(d->core) == 0)
                event_base_loopbreak(d->base);
}

/* The daemon's hooks of its units (struct unit_hooks). */
static void unit_ready(void *arg, struct unit *u)
{
        status_changed(arg);
}

static void unit_exited(void *arg, struct unit *u)
{
        status_changed(arg);
}

static void unit_stopped(void *arg, struct unit *u)
{
        status_changed(arg);
        maybe_quit(arg);
}

static void unit_log_added(void *arg, struct unit *u, size_t lines)
{
        struct daemon *d = arg;
        if (d->control)
                control_log_added(d->control, u, lines);
}

static void audit_added(void *arg, const char *gadget, const char *line)
{
        struct daemon *d = arg;
        if (d->control)
                control_audit_added(d->control, gadget, line);
}

/* The re-exec did not happen: every input is read again, the requester
 * told why. */
/* What the quiet held (workers, control, gateway, node link) is read again. */
static void quiet_end(struct daemon *d)
{
        core_reexec_hold(d->core, false);
        control_reexec_hold(d->control, false);
        if (d->gateway)
                gateway_reexec_hold(d->gateway, false);
        if (d->metrics)
                metrics_reexec_hold(d->metrics, false);
        if (d->forward)
                forward_reexec_hold(d->forward, false);
}

static void reexec_fail(struct daemon *d, int code, const char *why)
{
        quiet_end(d);
        log_msg(L_WARN, NULL, "re-exec refused, gadgetd serves on: %s", why);
        control_reexec_failed(d->control, code, why);
}

/* A test's damage to the state handed on (GADGETD_TEST_REEXEC_DAMAGE=
 * truncate or flip): the next image must fail closed. */
static void reexec_damage(int fd)
{
        const char *how = getenv("GADGETD_TEST_REEXEC_DAMAGE");
        struct stat st;
        if (!how || fstat(fd, &st) < 0 || st.st_size < 2)
                return;
        if (strcmp(how, "truncate") == 0 && ftruncate(fd, st.st_size / 2) == 0)
                return;
        uint8_t b;
        if (strcmp(how, "flip") == 0 && pread(fd, &b, 1, st.st_size / 2) == 1) {
                b ^= 0x40;
                if (pwrite(fd, &b, 1, st.st_size / 2) != 1)
                        log_msg(L_WARN, NULL, "test damage: %s", strerror(errno));
        }
}

/* Quiet: the state goes into a memfd, exactly its fds lose close-on-exec,
 * and the binary at gadgetd's path runs in this process. Returns only if
 * that failed. */
/* What the next image needs, in s (to free with state_free): 0 or -ENOMEM. */
static int state_build(struct daemon *d, struct reexec_state *s)
{
        size_t n = 0;
        for (struct unit *u = core_first(d->core); u; u = unit_next(u))
                n++;
        size_t nc = control_reexec_clients(d->control, NULL, SIZE_MAX);
        *s = (struct reexec_state){ .gateway.fd = -1, .peer_fd = -1, .metrics_fd = -1 };
        if (!(s->units = calloc(n + 1, sizeof *s->units)) || !(s->clients = calloc(nc + 1, sizeof *s->clients))) {
                free(s->units);
                return -ENOMEM;
        }
        control_reexec_info(d->control, &s->listen_fd, &s->activated, &s->answer_fd, &s->answer_id);
        /* Kept, not taken again: no other gadgetd gets in between. */
        s->state_lock = d->state_lock;
        s->socket_lock = d->socket_lock;
        s->uid_lock = core_uid_lock_fd(d->core);
        if (d->gateway)
                gateway_reexec_handoff(d->gateway, &s->gateway);
        s->lease_until_ms = core_reexec_lease_until(d->core);
        s->peer_fd = d->forward ? forward_listen_fd(d->forward) : -1;
        s->metrics_fd = d->metrics ? metrics_listen_fd(d->metrics) : -1;
        for (struct unit *u = core_first(d->core); u; u = unit_next(u))
                unit_save(u, &s->units[s->n++]);
        s->n_clients = control_reexec_clients(d->control, s->clients, nc);
        bool asked = false;
        for (size_t i = 0; i < s->n_clients; i++)
                asked = asked || s->clients[i].fd == s->answer_fd;
        if (!asked)
                s->answer_fd = -1; /* it left, or its input ended */
        return 0;
}

static void state_free(struct reexec_state *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->units[i].log);
        free(s->units);
        free(s->clients);
}

static void reexec_exec(struct daemon *d)
{
        struct reexec_state s;
        char why[4400], fdarg[16];
        size_t argc = 0;
        /* Loads installed and waiting for their records: written, answered. */
        if (d->records)
                records_write(d);
        while (d->argv[argc])
                argc++;
        char **argv = calloc(argc + 3, sizeof *argv);
        if (!argv || state_build(d, &s) < 0) {
                free(argv);
                reexec_fail(d, GADGET_EFAILED, "out of memory");
                return;
        }
        size_t n = s.n;
        int fd = reexec_state_write(&s);
        if (fd < 0) {
                snprintf(why, sizeof why, "cannot write the state for the new image: %s", strerror(-fd));
        } else {
                reexec_damage(fd);
                memcpy(argv, d->argv, argc * sizeof *argv);
                snprintf(fdarg, sizeof fdarg, "%d", fd);
                argv[argc] = REEXEC_OPTION;
                argv[argc + 1] = fdarg;
                core_reexec_drop_spare(d->core);
                reexec_fds_inherit(&s, true);
                log_msg(L_INFO, NULL, "re-executing %s, handing on %zu gadgets", d->self_path, n);
                execv(d->self_path, argv);
                int e = errno;
                reexec_fds_inherit(&s, false);
                close(fd);
                snprintf(why, sizeof why, "cannot execute %s: %s", d->self_path, strerror(e));
        }
        state_free(&s);
        free(argv);
        reexec_fail(d, GADGET_EFAILED, why);
}

static void stop_all(struct daemon *d);

/* SIGTERM with FdStore=yes, the gadgets quiet: the state and its fds go to
 * systemd's fd store, each sandbox is told to wait for the next gadgetd
 * (within FdStoreTimeout=), and gadgetd exits without stopping them, as
 * an exec would (nothing is torn down). If that cannot be done, a stop. */
static void handoff_exit(struct daemon *d)
{
        struct reexec_state s;
        char why[600] = "out of memory";
        int fd = -1, e = state_build(d, &s);
        if (e == 0 && (fd = reexec_state_write(&s)) < 0)
                snprintf(why, sizeof why, "cannot write the state: %s", strerror(-fd));
        /* The spare shell lives in gadgetd's cgroup: systemd kills it. */
        core_reexec_drop_spare(d->core);
        if (fd >= 0 && fdstore_push(&s, fd, why, sizeof why) == 0) {
                core_handoff_signal(d->core, false);
                log_msg(L_INFO, NULL, "handed %zu gadgets to the next gadgetd through systemd's fd store; exiting "
                        "without stopping them (a stop closes the store and they end)", s.n);
                fflush(stderr);
                _exit(0);
        }
        if (fd >= 0)
                close(fd);
        if (e == 0)
                state_free(&s);
        log_msg(L_WARN, NULL, "fd store: stopping every gadget instead: %s", why);
        stop_all(d);
}

static void reexec_poll(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        char why[512], msg[600];
        int e = core_reexec_quiet(d->core, why, sizeof why);
        if (e == 0)
                e = control_reexec_quiet(d->control, why, sizeof why);
        if (e == 0 && d->gateway)
                e = gateway_reexec_quiet(d->gateway, why, sizeof why);
        if (e == 0 && d->metrics)
                e = metrics_reexec_quiet(d->metrics, why, sizeof why);
        /* Last: its goodbyes promise that nothing more is read. */
        if (e == 0 && d->forward)
                e = forward_reexec_quiet(d->forward, why, sizeof why);
        if (e == -EBUSY && monotime_ms() < d->reexec_deadline_ms) {
                timer_arm_ms(d->ev_reexec, REEXEC_POLL_MS);
                return;
        }
        if (e < 0 && d->handoff) {
                log_msg(L_WARN, NULL, "fd store: stopping every gadget instead: %s%s", why,
                        e == -EBUSY ? " after 2 s" : "");
                stop_all(d);
                return;
        }
        if (e < 0) {
                snprintf(msg, sizeof msg, "%s%s", why, e == -EBUSY ? " after 2 s: try again" : "");
                reexec_fail(d, e == -EBUSY ? GADGET_EBUSY : GADGET_EUNAVAILABLE, msg);
                return;
        }
        /* At a frame boundary of every worker, none of them read further. */
        core_reexec_hold(d->core, true);
        if (d->handoff)
                handoff_exit(d);
        else
                reexec_exec(d);
}

/* Why gadgetd cannot be handed on now, by an exec or the fd store (NULL:
 * it can). */
static const char *handon_refused(struct daemon *d)
{
        const char *why = NULL;
        if (!LIST_EMPTY(&d->loader.jobs) || !STAILQ_EMPTY(&d->loader.waiting))
                why = "policy files are being read for gadgetctl load or restart: try again";
        return why;
}

/* New control requests, gateway requests and node-link sessions wait (in
 * the sockets and the kernel's backlog) while the calls in flight end;
 * reexec_poll looks. */
static void quiet_begin(struct daemon *d)
{
        control_reexec_hold(d->control, true);
        if (d->gateway)
                gateway_reexec_hold(d->gateway, true);
        if (d->metrics)
                metrics_reexec_hold(d->metrics, true);
        if (d->forward)
                forward_reexec_hold(d->forward, true);
        d->reexec_deadline_ms = monotime_ms() + REEXEC_WAIT_MS;
        timer_arm_ms(d->ev_reexec, 0);
}

/* gadgetctl daemon-reexec (struct control_env). */
static void reexec_begin(void *arg)
{
        struct daemon *d = arg;
        const char *why = handon_refused(d);
        if (!why && !d->self_path[0])
                why = "gadgetd's own binary path is unknown";
        if (why) {
                control_reexec_failed(d->control, GADGET_EUNAVAILABLE, why);
                return;
        }
        if (!d->ev_reexec && !(d->ev_reexec = evtimer_new(d->base, reexec_poll, d))) {
                control_reexec_failed(d->control, GADGET_EFAILED, "out of memory");
                return;
        }
        quiet_begin(d);
}

static void quit_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        core_kill_all(d->core, "gadgetd is stopping");
        event_base_loopbreak(d->base);
}

static void stop_all(struct daemon *d)
{
        if (d->handoff) {
                /* What the quiet held is read again: a stop serves them to its end. */
                d->handoff = false;
                quiet_end(d);
        }
        notify_stopping(d->notify);
        log_msg(L_INFO, NULL, "stopping every gadget");
        core_stop_all(d->core, "gadgetd is stopping");
        d->ev_quit = evtimer_new(d->base, quit_timeout, d);
        if (d->ev_quit)
                timer_arm_ms(d->ev_quit, QUIT_TIMEOUT_MS);
        maybe_quit(d);
}

/* SIGTERM with FdStore=yes: the handoff begins as a re-exec does (new
 * requests wait, the calls in flight end within 2 s), or, if it cannot be
 * had, the stop. */
static void handoff_begin(struct daemon *d)
{
        const char *why = handon_refused(d);
        if (!why)
                why = core_handoff_refused(d->core);
        if (!why)
                why = fdstore_refusal();
        if (!why && !d->ev_reexec && !(d->ev_reexec = evtimer_new(d->base, reexec_poll, d)))
                why = "out of memory";
        if (why) {
                log_msg(L_WARN, NULL, "fd store: stopping every gadget instead: %s", why);
                stop_all(d);
                return;
        }
        notify_stopping(d->notify);
        d->handoff = true;
        quiet_begin(d);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
        struct daemon *d = arg;
        if (sig == SIGHUP) {
                notify_reloading(d->notify);
                reload(d, NULL, NULL);
                notify_ready(d->notify);
                return;
        }
        if (core_stopping(d->core) || d->handoff)
                return;
        if (sig == SIGTERM && d->cfg.fd_store)
                handoff_begin(d);
        else
                stop_all(d);
}

static int make_dir(const char *path, mode_t mode)
{
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* The directory of the control socket, created if missing. */
static int make_socket_dir(const char *socket_path)
{
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", socket_path);
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = '\0';
        return make_dir(dir, 0755);
}

/* The daemon's two locks: its state directory and its control socket (a
 * daemon with another state directory but the same socket would take the
 * socket from under this one). */
static int lock_instance(struct daemon *d)
{
        char path[4096];
        if (d->adopt.state_lock >= 0 && d->adopt.socket_lock >= 0) {
                /* Held since the previous image took them. */
                d->state_lock = d->adopt.state_lock;
                d->socket_lock = d->adopt.socket_lock;
                fcntl(d->state_lock, F_SETFD, FD_CLOEXEC);
                fcntl(d->socket_lock, F_SETFD, FD_CLOEXEC);
                return 0;
        }
        if ((d->state_lock = instance_lock_state(d->cfg.state_dir, false)) < 0)
                return d->state_lock;
        if (snprintf(path, sizeof path, "%s.lock", d->cfg.socket_path) >= (int)sizeof path)
                return -ENAMETOOLONG;
        if ((d->socket_lock = instance_take("control socket", d->cfg.socket_path, path, false)) < 0)
                return d->socket_lock;
        return 0;
}

static int open_core(struct daemon *d)
{
        const struct unit_hooks hooks = { .ready = unit_ready, .exited = unit_exited, .stopped = unit_stopped,
                                          .log_added = unit_log_added, .arg = d };
        const struct config *c = &d->cfg;
        int e = traces_new(c->node, c->trace_keep_set ? c->trace_keep : TRACE_KEEP_DEFAULT, c->trace_sample,
                           &d->traces);
        if (e < 0)
                return e;
        if (c->trace_export && traces_on(d->traces) &&
            (e = trace_export_new(d->base, d->traces, c->trace_export, &d->trace_export)) < 0) {
                log_msg(L_ERR, NULL, "TraceExport=: %s", strerror(-e));
                return e;
        }
        const struct core_config cc = {
                .base = d->base, .state_dir = c->state_dir, .uid_base = c->uid_base, .uid_count = c->uid_count,
                .limits_want = c->limits_mode, .allow_degraded_limits = c->allow_degraded_limits,
                .require_types = c->require_types,
                .log_lines = c->log_lines, .log_bytes = c->log_bytes, .audit = c->audit,
                .http_requests_max = c->http_requests_max, .traces = d->traces,
                .store_connection = c->store_postgresql ? c->store_connection : NULL, .node = c->node, .peer_listen = c->peer_listen,
                .node_forget_ms = c->node_forget_ms, .lease_ttl_ms = c->lease_ttl_ms,
                .lease_poll_ms = c->lease_poll_ms, .quick_failure_ms = c->quick_failure_ms,
                .uid_lock_kept = d->adopt.uid_lock >= 0, .uid_lock_fd = d->adopt.uid_lock,
                .handoff_ms = !c->fd_store ? 0 : c->fd_store_timeout_ms ? (uint32_t)c->fd_store_timeout_ms : 60000,
        };
        if ((e = core_open(&cc, &hooks, &d->core)) < 0)
                return e;
        /* The alarms and Schedule= calls listen to the units. */
        if ((e = alarms_listen(d->core)) < 0)
                log_msg(L_ERR, NULL, "alarms: %s", strerror(-e));
        /* So do the tail bindings (gadgetd run has none to feed: Of= never
         * names the gadget itself). */
        else if ((e = tail_listen(d->core)) < 0)
                log_msg(L_ERR, NULL, "tail: %s", strerror(-e));
        return e;
}

/* The link to other nodes: fail closed, gadgetd does not start without
 * the link its configuration asks for. */
static int open_forward(struct daemon *d)
{
        const struct config *c = &d->cfg;
        if (d->adopt.peer_fd >= 0 && (!c->peer_cert || !c->peer_listen)) {
                close(d->adopt.peer_fd); /* PeerListen= is gone since the previous image */
                d->adopt.peer_fd = -1;
        }
        if (!c->peer_cert)
                return 0;
        const struct nodelink_config nc = { .node = c->node, .listen = c->peer_listen, .cert = c->peer_cert,
                                            .key = c->peer_key, .ca = c->peer_ca,
                                            .adopt = d->reexeced && d->adopt.peer_fd >= 0,
                                            .adopt_fd = d->adopt.peer_fd };
        char err[600];
        int e = forward_new(d->base, d->core, &nc, c->peer_revoked, &d->forward, err, sizeof err);
        if (e < 0)
                log_msg(L_ERR, NULL, "the link to other nodes: %s", err);
        else
                log_msg(L_INFO, NULL, "the link to other nodes: %s%s, mutual TLS", c->peer_listen ? "listening on " : "calls out only (no PeerListen=)", c->peer_listen ? c->peer_listen : "");
        return e;
}

static const char *gateway_addr(void *arg)
{
        struct daemon *d = arg;
        return d->gateway ? gateway_address(d->gateway) : NULL;
}

static int open_control(struct daemon *d)
{
        const struct control_env env = {
                .base = d->base, .core = d->core, .socket_path = d->cfg.socket_path, .group = d->cfg.group,
                .group_gid = d->group_gid, .limits = d->cfg.control, .load = load, .restart = restart,
                .forget = forget, .reload = reload, .reexec = reexec_begin,
                .gateway_address = gateway_addr, .arg = d,
                .adopt = d->reexeced && d->adopt.listen_fd >= 0, .adopt_fd = d->adopt.listen_fd,
                .adopt_activated = d->adopt.activated,
                .releases = { .state_dir = d->cfg.state_dir,
                              .trusted = (const uint8_t (*)[32])d->cfg.trusted_keys,
                              .n_trusted = d->cfg.n_trusted_keys, .allow_unsigned = d->cfg.allow_unsigned,
                              .keep = d->cfg.versions_kept ? d->cfg.versions_kept : RELEASES_KEEP,
                              .conninfo = d->cfg.store_postgresql ? d->cfg.store_connection : NULL,
                              .node = d->cfg.node },
        };
        int e = control_open(&env, &d->control);
        if (e < 0)
                log_msg(L_ERR, NULL, "control socket %s: %s", d->cfg.socket_path, strerror(-e));
        return e;
}

/* Each running gadget holds five fds in gadgetd (RPC socket, report pipe,
 * pidfd, two output pipes), so a thousand need more than the usual soft
 * limit of 1024: it goes up to the hard limit (the service's LimitNOFILE=).
 * Nothing in gadgetd uses select(), and workers start with their own fds
 * and limit only. */
static void raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        log_msg(L_WARN, NULL, "cannot raise the open files limit: %s", strerror(errno));
        }
}

static int setup(struct daemon *d)
{
        const struct config *c = &d->cfg;
        int e;
        raise_nofile();
        /* Before any thread or sandbox is started: they start at nice 0. */
        char why[120];
        if ((e = priority_loop(why, sizeof why)) < 0) {
                log_msg(L_ERR, NULL, "cannot keep gadgetd's nice from its gadgets: %s", strerror(-e));
                return e;
        }
        if (why[0])
                log_msg(L_INFO, NULL, "event loop: %s", why);
        struct group *gr = getgrnam(c->group);
        d->group_gid = gr ? gr->gr_gid : (gid_t)-1;
        if (!gr)
                log_msg(L_WARN, NULL, "group %s does not exist: only root may use the control socket", c->group);
        if ((e = make_socket_dir(c->socket_path)) < 0 || (e = make_dir(c->run_dir, 0755)) < 0) {
                log_msg(L_ERR, NULL, "runtime directory: %s", strerror(-e));
                return e;
        }
        /* Before anything else is touched: a second gadgetd stops here. */
        if ((e = lock_instance(d)) < 0)
                return e;
        char adopted[300] = "";
        if ((e = open_core(d)) < 0)
                return e;
        if (d->reexeced)
                d->adopted = adopt_units(d->core, &d->adopt, adopted, sizeof adopted);
        /* Their wait for this gadgetd is over (fdstore.h). */
        if (d->from_store)
                core_handoff_signal(d->core, true);
        if ((e = open_forward(d)) < 0)
                return e;
        d->ev_term = evsignal_new(d->base, SIGTERM, signal_cb, d);
        d->ev_int = evsignal_new(d->base, SIGINT, signal_cb, d);
        d->ev_hup = evsignal_new(d->base, SIGHUP, signal_cb, d);
        if (!d->ev_term || !d->ev_int || !d->ev_hup || event_add(d->ev_term, NULL) < 0 ||
            event_add(d->ev_int, NULL) < 0 || event_add(d->ev_hup, NULL) < 0)
                return -ENOMEM;
        if ((e = notify_open(d->base, &d->notify)) < 0) {
                log_msg(L_ERR, NULL, "systemd notifications: %s", strerror(-e));
                return e;
        }
        if ((e = open_control(d)) < 0)
                return e;
        /* The connections of the previous image go on where they were. */
        for (size_t i = 0; i < d->adopt.n_clients; i++)
                if ((e = control_adopt_client(d->control, &d->adopt.clients[i])) < 0)
                        log_msg(L_WARN, NULL, "a control connection of the previous image closed: %s",
                                strerror(-e));
        if (d->adopt.answer_fd >= 0)
                control_reexec_done(d->control, d->adopt.answer_fd, d->adopt.answer_id, adopted);
        if (c->gateway_listen &&
            (e = gateway_open(d->core, c->gateway_listen, c->gateway_token_file, &c->gateway, &d->adopt.gateway,
                         &d->gateway)) < 0)
                return e;
        const struct metrics_env menv = { .core = d->core, .self = metrics_self, .arg = d };
        if (d->adopt.metrics_fd >= 0 && !c->metrics_listen) {
                close(d->adopt.metrics_fd); /* MetricsListen= is gone since the previous image */
                d->adopt.metrics_fd = -1;
        }
        if (c->metrics_listen && (e = metrics_open(&menv, c->metrics_listen, c->metrics_token_file,
                                                   d->adopt.metrics_fd, &d->metrics)) < 0)
                return e;
        audit_listen(core_audit(d->core), audit_added, d);
        return 0;
}

static void teardown(struct daemon *d)
{
        /* Loads installed and waiting for their records: written, answered. */
        if (d->records)
                records_write(d);
        if (d->ev_records)
                event_free(d->ev_records);
        forward_free(d->forward);  /* calls to other nodes fail, theirs here lose their answer */
        core_close(d->core);       /* first: the units' pending calls are answered */
        trace_export_free(d->trace_export);
        traces_free(d->traces);
        metrics_free(d->metrics);
        gateway_free(d->gateway);
        control_free(d->control);
        loader_close(&d->loader);
        notify_free(d->notify);
        struct event *evs[] = { d->ev_term, d->ev_int, d->ev_hup, d->ev_quit, d->ev_reexec };
        for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
                if (evs[i])
                        event_free(evs[i]);
        if (d->base)
                event_base_free(d->base);
        /* Last: the socket is gone (control_free) before another may start. */
        if (d->socket_lock >= 0)
                close(d->socket_lock);
        if (d->state_lock >= 0)
                close(d->state_lock);
        reexec_state_free(&d->adopt);
        free(d->argv);
}

/* --reexec-state FD, taken out of argv (the re-exec passes it last):
 * FD, -1 if absent, -2 if not an fd number above 2. */
static int take_reexec_option(int *argc, char **argv)
{
        for (int i = 1; i < *argc; i++) {
                if (strcmp(argv[i], REEXEC_OPTION) != 0)
                        continue;
                char *end = NULL;
                long fd = i + 1 < *argc ? strtol(argv[i + 1], &end, 10) : -1;
                if (!end || *end || end == argv[i + 1] || fd < 3 || fd > 1 << 20)
                        return -2;
                memmove(&argv[i], &argv[i + 2], (size_t)(*argc - i - 1) * sizeof *argv);
                *argc -= 2;
                return (int)fd;
        }
        return -1;
}

/* The binary's path now, for the re-exec ("" if unknown). */
static void self_path(char *out, size_t len)
{
        ssize_t n = readlink("/proc/self/exe", out, len - 1);
        out[n > 0 ? n : 0] = '\0';
        size_t l = strlen(out), k = strlen(" (deleted)");
        if (l > k && strcmp(out + l - k, " (deleted)") == 0)
                out[l - k] = '\0';
}

int daemon_main(int argc, char **argv)
{
        struct daemon d = { .state_lock = -1, .socket_lock = -1, .reexec_fd = -1,
                            .adopt = { .listen_fd = -1, .state_lock = -1, .socket_lock = -1, .uid_lock = -1,
                                       .answer_fd = -1, .gateway.fd = -1, .peer_fd = -1,
                                       .metrics_fd = -1 } };
        if ((d.reexec_fd = take_reexec_option(&argc, argv)) == -2) {
                fprintf(stderr, "gadgetd: %s needs the number of an open fd above 2\n", REEXEC_OPTION);
                return 2;
        }
        /* Or what a previous gadgetd left in systemd's fd store. */
        char stored[160] = "";
        if (d.reexec_fd < 0 && (d.reexec_fd = fdstore_take(stored, sizeof stored)) >= 0)
                d.from_store = true;
        if (d.reexec_fd >= 0) {
                d.reexeced = true;
                adopt_read(d.reexec_fd, &d.adopt);
        }
        if (stored[0])
                log_msg(d.from_store ? L_INFO : L_ERR, NULL, "%s", stored);
        self_path(d.self_path, sizeof d.self_path);
        d.argv = calloc((size_t)argc + 1, sizeof *d.argv);
        if (d.argv)
                memcpy(d.argv, argv, (size_t)argc * sizeof *argv);
        int e = config_parse_args(argc, argv, &d.cfg);
        if (e != 0) {
                free(d.argv);
                return e < 0 ? 2 : 0;
        }
        d.base = event_base_new();
        loader_init(&d.loader, d.base, d.cfg.control_max_loads);
        if (!d.base || setup(&d) < 0) {
                teardown(&d);
                config_free(&d.cfg);
                return 1;
        }
        log_msg(L_INFO, NULL, "policy directory %s, state directory %s, control socket %s",
                d.cfg.policy_dir, d.cfg.state_dir, d.cfg.socket_path);
        /* A re-exec is no reload: the gadgets adopted are what runs. */
        if (!d.adopted) {
                reload(&d, NULL, NULL);
                load_recorded(&d);
        }
        /* Loaded and listening: systemd may order the next units after us. */
        notify_ready(d.notify);
        event_base_dispatch(d.base);
        log_msg(L_INFO, NULL, "stopped");
        teardown(&d);
        config_free(&d.cfg);
        return 0;
}
