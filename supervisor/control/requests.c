/* requests: one handler per control request, from a table. Requests are
 * checked by control.c before they get here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/audit.h"
#include "system/log.h"
#include "system/releases.h"
#include "store/store.h"
#include "client.h"
#include "control.h"
#include "deploy_state.h"
#include "bindings/bindings.h"
#include "core/core.h"
#include "core/denials.h"
#include "answer.h"
#include "contract.h"
#include "policy.h"
#include "sandbox_abi.h"

/* The gadget name of request id, its info in *in if in is not NULL; NULL
 * (and the client told) if there is none. */
static struct unit *find(struct client *cl, uint64_t id, const char *name, struct unit_info *in)
{
        struct unit *u = core_find(client_env(cl)->core, name);
        if (!u)
                client_error(cl, id, GADGET_ENOTFOUND, "no gadget named \"%s\"", name);
        else if (in)
                unit_info(u, in);
        return u;
}

static void fill_info(Control__GadgetInfo *gi, const struct unit_info *in)
{
        gi->name = (char *)in->name;
        gi->state = (char *)in->state;
        gi->cause = (char *)in->cause;
        gi->pid = in->pid;
        gi->program_pid = in->program_pid;
        gi->uptime_ms = in->uptime_ms;
        gi->restarts = in->restarts;
        gi->calls = in->calls;
        gi->in_flight = in->in_flight;
        gi->memory_bytes = in->memory_bytes;
        gi->tasks = in->tasks;
        gi->cpu_usec = in->cpu_usec;
        gi->start_us = in->start_us;
        gi->node = (char *)(in->node ? in->node : "");
        gi->epoch = in->epoch;
        gi->start = (char *)in->start;
        gi->active_ago_ms = in->active_ago_ms;
        gi->next_alarm_ms = in->next_alarm_ms;
        gi->kept_errors = in->kept_errors;
        gi->denials = in->denials ? in->denials->total : 0;
}

/* text's lines as an array, in one allocation (free the array only);
 * NULL with *n 0 for "" or when out of memory. */
static char **split_lines(const char *text, size_t *n)
{
        size_t k = *text ? 1 : 0, len = strlen(text);
        *n = 0;
        for (const char *s = text; (s = strchr(s, '\n')); s++)
                k++;
        if (!k)
                return NULL;
        char **v = malloc(k * sizeof *v + len + 1);
        if (!v)
                return NULL;
        char *copy = memcpy((char *)(v + k), text, len + 1);
        for (char *s = copy, *nl; s; s = nl ? nl + 1 : NULL) {
                if ((nl = strchr(s, '\n')))
                        *nl = '\0';
                v[(*n)++] = s;
        }
        return v;
}

/* A load's or a restart's answer, which comes later: once the file was
 * read and, unless no_block, once the gadget is ready (or failed). */
struct later {
        struct client_load *ans;    /* the client, while it is there */
        bool no_block, restart;
        char *text;                 /* what was done, while the gadget starts */
};

/* NULL with errno as client_load_new's. */
static struct later *later_new(struct client *cl, uint64_t id, bool no_block, bool restart)
{
        struct later *w = calloc(1, sizeof *w);
        if (!w || !(w->ans = client_load_new(cl, id))) {
                int e = w ? errno : ENOMEM;
                free(w);
                errno = e;
                return NULL;
        }
        w->no_block = no_block;
        w->restart = restart;
        return w;
}

/* Frees w; its client, or NULL if it left. */
static struct client *later_end(struct later *w)
{
        struct client *cl = client_load_end(w->ans);
        free(w->text);
        free(w);
        return cl;
}

/* The gadget became ready, or why it did not (through calls_wake). */
static void ready_done(void *arg, uint64_t id, const Gadget__Value *res, int code, const char *message)
{
        struct later *w = arg;
        char *text = w->text;
        w->text = NULL;
        struct client *cl = later_end(w);
        if (cl && res)
                client_done(cl, id, "%s: ready", text);
        else if (cl && strncmp(text, "restarted ", 10) == 0) /* it did not happen */
                client_error(cl, id, code, "restart of %s failed: %s", text + 10, message);
        else if (cl)
                client_error(cl, id, code, "%s, but %s", text, message);
        free(text);
}

/* Answers text with u's state now. One another node runs: the verbs of
 * gadgetctl act on the node they are asked of, so its process there was
 * neither started nor restarted (docs/cluster.md). */
static void answer_state(struct client *cl, uint64_t id, struct unit *u, const char *text)
{
        struct unit_info in;
        unit_info(u, &in);
        if (unit_state_of(u) == UNIT_REMOTE && in.node && in.node[0])
                client_done(cl, id, "%s runs on node %s: its policy was read on this node; its process there is "
                            "not restarted from here (gadgetctl restart on node %s does that)", in.name, in.node,
                            in.node);
        else
                client_done(cl, id, "%s: %s", text, in.state);
}

/* Answers text once gadget name is ready (its start under way), or at
 * once for one that is ready, idle (Start=on-demand) or another node's. */
