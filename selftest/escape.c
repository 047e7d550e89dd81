/* escape: the escape probe. A static program that runs inside a gadget's
 * sandbox and tries each known way out, printing one line per attempt:
 *   ATTEMPT <TAB> blocked|ESCAPED <TAB> detail
 * It exits 0 if every attempt was blocked, 1 otherwise. Used by the
 * adversarial tests and by `gadgetctl selftest`. Attempts that would kill
 * the process (foreign ABIs) run in a child. Arguments other than
 * --host-name are name prefixes: only those attempts are made (the tests
 * make each system call attempt alone outside any sandbox, as root in
 * throwaway namespaces, to show that it is one that succeeds there). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <linux/tiocl.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static int escaped_count;
static char **only;           /* run just the attempts with these prefixes */
static int n_only;
static const char *host_name; /* the host's name, to compare (--host-name) */

/* Reports one attempt. ok: the way out was blocked. */
static void report(const char *name, bool ok, const char *fmt, ...)
{
        char detail[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
        if (!ok)
                escaped_count++;
        printf("%s\t%s\t%s\n", name, ok ? "blocked" : "ESCAPED", detail);
        fflush(stdout);
}

static const char *ename(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "?";
}

/* Reads what one read(2) gives of a small file into buf, NUL-terminated
 * (an empty string if it cannot be opened or read); returns read's result. */
static ssize_t read_text(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);

        if (fd >= 0)
                close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return n;
}

/* A call that must fail: blocked if r < 0. */
static void must_fail(const char *name, long r)
{
        if (r < 0)
                report(name, true, "%s", ename(errno));
        else
                report(name, false, "returned %ld", r);
}

static bool wanted(const char *name)
{
        if (!n_only)
                return true;
        for (int i = 0; i < n_only; i++)
                if (strncmp(name, only[i], strlen(only[i])) == 0)
                        return true;
        return false;
}

#define TRY(name, expr) do { if (wanted(name)) { errno = 0; must_fail(name, (long)(expr)); } } while (0)

static void sockets(void)
{
        static const int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET };
        char name[64];
        int opened = 0, tried = 0;
        for (int fam = 0; wanted("socket every family") && fam < AF_MAX; fam++)
                for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
                        tried++;
                        int fd = socket(fam, types[t], 0);
                        if (fd >= 0 || errno != EACCES) {
                                snprintf(name, sizeof name, "socket family %d type %d", fam, types[t]);
                                report(name, false, fd >= 0 ? "opened" : ename(errno));
                                opened++;
                        }
                }
        if (!opened && tried)
                report("socket every family", true, "EACCES for all %d family/type pairs", tried);
        int sv[2];
        TRY("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

/* Runs fn in a child; blocked if the child is killed by SIGSYS. */
#define NO_I386 "this kernel has no i386 entry (SIGSEGV): never made"

static void in_child(const char *name, void (*fn)(void))
{
        if (!wanted(name))
                return;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                fn();
                _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
                report(name, true, "killed by SIGSYS");
        /* A kernel without the i386 entry (no IA32 emulation, or turned
         * off) answers int $0x80 with a general protection fault: the call
         * was never made, in the sandbox or out of it. */
        else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV && strncmp(name, "i386 ", 5) == 0)
                report(name, true, NO_I386);
        else
                report(name, false, "child %s %d", WIFSIGNALED(st) ? "signal" : "status",
                       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static void i386_socketcall(void)
{
        long args[3] = { AF_INET, SOCK_STREAM, 0 }, ret;
        /* socketcall(SYS_SOCKET=1, args): i386 number 102 */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(102L), "b"(1L), "c"(args) : "memory");
}

static void i386_socket(void)
{
        long ret;
        /* socket(AF_INET, SOCK_STREAM, 0): i386 number 359 */
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(359L), "b"((long)AF_INET), "c"((long)SOCK_STREAM), "d"(0L)
                         : "memory");
}

static void x32_socket(void)
{
        syscall(0x40000000L | 41, AF_INET, SOCK_STREAM, 0); /* x32 socket */
}

