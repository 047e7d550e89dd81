/* limiter: the limits mode, each run's limit plan, limit hits and causes. */
#include "limiter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "system/audit.h"
#include "system/log.h"
#include "policy.h"
#include "sandbox_abi.h"

static const char *const mode_names[] = { "auto", "cgroup-v2", "cgroup-v1", "rlimits" };
static const char *const ctrl_labels[] = { "memory", "pids", "cpu" };

int limiter_parse_mode(const char *s, enum limiter_mode *out)
{
        for (size_t i = 0; i < sizeof mode_names / sizeof *mode_names; i++)
                if (strcmp(s, mode_names[i]) == 0) {
                        *out = (enum limiter_mode)i;
                        return 0;
                }
        return -EINVAL;
}

/* "cgroup v2", "cgroup v1", "rlimits", or per controller when mixed. */
static void describe_mode(struct limiter *l)
{
        int v[3];
        for (int c = 0; c < 3; c++)
                v[c] = cgroup_host_version(&l->cg, (enum cgroup_ctrl)c);
        if (v[0] == v[1] && v[1] == v[2]) {
                snprintf(l->mode, sizeof l->mode, "%s", v[0] == 2 ? "cgroup v2" : v[0] == 1 ? "cgroup v1" : "rlimits");
                return;
        }
        size_t o = (size_t)snprintf(l->mode, sizeof l->mode, "mixed (");
        for (int c = 0; c < 3 && o < sizeof l->mode; c++)
                o += (size_t)snprintf(l->mode + o, sizeof l->mode - o, "%s%s: %s", c ? ", " : "", ctrl_labels[c],
                                      v[c] == 2 ? "cgroup v2" : v[c] == 1 ? "cgroup v1" : "none");
        if (o < sizeof l->mode)
                snprintf(l->mode + o, sizeof l->mode - o, ")");
}

int limiter_open(struct limiter *l, enum limiter_mode want, bool allow_degraded, unsigned flags, char *err,
                 size_t errlen)
{
        static const enum cgroup_use use[] = {
                [LIMITER_AUTO] = CGROUP_USE_ANY, [LIMITER_CGROUP_V2] = CGROUP_USE_V2,
                [LIMITER_CGROUP_V1] = CGROUP_USE_V1, [LIMITER_RLIMITS] = CGROUP_USE_NONE,
        };
        *l = (struct limiter){ .want = want, .allow_degraded = allow_degraded };
        int e = cgroup_host_open(&l->cg, use[want], flags);
        if (e < 0) {
                snprintf(err, errlen, "cgroups: %s", strerror(-e));
                return e;
        }
        if ((want == LIMITER_CGROUP_V2 || want == LIMITER_CGROUP_V1) && l->cg.n_hier == 0) {
                snprintf(err, errlen, "limits mode %s is not available: %s", mode_names[want],
                         want == LIMITER_CGROUP_V2 ? l->cg.why_v2 : l->cg.why_v1);
                cgroup_host_close(&l->cg);
                return -ENOENT;
        }
        describe_mode(l);
        return 0;
}

void limiter_close(struct limiter *l)
{
        cgroup_host_close(&l->cg);
}

bool limiter_may_move(enum limiter_mode want)
{
        return want == LIMITER_CGROUP_V2 || (want == LIMITER_AUTO && cgroup_v2_may_serve());
}

void limiter_tidy(struct limiter *l)
{
        cgroup_host_tidy(&l->cg);
}

#define REFUSED "a policy setting it does not start (degraded limits are not allowed)"