static void answer_when_ready(struct later *w, uint64_t id, const char *name, const char *text)
{
        struct client *cl = w->ans->client;
        struct unit *u = core_find(client_env(cl)->core, name);
        char msg[400];
        int code = 1;
        if (u && !(w->text = strdup(text))) {
                code = GADGET_EINTERNAL;
                snprintf(msg, sizeof msg, "out of memory");
        }
        /* Charged to cl: it ends if cl leaves (calls_owner_gone). */
        const struct call_req cq = { .done = ready_done, .cbdata = w, .tag = id, .until_ready = true,
                                     .owner = &cl->calls };
        if (u && code == 1)
                code = calls_wake(u, &cq, msg, sizeof msg);
        if (code == 0)
                return;
        later_end(w);
        if (code != 1 && u && strstr(text, unit_cause(u)) && unit_cause(u)[0])
                client_error(cl, id, code, "%s", text); /* it says why already */
        else if (code != 1)
                client_error(cl, id, code, "%s, but %s", text, msg);
        else if (u && unit_state_of(u) == UNIT_IDLE)
                client_done(cl, id, "%s: idle (starts at its first call)", text);
        else if (u && unit_state_of(u) == UNIT_READY)
                client_done(cl, id, "%s: ready", text);
        else if (!u)
                client_done(cl, id, "%s", text);
        else
                answer_state(cl, id, u, text);
}

/* A load or restart was done (the daemon's): answer now, or once ready. */
static void later_done(void *arg, int e, const char *name, const char *msg)
{
        struct later *w = arg;
        uint64_t id = w->ans->id;
        char text[8192];
        /* "restarting NAME ..." (a restart, a load of a changed file)
         * becomes "restarted NAME ...: ready". */
        if (e >= 0 && !w->no_block && strncmp(msg, "restarting ", 11) == 0)
                snprintf(text, sizeof text, "restarted %s", msg + 11);
        else
                snprintf(text, sizeof text, "%s", msg);
        if (e >= 0 && !w->no_block && w->ans->client && name) {
                answer_when_ready(w, id, name, text);
                return;
        }
        bool restart = w->restart;
        struct client *cl = later_end(w);
        if (!cl)
                return;
        if (e == -ENOENT && restart)
                client_error(cl, id, GADGET_ENOTFOUND, "%s", text);
        else if (e < 0)
                client_error(cl, id, e == -EEXIST ? GADGET_EFAILED : GADGET_EINVAL, "%s", text);
        else
                client_done(cl, id, "%s", text);
}

/* The reading of a file could not begin (e < 0), or its answer could
 * not wait (errno e > 0, client_load_new). */
static void later_refused(struct client *cl, uint64_t id, int e)
{
        if (e > 0)
                client_load_refused(cl, id, e);
        else if (e == -EBUSY)
                client_error(cl, id, GADGET_EBUSY, "busy: uid %u has as many policy loads in progress as it "
                             "may (ControlMaxLoads); try again when they end", (unsigned)cl->cred.uid);
        else
                client_error(cl, id, GADGET_EINTERNAL, "cannot read the policy file: %s", strerror(-e));
}

/* The file is read off the loop, as the requesting user (env->load). */
static void on_load(struct client *cl, const Control__Request *q)
{
        const struct control_env *env = client_env(cl);
        struct later *w = later_new(cl, q->id, q->load->no_block, false);
        int e = w ? env->load(env->arg, q->load->path, q->load->runtime, &cl->cred, later_done, w) : errno;
        if (e == 0)
                return;
        if (w)
                later_end(w);
        later_refused(cl, q->id, e);
}

static void on_stop(struct client *cl, const Control__Request *q)
{
        struct unit *u = find(cl, q->id, q->stop->name, NULL);
        if (!u)
                return;
        unit_stop(u, "stopped by gadgetctl");
        client_done(cl, q->id, "stopping %s", unit_name(u));
}

/* Its policy file is read again first (env->restart). */
static void on_restart(struct client *cl, const Control__Request *q)
{
        const struct control_env *env = client_env(cl);
        if (!find(cl, q->id, q->restart->name, NULL))
                return;
        struct later *w = later_new(cl, q->id, q->restart->no_block, true);
        int e = w ? env->restart(env->arg, q->restart->name, &cl->cred, later_done, w) : errno;
        if (e == 0)
                return;
        if (w)
                later_end(w);
        later_refused(cl, q->id, e);
}

static void wake_done(void *arg, uint64_t id, const Gadget__Value *res, int code, const char *message)
{
        struct client *cl = arg;
        if (res)
                client_done(cl, id, "ready");
        else
                client_error(cl, id, code, "%s", message);
}

/* Wakes u for request id: answered once the gadget is ready. */
static void on_wake_of(struct client *cl, uint64_t id, struct unit *u)
{
        const struct call_req cq = { .done = wake_done, .cbdata = cl, .tag = id, .owner = &cl->calls };
        char msg[400];
        int code = calls_wake(u, &cq, msg, sizeof msg);
        if (code == 1)
                client_done(cl, id, "ready");
        else if (code)
                client_error(cl, id, code, "%s", msg);
}

/* gadgetctl wake: answered once the gadget is ready. */
static void on_wake(struct client *cl, const Control__Request *q)
{
        struct unit *u = find(cl, q->id, q->wake->name, NULL);
        if (u)
                on_wake_of(cl, q->id, u);
}

/* gadgetctl start: a stopped or failed gadget starts; an idle one (or one
 * of Start=on-demand, which is idle once started) is woken as by wake,
 * answered once ready; one running already is a success that says so. */
