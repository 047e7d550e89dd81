/* spawnbench: starts several commands in turn (A, B, C, A, B, C, ...) and
 * times each from its start until it has been reaped, so that every
 * alternative sees the same machine state. Each run must exit 0.
 *
 *   spawnbench ROUNDS WARMUP LABEL [N=PATH...] -- CMD ARGS... [--- LABEL ...]
 *
 * N=PATH opens PATH read-only as fd N of that command (bwrap's seccomp
 * programs). Prints {"LABEL": [ns, ...], ...}; WARMUP rounds are not kept.
 * Commands start with posix_spawn (vfork semantics), so the driver's own
 * cost is the same for all of them. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"

#define MAX_CMDS 8
#define MAX_FDS 4

extern char **environ;

struct cmd {
        struct samples s;
        char **argv;
        int fd_num[MAX_FDS];
        const char *fd_path[MAX_FDS];
        size_t n_fds;
};

/* Parses one group starting at argv[*i]; leaves *i after its "---". */
static int parse_group(int argc, char **argv, int *i, struct cmd *c)
{
        c->s.name = argv[(*i)++];
        while (*i < argc && strcmp(argv[*i], "--") != 0) {
                char *eq = strchr(argv[*i], '=');
                if (!eq || c->n_fds == MAX_FDS)
                        return -EINVAL;
                c->fd_num[c->n_fds] = atoi(argv[*i]);
                c->fd_path[c->n_fds++] = eq + 1;
                (*i)++;
        }
        if (*i >= argc - 1)
                return -EINVAL;
        c->argv = &argv[++(*i)];
        while (*i < argc && strcmp(argv[*i], "---") != 0)
                (*i)++;
        if (*i < argc)
                argv[(*i)++] = NULL; /* ends this command's argv */
        return 0;
}

/* One run of c: its wall time in ns, or -1 if it failed. Output goes to
 * /dev/null unless loud (the run that shows why a command fails). */
static int64_t run_once(const struct cmd *c, int loud)
{
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status;
        posix_spawn_file_actions_init(&fa);
        if (!loud) {
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        }
        for (size_t k = 0; k < c->n_fds; k++)
                posix_spawn_file_actions_addopen(&fa, c->fd_num[k], c->fd_path[k], O_RDONLY, 0);
        int64_t t0 = bench_now_ns();
        int e = posix_spawn(&pid, c->argv[0], &fa, NULL, c->argv, environ);
        if (e == 0)
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
        int64_t t1 = bench_now_ns();
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "spawnbench: %s failed (%s, status 0x%x)\n", c->s.name,
                        e ? strerror(e) : "ran", e ? 0 : (unsigned)status);
                if (!loud)
                        run_once(c, 1); /* again, to show what it says */
                return -1;
        }
        return t1 - t0;
}

int main(int argc, char **argv)
{
        struct cmd cmds[MAX_CMDS] = { 0 };
        struct samples *sets[MAX_CMDS];
        size_t n = 0;
        if (argc < 6) {
                fprintf(stderr, "usage: spawnbench ROUNDS WARMUP LABEL [N=PATH...] -- CMD... [--- LABEL ...]\n");
                return 2;
        }
        int rounds = atoi(argv[1]), warmup = atoi(argv[2]);
        for (int i = 3; i < argc && n < MAX_CMDS; n++)
                if (parse_group(argc, argv, &i, &cmds[n]) < 0) {
                        fprintf(stderr, "spawnbench: bad command group %zu\n", n + 1);
                        return 2;
                }
        for (int r = 0; r < warmup + rounds; r++)
                for (size_t k = 0; k < n; k++) {
                        int64_t ns = run_once(&cmds[k], 0);
                        if (ns < 0)
                                return 1;
                        if (r >= warmup && samples_add(&cmds[k].s, ns) < 0)
                                return 1;
                }
        for (size_t k = 0; k < n; k++)
                sets[k] = &cmds[k].s;
        samples_print(sets, n);
        return 0;
}
