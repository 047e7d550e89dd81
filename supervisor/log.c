/* log: plain lines on stderr (journald fields come with the systemd work). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "value.h"

/* The one setting of the log module: gadgetd run shows only warnings and
 * errors beside the gadget's own output. */
static enum log_level max_level = L_DEBUG;

void log_set_level(enum log_level level)
{
        max_level = level;
}

void log_msg(enum log_level level, const char *gadget, const char *fmt, ...)
{
        if (level > max_level)
                return;
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        const char *tag = level <= L_ERR ? "error: " : level == L_WARN ? "warning: " : "";
        if (gadget)
                fprintf(stderr, "gadgetd: [%s] %s%s\n", gadget, tag, line);
        else
                fprintf(stderr, "gadgetd: %s%s\n", tag, line);
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
