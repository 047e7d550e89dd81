/* selftest: `gadgetctl selftest [POLICY]` runs the escape probe on this host
 * under the default policy, or under POLICY with the probe as its program,
 * through `gadgetd run`, and prints every attempt with its verdict. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buildtree.h"
#include "cmd.h"
#include "output.h"
#include "show.h"

#ifndef GADGETD_PATH
#define GADGETD_PATH "/usr/sbin/gadgetd"
#endif
#ifndef ESCAPE_PROBE_PATH
#define ESCAPE_PROBE_PATH "/usr/libexec/gadgetd/escape-probe"
#endif

/* The programs the selftest runs: GADGETD and GADGETD_ESCAPE_PROBE from the
 * environment, else this build tree's when gadgetctl runs from the build
 * tree it was built in (as gadgetd finds its gadgetd-sandbox), else the
 * installed ones. */
struct selftest_programs {
        const char *gadgetd;
        const char *probe;
};

static struct selftest_programs selftest_programs(void)
{
        struct selftest_programs p = { GADGETD_PATH, ESCAPE_PROBE_PATH };
#if defined(GADGETCTL_SELF_BUILT) && defined(GADGETD_BUILT) && defined(ESCAPE_PROBE_BUILT)
        static char gadgetd[PATH_MAX], probe[PATH_MAX];
        if (buildtree_path(GADGETCTL_SELF_BUILT, GADGETD_BUILT, gadgetd, sizeof gadgetd) &&
            buildtree_path(GADGETCTL_SELF_BUILT, ESCAPE_PROBE_BUILT, probe, sizeof probe))
                p = (struct selftest_programs){ gadgetd, probe };
#endif
        if (getenv("GADGETD"))
                p.gadgetd = getenv("GADGETD");
        if (getenv("GADGETD_ESCAPE_PROBE"))
                p.probe = getenv("GADGETD_ESCAPE_PROBE");
        return p;
}

/* Whether path is a program this user may run; if not, says so on stderr,
 * naming the variable that chooses another. */
static bool selftest_program_ok(const char *what, const char *path, const char *var)
{
        if (access(path, X_OK) == 0)
                return true;
        fprintf(stderr, "gadgetctl: cannot run %s %s: %s (set %s to the %s to test)\n", what, path,
                strerror(errno), var, what);
        return false;
}

/* The policy to run: POLICY's text with the probe as Exec= and no
 * Arguments=, or a minimal default one. */
static char *policy_text(const char *path, const char *probe)
{
        char *out = NULL;
        size_t len = 0;
        FILE *o = open_memstream(&out, &len);
        if (!o)
                return NULL;
        if (!path) {
                fprintf(o, "[Gadget]\nName=selftest\nExec=%s\nMemoryMax=64M\nTasksMax=32\nTmpSize=16M\n", probe);
        } else {
                FILE *in = fopen(path, "re");
                char *line = NULL;
                size_t cap = 0;
                if (!in) {
                        fclose(o);
                        free(out);
                        return NULL;
                }
                while (getline(&line, &cap, in) > 0) {
                        const char *s = line + strspn(line, " \t");
                        if (strncmp(s, "Exec=", 5) == 0 || strncmp(s, "Arguments=", 10) == 0)
                                continue;
                        fputs(line, o);
                        if (strncmp(s, "[Gadget]", 8) == 0)
                                fprintf(o, "Exec=%s\n", probe);
                }
                free(line);
                fclose(in);
        }
        fclose(o);
        return out;
}

/* Writes text as a root-only policy file in a fresh directory. */
static int write_policy(const char *text, char *dir, char *file, size_t len)
{
        strcpy(dir, "/tmp/gadgetctl-selftest-XXXXXX");
        if (!mkdtemp(dir))
                return -errno;
        snprintf(file, len, "%s/selftest.policy", dir);
        FILE *f = fopen(file, "wxe");
        if (!f)
                return -errno;
        fchmod(fileno(f), 0644);
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -EIO;
}

/* nftw callback: removes one entry of the selftest's own directory (made
 * by mkdtemp, root's alone; FTW_PHYS: links are removed, never followed). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

/* Runs gadgetd run on the policy, with a state and runtime directory of
 * its own in dir: the probe's run never touches the host's state
 * directory (its audit log, or a daemon's lock there that would refuse
 * it). The probe's lines are read back through a pipe. Returns gadgetd's
 * exit status or -errno. */
