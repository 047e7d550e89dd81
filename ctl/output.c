/* output: human units, durations, aligned tables, terminal-safe strings. */
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"
#include "value.h"

struct output_table {
        size_t n_cols;
        bool *right;
        char **cells; /* rows * n_cols, row 0 the header */
        size_t rows, cap;
};

/* Time units: their seconds, and their names in output_uptime and output_ago. */
static const struct { uint64_t s; const char *brief, *name; } time_units[] = {
        { 1, "s", "s" }, { 60, "m", "min" }, { 3600, "h", "h" }, { 86400, "d", "d" },
};

/* ms in the largest time unit it fills: brief, with the next smaller unit
 * (output_uptime), or in words and ago (output_ago). */
static const char *time_text(uint64_t ms, bool brief, char *buf, size_t len)
{
        uint64_t s = ms / 1000;
        size_t u = 0;

        while (u + 1 < sizeof time_units / sizeof *time_units && s >= time_units[u + 1].s)
                u++;
        if (!brief && s == 0)
                snprintf(buf, len, "now");
        else if (!brief)
                snprintf(buf, len, "%" PRIu64 " %s ago", s / time_units[u].s, time_units[u].name);
        else if (ms == 0)
                snprintf(buf, len, "-");
        else if (u == 0)
                snprintf(buf, len, "%" PRIu64 "s", s);
        else /* 5m12s, 3h07m, 2d05h */
                snprintf(buf, len, "%" PRIu64 "%s%02" PRIu64 "%s", s / time_units[u].s, time_units[u].brief,
                         s % time_units[u].s / time_units[u - 1].s, time_units[u - 1].brief);
        return buf;
}

const char *output_uptime(uint64_t ms, char *buf, size_t len)
{
        return time_text(ms, true, buf, len);
}

const char *output_ago(uint64_t ms, char *buf, size_t len)
{
        return time_text(ms, false, buf, len);
}

const char *output_cpu(uint64_t usec, char *buf, size_t len)
{
        uint64_t cs = usec / 10000; /* hundredths of a second */

        if (usec == 0)
                snprintf(buf, len, "-");
        else if (cs < 6000)
                snprintf(buf, len, "%" PRIu64 ".%02" PRIu64 "s", cs / 100, cs % 100);
        else
                output_uptime(usec / 1000, buf, len);
        return buf;
}

const char *output_duration_us(uint64_t us, char *buf, size_t len)
{
        if (us < 10000)
                snprintf(buf, len, "%" PRIu64 " us", us);
        else
                snprintf(buf, len, "%" PRIu64 ".%" PRIu64 " ms", us / 1000, us % 1000 / 100);
        return buf;
}

const char *output_size(uint64_t bytes, char *buf, size_t len)
{
        static const char units[] = "KMGTPE";
        uint64_t div = 1024, whole, tenths;
        size_t u = 0;

        if (bytes == 0) {
                snprintf(buf, len, "-");
                return buf;
        }
        if (bytes < 1024) {
                snprintf(buf, len, "%" PRIu64 "B", bytes);
                return buf;
        }
        for (;;) {
                /* Integer arithmetic, rounded to a tenth: rem < div <= 2^60,
                 * so rem * 10 cannot overflow. */
                whole = bytes / div;
                tenths = (bytes % div * 10 + div / 2) / div;
                if (tenths == 10) {
                        whole++;
                        tenths = 0;
                }
                if (whole < 1024 || u + 1 == sizeof(units) - 1)
                        break;
                div *= 1024;
                u++;
        }
        snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", whole, tenths, units[u]);
        return buf;
}

/* Length of the UTF-8 sequence starting at p if it is valid, else 0. */
static size_t utf8_seq(const unsigned char *p, size_t left, uint32_t *cp)
{
        size_t n;

        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, *cp = p[0] & 0x1fu;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, *cp = p[0] & 0x0fu;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, *cp = p[0] & 0x07u;
        else
                return 0;
        if (n > left || !value_utf8_valid((const char *)p, n))
                return 0;
        for (size_t k = 1; k < n; k++)
                *cp = *cp << 6 | (p[k] & 0x3fu);
        return n;
}

/* Code points that change how a terminal shows what follows: C1 controls
 * (some terminals act on them) and bidirectional overrides. */
static bool cp_unsafe(uint32_t cp)
{
        return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
               (cp >= 0x2066 && cp <= 0x2069);
}

/* Writes c as \xNN at o; returns the end. */
static char *put_hex(char *o, unsigned char c)
{
        static const char hex[] = "0123456789abcdef";

        *o++ = '\\';
        *o++ = 'x';
        *o++ = hex[c >> 4];
        *o++ = hex[c & 15];
        return o;
}

char *output_escape(const char *s, unsigned flags)
{
        const unsigned char *p = (const unsigned char *)(s ? s : "");
        size_t len = strlen((const char *)p);
        /* Why this is safe: a gadget's log line or error message is
         * attacker-controlled; escaping every control byte keeps it from
         * moving the cursor, retitling the window or faking other output. */
        char *out = malloc(len * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < len;) {
                unsigned char c = p[i];
                uint32_t cp;
                size_t n;

                if ((c == '\t' && (flags & OUTPUT_KEEP_TAB)) ||
                    (c == '\n' && (flags & OUTPUT_KEEP_NEWLINE)) || (c >= 0x20 && c < 0x7f)) {
                        *o++ = (char)c;
                        i++;
                        continue;
                }
                n = c >= 0x80 ? utf8_seq(p + i, len - i, &cp) : 0;
                if (n == 0) {
                        o = put_hex(o, c);
                        i++;
                        continue;
                }
                for (size_t k = 0; k < n; k++) {
                        if (cp_unsafe(cp))
                                o = put_hex(o, p[i + k]);
                        else
                                *o++ = (char)p[i + k];
                }
                i += n;
        }
        *o = '\0';
        return out;
}

