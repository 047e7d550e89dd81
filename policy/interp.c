/* interp: the interpreter a program needs before it can run, the ELF
 * loader its PT_INTERP names or the first word of its #! line. Used by the
 * policy check and, inside the sandbox, to explain an exec's ENOENT. */
#include "policy.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The #! line's interpreter: its first word, like the kernel reads it. */
static int script_interp(const char *head, size_t n, char *out, size_t len)
{
        size_t i = 2, j;
        while (i < n && (head[i] == ' ' || head[i] == '\t'))
                i++;
        for (j = i; j < n && head[j] != ' ' && head[j] != '\t' && head[j] != '\n' && head[j] != '\0'; j++)
                ;
        if (j == i || j - i >= len)
                return j == i ? 0 : -ENAMETOOLONG;
        memcpy(out, head + i, j - i);
        out[j - i] = '\0';
        return 1;
}

/* PT_INTERP of an ELF file of either class, in the host's byte order. */
static int elf_interp(int fd, const unsigned char *head, size_t n, char *out, size_t len)
{
        bool is64 = head[EI_CLASS] == ELFCLASS64;
        uint64_t phoff, off = 0, size = 0;
        unsigned phnum, phentsize;

        if (is64 ? n < sizeof(Elf64_Ehdr) : n < sizeof(Elf32_Ehdr))
                return 0;
        if (is64) {
                const Elf64_Ehdr *eh = (const void *)head;
                phoff = eh->e_phoff, phnum = eh->e_phnum, phentsize = eh->e_phentsize;
        } else {
                const Elf32_Ehdr *eh = (const void *)head;
                phoff = eh->e_phoff, phnum = eh->e_phnum, phentsize = eh->e_phentsize;
        }
        if (phentsize != (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) || phnum > 4096)
                return 0;
        /* Read 16 program headers at a time (one pread for most programs,
         * where one per header was ten for a static one). */
        union { Elf64_Phdr p64[16]; Elf32_Phdr p32[16]; } ph;
        size_t got = 0; /* of them, whole headers read (a file cut short: the ones before the cut) */
        for (unsigned i = 0; i < phnum && size == 0; i++) {
                unsigned k = i % 16;
                if (k == 0) {
                        size_t want = (size_t)(phnum - i < 16 ? phnum - i : 16) * phentsize;
                        ssize_t r = pread(fd, &ph, want, (off_t)(phoff + (uint64_t)i * phentsize));
                        got = r > 0 ? (size_t)r / phentsize : 0;
                }
                if (k >= got)
                        return 0;
                if ((is64 ? ph.p64[k].p_type : ph.p32[k].p_type) != PT_INTERP)
                        continue;
                off = is64 ? ph.p64[k].p_offset : ph.p32[k].p_offset;
                size = is64 ? ph.p64[k].p_filesz : ph.p32[k].p_filesz;
                if (size == 0)
                        return 0;
        }
        if (size == 0)
                return 0; /* static */
        if (size > len)
                return -ENAMETOOLONG;
        if (pread(fd, out, size, (off_t)off) != (ssize_t)size)
                return -EIO;
        out[size - 1] = '\0';
        return out[0] ? 1 : 0;
}

int policy_interpreter(const char *path, char *out, size_t len)
{
        unsigned char head[256];
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        int r = 0;

        if (fd < 0)
                return -errno;
        ssize_t n = pread(fd, head, sizeof head, 0);
        if (n < 0)
                r = -errno;
        else if (n >= 2 && head[0] == '#' && head[1] == '!')
                r = script_interp((const char *)head, (size_t)n, out, len);
        else if (n >= SELFMAG && memcmp(head, ELFMAG, SELFMAG) == 0)
                r = elf_interp(fd, head, (size_t)n, out, len);
        close(fd);
        return r;
}
