/* core: an ELF core of the crashing program, written by the sandbox's
 * init (its tracer) into a memfd, as the kernel's would be but bounded:
 * one NT_PRSTATUS (and NT_FPREGSET) per thread with the crashing thread
 * first, NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE, and a PT_LOAD per
 * mapping whose bytes are dumped in this order while they fit the bound:
 * the crashing thread's stack from its stack pointer, the first page of
 * each mapped ELF file (its headers, which a debugger needs to find the
 * loaded libraries), the vDSO, then the writable mappings. The rest are
 * there by address only (no bytes): their contents are the files'. gdb,
 * and libdw in the symbolising child, read it like a kernel's core.
 * Why this is safe: the init reads only its own tracee's memory, through
 * /proc/PID/mem, and parses only /proc's own texts, bounded. */
#include "crash.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define CORE_MAPS_MAX 4096u
#define CORE_MAPS_TEXT_MAX (1u << 20)
#define CORE_THREADS_MAX 64u
/* The stack from the crashing thread's stack pointer up: enough for the
 * frames a backtrace shows. */
#define CORE_STACK_MAX (256u << 10)

_Static_assert(sizeof(elf_gregset_t) == sizeof(struct user_regs_struct), "pr_reg is the ptrace registers");

struct map {
        uint64_t start, end, pgoff;
        char perms[5];
        const char *path; /* into the maps text; "" for anonymous */
};

struct seg {
        uint64_t vaddr, memsz, filesz, offset;
        uint32_t flags;
};

struct thread {
        pid_t tid;
        int resume_sig; /* -1: not stopped by this file */
        struct user_regs_struct regs;
        struct user_fpregs_struct fp;
        bool have_fp;
};