static int run_probe(const char *gadgetd, const char *dir, const char *policy, char **out, size_t *outlen)
{
        char host[256] = "", state[96], run[96];
        int fds[2];
        snprintf(state, sizeof state, "%s/state", dir);
        snprintf(run, sizeof run, "%s/run", dir);
        gethostname(host, sizeof host);
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                dup2(fds[1], 1);
                execl(gadgetd, gadgetd, "run", "--state-dir", state, "--run-dir", run, policy, "--", "--host-name",
                      host, (char *)NULL);
                fprintf(stderr, "gadgetctl: cannot run %s: %s\n", gadgetd, strerror(errno));
                _exit(127);
        }
        close(fds[1]);
        FILE *o = open_memstream(out, outlen);
        char buf[4096];
        ssize_t n;
        while ((n = read(fds[0], buf, sizeof buf)) > 0)
                fwrite(buf, 1, (size_t)n, o);
        fclose(o);
        close(fds[0]);
        int st;
        if (waitpid(pid, &st, 0) < 0)
                return -errno;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Prints the attempts (table or JSON); returns how many escaped, or -1. */
static int show_attempts(const struct ctl *ctl, char *text, int *total)
{
        static const char *const headers[] = { "ATTEMPT", "VERDICT", "DETAIL" };
        struct output_table *t = output_table_new(3, headers, NULL);
        json_t *arr = json_array();
        int escaped = 0;
        *total = 0;
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                char *f[3] = { line, NULL, NULL };
                for (int i = 1; i < 3 && f[i - 1]; i++)
                        if ((f[i] = strchr(f[i - 1], '\t')))
                                *f[i]++ = '\0';
                if (!f[1] || !f[2])
                        continue;
                (*total)++;
                if (strcmp(f[1], "blocked") != 0)
                        escaped++;
                const char *cells[3] = { f[0], f[1], f[2] };
                if (t)
                        output_table_add(t, cells);
                json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "attempt", f[0], "verdict", f[1],
                                                     "detail", f[2]));
        }
        /* No attempt read: the probe did not run; the caller says why,
         * with no empty table before it. */
        if (ctl->json && *total > 0)
                show_json(stdout, arr);
        else {
                json_decref(arr);
                if (t && *total > 0)
                        output_table_print(t, stdout);
        }
        output_table_free(t);
        return escaped;
}

int cmd_selftest(const struct ctl *ctl, const struct cmd_args *a)
{
        struct selftest_programs prog = selftest_programs();
        const char *gadgetd = prog.gadgetd, *probe = prog.probe;
        char dir[64], file[128], *text = NULL, *out = NULL;
        size_t outlen = 0;
        int total = 0, st = CTL_EXIT_FAILED;

        /* Before any table: a missing program is named with its variable. */
        if (!selftest_program_ok("gadgetd", gadgetd, "GADGETD") ||
            !selftest_program_ok("escape probe", probe, "GADGETD_ESCAPE_PROBE"))
                return CTL_EXIT_FAILED;
        text = policy_text(a->n_pos ? a->pos[0] : NULL, probe);
        if (!text) {
                fprintf(stderr, "gadgetctl: cannot read %s: %s\n", a->n_pos ? a->pos[0] : "policy", strerror(errno));
                return CTL_EXIT_FAILED;
        }
        int e = write_policy(text, dir, file, sizeof file);
        free(text);
        if (e < 0) {
                fprintf(stderr, "gadgetctl: cannot write a policy in /tmp: %s\n", strerror(-e));
                return CTL_EXIT_FAILED;
        }
        int rc = run_probe(gadgetd, dir, file, &out, &outlen);
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        if (rc < 0 || !out) {
                fprintf(stderr, "gadgetctl: cannot run the probe: %s\n", strerror(rc < 0 ? -rc : ENOMEM));
                free(out);
                return CTL_EXIT_FAILED;
        }
        if (!ctl->json && strchr(out, '\t'))
                printf("gadgetd %s ran the probe %s:\n\n", gadgetd, probe);
        int escaped = show_attempts(ctl, out, &total);
        free(out);
        if (total == 0) {
                fprintf(stderr, "gadgetctl: the probe did not run (gadgetd run exited %d)\n", rc);
        } else if (escaped > 0) {
                fprintf(stderr, "gadgetctl: %d of %d attempts ESCAPED the sandbox\n", escaped, total);
        } else {
                if (!ctl->json)
                        printf("\n%d attempts, all blocked\n", total);
                st = rc == 0 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
        }
        return st;
}
