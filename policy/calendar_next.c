/* calendar_next: the next time a calendar event matches. The search walks
 * the wall clock field by field from the year down, jumping each field to
 * its next matching value (never second by second); only a candidate that
 * matches every field is turned into a time, which is where DST is handled. */
#include "calendar.h"
#include "calendar_int.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <time.h>

#define CAL_SEARCH_YEARS 1000
/* Each step moves the wall clock forward by at least one unit of a field;
 * the years bound ends any search long before this does. */
#define CAL_STEPS_MAX 1000000

/* The smallest value >= v that item matches, or -1; max is the part's largest value. */
static int cal_item_next(const struct cal_item *it, int v, int max)
{
        int hi = it->stop >= 0 ? it->stop : it->repeat ? max : it->start;
        int k;

        if (v <= it->start)
                return it->start;
        if (v > hi)
                return -1;
        if (!it->repeat)
                return v;
        k = (v - it->start + it->repeat - 1) / it->repeat;
        v = it->start + k * it->repeat;
        return v <= hi ? v : -1;
}

/* The smallest value >= v that the part matches, or -1. */
static int cal_part_next(const struct cal_part *pt, int v, int max)
{
        int best = -1;

        if (pt->n == 0)
                return v <= max ? v : -1;
        for (size_t i = 0; i < pt->n; i++) {
                int x = cal_item_next(&pt->items[i], v, max);

                if (x >= 0 && x <= max && (best < 0 || x < best))
                        best = x;
        }
        return best;
}

/* The same for days counted from the end of a month of dim days
 * (MONTH~DAY): ~S is day dim - S + 1; ~S/R runs from there to the month's
 * end, ~S..T/R from ~T up to ~S (the stop written is the earlier day). */
static int cal_day_from_end_next(const struct cal_part *pt, int v, int dim)
{
        int best = -1;

        for (size_t i = 0; i < pt->n; i++) {
                const struct cal_item *it = &pt->items[i];
                struct cal_item d = { dim - it->start + 1, -1, it->repeat };
                int x;

                if (it->stop >= 0) {
                        d.stop = d.start;
                        d.start = dim - it->stop + 1;
                }
                x = cal_item_next(&d, v, dim);
                if (x >= 0 && x <= dim && (best < 0 || x < best))
                        best = x;
        }
        return best;
}

/* Carries overflowing fields (a 32nd day, a 60th minute) into the next
 * ones as plain calendar arithmetic, without time zones; false if the date
 * is beyond what time_t holds. */
static bool cal_carry(struct tm *c)
{
        struct tm t = *c;

        t.tm_isdst = 0;
        if (timegm(&t) == (time_t)-1 && t.tm_year != 69)
                return false;
        *c = t;
        return true;
}

static bool cal_same_wall(const struct tm *a, const struct tm *b)
{
        return a->tm_year == b->tm_year && a->tm_mon == b->tm_mon && a->tm_mday == b->tm_mday &&
               a->tm_hour == b->tm_hour && a->tm_min == b->tm_min && a->tm_sec == b->tm_sec;
}

/* The wall clock time c as seconds since the epoch: the earliest of its
 * occurrences after `after` (a local time happens twice in a DST overlap).
 * 1 with *t set, 0 if it happens only at or before after, -1 if it does not
 * happen at all (a DST gap). */
static int cal_resolve(const struct tm *c, bool utc, time_t after, time_t *t)
{
        static const int isdst[] = { -1, 0, 1 };
        bool exists = false, found = false;

        if (utc) {
                struct tm u = *c;

                *t = timegm(&u);
                return *t > after ? 1 : 0;
        }
        for (size_t i = 0; i < sizeof(isdst) / sizeof(isdst[0]); i++) {
                struct tm l = *c;
                time_t x;

                l.tm_isdst = isdst[i];
                x = mktime(&l);
                if (!cal_same_wall(&l, c))
                        continue;
                exists = true;
                if (x > after && (!found || x < *t)) {
                        *t = x;
                        found = true;
                }
        }
        return found ? 1 : exists ? 0 : -1;
}

