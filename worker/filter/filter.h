/* filter: the system-call filters every gadget runs under. They are
 * compiled once, when gadgetd is built (libseccomp, filter.c, run by
 * filter_gen.c), and installed by each worker just before the gadget
 * program starts (filter_install.c, in gadgetd-sandbox). Neither gadgetd
 * nor the sandbox needs libseccomp at run time. */
#pragma once

#include <linux/filter.h>

/* Two programs: an allowlist by call number, and refusals by argument
 * (which libseccomp cannot combine with an allowlist in one program); and
 * the allowlist's variant for the sandbox's init, which also allows
 * ptrace (it traces the program for its crashes: worker/sandbox/crash.c).
 * The init runs under init and args; the program under those and list,
 * which it installs itself right before its exec (filters stack and the
 * strictest verdict wins). */
struct gadget_filter {
        struct sock_fprog list;
        struct sock_fprog args;
        struct sock_fprog init;
};

/* Compiles both (malloc'd; free with filter_free). Returns 0 or -errno.
 * Build time only (filter_gen.c). */
int filter_build(struct gadget_filter *f);
void filter_free(struct gadget_filter *f);
/* The programs filter_build made when gadgetd was built (static; nothing
 * to free). */
void filter_compiled(struct gadget_filter *f);
/* Installs list and args in the calling process; no_new_privs must be
 * set. */
int filter_install(const struct gadget_filter *f);
/* Installs init and args (the sandbox's PID 1), or list alone (the
 * program, on top of those). */
int filter_install_init(const struct gadget_filter *f);
int filter_install_program(const struct gadget_filter *f);
