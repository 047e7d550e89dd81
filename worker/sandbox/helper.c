/* helper: gadgetd-sandbox, the small static program every worker starts as.
 * gadgetd clones a child into the gadget's new namespaces with vfork
 * semantics and the child execs this program at once, so no copy of
 * gadgetd's memory is made or kept: the sandbox's PID 1 is this program.
 * It starts with one fd besides 0-2: the setup socket, SANDBOX_FD_SETUP.
 * gadgetd sends the setup (proto/sandbox.proto) once the id maps are
 * written, with the other fds the worker needs (SCM_RIGHTS), which it puts
 * at the numbers of enum sandbox_fd; then it enters the sandbox
 * (sandbox.c) and runs init (init.c). */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sandbox.pb-c.h"
#include "wire.h"

/* Largest setup gadgetd sends: argv, environment and paths of one policy
 * and two seccomp programs. */
#define SETUP_MAX (1u << 20)
/* The first read of the setup, on a mapping of its own (read_setup). */
#define SETUP_CHUNK (64u * 1024u)
/* The most fds a setup brings (a worker's or a probe's). */
#define SANDBOX_FDS_MAX (SANDBOX_FDS_SENT + 1 > SANDBOX_ENTER_FDS_SENT ? SANDBOX_FDS_SENT + 1 : SANDBOX_ENTER_FDS_SENT)

static _Noreturn void fail(const char *step, int err)
{
        sandbox_report_failed(SANDBOX_FD_REPORT, step, strerror(err));
        _exit(125);
}

/* What only the start needs, on mappings of its own that
 * sandbox_setup_release unmaps once the program runs: the unpacked setup,
 * the vectors strv makes of it, the mount plan and the steps' texts
 * (sandbox_setup_alloc). On the heap they would leave PID 1 pages for the
 * gadget's life: the small blocks freed there stay in the allocator's
 * per-thread cache, which malloc_trim does not empty, and hold the pages
 * they are on. Handed out in order, never freed alone; a chunk more is
 * mapped when one is full, so the setup's size is bounded only as it was
 * on the heap. Only the pages used are memory. (A probe, enter.c, keeps
 * them: it ends with its command.) */
#define ARENA_CHUNK (256u * 1024u)
#define ARENA_ALIGN 16u

struct arena_chunk {
        struct arena_chunk *prev;
        size_t size, used;
};
static struct arena_chunk *arena;