static void on_start(struct client *cl, const Control__Request *q)
{
        struct unit_info in;
        struct unit *u = find(cl, q->id, q->start->name, &in);
        if (!u)
                return;
        enum unit_state st = unit_state_of(u);
        if (st == UNIT_STOPPED || st == UNIT_FAILED) {
                unit_start_again(u);
                st = unit_state_of(u);
                unit_info(u, &in);
                if (st == UNIT_FAILED) {
                        client_error(cl, q->id, GADGET_EFAILED, "gadget \"%s\" did not start: %s", in.name, in.cause);
                        return;
                }
                if (st == UNIT_STARTING && q->start->no_block) {
                        client_done(cl, q->id, "starting %s", in.name);
                        return;
                }
                if (st == UNIT_STARTING) {
                        char text[128];
                        struct later *w = later_new(cl, q->id, false, false);
                        snprintf(text, sizeof text, "started %s", in.name);
                        if (w)
                                answer_when_ready(w, q->id, in.name, text);
                        else
                                client_load_refused(cl, q->id, errno);
                        return;
                }
        }
        if (st == UNIT_READY) {
                client_done(cl, q->id, "%s is already active (ready)", in.name);
                return;
        }
        if (!unit_wakeable(u) && st != UNIT_REMOTE) {
                if (st == UNIT_STARTING)
                        client_done(cl, q->id, "%s is already starting", in.name);
                else
                        client_error(cl, q->id, GADGET_EBUSY, "gadget \"%s\" is %s%s%s: start it once it has "
                                     "stopped", in.name, in.state, in.cause[0] ? ": " : "", in.cause);
                return;
        }
        on_wake_of(cl, q->id, u);
}

/* gadgetctl unload: a gadget of gadgetctl load stops and is forgotten. One
 * whose file is in the policy directory is refused: forgetting it until
 * the next reload or restart of gadgetd would be a stop that says it is
 * more; its file is what keeps it. */
static void on_unload(struct client *cl, const Control__Request *q)
{
        struct unit *u = find(cl, q->id, q->unload->name, NULL);
        if (!u)
                return;
        if (unit_from_dir(u)) {
                client_error(cl, q->id, GADGET_EINVAL, "gadget \"%s\" comes from the policy directory (%s): "
                             "remove its file and run gadgetctl reload (gadgetctl stop stops it until then)",
                             q->unload->name, unit_policy(u)->path);
                return;
        }
        /* Its record goes first: a gadget unloaded must not come back at
         * gadgetd's next start. */
        const struct control_env *env = client_env(cl);
        int e = env->forget ? env->forget(env->arg, q->unload->name) : 0;
        /* The unit may be freed at once (nothing running): the name is the
         * request's, which matched it. */
        core_unload(env->core, u, "unloaded by gadgetctl");
        if (e < 0)
                client_done(cl, q->id, "unloading %s (but its record could not be removed: %s; it loads again "
                            "at gadgetd's next start)", q->unload->name, strerror(-e));
        else
                client_done(cl, q->id, "unloading %s", q->unload->name);
}

/* gadgetctl kill: the signal (checked by validate.c) goes to the sandbox's
 * PID 1, which passes it on to the program; its exit is like any other,
 * and Restart= decides what follows. */
static void on_kill(struct client *cl, const Control__Request *q)
{
        struct unit_info in;
        struct unit *u = find(cl, q->id, q->kill->name, &in);
        if (!u)
                return;
        char sig[16];
        gadget_signal_name(q->kill->signal, sig, sizeof sig);
        if (in.pid <= 0 && unit_state_of(u) == UNIT_REMOTE && in.node && in.node[0]) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "gadget \"%s\" runs on node %s, not on this one: "
                             "run gadgetctl kill on node %s", in.name, in.node, in.node);
                return;
        }
        if (in.pid <= 0) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "gadget \"%s\" has no process to send SIG%s to (%s)",
                             in.name, sig, in.state);
                return;
        }
        log_msg(L_INFO, in.name, "SIG%s sent by gadgetctl (uid %u)", sig, (unsigned)cl->cred.uid);
        unit_signal(u, q->kill->signal);
        client_done(cl, q->id, "sent SIG%s to %s (pid %d)", sig, in.name, (int)in.pid);
}

/* gadgetctl debug: the sandbox's init, the program's tracer (it explains
 * its crashes), lets go of it, so that the operator's strace -p or gdb -p
 * may attach (one tracer per process). Root only, as the debugger is. */
static void on_debug(struct client *cl, const Control__Request *q)
{
        struct unit_info in;
        if (cl->cred.uid != 0) {
                client_error(cl, q->id, GADGET_EDENIED, "gadgetctl debug lets a debugger attach to a gadget: "
                             "root only");
                return;
        }
        struct unit *u = find(cl, q->id, q->debug->name, &in);
        if (!u)
                return;
        if (in.pid <= 0 || in.program_pid <= 0 || unit_debug(u) < 0) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "gadget \"%s\" has no process on this node (%s)",
                             in.name, in.state);
                return;
        }
        log_msg(L_WARN, in.name, "no longer traced by its sandbox, for a debugger (gadgetctl debug, uid %u): "
                "its crashes are not explained until it starts again", (unsigned)cl->cred.uid);
        client_done(cl, q->id, "%s: its program (pid %d) may be traced now: strace -p %d, gdb -p %d; its "
                    "crashes are not explained until it starts again", in.name, (int)in.program_pid,
                    (int)in.program_pid, (int)in.program_pid);
}

