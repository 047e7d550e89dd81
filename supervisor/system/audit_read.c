/* audit_read: one gadget's records from audit.log and its rotated files,
 * read in slices of at most AUDIT_SLICE bytes so that the event loop never
 * spends more on it at a time: backwards from the end to find where the
 * last n records start, then forwards, giving each matching line. */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFIX_MAX 160          /* bytes of a line audit_line_of may read */

struct audit_reader {
        char *gadget;
        size_t want;            /* records asked for (0: all) */
        size_t found;           /* matching records seen going backwards */
        int fds[AUDIT_KEEP_MAX + 1];
        uint64_t ends[AUDIT_KEEP_MAX + 1];  /* sizes when the reader began */
        size_t n_files;         /* fds[0] the oldest, fds[n_files - 1] audit.log */
        bool forward;           /* found where to start */
        size_t file;            /* the file being read */
        uint64_t pos;           /* backwards: the end of the part not yet scanned;
                                   forwards: the start of the next line */
        bool skipping;          /* forwards: inside a line too long to give */
        char *buf;
};

/* Why this is safe: gadgetd writes every line itself with "time" then
 * "gadget" first (audit.c), and in JSON text a quote inside a string is
 * escaped, so `,"gadget":"NAME",` right after the time can only be the
 * gadget field. Gadget names need no escaping (gadget_name_ok). */
bool audit_line_of(const char *p, size_t len, const char *gadget)
{
        static const char head[] = "{\"time\":\"", mid[] = "\",\"gadget\":\"";
        const char *nl = memchr(p, '\n', len);
        size_t g = strlen(gadget);
        if (nl)
                len = (size_t)(nl - p);
        if (len < sizeof head - 1 || memcmp(p, head, sizeof head - 1) != 0)
                return false;
        const char *t = p + sizeof head - 1, *end = p + len;
        const char *q = memchr(t, '"', (size_t)(end - t));
        if (!q || (size_t)(end - q) < sizeof mid - 1 + g + 2 || memcmp(q, mid, sizeof mid - 1) != 0)
                return false;
        q += sizeof mid - 1;
        return memcmp(q, gadget, g) == 0 && q[g] == '"' && q[g + 1] == ',';
}

/* Why the first ,"seq": is the sequence: audit.c writes it right after
 * "node", before any field a record chooses (which never names "seq"),
 * and in JSON text a quote inside a string is escaped, so that text
 * cannot appear in an earlier value. */
uint64_t audit_seq_of(const char *p, size_t len)
{
        static const char key[] = ",\"seq\":";
        const char *nl = memchr(p, '\n', len);
        if (nl)
                len = (size_t)(nl - p);
        const char *k = memmem(p, len, key, sizeof key - 1);
        if (!k)
                return 0;
        uint64_t v = 0;
        size_t digits = 0;
        for (const char *d = k + sizeof key - 1; d < p + len && *d >= '0' && *d <= '9'; d++, digits++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return 0; /* not a number gadgetd wrote */
                v = v * 10 + (uint64_t)(*d - '0');
        }
        return digits ? v : 0;
}

uint64_t audit_last_seq(const char *dir, uint32_t keep)
{
        char path[4096];
        uint64_t best = 0;
        char *buf = malloc(AUDIT_SLICE);
        if (!buf)
                return 0;
        if (keep > AUDIT_KEEP_MAX)
                keep = AUDIT_KEEP_MAX;
        for (uint32_t k = 0; k <= keep; k++) {
                struct stat st;
                if (audit_file_path(dir, k, path, sizeof path) < 0)
                        break;
                int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                if (fd < 0)
                        continue;
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(fd);
                        continue;
                }
                off_t from = st.st_size > (off_t)AUDIT_SLICE ? st.st_size - (off_t)AUDIT_SLICE : 0;
                ssize_t got = pread(fd, buf, (size_t)(st.st_size - from), from);
                close(fd);
                /* Whole lines only (a torn last one is no record); the
                 * first may be cut at the slice's start: skipped. */
                for (ssize_t i = 0, start = from ? -1 : 0; i < got; i++) {
                        if (buf[i] != '\n')
                                continue;
                        if (start >= 0) {
                                uint64_t seq = audit_seq_of(buf + start, (size_t)(i - start));
                                if (seq > best)
                                        best = seq;
                        }
                        start = i + 1;
                }
        }
        free(buf);
        return best;
}

