/* unit_exec: gadgetctl exec's probes (unit_exec.h). A probe is
 * gadgetd-sandbox --enter, gadgetd's child; what it reports (a failed
 * step, or the command's wait status) is read on the loop. It holds no
 * reference to its unit: a gadget that ends takes the command with it (its
 * PID namespace), and the probe then reports that end. */
#include "unit_exec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_int.h"
#include "contract.h"
#include "sandbox_abi.h"
#include "policy.h"
#include "system/audit.h"
#include "system/log.h"

/* The command as audited: its words, escaped, cut at this many bytes. */
#define EXEC_AUDIT_TEXT 512

struct unit_exec {
        struct spawn_child probe;
        struct event *ev;
        struct audit *audit;
        char name[GADGET_NAME_MAX + 1];
        char command[EXEC_AUDIT_TEXT];
        uint32_t uid;
        unit_exec_done done;
        void *arg;
};

/* One audit record and log line of the probe: its start, or its end. */
static void exec_audit(const struct unit_exec *x, const char *op, bool ok, const char *what)
{
        /* The command and the longest what (an end's message: a report's
         * why, 1 KiB at most) whole, with the words around them. */
        char text[EXEC_AUDIT_TEXT + 1100];
        snprintf(text, sizeof text, "gadgetctl exec by uid %u: %s: %s", (unsigned)x->uid, x->command, what);
        log_msg(ok ? L_INFO : L_WARN, x->name, "%s", text);
        struct audit_record rec = { .gadget = x->name, .binding = "exec", .op = op,
                                    .outcome = ok ? AUDIT_OK : AUDIT_ERROR, .detail = text,
                                    .has_uid = true, .uid = x->uid };
        audit_write(x->audit, &rec);
}

/* The words of argv, escaped, into x->command. */
static void exec_command_text(struct unit_exec *x, char *const *argv)
{
        size_t at = 0;
        x->command[0] = '\0';
        for (size_t i = 0; argv[i] && at + 1 < sizeof x->command; i++) {
                char word[EXEC_AUDIT_TEXT];
                log_escape(argv[i], strlen(argv[i]), word, sizeof word);
                at += (size_t)snprintf(x->command + at, sizeof x->command - at, "%s%s", i ? " " : "", word);
        }
}

static void exec_free(struct unit_exec *x)
{
        if (x->probe.pid > 0)
                while (waitpid(x->probe.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        x->probe.pid = -1;
        if (x->ev)
                event_free(x->ev);
        spawn_child_close(&x->probe);
        free(x);
}

/* What the probe reported: a failure first (the command never ran), or
 * the command's wait status; end of file without either is a probe that
 * was killed. */
static void exec_report_cb(evutil_socket_t fd, short what, void *arg)
{
        struct unit_exec *x = arg;
        char why[2 * SANDBOX_REPORT_TEXT_MAX + 3] = "", msg[sizeof why + 32];
        int status = 0;
        int r = spawn_read_report(&x->probe, &status, NULL, why, sizeof why);
        if (r == -EAGAIN || r == SPAWN_REPORT_READY || r == SPAWN_REPORT_WARM || r == SPAWN_REPORT_DENIALS)
                return;
        int code = 0;
        const char *failed = NULL;
        if (r == SPAWN_REPORT_STATUS) {
                code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                snprintf(msg, sizeof msg, "ended with status %d", code);
        } else {
                if (r == -EPROTO)
                        snprintf(msg, sizeof msg, "probe report refused: %s", why);
                else
                        snprintf(msg, sizeof msg, "%s", r == SPAWN_REPORT_FAILED ? why : "the probe ended");
                failed = msg;
        }
        exec_audit(x, "end", !failed, msg);
        unit_exec_done done = x->done;
        void *cbarg = x->arg;
        exec_free(x);
        done(cbarg, code, failed);
}

int unit_exec_start(struct unit *u, char *const *argv, const int *stdio, uint32_t uid, unit_exec_done done,
                    void *arg, struct unit_exec **out, char *msg, size_t len)
{
        struct unit_run *r = u->run;
        /* A pre-warmed sandbox runs no program yet; a remote gadget runs
         * elsewhere. */
        if (!unit_runs_here(u) || r->child.pid <= 0 || r->child.go_fd >= 0 || r->child.start_want || r->ending) {
                snprintf(msg, len, "%s has no process running on this node", u->policy->name);
                return GADGET_EUNAVAILABLE;
        }
        struct unit_exec *x = calloc(1, sizeof *x);
        if (!x) {
                snprintf(msg, len, "out of memory");
                return GADGET_EINTERNAL;
        }
        x->probe = SPAWN_CHILD_NONE;
        x->audit = u->core->audit;
        x->uid = uid;
        x->done = done;
        x->arg = arg;
        snprintf(x->name, sizeof x->name, "%s", u->policy->name);
        exec_command_text(x, argv);
        struct spawn_opts so = { .policy = u->policy, .args = argv, .filter = &u->core->filter,
                                 .helper = &u->core->helper, .nproc = r->limits.nproc,
                                 .address_space = r->limits.address_space };
        char err[600];
        int e = spawn_enter(&so, r->child.pidfd, r->limits.cg, stdio, &x->probe, err, sizeof err);
        if (e == 0 && (!(x->ev = event_new(u->core->base, x->probe.report_fd, EV_READ | EV_PERSIST, exec_report_cb,
                                           x)) || event_add(x->ev, NULL) < 0)) {
                kill(x->probe.pid, SIGKILL);
                snprintf(err, sizeof err, "out of memory");
                e = -ENOMEM;
        }
        if (e < 0) {
                exec_audit(x, "start", false, err);
                snprintf(msg, len, "%s", err);
                exec_free(x);
                return GADGET_EFAILED;
        }
        exec_audit(x, "start", true, "started");
        *out = x;
        return 0;
}

void unit_exec_cancel(struct unit_exec *x)
{
        if (!x)
                return;
        kill(x->probe.pid, SIGKILL);
        exec_audit(x, "end", false, "ended by gadgetd: gadgetctl left");
        exec_free(x);
}
