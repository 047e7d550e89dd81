/* filter_install: the worker's side of the seccomp filters — it installs
 * the two programs gadgetd compiled (filter.c), in gadgetd-sandbox. */
#include "filter.h"

#include <errno.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>

/* Installs both filters in this process; no_new_privs must be set. The
 * kernel applies every filter to every call and keeps the strictest
 * verdict, so neither can loosen the other. */
int filter_install(const struct gadget_filter *f)
{
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->list, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->args, 0, 0) < 0)
                return -errno;
        return 0;
}

int filter_install_init(const struct gadget_filter *f)
{
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->init, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->args, 0, 0) < 0)
                return -errno;
        return 0;
}

int filter_install_program(const struct gadget_filter *f)
{
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->list, 0, 0) < 0 ? -errno : 0;
}
