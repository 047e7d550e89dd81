/* errors: what a policy file's reading reports, by file and line: errors
 * (the file is refused), warnings (it loads), values quoted and secrets'
 * values redacted in both. */
#include "keys.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_MAX_ERRORS 100

/* Appends one formatted message to errs (which may be NULL). */
static int policy_errors_vadd(struct policy_errors *errs, const char *prefix, const char *fmt,
                              va_list ap) __attribute__((format(printf, 3, 0)));

static int policy_errors_vadd(struct policy_errors *errs, const char *prefix, const char *fmt,
                              va_list ap)
{
        char *msg = NULL, *full = NULL;
        int r = -ENOMEM;

        if (!errs)
                return 0;
        if (vasprintf(&msg, fmt, ap) < 0) {
                msg = NULL;
                goto out;
        }
        if (asprintf(&full, "%s%s", prefix, msg) < 0) {
                full = NULL;
                goto out;
        }
        r = policy_strv_push(&errs->msgs, &errs->n, full);
        if (r == 0)
                full = NULL;
out:
        free(msg);
        free(full);
        return r;
}

int policy_errors_add(struct policy_errors *errs, const char *prefix, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        int r = policy_errors_vadd(errs, prefix, fmt, ap);
        va_end(ap);
        return r;
}

void policy_oom(struct policy_ctx *c)
{
        c->oom = true;
        c->stop = true;
}

/* vsnprintf for POLICY_REDACT: numbers (line numbers, limits) are kept,
 * every string and character argument — text of the file — becomes
 * "[...]". Knows the conversions policy messages use. */
static void policy_vredact(char *buf, size_t size, const char *fmt, va_list ap)
{
        size_t o = 0;
        char num[32];

        for (const char *f = fmt; *f && o + 1 < size; f++) {
                const char *add = num;
                if (*f != '%') {
                        buf[o++] = *f;
                        continue;
                }
                f++;
                while (*f && strchr("-+ #0123456789.*", *f)) {
                        if (*f == '*')
                                (void)va_arg(ap, int);
                        f++;
                }
                int longs = 0;
                bool size_t_arg = false;
                for (; *f == 'l' || *f == 'h' || *f == 'z'; f++) {
                        longs += *f == 'l';
                        size_t_arg = size_t_arg || *f == 'z';
                }
                switch (*f) {
                case '%': add = "%"; break;
                case 's': (void)va_arg(ap, const char *); add = "[...]"; break;
                case 'c': (void)va_arg(ap, int); add = "[...]"; break;
                case 'd': case 'i':
                        if (longs >= 2)
                                snprintf(num, sizeof num, "%lld", va_arg(ap, long long));
                        else if (longs || size_t_arg)
                                snprintf(num, sizeof num, "%ld", va_arg(ap, long));
                        else
                                snprintf(num, sizeof num, "%d", va_arg(ap, int));
                        break;
                case 'u': case 'x':
                        if (longs >= 2)
                                snprintf(num, sizeof num, "%llu", va_arg(ap, unsigned long long));
                        else if (longs || size_t_arg)
                                snprintf(num, sizeof num, "%lu", va_arg(ap, unsigned long));
                        else
                                snprintf(num, sizeof num, "%u", va_arg(ap, unsigned));
                        break;
                default: add = "[...]"; f = *f ? f : f - 1; break;
                }
                size_t n = strlen(add);
                if (o + n >= size)
                        break;
                memcpy(buf + o, add, n);
                o += n;
        }
        buf[o] = '\0';
}

void policy_warn(struct policy_ctx *c, const char *fmt, ...)
{
        char prefix[64 + 4096];
        struct policy_errors w = { .msgs = c->p->warnings, .n = c->p->n_warnings };
        va_list ap;

        snprintf(prefix, sizeof(prefix), "%s:%u: warning: ", c->name, c->line);
        va_start(ap, fmt);
        if (policy_errors_vadd(&w, prefix, fmt, ap) < 0)
                policy_oom(c);
        va_end(ap);
        c->p->warnings = w.msgs;
        c->p->n_warnings = w.n;
}

void policy_err(struct policy_ctx *c, const char *fmt, ...)
{
        char prefix[64 + 4096];
        va_list ap;

        if (c->stop)
                return;
        snprintf(prefix, sizeof(prefix), "%s:%u: ", c->name, c->line);
        if (++c->n_errors > POLICY_MAX_ERRORS) {
                if (policy_errors_add(c->errs, prefix, "too many errors, giving up") < 0)
                        policy_oom(c);
                c->stop = true;
                return;
        }
        va_start(ap, fmt);
        if (c->redact) {
                char msg[512];
                policy_vredact(msg, sizeof msg, fmt, ap);
                if (policy_errors_add(c->errs, prefix, "%s", msg) < 0)
                        policy_oom(c);
        } else if (policy_errors_vadd(c->errs, prefix, fmt, ap) < 0) {
                policy_oom(c);
        }
        va_end(ap);
}

const char *policy_quote(char *buf, size_t size, const char *s)
{
        size_t o = 0;

        buf[o++] = '"';
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                char e[5];

                if (ch == '"' || ch == '\\')
                        snprintf(e, sizeof(e), "\\%c", ch);
                else if (ch < 0x20 || ch >= 0x7f)
                        snprintf(e, sizeof(e), "\\x%02x", ch);
                else
                        snprintf(e, sizeof(e), "%c", ch);
                /* Leave room for this, then `..."` and the NUL. */
                if (o + strlen(e) + 5 > size) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                memcpy(buf + o, e, strlen(e));
                o += strlen(e);
        }
        buf[o++] = '"';
        buf[o] = '\0';
        return buf;
}

void policy_errors_clear(struct policy_errors *errs)
{
        if (!errs)
                return;
        policy_strv_free(errs->msgs);
        errs->msgs = NULL;
        errs->n = 0;
}