void limiter_log(const struct limiter *l)
{
        const struct cgroup_host *h = &l->cg;
        int mem = cgroup_host_version(h, CGROUP_MEMORY), pids = cgroup_host_version(h, CGROUP_PIDS);
        int cpu = cgroup_host_version(h, CGROUP_CPU);

        /* A warning when a controller is missing: then only rlimits stand
         * in for it (gadgetd run shows warnings only). */
        enum log_level lvl = mem && pids && cpu ? L_INFO : L_WARN;
        log_msg(lvl, NULL, "limits mode: %s%s", l->mode, l->allow_degraded ? ", degraded limits allowed" : "");
        if (h->scopes)
                log_msg(L_INFO, NULL, "limits: each gadget in a scope of its own that systemd delegates "
                        "(gadgetd-NAME-PID.scope), outside gadgetd's cgroup %s: a restart of gadgetd.service "
                        "leaves them (FdStore=yes)", h->hier[0].own);
        if (h->scope[0])
                log_msg(L_INFO, NULL, "limits: gadgetd's cgroup %s is not delegated: gadgetd moved into %s, a "
                        "scope of its own that systemd delegates (Delegate=yes)", h->started_in, h->scope);
        if (h->why_v2[0] && l->want != LIMITER_RLIMITS && mem != 2 && pids != 2 && cpu != 2)
                log_msg(lvl, NULL, "limits: cgroup v2 not used: %s", h->why_v2);
        if (h->why_v1[0] && l->want != LIMITER_RLIMITS && !h->n_hier)
                log_msg(lvl, NULL, "limits: cgroup v1 not used: %s", h->why_v1);
        for (int c = 0; c < CGROUP_N_CTRL; c++)
                if (cgroup_host_dir(h, (enum cgroup_ctrl)c))
                        log_msg(L_INFO, NULL, "limits: %s controller: cgroup v%d under %s",
                                c == CGROUP_CPUACCT ? "CPU accounting"
                                : c == CGROUP_CPUSET ? "cpuset (no limit: a runtime's view)" : ctrl_labels[c],
                                cgroup_host_version(h, (enum cgroup_ctrl)c), cgroup_host_dir(h, (enum cgroup_ctrl)c));
        if (mem == 2)
                log_msg(L_INFO, NULL, "limits: MemoryMax by cgroup v2 memory.max%s",
                        h->swap_limit ? ", memory.swap.max=0" : " (swap not limited: no memory.swap.max)");
        else if (mem == 1)
                log_msg(L_INFO, NULL, "limits: MemoryMax by cgroup v1 memory.limit_in_bytes%s",
                        h->swap_limit ? " and memory.memsw.limit_in_bytes" : " (swap not limited: no memory.memsw)");
        else
                log_msg(L_INFO, NULL, "limits: MemoryMax cannot be enforced (no memory controller): %s",
                        l->allow_degraded ? "degraded to RLIMIT_AS per process" : REFUSED);
        if (pids)
                log_msg(L_INFO, NULL, "limits: TasksMax by cgroup v%d pids.max, backed by RLIMIT_NPROC of the "
                        "gadget's own uid (%u tasks without TasksMax)", pids, LIMITER_DEFAULT_TASKS);
        else
                log_msg(L_INFO, NULL, "limits: TasksMax by RLIMIT_NPROC of the gadget's own uid (%u tasks "
                        "without TasksMax)", LIMITER_DEFAULT_TASKS);
        if (cpu)
                log_msg(L_INFO, NULL, "limits: CPUQuota by cgroup v%d %s", cpu,
                        cpu == 2 ? "cpu.max" : "cpu.cfs_quota_us per cpu.cfs_period_us");
        else
                log_msg(L_INFO, NULL, "limits: CPUQuota cannot be enforced (no cpu controller): %s",
                        l->allow_degraded ? "degraded: not enforced" : REFUSED);
        log_msg(L_INFO, NULL, "limits: LimitNOFILE by RLIMIT_NOFILE; file size by RLIMIT_FSIZE (TmpSize plus "
                "one page); core dumps off; TmpSize by the /tmp tmpfs size and nr_inodes; per gadget uid "
                "RLIMIT_MEMLOCK %u, RLIMIT_SIGPENDING %u, RLIMIT_MSGQUEUE %u; inotify and namespaces 0 in "
                "the gadget's user namespace; CallTimeout and RuntimeMax by gadgetd's timers",
                SANDBOX_MEMLOCK_MAX, SANDBOX_SIGPENDING_MAX, SANDBOX_MSGQUEUE_MAX);
}

void limiter_run_init(struct limiter_run *r)
{
        *r = (struct limiter_run){ .address_space = UINT64_MAX };
}

void limiter_run_free(struct limiter_run *r)
{
        free(r->mode);
        r->mode = NULL;
}

/* "64M" for a size in a message. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
        static const char units[] = "KMGT";
        int u = -1;
        while (u < 3 && v >= 1024 && v % 1024 == 0) {
                v /= 1024;
                u++;
        }
        if (u < 0)
                snprintf(buf, len, "%llu", (unsigned long long)v);
        else
                snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
        return buf;
}

/* True if the host has swap turned on (a header line, then one per device). */
static bool swap_on(void)
{
        FILE *f = fopen("/proc/swaps", "re");
        char line[512];
        int n = 0;
        if (!f)
                return false;
        while (fgets(line, sizeof line, f))
                n++;
        fclose(f);
        return n > 1;
}