/* Reads all of a /proc file, at most max bytes (NUL-terminated). */
static char *read_all(const char *path, size_t max, size_t *len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        size_t cap = 16384, n = 0;
        char *buf = malloc(cap + 1);
        while (buf) {
                if (n == cap) {
                        char *b = cap >= max ? NULL : realloc(buf, (cap *= 2) + 1);
                        if (!b)
                                break;
                        buf = b;
                }
                ssize_t r = read(fd, buf + n, cap - n);
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        if (buf) {
                buf[n] = '\0';
                *len = n;
        }
        return buf;
}

static size_t parse_maps(char *text, struct map *maps, size_t max)
{
        size_t n = 0;
        for (char *line = text, *next; line && *line && n < max; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                struct map *m = &maps[n];
                int at = 0;
                unsigned long long s, e, off;
                if (sscanf(line, "%llx-%llx %4s %llx %*s %*s %n", &s, &e, m->perms, &off, &at) < 4 || at == 0)
                        continue;
                m->start = s;
                m->end = e;
                m->pgoff = off;
                m->path = line + at;
                /* Not readable through /proc/PID/mem, and no debugger
                 * needs them. */
                if (strcmp(m->path, "[vsyscall]") == 0 || strcmp(m->path, "[vvar]") == 0 || e <= s)
                        continue;
                n++;
        }
        return n;
}

/* The other threads stopped (PTRACE_INTERRUPT) for their registers,
 * within CORE_STOP_MS: one that does not stop by then (it sleeps
 * uninterruptibly: a vfork's parent, say) is left out of the core, and
 * its stop, when it comes, is resumed as any (crash.c). Why bounded: the
 * program chooses what its threads do, and must not hang its init. */
#define CORE_STOP_MS 200
static size_t stop_threads(pid_t pid, pid_t tid, struct thread *t, size_t max)
{
        char path[64];
        pid_t pending[CORE_THREADS_MAX];
        size_t n = 1, np = 0;
        t[0] = (struct thread){ .tid = tid, .resume_sig = -1 };
        snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && np + 1 < max && (de = readdir(d))) {
                pid_t other = atoi(de->d_name);
                if (other > 0 && other != tid && ptrace(PTRACE_INTERRUPT, other, 0, 0) == 0)
                        pending[np++] = other;
        }
        if (d)
                closedir(d);
        for (int ms = 0; np > 0 && ms <= CORE_STOP_MS; ms++) {
                for (size_t i = 0; i < np;) {
                        int st;
                        pid_t w = waitpid(pending[i], &st, WNOHANG | __WALL);
                        if (w == 0) {
                                i++;
                                continue;
                        }
                        /* Its next stop: the interrupt's, or a signal's,
                         * which it gets again when it resumes. */
                        if (w == pending[i] && WIFSTOPPED(st))
                                t[n++] = (struct thread){ .tid = w, .resume_sig = (st >> 16) == 0 ? WSTOPSIG(st) : 0 };
                        pending[i] = pending[--np];
                }
                if (np > 0)
                        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
        for (size_t i = 0; i < n; i++) {
                if (ptrace(PTRACE_GETREGS, t[i].tid, 0, &t[i].regs) < 0)
                        memset(&t[i].regs, 0, sizeof t[i].regs);
                t[i].have_fp = ptrace(PTRACE_GETFPREGS, t[i].tid, 0, &t[i].fp) == 0;
        }
        return n;
}

static void resume_threads(const struct thread *t, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (t[i].resume_sig >= 0)
                        (void)ptrace(PTRACE_CONT, t[i].tid, 0, t[i].resume_sig);
}

/* A growing buffer of notes. */
struct notes {
        uint8_t *buf;
        size_t len, cap;
};

static int note(struct notes *ns, uint32_t type, const void *desc, size_t size)
{
        static const char name[] = "CORE";
        size_t need = sizeof(Elf64_Nhdr) + 8 + ((size + 3) & ~(size_t)3);
        if (ns->len + need > ns->cap) {
                size_t cap = (ns->cap + need) * 2;
                uint8_t *b = realloc(ns->buf, cap);
                if (!b)
                        return -ENOMEM;
                ns->buf = b;
                ns->cap = cap;
        }
        Elf64_Nhdr h = { .n_namesz = sizeof name, .n_descsz = (Elf64_Word)size, .n_type = type };
        uint8_t *p = ns->buf + ns->len;
        memset(p, 0, need);
        memcpy(p, &h, sizeof h);
        memcpy(p + sizeof h, name, sizeof name);
        memcpy(p + sizeof h + 8, desc, size);
        ns->len += need;
        return 0;
}

static int thread_notes(struct notes *ns, const struct thread *t, const siginfo_t *si, pid_t pid, bool first)
{
        struct elf_prstatus pr;
        memset(&pr, 0, sizeof pr);
        if (first) {
                pr.pr_info.si_signo = si->si_signo;
                pr.pr_info.si_code = si->si_code;
                pr.pr_cursig = (short)si->si_signo;
        }
        pr.pr_pid = t->tid;
        pr.pr_ppid = 0;
        pr.pr_pgrp = pid;
        pr.pr_sid = pid;
        memcpy(&pr.pr_reg, &t->regs, sizeof t->regs);
        pr.pr_fpvalid = t->have_fp;
        int e = note(ns, NT_PRSTATUS, &pr, sizeof pr);
        return e;
}

static int fp_note(struct notes *ns, const struct thread *t)
{
        return t->have_fp ? note(ns, NT_PRFPREG, &t->fp, sizeof t->fp) : 0;
}

/* NT_PRPSINFO, NT_SIGINFO, NT_AUXV, NT_FILE. */
static int process_notes(struct notes *ns, pid_t pid, const siginfo_t *si, const struct map *maps, size_t n)
{
        char path[64];
        struct elf_prpsinfo ps;
        size_t len = 0;
        memset(&ps, 0, sizeof ps);
        ps.pr_pid = pid;
        ps.pr_sname = 'R';
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
        char *cmd = read_all(path, 4096, &len);
        if (cmd) {
                for (size_t i = 0; i + 1 < len; i++)
                        cmd[i] = cmd[i] ? cmd[i] : ' ';
                snprintf(ps.pr_psargs, sizeof ps.pr_psargs, "%s", cmd);
                const char *base = strrchr(cmd, '/');
                snprintf(ps.pr_fname, sizeof ps.pr_fname, "%s", base ? base + 1 : cmd);
                char *sp = strchr(ps.pr_fname, ' ');
                if (sp)
                        *sp = '\0';
                free(cmd);
        }
        int e = note(ns, NT_PRPSINFO, &ps, sizeof ps);
        if (e == 0)
                e = note(ns, NT_SIGINFO, si, sizeof *si);
        snprintf(path, sizeof path, "/proc/%d/auxv", (int)pid);
        char *auxv = e == 0 ? read_all(path, 16384, &len) : NULL;
        if (auxv) {
                e = note(ns, NT_AUXV, auxv, len);
                free(auxv);
        }
        /* NT_FILE: count, page size, (start, end, page offset) each, then
         * the names. */
        size_t files = 0, names = 0;
        for (size_t i = 0; i < n; i++)
                if (maps[i].path[0] == '/') {
                        files++;
                        names += strlen(maps[i].path) + 1;
                }
        size_t size = 16 + files * 24 + names;
        uint8_t *f = e == 0 ? calloc(1, size) : NULL;
        if (!f)
                return e < 0 ? e : -ENOMEM;
        uint64_t *w = (uint64_t *)f;
        *w++ = files;
        *w++ = PAGE;
        char *s = (char *)(f + 16 + files * 24);
        for (size_t i = 0; i < n; i++)
                if (maps[i].path[0] == '/') {
                        *w++ = maps[i].start;
                        *w++ = maps[i].end;
                        *w++ = maps[i].pgoff / PAGE;
                        size_t l = strlen(maps[i].path) + 1;
                        memcpy(s, maps[i].path, l);
                        s += l;
                }
        e = note(ns, NT_FILE, f, size);
        free(f);
        return e;
}

/* Chooses the bytes to dump, within budget (see the top of this file):
 * one segment per mapping, the stack's split at its dump's start. */
static size_t plan_segments(const struct map *maps, size_t n, uint64_t sp, uint64_t budget, struct seg *segs)
{
        uint64_t *dump = calloc(n ? n : 1, sizeof *dump);
        if (!dump)
                return 0;
        /* The stack: the mapping holding sp, or the one right above it
         * (a stack overflow faults below its stack). */
        size_t stack = n;
        for (size_t i = 0; i < n && stack == n; i++)
                if (maps[i].end > sp && (maps[i].start <= sp || maps[i].start - sp <= 2 * PAGE))
                        stack = i;
        uint64_t lo = 0;
        if (stack < n) {
                const struct map *m = &maps[stack];
                lo = sp > m->start + 256 ? (sp - 256) & ~(uint64_t)(PAGE - 1) : m->start;
                uint64_t len = m->end - lo > CORE_STACK_MAX ? CORE_STACK_MAX : m->end - lo;
                if (len > budget)
                        len = budget & ~(uint64_t)(PAGE - 1);
                dump[stack] = len;
                budget -= len;
        }
        for (int pass = 0; pass < 3; pass++)
                for (size_t i = 0; i < n; i++) {
                        const struct map *m = &maps[i];
                        uint64_t size = m->end - m->start;
                        if (i == stack || dump[i] || m->perms[0] != 'r')
                                continue;
                        uint64_t want = 0;
                        if (pass == 0 && m->path[0] == '/' && m->pgoff == 0)
                                want = PAGE; /* ELF headers */
                        else if (pass == 1 && strcmp(m->path, "[vdso]") == 0)
                                want = size;
                        else if (pass == 2 && m->perms[1] == 'w' && strncmp(m->path, "/dev/", 5) != 0)
                                want = size;
                        if (want && want <= budget) {
                                dump[i] = want;
                                budget -= want;
                        }
                }
        size_t ns = 0;
        for (size_t i = 0; i < n; i++) {
                const struct map *m = &maps[i];
                uint32_t flags = (m->perms[0] == 'r' ? PF_R : 0) | (m->perms[1] == 'w' ? PF_W : 0) |
                                 (m->perms[2] == 'x' ? PF_X : 0);
                uint64_t start = m->start;
                if (i == stack && lo > m->start) {
                        segs[ns++] = (struct seg){ .vaddr = m->start, .memsz = lo - m->start, .flags = flags };
                        start = lo;
                }
                segs[ns++] = (struct seg){ .vaddr = start, .memsz = m->end - start, .filesz = dump[i], .flags = flags };
        }
        free(dump);
        return ns;
}

/* Copies [addr, addr + len) of mem into fd at off; what cannot be read
 * stays zero (the file was sized first). */
static void copy_memory(int mem, int fd, uint64_t addr, uint64_t len, uint64_t off)
{
        static uint8_t buf[65536];
        for (uint64_t done = 0; done < len;) {
                size_t chunk = len - done > sizeof buf ? sizeof buf : (size_t)(len - done);
                ssize_t r = pread(mem, buf, chunk, (off_t)(addr + done));
                if (r <= 0) {
                        done += PAGE - ((addr + done) & (PAGE - 1)); /* this page is a hole */
                        continue;
                }
                if (pwrite(fd, buf, (size_t)r, (off_t)(off + done)) != r)
                        return;
                done += (uint64_t)r;
        }
}

int core_write(int fd, pid_t pid, pid_t tid, const siginfo_t *si, uint64_t max, bool sized, uint64_t *size)
{
        char path[64];
        size_t len = 0, n = 0, nseg = 0, nt = 0;
        struct thread *threads = calloc(CORE_THREADS_MAX, sizeof *threads);
        struct map *maps = calloc(CORE_MAPS_MAX, sizeof *maps);
        struct seg *segs = calloc(2 * CORE_MAPS_MAX + 2, sizeof *segs);
        struct notes ns = { 0 };
        int e = -ENOMEM, mem = -1;
        snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
        char *text = threads && maps && segs ? read_all(path, CORE_MAPS_TEXT_MAX, &len) : NULL;
        if (!text)
                goto out;
        n = parse_maps(text, maps, CORE_MAPS_MAX);
        nt = stop_threads(pid, tid, threads, CORE_THREADS_MAX);
        if ((e = thread_notes(&ns, &threads[0], si, pid, true)) < 0 ||
            (e = process_notes(&ns, pid, si, maps, n)) < 0 || (e = fp_note(&ns, &threads[0])) < 0)
                goto out;
        for (size_t i = 1; i < nt; i++)
                if ((e = thread_notes(&ns, &threads[i], si, pid, false)) < 0 || (e = fp_note(&ns, &threads[i])) < 0)
                        goto out;
        /* Headers and notes first, then the bytes, page-aligned. */
        uint64_t head = sizeof(Elf64_Ehdr) + (n + 3) * sizeof(Elf64_Phdr);
        uint64_t data = (head + ns.len + PAGE - 1) & ~(uint64_t)(PAGE - 1);
        e = -EFBIG;
        if (data >= max)
                goto out;
        nseg = plan_segments(maps, n, threads[0].regs.rsp, max - data, segs);
        uint64_t off = data;
        for (size_t i = 0; i < nseg; i++) {
                segs[i].offset = off;
                off += segs[i].filesz;
        }
        Elf64_Ehdr eh = {
                .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE },
                .e_type = ET_CORE, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
                .e_phoff = sizeof eh, .e_ehsize = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr),
                .e_phnum = (Elf64_Half)(nseg + 1),
        };
        Elf64_Phdr *ph = calloc(nseg + 1, sizeof *ph);
        if (!ph) {
                e = -ENOMEM;
                goto out;
        }
        ph[0] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_offset = sizeof eh + (nseg + 1) * sizeof *ph,
                              .p_filesz = ns.len, .p_align = 4 };
        for (size_t i = 0; i < nseg; i++)
                ph[i + 1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = segs[i].flags, .p_offset = segs[i].offset,
                                          .p_vaddr = segs[i].vaddr, .p_filesz = segs[i].filesz,
                                          .p_memsz = segs[i].memsz, .p_align = PAGE };
        e = -EIO;
        *size = off;
        if ((!sized && ftruncate(fd, (off_t)off) < 0) || pwrite(fd, &eh, sizeof eh, 0) != sizeof eh ||
            pwrite(fd, ph, (nseg + 1) * sizeof *ph, sizeof eh) != (ssize_t)((nseg + 1) * sizeof *ph) ||
            pwrite(fd, ns.buf, ns.len, (off_t)ph[0].p_offset) != (ssize_t)ns.len) {
                free(ph);
                goto out;
        }
        free(ph);
        snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
        if ((mem = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                e = -errno;
                goto out;
        }
        for (size_t i = 0; i < nseg; i++)
                if (segs[i].filesz)
                        copy_memory(mem, fd, segs[i].vaddr, segs[i].filesz, segs[i].offset);
        close(mem);
        e = 0;
out:
        resume_threads(threads, nt);
        free(ns.buf);
        free(text);
        free(maps);
        free(segs);
        free(threads);
        return e;
}
