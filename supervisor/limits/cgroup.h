/* cgroup: gadgetd's cgroups, v2 or v1, for the memory, pids and cpu
 * controllers (and cpuacct in v1, for CPU use); cgroup_host.c finds what
 * gadgetd may use, cgroup.c makes and reads one gadget's cgroup. gadgetd reads the cgroup it
 * runs in from /proc/self/cgroup for each hierarchy (OWN) and never writes
 * above it:
 *
 *   OWN/gadgetd.PID               this gadgetd's instance directory
 *   OWN/gadgetd.PID/supervisor    gadgetd itself (v2 only: a cgroup that
 *                                 hands controllers to children may hold
 *                                 no process)
 *   OWN/gadgetd.PID/gadget-NAME   one running gadget
 *
 * With CGROUP_HOST_ONE (gadgetd run: one gadget, once), a v1 hierarchy has
 * no instance level: OWN/gadgetd.PID is the gadget's cgroup, which saves a
 * directory per hierarchy (in the memory controller, the costliest part);
 * and only the hierarchies that hold a limit of the gadget are used, since
 * no one reads the usage of a one-shot run (with MemoryMax, cpu, cpuacct
 * and cpuset too: the view a runtime needs to see the limit).
 *
 * Instance directories of gadgetds that are gone are removed at start.
 *
 * With CGROUP_HOST_SCOPES (FdStore=yes under systemd, v2) there is no
 * instance directory and gadgetd hands nothing down from OWN: each gadget
 * gets .../gadgetd-NAME-PID.scope/gadget instead (cgroup_scope.h). */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CGROUP_CPUSET holds no limit and is v1 only: the gadget gets a cgroup
 * there so that its runtimes see a complete v1 view in /sys/fs/cgroup
 * (OpenJDK 17 reads its limits only where memory, cpu, cpuacct and cpuset
 * are all mounted); it has its parent's CPUs and memory nodes. */
enum cgroup_ctrl { CGROUP_MEMORY, CGROUP_PIDS, CGROUP_CPU, CGROUP_CPUACCT, CGROUP_CPUSET, CGROUP_N_CTRL };

/* Which cgroup versions gadgetd may use. */
enum cgroup_use { CGROUP_USE_ANY, CGROUP_USE_V2, CGROUP_USE_V1, CGROUP_USE_NONE };

/* The v2 hierarchy and up to one v1 hierarchy per controller. */
#define CGROUP_MAX_HIER (1 + CGROUP_N_CTRL)

struct cgroup_hier {
        int version;       /* 1 or 2 */
        char *own;         /* OWN, gadgetd's cgroup in this hierarchy */
        char *dir;         /* OWN/gadgetd.PID */
        unsigned ctrls;    /* 1u << enum cgroup_ctrl for each served here */
        bool cpus_cloned;  /* v1 cpuset: each gadget's gets dir's CPUs and memory nodes at its mkdir */
        bool tidy;         /* OWN's stale instance directories are still to be removed (cgroup_host_tidy) */
        bool made;         /* CGROUP_HOST_ONE, v1: dir (the gadget's cgroup) is made and not yet removed */
        cpu_set_t cpus;    /* then: dir's CPUs (gadgetd's at open) */
};

struct cgroup_host {
        struct cgroup_hier hier[CGROUP_MAX_HIER];
        size_t n_hier;
        int ctrl_hier[CGROUP_N_CTRL]; /* index into hier, -1 if none serves it */
        bool swap_limit;              /* memory.swap.max / memory.memsw.* exist */
        bool one;                     /* CGROUP_HOST_ONE */
        bool scopes;                  /* CGROUP_HOST_SCOPES: hier[0] is v2, its dir the mount point */
        char why_v2[1024];            /* why v2 serves nothing ("" if it does) */
        char scope[64];               /* the delegated scope gadgetd asked systemd for ("" if none) */
        char started_in[256];         /* then: the v2 cgroup gadgetd was started in */
        char why_v1[256];             /* why v1 serves nothing ("" if it does) */
};

/* Finds what gadgetd may use (use restricts the versions): sets up the v2
 * delegation (gadgetd and the processes it has started move into
 * OWN/gadgetd.PID/supervisor) and creates the instance directories. Where
 * gadgetd's v2 cgroup cannot be taken over (not delegated: a login shell's
 * session scope) and systemd runs, gadgetd first asks it for a delegated
 * scope of its own (scope.h) and moves there; scope names it. A controller
 * no hierarchy offers is simply absent, with the reason in why_v2 / why_v1
 * (and, when no scope could be had, why and what to run instead).
 * 0, or -ENOMEM. */
#define CGROUP_HOST_ONE 1u   /* one gadget only: see the layout above */
/* Under systemd with cgroup v2: each gadget in a delegated scope of its
 * own (cgroup_scope.h), none below gadgetd's cgroup, so that systemd can
 * restart gadgetd.service while its gadgets live on (FdStore=yes). */
#define CGROUP_HOST_SCOPES 2u
int cgroup_host_open(struct cgroup_host *h, enum cgroup_use use, unsigned flags);
/* Whether cgroup v2 may serve memory, pids or cpu here: false only when
 * /proc/cgroups says each of them is bound to a v1 hierarchy or disabled
 * (a controller is in one hierarchy at most), so that cgroup_host_open
 * moves no process (the v2 delegation) whatever the layout. */
