/* calendar: calendar events in the syntax of systemd.time(7) (OnCalendar=),
 * for Schedule=: parsing, the next matching time, the normalized form.
 * Pure code: no syscalls beyond the C library's time zone conversions.
 *
 * The subset: "[WEEKDAYS] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]] [UTC]",
 * each part a list (",") of values, ranges ("A..B") and repetitions
 * ("A/N", "A..B/N"), or "*"; "MONTH~DAY" counts days from the month's end
 * (~1 the last day, ~7/1 the last seven); weekdays by name or abbreviation
 * with ranges "Mon..Fri"; the shorthands minutely hourly daily weekly
 * monthly yearly annually quarterly semiannually. Refused: fractions of a
 * second, time zones other than UTC; whatever systemd refuses.
 *
 * Times are local unless the text ends in UTC. In local time each wall
 * clock time matches once: a time that a DST change skips (the gap) does
 * not happen that day; a time that happens twice (the overlap) matches at
 * its first occurrence only — unless the search starts inside the repeated
 * hour, and then at the second. This is what systemd does. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define CALENDAR_TEXT_MAX 190 /* longest text calendar_parse accepts */
#define CALENDAR_ITEMS_MAX 24 /* list items in one part (values, ranges) */
#define CALENDAR_FORMAT_MAX 640 /* a buffer that holds any calendar_format */

struct calendar;

/* Parses text (systemd.time(7) calendar events); 0, or -EINVAL with why in err
 * (which quotes parts of text), or -ENOMEM. */
int calendar_parse(const char *text, struct calendar **out, char *err, size_t len);
/* The first time strictly after `after` (seconds since the epoch) that matches; 0 with
 * *next set, or -ENOENT if none within the next ~1000 years (e.g. Feb 30) or
 * before 2200 (systemd's last year).
 * Also -ERANGE for an `after` beyond +-2^40 (about 35000 years). */
int calendar_next(const struct calendar *c, int64_t after, int64_t *next);
/* The spec normalized as systemd-analyze prints it (for gadgetctl/status);
 * 0, or -ENOBUFS if it does not fit len (CALENDAR_FORMAT_MAX always does). */
int calendar_format(const struct calendar *c, char *out, size_t len);
void calendar_free(struct calendar *c);