static void x32_getpid(void)
{
        syscall(0x40000000L | 39);
}

/* For clone attempts: a child that got through ends at once, and its
 * parent reaps it, so only the caller goes on with the probe. */
static long reaped(long r)
{
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, __WALL);
        return r;
}

static void kernel_interfaces(void)
{
        struct io_uring_params { unsigned v[30]; } p = { 0 };
        TRY("io_uring_setup", syscall(__NR_io_uring_setup, 8, &p));
        TRY("ptrace traceme", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
        /* SEIZE: the same permission check as ATTACH, without stopping the parent. */
        TRY("ptrace attach parent", ptrace(PTRACE_SEIZE, getppid() > 0 ? getppid() : 1, NULL, NULL));
        char buf[16];
        struct iovec local = { buf, sizeof buf }, remote = { (void *)0x400000, sizeof buf };
        TRY("process_vm_readv", process_vm_readv(1, &local, 1, &remote, 1, 0));
        int pfd = (int)syscall(SYS_pidfd_open, 1, 0);
        TRY("pidfd_getfd", syscall(__NR_pidfd_getfd, pfd, 0, 0));
        if (pfd >= 0)
                close(pfd);
        /* A map the kernel accepts from root: an array of one int. */
        union bpf_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        TRY("bpf", syscall(__NR_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
        struct perf_event_attr pe = { .type = PERF_TYPE_SOFTWARE, .size = sizeof pe,
                                      .config = PERF_COUNT_SW_CPU_CLOCK };
        TRY("perf_event_open", syscall(__NR_perf_event_open, &pe, 0, -1, -1, 0));
        TRY("userfaultfd", syscall(__NR_userfaultfd, 0));
        TRY("keyctl", syscall(__NR_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
        TRY("add_key", syscall(__NR_add_key, "user", "probe", "x", 1, -3));
}

static void namespaces(void)
{
        TRY("unshare user", unshare(CLONE_NEWUSER));
        TRY("unshare net", unshare(CLONE_NEWNET));
        TRY("unshare mount", unshare(CLONE_NEWNS));
        fflush(stdout);
        TRY("clone newuser", reaped(syscall(__NR_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)));
        long cargs[11] = { CLONE_NEWUSER, 0, 0, 0, SIGCHLD };
        TRY("clone3 newuser", reaped(syscall(__NR_clone3, cargs, 88)));
        int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        TRY("setns", setns(fd, 0));
        if (fd >= 0)
                close(fd);
}

static void filesystems(void)
{
        TRY("mount tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
        TRY("mount bind", mount("/", "/tmp", NULL, MS_BIND, NULL));
        TRY("fsopen", syscall(__NR_fsopen, "tmpfs", 0));
        TRY("umount /proc", umount2("/proc", MNT_DETACH));
        TRY("pivot_root", syscall(__NR_pivot_root, "/tmp", "/tmp"));
        TRY("chroot", chroot("/tmp"));
        TRY("mknod char device", mknod("/tmp/mem", S_IFCHR | 0600, makedev(1, 1)));
        struct { unsigned bytes; int type; unsigned char h[64]; } fh = { 8, 1, { 0 } };
        TRY("open_by_handle_at", syscall(__NR_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY));
        char h[128] = { 0 };
        int mid;
        ((unsigned *)h)[0] = 64;
        TRY("name_to_handle_at", syscall(__NR_name_to_handle_at, AT_FDCWD, "/", h, &mid, 0));
}

static void kernel_state(void)
{
        TRY("init_module", syscall(__NR_init_module, "", 0, ""));
        TRY("finit_module", syscall(__NR_finit_module, 0, "", 0));
        TRY("kexec_load", syscall(__NR_kexec_load, 0, 0, NULL, 0));
        TRY("reboot", syscall(__NR_reboot, 0xfee1dead, 672274793, 0x4321fedc, NULL)); /* RB_POWER_OFF */
        TRY("swapon", syscall(__NR_swapon, "/tmp/swap", 0));
        TRY("acct", syscall(__NR_acct, "/tmp/acct"));
        struct timespec ts = { 0 };
        TRY("clock_settime", clock_settime(CLOCK_REALTIME, &ts));
        struct { long sec, usec; } tv = { 0, 0 };
        TRY("settimeofday", syscall(__NR_settimeofday, &tv, NULL));
        TRY("iopl", syscall(__NR_iopl, 3));
        TRY("ioperm", syscall(__NR_ioperm, 0x80, 1, 1));
        TRY("personality", syscall(__NR_personality, 0x0008 /* PER_LINUX32 */));
        TRY("syslog read", syscall(__NR_syslog, 3 /* READ_ALL */, (char[64]){ 0 }, 64));
        TRY("fanotify_init", syscall(__NR_fanotify_init, 0, 0));
}

static void privileges(void)
{
        /* CAP_SYS_ADMIN, which root outside a sandbox holds: only a
         * sandbox can refuse this. */
        struct { unsigned version; int pid; } hdr = { 0x20080522, 0 };
        struct { unsigned eff, perm, inh; } data[2] = { { 1u << 21, 1u << 21, 0 }, { 0, 0, 0 } };
        TRY("capset", syscall(__NR_capset, &hdr, data));
        TRY("setuid 0", syscall(__NR_setuid, 0));
        TRY("setgid 0", syscall(__NR_setgid, 0));
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_max += 1;
        rl.rlim_cur = rl.rlim_max;
        TRY("raise rlimit", setrlimit(RLIMIT_NOFILE, &rl));
        struct sched_param sp = { .sched_priority = 10 };
        TRY("real-time scheduling", sched_setscheduler(0, SCHED_FIFO, &sp));
        if (wanted("status")) {
                char buf[8192];
                read_text("/proc/self/status", buf, sizeof buf);
                static const char *const want[] = { "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000",
                                                    "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
                                                    "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
                                                    "Seccomp:\t2" };
                for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
                        char name[64];
                        snprintf(name, sizeof name, "status %.*s", (int)strcspn(want[i], ":"), want[i]);
                        report(name, strstr(buf, want[i]) != NULL, "%s", strstr(buf, want[i]) ? want[i] + strcspn(want[i], "\t") + 1 : "differs");
                }
        }
}

/* TIOCSTI types into a terminal's input; TIOCLINUX is asked for a
 * read-only subcode, the keyboard's shift state, which a virtual console
 * answers for root outside the sandbox (the filter refuses TIOCLINUX
 * whatever the subcode: PASTESEL would type the selection into the
 * console). A pseudo-terminal has no TIOCLINUX at all (ENOTTY). */
static void terminals(void)
{
        char c = 'x', sub, name[64];
        for (int fd = 0; fd <= 2; fd++) {
                snprintf(name, sizeof name, "TIOCSTI fd %d", fd);
                TRY(name, ioctl(fd, TIOCSTI, &c));
                snprintf(name, sizeof name, "TIOCSTI high bits fd %d", fd);
                TRY(name, syscall(__NR_ioctl, fd, 0xdead000000000000ul | TIOCSTI, &c));
                snprintf(name, sizeof name, "TIOCLINUX fd %d", fd);
                sub = TIOCL_GETSHIFTSTATE;
                TRY(name, ioctl(fd, TIOCLINUX, &sub));
        }
        TRY("open /dev/tty", open("/dev/tty", O_RDWR | O_CLOEXEC));
}

/* Opening path must fail. */
static void cannot_open(const char *name, const char *path, int flags)
{
        if (!wanted(name))
                return;
        errno = 0;
        /* Always a mode: with O_CREAT and none, a fortified build (as
         * Debian's packages are) aborts in open() instead of trying. */
        int fd = open(path, flags | O_CLOEXEC, 0600);
        must_fail(name, fd);
        if (fd >= 0)
                close(fd);
}

/* The sandbox's own /etc/passwd or group names only the gadget and the
 * overflow id: a "root:" entry would be the host's user database. */
static void host_user_db(const char *name, const char *path)
{
        if (!wanted(name))
                return;
        FILE *f = fopen(path, "re");
        char line[256];
        bool root = false;
        while (f && fgets(line, sizeof line, f))
                root = root || strncmp(line, "root:", 5) == 0;
        if (f)
                fclose(f);
        report(name, !root, root ? "the host's, with root" : f ? "the sandbox's own" : "absent");
}

static void files(void)
{
        cannot_open("read /etc/shadow", "/etc/shadow", O_RDONLY);
        host_user_db("host /etc/passwd", "/etc/passwd");
        host_user_db("host /etc/group", "/etc/group");
        cannot_open("read init environ", "/proc/1/environ", O_RDONLY);
        cannot_open("open /proc/1/root", "/proc/1/root/etc", O_RDONLY | O_DIRECTORY);
        cannot_open("read /proc/kcore", "/proc/kcore", O_RDONLY);
        cannot_open("read /dev/mem", "/dev/mem", O_RDONLY);
        cannot_open("open block device", "/dev/sda", O_RDONLY);
        cannot_open("open /sys", "/sys/kernel", O_RDONLY | O_DIRECTORY);
        cannot_open("write /", "/escape", O_WRONLY | O_CREAT);
        cannot_open("write /proc/sys", "/proc/sys/kernel/hostname", O_WRONLY);
        cannot_open("write /proc/sysrq-trigger", "/proc/sysrq-trigger", O_WRONLY);
        cannot_open("write own binary", "/proc/self/exe", O_WRONLY);
        cannot_open("write init binary", "/proc/1/exe", O_WRONLY);
        cannot_open("write cgroup files", "/sys/fs/cgroup/cgroup.procs", O_WRONLY);
        cannot_open("write cgroup v2 memory.max", "/sys/fs/cgroup/memory.max", O_WRONLY);
        cannot_open("write cgroup v1 memory limit", "/sys/fs/cgroup/memory/memory.limit_in_bytes", O_WRONLY);
        cannot_open("write cgroup v1 tasks", "/sys/fs/cgroup/pids/tasks", O_WRONLY);
        cannot_open("create in /sys/fs/cgroup", "/sys/fs/cgroup/escape", O_WRONLY | O_CREAT);
        if (wanted("kallsyms addresses")) {
                FILE *f = fopen("/proc/kallsyms", "re");
                char line[256];
                int nonzero = 0, lines = 0;
                while (f && fgets(line, sizeof line, f) && lines < 2000) {
                        lines++;
                        if (strncmp(line, "0000000000000000", 16) != 0)
                                nonzero++;
                }
                if (f)
                        fclose(f);
                report("kallsyms addresses", nonzero == 0, f ? "%d of %d addresses shown" : "unreadable", nonzero,
                       lines);
        }
}

/* Before any attempt opens something: only 0-3 came from gadgetd. */
static void inherited_fds(void)
{
        if (!wanted("inherited fds"))
                return;
        int extra = 0;
        for (int fd = 4; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        extra++;
        report("inherited fds", extra == 0, "%d fds above 3", extra);
}

static void process_view(void)
{
        if (wanted("cwd")) {
                char cwd[256] = "";
                bool ok = getcwd(cwd, sizeof cwd) && strcmp(cwd, "/") == 0;
                struct stat root, up;
                ok = ok && stat("/", &root) == 0 && stat("/..", &up) == 0 && root.st_ino == up.st_ino;
                report("working directory outside root", ok, "cwd %s", cwd);
        }
        if (wanted("host processes")) {
                int max = 0;
                char path[64];
                for (int pid = 1; pid < 4096; pid++) {
                        snprintf(path, sizeof path, "/proc/%d", pid);
                        if (access(path, F_OK) == 0)
                                max = pid;
                }
                report("host processes", max < 100, "highest visible pid %d", max);
        }
        if (wanted("uid map")) {
                char buf[256];
                read_text("/proc/self/uid_map", buf, sizeof buf);
                unsigned inner, outer, count;
                bool ok = sscanf(buf, "%u %u %u", &inner, &outer, &count) == 3 && outer != 0 && count == 1 &&
                          !strchr(strchr(buf, '\n') ? strchr(buf, '\n') + 1 : "", ' ');
                report("uid map onto host root", ok, "%.*s", (int)strcspn(buf, "\n"), buf);
        }
        if (wanted("interfaces")) {
                char buf[4096];
                ssize_t n = read_text("/proc/net/dev", buf, sizeof buf);
                int others = 0;
                char *line = strchr(buf, '\n');
                line = line ? strchr(line + 1, '\n') : NULL;
                for (; line && *++line; line = strchr(line, '\n')) {
                        char ifname[64];
                        if (sscanf(line, " %63[^:]:", ifname) == 1 && strcmp(ifname, "lo") != 0)
                                others++;
                        if (!strchr(line, '\n'))
                                break;
                }
                report("non-lo interfaces", others == 0 && n > 0, "%d besides lo", others);
        }
}

/* Exhaustion attempts, each bounded so that an unlimited policy shows up
 * as ESCAPED without hurting the host much. */
#define DISK_BOUND_MIB 1024
#define MEMORY_BOUND_MIB 512
#define TASKS_BOUND 2048

static void disk_exhaustion(void)
{
        static char chunk[1 << 20];
        if (!wanted("disk exhaustion"))
                return;
        int fd = open("/tmp/escape-fill", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int mib = 0, err = 0;
        memset(chunk, 'x', sizeof chunk);
        for (; fd >= 0 && mib < DISK_BOUND_MIB; mib++)
                if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk) {
                        err = errno;
                        break;
                }
        if (fd >= 0)
                close(fd);
        unlink("/tmp/escape-fill");
        report("disk exhaustion", mib < DISK_BOUND_MIB, "/tmp full after %d MiB (%s)", mib, err ? ename(err) : "no error");
}

static void memory_exhaustion(void)
{
        if (!wanted("memory exhaustion"))
                return;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
                for (int mib = 0; mib < MEMORY_BOUND_MIB; mib++) {
                        char *p = malloc(1 << 20);
                        if (!p)
                                _exit(2);
                        memset(p, 1, 1 << 20);
                }
                _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        bool held = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == 2);
        report("memory exhaustion", held, held ? "stopped before %d MiB (%s)" : "allocated %d MiB",
               MEMORY_BOUND_MIB, WIFSIGNALED(st) ? "killed" : "allocation failed");
}

/* Last: the tasks it leaves behind end with the sandbox. */
static void fork_bomb(void)
{
        if (!wanted("fork bomb"))
                return;
        int n = 0, err = 0;
        for (; n < TASKS_BOUND; n++) {
                pid_t pid = fork();
                if (pid == 0) {
                        pause();
                        _exit(0);
                }
                if (pid < 0) {
                        err = errno;
                        break;
                }
        }
        report("fork bomb", n < TASKS_BOUND, "fork refused after %d tasks (%s)", n, err ? ename(err) : "none");
}

/* The UTS namespace: the gadget must not share the host's name. */
static void hostname(void)
{
        char name[256] = "";
        if (!wanted("hostname"))
                return;
        gethostname(name, sizeof name);
        if (host_name)
                report("host name shared", strcmp(name, host_name) != 0, "the gadget's is \"%s\"", name);
        else
                report("host name shared", true, "the gadget's is \"%s\" (host's not given)", name);
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!(only = calloc((size_t)argc, sizeof *only)))
                return 2;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--host-name") == 0 && i + 1 < argc)
                        host_name = argv[++i];
                else
                        only[n_only++] = argv[i];
        }
        inherited_fds();
        sockets();
        in_child("i386 socketcall", i386_socketcall);
        in_child("i386 socket", i386_socket);
        in_child("x32 socket", x32_socket);
        in_child("x32 getpid", x32_getpid);
        kernel_interfaces();
        namespaces();
        filesystems();
        kernel_state();
        privileges();
        terminals();
        files();
        process_view();
        hostname();
        disk_exhaustion();
        memory_exhaustion();
        fork_bomb();
        return escaped_count ? 1 : 0;
}
