/* exec: gadgetctl exec — root's only; the command runs in the gadget's
 * running sandbox as the gadget (core/unit_exec.h) with the stdin, stdout
 * and stderr that came with the request (control.c's take_fds), and the
 * answer, its exit status, comes when it ends. One exec per connection; a
 * client that leaves ends its command. */
#include <stdio.h>
#include <stdlib.h>

#include "client.h"
#include "control.h"
#include "contract.h"
#include "core/unit_exec.h"
#include "system/audit.h"
#include "system/log.h"

struct exec_probe {
        struct client *cl;
        uint64_t id;
        struct unit_exec *x;
};

static void exec_done(void *arg, int status, const char *failed)
{
        struct exec_probe *p = arg;
        struct client *cl = p->cl;
        cl->exec = NULL;
        if (failed) {
                client_error(cl, p->id, GADGET_EFAILED, "exec: %s", failed);
        } else {
                Control__ExecEnd end = CONTROL__EXEC_END__INIT;
                end.status = status;
                client_answer(cl, p->id, &end.base);
        }
        free(p);
}

/* A member of the control group asked: refused, logged and audited. Why
 * root only: the command runs with the gadget's rights, which a member
 * does not have (it may only call the gadget's methods). */
static void exec_refused(struct client *cl, const Control__Request *q)
{
        char text[160];
        snprintf(text, sizeof text, "gadgetctl exec by uid %u refused: root only", (unsigned)cl->cred.uid);
        client_error(cl, q->id, GADGET_EDENIED, "exec is root's only");
        if (!core_find(client_env(cl)->core, q->exec->name))
                return;
        log_msg(L_WARN, q->exec->name, "%s", text);
        struct audit_record rec = { .gadget = q->exec->name, .binding = "exec", .op = "start",
                                    .outcome = AUDIT_DENIED, .detail = text, .has_uid = true,
                                    .uid = (uint32_t)cl->cred.uid };
        audit_write(core_audit(client_env(cl)->core), &rec);
}

void request_exec(struct client *cl, const Control__Request *q)
{
        const Control__Exec *x = q->exec;
        char msg[700];
        if (cl->cred.uid != 0) {
                exec_refused(cl, q);
                return;
        }
        if (cl->exec) {
                client_error(cl, q->id, GADGET_EBUSY, "one exec at a time on a connection");
                return;
        }
        struct unit *u = core_find(client_env(cl)->core, x->name);
        if (!u) {
                client_error(cl, q->id, GADGET_ENOTFOUND, "no gadget named \"%s\"", x->name);
                return;
        }
        char **argv = calloc(x->n_argv + 1, sizeof *argv);
        struct exec_probe *p = calloc(1, sizeof *p);
        int code = GADGET_EINTERNAL;
        snprintf(msg, sizeof msg, "out of memory");
        if (argv && p) {
                for (size_t i = 0; i < x->n_argv; i++)
                        argv[i] = x->argv[i];
                *p = (struct exec_probe){ .cl = cl, .id = q->id };
                code = unit_exec_start(u, argv, cl->fds, (uint32_t)cl->cred.uid, exec_done, p, &p->x, msg,
                                       sizeof msg);
        }
        free(argv);
        if (code) {
                free(p);
                client_error(cl, q->id, code, "%s", msg);
                return;
        }
        cl->exec = p;
}

void exec_client_gone(struct client *cl)
{
        if (!cl->exec)
                return;
        unit_exec_cancel(cl->exec->x);
        free(cl->exec);
        cl->exec = NULL;
}