int audit_file_path(const char *dir, uint32_t k, char *buf, size_t len)
{
        int n = k ? snprintf(buf, len, "%s/audit.log.%u", dir, k) : snprintf(buf, len, "%s/audit.log", dir);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int audit_reader_new(const char *dir, uint32_t keep, const char *gadget, size_t n,
                     struct audit_reader **out)
{
        struct audit_reader *r = calloc(1, sizeof *r);
        char path[4096];
        int e = -ENOMEM;
        if (!r || (gadget && !(r->gadget = strdup(gadget))) || !(r->buf = malloc(AUDIT_SLICE + PREFIX_MAX)))
                goto fail;
        if (keep > AUDIT_KEEP_MAX)
                keep = AUDIT_KEEP_MAX;
        /* Oldest first. Opened now: a rotation while the answer is sent
         * renames the files, and these fds still read the same records. */
        for (uint32_t k = keep + 1; k-- > 0;) {
                struct stat st;
                if ((e = audit_file_path(dir, k, path, sizeof path)) < 0)
                        goto fail;
                int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                if (fd < 0 && errno == ENOENT)
                        continue;
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        e = fd < 0 ? -errno : -EINVAL;
                        if (fd >= 0)
                                close(fd);
                        goto fail;
                }
                r->fds[r->n_files] = fd;
                r->ends[r->n_files++] = (uint64_t)st.st_size;
        }
        r->want = n;
        r->forward = n == 0 || r->n_files == 0;
        r->file = r->forward ? 0 : r->n_files - 1;
        r->pos = r->forward ? 0 : r->ends[r->file];
        *out = r;
        return 0;
fail:
        audit_reader_free(r);
        return e;
}

void audit_reader_free(struct audit_reader *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n_files; i++)
                close(r->fds[i]);
        free(r->gadget);
        free(r->buf);
        free(r);
}

/* Reads [from, to) of the current file into r->buf. Bytes read or -errno. */
static ssize_t read_at(struct audit_reader *r, uint64_t from, uint64_t to)
{
        size_t got = 0, len = (size_t)(to - from);
        while (got < len) {
                ssize_t n = pread(r->fds[r->file], r->buf + got, len - got, (off_t)(from + got));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break; /* truncated meanwhile */
                got += (size_t)n;
        }
        return (ssize_t)got;
}

/* Backwards: one slice before r->pos, counting r's records from the end.
 * Line starts are just after a newline (or the file's start); the bytes
 * read past r->pos let a line starting near it be recognised. */
static int step_back(struct audit_reader *r)
{
        uint64_t end = r->ends[r->file];
        uint64_t lo = r->pos > AUDIT_SLICE ? r->pos - AUDIT_SLICE : 0;
        uint64_t hi = r->pos + PREFIX_MAX < end ? r->pos + PREFIX_MAX : end;
        ssize_t got = read_at(r, lo, hi);
        if (got < 0)
                return (int)got;
        for (uint64_t s = r->pos;; s--) {
                bool start = s == 0 || (s > lo && r->buf[s - 1 - lo] == '\n');
                if (start && s < lo + (uint64_t)got &&
                    audit_line_of(r->buf + (s - lo), (size_t)(lo + (uint64_t)got - s), r->gadget) &&
                    ++r->found == r->want) {
                        r->forward = true;
                        r->pos = s;
                        return 1;
                }
                if (s == lo)
                        break;
        }
        r->pos = lo;
        if (lo > 0)
                return 1;
        if (r->file == 0) {  /* fewer than want: all of them */
                r->forward = true;
                return 1;
        }
        r->file--;
        r->pos = r->ends[r->file];
        return 1;
}

/* Forwards: one slice from r->pos; every whole line of r's is given. */
static int step_forward(struct audit_reader *r, audit_emit_fn *emit, void *arg)
{
        uint64_t end = r->ends[r->file];
        uint64_t hi = r->pos + AUDIT_SLICE < end ? r->pos + AUDIT_SLICE : end;
        ssize_t got = hi > r->pos ? read_at(r, r->pos, hi) : 0;
        if (got < 0)
                return (int)got;
        size_t off = 0;
        for (;;) {
                char *nl = memchr(r->buf + off, '\n', (size_t)got - off);
                if (!nl)
                        break;
                size_t len = (size_t)(nl - (r->buf + off));
                if (!r->skipping && (!r->gadget || audit_line_of(r->buf + off, len, r->gadget))) {
                        int e = emit(arg, r->buf + off, len);
                        if (e < 0)
                                return e;
                        if (e == 0) {
                                r->pos += off;
                                return 1;
                        }
                }
                r->skipping = false;
                off += len + 1;
        }
        if (off == 0 && (size_t)got == AUDIT_SLICE) {
                r->skipping = true; /* a line longer than a slice: not gadgetd's */
                off = (size_t)got;
        }
        r->pos += off;
        if (off > 0 && r->pos < end)
                return 1;
        /* The end of this file (a last line without newline is an unfinished
         * write): on to the next one. */
        if (++r->file >= r->n_files)
                return 0;
        r->pos = 0;
        r->skipping = false;
        return 1;
}

int audit_reader_step(struct audit_reader *r, audit_emit_fn *emit, void *arg)
{
        if (r->file >= r->n_files)
                return 0;
        return r->forward ? step_forward(r, emit, arg) : step_back(r);
}
