/* test_calendar: Schedule='s calendar events (policy/calendar.c): the
 * normalized form, refused texts and their reasons, next times in UTC and
 * across DST changes of a local zone. tests/unit/test_calendar_oracle.c
 * compares the next times with systemd-analyze's. */
#include "calendar.h"
#include "tap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds since the epoch of a UTC time "YYYY-MM-DD HH:MM:SS". */
static int64_t utc(const char *s)
{
        struct tm t = { 0 };

        if (sscanf(s, "%d-%d-%d %d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min,
                   &t.tm_sec) != 6)
                abort();
        t.tm_year -= 1900;
        t.tm_mon--;
        return (int64_t)timegm(&t);
}

/* text parses and prints as want. */
static void check_format(const char *text, const char *want)
{
        struct calendar *c = NULL;
        char err[256] = "", out[CALENDAR_FORMAT_MAX] = "";
        int r = calendar_parse(text, &c, err, sizeof(err));

        CHECK(r == 0, "\"%s\" parses (%s)", text, err);
        if (r == 0)
                CHECK(calendar_format(c, out, sizeof(out)) == 0, "\"%s\" formats", text);
        CHECK_STR(out, want, "\"%s\" normalizes to \"%s\"", text, want);
        calendar_free(c);
}

/* text is refused with a reason that contains why. */
static void check_refused(const char *text, const char *why)
{
        struct calendar *c = (struct calendar *)&c;
        char err[256] = "";
        int r = calendar_parse(text, &c, err, sizeof(err));

        CHECK(r == -EINVAL && strstr(err, why) && c == (struct calendar *)&c, "\"%s\" refused: %s", text, err);
        if (r == 0)
                calendar_free(c);
}

/* In the zone TZ is set to, the times after `from` (UTC) are want[0..n). */
static void check_next(const char *text, const char *from, const char *const *want, size_t n)
{
        struct calendar *c = NULL;
        char err[256] = "";
        int64_t t = utc(from), next = 0;
        size_t i;

        if (calendar_parse(text, &c, err, sizeof(err)) < 0) {
                CHECK(0, "\"%s\" parses (%s)", text, err);
                return;
        }
        for (i = 0; i < n; i++) {
                if (calendar_next(c, t, &next) < 0 || next != utc(want[i]))
                        break;
                t = next;
        }
        CHECK(i == n, "\"%s\" (TZ=%s) after %s: %zu of %zu times right (got %lld at the first wrong)", text,
              getenv("TZ"), from, i, n, (long long)next);
        calendar_free(c);
}

#define NEXT(text, from, ...)                                                             \
        do {                                                                              \
                static const char *const w_[] = { __VA_ARGS__ };                          \
                check_next(text, from, w_, sizeof(w_) / sizeof(w_[0]));                   \
        } while (0)

static void set_tz(const char *tz)
{
        setenv("TZ", tz, 1);
        tzset();
}

static void test_format(void)
{
        check_format("daily", "*-*-* 00:00:00");
        check_format("weekly", "Mon *-*-* 00:00:00");
        check_format("quarterly", "*-01,04,07,10-01 00:00:00");
        check_format("semiannually", "*-01,07-01 00:00:00");
        check_format("annually", "*-01-01 00:00:00");
        check_format("minutely UTC", "*-*-* *:*:00 UTC");
        check_format("Mon,Tue,Wed,Fri 12:00", "Mon..Wed,Fri *-*-* 12:00:00");
        check_format("Sat,Sun,Wed 2026-1..3-1/2 *:0/15:5", "Wed,Sat,Sun 2026-01..03-01/2 *:00/15:05");
        check_format("*-*-1,2,3,5..9/2", "*-*-01,02,03,05..09/2 00:00:00");
        check_format("mon-wed", "Mon..Wed *-*-* 00:00:00");
        check_format("friday,Mon", "Mon,Fri *-*-* 00:00:00");
        check_format("*:5,1,5", "*-*-* *:01,05:00");
        check_format("26-1-1", "2026-01-01 00:00:00");
        check_format("12-24 18:00:30 UTC", "*-12-24 18:00:30 UTC");
        /* ranges as systemd writes them: to their last match, without /1 */
        check_format("*:5..20/7", "*-*-* *:05..19/7:00");
        check_format("*:5..7/3,0..59/1", "*-*-* *:00..59,05:00");
        check_format("2199-12-31", "2199-12-31 00:00:00");
        check_format("Mon *-05~7/1", "Mon *-05~07/1 00:00:00");
        check_format("*~3..6/2", "*-*~03..05/2 00:00:00");
        check_format("*-*~*", "*-*-* 00:00:00");
}

