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
#include <unistd.h>

#include "system/audit.h"
#include "config.h"
#include "control/control.h"
#include "system/fds.h"
#include "gateway/gateway.h"
#include "bindings/http.h"
#include "system/instance.h"
#include "system/log.h"
#include "system/notify.h"
#include "control/loader.h"
#include "control/peercred.h"
#include "core/peer.h"
#include "policy.h"
#include "run.h"
#include "core/unit.h"

#define QUIT_TIMEOUT_MS 5000

struct unit *daemon_find(struct daemon *d, const char *name)
{
        for (struct unit *u = d->units; u; u = u->next)
                if (strcmp(u->policy->name, name) == 0)
                        return u;
        return NULL;
}

static void unit_unlink(struct daemon *d, struct unit *u)
{
        for (struct unit **pp = &d->units; *pp; pp = &(*pp)->next)
                if (*pp == u) {
                        *pp = u->next;
                        return;
                }
}

/* Replaces a unit's policy with p and restarts it. Why this is safe: the
 * worker that still runs until the restart stops it is judged by the new
 * policy (as the unit's bindings are), so nothing keeps the old one. */
static void replace_policy(struct unit *u, struct policy *p, uint64_t hash)
{
        if (u->peer)
                peer_set_policy(u->peer, p);
        policy_free(u->policy);
        u->policy = p;
        u->policy_hash = hash;
        unit_restart(u);
}

/* Installs policy p (taken over) of hash: loads, restarts or leaves its
 * gadget; what tells the caller what happened. */
static int install(struct daemon *d, struct policy *p, uint64_t hash, bool from_dir,
                   enum daemon_reload_what *what, char **name, char *msg, size_t len)
{
        const char *path = p->path;
        struct unit *u = daemon_find(d, p->name);
        if (name)
                *name = strdup(p->name);
        if (u && strcmp(u->policy->path, p->path) != 0) {
                snprintf(msg, len, "%s: a gadget named \"%s\" is already loaded from %s", path, p->name,
                         u->policy->path);
                policy_free(p);
                return -EEXIST;
        }
        if (u && u->policy_hash == hash) {
                *what = RELOAD_UNCHANGED;
                snprintf(msg, len, "%s is already loaded and unchanged", p->name);
                /* A reload leaves it as it is, stopped or failed too; only
                 * an explicit load asks for it to run again. */
                if (!from_dir && (u->state == UNIT_STOPPED || u->state == UNIT_FAILED))
                        unit_restart(u);
                policy_free(p);
                return 0;
        }
        if (u) {
                *what = RELOAD_RESTARTED;
                snprintf(msg, len, "%s changed: restarting", p->name);
                u->from_dir = u->from_dir || from_dir;
                replace_policy(u, p, hash);
                return 0;
        }
        u = unit_new(d, p, &d->unit_hooks);
        if (!u) {
                policy_free(p);
                snprintf(msg, len, "out of memory");
                return -ENOMEM;
        }
        u->policy_hash = hash;
        u->from_dir = from_dir;
        u->next = d->units;
        d->units = u;
        *what = RELOAD_LOADED;
        unit_start(u);
        if (u->state == UNIT_FAILED)
                snprintf(msg, len, "loaded %s, but it failed: %s", p->name, u->cause);
        else
                snprintf(msg, len, "loaded %s", p->name);
        return 0;
}

/* A load request's file has been read: install it, answer the caller. */
struct load_req {
        struct daemon *d;
        daemon_load_fn *done;
        void *arg;
};

static void load_read(void *arg, int err, struct policy *p, uint64_t hash, const char *msg)
{
        struct load_req *r = arg;
        char out[8192];
        char *name = NULL;
        enum daemon_reload_what what;
        if (err >= 0)
                err = install(r->d, p, hash, false, &what, &name, out, sizeof out);
        r->done(r->arg, err, name, err < 0 && !p ? msg : out);
        free(name);
        free(r);
}

