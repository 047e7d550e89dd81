/* learn: the policy gadgetd run --learn writes (learn.c). */
#pragma once

#include <stddef.h>

struct policy;
struct learned;
struct denials;

/* Writes to out the policy p (read from policy_path) with what a learning
 * run found: l, the paths its program could not find, and d, the calls its
 * filter refused (either NULL: none). 0, or -errno with err. */
int learn_write(const char *out, const char *policy_path, const struct policy *p, const struct learned *l,
                const struct denials *d, char *err, size_t errlen);