static void *arena_alloc(void *data, size_t size)
{
        (void)data;
        const size_t head = (sizeof *arena + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
        if (size > SIZE_MAX / 2)
                return NULL;
        size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
        if (!arena || size > arena->size - arena->used) {
                size_t want = head + size > ARENA_CHUNK ? (head + size + 4095) & ~(size_t)4095 : ARENA_CHUNK;
                struct arena_chunk *c = mmap(NULL, want, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                if (c == MAP_FAILED)
                        return NULL;
                *c = (struct arena_chunk){ .prev = arena, .size = want, .used = head };
                arena = c;
        }
        arena->used += size;
        return (uint8_t *)arena + arena->used - size;
}

/* Freed all at once (sandbox_setup_release). */
static void arena_free(void *data, void *p)
{
        (void)data;
        (void)p;
}

static ProtobufCAllocator arena_allocator = { .alloc = arena_alloc, .free = arena_free };

void *sandbox_setup_alloc(size_t size)
{
        return arena_alloc(NULL, size);
}

/* A NULL-terminated copy of a repeated string field (the strings stay in
 * the message). */
static char **strv(char **v, size_t n)
{
        char **out = arena_alloc(NULL, (n + 1) * sizeof *out);
        if (!out)
                fail("setup", ENOMEM);
        for (size_t i = 0; i < n; i++)
                out[i] = v[i];
        out[n] = NULL;
        return out;
}

void sandbox_setup_release(void)
{
        while (arena) {
                struct arena_chunk *prev = arena->prev;
                munmap(arena, arena->size);
                arena = prev;
        }
        /* free keeps the pages of what it freed below the heap's top (and
         * its top below 128 KiB): the setup's bytes as they came, the
         * mount plan. Give them back now. */
        malloc_trim(0);
}

/* One seccomp program from its bytes. */
static struct sock_fprog prog(const ProtobufCBinaryData *b)
{
        if (b->len == 0 || b->len % sizeof(struct sock_filter) != 0 ||
            b->len / sizeof(struct sock_filter) > BPF_MAXINSNS)
                fail("seccomp program", EINVAL);
        return (struct sock_fprog){ .len = (unsigned short)(b->len / sizeof(struct sock_filter)),
                                    .filter = (struct sock_filter *)b->data };
}

/* A copy of p of its own, which outlives the message (what PID 1 keeps
 * once sandbox_setup_release freed it). Not on the heap, where it would
 * hold the pages of the freed setup around it: only its own len * 8
 * bytes of this are ever touched (BPF_MAXINSNS at most, prog checked). */
static struct sock_fprog prog_kept(struct sock_fprog p)
{
        static struct sock_filter kept[BPF_MAXINSNS];
        memcpy(kept, p.filter, p.len * sizeof *kept);
        return (struct sock_fprog){ .len = p.len, .filter = kept };
}

/* Puts the n fds that came with the setup at SANDBOX_FD_REPORT on, and
 * copies of std[0..2] (fds among those, by their new numbers) at 0-2:
 * nothing of gadgetd's stays there. Each goes above every target first,
 * so that none is overwritten before it has moved. */
static void place_fds(const int *fds, size_t n, const int *std)
{
        int high[SANDBOX_FDS_MAX];
        for (size_t i = 0; i < n; i++) {
                if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 64)) < 0)
                        _exit(125);
                close(fds[i]);
        }
        for (size_t i = 0; i < n; i++)
                if (dup2(high[i], SANDBOX_FD_REPORT + (int)i) < 0)
                        _exit(125);
        for (int k = 0; k < 3; k++)
                if (dup2(high[std[k] - SANDBOX_FD_REPORT], k) < 0)
                        fail("setup fds", errno);
        for (size_t i = 0; i < n; i++)
                close(high[i]);
}

/* Reads the setup and the want fds that come with its first bytes, and
 * puts those in place (std: as place_fds): NULL if gadgetd gave up on
 * this start (end of file). */
static Sandbox__Setup *read_setup(size_t want, size_t optional, const int *std, size_t *got)
{
        /* Not a static buffer: its pages would stay PID 1's for the
         * gadget's whole life. The reader keeps a copy of what came. */
        uint8_t *buf = mmap(NULL, SETUP_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED)
                _exit(125);
        int fds[SANDBOX_FDS_MAX];
        size_t n_fds = 0;
        ssize_t n = wire_recv_fds(SANDBOX_FD_SETUP, buf, SETUP_CHUNK, fds, want + optional, &n_fds);
        if (n == 0 || (n < 0 && n != -EPROTO))
                return NULL;
        /* Without its fds the helper cannot even report: it just ends, and
         * gadgetd says the setup ended without a report. */
        if (n < 0 || n_fds < want)
                _exit(125);
        *got = n_fds;
        place_fds(fds, n_fds, std);
        struct wire_reader rd;
        const uint8_t *data;
        size_t len;
        wire_reader_init(&rd, SETUP_MAX);
        int e = wire_reader_feed(&rd, buf, (size_t)n);
        munmap(buf, SETUP_CHUNK);
        if (e == 0)
                e = wire_recv_exact(&rd, SANDBOX_FD_SETUP, &data, &len); /* SANDBOX_CGROUP_MSG follows */
        if (e <= 0)
                fail("setup", e < 0 ? -e : EPROTO);
        Sandbox__Setup *s = sandbox__setup__unpack(&arena_allocator, len, data);
        wire_reader_free(&rd);
        if (!s || s->n_argv == 0 || s->n_ro_paths != s->n_ro_real)
                fail("setup", EPROTO);
        return s;
}

