/* log: structured entries under journald, plain lines on stderr elsewhere. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#ifdef HAVE_LIBSYSTEMD
#define SD_JOURNAL_SUPPRESS_LOCATION /* CODE_FILE= would always name this file */
#include <systemd/sd-journal.h>
#endif

#include "value.h"

/* The one setting of the log module: gadgetd run shows only warnings and
 * errors beside the gadget's own output. */
static enum log_level max_level = L_DEBUG;

void log_set_level(enum log_level level)
{
        max_level = level;
}

/* -1 until checked, then whether stderr is a journald stream. */
static int journal = -1;

/* True if stderr goes to journald: systemd sets JOURNAL_STREAM to the
 * device and inode of the stream it connected, so a redirected stderr
 * (a pipe, a file) is not mistaken for it. */
static bool journal_check(void)
{
#ifdef HAVE_LIBSYSTEMD
        unsigned long long dev, ino;
        struct stat st;
        const char *e = getenv("JOURNAL_STREAM");
        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
#else
        return false;
#endif
}

static bool to_journal(void)
{
        if (journal < 0)
                journal = journal_check();
        return journal;
}

static void log_stderr(enum log_level level, const char *gadget, const char *line)
{
        const char *tag = level <= L_ERR ? "error: " : level == L_WARN ? "warning: " : "";
        if (gadget)
                fprintf(stderr, "gadgetd: [%s] %s%s\n", gadget, tag, line);
        else
                fprintf(stderr, "gadgetd: %s%s\n", tag, line);
}

#ifdef HAVE_LIBSYSTEMD
#define JOURNAL_FIELDS 24

/* One journal entry of up to JOURNAL_FIELDS "KEY=value" fields (NULL ones
 * skipped). libsystemd is loaded at the first (supervisor/system/sd_dl.c). */
static int journal_send(const char *const *fields, size_t n)
{
        struct iovec iov[JOURNAL_FIELDS];
        int k = 0;
        for (size_t i = 0; i < n && k < JOURNAL_FIELDS; i++)
                if (fields[i])
                        iov[k++] = (struct iovec){ .iov_base = (void *)fields[i], .iov_len = strlen(fields[i]) };
        return sd_journal_sendv(iov, k);
}

#endif

void log_msg(enum log_level level, const char *gadget, const char *fmt, ...)
{
        if (level > max_level)
                return;
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        log_fields(level, gadget, NULL, NULL, 0, line);
}

#ifdef HAVE_LIBSYSTEMD
/* The journal entry of log_fields. */
static int journal_fields(enum log_level level, const char *gadget, const char *message_id,
                          const struct log_field *f, size_t n, const char *line)
{
        enum { FIXED = 5, MAX_FIELDS = 16 }; /* MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, GADGET, MESSAGE_ID */
        char msg[2400], prio[16], gad[300], *own[MAX_FIELDS] = { 0 };
        const char *fields[FIXED + MAX_FIELDS];
        size_t k = 0;
        int e = 0;
        if (n > MAX_FIELDS)
                return -E2BIG;
        if (gadget)
                snprintf(msg, sizeof msg, "MESSAGE=[%s] %s", gadget, line);
        else
                snprintf(msg, sizeof msg, "MESSAGE=%s", line);
        snprintf(prio, sizeof prio, "PRIORITY=%d", (int)level);
        snprintf(gad, sizeof gad, "GADGET=%s", gadget ? gadget : "");
        fields[k++] = msg;
        fields[k++] = prio;
        fields[k++] = "SYSLOG_IDENTIFIER=gadgetd";
        if (gadget)
                fields[k++] = gad;
        if (message_id)
                fields[k++] = message_id;
        for (size_t i = 0; i < n && e == 0; i++) {
                if (!f[i].value)
                        continue;
                if (asprintf(&own[i], "%s=%s", f[i].name, f[i].value) < 0) {
                        own[i] = NULL;
                        e = -ENOMEM;
                } else {
                        fields[k++] = own[i];
                }
        }
        if (e == 0)
                e = journal_send(fields, k);
        for (size_t i = 0; i < n; i++)
                free(own[i]);
        return e;
}
#else
static int journal_fields(enum log_level level, const char *gadget, const char *message_id,
                          const struct log_field *f, size_t n, const char *line)
{
        return -ENOSYS;
}
#endif

void log_fields(enum log_level level, const char *gadget, const char *message_id, const struct log_field *f,
                size_t n, const char *line)
{
        if (level > max_level)
                return;
        if (to_journal() && journal_fields(level, gadget, message_id, f, n, line) >= 0)
                return;
        log_stderr(level, gadget, line);
}

char *log_escape(const char *in, size_t len, char *out, size_t outlen)
{
        size_t o = 0;
        if (outlen < 3) {
                if (outlen)
                        out[0] = '\0';
                return out;
        }
        out[o++] = '"';
        for (size_t i = 0; i < len && o + 6 < outlen; i++) {
                unsigned char c = (unsigned char)in[i];
                size_t seq = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                        out[o++] = (char)c;
                } else if (seq > 1 && i + seq <= len && o + seq + 2 < outlen &&
                           value_utf8_valid(in + i, seq)) {
                        memcpy(out + o, in + i, seq);
                        o += seq;
                        i += seq - 1;
                } else if (c == '"' || c == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)c;
                } else {
                        o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
                }
        }
        out[o++] = '"';
        out[o] = '\0';
        return out;
}
