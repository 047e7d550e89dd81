/* calendar_int: the parsed form of a calendar event, shared by calendar.c
 * (parsing, formatting) and calendar_next.c (the search). Private to them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CAL_YEAR_MAX 2199 /* systemd's last year */

enum { CAL_YEAR, CAL_MONTH, CAL_DAY, CAL_HOUR, CAL_MINUTE, CAL_SECOND, CAL_N };

/* start, start..stop, start/repeat (up to the part's largest value) or
 * start..stop/repeat; stop is -1 when not given. */
struct cal_item {
        int start, stop, repeat;
};

/* A list of items, sorted, each once; no items: "*". */
struct cal_part {
        struct cal_item *items;
        size_t n;
};

struct calendar {
        uint8_t weekdays;            /* bit 0 Monday .. bit 6 Sunday; 0: any day */
        bool utc;                    /* else local time */
        bool end_of_month;           /* MONTH~DAY: days count from the month's last (1) */
        struct cal_part part[CAL_N];
};
