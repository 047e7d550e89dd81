/* filter: the system-call filters every gadget runs under. They are
 * compiled once, when gadgetd is built (libseccomp, filter.c, run by
 * filter_gen.c), and installed by each worker just before the gadget
 * program starts (filter_install.c, in gadgetd-sandbox). Neither gadgetd
 * nor the sandbox needs libseccomp at run time. */
#pragma once

#include <linux/filter.h>

/* Two programs: an allowlist by call number, and refusals by argument
 * (which libseccomp cannot combine with an allowlist in one program). */
struct gadget_filter {
        struct sock_fprog list;
        struct sock_fprog args;
};

/* Compiles both (malloc'd; free with filter_free). Returns 0 or -errno.
 * Build time only (filter_gen.c). */
int filter_build(struct gadget_filter *f);
void filter_free(struct gadget_filter *f);
/* The programs filter_build made when gadgetd was built (static; nothing
 * to free). */
void filter_compiled(struct gadget_filter *f);
/* Installs both in the calling process; no_new_privs must be set. */
int filter_install(const struct gadget_filter *f);
