/* probe: a static program run inside the real sandbox by the integration
 * tests. Each check named on the command line prints "NAME: RESULT" lines
 * that the tests assert on from outside. It reports; it never decides. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void result(const char *name, int r)
{
        if (r < 0)
                printf("%s: %s\n", name, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
        else
                printf("%s: ok\n", name);
}

static void print_file(const char *label, const char *path)
{
        char buf[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                printf("%s: %s\n", label, strerrorname_np(errno));
                return;
        }
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                printf("%s: %s\n", label, line);
}

static void check_ns(void)
{
        static const char *const types[] = { "user", "net", "mnt", "pid", "ipc", "uts", "cgroup" };
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
                char path[64], link[128];
                snprintf(path, sizeof path, "/proc/self/ns/%s", types[i]);
                ssize_t n = readlink(path, link, sizeof link - 1);
                link[n > 0 ? n : 0] = '\0';
                printf("ns %s: %s\n", types[i], n > 0 ? link : strerrorname_np(errno));
        }
}

static void check_status(void)
{
        char buf[8192];
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = '\0';
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
                if (strncmp(line, "Cap", 3) == 0 || strncmp(line, "NoNewPrivs", 10) == 0 ||
                    strncmp(line, "Seccomp:", 8) == 0 || strncmp(line, "Uid", 3) == 0 ||
                    strncmp(line, "Gid", 3) == 0)
                        printf("status: %s\n", line);
        printf("status: Securebits:\t0x%x\n", (unsigned)prctl(PR_GET_SECUREBITS));
}

static void check_sockets(void)
{
        static const struct { const char *name; int family, type; } s[] = {
                { "AF_INET", AF_INET, SOCK_STREAM }, { "AF_INET6", AF_INET6, SOCK_DGRAM },
                { "AF_UNIX", AF_UNIX, SOCK_STREAM }, { "AF_NETLINK", AF_NETLINK, SOCK_RAW },
                { "AF_PACKET", AF_PACKET, SOCK_RAW },
        };
        for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
                char name[64];
                snprintf(name, sizeof name, "socket %s", s[i].name);
                result(name, socket(s[i].family, s[i].type, 0));
        }
        int sv[2];
        result("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
}

static void list_dir(const char *label, const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;
        if (!d) {
                printf("%s: %s\n", label, strerrorname_np(errno));
                return;
        }
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        printf("%s: %s\n", label, de->d_name);
        closedir(d);
}

static void check_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int self = d ? dirfd(d) : -1;
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.' && atoi(de->d_name) != self)
                        printf("fd: %s\n", de->d_name);
        if (d)
                closedir(d);
}

/* An i386 system call through int $0x80: getpid is 20 there. The seccomp
 * filter must kill the process before it returns. */
static void check_int80(void)
{
        long ret;
        fflush(stdout);
        __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
        printf("int80: survived (%ld)\n", ret);
}

/* An x32 system call (getpid, 39, with the x32 bit): the seccomp filter
 * must kill the process, on every x86-64 kernel (the filter sees the
 * number before the kernel looks for an x32 entry). */
static void check_x32(void)
{
        fflush(stdout);
        long ret = syscall(0x40000000L | 39);
        printf("x32: survived (%ld)\n", ret);
}