/* The gadget's page on the gateway: its UI's, or the workshop's. The
 * address only: the gateway's token is never in an answer. */
static void on_workshop(struct client *cl, const Control__Request *q)
{
        const struct control_env *env = client_env(cl);
        struct unit *u = find(cl, q->id, q->workshop->name, NULL);
        if (!u)
                return;
        const char *addr = env->gateway_address ? env->gateway_address(env->arg) : NULL;
        if (!addr) {
                client_error(cl, q->id, GADGET_EUNAVAILABLE, "gadgetd has no gateway ([Gateway] in its config file)");
                return;
        }
        if (unit_policy(u)->ui)
                client_done(cl, q->id, "http://%s/gadgets/%s/ui", addr, unit_name(u));
        else
                client_done(cl, q->id, "http://%s/", addr);
}

/* gadgetctl cores: the cores kept of its crashes (CoreDump=). Root only:
 * a core holds the gadget's memory, its secrets with it. */
static void on_cores(struct client *cl, const Control__Request *q)
{
        if (cl->cred.uid != 0) {
                client_error(cl, q->id, GADGET_EDENIED, "gadgetctl cores lists cores, which hold a gadget's "
                             "memory: root only");
                return;
        }
        struct unit *u = core_find(client_env(cl)->core, q->cores->name);
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", q->cores->name);
                return;
        }
        struct unit_core_file *f;
        size_t n = unit_cores(u, &f);
        Control__CoreFile *files = calloc(n ? n : 1, sizeof *files), **ptrs = calloc(n ? n : 1, sizeof *ptrs);
        if (!files || !ptrs) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
        } else {
                for (size_t i = 0; i < n; i++) {
                        control__core_file__init(&files[i]);
                        files[i].time_ms = f[i].time_ms;
                        files[i].run = f[i].run;
                        files[i].signal = f[i].signal;
                        files[i].size = f[i].size;
                        files[i].path = f[i].path;
                        ptrs[i] = &files[i];
                }
                Control__CoreList cl_ = CONTROL__CORE_LIST__INIT;
                cl_.n_cores = n;
                cl_.cores = ptrs;
                client_answer(cl, q->id, &cl_.base);
        }
        free(files);
        free(ptrs);
        free(f);
}

static int cmp_info(const void *a, const void *b)
{
        return strcmp((*(Control__GadgetInfo *const *)a)->name, (*(Control__GadgetInfo *const *)b)->name);
}

static void on_list(struct client *cl, const Control__Request *q)
{
        struct core *core = client_env(cl)->core;
        size_t n = 0;
        for (struct unit *u = core_first(core); u; u = unit_next(u))
                n++;
        struct unit_info *in = calloc(n + 1, sizeof *in);
        Control__GadgetInfo **infos = answer_items(&control__gadget_info__descriptor, n);
        if (!in || !infos) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                goto out;
        }
        n = 0;
        for (struct unit *u = core_first(core); u; u = unit_next(u)) {
                unit_info(u, &in[n]);
                fill_info(infos[n], &in[n]);
                n++;
        }
        qsort(infos, n, sizeof *infos, cmp_info);
        Control__GadgetList gl = CONTROL__GADGET_LIST__INIT;
        gl.n_gadgets = n;
        gl.gadgets = infos;
        client_answer(cl, q->id, &gl.base);
out:
        free(in);
        free(infos);
}

/* "MemoryMax=64M" style lines for the limits of a gadget (at most 13). */
static size_t limit_lines(const struct policy *p, const struct unit_info *in, char lines[][64])
{
        size_t n = 0;
        snprintf(lines[n++], 64, "TmpSize=%llu", (unsigned long long)p->tmp_size);
        snprintf(lines[n++], 64, "LimitNOFILE=%llu", (unsigned long long)p->limit_nofile);
        snprintf(lines[n++], 64, "CallTimeout=%llums", (unsigned long long)p->call_timeout_ms);
        if (p->memory_max != POLICY_UNLIMITED)
                snprintf(lines[n++], 64, "MemoryMax=%llu", (unsigned long long)p->memory_max);
        if (p->tasks_max != POLICY_UNLIMITED)
                snprintf(lines[n++], 64, "TasksMax=%llu", (unsigned long long)p->tasks_max);
        if (p->cpu_quota)
                snprintf(lines[n++], 64, "CPUQuota=%u%%", p->cpu_quota);
        if (p->runtime_max_ms)
                snprintf(lines[n++], 64, "RuntimeMax=%llums", (unsigned long long)p->runtime_max_ms);
        snprintf(lines[n++], 64, "StartTimeout=%llums", (unsigned long long)p->start_timeout_ms);
        if (p->core_dump && p->state_max != POLICY_UNLIMITED)
                snprintf(lines[n++], 64, "CoreDump=%llu StateMax=%llu", (unsigned long long)p->core_dump,
                         (unsigned long long)p->state_max);
        else if (p->core_dump)
                snprintf(lines[n++], 64, "CoreDump=%llu", (unsigned long long)p->core_dump);
        /* The budget in force: the policy's, else gadgetd's default. */
        snprintf(lines[n++], 64, "LogLinesPerSecond=%llu", (unsigned long long)in->log_lines_max);
        snprintf(lines[n++], 64, "LogBytesPerSecond=%llu", (unsigned long long)in->log_bytes_max);
        snprintf(lines[n++], 64, "Restart=%s", policy_restart_name(p->restart));
        /* Its tail bindings' queues (QueueMax=): what waits, what was lost. */
        if (in->tails)
                snprintf(lines[n++], 64, "Tail: %llu events queued, %llu dropped", (unsigned long long)in->tail_queued,
                         (unsigned long long)in->tail_dropped);
        return n;
}

