/* output: pure text formatting for gadgetctl: human units, durations,
 * aligned tables, and escaping of untrusted strings before they reach a
 * terminal. No protocol knowledge, no syscalls beyond stdio. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Room for any output_uptime / output_size result. */
#define OUTPUT_UNIT_MAX 24

/* "3s", "5m12s", "2h03m", "4d01h"; "-" for 0 (not running). Returns buf. */
const char *output_uptime(uint64_t ms, char *buf, size_t len);
/* "512B", "1.5K", "12.3M" (powers of 1024); "-" for 0 (unknown). Returns buf. */
const char *output_size(uint64_t bytes, char *buf, size_t len);
/* How long ago something was seen: "now" (under a second), "3 s ago",
 * "2 min ago", "5 h ago", "4 d ago" (whole units, rounded down). Returns buf. */
const char *output_ago(uint64_t ms, char *buf, size_t len);
/* CPU time: "0.05s", "12.34s", then as output_uptime ("5m12s"); "-" for 0
 * (unknown). Returns buf. */
const char *output_cpu(uint64_t usec, char *buf, size_t len);
/* A call's duration: "850 us" under 10 ms, then "12.3 ms". Returns buf. */
const char *output_duration_us(uint64_t us, char *buf, size_t len);

/* Room for any output_log_time result. */
#define OUTPUT_LOG_TIME_MAX 32
/* A log line's time as journalctl's short-precise writes it, local time to
 * the millisecond: "Dec 06 05:03:50.123"; "-" for 0 (unknown). Returns buf. */
const char *output_log_time(int64_t ms, char *buf, size_t len);
/* The same in UTC as ISO 8601 for JSON: "2026-12-06T05:03:50.123Z" ("" for 0). */
const char *output_log_time_iso(int64_t ms, char *buf, size_t len);
/* --since TIME, a wall-clock time in ms since the epoch: a duration ago
 * ("5min", "30s", "2h", "250ms"; "5min ago" and "-5min" too), or a date and
 * time "YYYY-MM-DD HH:MM[:SS[.mmm]]", local, or with a T between and a Z
 * after, UTC ("2026-12-06T05:03:50Z"); a date alone is its midnight. now_ms
 * is the wall clock now. 0, or -EINVAL. */
int output_parse_since(const char *s, int64_t now_ms, int64_t *out);

/* Flags of output_escape. */
#define OUTPUT_KEEP_TAB 1u
#define OUTPUT_KEEP_NEWLINE 2u

/* A copy of s that is safe to print on a terminal: C0 and C1 control
 * characters, DEL, bidirectional overrides and invalid UTF-8 are written as
 * \xNN per byte (tab and newline kept if flags say so). malloc'd, NULL if out
 * of memory. */
char *output_escape(const char *s, unsigned flags);
/* Columns a UTF-8 string takes: one per code point. */
size_t output_width(const char *s);

/* A table printed with aligned columns, two spaces apart. */
struct output_table;

/* headers: n_cols column titles; right: per column, true to right-align
 * (NULL: all left). NULL if out of memory. */
struct output_table *output_table_new(size_t n_cols, const char *const *headers, const bool *right);
/* Appends a row of n_cols cells (copied and escaped). 0 or -ENOMEM. */
int output_table_add(struct output_table *t, const char *const *cells);
size_t output_table_rows(const struct output_table *t);
/* Prints the header and every row. 0 or -EIO. */
int output_table_print(const struct output_table *t, FILE *f);
void output_table_free(struct output_table *t);