static void check_syscalls(void)
{
        long params[30] = { 0 };
        result("io_uring_setup", (int)syscall(__NR_io_uring_setup, 4, params));
        result("ptrace", (int)ptrace(PTRACE_TRACEME, 0, NULL, NULL));
        result("unshare", unshare(CLONE_NEWUSER));
        result("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
        long args[11] = { 0 };
        result("clone3", (int)syscall(__NR_clone3, args, 88));
        char ch = 'x';
        /* The high-bits variant: the kernel looks at the low 32 bits only. */
        for (int fd = 0; fd <= 2; fd++) {
                char name[32];
                snprintf(name, sizeof name, "TIOCSTI %d", fd);
                result(name, ioctl(fd, TIOCSTI, &ch));
                snprintf(name, sizeof name, "TIOCSTI high %d", fd);
                result(name, (int)syscall(__NR_ioctl, fd, 0xffffffff00000000ul | TIOCSTI, &ch));
        }
}

static void check_paths(int argc, char **argv)
{
        for (int i = 0; i < argc; i++) {
                struct stat st;
                char name[512];
                snprintf(name, sizeof name, "stat %s", argv[i]);
                result(name, stat(argv[i], &st));
        }
}

/* create PATH...: opens each for writing, creating it if missing. */
static void check_creates(int argc, char **argv)
{
        for (int i = 0; i < argc; i++) {
                char name[512];
                snprintf(name, sizeof name, "create %s", argv[i]);
                result(name, open(argv[i], O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        }
}

static void check_writes(void)
{
        result("create /x", open("/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        result("mkdir /d", mkdir("/d", 0755));
        result("create /tmp/x", open("/tmp/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
}

static void check_rlimits(void)
{
        static const struct { const char *name; int resource; } l[] = {
                { "CORE", RLIMIT_CORE }, { "NOFILE", RLIMIT_NOFILE }, { "NPROC", RLIMIT_NPROC },
                { "FSIZE", RLIMIT_FSIZE }, { "MEMLOCK", RLIMIT_MEMLOCK }, { "MSGQUEUE", RLIMIT_MSGQUEUE },
                { "SIGPENDING", RLIMIT_SIGPENDING }, { "AS", RLIMIT_AS },
        };
        for (size_t i = 0; i < sizeof l / sizeof *l; i++) {
                struct rlimit rl;
                if (getrlimit(l[i].resource, &rl) < 0) {
                        printf("rlimit %s: %s\n", l[i].name, strerrorname_np(errno));
                        continue;
                }
                if (rl.rlim_cur == RLIM_INFINITY)
                        printf("rlimit %s: infinity", l[i].name);
                else
                        printf("rlimit %s: %llu", l[i].name, (unsigned long long)rl.rlim_cur);
                if (rl.rlim_max == RLIM_INFINITY)
                        printf(" infinity\n");
                else
                        printf(" %llu\n", (unsigned long long)rl.rlim_max);
        }
}

/* Writes /tmp full, then creates empty files until that fails too; then
 * one byte far past the end of a sparse file (the file-size limit). */
static void check_tmpfull(void)
{
        static char chunk[65536];
        long long total = 0;
        ssize_t n = 0;
        int fd = open("/tmp/fill", O_CREAT | O_WRONLY | O_CLOEXEC, 0600), files = 0;
        memset(chunk, 'x', sizeof chunk);
        while (fd >= 0 && (n = write(fd, chunk, sizeof chunk)) > 0)
                total += n;
        printf("fill: %s %lld\n", fd < 0 || n < 0 ? strerrorname_np(errno) : "eof", total);
        if (fd >= 0)
                close(fd);
        for (; files < 1000000; files++) {
                char name[32];
                snprintf(name, sizeof name, "/tmp/f%d", files);
                int f = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
                if (f < 0)
                        break;
                close(f);
        }
        printf("inodes: %s %d\n", strerrorname_np(errno), files);
        signal(SIGXFSZ, SIG_IGN);
        fd = open("/tmp/fill", O_WRONLY | O_CLOEXEC);
        result("sparse", fd < 0 ? -1 : (int)pwrite(fd, "x", 1, 1ll << 40));
}

/* The user namespace's counters, and whether inotify is there. */
static void check_userns(void)
{
        DIR *d = opendir("/proc/sys/user");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char path[300];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/sys/user/%s", de->d_name);
                print_file(de->d_name, path);
        }
        if (d)
                closedir(d);
        result("inotify_init", inotify_init1(IN_CLOEXEC));
}

/* Opens /dev/null until that fails. */
static void check_nofile(void)
{
        int n = 0;
        while (n < 1000000 && open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0)
                n++;
        printf("nofile: %s %d\n", strerrorname_np(errno), n);
}

/* The state letter of /proc/PID/stat ('Z' a zombie), or 0 if it is gone. */
static char proc_state(pid_t pid)
{
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
                fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : 0;
}

/* Makes an orphan: a child forks a grandchild and exits at once, so the
 * grandchild's parent becomes the namespace's PID 1, which must reap it
 * when it ends. Prints "orphan: reaped", or "orphan: zombie" if it is
 * still a zombie 10 s after it ended. */
static void check_orphan(void)
{
        int fds[2];
        pid_t grandchild = 0;
        if (pipe(fds) < 0) {
                printf("orphan: pipe %s\n", strerrorname_np(errno));
                return;
        }
        pid_t child = fork();
        if (child == 0) {
                pid_t g = fork();
                if (g == 0) {
                        usleep(200 * 1000); /* until its parent has ended */
                        _exit(0);
                }
                write(fds[1], &g, sizeof g);
                _exit(0);
        }
        close(fds[1]);
        if (child < 0 || read(fds[0], &grandchild, sizeof grandchild) != sizeof grandchild || grandchild <= 0) {
                printf("orphan: fork %s\n", strerrorname_np(errno));
                return;
        }
        waitpid(child, NULL, 0);
        char st = 'R';
        for (int i = 0; i < 1000 && (st = proc_state(grandchild)) != 0; i++)
                usleep(10 * 1000);
        printf("orphan: %s\n", st == 0 ? "reaped" : st == 'Z' ? "zombie" : "still running");
}

/* Forks children that wait, until a fork fails: how many, and the error.
 * They die with the sandbox's init when the probe ends. */
static void check_forkmany(void)
{
        int n = 0;
        pid_t p = 0;
        while (n < 100000 && (p = fork()) > 0)
                n++;
        if (p == 0) {
                pause();
                _exit(0);
        }
        printf("forkmany: %s %d\n", p < 0 ? strerrorname_np(errno) : "none", n);
}

/* The signal state the program started with: SIGPIPE's disposition, how
 * many signals are ignored, and the mask. */
static void check_signals(void)
{
        struct sigaction sa;
        sigset_t mask;
        int ignored = 0, blocked = 0;
        if (sigaction(SIGPIPE, NULL, &sa) < 0)
                printf("sigpipe: %s\n", strerrorname_np(errno));
        else
                printf("sigpipe: %s\n", sa.sa_handler == SIG_DFL ? "default" : sa.sa_handler == SIG_IGN ? "ignored"
                                                                                                  : "handled");
        for (int sig = 1; sig < NSIG; sig++)
                if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
                        ignored++;
        printf("ignored: %d\n", ignored);
        if (sigprocmask(SIG_SETMASK, NULL, &mask) < 0)
                printf("blocked: %s\n", strerrorname_np(errno));
        else {
                for (int sig = 1; sig < NSIG; sig++)
                        blocked += sigismember(&mask, sig) == 1;
                printf("blocked: %d\n", blocked);
        }
}

/* Tries to cut its stdout to nothing, then writes a line to it. */
static void check_truncate(void)
{
        int r = ftruncate(1, 0);
        result("truncate", r);
        printf("written after the truncate\n");
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (argc < 2) {
                fprintf(stderr, "usage: probe CHECK [ARGS]\n");
                return 2;
        }
        const char *c = argv[1];
        if (strcmp(c, "ns") == 0)
                check_ns();
        else if (strcmp(c, "ids") == 0) {
                print_file("uid_map", "/proc/self/uid_map");
                print_file("gid_map", "/proc/self/gid_map");
                print_file("setgroups", "/proc/self/setgroups");
        } else if (strcmp(c, "status") == 0)
                check_status();
        else if (strcmp(c, "sockets") == 0)
                check_sockets();
        else if (strcmp(c, "ifaces") == 0) {
                print_file("netdev", "/proc/net/dev");
                print_file("inet6", "/proc/net/if_inet6");
        }
        else if (strcmp(c, "fds") == 0)
                check_fds();
        else if (strcmp(c, "int80") == 0)
                check_int80();
        else if (strcmp(c, "x32") == 0)
                check_x32();
        else if (strcmp(c, "syscalls") == 0)
                check_syscalls();
        else if (strcmp(c, "paths") == 0)
                check_paths(argc - 2, argv + 2);
        else if (strcmp(c, "writes") == 0)
                check_writes();
        else if (strcmp(c, "create") == 0)
                check_creates(argc - 2, argv + 2);
        else if (strcmp(c, "rlimits") == 0)
                check_rlimits();
        else if (strcmp(c, "tmpfull") == 0)
                check_tmpfull();
        else if (strcmp(c, "nofile") == 0)
                check_nofile();
        else if (strcmp(c, "userns") == 0)
                check_userns();
        else if (strcmp(c, "forkmany") == 0)
                check_forkmany();
        else if (strcmp(c, "signals") == 0)
                check_signals();
        else if (strcmp(c, "truncate") == 0)
                check_truncate();
        else if (strcmp(c, "cgroup") == 0)
                print_file("cgroup", "/proc/self/cgroup");
        else if (strcmp(c, "ls") == 0)
                list_dir("ls", argc > 2 ? argv[2] : "/");
        else if (strcmp(c, "env") == 0) {
                extern char **environ;
                for (char **e = environ; *e; e++)
                        printf("env: %s\n", *e);
        } else if (strcmp(c, "pid") == 0) {
                printf("pid: %d\n", (int)getpid());
                char host[256] = "";
                gethostname(host, sizeof host);
                printf("hostname: %s\n", host);
        } else if (strcmp(c, "cpus") == 0 || strcmp(c, "cpus-widen") == 0) {
                cpu_set_t set;
                if (c[4]) { /* asks for every CPU first: a cpuset clamps it */
                        for (int i = 0; i < CPU_SETSIZE; i++)
                                CPU_SET(i, &set);
                        if (sched_setaffinity(0, sizeof set, &set) < 0)
                                printf("widen: %s\n", strerrorname_np(errno));
                }
                if (sched_getaffinity(0, sizeof set, &set) < 0)
                        printf("cpus: %s\n", strerrorname_np(errno));
                for (int i = 0; i < CPU_SETSIZE; i++)
                        if (CPU_ISSET(i, &set))
                                printf("cpus: %d\n", i);
        } else if (strcmp(c, "exit") == 0)
                return argc > 2 ? atoi(argv[2]) : 0;
        else if (strcmp(c, "orphan") == 0)
                check_orphan();
        else if (strcmp(c, "fork") == 0) {
                pid_t p = fork();
                if (p == 0)
                        _exit(7);
                printf("fork: %s\n", p > 0 ? "ok" : strerrorname_np(errno));
        } else {
                fprintf(stderr, "probe: unknown check %s\n", c);
                return 2;
        }
        return 0;
}
