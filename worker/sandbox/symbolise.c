/* symbolise: the backtrace of a crash, read from the core core.c wrote,
 * with elfutils' libdw. The program's ELF files and their DWARF are the
 * gadget's, so hostile: libdw runs only here, in a child the init forks,
 * which first puts the gadget's whole filter on itself (on top of the
 * init's, which is stricter than no filter at all) and the program's own
 * limits, in the sandbox's namespaces, as the gadget's uid, in its cgroup;
 * the init reads at most SANDBOX_CRASH_FRAMES_MAX lines of it and kills
 * it after CRASH_SYMBOLISE_MS. It cannot do anything the gadget cannot. */
#include "sandbox.h"
#include "crash.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct walk {
        FILE *out;
        unsigned n;
};

/* One frame as "function+0xoff (module) file:line", or the address. */
static int frame_cb(Dwfl_Frame *state, void *arg)
{
        struct walk *w = arg;
        Dwarf_Addr pc;
        bool activation;
        if (!dwfl_frame_pc(state, &pc, &activation))
                return DWARF_CB_ABORT;
        /* A return address is past its call: look up the call itself. */
        Dwarf_Addr at = activation ? pc : pc - 1;
        Dwfl *dwfl = dwfl_thread_dwfl(dwfl_frame_thread(state));
        Dwfl_Module *mod = dwfl_addrmodule(dwfl, at);
        const char *name = NULL, *modname = NULL, *file = NULL;
        GElf_Off off = 0;
        GElf_Sym sym;
        int line = 0;
        if (mod) {
                modname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
                name = dwfl_module_addrinfo(mod, at, &off, &sym, NULL, NULL, NULL);
                Dwfl_Line *l = dwfl_module_getsrc(mod, at);
                if (l)
                        file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
        }
        const char *mbase = modname && strrchr(modname, '/') ? strrchr(modname, '/') + 1 : modname;
        const char *fbase = file && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        char text[512];
        int k = name ? snprintf(text, sizeof text, "%s+0x%llx", name, (unsigned long long)(activation ? off : off + 1))
                     : snprintf(text, sizeof text, "0x%llx", (unsigned long long)pc);
        if (mbase && k > 0 && (size_t)k < sizeof text)
                k += snprintf(text + k, sizeof text - (size_t)k, " (%s)", mbase);
        if (fbase && k > 0 && (size_t)k < sizeof text)
                snprintf(text + k, sizeof text - (size_t)k, " %s:%d", fbase, line);
        /* One line each: no newline of a hostile name splits a frame. */
        for (char *p = text; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = '?';
        fprintf(w->out, "%s\n", text);
        return ++w->n < SANDBOX_CRASH_FRAMES_MAX ? DWARF_CB_OK : DWARF_CB_ABORT;
}

static _Noreturn void child(const struct sandbox_config *cfg, int core_fd, pid_t tid, int out_fd)
{
        static const Dwfl_Callbacks callbacks = {
                .find_elf = dwfl_build_id_find_elf,
                .find_debuginfo = dwfl_standard_find_debuginfo,
        };
        const char *step;
        /* Only the core and the pipe stay open: nothing of the init's (its
         * report pipe to gadgetd) is within reach of what parses hostile
         * bytes. */
        int lo = core_fd < out_fd ? core_fd : out_fd, hi = core_fd < out_fd ? out_fd : core_fd;
        if ((lo > 0 && close_range(0, (unsigned)lo - 1, 0) < 0) ||
            (hi > lo + 1 && close_range((unsigned)lo + 1, (unsigned)hi - 1, 0) < 0) ||
            close_range((unsigned)hi + 1, ~0U, 0) < 0)
                _exit(1);
        /* The gadget's own filter and limits before any hostile byte is
         * parsed; a CPU bound as well as the init's time bound. */
        struct rlimit cpu = { 2, 2 };
        if (filter_install(&cfg->filter->direct, false) < 0 || limits_apply_program(cfg, &step) < 0 ||
            setrlimit(RLIMIT_CPU, &cpu) < 0)
                _exit(1);
        FILE *out = fdopen(out_fd, "w");
        if (!out)
                _exit(1);
        elf_version(EV_CURRENT);
        Elf *core = elf_begin(core_fd, ELF_C_READ_MMAP, NULL);
        Dwfl *dwfl = core ? dwfl_begin(&callbacks) : NULL;
        if (!dwfl || dwfl_core_file_report(dwfl, core, NULL) < 0 || dwfl_report_end(dwfl, NULL, NULL) != 0 ||
            dwfl_core_file_attach(dwfl, core) < 0)
                _exit(2);
        struct walk w = { .out = out };
        dwfl_getthread_frames(dwfl, tid, frame_cb, &w);
        fflush(out);
        _exit(0);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Keeps the UTF-8 of a frame's text whole and cuts it to the bound. */
static void keep_frame(struct crash_info *c, const char *s, size_t n)
{
        char *f = c->frames[c->n_frames];
        if (n > SANDBOX_CRASH_FRAME_MAX) {
                n = SANDBOX_CRASH_FRAME_MAX;
                while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
                        n--;
        }
        /* Anything not printable ASCII (hostile symbol names) as '?':
         * gadgetd refuses a report that is not UTF-8. */
        for (size_t i = 0; i < n; i++)
                f[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '?' : s[i];
        f[n] = '\0';
        if (n > 0)
                c->n_frames++;
}

void crash_symbolise(const struct sandbox_config *cfg, int core_fd, pid_t tid, struct crash_info *c)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                child(cfg, core_fd, tid, p[1]);
        }
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return;
        }
        char buf[SANDBOX_CRASH_FRAMES_MAX * 600];
        size_t len = 0;
        uint64_t end = now_ms() + CRASH_SYMBOLISE_MS, now;
        while (len < sizeof buf && (now = now_ms()) < end) {
                struct pollfd pf = { .fd = p[0], .events = POLLIN };
                if (poll(&pf, 1, (int)(end - now)) <= 0)
                        continue;
                ssize_t r = read(p[0], buf + len, sizeof buf - len);
                if (r <= 0)
                        break;
                len += (size_t)r;
        }
        close(p[0]);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
        /* Whole lines only: the last may have been cut. */
        for (size_t at = 0; at < len && c->n_frames < SANDBOX_CRASH_FRAMES_MAX;) {
                char *nl = memchr(buf + at, '\n', len - at);
                if (!nl)
                        break;
                keep_frame(c, buf + at, (size_t)(nl - (buf + at)));
                at = (size_t)(nl - buf) + 1;
        }
}
