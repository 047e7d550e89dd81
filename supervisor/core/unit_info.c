/* unit_info: what is known of a unit, for its owner and the control
 * socket and gateway (unit.h). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core_int.h"
#include "link/peer.h"
#include "policy.h"
#include "store/store.h"
#include "system/monotime.h"
#include "system/proc.h"

struct unit *unit_next(const struct unit *u) { return u->next; }
const struct policy *unit_policy(const struct unit *u) { return u->policy; }
const char *unit_name(const struct unit *u) { return u->policy->name; }
enum unit_state unit_state_of(const struct unit *u) { return u->state; }
/* Ready, and its channel open: one its gadget hung up (EOF, a protocol
 * violation) is on its way out though its process has not ended yet, so
 * calls wait for what comes next (a restart, or its end) as for a start. */
bool unit_is_ready(const struct unit *u)
{
        return u->state == UNIT_READY && u->run->peer && peer_state(u->run->peer) == PEER_READY;
}
const char *unit_cause(const struct unit *u) { return u->cause; }
bool unit_from_dir(const struct unit *u) { return u->from_dir; }
uint64_t unit_policy_hash(const struct unit *u) { return u->policy_hash; }
int unit_program_status(const struct unit *u) { return u->run->program_status; }
const struct logbuf *unit_log(const struct unit *u) { return &u->log; }
struct gadget_bindings *unit_bindings(const struct unit *u) { return u->bind; }
const struct unit_stats *unit_stats(const struct unit *u) { return &u->stats; }
const struct call_log *unit_recent_calls(const struct unit *u) { return u->recent; }

_Static_assert(LIMITER_HITS_N == sizeof ((struct unit_info *)0)->limit_hits / sizeof (uint64_t) &&
               LIMITER_HITS_N == sizeof ((struct unit_stats *)0)->limit_hits / sizeof (uint64_t),
               "a limit hit of each kind");

bool unit_runs_here(const struct unit *u) { return !u->core->bindings.lease || u->leased; }

bool unit_lease_expired(const struct unit *u)
{
        return u->core->bindings.lease && u->leased && !kvpg_lease_valid(u->core->bindings.lease);
}

static void unit_usage(const struct unit *u, uint64_t *memory, uint64_t *tasks, uint64_t *cpu_usec,
                       uint64_t *memory_peak);
static const char *unit_limits_mode(const struct unit *u);
static uint64_t unit_memory_bytes(const struct unit *u);

size_t unit_methods(const struct unit *u, char ***methods)
{
        *methods = NULL;
        return u->run->peer ? peer_methods(u->run->peer, methods) : 0;
}

const char *unit_last_crash(const struct unit *u, char **frames, size_t *n)
{
        *n = 0;
        if (!u->last_crash)
                return NULL;
        for (size_t i = 0; i < u->last_crash->n_frames; i++)
                frames[i] = (char *)u->last_crash->frames[i];
        *n = u->last_crash->n_frames;
        return u->last_crash->cause;
}

size_t unit_signatures(const struct unit *u, char ***texts)
{
        *texts = NULL;
        return u->run->peer ? peer_signatures(u->run->peer, texts) : 0;
}

/* The host pid of r's program, looked up once per process: PID 2 of its
 * sandbox, among its PID 1's children. */
static pid_t unit_program_pid(struct unit_run *r)
{
        if (r->program_of != r->child.pid || !r->program_pid) {
                r->program_pid = proc_child_inner(r->child.pid, 2);
                r->program_of = r->child.pid;
        }
        return r->program_pid;
}

void unit_info(const struct unit *u, struct unit_info *out)
{
        *out = (struct unit_info){
                .name = u->policy->name,
                .state = unit_state_name(u->state),
                .cause = u->cause[0] ? u->cause : u->last_cause,
                /* A sandbox pre-warmed for the next start runs no
                 * program yet: no pid to show (or for kill to signal). */
                .pid = u->run->child.pid > 0 && u->run->child.go_fd < 0 ? u->run->child.pid : 0,
                .uptime_ms = unit_uptime_ms(u),
                .restarts = u->restarts,
                .calls = u->calls,
                .in_flight = u->n_pending + (u->run->peer ? peer_pending(u->run->peer) : 0),
                .start_us = u->run->start_us,
                .limits_mode = unit_limits_mode(u),
                .log_lines_max = u->log_budget.lines_max,
                .log_bytes_max = u->log_budget.bytes_max,
                .start = policy_start_name(u->policy->start),
                .active_ago_ms = u->last_active_ms ? monotime_ms() - u->last_active_ms : 0,
                .kept_errors = u->n_kept_errors,
                .kept_lines = u->kept_errors ? u->kept_errors : "",
                .denials = u->denials,
        };
        out->program_pid = out->pid ? unit_program_pid(u->run) : 0;
        unit_events_info(u, out);
        unit_usage(u, &out->memory_bytes, &out->tasks, &out->cpu_usec, &out->memory_peak);
        for (int k = 0; k < LIMITER_HITS_N; k++)
                out->limit_hits[k] = u->stats.limit_hits[k] + u->run->limits.hits[k];
        unit_lease_info(u, &out->node, &out->epoch);
}

bool unit_leased(const struct unit *u)
{
        return u->leased;
}

bool unit_lease_adopting(const struct unit *u)
{
        return u->lease_adopting;
}

const char *unit_owner(const struct unit *u)
{
        return u->leased ? u->core->cfg.node : u->owner;
}

void unit_lease_info(const struct unit *u, const char **node, int64_t *epoch)
{
        struct kvpg_lease *l = u->core->bindings.lease;
        *node = NULL;
        *epoch = 0;
        if (!l)
                return;
        *node = unit_owner(u);
        *epoch = u->leased ? kvpg_lease_epoch(l, u->policy->name) : u->owner_epoch;
}

const char *unit_state_name(enum unit_state s)
{
        static const char *const names[] = { "starting", "ready", "stopping", "stopped", "failed", "remote", "idle" };
        return names[s];
}

uint64_t unit_uptime_ms(const struct unit *u)
{
        if (u->state != UNIT_READY && u->state != UNIT_STARTING && u->state != UNIT_STOPPING)
                return 0;
        return monotime_since_ms(&u->run->started);
}

static void unit_usage(const struct unit *u, uint64_t *memory, uint64_t *tasks, uint64_t *cpu_usec,
                       uint64_t *memory_peak)
{
        limiter_usage(&u->run->limits, memory, tasks, cpu_usec, memory_peak);
        if (!*memory)
                *memory = unit_memory_bytes(u);
}

static const char *unit_limits_mode(const struct unit *u)
{
        return u->run->limits.mode ? u->run->limits.mode : u->core->limiter.mode;
}

/* Resident memory of PID 1's children (the program and what it forked
 * directly) from /proc: the estimate without a memory cgroup. */
static uint64_t unit_memory_bytes(const struct unit *u)
{
        char path[64], buf[4096];
        uint64_t total = 0;
        if (u->run->child.pid <= 0)
                return 0;
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)u->run->child.pid, (int)u->run->child.pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n")) {
                unsigned long size, resident;
                snprintf(path, sizeof path, "/proc/%s/statm", tok);
                FILE *s = fopen(path, "re");
                if (!s)
                        continue;
                if (fscanf(s, "%lu %lu", &size, &resident) == 2)
                        total += (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
                fclose(s);
        }
        return total;
}