static void test_refused(void)
{
        char long_text[CALENDAR_TEXT_MAX + 2];

        memset(long_text, '1', sizeof(long_text) - 1);
        long_text[sizeof(long_text) - 1] = '\0';
        check_refused(long_text, "longer than 190 bytes");
        check_refused("", "empty");
        check_refused("   ", "empty");
        check_refused("*-*-* 12:00 Europe/Berlin", "time zone \"Europe/Berlin\": only UTC");
        check_refused("*-*~29", "day ~29 is out of range (1..28)");
        check_refused("*-*~7..1", "day range ~7..1 goes backwards");
        check_refused("*-*~5/5", "day repetition ~5/5: the repetition must be below 5");
        check_refused("*-*-3~1", "\"~\" goes only between the month and the day");
        check_refused("12:00~1", "\"~\" goes only between the month and the day");
        check_refused("12:00:01.5", "fractions of a second");
        check_refused("*-13-1", "month 13 is out of range (1..12)");
        check_refused("*-*-0", "day 0 is out of range (1..31)");
        check_refused("24:00", "hour 24 is out of range (0..23)");
        check_refused("*:60", "minute 60 is out of range (0..59)");
        check_refused("Fri..Mon", "weekday range \"Fri..Mon\" goes backwards");
        check_refused("Mun 12:00", "\"Mun\" is not a weekday");
        check_refused("*/2:00", "\"*\" stands alone");
        check_refused("*:0/0", "minute repetition \"/0\" is not a number above 0");
        check_refused("5..3:00", "hour range 5..3 goes backwards");
        check_refused("*:x", "minute \"x\" is not a number");
        check_refused("*:5/55", "minute repetition 5/55 goes past 59");
        check_refused("2200-01-01", "year 2200 is out of range (1970..2199)");
        check_refused("Mon, Tue 12:00", "an empty item in the weekday list");
        check_refused("1,,2:00", "an empty item in the hour list");
        check_refused("12", "neither a date");
        check_refused("1:2:3:4", "the time has more than three parts");
        check_refused("12:00 12:00", "\"12:00\" is unexpected after the time");
        check_refused("Mon *-*-* 12:00 UTC x", "more than weekdays, a date, a time and UTC");
        check_refused("*:0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24",
                      "the minute list has more than 24 items");
        check_refused("12:00\x01", "a control character");
}