/* Resets the fields below `from` (a CAL_ part) to their smallest values. */
static void cal_reset(struct tm *c, int from)
{
        if (from <= CAL_MONTH)
                c->tm_mon = 0;
        if (from <= CAL_DAY)
                c->tm_mday = 1;
        if (from <= CAL_HOUR)
                c->tm_hour = 0;
        if (from <= CAL_MINUTE)
                c->tm_min = 0;
        if (from <= CAL_SECOND)
                c->tm_sec = 0;
}

static int cal_days_in_month(int year, int mon)
{
        static const int days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

        return mon == 1 && leap ? 29 : days[mon];
}

/* Monday 0 .. Sunday 6 of a date (tm_wday counts from Sunday). */
static int cal_weekday_of(const struct tm *c)
{
        struct tm t = *c;

        t.tm_isdst = 0;
        timegm(&t);
        return (t.tm_wday + 6) % 7;
}

/* One step of the search on c: 1 if c matches every field, 0 if c moved
 * forward (to try again), -ENOENT past the last year. */
static int cal_step(const struct calendar *cal, struct tm *c, int last_year)
{
        int *field[CAL_N] = { &c->tm_year, &c->tm_mon, &c->tm_mday, &c->tm_hour, &c->tm_min, &c->tm_sec };
        static const int offset[CAL_N] = { 1900, 1, 0, 0, 0, 0 };
        static const int max[CAL_N] = { CAL_YEAR_MAX, 12, 31, 23, 59, 59 };

        for (int i = 0; i < CAL_N; i++) {
                int cur = *field[i] + offset[i], v;

                if (i == CAL_DAY && cal->end_of_month)
                        v = cal_day_from_end_next(&cal->part[i], cur, cal_days_in_month(c->tm_year + 1900, c->tm_mon));
                else
                        v = cal_part_next(&cal->part[i], cur, i == CAL_YEAR ? last_year : max[i]);
                if (i == CAL_DAY && v > cal_days_in_month(c->tm_year + 1900, c->tm_mon))
                        v = -1;
                if (v < 0) {
                        if (i == CAL_YEAR)
                                return -ENOENT;
                        /* nothing left in this field: the next value of the one above */
                        (*field[i - 1])++;
                        cal_reset(c, i);
                        return 0;
                }
                if (v != cur) {
                        *field[i] = v - offset[i];
                        cal_reset(c, i + 1);
                        return 0;
                }
                if (i == CAL_DAY && cal->weekdays && !(cal->weekdays & (1u << cal_weekday_of(c)))) {
                        c->tm_mday++;
                        cal_reset(c, CAL_HOUR);
                        return 0;
                }
        }
        return 1;
}

int calendar_next(const struct calendar *cal, int64_t after, int64_t *next)
{
        time_t start, t = 0;
        struct tm c;
        int last_year;

        if (after < (int64_t)0 - ((int64_t)1 << 40) || after > ((int64_t)1 << 40))
                return -ERANGE;
        start = (time_t)after + 1;
        if (!(cal->utc ? gmtime_r(&start, &c) : localtime_r(&start, &c)))
                return -ERANGE;
        last_year = c.tm_year + 1900 + CAL_SEARCH_YEARS;
        if (last_year > CAL_YEAR_MAX)
                last_year = CAL_YEAR_MAX;
        for (unsigned n = 0; n < CAL_STEPS_MAX; n++) {
                int r;

                if (!cal_carry(&c))
                        return -ENOENT;
                r = cal_step(cal, &c, last_year);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                r = cal_resolve(&c, cal->utc, (time_t)after, &t);
                if (r > 0) {
                        *next = (int64_t)t;
                        return 0;
                }
                if (r == 0) {
                        /* only before after (the first pass of an overlap): the next second */
                        c.tm_sec++;
                } else {
                        /* in a DST gap, which starts and ends on a whole minute */
                        c.tm_min++;
                        c.tm_sec = 0;
                }
        }
        return -ENOENT;
}
