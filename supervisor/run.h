/* run: `gadgetd run POLICY [--call METHOD [JSON]] [-- ARGS...]`, one gadget
 * in its sandbox in the foreground. */
#pragma once

/* Exit statuses of gadgetd run besides the gadget's own. */
#define RUN_EXIT_USAGE 2      /* bad command line or policy */
#define RUN_EXIT_START 125    /* the sandbox could not be set up */

struct run_ctx;
struct unit;

int run_main(int argc, char **argv);
/* Hooks from the unit of gadgetd run's one gadget. */
void run_unit_ready(struct run_ctx *c, struct unit *u);
void run_unit_exited(struct run_ctx *c, struct unit *u);
/* The pipes the program's stdout and stderr go to: gadgetd run copies
 * them to its own, so the program never holds the caller's files. Sets
 * the write ends for the spawn (the caller closes them). 0 or -errno. */
int run_output_pipes(struct run_ctx *c, int *out_w, int *err_w);
