/* tap: a minimal Test Anything Protocol writer for C tests run by meson
 * (protocol: 'tap'). Each check prints one "ok"/"not ok" line. */
#pragma once

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define CHECK(cond, ...)                                                        \
        do {                                                                    \
                int ok_ = !!(cond);                                             \
                tap_n++;                                                        \
                if (!ok_)                                                       \
                        tap_failed++;                                           \
                printf("%s %d - ", ok_ ? "ok" : "not ok", tap_n);               \
                printf(__VA_ARGS__);                                            \
                printf("\n");                                                   \
                if (!ok_)                                                       \
                        printf("#   failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
        } while (0)

#define CHECK_STR(got, want, ...)                                               \
        do {                                                                    \
                const char *g_ = (got), *w_ = (want);                           \
                CHECK(g_ && w_ && strcmp(g_, w_) == 0, __VA_ARGS__);            \
                if (!(g_ && w_ && strcmp(g_, w_) == 0))                         \
                        printf("#   got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
        } while (0)

static inline int tap_done(void)
{
        printf("1..%d\n", tap_n);
        return tap_failed ? 1 : 0;
}
