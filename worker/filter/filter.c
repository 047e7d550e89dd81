/* filter: an allowlist of system calls for gadgets, with the refusals the
 * sandbox promises (docs/security.md, "The sandbox", point 6). */
#include "filter.h"

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/seccomp.h>

/* What an ordinary program needs. Anything not named here fails with
 * ENOSYS (so a libc falls back as on an older kernel), except the calls in
 * refused[], which fail with EPERM, and the special rules below. */
static const char *const allowed[] = {
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
        "preadv2", "pwritev2", "open", "openat", "openat2", "creat", "close", "close_range",
        "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "lseek",
        "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents",
        "getdents64", "getcwd", "chdir", "fchdir", "rename", "renameat", "renameat2",
        "mkdir", "mkdirat", "rmdir", "link", "linkat", "unlink", "unlinkat", "symlink",
        "symlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown",
        "lchown", "fchownat", "umask", "truncate", "ftruncate", "fallocate", "fadvise64",
        "readahead", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "flock",
        "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "sendfile", "splice", "tee",
        "vmsplice", "copy_file_range", "utime", "utimes", "utimensat", "futimesat",
        "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
        "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
        "fremovexattr", "ioctl", "poll", "ppoll", "select", "pselect6", "epoll_create",
        "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
        "eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create",
        "timerfd_settime", "timerfd_gettime", "inotify_init", "inotify_init1",
        "inotify_add_watch", "inotify_rm_watch", "memfd_create", "mknod", "mknodat",
        "mmap", "munmap", "mprotect", "mremap", "msync", "mincore", "madvise", "brk",
        "mlock", "mlock2", "munlock", "mlockall", "munlockall", "membarrier",
        "pkey_alloc", "pkey_free", "pkey_mprotect", "map_shadow_stack", "mseal",
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
        "rt_sigtimedwait", "rt_sigsuspend", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
        "sigaltstack", "kill", "tkill", "tgkill", "pause", "nanosleep", "clock_nanosleep",
        "alarm", "getitimer", "setitimer", "timer_create", "timer_settime",
        "timer_gettime", "timer_getoverrun", "timer_delete", "clock_gettime",
        "clock_getres", "gettimeofday", "time", "fork", "vfork", "clone", "execve",
        "execveat", "exit", "exit_group", "wait4", "waitid", "pidfd_open",
        "pidfd_send_signal", "getpid", "gettid", "getppid", "getpgrp", "getpgid",
        "setpgid", "getsid", "setsid", "getuid", "geteuid", "getgid", "getegid",
        "getresuid", "getresgid", "getgroups", "capget", "uname", "sysinfo", "times",
        "getrusage", "getrlimit", "setrlimit", "prlimit64", "getpriority", "setpriority",
        "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
        "sched_getscheduler", "sched_getattr", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "getcpu", "prctl",
        "arch_prctl", "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue",
        "set_robust_list", "get_robust_list", "set_tid_address", "rseq", "getrandom",
        "restart_syscall", "seccomp", "landlock_create_ruleset", "landlock_add_rule",
        "landlock_restrict_self", "shmget", "shmat", "shmdt", "shmctl", "semget",
        "semop", "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl",
        "get_mempolicy", "cachestat",
        /* On the RPC socket, the only socket a gadget ever holds. */
        "sendmsg", "recvmsg", "sendto", "recvfrom", "sendmmsg", "recvmmsg", "shutdown",
        "getsockname", "getpeername", "getsockopt", "setsockopt",
};

/* Named refusals (EPERM): the ways out docs/security.md lists ("The sandbox", point 6), so that a probe and
 * a reader of this file see them refused on purpose. */
static const char *const refused[] = {
        "io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace",
        "process_vm_readv", "process_vm_writev", "pidfd_getfd", "bpf",
        "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "unshare",
        "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig",
        "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
        "open_by_handle_at", "name_to_handle_at", "personality", "init_module",
        "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
        "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime",
        "adjtimex", "iopl", "ioperm", "syslog", "fanotify_init", "fanotify_mark",
        "quotactl", "quotactl_fd", "capset", "setuid", "setgid",
        "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
        "setgroups", "sched_setscheduler", "sched_setparam", "sched_setattr", "vhangup",
        "kcmp", "lookup_dcookie", "uselib", "ustat", "sysfs", "_sysctl", "nfsservctl",
        "connect", "bind", "listen", "accept", "accept4", "mbind", "set_mempolicy",
        "migrate_pages", "move_pages", "process_madvise", "process_mrelease",
        "memfd_secret", "listmount", "statmount", "mq_open", "mq_unlink",
};

/* What the sandbox's init may do beyond its program: follow the program
 * as its tracer (crash reports). Only the init's own filter allows them;
 * the program's, installed on top, refuses them again. */