static void on_status(struct client *cl, const Control__Request *q)
{
        struct unit_info in;
        struct unit *u = find(cl, q->id, q->status->name, &in);
        if (!u)
                return;
        const struct policy *p = unit_policy(u);
        const struct logbuf *log = unit_log(u);
        char limits[14][64];
        char *limit_ptrs[14];
        size_t n_limits = limit_lines(p, &in, limits);
        for (size_t i = 0; i < n_limits; i++)
                limit_ptrs[i] = limits[i];
        enum { OPS_MAX = 8 };  /* operations of one binding type, at most */
        const char **ops = calloc(OPS_MAX * (p->n_bindings + 1), sizeof *ops);
        Control__Binding **b = answer_items(&control__binding__descriptor, p->n_bindings);
        const size_t tail = 10;
        char **lines = calloc(tail, sizeof *lines);
        if (!ops || !b || !lines) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < p->n_bindings; i++) {
                b[i]->name = p->bindings[i].name;
                b[i]->type = (char *)policy_binding_type_name(p->bindings[i].type);
                b[i]->ops = (char **)&ops[OPS_MAX * i];
                b[i]->n_ops = binding_op_signatures(p->bindings[i].type, &ops[OPS_MAX * i], OPS_MAX);
                if (p->bindings[i].credential) /* the file's name: its content stays in gadgetd */
                        b[i]->credential = p->bindings[i].credential;
        }
        size_t n_lines = log->count < tail ? log->count : tail;
        for (size_t i = 0; i < n_lines; i++)
                lines[i] = (char *)logbuf_line(log, n_lines, i)->text;
        Control__GadgetInfo gi = CONTROL__GADGET_INFO__INIT;
        fill_info(&gi, &in);
        Control__GadgetStatus st = CONTROL__GADGET_STATUS__INIT;
        st.info = &gi;
        st.policy_path = p->path;
        char version[80] = "", previous[80] = "";
        const char *sd = client_env(cl)->releases.state_dir;
        /* Installed from a bundle: the version its policy runs, and the
         * one gadgetctl rollback goes back to. */
        if (sd)
                releases_version_of(sd, in.name, p->path, p->exec, version, sizeof version);
        if (version[0])
                releases_previous(sd, in.name, previous, sizeof previous);
        st.version = version;
        st.previous_version = previous;
        unsigned long long kept_bytes;
        long long kept_ms;
        if (previous[0] && deploy_state_kept(sd, in.name, previous, &kept_bytes, &kept_ms)) {
                st.previous_state_ms = kept_ms;
                st.previous_state_bytes = kept_bytes;
        }
        struct unit_rollout_info ro;
        unit_rollout_info(u, &ro);
        st.rollout_version = ro.running ? (char *)ro.version : "";
        st.rollout_percent = ro.running ? ro.percent : 0;
        st.rollout_back = (char *)ro.last_back;
        /* In a cluster the store's row: the same on every node (a
         * rollout runs on its owner; the others show it from there), and
         * why its last change went back, whichever node decided it. */
        struct deploy_store_info ds;
        deploy_store_status(cl->ctl, in.name, &ds);
        st.release_generation = ds.gen;
        st.release_node = (char *)(ds.node ? ds.node : "");
        st.release_refused = (char *)(ds.refused ? ds.refused : "");
        if (!ro.running && ds.rollout && ds.rollout[0] && ds.percent) {
                st.rollout_version = (char *)ds.rollout;
                st.rollout_percent = ds.percent;
        }
        if (ds.gen)
                st.rollout_back = (char *)ds.why;
        st.n_bindings = p->n_bindings;
        st.bindings = b;
        st.n_limits = n_limits;
        st.limits = limit_ptrs;
        st.n_methods = unit_methods(u, &st.methods);
        st.n_signatures = unit_signatures(u, &st.signatures);
        st.n_log_tail = n_lines;
        st.log_tail = lines;
        st.limits_mode = (char *)in.limits_mode;
        int audit_err;
        st.audit_unwritten = audit_unwritten(core_audit(client_env(cl)->core), &audit_err);
        st.audit_error = audit_err ? strerror(-audit_err) : "";
        const char *unsent_why;
        st.audit_unsent = kvpg_audit_dropped(core_audit_store(client_env(cl)->core), &unsent_why);
        st.audit_unsent_error = (char *)unsent_why;
        st.audit_caught_up = kvpg_audit_caught_up(core_audit_store(client_env(cl)->core), &st.audit_log_skipped);
        st.kept_errors = split_lines(in.kept_lines, &st.n_kept_errors);
        Control__Denial den[DENIALS_KEPT], *denp[DENIALS_KEPT];
        for (size_t i = 0; in.denials && i < in.denials->n; i++) {
                const struct denial *d = &in.denials->d[i];
                control__denial__init(&den[i]);
                den[i].call = (char *)denial_call(d);
                den[i].answer = (char *)denial_answer(d);
                den[i].count = d->count;
                den[i].first_ms = (int64_t)d->first_ms;
                den[i].last_ms = (int64_t)d->last_ms;
                den[i].path = (char *)d->path;
                den[i].nr = d->nr;
                denp[i] = &den[i];
        }
        st.n_denials = in.denials ? in.denials->n : 0;
        st.denials = denp;
        st.denials_untracked = in.denials ? in.denials->untracked : 0;
        char *frames[SANDBOX_CRASH_FRAMES_MAX];
        const char *crash = unit_last_crash(u, frames, &st.n_crash_backtrace);
        if (crash) {
                st.crash_cause = (char *)crash;
                st.crash_backtrace = frames;
        }
        client_answer(cl, q->id, &st.base);
        free(st.kept_errors);
