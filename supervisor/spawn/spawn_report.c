/* spawn_report: gadgetd's reading of the sandbox's reports (sandbox.proto
 * Report, framed by wire.c) on the report pipe: how the start went, then
 * how the program ended. They come from the sandbox's PID 1, which runs
 * inside the sandbox, so each is checked before anything of it is used. */
#include "spawn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandbox.pb-c.h"
#include "sandbox_abi.h"
#include "validate.h"

/* What a checked report says, in the caller's terms. */
static int report_kind(const Sandbox__Report *r, int *status, struct spawn_report_out *out, char *msg, size_t msglen)
{
        switch (r->kind_case) {
        case SANDBOX__REPORT__KIND_FAILED:
                snprintf(msg, msglen, "%s: %s", r->failed->step, r->failed->reason);
                return SPAWN_REPORT_FAILED;
        case SANDBOX__REPORT__KIND_WARM:
                return SPAWN_REPORT_WARM;
        case SANDBOX__REPORT__KIND_READY:
                return SPAWN_REPORT_READY;
        case SANDBOX__REPORT__KIND_WAIT_STATUS:
                if (status)
                        *status = (int)r->wait_status;
                return SPAWN_REPORT_STATUS;
        case SANDBOX__REPORT__KIND_DENIALS:
                for (size_t i = 0; out && i < r->denials->n_calls; i++) {
                        const Sandbox__Denial *d = r->denials->calls[i];
                        struct spawn_denial *o = &out->denials.calls[i];
                        *o = (struct spawn_denial){ .nr = d->nr, .error = d->error, .count = d->count,
                                                    .first_ms = d->first_ms, .last_ms = d->last_ms };
                        snprintf(o->path, sizeof o->path, "%s", d->path);
                        out->denials.n = i + 1;
                }
                return SPAWN_REPORT_DENIALS;
        case SANDBOX__REPORT__KIND_LEARNED:
                if (out) {
                        out->learned.nr = r->learned->nr;
                        snprintf(out->learned.path, sizeof out->learned.path, "%s", r->learned->path);
                        snprintf(out->learned.interpreter_of, sizeof out->learned.interpreter_of, "%s",
                                 r->learned->interpreter_of);
                }
                return SPAWN_REPORT_LEARNED;
        default: /* refused by validate_sandbox_report */
                return -EPROTO;
        }
}

/* Unpacks and checks one report frame. */
static int report_decode(const uint8_t *data, size_t len, int *status, struct spawn_report_out *out, char *msg,
                         size_t msglen)
{
        char why[200];
        Sandbox__Report *r = sandbox__report__unpack(NULL, len, data);
        if (!r) {
                snprintf(msg, msglen, "not a report");
                return -EPROTO;
        }
        int e = validate_sandbox_report(r, why, sizeof why);
        if (e < 0)
                snprintf(msg, msglen, "%s", why);
        else
                e = report_kind(r, status, out, msg, msglen);
        sandbox__report__free_unpacked(r, NULL);
        return e;
}

int spawn_read_report(struct spawn_child *c, int *status, struct spawn_report_out *out, char *msg, size_t msglen)
{
        const uint8_t *data;
        size_t len;
        /* Exact: one report per call, the next stays in the pipe (and wakes
         * the caller's loop again). Why this cannot stall gadgetd: the pipe
         * is non-blocking, and a report that came in part waits in
         * c->report for its rest; its size was checked before any of it
         * was buffered (SANDBOX_REPORT_MAX). */
        int e = wire_recv_exact(&c->report, c->report_fd, &data, &len);
        if (e == -EMSGSIZE)
                snprintf(msg, msglen, "a report of more than %u bytes", SANDBOX_REPORT_MAX);
        else if (e == -EPROTO)
                snprintf(msg, msglen, "the report pipe ended inside a report");
        if (e <= 0)
                return e == -EMSGSIZE ? -EPROTO : e;
        e = report_decode(data, len, status, out, msg, msglen);
        /* Nothing is buffered past the report: keep no buffer between
         * reports (a thousand gadgets would keep one each). */
        wire_reader_free(&c->report);
        return e;
}