int daemon_load(struct daemon *d, const char *path, const struct peercred *cred, daemon_load_fn *done,
                void *arg)
{
        struct load_req *r = malloc(sizeof *r);
        int e;
        if (!r)
                return -ENOMEM;
        *r = (struct load_req){ .d = d, .done = done, .arg = arg };
        if ((e = loader_start(d, path, cred, load_read, r)) < 0)
                free(r);
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

void daemon_reload(struct daemon *d, daemon_reload_fn *note, void *arg)
{
        size_t n;
        char **files = list_policies(d->policy_dir, &n);
        char msg[8192];

        log_msg(L_INFO, NULL, "reloading %s", d->policy_dir);
        for (size_t i = 0; i < n; i++) {
                enum daemon_reload_what what = RELOAD_ERROR;
                char *name = NULL;
                struct policy *p = NULL;
                uint64_t hash = 0;
                int e = loader_read(files[i], NULL, true, &p, &hash, msg, sizeof msg);
                if (e >= 0)
                        e = install(d, p, hash, true, &what, &name, msg, sizeof msg);
                if (e < 0) {
                        log_msg(L_ERR, NULL, "%s", msg);
                        what = RELOAD_ERROR;
                }
                if (note)
                        note(arg, what, what == RELOAD_ERROR ? msg : name);
                free(name);
        }
        /* Gadgets whose file left the directory are stopped and unloaded. */
        for (struct unit *u = d->units, *next; u; u = next) {
                next = u->next;
                bool present = false;
                for (size_t i = 0; i < n && !present; i++)
                        present = strcmp(files[i], u->policy->path) == 0;
                if (!u->from_dir || present)
                        continue;
                if (note)
                        note(arg, RELOAD_STOPPED, u->policy->name);
                u->remove_when_stopped = true;
                unit_stop(u, "its policy file was removed");
        }
        for (size_t i = 0; i < n; i++)
                free(files[i]);
        free(files);
        daemon_status_changed(d);
}

static void maybe_quit(struct daemon *d)
{
        if (!d->quitting)
                return;
        for (struct unit *u = d->units; u; u = u->next)
                if (u->child.pid > 0)
                        return;
        event_base_loopbreak(d->base);
}

void daemon_unit_stopped(struct daemon *d, struct unit *u)
{
        if (u->remove_when_stopped) {
                unit_unlink(d, u);
                log_msg(L_INFO, u->policy->name, "unloaded");
                unit_free(u);
        } else if (u->restart_pending && !d->quitting) {
                u->restart_pending = false;
                backoff_reset(&u->backoff);
                u->restarts++;
                unit_start(u);
        }
        daemon_status_changed(d);
        maybe_quit(d);
}

void daemon_log_added(struct daemon *d, struct unit *u, size_t lines)
{
        if (d->control)
                control_log_added(d->control, u, lines);
}

static struct unit *find_unit(void *arg, const char *name)
{
        return daemon_find(arg, name);
}

/* The daemon's hooks of its units (struct unit_hooks). */
static void unit_ready(void *arg, struct unit *u)
{
        daemon_status_changed(arg);
}

static void unit_exited(void *arg, struct unit *u)
{
        daemon_status_changed(arg);
}

static void unit_stopped(void *arg, struct unit *u)
{
        daemon_unit_stopped(arg, u);
}

static void unit_log_added(void *arg, struct unit *u, size_t lines)
{
        daemon_log_added(arg, u, lines);
}

void daemon_unit_hooks(struct daemon *d, struct unit_hooks *h)
{
        *h = (struct unit_hooks){ .ready = unit_ready, .exited = unit_exited, .stopped = unit_stopped,
                                  .log_added = unit_log_added, .arg = d, .bindings = &d->bindings };
}

void daemon_status_changed(struct daemon *d)
{
        size_t n = 0, ready = 0, failed = 0;
        for (struct unit *u = d->units; u; u = u->next) {
                n++;
                ready += u->state == UNIT_READY;
                failed += u->state == UNIT_FAILED;
        }
        notify_status(d->notify, n, ready, failed);
}

static void audit_added(void *arg, const char *gadget, const char *line)
{
        struct daemon *d = arg;
        if (d->control)
                control_audit_added(d->control, gadget, line);
}

static void quit_timeout(evutil_socket_t fd, short what, void *arg)
{
        struct daemon *d = arg;
        for (struct unit *u = d->units; u; u = u->next)
                unit_kill(u, "gadgetd is stopping");
        event_base_loopbreak(d->base);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
        struct daemon *d = arg;
        if (sig == SIGHUP) {
                notify_reloading(d->notify);
                daemon_reload(d, NULL, NULL);
                notify_ready(d->notify);
                return;
        }
        if (d->quitting)
                return;
        notify_stopping(d->notify);
        log_msg(L_INFO, NULL, "stopping every gadget");
        d->quitting = true;
        for (struct unit *u = d->units; u; u = u->next)
                unit_stop(u, "gadgetd is stopping");
        struct timeval tv = { .tv_sec = QUIT_TIMEOUT_MS / 1000 };
        d->ev_quit = evtimer_new(d->base, quit_timeout, d);
        if (d->ev_quit)
                event_add(d->ev_quit, &tv);
        maybe_quit(d);
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

void daemon_lock_refused(const char *what, const char *subject, const char *lock, int e, pid_t holder)
{
        if (e == -EBUSY && holder > 0)
                log_msg(L_ERR, NULL, "%s %s is in use by another gadgetd (pid %d): not starting", what, subject,
                        (int)holder);
        else if (e == -EBUSY)
                log_msg(L_ERR, NULL, "%s %s is in use by another gadgetd (its pid is not visible from here): "
                        "not starting", what, subject);
        else if (e == -EPERM)
                log_msg(L_ERR, NULL, "%s %s: lock file %s is not a regular file of gadgetd's own user with "
                        "one link: not starting", what, subject, lock);
        else
                log_msg(L_ERR, NULL, "%s %s: lock file %s: %s", what, subject, lock, strerror(-e));
}

int daemon_lock_state(struct daemon *d, bool shared)
{
        char path[4096];
        pid_t holder;
        int e;
        if ((e = make_dir(d->state_dir, 0700)) < 0) {
                log_msg(L_ERR, NULL, "state directory %s: %s", d->state_dir, strerror(-e));
                return e;
        }
        snprintf(path, sizeof path, "%s/gadgetd.lock", d->state_dir);
        if ((d->state_lock = instance_lock(path, shared, &holder)) < 0) {
                daemon_lock_refused("state directory", d->state_dir, path, d->state_lock, holder);
                return d->state_lock;
        }
        return 0;
}

/* The daemon's two locks: its state directory and its control socket (a
 * daemon with another state directory but the same socket would take the
 * socket from under this one). */
static int lock_instance(struct daemon *d)
{
        char path[4096];
        pid_t holder;
        int e;
        if ((e = daemon_lock_state(d, false)) < 0)
                return e;
        if (snprintf(path, sizeof path, "%s.lock", d->socket_path) >= (int)sizeof path)
                return -ENAMETOOLONG;
        if ((d->socket_lock = instance_lock(path, false, &holder)) < 0) {
                daemon_lock_refused("control socket", d->socket_path, path, d->socket_lock, holder);
                return d->socket_lock;
        }
        return 0;
}

int daemon_core_open(struct daemon *d)
{
        char err[512];
        int e;
        signal(SIGPIPE, SIG_IGN);
        if (!d->run)
                daemon_unit_hooks(d, &d->unit_hooks);
        /* First, while the lowest fd numbers are free (see spawn.h). */
        if ((e = spawn_helper_open(&d->helper, err, sizeof err)) < 0) {
                log_msg(L_ERR, NULL, "%s", err);
                return e;
        }
        if ((e = audit_open(d->state_dir, &d->audit_cfg, d->base, &d->audit)) < 0) {
                log_msg(L_ERR, NULL, "audit log in %s: %s", d->state_dir, strerror(-e));
                return e;
        }
        if ((e = http_new(d->base, d->http_requests_max, &d->http)) < 0) {
                log_msg(L_ERR, NULL, "HTTP client: %s", strerror(-e));
                return e;
        }
        d->bindings = (struct bindings_env){ .base = d->base, .state_dir = d->state_dir, .audit = d->audit,
                                             .http = d->http, .find = find_unit, .find_arg = d };
        filter_compiled(&d->filter);
        /* Workers never see gadgetd's fds (see spawn.c), but nothing else
         * gadgetd might start should either. */
        fds_cloexec_all();
        if (!d->uid_count)
                d->uid_count = UIDPOOL_DEFAULT_COUNT;
        if ((e = uidpool_open(&d->uids, UIDPOOL_LOCK_FILE, d->uid_base, d->uid_count)) < 0) {
                log_msg(L_ERR, NULL, "host uid pool %s: %s", UIDPOOL_LOCK_FILE,
                        e == -EPERM ? "not a regular file of gadgetd's own user" : strerror(-e));
                return e;
        }
        if ((e = limiter_open(&d->limiter, d->limits_want, d->allow_degraded_limits, d->run != NULL, err,
                                sizeof err)) < 0) {
                log_msg(L_ERR, NULL, "%s", err);
                return e;
        }
        d->limits_mode = d->limiter.mode;
        limiter_log(&d->limiter);
        /* gadgetd run's one start: its shell gets ready meanwhile. Only now:
         * under cgroup v2 the limiter has just moved gadgetd into a child of
         * its cgroup to enable controllers there, which a process of ours
         * still in that cgroup would make fail (EBUSY). */
        if (d->run)
                spare_fill(d);
        if (!d->run && spare_open(d) < 0) {
                log_msg(L_ERR, NULL, "spare sandbox: out of memory");
                return -ENOMEM;
        }
        return 0;
}

void daemon_core_close(struct daemon *d)
{
        spare_close(d);
        while (d->units) {
                struct unit *u = d->units;
                d->units = u->next;
                unit_free(u);
        }
        audit_close(d->audit);
        d->audit = NULL;
        http_free(d->http);
        d->http = NULL;
        uidpool_close(&d->uids);
        spawn_helper_close(&d->helper);
        limiter_close(&d->limiter);
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
        int e;
        raise_nofile();
        struct group *gr = getgrnam(d->group);
        d->group_gid = gr ? gr->gr_gid : (gid_t)-1;
        if (!gr)
                log_msg(L_WARN, NULL, "group %s does not exist: only root may use the control socket", d->group);
        if ((e = make_socket_dir(d->socket_path)) < 0 || (e = make_dir(d->run_dir, 0755)) < 0) {
                log_msg(L_ERR, NULL, "runtime directory: %s", strerror(-e));
                return e;
        }
        /* Before anything else is touched: a second gadgetd stops here. */
        if ((e = lock_instance(d)) < 0)
                return e;
        if ((e = daemon_core_open(d)) < 0)
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
        if ((e = control_open(d, &d->control_limits, &d->control)) < 0) {
                log_msg(L_ERR, NULL, "control socket %s: %s", d->socket_path, strerror(-e));
                return e;
        }
        if (d->gateway_listen &&
            (e = gateway_open(d, d->gateway_listen, d->gateway_token_file, &d->gateway_limits, &d->gateway)) < 0)
                return e;
        audit_listen(d->audit, audit_added, d);
        return 0;
}

static void teardown(struct daemon *d)
{
        daemon_core_close(d);
        gateway_free(d->gateway);  /* after the units: their pending calls were answered */
        control_free(d->control);
        loader_close(&d->loader);
        notify_free(d->notify);
        struct event *evs[] = { d->ev_term, d->ev_int, d->ev_hup, d->ev_quit };
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
}

int daemon_main(int argc, char **argv)
{
        struct daemon d = { .uids = { .lock_fd = -1 }, .helper = { -1, -1 }, .state_lock = -1, .socket_lock = -1 };
        struct config cfg;
        int e = config_parse_args(argc, argv, &cfg);
        if (e != 0)
                return e < 0 ? 2 : 0;
        d.policy_dir = cfg.policy_dir;
        d.state_dir = cfg.state_dir;
        d.socket_path = cfg.socket_path;
        d.run_dir = cfg.run_dir;
        d.group = cfg.group;
        d.uid_base = cfg.uid_base;
        d.uid_count = cfg.uid_count;
        d.limits_want = cfg.limits_mode;
        d.allow_degraded_limits = cfg.allow_degraded_limits;
        d.log_lines = cfg.log_lines;
        d.log_bytes = cfg.log_bytes;
        d.gateway_listen = cfg.gateway_listen;
        d.gateway_token_file = cfg.gateway_token_file;
        d.http_requests_max = cfg.http_requests_max;
        d.audit_cfg = cfg.audit;
        d.control_limits = cfg.control;
        d.loader.max = cfg.control_max_loads;
        d.gateway_limits = cfg.gateway;
        d.base = event_base_new();
        if (!d.base || setup(&d) < 0) {
                teardown(&d);
                config_free(&cfg);
                return 1;
        }
        log_msg(L_INFO, NULL, "policy directory %s, state directory %s, control socket %s",
                d.policy_dir, d.state_dir, d.socket_path);
        daemon_reload(&d, NULL, NULL);
        /* Loaded and listening: systemd may order the next units after us. */
        notify_ready(d.notify);
        event_base_dispatch(d.base);
        log_msg(L_INFO, NULL, "stopped");
        teardown(&d);
        config_free(&cfg);
        return 0;
}
