/* report: what gadgetd-sandbox tells gadgetd on the report pipe
 * (sandbox.proto Report, one wire frame each, sandbox_abi.h). */
#include "sandbox.h"
#include "crash.h"

#include <limits.h>
#include <string.h>

#include "sandbox.pb-c.h"
#include "wire.h"

_Static_assert(SANDBOX_REPORT_MAX + WIRE_HEADER_SIZE <= PIPE_BUF, "a report must fit one atomic pipe write");
_Static_assert(2 * SANDBOX_REPORT_TEXT_MAX + 64 <= SANDBOX_REPORT_MAX, "a failure's texts must fit a report");

/* Sends r whole in one write; nothing useful can be done if gadgetd is
 * gone. */
static void send_report(int fd, const Sandbox__Report *r)
{
        (void)wire_send_atomic(fd, &r->base);
}

/* Copies at most SANDBOX_REPORT_TEXT_MAX bytes of s into buf, whole UTF-8
 * characters only: gadgetd refuses a longer or broken text. */
static const char *cut(char *buf, const char *s)
{
        size_t n = strlen(s);
        if (n > SANDBOX_REPORT_TEXT_MAX) {
                n = SANDBOX_REPORT_TEXT_MAX;
                while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
                        n--;
        }
        memcpy(buf, s, n);
        buf[n] = '\0';
        return buf;
}

void sandbox_report_failed(int fd, const char *step, const char *reason)
{
        char s[SANDBOX_REPORT_TEXT_MAX + 1], r[SANDBOX_REPORT_TEXT_MAX + 1];
        Sandbox__Failure f = SANDBOX__FAILURE__INIT;
        Sandbox__Report rep = SANDBOX__REPORT__INIT;
        f.step = (char *)cut(s, step);
        f.reason = (char *)cut(r, reason);
        rep.kind_case = SANDBOX__REPORT__KIND_FAILED;
        rep.failed = &f;
        send_report(fd, &rep);
}

void sandbox_report_ready(int fd, bool warm)
{
        Sandbox__Report rep = SANDBOX__REPORT__INIT;
        if (warm) {
                rep.kind_case = SANDBOX__REPORT__KIND_WARM;
                rep.warm = true;
        } else {
                rep.kind_case = SANDBOX__REPORT__KIND_READY;
                rep.ready = true;
        }
        send_report(fd, &rep);
}

void sandbox_report_status(int fd, int status)
{
        Sandbox__Report rep = SANDBOX__REPORT__INIT;
        rep.kind_case = SANDBOX__REPORT__KIND_WAIT_STATUS;
        rep.wait_status = (uint32_t)status;
        send_report(fd, &rep);
}

void sandbox_report_crash(int fd, const struct crash_info *c)
{
        char *frames[SANDBOX_CRASH_FRAMES_MAX];
        Sandbox__Crash cr = SANDBOX__CRASH__INIT;
        Sandbox__Report rep = SANDBOX__REPORT__INIT;
        _Static_assert(SANDBOX_CRASH_FRAMES_MAX * (SANDBOX_CRASH_FRAME_MAX + 2) + 64 <= SANDBOX_REPORT_MAX,
                       "a crash's backtrace must fit a report");
        cr.signal = (uint32_t)c->signal;
        cr.code = c->code;
        cr.address = c->address;
        cr.thread = (uint32_t)c->thread;
        cr.core_size = c->core_size;
        for (size_t i = 0; i < c->n_frames; i++)
                frames[i] = (char *)c->frames[i];
        cr.n_frames = c->n_frames;
        cr.frames = frames;
        rep.kind_case = SANDBOX__REPORT__KIND_CRASH;
        rep.crash = &cr;
        send_report(fd, &rep);
}
