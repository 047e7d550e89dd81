/* filter: the system-call filters every gadget runs under. They are
 * compiled once, when gadgetd is built (libseccomp, filter.c, run by
 * filter_gen.c), and installed by each worker just before the gadget
 * program starts (filter_install.c, in gadgetd-sandbox). Neither gadgetd
 * nor the sandbox needs libseccomp at run time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <linux/filter.h>

/* Three variants of one program (an allowlist by call number behind the
 * refusals by argument, which libseccomp compiles apart and filter.c joins):
 * - program: the gadget's. Each refusal is SECCOMP_RET_USER_NOTIF: the
 *   kernel holds the call and asks the listener, the sandbox's init, which
 *   records it (the denials gadgetd shows) and answers with the errno of
 * - direct: the same program with the errnos in it, answered by the
 *   kernel. The init reads each answer from it (filter_verdict), and
 *   gadgetctl exec's probe, which has no listener, runs under it.
 * - init: the sandbox init's own, under which the program's is installed:
 *   the program's, but the init may trace its program (ptrace). Its
 *   refusals notify too, so that on the program the program's listener
 *   gets them (the kernel keeps the newest filter's of equal verdicts); the
 *   init itself has no listener, so its own refused calls fail (ENOSYS).
 * - learn: the program's for a learning run (gadgetd run --learn): the
 *   calls that look a path up are held for the init too, which notes a
 *   path the program could not find and lets the call go on exactly as
 *   `direct` allows it.
 * A call of another ABI kills the process in all of them. */
struct gadget_filter {
        struct sock_fprog program;
        struct sock_fprog direct;
        struct sock_fprog init;
        struct sock_fprog learn;
};

/* Compiles both (malloc'd; free with filter_free). Returns 0 or -errno.
 * Build time only (filter_gen.c). */
int filter_build(struct gadget_filter *f);
void filter_free(struct gadget_filter *f);
/* The programs filter_build made when gadgetd was built (static; nothing
 * to free). */
void filter_compiled(struct gadget_filter *f);
/* Installs p in the calling process; no_new_privs must be set. With
 * listen, returns the listener fd of its notifications (close-on-exec),
 * else 0; -errno. */
int filter_install(const struct sock_fprog *p, bool listen);

struct seccomp_data;
/* What p answers to the call d: its SECCOMP_RET_* value, as the kernel
 * would run it (classic BPF, the instructions seccomp accepts). A program
 * that reads outside d or jumps out of itself gives SECCOMP_RET_KILL_PROCESS. */
uint32_t filter_verdict(const struct sock_fprog *p, const struct seccomp_data *d);
/* Call numbers named at most (the table filter_gen writes). */
#define FILTER_CALLS_MAX 1024
/* The name of system call nr of this architecture, NULL if unknown. */
const char *filter_call_name(int nr);
