/* startbench: the daemon's start of a gadget, measured in one process
 * with gadgetd's own code (libgadgetsupervisor: the daemon's unit,
 * spawner, peer and limits), next to a bare fork+exec of the same program
 * from the same process. Runs alternate:
 *   cold      policy file read and checked, unit made and started (uid,
 *             cgroup, sandbox, program) until the gadget's hello arrives,
 *             with no sandbox shell ready (as in a burst of starts)
 *   spare     the same, the daemon's spare shell ready (spare.h), as for
 *             a start after a quiet moment
 *   warm      the same gadget's start from a pre-warmed sandbox (built by
 *             unit_prewarm beforehand, as the daemon does while a restart
 *             backs off): the program's start until its hello
 *   forkexec  fork(), exec of the program with a socketpair on fd 3, until
 *             its hello frame arrives
 * The gadget is stopped after each run, outside the timed part.
 *
 *   startbench POLICY ROUNDS [BALLAST_MIB] [--modes cold,spare,warm,forkexec]
 *              [--state-dir D] [--run-dir D]
 *
 * BALLAST_MIB touches that much anonymous memory first, standing in for a
 * daemon holding many gadgets: a spawner that copies its parent's memory
 * slows down with it, a bare fork does. --modes picks the kinds of run
 * (all three by default); a bare fork of a large process also slows what
 * runs after it in that process (its pages are copy-on-write until
 * touched), so the spawner's independence is measured without it. Prints
 * the ns of each run. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <event2/event.h>

#include "benchutil.h"
#include "core/core.h"
#include "gadget.pb-c.h"
#include "system/log.h"
#include "policy.h"
#include "spawn/spare.h"
#include "spawn/uidpool.h"
#include "wire.h"

extern char **environ;

/* Runs the loop until u is ready (0) or has failed (-1). */
static int until_ready(struct core *c, struct unit *u)
{
        while (unit_state_of(u) != UNIT_READY) {
                if (unit_state_of(u) == UNIT_FAILED || unit_state_of(u) == UNIT_STOPPED)
                        return -1;
                event_base_loop(core_base(c), EVLOOP_ONCE);
        }
        return 0;
}

/* Unloads the gadget of name and runs the loop until it is gone. */
static void until_unloaded(struct core *c, struct unit *u, const char *name)
{
        core_unload(c, u, "benchmark round over");
        unit_kill(u, "benchmark round over");
        while (core_find(c, name))
                event_base_loop(core_base(c), EVLOOP_ONCE);
}

enum kind { COLD, SPARE, WARM };

/* One start of the policy at path. COLD: no sandbox shell is ready (as in
 * a burst of starts); SPARE: the daemon's spare shell is (as for a start
 * after a quiet moment); both timed from reading the policy file. WARM:
 * from a pre-warmed sandbox, timed from unit_start. */
static int start_once(struct core *c, const char *path, enum kind kind, struct samples *s)
{
        struct policy *p = NULL;
        struct policy_errors errs = { 0 };
        char name[256];
        if (kind == SPARE) {
                if (core_spare(c, true) < 0) {
                        fprintf(stderr, "startbench: no spare sandbox shell\n");
                        return -1;
                }
                /* As in the daemon, where it is made SPARE_DELAY_MS after a
                 * start: by the next one it waits for its setup. */
                usleep(SPARE_DELAY_MS * 1000);
        } else {
                core_spare(c, false); /* none is made during the run */
        }
        int64_t t0 = bench_now_ns();
        if (policy_load(path, &p, &errs) < 0) {
                for (size_t i = 0; i < errs.n; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                policy_errors_clear(&errs);
                return -1;
        }
        struct unit *u = core_add(c, p, &(struct unit_origin){ 0 });
        if (!u)
                return -1;
        snprintf(name, sizeof name, "%s", unit_name(u));
        if (kind == WARM) {
                if (unit_prewarm(u) < 0) {
                        fprintf(stderr, "startbench: the sandbox was not pre-warmed\n");
                        return -1;
                }
                t0 = bench_now_ns();
        }
        unit_start(u);
        int e = until_ready(c, u);
        int64_t t1 = bench_now_ns();
        if (e < 0)
                fprintf(stderr, "startbench: the gadget did not start: %s\n", unit_cause(u));
        else
                samples_add(s, t1 - t0);
        until_unloaded(c, u, name);
        return e;
}

/* The benchmark's hooks of its units: it watches their state itself. */
static void quiet(void *arg, struct unit *u)
{
}

static void quiet_log(void *arg, struct unit *u, size_t lines)
{
}

int main(int argc, char **argv)
{
        struct samples cold = { .name = "cold_ns" }, spare = { .name = "spare_ns" }, warm = { .name = "warm_ns" },
                       fe = { .name = "forkexec_ns" }, junk = { .name = "warmup" };
        struct core_config cc = { .state_dir = "/tmp/startbench/state", .uid_base = UIDPOOL_DEFAULT_BASE,
                                  .audit = AUDIT_DEFAULT_CONFIG };
        struct core *core = NULL;
        int pos = 0, rounds = 0;
        size_t ballast = 0;
        const char *path = NULL, *modes = "cold,spare,warm,forkexec";
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--modes") == 0 && i + 1 < argc)
                        modes = argv[++i];
                else if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc)
                        cc.state_dir = argv[++i];
                else if (strcmp(argv[i], "--run-dir") == 0 && i + 1 < argc)
                        i++; /* accepted as before; nothing lives there */
                else if (pos == 0 && ++pos)
                        path = argv[i];
                else if (pos == 1 && ++pos)
                        rounds = atoi(argv[i]);
                else if (pos == 2 && ++pos)
                        ballast = (size_t)atol(argv[i]) << 20;
        }
        if (!path || rounds <= 0) {
                fprintf(stderr, "usage: startbench POLICY ROUNDS [BALLAST_MIB] [--modes cold,spare,warm,forkexec] "
                        "[--state-dir D] [--run-dir D]\n");
                return 2;
        }
        if (ballast) {
                char *b = mmap(NULL, ballast, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (b == MAP_FAILED)
                        return 1;
                for (size_t o = 0; o < ballast; o += 4096)
                        b[o] = 1;
        }
        struct policy *p = NULL;
        struct policy_errors errs = { 0 };
        if (policy_load(path, &p, &errs) < 0)
                return 1;
        log_set_level(L_WARN);
        static const struct unit_hooks hooks = { .ready = quiet, .exited = quiet, .stopped = quiet,
                                                 .log_added = quiet_log };
        cc.base = event_base_new();
        if (!cc.base || core_open(&cc, &hooks, &core) < 0)
                return 1;
        bool c = strstr(modes, "cold"), sp = strstr(modes, "spare"), w = strstr(modes, "warm"),
             f = strstr(modes, "forkexec");
        int fail = 0;
        for (int r = -1; !fail && r < rounds; r++) /* round -1: warm-up, not kept */
                fail = (c && start_once(core, path, COLD, r < 0 ? &junk : &cold) < 0) ||
                       (sp && start_once(core, path, SPARE, r < 0 ? &junk : &spare) < 0) ||
                       (w && start_once(core, path, WARM, r < 0 ? &junk : &warm) < 0) ||
                       (f && bench_forkexec(p->exec, p->name, r < 0 ? &junk : &fe) < 0);
        core_close(core);
        event_base_free(cc.base);
        policy_free(p);
        if (fail) {
                fprintf(stderr, "startbench: a run failed\n");
                return 1;
        }
        struct samples *sets[] = { &cold, &spare, &warm, &fe };
        samples_print(sets, 4);
        return 0;
}
