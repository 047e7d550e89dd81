/* Unit tests of proto/traceparent.c: the W3C traceparent text, read
 * strictly (a hostile header is refused whole) and written back. */
#include <string.h>

#include "tap.h"
#include "traceparent.h"

static int parse(const char *s, struct trace_ctx *t)
{
        return traceparent_parse(s, strlen(s), t);
}

int main(void)
{
        struct trace_ctx t;
        const char *good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        CHECK(parse(good, &t) == 0, "the W3C text's example is read");
        CHECK(t.trace_id[0] == 0x4b && t.trace_id[15] == 0x36 && t.span_id[0] == 0x00 && t.span_id[7] == 0xb7 &&
              t.flags == 1, "its ids and flags");
        char back[TRACEPARENT_LEN + 1];
        traceparent_format(&t, back);
        CHECK_STR(back, good, "written back as read");
        CHECK(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-says", &t) == 0,
              "a later version's longer text: its first 55 characters");
        static const char *const bad[] = {
                "",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",          /* too short */
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",        /* 00 is exactly 55 */
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        /* version ff */
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        /* upper case */
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",        /* not hex */
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",        /* zero trace id */
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        /* zero span id */
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        /* separator */
                "0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
                "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",       /* later version, no dash */
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                memset(&t, 0xaa, sizeof t);
                CHECK(parse(bad[i], &t) < 0 && t.flags == 0xaa, "refused, untouched: \"%s\"", bad[i]);
        }
        char huge[TRACEPARENT_MAX + 2];
        memset(huge, '-', sizeof huge);
        memcpy(huge, "01", 2);
        memcpy(huge + 2, good + 2, TRACEPARENT_LEN - 2);
        CHECK(traceparent_parse(huge, sizeof huge, &t) < 0, "longer than %d: refused", TRACEPARENT_MAX);
        CHECK(traceparent_parse(NULL, 0, &t) < 0, "NULL is refused");
        uint8_t id[2];
        CHECK(trace_unhex("0aff", 2, id) == 0 && id[0] == 0x0a && id[1] == 0xff, "hex read");
        CHECK(trace_unhex("0A", 1, id) < 0, "upper-case hex refused");
        return tap_done();
}
