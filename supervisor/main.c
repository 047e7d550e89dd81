/* gadgetd: the privileged supervisor. Subcommands: run (one gadget in the
 * foreground), test (a gadget's calls from a file, answers compared), check
 * (validate policy files). */
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "policy.h"
#include "run.h"

/* `gadgetd check FILE...`: "FILE: ok" or every error found in it. */
static int check_main(int argc, char **argv)
{
        int bad = 0;
        if (argc < 2) {
                fprintf(stderr, "usage: gadgetd check FILE...\n");
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                struct policy *p = NULL;
                struct policy_errors errs = { 0 };
                if (policy_load(argv[i], &p, &errs) < 0) {
                        for (size_t j = 0; j < errs.n; j++)
                                printf("%s\n", errs.msgs[j]);
                        bad = 1;
                } else {
                        for (size_t j = 0; j < p->n_warnings; j++)
                                printf("%s\n", p->warnings[j]);
                        printf("%s: ok\n", argv[i]);
                }
                policy_errors_clear(&errs);
                policy_free(p);
        }
        return bad;
}

static void usage(FILE *f)
{
        fprintf(f, "usage: gadgetd [OPTIONS]                          the daemon (gadgetd --help)\n"
                   "       gadgetd COMMAND ...\n"
                   "  run POLICY [--call METHOD [JSON]] [-- ARGS...]   run one gadget in its sandbox\n"
                   "  test FILE                                       a gadget's calls from FILE, answers compared\n"
                   "  check FILE...                                   validate policy files\n"
                   "  --version                                       print the version\n"
                   "See gadgetd run --help, gadgetd test --help.\n");
}

int main(int argc, char **argv)
{
        /* No command, or options only: the daemon. */
        if (argc < 2 || argv[1][0] == '-') {
                if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
                        printf("gadgetd %s\n", GADGETD_VERSION);
                        return 0;
                }
                return daemon_main(argc, argv);
        }
        if (strcmp(argv[1], "run") == 0)
                return run_main(argc - 1, argv + 1);
        if (strcmp(argv[1], "test") == 0)
                return test_main(argc - 1, argv + 1);
        if (strcmp(argv[1], "check") == 0)
                return check_main(argc - 1, argv + 1);
        fprintf(stderr, "gadgetd: unknown command \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
}