static void append(char *buf, size_t len, const char *text)
{
        size_t o = strlen(buf);
        snprintf(buf + o, len - o, "%s%s", o ? ", " : "", text);
}

/* Fail closed on the limits the mode cannot enforce; degrade them if the
 * operator allowed it. -EPERM with err naming the limit and why. */
static int plan_degraded(const struct limiter *l, const struct policy *p, struct limiter_run *r,
                         char *degraded, size_t dlen, char *err, size_t errlen)
{
        char size[32];
        const char *deny = l->allow_degraded ? NULL
                                             : "; gadgetd refuses to start it unless degraded limits are allowed";

        if (p->memory_max != POLICY_UNLIMITED && !cgroup_host_version(&l->cg, CGROUP_MEMORY)) {
                if (deny) {
                        snprintf(err, errlen, "MemoryMax=%s cannot be enforced in limits mode %s: no cgroup memory "
                                 "controller (rlimits bound each process, not the gadget)%s",
                                 size_text(p->memory_max, size, sizeof size), l->mode, deny);
                        return -EPERM;
                }
                r->address_space = p->memory_max;
                append(degraded, dlen, "MemoryMax as RLIMIT_AS per process");
        } else if (p->memory_max != POLICY_UNLIMITED && !l->cg.swap_limit && swap_on()) {
                if (deny) {
                        snprintf(err, errlen, "MemoryMax=%s cannot be enforced in limits mode %s: swap is on and "
                                 "its use cannot be limited (no memory.swap.max or memory.memsw)%s",
                                 size_text(p->memory_max, size, sizeof size), l->mode, deny);
                        return -EPERM;
                }
                append(degraded, dlen, "MemoryMax without swap");
        }
        if (p->cpu_quota && !cgroup_host_version(&l->cg, CGROUP_CPU)) {
                if (deny) {
                        snprintf(err, errlen, "CPUQuota=%u%% cannot be enforced in limits mode %s: no cgroup cpu "
                                 "controller (no rlimit bounds a CPU share)%s", p->cpu_quota, l->mode, deny);
                        return -EPERM;
                }
                append(degraded, dlen, "CPUQuota not enforced");
        }
        return 0;
}

