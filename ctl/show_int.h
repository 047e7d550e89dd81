/* show_int: what the files of the show module share (show.c,
 * show_answers.c); not for other modules. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

/* A uint64 as a JSON integer (int64), saturated. */
static inline json_int_t show_clamp(uint64_t v)
{
        return v > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX : (json_int_t)v;
}

/* Prints s escaped for a terminal (output_escape's flags). 0 or -ENOMEM. */
int show_put_escaped(FILE *f, const char *s, unsigned flags);
/* "a, b, c" (each escaped) and the end of the line. */
int show_put_joined(FILE *f, char *const *v, size_t n);