/* gadgetd-sandbox --enter: gadgetctl exec's probe (enter.c). */
static _Noreturn void enter(void)
{
        static const int std[] = { SANDBOX_ENTER_STDIN, SANDBOX_ENTER_STDOUT, SANDBOX_ENTER_STDERR };
        size_t got;
        Sandbox__Setup *s = read_setup(SANDBOX_ENTER_FDS_SENT, 0, std, &got);
        if (!s)
                _exit(125);
        if (s->n_argv < 2)
                fail("setup", EPROTO);
        struct gadget_filter filter = { .program = prog(&s->filter), .direct = prog(&s->filter_direct),
                                        .init = prog(&s->filter_init) };
        struct sandbox_config cfg = {
                .name = s->name, .argv = strv(s->argv + 1, s->n_argv - 1), .envp = strv(s->envp, s->n_envp),
                .tmp_size = s->tmp_size, .limit_nofile = s->limit_nofile, .filter = &filter,
                .setup_fd = SANDBOX_FD_SETUP, .parent_pidfd = -1, .report_fd = SANDBOX_ENTER_REPORT,
                .rpc_fd = -1, .stdout_fd = SANDBOX_ENTER_STDOUT, .stderr_fd = SANDBOX_ENTER_STDERR,
                .stdin_fd = SANDBOX_ENTER_STDIN, .devnull_fd = -1, .core_fd = -1, .nproc = s->nproc, .address_space = s->address_space,
        };
        enter_main(&cfg, SANDBOX_ENTER_INIT);
}

int main(int argc, char **argv)
{
        /* Die with gadgetd. Not dumpable while privileged in the namespace:
         * nothing else can ptrace or read the memory of the setup process. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0)
                _exit(125);
        if (argc == 2 && strcmp(argv[1], SANDBOX_ENTER_ARG) == 0)
                enter();
        /* What needs no setup is done while the shell waits for one: off
         * the start's path. Its failure is reported once the report fd has
         * come with the setup: the gadget does not start. */
        const char *early_step = NULL;
        struct mount_plan *plan = NULL;
        bool own_net = !(argc == 2 && strcmp(argv[1], SANDBOX_SHARED_NET_ARG) == 0);
        int early = sandbox_early(own_net, &plan, &early_step);
        static const int std[] = { SANDBOX_FD_DEVNULL, SANDBOX_FD_DEVNULL, SANDBOX_FD_DEVNULL };
        /* CoreDump=: one fd more, the core's (SANDBOX_FD_CORE). */
        size_t got;
        Sandbox__Setup *s = read_setup(SANDBOX_FDS_SENT, 1, std, &got);
        if (!s)
                _exit(125); /* gadgetd gave up on this start */
        if (early < 0)
                fail(early_step, -early);
        /* gadgetd's pidfd came with the setup: make sure it did not die
         * before the parent-death signal was set. */
        if (poll(&(struct pollfd){ .fd = SANDBOX_FD_PARENT, .events = POLLIN }, 1, 0) != 0)
                _exit(125);
        struct gadget_filter filter = { .program = prog(&s->filter), .direct = prog_kept(prog(&s->filter_direct)),
                                        .init = prog(&s->filter_init) };
        if (s->learn)
                filter.learn = prog(&s->filter_learn);
        struct sandbox_config cfg = {
                .learn = s->learn,
                .name = s->name, .exec = s->exec, .ro_paths = strv(s->ro_paths, s->n_ro_paths),
                .n_ro_paths = s->n_ro_paths, .system_libraries = s->system_libraries, .no_listener = s->no_listener,
                .tmp_size = s->tmp_size, .limit_nofile = s->limit_nofile, .argv = strv(s->argv, s->n_argv), .envp = strv(s->envp, s->n_envp),
                .filter = &filter, .ro_real = strv(s->ro_real, s->n_ro_real), .exec_real = s->exec_real,
                .setup_fd = SANDBOX_FD_SETUP, .prewarm = s->prewarm, .handoff_ms = s->handoff_ms, .parent_pidfd = SANDBOX_FD_PARENT,
                .report_fd = SANDBOX_FD_REPORT, .rpc_fd = SANDBOX_FD_RPC, .stdout_fd = SANDBOX_FD_STDOUT,
                .stderr_fd = SANDBOX_FD_STDERR, .devnull_fd = SANDBOX_FD_DEVNULL, .nproc = s->nproc,
                .address_space = s->address_space, .core_fd = got > SANDBOX_FDS_SENT ? SANDBOX_FD_CORE : -1,
        };
        sandbox_main(&cfg, plan);
}
