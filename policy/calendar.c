/* calendar: parsing and normalizing systemd.time(7) calendar events. The
 * search for the next time is in calendar_next.c. */
#include "calendar.h"
#include "calendar_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CAL_WORDS_MAX 4 /* weekdays, date, time, UTC */

static const char *const cal_part_names[CAL_N] = { "year", "month", "day", "hour", "minute", "second" };
static const int cal_min[CAL_N] = { 1970, 1, 1, 0, 0, 0 };
static const int cal_max[CAL_N] = { CAL_YEAR_MAX, 12, 31, 23, 59, 59 };

static const char *const cal_days[7] = { "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
                                         "Saturday", "Sunday" };

/* The shorthands, as the text they stand for (systemd.time(7)). */
static const struct {
        const char *name, *text;
} cal_shorthands[] = {
        { "minutely", "*-*-* *:*:00" },
        { "hourly", "*-*-* *:00:00" },
        { "daily", "*-*-* 00:00:00" },
        { "weekly", "Mon *-*-* 00:00:00" },
        { "monthly", "*-*-01 00:00:00" },
        { "yearly", "*-01-01 00:00:00" },
        { "annually", "*-01-01 00:00:00" },
        { "quarterly", "*-01,04,07,10-01 00:00:00" },
        { "semiannually", "*-01,07-01 00:00:00" },
};

struct cal_parser {
        char *err;
        size_t len;
        bool from_end; /* the day part being read counts from the month's end (MONTH~DAY) */
};

/* The largest value of part which; a day counted from the end is at most
 * 28, so that it is in every month (systemd's bound). */
static int cal_part_max(const struct cal_parser *p, int which)
{
        return which == CAL_DAY && p->from_end ? 28 : cal_max[which];
}