out:
        free(ops);
        free(b);
        free(lines);
}

/* The call's outcome, to a client still there (struct call_owner). */
static void call_done(void *arg, uint64_t id, const Gadget__Value *res, int code, const char *message)
{
        struct client *cl = arg;
        if (!res) {
                client_error(cl, id, code, "%s", message ? message : "the call failed");
                return;
        }
        client_answer(cl, id, &res->base);
}

static void on_call(struct client *cl, const Control__Request *q)
{
        const Control__Call *call = q->call;
        /* Only the link between nodes tells where a call comes from. */
        if (call->n_chain || call->depth || call->caller[0] || call->via[0] || call->admin || call->approved ||
            call->timeout_ms) {
                client_error(cl, q->id, GADGET_EINVAL, "chain, depth, caller, via, admin, approved and timeout_ms are "
                             "for the link between nodes, not the control socket");
                return;
        }
        struct unit *u = find(cl, q->id, call->name, NULL);
        if (!u)
                return;
        Gadget__Value null = GADGET__VALUE__INIT;
        null.kind_case = GADGET__VALUE__KIND_NULL_VALUE;
        /* gadgetctl call --traceparent: read strictly, ignored if invalid. */
        struct trace_ctx parent;
        bool traced = traceparent_parse(call->traceparent, strlen(call->traceparent), &parent) == 0;
        const struct call_req cq = { .method = call->method, .args = call->args ? call->args : &null,
                                     .done = call_done, .cbdata = cl, .tag = q->id, .owner = &cl->calls,
                                     .caller = cl->caller, .via = "gadgetctl", .trace = traced ? &parent : NULL,
                                     .audit_uid = true, .uid = (uint32_t)cl->cred.uid };
        char msg[400];
        int code = calls_start(u, &cq, msg, sizeof msg);
        if (code)
                client_error(cl, q->id, code, "%s", msg);
}

/* Collects what a reload did into the answer's lists. */
/* A reload's answer: what it did, given once every gadget it restarted
 * serves on its new process, or its new process did not start (then the
 * running one serves on: a restart without a gap). */
struct reload_lists {
        struct client_load *ans;          /* the client, while it is there */
        char **v[RELOAD_WHATS];
        size_t n[RELOAD_WHATS];
        Control__ReloadChanged *changed;  /* per restarted gadget whose keys are known */
        size_t n_changed;
        size_t waiting;                   /* restarts not over yet (and 1 while they are asked) */
        char **failed;                    /* per restarted[] gadget: why it did not restart, or NULL */
};

static void reload_note(void *arg, enum control_reload_what what, const char *text, const char *keys)
{
        struct reload_lists *l = arg;
        if (what == RELOAD_RESTARTED && *keys) {
                Control__ReloadChanged *nc = realloc(l->changed, (l->n_changed + 1) * sizeof *nc);
                char *name = strdup(text);
                if (nc)
                        l->changed = nc;
                if (nc && name) {
                        control__reload_changed__init(&nc[l->n_changed]);
                        nc[l->n_changed].name = name;
                        nc[l->n_changed].keys = split_lines(keys, &nc[l->n_changed].n_keys);
                        l->n_changed++;
                } else {
                        free(name);
                }
        }
        char **nv = realloc(l->v[what], (l->n[what] + 1) * sizeof *nv);
        if (!nv)
                return;
        l->v[what] = nv;
        if ((nv[l->n[what]] = strdup(text)))
                l->n[what]++;
}

static void reload_free(struct reload_lists *l)
{
        for (size_t i = 0; i < l->n_changed; i++) {
                free(l->changed[i].name);
                free(l->changed[i].keys);
        }
        free(l->changed);
        for (size_t i = 0; l->failed && i < l->n[RELOAD_RESTARTED]; i++)
                free(l->failed[i]);
        free(l->failed);
        for (size_t k = 0; k < RELOAD_WHATS; k++) {
                for (size_t i = 0; i < l->n[k]; i++)
                        free(l->v[k][i]);
                free(l->v[k]);
        }
        free(l);
}