bool cgroup_v2_may_serve(void);
/* The same of text, a /proc/cgroups table (cgroup_procs.c). */
bool cgroup_v2_may_serve_in(const char *text);
/* Removes the instance directories that can be removed (and the stale
 * ones cgroup_host_tidy has not yet removed). */
void cgroup_host_close(struct cgroup_host *h);
/* CGROUP_HOST_ONE: the stale instance directories of gadgetds that are
 * gone (OWN/gadgetd.PID) are removed here, not at the open, so that a
 * one-shot run does it while its sandbox builds, off its start's path.
 * Does nothing the second time, nor without CGROUP_HOST_ONE. */
void cgroup_host_tidy(struct cgroup_host *h);
/* The version (1 or 2) serving c, 0 if none. */
int cgroup_host_version(const struct cgroup_host *h, enum cgroup_ctrl c);
/* The instance directory of the hierarchy serving c, NULL if none. */
const char *cgroup_host_dir(const struct cgroup_host *h, enum cgroup_ctrl c);

/* Values written into a gadget's cgroup; UINT64_MAX / 0 leave it unlimited. */
struct cgroup_limits {
        uint64_t memory_max;    /* bytes; swap is limited to 0 where possible */
        uint64_t pids_max;      /* tasks in the cgroup */
        uint32_t cpu_quota;     /* percent of one CPU */
};

/* Usage and the counters of limit hits since the cgroup was made. A field
 * whose controller is missing is 0. */
struct cgroup_stats {
        uint64_t memory_bytes;
        uint64_t memory_peak;   /* the most it used since its cgroup was made (0: unknown) */
        uint64_t tasks;
        uint64_t cpu_usec;
        uint64_t oom_kills;     /* processes the OOM killer ended at the memory limit */
        uint64_t pids_refused;  /* forks refused at pids.max */
        uint64_t throttled;     /* CPU periods in which the quota stopped the cgroup */
};

struct cgroup;

/* Makes OWN/gadgetd.PID/gadget-NAME in every hierarchy and writes the
 * limits. 0, or -errno with err naming the file and the reason (nothing is
 * left behind). */
int cgroup_new(struct cgroup_host *h, const char *name, const struct cgroup_limits *l,
               struct cgroup **out, char *err, size_t errlen);
/* The cgroups cgroup_new made for gadget name, as a re-executed gadgetd
 * finds them (gadgetctl daemon-reexec): each must exist. 0, or -errno with
 * err naming the missing directory. */
int cgroup_adopt(struct cgroup_host *h, const char *name, pid_t pid, struct cgroup **out, char *err,
                 size_t errlen);
/* Moves pid (and its later children) into the gadget's v2 cgroup. The
 * worker joins its v1 cgroups itself, through cgroup_join_fds. */
int cgroup_attach(struct cgroup *cg, pid_t pid, char *err, size_t errlen);
/* Opens the "tasks" file of each v1 hierarchy of the gadget's cgroup (up to
 * max, O_CLOEXEC) for the worker to join by writing "0" into each: a thread
 * that moves itself skips the global lock that writing a pid into
 * cgroup.procs takes, which waits for an RCU grace period (about 10 ms on
 * a VM). Sets *n; 0 or -errno with err (no fd left open). */
int cgroup_join_fds(const struct cgroup *cg, int *fds, size_t max, size_t *n, char *err, size_t errlen);
void cgroup_stats_read(const struct cgroup *cg, struct cgroup_stats *st);
/* Only the counters of limit hits (oom_kills, pids_refused; throttled if
 * asked): the periodic check of every running gadget reads these, two or
 * three files instead of seven; the other fields are 0. */
void cgroup_hits_read(const struct cgroup *cg, bool throttled, struct cgroup_stats *st);
/* Kills every process in the cgroup at once (v2 cgroup.kill); -EOPNOTSUPP
 * where the kernel or v1 has no such file. */
int cgroup_kill(const struct cgroup *cg);
/* Removes the gadget's cgroups (after its processes are gone). Accepts NULL. */
void cgroup_free(struct cgroup *cg);

/* Small files of cgroupfs, shared by cgroup_host.c and cgroup.c. */
/* mkdir of a cgroup, mode 0755 whatever the umask: 0 or -errno. */
int cgroup_mkdir(const char *dir);
int cgroup_write_file(const char *dir, const char *file, const char *text);
/* Reads into buf, NUL-terminated: the length read, or -errno. */
int cgroup_read_file(const char *dir, const char *file, char *buf, size_t len);
bool cgroup_file_exists(const char *dir, const char *file);
/* Writes cpus as dir's cpuset.cpus. 0 or -errno. */
int cgroup_cpus_write(const char *dir, const cpu_set_t *cpus);
/* Gives the new v1 cpuset dir the CPUs and memory nodes of parent (a new
 * cpuset has none, and no task can join it). 0 or -errno. */
int cgroup_cpuset_inherit(const char *parent, const char *dir);
