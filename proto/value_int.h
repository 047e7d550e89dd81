/* value_int.h: what value.c and value_packed.c share. Private to proto/. */
#ifndef GADGETD_VALUE_INT_H
#define GADGETD_VALUE_INT_H

#include <stddef.h>

/* Writes a reason to why (if given) and returns -EINVAL. */
int value_fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