/* The report, to the client if it is still there; frees l. */
static void reload_answer(struct reload_lists *l)
{
        uint64_t id = l->ans->id;
        struct client *cl = client_load_end(l->ans);
        if (!cl) {
                reload_free(l);
                return;
        }
        const struct control_env *env = client_env(cl);
        Control__ReloadReport rr = CONTROL__RELOAD_REPORT__INIT;
        rr.n_loaded = l->n[RELOAD_LOADED];
        rr.loaded = l->v[RELOAD_LOADED];
        rr.n_stopped = l->n[RELOAD_STOPPED];
        rr.stopped = l->v[RELOAD_STOPPED];
        rr.n_unchanged = l->n[RELOAD_UNCHANGED];
        rr.unchanged = l->v[RELOAD_UNCHANGED];
        rr.n_errors = l->n[RELOAD_ERROR];
        rr.errors = l->v[RELOAD_ERROR];
        /* Each gadget the reload restarted is in restarted or in failed. */
        size_t n_re = l->n[RELOAD_RESTARTED];
        char **restarted = calloc(n_re + 1, sizeof *restarted);
        Control__ReloadFailed **failed = answer_items(&control__reload_failed__descriptor, n_re);
        /* The kept gadgets' errors, as their units hold them. */
        size_t n_kept = l->n[RELOAD_KEPT];
        Control__ReloadKept **kept = answer_items(&control__reload_kept__descriptor, n_kept);
        Control__ReloadChanged **cp = calloc(l->n_changed + 1, sizeof *cp);
        if (!restarted || !failed || !kept || !cp) {
                client_error(cl, id, GADGET_EINTERNAL, "reload done, but its report could not be made: out of memory");
                goto out;
        }
        for (size_t i = 0; i < n_re; i++) {
                if (l->failed && l->failed[i]) {
                        failed[rr.n_failed]->name = l->v[RELOAD_RESTARTED][i];
                        failed[rr.n_failed++]->cause = l->failed[i];
                } else {
                        restarted[rr.n_restarted++] = l->v[RELOAD_RESTARTED][i];
                }
        }
        rr.restarted = restarted;
        rr.failed = failed;
        for (size_t i = 0; i < n_kept; i++) {
                struct unit *u = core_find(env->core, l->v[RELOAD_KEPT][i]);
                struct unit_info in;
                kept[i]->name = l->v[RELOAD_KEPT][i];
                if (u) {
                        unit_info(u, &in);
                        kept[i]->path = unit_policy(u)->path;
                        kept[i]->errors = split_lines(in.kept_lines, &kept[i]->n_errors);
                }
                rr.n_kept++;
        }
        rr.kept = kept;
        for (size_t i = 0; i < l->n_changed; i++)
                cp[rr.n_changed++] = &l->changed[i];
        rr.changed = cp;
        client_answer(cl, id, &rr.base);
out:
        for (size_t i = 0; i < rr.n_kept; i++)
                free(kept[i]->errors);
        free(kept);
        free(cp);
        free(restarted);
        free(failed);
        reload_free(l);
}

static void reload_wait_end(struct reload_lists *l)
{
        if (--l->waiting == 0)
                reload_answer(l);
}

/* One restart of the reload is over: its new process serves (res), or
 * did not start (message: why; the running one serves on). */
static void reload_restart_done(void *arg, uint64_t i, const Gadget__Value *res, int code, const char *message)
{
        struct reload_lists *l = arg;
        if (!res && l->failed && i < l->n[RELOAD_RESTARTED])
                l->failed[i] = strdup(message ? message : "did not start");
        reload_wait_end(l);
}

/* gadgetctl reload: the directory is read again at once (env->reload);
 * the answer waits for the restarts it made, each within its
 * StartTimeout (calls_wake's until_ready, charged to cl). */
static void on_reload(struct client *cl, const Control__Request *q)
{
        const struct control_env *env = client_env(cl);
        struct reload_lists *l = calloc(1, sizeof *l);
        if (!l) {
                client_load_refused(cl, q->id, ENOMEM);
                return;
        }
        if (!(l->ans = client_load_begin(cl, q->id))) {
                reload_free(l);
                return;
        }
        env->reload(env->arg, reload_note, l);
        size_t n_re = l->n[RELOAD_RESTARTED];
        l->failed = calloc(n_re + 1, sizeof *l->failed);
        l->waiting = 1; /* until every wait is asked */
        for (size_t i = 0; l->failed && i < n_re; i++) {
                struct unit *u = core_find(env->core, l->v[RELOAD_RESTARTED][i]);
                const struct call_req cq = { .done = reload_restart_done, .cbdata = l, .tag = i,
                                             .until_ready = true, .owner = &cl->calls };
                char msg[400];
                int code = u ? calls_wake(u, &cq, msg, sizeof msg) : 1;
                if (code == 0)
                        l->waiting++;
                else if (code != 1)
                        l->failed[i] = strdup(msg);
        }
        reload_wait_end(l);
}

