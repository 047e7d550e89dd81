/* spawn_report: gadgetd's reading of the sandbox's reports (sandbox.proto
 * Report, framed by wire.c) on the report pipe: how the start went, then
 * how the program ended. They come from the sandbox's PID 1, which runs
 * inside the sandbox, so each is checked before anything of it is used. */
#include "spawn.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sandbox.pb-c.h"
#include "sandbox_abi.h"
#include "validate.h"

/* The name of a crash's si_code, as <signal.h> spells it. */
static const char *code_name(int sig, int code)
{
        static const char *const segv[] = { "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR" };
        static const char *const bus[] = { "BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR",
                                           "BUS_MCEERR_AO" };
        static const char *const ill[] = { "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP",
                                           "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK" };
        static const char *const fpe[] = { "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF",
                                           "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB" };
        static const char *const trap[] = { "TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT" };
#define CODE(table) (code >= 1 && (size_t)code <= sizeof table / sizeof *table ? table[code - 1] : NULL)
        const char *n = sig == SIGSEGV ? CODE(segv) : sig == SIGBUS ? CODE(bus) : sig == SIGILL ? CODE(ill) :
                        sig == SIGFPE ? CODE(fpe) : sig == SIGTRAP ? CODE(trap) :
                        sig == SIGSYS && code == 1 ? "SYS_SECCOMP" : NULL;
#undef CODE
        if (n)
                return n;
        switch (code) {
        case SI_USER: return "SI_USER";
        case SI_KERNEL: return "SI_KERNEL";
        case SI_QUEUE: return "SI_QUEUE";
        case SI_TIMER: return "SI_TIMER";
        case SI_TKILL: return "SI_TKILL";
        default: return NULL;
        }
}

/* "killed by SIGSEGV (SEGV_MAPERR at 0x0) in f": the signal, its code, the
 * fault address when the kernel gave one, the top frame's function. */
static void crash_fill(const Sandbox__Crash *c, struct spawn_crash *out)
{
        const char *sig = sigabbrev_np((int)c->signal), *code = code_name((int)c->signal, c->code);
        char codebuf[24], at[40] = "", in[SANDBOX_CRASH_FRAME_MAX + 8] = "";
        if (!code) {
                snprintf(codebuf, sizeof codebuf, "code %d", c->code);
                code = codebuf;
        }
        if (c->code > 0 && c->signal != SIGABRT && c->signal != SIGSYS)
                snprintf(at, sizeof at, " at 0x%llx", (unsigned long long)c->address);
        if (c->n_frames > 0 && strncmp(c->frames[0], "0x", 2) != 0)
                snprintf(in, sizeof in, " in %.*s", (int)strcspn(c->frames[0], "+ "), c->frames[0]);
        snprintf(out->cause, sizeof out->cause, "killed by SIG%s (%s%s)%s", sig ? sig : "?", code, at, in);
        out->signal = (int)c->signal;
        out->core_size = c->core_size;
        out->n_frames = c->n_frames;
        for (size_t i = 0; i < c->n_frames; i++)
                snprintf(out->frames[i], sizeof out->frames[i], "%s", c->frames[i]);
}

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
        case SANDBOX__REPORT__KIND_CRASH:
                if (out)
                        crash_fill(r->crash, &out->crash);
                return SPAWN_REPORT_CRASH;
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
