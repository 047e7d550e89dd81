/* caps: capabilities and securebits of the worker (libcap). */
#include "sandbox.h"

#include <errno.h>
#include <stddef.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

/* Locks the securebits so that uid changes keep capabilities during setup
 * (NO_SETUID_FIXUP) and uid 0 never grants any (NOROOT), then forbids
 * ambient raises. Why this is safe: every bit is also locked, so neither
 * the gadget nor anything it execs can change them back. */
int caps_lock_securebits(void)
{
        unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                        SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                        SECBIT_KEEP_CAPS_LOCKED |
                        SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        if (cap_set_secbits(bits) < 0)
                return -errno;
        return 0;
}

/* Empties the bounding set. Why this may come first, before the setup:
 * the bounding set only limits what a later exec or capset can grant;
 * the capabilities the setup uses (effective, permitted) are untouched,
 * and nothing is exec'd before the program. It needs CAP_SETPCAP, which
 * caps_drop_all removes. */
int caps_drop_bounding(void)
{
        /* The kernel may know more capabilities than libcap: go on until
         * the kernel says the number is not a capability. */
        for (unsigned long c = 0; c < 64; c++) {
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
                        if (errno == EINVAL)
                                break;
                        return -errno;
                }
        }
        return 0;
}

/* Empties every other capability set: ambient, inheritable, permitted,
 * effective (the bounding set is empty since caps_drop_bounding). */
int caps_drop_all(void)
{
        cap_t none = NULL;
        int e = 0;

        if (cap_reset_ambient() < 0)
                return -errno;
        none = cap_init();
        if (!none)
                return -ENOMEM;
        if (cap_set_proc(none) < 0)
                e = -errno;
        cap_free(none);
        return e;
}
