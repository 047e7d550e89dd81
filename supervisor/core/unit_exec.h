/* unit_exec: gadgetctl exec — an operator's command run inside a gadget's
 * running sandbox, as the gadget (spawn/enter.c, worker/sandbox/enter.c),
 * audited at its start and its end. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct unit;
struct unit_exec;

/* The command ended: status as a shell gives it (exit code, 128+N for
 * signal N), or failed (non-NULL: "step: reason", it never ran). */
typedef void (*unit_exec_done)(void *arg, int status, const char *failed);

/* Runs argv (NULL-terminated) in u's running sandbox with stdio (stdin,
 * stdout, stderr; not taken: the caller closes them), for uid (audited,
 * with the command); done is called once when it ended, unless
 * unit_exec_cancel came first. 0 with *out, or a GADGET_E* code with msg
 * (EUNAVAILABLE: no process of it runs here; EFAILED: a step of the
 * start, named). */
int unit_exec_start(struct unit *u, char *const *argv, const int *stdio, uint32_t uid, unit_exec_done done,
                    void *arg, struct unit_exec **out, char *msg, size_t len);
/* Ends the probe (SIGKILL: its command ends with it) and frees x, without
 * calling done; its end is audited. Accepts NULL. */
void unit_exec_cancel(struct unit_exec *x);