/* Writes why the parse failed into the caller's buffer; returns -EINVAL. */
static int __attribute__((format(printf, 2, 3))) cal_fail(struct cal_parser *p, const char *fmt, ...)
{
        va_list ap;

        if (p->err && p->len > 0) {
                va_start(ap, fmt);
                vsnprintf(p->err, p->len, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

void calendar_free(struct calendar *c)
{
        if (!c)
                return;
        for (int i = 0; i < CAL_N; i++)
                free(c->part[i].items);
        free(c);
}

/* A decimal number of at most 9 digits taking all of s into *v. */
static bool cal_number(const char *s, size_t n, int *v)
{
        int x = 0;

        if (n == 0 || n > 9)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return false;
                x = x * 10 + (s[i] - '0');
        }
        *v = x;
        return true;
}

/* Two-digit years as systemd reads them: 0..69 are 2000..2069, 70..99 the 1900s. */
static int cal_fix_year(int y)
{
        if (y < 70)
                return y + 2000;
        if (y < 100)
                return y + 1900;
        return y;
}

/* One value of part `which`, checked against its range. */
static int cal_value(struct cal_parser *p, int which, const char *s, size_t n, int *v)
{
        if (memchr(s, '~', n))
                return cal_fail(p, "\"~\" goes only between the month and the day (MONTH~DAY: the DAYth last day)");
        if (which == CAL_SECOND && memchr(s, '.', n))
                return cal_fail(p, "fractions of a second are not supported");
        if (memchr(s, '*', n))
                return cal_fail(p, "\"*\" stands alone: it cannot be part of a list, range or repetition");
        if (!cal_number(s, n, v))
                return cal_fail(p, "%s \"%.*s\" is not a number", cal_part_names[which], (int)n, s);
        if (which == CAL_YEAR)
                *v = cal_fix_year(*v);
        if (*v < cal_min[which] || *v > cal_part_max(p, which))
                return cal_fail(p, "%s %s%d is out of range (%d..%d)", cal_part_names[which], p->from_end ? "~" : "",
                                *v, cal_min[which], cal_part_max(p, which));
        return 0;
}

/* A range as systemd writes it: ending on its last match, "/1" left out,
 * a range of one value that value. The same times match. */
static void cal_item_normalize(struct cal_item *it)
{
        if (it->repeat > 0)
                it->stop = it->start + (it->stop - it->start) / it->repeat * it->repeat;
        if (it->stop == it->start) {
                it->stop = -1;
                it->repeat = 0;
        } else if (it->repeat == 1) {
                it->repeat = 0;
        }
}

/* One list item: VALUE, VALUE..VALUE, with an optional /REPEAT. */
static int cal_item(struct cal_parser *p, int which, const char *s, size_t n, struct cal_item *it)
{
        const char *slash = memchr(s, '/', n), *dots;
        size_t vn = slash ? (size_t)(slash - s) : n;
        int r;

        it->stop = -1;
        it->repeat = 0;
        if (slash) {
                const char *rs = slash + 1;
                size_t rn = n - vn - 1;

                if (!cal_number(rs, rn, &it->repeat) || it->repeat < 1)
                        return cal_fail(p, "%s repetition \"/%.*s\" is not a number above 0", cal_part_names[which],
                                        (int)rn, rs);
        }
        dots = vn >= 2 ? memmem(s, vn, "..", 2) : NULL;
        if (!dots) {
                r = cal_value(p, which, s, vn, &it->start);
                /* ~S/R runs from the Sth last day to the month's end; systemd
                 * takes it only with R below S */
                if (r == 0 && p->from_end && it->repeat >= it->start)
                        return cal_fail(p, "day repetition ~%d/%d: the repetition must be below %d", it->start,
                                        it->repeat, it->start);
                if (r == 0 && !p->from_end && it->repeat > cal_max[which] - it->start)
                        return cal_fail(p, "%s repetition %d/%d goes past %d", cal_part_names[which], it->start,
                                        it->repeat, cal_max[which]);
                return r;
        }
        r = cal_value(p, which, s, (size_t)(dots - s), &it->start);
        if (r < 0)
                return r;
        r = cal_value(p, which, dots + 2, vn - (size_t)(dots - s) - 2, &it->stop);
        if (r < 0)
                return r;
        if (it->stop < it->start)
                return cal_fail(p, "%s range %s%d..%d goes backwards", cal_part_names[which], p->from_end ? "~" : "",
                                it->start, it->stop);
        cal_item_normalize(it);
        return 0;
}

static int cal_item_cmp(const void *a, const void *b)
{
        const struct cal_item *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        if (x->stop != y->stop)
                return x->stop < y->stop ? -1 : 1;
        if (x->repeat != y->repeat)
                return x->repeat < y->repeat ? -1 : 1;
        return 0;
}

/* One part: "*" or a list; sorted and without repeated items, as systemd
 * normalizes it. */
static int cal_part(struct cal_parser *p, int which, const char *s, size_t n, struct cal_part *out)
{
        struct cal_item items[CALENDAR_ITEMS_MAX];
        size_t k = 0, m = 0;
        int r;

        if (n == 1 && s[0] == '*')
                return 0;
        for (size_t i = 0; i <= n; k++) {
                const char *comma = memchr(s + i, ',', n - i);
                size_t e = comma ? (size_t)(comma - s) : n;

                if (k == CALENDAR_ITEMS_MAX)
                        return cal_fail(p, "the %s list has more than %d items", cal_part_names[which],
                                        CALENDAR_ITEMS_MAX);
                if (e == i)
                        return cal_fail(p, "an empty item in the %s list", cal_part_names[which]);
                r = cal_item(p, which, s + i, e - i, &items[k]);
                if (r < 0)
                        return r;
                i = e + 1;
        }
        qsort(items, k, sizeof(items[0]), cal_item_cmp);
        out->items = calloc(k, sizeof(items[0]));
        if (!out->items)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                if (m > 0 && cal_item_cmp(&out->items[m - 1], &items[i]) == 0)
                        continue;
                out->items[m++] = items[i];
        }
        out->n = m;
        return 0;
}

/* A weekday name (full or its first three letters, any case) into 0..6 (Monday 0). */
static int cal_weekday(const char *s, size_t n)
{
        for (int d = 0; d < 7; d++) {
                if ((n == 3 || n == strlen(cal_days[d])) && strncasecmp(s, cal_days[d], n) == 0)
                        return d;
        }
        return -1;
}

/* The weekday list: names and ranges "Mon..Fri" (or "Mon-Fri"), into a bit set. */
static int cal_weekdays(struct cal_parser *p, const char *s, uint8_t *bits)
{
        size_t n = strlen(s), k = 0;

        for (size_t i = 0; i <= n; k++) {
                const char *comma = memchr(s + i, ',', n - i);
                size_t e = comma ? (size_t)(comma - s) : n, sep = e, skip = 0;
                int a, b;

                if (k == CALENDAR_ITEMS_MAX)
                        return cal_fail(p, "the weekday list has more than %d items", CALENDAR_ITEMS_MAX);
                if (e == i)
                        return cal_fail(p, "an empty item in the weekday list");
                for (size_t j = i; j < e; j++) {
                        if (s[j] == '-' || (s[j] == '.' && j + 1 < e && s[j + 1] == '.')) {
                                sep = j;
                                skip = s[j] == '-' ? 1 : 2;
                                break;
                        }
                }
                a = cal_weekday(s + i, sep - i);
                b = skip ? cal_weekday(s + sep + skip, e - sep - skip) : a;
                if (a < 0 || b < 0)
                        return cal_fail(p, "\"%.*s\" is not a weekday (Mon..Sun, or the full name)", (int)(e - i),
                                        s + i);
                if (b < a)
                        return cal_fail(p, "weekday range \"%.*s\" goes backwards (weeks start on Monday)",
                                        (int)(e - i), s + i);
                for (int d = a; d <= b; d++)
                        *bits |= (uint8_t)(1u << d);
                i = e + 1;
        }
        return 0;
}

/* Parts separated by sep into c->part[first...]: want of them, or want - 1
 * with the first one "*" (a date without its year) or the last 00 (a time
 * without seconds). */
static int cal_parts(struct cal_parser *p, const char *text, char sep, int first, struct calendar *c)
{
        const char *at[3], *tilde = sep == '-' ? strchr(text, '~') : NULL;
        size_t len[3], k = 0, n = strlen(text);
        const char *what = sep == '-' ? "date" : "time";
        char s[CALENDAR_TEXT_MAX + 1];
        int r;

        memcpy(s, text, n + 1);
        /* MONTH~DAY: read as MONTH-DAY, the day counted from the end */
        if (tilde) {
                size_t dashes = 0;

                for (const char *d = text; d < tilde; d++)
                        dashes += *d == '-';
                if (dashes > 1 || strchr(tilde, '-') || strchr(tilde + 1, '~'))
                        return cal_fail(p, "\"~\" goes only between the month and the day (MONTH~DAY: the DAYth "
                                        "last day)");
                s[tilde - text] = '-';
        }

        for (size_t i = 0; i <= n; k++) {
                const char *e = memchr(s + i, sep, n - i);
                size_t end = e ? (size_t)(e - s) : n;

                if (k == 3)
                        return cal_fail(p, "the %s has more than three parts", what);
                at[k] = s + i;
                len[k] = end - i;
                i = end + 1;
        }
        if (k < 2)
                return cal_fail(p, "the %s has fewer than two parts", what);
        for (size_t i = 0; i < k; i++) {
                /* "MONTH-DAY" fills month and day, "HOUR:MINUTE" hour and minute */
                int which = first + (int)i + (sep == '-' && k == 2 ? 1 : 0);

                p->from_end = tilde && which == CAL_DAY;
                r = cal_part(p, which, at[i], len[i], &c->part[which]);
                p->from_end = false;
                if (r < 0)
                        return r;
        }
        /* "~*" is every day, as systemd has it */
        if (sep == '-')
                c->end_of_month = tilde && c->part[CAL_DAY].n > 0;
        if (sep == ':' && k == 2)
                return cal_part(p, CAL_SECOND, "0", 1, &c->part[CAL_SECOND]);
        return 0;
}

/* The words of text, without a trailing UTC: weekdays, date, time. */
static int cal_words(struct cal_parser *p, char **w, size_t n, struct calendar *c)
{
        size_t i = 0;
        bool time = false;
        int r = 0;

        if (isalpha((unsigned char)w[0][0])) {
                r = cal_weekdays(p, w[0], &c->weekdays);
                if (r < 0)
                        return r;
                i++;
        }
        if (i < n && !strchr(w[i], ':')) {
                if (!strchr(w[i], '-') && !strchr(w[i], '~'))
                        return cal_fail(p, "\"%s\" is neither a date (YEAR-MONTH-DAY) nor a time (HOUR:MINUTE)", w[i]);
                r = cal_parts(p, w[i++], '-', CAL_YEAR, c);
                if (r < 0)
                        return r;
        }
        if (i < n) {
                r = cal_parts(p, w[i++], ':', CAL_HOUR, c);
                if (r < 0)
                        return r;
                time = true;
        }
        if (i < n)
                return cal_fail(p, "\"%s\" is unexpected after the %s", w[i], time ? "time" : "date");
        /* a missing date is "*-*-*" (its parts left empty), a missing time 00:00:00 */
        if (!time) {
                for (int k = CAL_HOUR; k < CAL_N && r >= 0; k++)
                        r = cal_part(p, k, "0", 1, &c->part[k]);
        }
        return r < 0 ? r : 0;
}

/* Splits buf at blanks into at most CAL_WORDS_MAX + 1 words. */
static size_t cal_split(char *buf, char **w)
{
        size_t n = 0;

        for (char *s = strtok(buf, " \t"); s && n <= CAL_WORDS_MAX; s = strtok(NULL, " \t"))
                w[n++] = s;
        return n;
}

int calendar_parse(const char *text, struct calendar **out, char *err, size_t len)
{
        struct cal_parser p = { err, len, false };
        char buf[CALENDAR_TEXT_MAX + 1], *w[CAL_WORDS_MAX + 1];
        size_t tl = strlen(text), n;
        struct calendar *c = NULL;
        bool utc = false;
        int r;

        if (tl > CALENDAR_TEXT_MAX)
                return cal_fail(&p, "longer than %d bytes", CALENDAR_TEXT_MAX);
        for (size_t i = 0; i < tl; i++) {
                if (!isprint((unsigned char)text[i]) && text[i] != '\t')
                        return cal_fail(&p, "a control character or a byte outside ASCII");
        }
        memcpy(buf, text, tl + 1);
        n = cal_split(buf, w);
        if (n == 0)
                return cal_fail(&p, "empty");
        if (n > CAL_WORDS_MAX)
                return cal_fail(&p, "more than weekdays, a date, a time and UTC");
        if (n > 1 && isalpha((unsigned char)w[n - 1][0])) {
                if (strcasecmp(w[n - 1], "UTC") != 0)
                        return cal_fail(&p, "time zone \"%s\": only UTC is supported (or none: local time)", w[n - 1]);
                utc = true;
                n--;
        }
        for (size_t i = 0; n == 1 && i < sizeof(cal_shorthands) / sizeof(cal_shorthands[0]); i++) {
                if (strcasecmp(w[0], cal_shorthands[i].name) == 0) {
                        strcpy(buf, cal_shorthands[i].text);
                        n = cal_split(buf, w);
                        break;
                }
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->utc = utc;
        r = cal_words(&p, w, n, c);
        if (r < 0) {
                calendar_free(c);
                return r;
        }
        *out = c;
        return 0;
}

/* Appends to out at *pos; -ENOBUFS once it does not fit. */
static int __attribute__((format(printf, 4, 5))) cal_put(char *out, size_t len, size_t *pos, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (*pos >= len)
                return -ENOBUFS;
        va_start(ap, fmt);
        n = vsnprintf(out + *pos, len - *pos, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= len - *pos)
                return -ENOBUFS;
        *pos += (size_t)n;
        return 0;
}

/* Weekdays as systemd prints them: runs of three or more as "A..B". */
static int cal_format_weekdays(uint8_t bits, char *out, size_t len, size_t *pos)
{
        bool first = true;
        int r = 0;

        for (int d = 0; d < 7 && r >= 0; d++) {
                int e = d;

                if (!(bits & (1u << d)))
                        continue;
                while (e + 1 < 7 && (bits & (1u << (e + 1))))
                        e++;
                if (e - d >= 2) {
                        r = cal_put(out, len, pos, "%s%.3s..%.3s", first ? "" : ",", cal_days[d], cal_days[e]);
                        d = e;
                } else {
                        r = cal_put(out, len, pos, "%s%.3s", first ? "" : ",", cal_days[d]);
                }
                first = false;
        }
        return r < 0 ? r : cal_put(out, len, pos, " ");
}

static int cal_format_part(const struct cal_part *pt, int width, char *out, size_t len, size_t *pos)
{
        int r = 0;

        if (pt->n == 0)
                return cal_put(out, len, pos, "*");
        for (size_t i = 0; i < pt->n && r >= 0; i++) {
                const struct cal_item *it = &pt->items[i];

                r = cal_put(out, len, pos, "%s%0*d", i ? "," : "", width, it->start);
                if (r >= 0 && it->stop >= 0)
                        r = cal_put(out, len, pos, "..%0*d", width, it->stop);
                if (r >= 0 && it->repeat > 0)
                        r = cal_put(out, len, pos, "/%d", it->repeat);
        }
        return r;
}

int calendar_format(const struct calendar *c, char *out, size_t len)
{
        const char seps[CAL_N] = { '-', c->end_of_month ? '~' : '-', ' ', ':', ':', 0 };
        size_t pos = 0;
        int r = 0;

        if (len > 0)
                out[0] = '\0';
        if (c->weekdays && c->weekdays != 0x7f) /* every day: systemd leaves them out */
                r = cal_format_weekdays(c->weekdays, out, len, &pos);
        for (int i = 0; i < CAL_N && r >= 0; i++) {
                r = cal_format_part(&c->part[i], i == CAL_YEAR ? 4 : 2, out, len, &pos);
                if (r >= 0 && seps[i])
                        r = cal_put(out, len, &pos, "%c", seps[i]);
        }
        if (r >= 0 && c->utc)
                r = cal_put(out, len, &pos, " UTC");
        return r;
}