size_t output_width(const char *s)
{
        size_t w = 0;

        for (; *s; s++)
                if (((unsigned char)*s & 0xc0) != 0x80)
                        w++;
        return w;
}

struct output_table *output_table_new(size_t n_cols, const char *const *headers, const bool *right)
{
        struct output_table *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->n_cols = n_cols;
        t->right = calloc(n_cols, sizeof(*t->right));
        if (!t->right)
                goto fail;
        if (right)
                memcpy(t->right, right, n_cols * sizeof(*right));
        if (output_table_add(t, headers) < 0)
                goto fail;
        return t;
fail:
        output_table_free(t);
        return NULL;
}

int output_table_add(struct output_table *t, const char *const *cells)
{
        size_t base;

        if (t->rows == t->cap) {
                size_t ncap = t->cap ? t->cap * 2 : 8;
                char **n = realloc(t->cells, ncap * t->n_cols * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                t->cells = n;
                t->cap = ncap;
        }
        base = t->rows * t->n_cols;
        for (size_t c = 0; c < t->n_cols; c++) {
                t->cells[base + c] = output_escape(cells[c], 0);
                if (!t->cells[base + c]) {
                        while (c-- > 0)
                                free(t->cells[base + c]);
                        return -ENOMEM;
                }
        }
        t->rows++;
        return 0;
}

size_t output_table_rows(const struct output_table *t)
{
        return t->rows ? t->rows - 1 : 0;
}

int output_table_print(const struct output_table *t, FILE *f)
{
        size_t *width = calloc(t->n_cols ? t->n_cols : 1, sizeof(*width));

        if (!width)
                return -ENOMEM;
        for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < t->n_cols; c++) {
                        size_t w = output_width(t->cells[r * t->n_cols + c]);
                        if (w > width[c])
                                width[c] = w;
                }
        for (size_t r = 0; r < t->rows; r++) {
                for (size_t c = 0; c < t->n_cols; c++) {
                        const char *cell = t->cells[r * t->n_cols + c];
                        size_t pad = width[c] - output_width(cell);
                        bool last = c + 1 == t->n_cols;

                        if (c > 0)
                                fputs("  ", f);
                        if (t->right[c])
                                fprintf(f, "%*s", (int)pad, "");
                        fputs(cell, f);
                        if (!t->right[c] && !last)
                                fprintf(f, "%*s", (int)pad, "");
                }
                fputc('\n', f);
        }
        free(width);
        return ferror(f) ? -EIO : 0;
}

void output_table_free(struct output_table *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->rows * t->n_cols; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t->right);
        free(t);
}

const char *output_log_time(int64_t ms, char *buf, size_t len)
{
        struct tm tm;
        time_t t = (time_t)(ms / 1000);
        char day[24];
        if (ms <= 0 || !localtime_r(&t, &tm) || strftime(day, sizeof day, "%b %d %H:%M:%S", &tm) == 0)
                snprintf(buf, len, "-");
        else
                snprintf(buf, len, "%s.%03d", day, (int)(ms % 1000));
        return buf;
}

const char *output_log_time_iso(int64_t ms, char *buf, size_t len)
{
        struct tm tm;
        time_t t = (time_t)(ms / 1000);
        char day[32];
        if (ms <= 0 || !gmtime_r(&t, &tm) || strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
                snprintf(buf, len, "%s", "");
        else
                snprintf(buf, len, "%s.%03dZ", day, (int)(ms % 1000));
        return buf;
}

/* "YYYY-MM-DD[( |T)HH:MM[:SS[.mmm]]][Z]" as ms since the epoch. */
static int parse_date(const char *s, int64_t *out)
{
        struct tm tm = { 0 };
        int ms = 0, n = 0;
        char sep = 0;
        if (sscanf(s, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &n) != 3 || n != 10)
                return -EINVAL;
        s += n;
        if (*s == ' ' || *s == 'T') {
                sep = *s++;
                if (sscanf(s, "%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &n) != 2 || n != 5)
                        return -EINVAL;
                s += n;
                if (*s == ':') {
                        if (sscanf(s, ":%2d%n", &tm.tm_sec, &n) != 1 || n != 3)
                                return -EINVAL;
                        s += n;
                        if (*s == '.') {
                                if (sscanf(s, ".%3d%n", &ms, &n) != 1 || n != 4)
                                        return -EINVAL;
                                s += n;
                        }
                }
        }
        bool utc = sep == 'T' && strcmp(s, "Z") == 0;
        if ((*s && !utc) || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
            tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 || tm.tm_year < 1970 || ms < 0)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        tm.tm_isdst = -1;
        time_t t = utc ? timegm(&tm) : mktime(&tm);
        if (t == (time_t)-1 || t < 0)
                return -EINVAL;
        *out = (int64_t)t * 1000 + ms;
        return 0;
}

int output_parse_since(const char *s, int64_t now_ms, int64_t *out)
{
        char d[32];
        size_t len = strlen(s);
        uint64_t ago;
        if (parse_date(s, out) == 0)
                return 0;
        /* A duration ago: "5min", "-5min", "5min ago". */
        if (*s == '-')
                s++, len--;
        else if (len > 4 && strcmp(s + len - 4, " ago") == 0)
                len -= 4;
        if (len == 0 || len >= sizeof d)
                return -EINVAL;
        memcpy(d, s, len);
        d[len] = '\0';
        if (policy_parse_duration(d, &ago) < 0 || ago > (uint64_t)now_ms)
                return -EINVAL;
        *out = now_ms - (int64_t)ago;
        return 0;
}
