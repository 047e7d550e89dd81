/* run: `gadgetd run POLICY [--call METHOD [JSON]] [-- ARGS...]`, one gadget
 * in its sandbox in the foreground. */
#pragma once

/* Exit statuses of gadgetd run besides the gadget's own. */
#define RUN_EXIT_USAGE 2      /* bad command line or policy */
#define RUN_EXIT_START 125    /* the sandbox could not be set up */

int run_main(int argc, char **argv);
/* gadgetd test FILE: a gadget's calls from FILE (casefile.h), each answer
 * compared with the one wanted, on a state directory of its own. */
int test_main(int argc, char **argv);
