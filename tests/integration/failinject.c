/* failinject: runs a program (gadgetd) under a seccomp filter that makes
 * one system call of the sandbox setup fail with EPERM, where the kernel
 * would not fail on its own. Test-only: the failure comes from outside,
 * so gadgetd and gadgetd-sandbox carry no test switch. The filter is
 * inherited by every process the program starts, the sandbox helper
 * included; gadgetd itself makes none of the calls it matches.
 *
 *   failinject MODE PROGRAM [ARGS...]
 *
 * MODE: unshare-net (the network namespace made, unshare(CLONE_NEWNET)) and
 * mount-private (the mount tree made private): steps the sandbox
 * shell takes before its setup comes; mount-root-tmpfs (the first tmpfs, flags MS_NOSUID|MS_NODEV with
 * options), mount-proc (flags MS_NOSUID|MS_NODEV|MS_NOEXEC without
 * options), capabilities (prctl(PR_CAPBSET_DROP)), no-new-privs
 * (prctl(PR_SET_NO_NEW_PRIVS)), seccomp (seccomp(SECCOMP_SET_MODE_FILTER)). */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>
#include <unistd.h>

static int add_rules(scmp_filter_ctx ctx, const char *mode)
{
        if (strcmp(mode, "unshare-net") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                                        SCMP_A0(SCMP_CMP_EQ, CLONE_NEWNET));
        if (strcmp(mode, "mount-private") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mount), 1,
                                        SCMP_A3(SCMP_CMP_EQ, MS_REC | MS_PRIVATE));
        if (strcmp(mode, "mount-root-tmpfs") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mount), 2,
                                        SCMP_A3(SCMP_CMP_EQ, MS_NOSUID | MS_NODEV), SCMP_A4(SCMP_CMP_NE, 0));
        if (strcmp(mode, "mount-proc") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mount), 2,
                                        SCMP_A3(SCMP_CMP_EQ, MS_NOSUID | MS_NODEV | MS_NOEXEC),
                                        SCMP_A4(SCMP_CMP_EQ, 0));
        if (strcmp(mode, "capabilities") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
                                        SCMP_A0(SCMP_CMP_EQ, PR_CAPBSET_DROP));
        if (strcmp(mode, "no-new-privs") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1,
                                        SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS));
        if (strcmp(mode, "seccomp") == 0)
                return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(seccomp), 1,
                                        SCMP_A0(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
        return -EINVAL;
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: failinject MODE PROGRAM [ARGS...]\n");
                return 2;
        }
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int e = ctx ? add_rules(ctx, argv[1]) : -ENOMEM;
        /* Root needs no no_new_privs to install a filter; leaving it unset
         * keeps gadgetd as it would run. */
        if (e == 0 && (e = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) == 0)
                e = seccomp_load(ctx);
        seccomp_release(ctx);
        if (e < 0) {
                fprintf(stderr, "failinject %s: %s\n", argv[1], strerror(-e));
                return 2;
        }
        execv(argv[2], argv + 2);
        fprintf(stderr, "failinject: %s: %s\n", argv[2], strerror(errno));
        return 127;
}