static const char *const init_only[] = { "ptrace", "process_vm_readv" };

/* The calls that look a path up, held for the init in a learning run
 * (gadgetd run --learn): it notes a path the program could not find, and
 * lets the call go on as the filter allows it (FILTER_LEARN_ARGS says
 * which argument is the path, worker/sandbox/learn.c). */
static const char *const learn_calls[] = {
        "open", "openat", "openat2", "creat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat",
        "faccessat2", "readlink", "readlinkat", "execve", "execveat", "chdir",
};

static bool is_in(const char *name, const char *const *names, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(name, names[i]) == 0)
                        return true;
        return false;
}

static bool is_init_only(const char *name)
{
        return is_in(name, init_only, sizeof init_only / sizeof *init_only);
}

/* Adds one rule per name, skipping names this libseccomp does not know
 * (and, with skip_init_only, the init's own calls); with learn, the
 * lookups of learn_calls are held for the init instead. */
static int add_rules(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n, bool skip_init_only,
                     bool learn)
{
        for (size_t i = 0; i < n; i++) {
                if (skip_init_only && is_init_only(names[i]))
                        continue;
                int nr = seccomp_syscall_resolve_name(names[i]);
                if (nr == __NR_SCMP_ERROR)
                        continue;
                bool held = learn && is_in(names[i], learn_calls, sizeof learn_calls / sizeof *learn_calls);
                int e = seccomp_rule_add(ctx, held ? SCMP_ACT_NOTIFY : action, nr, 0);
                if (e < 0)
                        return e;
        }
        return 0;
}

/* Namespace flags clone() may not carry (unshare and setns are refused
 * outright in the allowlist). */
static const unsigned long ns_flags[] = {
        CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC,
        CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* The allowlist's own special cases. */
static int add_list_special(scmp_filter_ctx ctx)
{
        int e;
        /* Why this is safe: no socket can be created, of any family, so
         * the RPC fd stays the gadget's only way to talk. EACCES at once.
         * (clone3 needs no rule: it falls to the default ENOSYS, so libc
         * uses clone, whose flags the second filter checks.) */
        if ((e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 0)) < 0 ||
            (e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socketpair), 0)) < 0)
                return e;
        return 0;
}

/* The second filter: everything allowed except calls refused by their
 * arguments. libseccomp lets an unconditional allow override conditional
 * refusals of the same call, so these live in a filter of their own; the
 * kernel applies the stricter verdict of the two. */
static int add_arg_rules(scmp_filter_ctx ctx)
{
        int e;
        /* RLIMIT_CORE stays what the sandbox set (1: no core of the kernel's,
         * worker/sandbox/limits.c): a gadget that lowered it to 0 would have
         * its crashes piped to the host's core handler. Reading it is fine. */
        if ((e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setrlimit), 1,
                                  SCMP_A0(SCMP_CMP_EQ, RLIMIT_CORE))) < 0 ||
            (e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 2,
                                  SCMP_A1(SCMP_CMP_EQ, RLIMIT_CORE), SCMP_A2(SCMP_CMP_NE, 0))) < 0)
                return e;
        for (size_t i = 0; i < sizeof ns_flags / sizeof *ns_flags; i++)
                if ((e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                          SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
                        return e;
        /* mknod makes FIFOs only (mkfifo, for shells and build tools). Why
         * this is safe: a FIFO joins only processes that can reach it, and
         * a gadget can write only its own /tmp and /dev/shm; every other
         * file type is refused here (devices also need CAP_MKNOD in the
         * host, which a user namespace never has). */
        for (unsigned long type = 0; type <= S_IFMT; type += 010000) {
                if (type == S_IFIFO)
                        continue;
                if ((e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknod), 1,
                                          SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, type))) < 0 ||
                    (e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknodat), 1,
                                          SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, type))) < 0)
                        return e;
        }
        /* The kernel compares only the low 32 bits of an ioctl request, so
         * the masked compare also catches the high-bits variant. */
        if ((e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0 ||
            (e = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) < 0)
                return e;
        return 0;
}