int limiter_start(struct limiter *l, const struct policy *p, struct limiter_run *r, char *err, size_t errlen)
{
        uint64_t tasks = p->tasks_max == POLICY_UNLIMITED ? LIMITER_DEFAULT_TASKS : p->tasks_max;
        struct cgroup_limits cl = { .memory_max = UINT64_MAX, .pids_max = UINT64_MAX };
        char degraded[160] = "";
        int e;

        limiter_run_free(r); /* the last run's mode */
        limiter_run_init(r);
        if ((e = plan_degraded(l, p, r, degraded, sizeof degraded, err, errlen)) < 0)
                return e;
        if (cgroup_host_version(&l->cg, CGROUP_MEMORY))
                cl.memory_max = p->memory_max;
        if (cgroup_host_version(&l->cg, CGROUP_CPU))
                cl.cpu_quota = p->cpu_quota;
        /* The sandbox's init is one more task. With a pids controller,
         * RLIMIT_NPROC stays one above pids.max, so the controller (whose
         * refusals are counted and audited) refuses first; without one,
         * RLIMIT_NPROC alone holds the gadget: its uid is its own. */
        if (cgroup_host_version(&l->cg, CGROUP_PIDS)) {
                cl.pids_max = tasks + 1;
                r->nproc = tasks + 2;
        } else {
                r->nproc = tasks + 1;
        }
        r->cgroup_limits = cl;
        if (asprintf(&r->mode, "%s%s%s", l->mode, degraded[0] ? "; degraded: " : "", degraded) < 0) {
                r->mode = NULL;
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

int limiter_cgroup(struct limiter *l, const struct policy *p, struct limiter_run *r, char *err, size_t errlen)
{
        char name[80];
        if (!l->cg.n_hier || r->cg)
                return 0;
        /* Why a second name: two runs of one gadget may live at once (a
         * restart without a gap); '.' is in no gadget's name. */
        snprintf(name, sizeof name, "%s%s", p->name, r->second ? ".2" : "");
        return cgroup_new(&l->cg, name, &r->cgroup_limits, &r->cg, err, errlen);
}

int limiter_adopt(struct limiter *l, const struct policy *p, struct limiter_run *r, pid_t pid, char *err,
                  size_t errlen)
{
        int e = limiter_start(l, p, r, err, errlen);
        if (e < 0 || !l->cg.n_hier)
                return e;
        /* The run handed on may be a restart's second (limiter_cgroup);
         * a re-exec waits for the first's end, so one of them is there. */
        char name[80];
        snprintf(name, sizeof name, "%s.2", p->name);
        if (cgroup_adopt(&l->cg, name, pid, &r->cg, err, errlen) == 0) {
                r->second = true;
                return 0;
        }
        return cgroup_adopt(&l->cg, p->name, pid, &r->cg, err, errlen);
}

void limiter_record(struct audit *a, const char *gadget, const char *limit, const char *fmt, ...)
{
        char detail[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        struct audit_record rec = { .gadget = gadget, .binding = "limit", .op = limit,
                                    .outcome = AUDIT_DENIED, .detail = detail };
        audit_write(a, &rec);
}

/* How much a counter grew since the last check (0 if it went back, as
 * when a file could not be read). */
static uint64_t grew(uint64_t now, uint64_t *seen)
{
        uint64_t d = now > *seen ? now - *seen : 0;
        if (now > *seen)
                *seen = now;
        return d;
}

void limiter_check(struct limiter_run *r, const struct policy *p, struct audit *a)
{
        struct cgroup_stats st;
        char size[32];
        if (!r->cg)
                return;
        /* Every running gadget's, each second: only the counters read
         * here, and the throttling one only where a quota can throttle
         * (without CPUQuota= no period is ever throttled). */
        cgroup_hits_read(r->cg, p->cpu_quota != 0, &st);
        uint64_t oom = grew(st.oom_kills, &r->seen.oom_kills);
        uint64_t refused = grew(st.pids_refused, &r->seen.pids_refused);
        uint64_t throttled = grew(st.throttled, &r->seen.throttled);
        if (oom) {
                r->oom_kills += oom;
                r->hits[LIMITER_HIT_MEMORY] += oom;
                if (p->memory_max != POLICY_UNLIMITED)
                        limiter_record(a, p->name, "MemoryMax",
                                       "out of memory: %llu process(es) killed at MemoryMax=%s",
                                       (unsigned long long)oom, size_text(p->memory_max, size, sizeof size));
                else
                        limiter_record(a, p->name, "MemoryMax", "out of memory: %llu process(es) killed (no "
                                       "MemoryMax: gadgetd's cgroup or the host ran out)", (unsigned long long)oom);
        }
        r->hits[LIMITER_HIT_TASKS] += refused && !r->refusing;
        r->hits[LIMITER_HIT_CPU] += throttled && !r->throttling && p->cpu_quota;
        if (refused && !r->refusing)
                limiter_record(a, p->name, "TasksMax", "fork refused: the gadget is at its limit of %llu tasks",
                               (unsigned long long)(p->tasks_max == POLICY_UNLIMITED ? LIMITER_DEFAULT_TASKS
                                                                                     : p->tasks_max));
        r->pids_refused += refused;
        r->refusing = refused > 0;
        if (throttled && !r->throttling && p->cpu_quota)
                limiter_record(a, p->name, "CPUQuota", "throttled at CPUQuota=%u%%", p->cpu_quota);
        r->throttling = throttled > 0;
}

bool limiter_cause(const struct limiter_run *r, int status, const char *how, char *out, size_t len)
{
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return false;
        if (r->oom_kills) { /* the cause, and how the program ended, both */
                snprintf(out, len, "out of memory (%s)", how);
                return true;
        }
        if (r->pids_refused) {
                snprintf(out, len, "tasks limit (%s)", how);
                return true;
        }
        return false;
}

void limiter_usage(const struct limiter_run *r, uint64_t *memory, uint64_t *tasks, uint64_t *cpu_usec,
                   uint64_t *memory_peak)
{
        struct cgroup_stats st = { 0 };
        if (r->cg)
                cgroup_stats_read(r->cg, &st);
        *memory = st.memory_bytes;
        *memory_peak = st.memory_peak;
        *tasks = st.tasks > 0 ? st.tasks - 1 : 0;
        *cpu_usec = st.cpu_usec;
}

void limiter_kill(const struct limiter_run *r)
{
        if (r->cg)
                cgroup_kill(r->cg);
}

void limiter_end(struct limiter_run *r)
{
        cgroup_free(r->cg);
        r->cg = NULL;
}