static void on_approvals(struct client *cl, const Control__Request *q)
{
        enum { SHOWN = 256 };
        struct approval_info *in = calloc(SHOWN, sizeof *in);
        Control__Approval **a = answer_items(&control__approval__descriptor, SHOWN);
        if (!in || !a) {
                client_error(cl, q->id, GADGET_EINTERNAL, "out of memory");
                goto out;
        }
        size_t total = approvals_list(core_approvals(client_env(cl)->core), in, SHOWN);
        size_t n = total < SHOWN ? total : SHOWN;
        for (size_t i = 0; i < n; i++) {
                a[i]->id = in[i].id;
                a[i]->caller = (char *)in[i].caller;
                a[i]->via = (char *)in[i].via;
                a[i]->target = (char *)in[i].target;
                a[i]->method = (char *)in[i].method;
                a[i]->args = (char *)in[i].args;
                a[i]->age_ms = in[i].age_ms;
                a[i]->timeout_ms = in[i].timeout_ms;
        }
        Control__ApprovalList al = CONTROL__APPROVAL_LIST__INIT;
        al.n_approvals = n;
        al.approvals = a;
        al.total = (uint32_t)total;
        client_answer(cl, q->id, &al.base);
out:
        free(in);
        free(a);
}

/* Who decided, for the audit: the client's user, from the socket's peer
 * credentials (never from anything the client says). */
static void on_decide(struct client *cl, const Control__Request *q)
{
        char who[64], msg[300];
        snprintf(who, sizeof who, "gadgetctl (uid %u)", (unsigned)cl->cred.uid);
        int code = approvals_decide(core_approvals(client_env(cl)->core), q->decide->id, q->decide->approve,
                                    q->decide->always, who, cl->cred.uid == 0, msg, sizeof msg);
        if (code)
                client_error(cl, q->id, code, "%s", msg);
        else
                client_done(cl, q->id, "approval %llu: %s", (unsigned long long)q->decide->id, msg);
}

static void on_move(struct client *cl, const Control__Request *q)
{
        struct unit *u = find(cl, q->id, q->move->name, NULL);
        if (!u)
                return;
        struct client_load *c = client_load_begin(cl, q->id);
        char msg[400];
        int code = c ? unit_move(u, q->move->node, client_load_answer, c, msg, sizeof msg) : 0;
        if (code)
                client_load_answer(c, code, msg);
}

static void on_daemon_reexec(struct client *cl, const Control__Request *q)
{
        control_reexec_ask(cl, q->id);
}

static const struct {
        Control__Request__ReqCase kind;
        void (*handle)(struct client *cl, const Control__Request *q);
} handlers[] = {
        { CONTROL__REQUEST__REQ_LOAD, on_load },
        { CONTROL__REQUEST__REQ_STOP, on_stop },
        { CONTROL__REQUEST__REQ_RESTART, on_restart },
        { CONTROL__REQUEST__REQ_WAKE, on_wake },
        { CONTROL__REQUEST__REQ_START, on_start },
        { CONTROL__REQUEST__REQ_UNLOAD, on_unload },
        { CONTROL__REQUEST__REQ_KILL, on_kill },
        { CONTROL__REQUEST__REQ_CAT, request_cat },
        { CONTROL__REQUEST__REQ_DEBUG, on_debug },
        { CONTROL__REQUEST__REQ_WORKSHOP, on_workshop },
        { CONTROL__REQUEST__REQ_CORES, on_cores },
        { CONTROL__REQUEST__REQ_LIST, on_list },
        { CONTROL__REQUEST__REQ_STATUS, on_status },
        { CONTROL__REQUEST__REQ_CALL, on_call },
        { CONTROL__REQUEST__REQ_LOGS, request_logs },
        { CONTROL__REQUEST__REQ_RELOAD, on_reload },
        { CONTROL__REQUEST__REQ_AUDIT, request_audit },
        { CONTROL__REQUEST__REQ_APPROVALS, on_approvals },
        { CONTROL__REQUEST__REQ_DECIDE, on_decide },
        { CONTROL__REQUEST__REQ_MOVE, on_move },
        { CONTROL__REQUEST__REQ_NODES, request_nodes },
        { CONTROL__REQUEST__REQ_FORGET_NODE, request_forget_node },
        { CONTROL__REQUEST__REQ_DAEMON_REEXEC, on_daemon_reexec },
        { CONTROL__REQUEST__REQ_TRACE, request_trace },
        { CONTROL__REQUEST__REQ_TOP, request_top },
        { CONTROL__REQUEST__REQ_EXEC, request_exec },
        { CONTROL__REQUEST__REQ_FRAMES, request_frames },
        { CONTROL__REQUEST__REQ_INSTALL, request_install },
        { CONTROL__REQUEST__REQ_VERSIONS, request_versions },
        { CONTROL__REQUEST__REQ_BACKUP, request_backup },
        { CONTROL__REQUEST__REQ_RESTORE, request_restore },
        { CONTROL__REQUEST__REQ_DEPLOY, request_deploy },
        { CONTROL__REQUEST__REQ_ROLLBACK, request_rollback },
        { CONTROL__REQUEST__REQ_ROLLBACK_WITH_STATE, request_rollback },
};

void request_handle(struct client *cl, const Control__Request *q)
{
        /* What the node says or does about its gadgets, never from a store
         * lease that may have expired (core_lease_check). */
        core_lease_check(client_env(cl)->core);
        for (size_t i = 0; i < sizeof handlers / sizeof *handlers; i++)
                if (handlers[i].kind == q->req_case) {
                        handlers[i].handle(cl, q);
                        return;
                }
        client_error(cl, q->id, GADGET_EINVAL, "unknown request");
}