/* Reads the exported BPF program back from a memfd. */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *prog)
{
        int fd = memfd_create("gadget-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int e = seccomp_export_bpf(ctx, fd);
        off_t size = e < 0 ? -1 : lseek(fd, 0, SEEK_END);
        struct sock_filter *insns = NULL;
        if (e >= 0 && (size <= 0 || size % (off_t)sizeof *insns != 0))
                e = -EIO;
        if (e >= 0 && !(insns = malloc((size_t)size)))
                e = -ENOMEM;
        if (e >= 0 && pread(fd, insns, (size_t)size, 0) != size)
                e = -EIO;
        close(fd);
        if (e < 0) {
                free(insns);
                return e;
        }
        prog->filter = insns;
        prog->len = (unsigned short)((size_t)size / sizeof *insns);
        return 0;
}

/* Compiles one filter: a default action, then the rules add() adds. A
 * syscall from another ABI (i386 int $0x80, x32) kills the whole process:
 * the rules speak only for the native ABI. */
enum list_kind { NOT_LIST, LIST_PROGRAM, LIST_INIT, LIST_LEARN };

static int build_one(uint32_t def, int (*add)(scmp_filter_ctx), enum list_kind list, struct sock_fprog *prog)
{
        scmp_filter_ctx ctx = seccomp_init(def);
        int e;

        if (!ctx)
                return -ENOMEM;
        if ((e = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
                goto out;
        /* no_new_privs is set by the sandbox itself, before installing. */
        if ((e = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
                goto out;
        /* A binary tree of call numbers instead of a list: a call meets
         * about log2(n) comparisons, and the kernel's install (which runs
         * the program for every call number to build its verdict cache)
         * takes a fraction of the time. */
        if ((e = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
                goto out;
        if ((e = add(ctx)) < 0)
                goto out;
        if (list != NOT_LIST &&
            ((e = add_rules(ctx, SCMP_ACT_ALLOW, allowed, sizeof allowed / sizeof *allowed, false,
                            list == LIST_LEARN)) < 0 ||
             (e = add_rules(ctx, SCMP_ACT_ERRNO(EPERM), refused, sizeof refused / sizeof *refused,
                            list == LIST_INIT, false)) < 0))
                goto out;
        for (size_t i = 0; list == LIST_INIT && i < sizeof init_only / sizeof *init_only; i++)
                if ((e = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, seccomp_syscall_resolve_name(init_only[i]), 0)) < 0)
                        goto out;
        e = export_prog(ctx, prog);
out:
        seccomp_release(ctx);
        return e;
}

/* One program out of the two (the kernel would run both for every call):
 * args first, each of its "allow" verdicts a jump to the start of list,
 * which then decides. Every refusal becomes SECCOMP_RET_USER_NOTIF if
 * notify is set: the kernel asks the listener (the sandbox's init), which
 * answers with the errno the same program without notify gives
 * (filter_verdict on `direct`). Kills (a foreign ABI) stay kills. */
static int compose(const struct sock_fprog *args, const struct sock_fprog *list, bool notify, struct sock_fprog *out)
{
        size_t n = (size_t)args->len + list->len;
        if (n > BPF_MAXINSNS)
                return -E2BIG;
        struct sock_filter *p = malloc(n * sizeof *p);
        if (!p)
                return -ENOMEM;
        memcpy(p, args->filter, args->len * sizeof *p);
        memcpy(p + args->len, list->filter, list->len * sizeof *p);
        for (size_t i = 0; i < n; i++) {
                if (p[i].code == (BPF_RET | BPF_A)) {
                        free(p);
                        return -EINVAL; /* libseccomp returns constants only */
                }
                if (p[i].code != (BPF_RET | BPF_K))
                        continue;
                uint32_t action = p[i].k & SECCOMP_RET_ACTION_FULL;
                if (i < args->len && action == SECCOMP_RET_ALLOW)
                        p[i] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)(args->len - i - 1));
                else if (notify && action == SECCOMP_RET_ERRNO)
                        p[i] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
        }
        *out = (struct sock_fprog){ .len = (unsigned short)n, .filter = p };
        return 0;
}

int filter_build(struct gadget_filter *f)
{
        struct sock_fprog list = { 0 }, list_init = { 0 }, list_learn = { 0 }, args = { 0 };
        *f = (struct gadget_filter){ 0 };
        int e = build_one(SCMP_ACT_ERRNO(ENOSYS), add_list_special, LIST_PROGRAM, &list);
        if (e >= 0)
                e = build_one(SCMP_ACT_ERRNO(ENOSYS), add_list_special, LIST_INIT, &list_init);
        if (e >= 0)
                e = build_one(SCMP_ACT_ERRNO(ENOSYS), add_list_special, LIST_LEARN, &list_learn);
        if (e >= 0)
                e = build_one(SCMP_ACT_ALLOW, add_arg_rules, NOT_LIST, &args);
        if (e >= 0)
                e = compose(&args, &list, true, &f->program);
        if (e >= 0)
                e = compose(&args, &list, false, &f->direct);
        if (e >= 0)
                e = compose(&args, &list_init, true, &f->init);
        if (e >= 0)
                e = compose(&args, &list_learn, true, &f->learn);
        free(list.filter);
        free(list_learn.filter);
        free(list_init.filter);
        free(args.filter);
        if (e < 0)
                filter_free(f);
        return e;
}

void filter_free(struct gadget_filter *f)
{
        if (!f)
                return;
        free(f->program.filter);
        free(f->direct.filter);
        free(f->init.filter);
        free(f->learn.filter);
        *f = (struct gadget_filter){ 0 };
}
