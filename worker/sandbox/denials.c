/* denials: the sandbox's init as the listener of its program's seccomp
 * filter (worker/filter/filter.h). Each call the filter refuses is held by
 * the kernel and handed here; the init answers it with the errno the
 * filter's `direct` variant gives (so the program sees what it always
 * saw, at the same point), counts it by call and errno, reads a path
 * call's path, and reports what it counted to gadgetd at most every
 * 100 ms (report.c). Why the work lands on the gadget alone: the init is
 * the gadget's own process, in its cgroup, so a program that spams
 * refused calls spends its own CPU, and gadgetd reads ten reports a second.
 * Why this cannot let a call through: the answer is always an error; the
 * init never tells the kernel to go on with a call (no
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE), and with the init gone the kernel
 * fails every held call. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/seccomp.h>

#include "sandbox.pb-c.h"
#include "wire.h"

/* Distinct (call, errno) pairs counted between two reports; past them,
 * counts go to the last slot's pair only if it matches, else they are
 * dropped (a program refused 64 different calls within a second). */
#define SLOTS 64
#define FLUSH_MS 100

_Static_assert(SANDBOX_DENIALS_MAX * (SANDBOX_DENIAL_PATH_MAX + 40) <= SANDBOX_REPORT_MAX,
               "a Denials report must fit a report");

struct slot {
        uint32_t nr, error;
        uint64_t count, first_ms, last_ms;
        char path[SANDBOX_DENIAL_PATH_MAX + 1];
};

static struct slot slots[SLOTS];
static size_t n_slots;
static uint64_t last_flush_ms;

static uint64_t wall_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Which argument of a refused call names a path (-1: none). */
static int path_arg(int nr)
{
        switch (nr) {
        case SYS_mount: return 1;            /* where it would mount */
        case SYS_umount2: case SYS_chroot: case SYS_pivot_root: case SYS_swapon: case SYS_swapoff:
        case SYS_acct: case SYS_uselib: case SYS_mknod:
                return 0;
        case SYS_mknodat: case SYS_name_to_handle_at: case SYS_open_tree: case SYS_fspick:
        case SYS_mount_setattr: case SYS_move_mount: case SYS_quotactl:
                return 1;
        default: return -1;
        }
}

/* Reads the path at addr in the program's memory into buf (printable
 * ASCII only, others '?'), "" if it cannot be read. Why this is safe: the
 * text is only shown, never used to decide: the call is refused whatever
 * it names; and it is kept only if the notification is still valid after
 * the read (the pid still the caller's). */
ssize_t sandbox_read_mem(pid_t pid, uint64_t addr, char *buf, size_t size)
{
        char file[40];
        snprintf(file, sizeof file, "/proc/%d/mem", (int)pid);
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t r = pread(fd, buf, size - 1, (off_t)addr);
        close(fd);
        buf[r > 0 ? r : 0] = '\0';
        return r;
}

static void read_path(int listener, const struct seccomp_notif *n, uint64_t addr, char *buf, size_t size)
{
        ssize_t r = sandbox_read_mem((pid_t)n->pid, addr, buf, size);
        if (r <= 0 || ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &n->id) < 0) {
                buf[0] = '\0';
                return;
        }
        for (char *c = buf; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        *c = '?';
}

/* Counts one refusal of nr answered with error. */
static struct slot *count(uint32_t nr, uint32_t error)
{
        uint64_t now = wall_ms();
        struct slot *s = NULL;
        for (size_t i = 0; i < n_slots && !s; i++)
                if (slots[i].nr == nr && slots[i].error == error)
                        s = &slots[i];
        if (!s && n_slots == SLOTS)
                return NULL;
        if (!s) {
                s = &slots[n_slots++];
                *s = (struct slot){ .nr = nr, .error = error, .first_ms = now };
        }
        s->count++;
        s->last_ms = now;
        return s;
}

int denials_handle(int listener, const struct sock_fprog *direct, int report_fd)
{
        struct seccomp_notif n;
        struct seccomp_notif_resp resp;
        memset(&n, 0, sizeof n);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) < 0)
                return errno == EINTR || errno == ENOENT ? 0 : -errno;
        uint32_t v = filter_verdict(direct, &n.data);
        /* Only a learning run's filter holds a call its direct variant
         * allows: a lookup, which goes on as it would. */
        if ((v & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW)
                return learn_lookup(listener, &n, report_fd);
        uint32_t error = (v & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO ? v & SECCOMP_RET_DATA : EPERM;
        if (error == 0)
                error = EPERM; /* a refusal is never a success */
        struct slot *s = count((uint32_t)n.data.nr, error);
        int arg = path_arg(n.data.nr);
        if (s && arg >= 0 && !s->path[0])
                read_path(listener, &n, n.data.args[arg], s->path, sizeof s->path);
        memset(&resp, 0, sizeof resp);
        resp.id = n.id;
        resp.error = -(int)error;
        /* ENOENT: the caller died meanwhile (nothing to answer). */
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 && errno != ENOENT && errno != EINTR)
                return -errno;
        return 0;
}

void denials_killed(void)
{
        count(0, 0);
}

int denials_due_ms(void)
{
        if (n_slots == 0)
                return -1;
        uint64_t now = init_now_ms(), due = last_flush_ms + FLUSH_MS;
        return now >= due ? 0 : (int)(due - now);
}

/* Room for bytes more in the report pipe: a periodic flush never blocks
 * the init behind a reader that does not read (gadgetd between two
 * images, FdStore= mode); its counts wait for the next turn. */
static bool room(int fd, size_t bytes)
{
        int queued = 0, cap = fcntl(fd, F_GETPIPE_SZ);
        return cap <= 0 || ioctl(fd, FIONREAD, &queued) < 0 || (size_t)cap - (size_t)queued >= bytes;
}

void denials_flush(int report_fd, bool wait)
{
        size_t reports = (n_slots + SANDBOX_DENIALS_MAX - 1) / SANDBOX_DENIALS_MAX;
        if (!wait && !room(report_fd, reports * (SANDBOX_REPORT_MAX + 4))) {
                last_flush_ms = init_now_ms();
                return;
        }
        Sandbox__Denial d[SANDBOX_DENIALS_MAX], *dp[SANDBOX_DENIALS_MAX];
        for (size_t at = 0; at < n_slots; at += SANDBOX_DENIALS_MAX) {
                Sandbox__Denials list = SANDBOX__DENIALS__INIT;
                Sandbox__Report rep = SANDBOX__REPORT__INIT;
                size_t k = 0;
                for (; k < SANDBOX_DENIALS_MAX && at + k < n_slots; k++) {
                        const struct slot *s = &slots[at + k];
                        sandbox__denial__init(&d[k]);
                        d[k].nr = s->nr;
                        d[k].error = s->error;
                        d[k].count = s->count;
                        d[k].first_ms = s->first_ms;
                        d[k].last_ms = s->last_ms;
                        d[k].path = (char *)s->path;
                        dp[k] = &d[k];
                }
                list.n_calls = k;
                list.calls = dp;
                rep.kind_case = SANDBOX__REPORT__KIND_DENIALS;
                rep.denials = &list;
                (void)wire_send_atomic(report_fd, &rep.base);
        }
        n_slots = 0;
        last_flush_ms = init_now_ms();
}
