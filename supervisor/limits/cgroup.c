/* cgroup: one cgroup per gadget — its limits, its statistics, kill and
 * removal. */
#include "cgroup.h"
#include "cgroup_scope.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GADGET_PREFIX "gadget-"
#define CPU_PERIOD_US 100000u
#define RMDIR_TRIES 50          /* 1 ms apart: dying tasks leave a cgroup soon */

struct cgroup {
        struct cgroup_host *host;     /* not const: a one-shot run notes its cgroup made and removed (made) */
        char *dir[CGROUP_MAX_HIER];   /* OWN/gadgetd.PID/gadget-NAME per hierarchy */
        /* CGROUP_HOST_SCOPES: made at cgroup_attach, when the worker's pid is known. */
        char *name;
        struct cgroup_limits limits;
};

/* The number after "KEY " on a line of text, 0 if there is none. */
static uint64_t keyed(const char *text, const char *key)
{
        size_t klen = strlen(key);
        for (const char *p = text; p && *p;) {
                if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
                        return strtoull(p + klen + 1, NULL, 10);
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        return 0;
}

static uint64_t read_u64(const char *dir, const char *file)
{
        char buf[64];
        if (!dir || cgroup_read_file(dir, file, buf, sizeof buf) <= 0)
                return 0;
        return strtoull(buf, NULL, 10);
}

static uint64_t read_keyed(const char *dir, const char *file, const char *key)
{
        char buf[1024];
        if (!dir || cgroup_read_file(dir, file, buf, sizeof buf) <= 0)
                return 0;
        return keyed(buf, key);
}

static const char *ctrl_dir(const struct cgroup *cg, enum cgroup_ctrl c)
{
        int i = cg->host->ctrl_hier[c];
        return i < 0 ? NULL : cg->dir[i];
}

/* Removes one gadget directory, waiting briefly for dying tasks. */
static int remove_cgroup(int version, const char *dir)
{
        for (int i = 0; i < RMDIR_TRIES; i++) {
                if (rmdir(dir) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return -errno;
                /* v1 has no atomic kill: the gadget's processes die with
                 * PID 1 of its namespace, which is gone by now. */
                if (version == 2)
                        cgroup_write_file(dir, "cgroup.kill", "1");
                nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
        return -EBUSY;
}

/* Frees cg's record, leaving its directories. */
static void cgroup_forget(struct cgroup *cg)
{
        for (size_t i = 0; i < CGROUP_MAX_HIER; i++)
                free(cg->dir[i]);
        free(cg->name);
        free(cg);
}

/* mkdir of a gadget's cgroup. A directory left from an earlier run goes
 * first; a v1 instance directory that another gadgetd took for a dead
 * one's and removed (it was empty) is made again. */
static int make_gadget_dir(const struct cgroup_hier *x, const char *dir)
{
        int e = cgroup_mkdir(dir);
        if (e == -EEXIST && (e = remove_cgroup(x->version, dir)) == 0)
                e = cgroup_mkdir(dir);
        else if (e == -ENOENT && x->version == 1 && ((e = cgroup_mkdir(x->dir)) == 0 || e == -EEXIST))
                e = cgroup_mkdir(dir);
        return e;
}

/* Writes one limit; err names the file on failure. */
static int set(const struct cgroup *cg, enum cgroup_ctrl c, const char *file, uint64_t v, char *err,
               size_t errlen)
{
        char text[64];
        if (strcmp(file, "cpu.max") == 0)
                snprintf(text, sizeof text, "%llu %u", (unsigned long long)v, CPU_PERIOD_US);
        else
                snprintf(text, sizeof text, "%llu", (unsigned long long)v);
        int e = cgroup_write_file(ctrl_dir(cg, c), file, text);
        if (e < 0)
                snprintf(err, errlen, "cgroup v%d %s=%s: %s", cgroup_host_version(cg->host, c), file, text,
                         strerror(-e));
        return e;
}

static int write_limits(const struct cgroup *cg, const struct cgroup_limits *l, char *err, size_t errlen)
{
        const struct cgroup_host *h = cg->host;
        int mem = cgroup_host_version(h, CGROUP_MEMORY), cpu = cgroup_host_version(h, CGROUP_CPU);
        uint64_t quota = (uint64_t)l->cpu_quota * (CPU_PERIOD_US / 100);
        int e = 0;

        /* Memory first, then the swap (v1 memsw must not be below it). */
        if (mem == 2 && l->memory_max != UINT64_MAX)
                e = set(cg, CGROUP_MEMORY, "memory.max", l->memory_max, err, errlen);
        if (e == 0 && mem == 2 && ctrl_dir(cg, CGROUP_MEMORY) &&
            cgroup_file_exists(ctrl_dir(cg, CGROUP_MEMORY), "memory.swap.max"))
                e = set(cg, CGROUP_MEMORY, "memory.swap.max", 0, err, errlen);
        if (e == 0 && mem == 1 && l->memory_max != UINT64_MAX) {
                e = set(cg, CGROUP_MEMORY, "memory.limit_in_bytes", l->memory_max, err, errlen);
                if (e == 0 && cgroup_file_exists(ctrl_dir(cg, CGROUP_MEMORY), "memory.memsw.limit_in_bytes"))
                        e = set(cg, CGROUP_MEMORY, "memory.memsw.limit_in_bytes", l->memory_max, err, errlen);
        }
        if (e == 0 && cgroup_host_version(h, CGROUP_PIDS) && l->pids_max != UINT64_MAX)
                e = set(cg, CGROUP_PIDS, "pids.max", l->pids_max, err, errlen);
        if (e == 0 && cpu == 2 && l->cpu_quota)
                e = set(cg, CGROUP_CPU, "cpu.max", quota, err, errlen);
        if (e == 0 && cpu == 1 && l->cpu_quota) {
                e = set(cg, CGROUP_CPU, "cpu.cfs_period_us", CPU_PERIOD_US, err, errlen);
                if (e == 0)
                        e = set(cg, CGROUP_CPU, "cpu.cfs_quota_us", quota, err, errlen);
        }
        return e;
}

/* The controllers l sets a limit in; with a memory limit also those a
 * runtime needs beside memory to read it (see CGROUP_CPUSET). */
static unsigned limited(const struct cgroup_limits *l)
{
        unsigned view = 1u << CGROUP_CPU | 1u << CGROUP_CPUACCT | 1u << CGROUP_CPUSET;
        return (l->memory_max != UINT64_MAX ? 1u << CGROUP_MEMORY | view : 0) |
               (l->pids_max != UINT64_MAX ? 1u << CGROUP_PIDS : 0) | (l->cpu_quota ? 1u << CGROUP_CPU : 0);
}

int cgroup_cpuset_inherit(const char *parent, const char *dir)
{
        static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
        char text[4096];
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
                int n = cgroup_read_file(parent, files[i], text, sizeof text);
                if (n < 0)
                        return n;
                text[strcspn(text, "\n")] = '\0';
                if ((n = cgroup_write_file(dir, files[i], text)) < 0)
                        return n;
        }
        return 0;
}

int cgroup_cpus_write(const char *dir, const cpu_set_t *cpus)
{
        char list[4096];
        size_t o = 0;
        for (int c = 0; c < CPU_SETSIZE && o + 8 < sizeof list; c++)
                if (CPU_ISSET(c, cpus))
                        o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", o ? "," : "", c);
        return o ? cgroup_write_file(dir, "cpuset.cpus", list) : -EINVAL;
}

int cgroup_adopt(struct cgroup_host *h, const char *name, pid_t pid, struct cgroup **out, char *err,
                 size_t errlen)
{
        struct cgroup *cg = calloc(1, sizeof *cg);
        struct stat st;
        if (!cg) {
                snprintf(err, errlen, "cgroup: out of memory");
                return -ENOMEM;
        }
        cg->host = h;
        if (h->scopes) {
                int e = cgroup_scope_find(h->hier[0].dir, name, pid, &cg->dir[0], err, errlen);
                if (e < 0) {
                        cgroup_forget(cg);
                        return e;
                }
                *out = cg;
                return 0;
        }
        for (size_t i = 0; i < h->n_hier; i++) {
                if (!h->hier[i].ctrls)
                        continue;
                if (asprintf(&cg->dir[i], "%s/" GADGET_PREFIX "%s", h->hier[i].dir, name) < 0) {
                        cg->dir[i] = NULL;
                        snprintf(err, errlen, "cgroup: out of memory");
                        cgroup_forget(cg);
                        return -ENOMEM;
                }
                int e = stat(cg->dir[i], &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
                if (e < 0) {
                        snprintf(err, errlen, "its cgroup %s is gone: %s", cg->dir[i], strerror(-e));
                        cgroup_forget(cg);
                        return e;
                }
        }
        *out = cg;
        return 0;
}

int cgroup_new(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
               struct cgroup **out, char *err, size_t errlen)
{
        struct cgroup *cg = calloc(1, sizeof *cg);
        int e = 0;
        if (!cg) {
                snprintf(err, errlen, "cgroup: out of memory");
                return -ENOMEM;
        }
        cg->host = h;
        if (h->scopes) {
                cg->limits = *l;
                if (!(cg->name = strdup(name))) {
                        snprintf(err, errlen, "cgroup: out of memory");
                        cgroup_forget(cg);
                        return -ENOMEM;
                }
                *out = cg;
                return 0;
        }
        for (size_t i = 0; i < h->n_hier && e == 0; i++) {
                /* No controller left: a cpuset whose CPUs could not be set. */
                if (!h->hier[i].ctrls || (h->one && !(h->hier[i].ctrls & limited(l))))
                        continue;
                int n = h->one && h->hier[i].version == 1
                                ? asprintf(&cg->dir[i], "%s", h->hier[i].dir)
                                : asprintf(&cg->dir[i], "%s/" GADGET_PREFIX "%s", h->hier[i].dir, name);
                if (n < 0) {
                        cg->dir[i] = NULL;
                        snprintf(err, errlen, "cgroup: out of memory");
                        e = -ENOMEM;
                        break;
                }
                bool cloned = h->hier[i].cpus_cloned;
                if ((e = make_gadget_dir(&h->hier[i], cg->dir[i])) == 0 && h->one)
                        h->hier[i].made = true;
                if (e == 0 && h->hier[i].version == 1 &&
                    (h->hier[i].ctrls & 1u << CGROUP_CPUSET) && !cloned &&
                    (e = cgroup_cpuset_inherit(h->one ? h->hier[i].own : h->hier[i].dir, cg->dir[i])) < 0) {
                        snprintf(err, errlen, "cgroup v1: cannot give %s the CPUs of its parent: %s", cg->dir[i],
                                 strerror(-e));
                        break; /* cgroup_free removes it */
                }
                /* Of those, gadgetd's own (pin_cpus_v2 in cgroup_host.c says
                 * why); where they cannot be set, the parent's stay. A
                 * cpuset the kernel made with the parent's (clone_cpus_v1
                 * in cgroup_host.c) has them unless gadgetd's changed. */
                cpu_set_t mine;
                if (e == 0 && h->hier[i].version == 1 && (h->hier[i].ctrls & 1u << CGROUP_CPUSET) &&
                    sched_getaffinity(0, sizeof mine, &mine) == 0 && !(cloned && CPU_EQUAL(&mine, &h->hier[i].cpus)))
                        cgroup_cpus_write(cg->dir[i], &mine);
                if (e < 0) {
                        snprintf(err, errlen, "cgroup v%d: cannot create %s: %s", h->hier[i].version,
                                 cg->dir[i], strerror(-e));
                        free(cg->dir[i]);
                        cg->dir[i] = NULL;
                }
        }
        if (e == 0)
                e = write_limits(cg, l, err, errlen);
        if (e < 0) {
                cgroup_free(cg);
                return e;
        }
        *out = cg;
        return 0;
}

/* CGROUP_HOST_SCOPES: the gadget's scope, with pid in its cgroup and the limits. */
static int attach_scope(struct cgroup *cg, pid_t pid, char *err, size_t errlen)
{
        const struct cgroup_host *h = cg->host;
        char ctrls[64] = "";
        static const char *const names[] = { [CGROUP_MEMORY] = "memory", [CGROUP_PIDS] = "pids",
                                             [CGROUP_CPU] = "cpu" };
        for (int c = CGROUP_MEMORY; c <= CGROUP_CPU; c++)
                if (h->hier[0].ctrls & 1u << c)
                        snprintf(ctrls + strlen(ctrls), sizeof ctrls - strlen(ctrls), "%s%s", ctrls[0] ? " " : "",
                                 names[c]);
        int e = cgroup_scope_make(h->hier[0].dir, cg->name, pid, ctrls, &cg->dir[0], err, errlen);
        return e < 0 ? e : write_limits(cg, &cg->limits, err, errlen);
}

int cgroup_attach(struct cgroup *cg, pid_t pid, char *err, size_t errlen)
{
        char text[24];
        if (cg->host->scopes)
                return cg->dir[0] ? -EALREADY : attach_scope(cg, pid, err, errlen);
        snprintf(text, sizeof text, "%d", (int)pid);
        for (size_t i = 0; i < cg->host->n_hier; i++) {
                if (cg->host->hier[i].version != 2 || !cg->dir[i])
                        continue; /* v1: joined by the worker, cgroup_join_fds */
                int e = cgroup_write_file(cg->dir[i], "cgroup.procs", text);
                if (e < 0) {
                        snprintf(err, errlen, "cgroup v%d: cannot move the worker into %s: %s",
                                 cg->host->hier[i].version, cg->dir[i], strerror(-e));
                        return e;
                }
        }
        return 0;
}

int cgroup_join_fds(const struct cgroup *cg, int *fds, size_t max, size_t *n, char *err, size_t errlen)
{
        char path[PATH_MAX];
        *n = 0;
        for (size_t i = 0; i < cg->host->n_hier; i++) {
                if (cg->host->hier[i].version != 1 || !cg->dir[i])
                        continue;
                int e = *n == max ? -EMFILE : 0;
                if (e == 0 && snprintf(path, sizeof path, "%s/tasks", cg->dir[i]) >= (int)sizeof path)
                        e = -ENAMETOOLONG;
                if (e == 0 && (fds[*n] = open(path, O_WRONLY | O_CLOEXEC)) < 0)
                        e = -errno;
                if (e < 0) {
                        snprintf(err, errlen, "cgroup v1: cannot open %s/tasks: %s", cg->dir[i], strerror(-e));
                        while (*n > 0)
                                close(fds[--*n]);
                        return e;
                }
                (*n)++;
        }
        return 0;
}

void cgroup_hits_read(const struct cgroup *cg, bool throttled, struct cgroup_stats *st)
{
        const struct cgroup_host *h = cg->host;
        const char *mem = ctrl_dir(cg, CGROUP_MEMORY);

        *st = (struct cgroup_stats){ 0 };
        if (cgroup_host_version(h, CGROUP_MEMORY) == 2)
                st->oom_kills = read_keyed(mem, "memory.events", "oom_kill");
        else if (mem)
                st->oom_kills = read_keyed(mem, "memory.oom_control", "oom_kill");
        st->pids_refused = read_keyed(ctrl_dir(cg, CGROUP_PIDS), "pids.events", "max");
        if (throttled)
                st->throttled = read_keyed(ctrl_dir(cg, CGROUP_CPU), "cpu.stat", "nr_throttled");
}

void cgroup_stats_read(const struct cgroup *cg, struct cgroup_stats *st)
{
        const struct cgroup_host *h = cg->host;
        const char *mem = ctrl_dir(cg, CGROUP_MEMORY), *pids = ctrl_dir(cg, CGROUP_PIDS);
        const char *acct = ctrl_dir(cg, CGROUP_CPUACCT);

        cgroup_hits_read(cg, true, st);
        if (cgroup_host_version(h, CGROUP_MEMORY) == 2) {
                st->memory_bytes = read_u64(mem, "memory.current");
                st->memory_peak = read_u64(mem, "memory.peak"); /* Linux 5.19 and later */
        } else if (mem) {
                st->memory_bytes = read_u64(mem, "memory.usage_in_bytes");
                st->memory_peak = read_u64(mem, "memory.max_usage_in_bytes");
        }
        st->tasks = read_u64(pids, "pids.current");
        if (cgroup_host_version(h, CGROUP_CPUACCT) == 2)
                st->cpu_usec = read_keyed(acct, "cpu.stat", "usage_usec");
        else if (acct)
                st->cpu_usec = read_u64(acct, "cpuacct.usage") / 1000;
}

int cgroup_kill(const struct cgroup *cg)
{
        for (size_t i = 0; i < cg->host->n_hier; i++)
                if (cg->host->hier[i].version == 2 && cg->dir[i]) {
                        int e = cgroup_write_file(cg->dir[i], "cgroup.kill", "1");
                        return e == -ENOENT ? -EOPNOTSUPP : e;
                }
        return -EOPNOTSUPP;
}

void cgroup_free(struct cgroup *cg)
{
        if (!cg)
                return;
        for (size_t i = 0; i < cg->host->n_hier; i++)
                if (cg->dir[i]) {
                        if (remove_cgroup(cg->host->hier[i].version, cg->dir[i]) == 0 && cg->host->one)
                                cg->host->hier[i].made = false;
                        free(cg->dir[i]);
                }
        free(cg->name);
        free(cg);
}
