/* traceparent: the W3C trace context's text (traceparent.h). */
#include "traceparent.h"

#include <errno.h>
#include <string.h>

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1; /* upper case too: the W3C text allows lower case only */
}

int trace_unhex(const char *s, size_t n, uint8_t *out)
{
        for (size_t i = 0; i < n; i++) {
                int hi = hexval(s[2 * i]), lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
                if (lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
}

void trace_hex(const uint8_t *b, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[b[i] >> 4];
                out[2 * i + 1] = digits[b[i] & 15];
        }
        out[2 * n] = '\0';
}

bool trace_id_zero(const uint8_t *id, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (id[i])
                        return false;
        return true;
}

int traceparent_parse(const char *s, size_t len, struct trace_ctx *out)
{
        uint8_t version;
        struct trace_ctx t;
        if (!s || len < TRACEPARENT_LEN || len > TRACEPARENT_MAX || trace_unhex(s, 1, &version) < 0)
                return -EINVAL;
        /* Version ff is invalid; 00 is exactly 55 characters; a later
         * version may add fields after a dash, read by its first 55. */
        if (version == 0xff || (version == 0 && len != TRACEPARENT_LEN) ||
            (len > TRACEPARENT_LEN && s[TRACEPARENT_LEN] != '-'))
                return -EINVAL;
        if (s[2] != '-' || s[35] != '-' || s[52] != '-')
                return -EINVAL;
        if (trace_unhex(s + 3, TRACE_ID_LEN, t.trace_id) < 0 || trace_unhex(s + 36, TRACE_SPAN_ID_LEN, t.span_id) < 0 ||
            trace_unhex(s + 53, 1, &t.flags) < 0)
                return -EINVAL;
        if (trace_id_zero(t.trace_id, TRACE_ID_LEN) || trace_id_zero(t.span_id, TRACE_SPAN_ID_LEN))
                return -EINVAL;
        *out = t;
        return 0;
}

void traceparent_format(const struct trace_ctx *t, char out[TRACEPARENT_LEN + 1])
{
        memcpy(out, "00-", 3);
        trace_hex(t->trace_id, TRACE_ID_LEN, out + 3);
        out[35] = '-';
        trace_hex(t->span_id, TRACE_SPAN_ID_LEN, out + 36);
        out[52] = '-';
        trace_hex(&t->flags, 1, out + 53);
}