static void test_next_utc(void)
{
        set_tz("UTC");
        NEXT("daily", "2026-12-02 07:00:00", "2026-12-03 00:00:00", "2026-12-04 00:00:00");
        /* strictly after: a matching `after` is not returned */
        NEXT("*:0/15", "2026-12-02 07:15:00", "2026-12-02 07:30:00", "2026-12-02 07:45:00",
             "2026-12-02 08:00:00");
        NEXT("Mon..Fri 09:30", "2026-12-04 10:00:00", "2026-12-07 09:30:00", "2026-12-08 09:30:00");
        NEXT("*-*-31 12:00", "2026-01-31 12:00:00", "2026-03-31 12:00:00", "2026-05-31 12:00:00");
        NEXT("*-02-29", "2026-01-01 00:00:00", "2028-02-29 00:00:00", "2032-02-29 00:00:00");
        /* Friday the 13th */
        NEXT("Fri *-*-13 UTC", "2026-01-01 00:00:00", "2026-02-13 00:00:00", "2026-03-13 00:00:00",
             "2026-11-13 00:00:00");
        NEXT("2027-1..3-1/2 *:0/20:5", "2026-12-31 23:59:59", "2027-01-01 00:00:05", "2027-01-01 00:20:05");
        NEXT("*:*:0/20", "2026-12-31 23:59:50", "2027-01-01 00:00:00", "2027-01-01 00:00:20");
        NEXT("quarterly", "2026-10-01 00:00:00", "2027-01-01 00:00:00", "2027-04-01 00:00:00");
        /* days from the month's end: the last day; the last Monday of May */
        NEXT("*-*~1 12:00", "2028-01-31 12:00:00", "2028-02-29 12:00:00", "2028-03-31 12:00:00");
        NEXT("Mon *-05~07/1", "2026-01-01 00:00:00", "2026-05-25 00:00:00", "2027-05-31 00:00:00");
        NEXT("*-*~3..5/2", "2026-01-01 00:00:00", "2026-01-27 00:00:00", "2026-01-29 00:00:00",
             "2026-02-24 00:00:00");
}

/* Europe/Berlin: 2026-03-29 02:00 CET becomes 03:00 CEST (the gap);
 * 2026-10-25 03:00 CEST becomes 02:00 CET (02:00..02:59 twice). */
static void test_next_dst(void)
{
        set_tz("Europe/Berlin");
        /* a time in the gap does not happen that day */
        NEXT("*-*-* 02:30", "2026-03-28 00:00:00", "2026-03-28 01:30:00", "2026-03-30 00:30:00");
        NEXT("*-*-* 2,3:30", "2026-03-28 23:50:00", "2026-03-29 01:30:00", "2026-03-30 00:30:00");
        NEXT("*:0/15", "2026-03-29 00:45:00", "2026-03-29 01:00:00", "2026-03-29 01:15:00");
        /* in the overlap, the first occurrence only */
        NEXT("*-*-* 02:30", "2026-10-24 12:00:00", "2026-10-25 00:30:00", "2026-10-26 01:30:00");
        NEXT("*:0/30", "2026-10-24 23:50:00", "2026-10-25 00:00:00", "2026-10-25 00:30:00",
             "2026-10-25 02:00:00");
        /* ... unless the search starts in the second pass */
        NEXT("*:0/30", "2026-10-25 01:10:00", "2026-10-25 01:30:00", "2026-10-25 02:00:00");
        NEXT("daily UTC", "2026-03-28 23:30:00", "2026-03-29 00:00:00");
}

/* No match for a thousand years is found quickly, and refused. */
static void test_never(void)
{
        struct calendar *c = NULL;
        char err[256] = "";
        int64_t next = 42;
        clock_t t0;

        set_tz("UTC");
        CHECK(calendar_parse("Mon *-02-30 23:59:59", &c, err, sizeof(err)) == 0, "Feb 30 parses");
        t0 = clock();
        CHECK(calendar_next(c, utc("2026-01-01 00:00:00"), &next) == -ENOENT && next == 42,
              "Feb 30 never comes: -ENOENT, *next untouched");
        CHECK((clock() - t0) < CLOCKS_PER_SEC / 10, "and the search takes under 100 ms (%ld clocks)",
              (long)(clock() - t0));
        calendar_free(c);
        CHECK(calendar_parse("2020-01-01", &c, err, sizeof(err)) == 0, "a past date parses");
        CHECK(calendar_next(c, utc("2026-01-01 00:00:00"), &next) == -ENOENT, "and never comes again");
        calendar_free(c);
        calendar_free(NULL);
}

int main(void)
{
        test_format();
        test_refused();
        test_next_utc();
        test_next_dst();
        test_never();
        return tap_done();
}
