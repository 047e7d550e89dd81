/* spawn_setup: the setup gadgetd sends a new worker's gadgetd-sandbox
 * (proto/sandbox.proto): the program's argv and environment, the policy's
 * paths as gadgetd resolved them, the limits and the seccomp programs. */
#include "spawn.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "system/paths.h"
#include "policy.h"
#include "sandbox_abi.h"
#include "sandbox.pb-c.h"

/* The program's environment: the fixed entries, then the policy's own
 * (which may override PATH or HOME, never GADGET_FD/GADGET_NAME). */
static char **build_envp(const struct policy *p, size_t *n)
{
        char **envp = calloc(p->n_env + 6, sizeof *envp);
        *n = 0;
        if (!envp)
                return NULL;
        if (asprintf(&envp[(*n)++], "GADGET_FD=%d", SANDBOX_RPC_FD) < 0 ||
            asprintf(&envp[(*n)++], "GADGET_NAME=%s", p->name) < 0 ||
            !(envp[(*n)++] = strdup("PATH=/usr/local/bin:/usr/bin:/bin")) ||
            !(envp[(*n)++] = strdup("HOME=/tmp")))
                goto fail;
        for (size_t i = 0; i < p->n_env; i++) {
                if (strncmp(p->env[i], "GADGET_", 7) == 0)
                        continue;
                if (!(envp[(*n)++] = strdup(p->env[i])))
                        goto fail;
        }
        return envp;
fail:
        policy_strv_free(envp);
        return NULL;
}

/* argv[0] is the program path; then the arguments (args replace the
 * policy's when not NULL). */
static char **build_argv(const struct policy *p, char *const *args, size_t *n)
{
        size_t k = 0;
        if (args)
                while (args[k])
                        k++;
        else
                k = p->argc;
        char **argv = calloc(k + 2, sizeof *argv);
        if (!argv)
                return NULL;
        argv[0] = p->exec;
        for (size_t i = 0; i < k; i++)
                argv[i + 1] = args ? args[i] : p->argv[i];
        *n = k + 1;
        return argv;
}

/* The policy's host paths with symlinks resolved where that is safe; see
 * supervisor/system/paths.c. Sets err and returns -errno on the first refusal. */
static int resolve_paths(const struct policy *p, char ***ro_real, char *exec_real, char *err, size_t errlen)
{
        char real[PATH_MAX];
        const char *what = NULL;
        char **v = calloc(p->n_ro_paths + 1, sizeof *v);
        int e = v ? 0 : -ENOMEM;
        for (size_t i = 0; e == 0 && i < p->n_ro_paths; i++) {
                if ((e = paths_resolve_trusted(p->ro_paths[i], real)) < 0)
                        what = p->ro_paths[i];
                else if (!(v[i] = strdup(real)))
                        e = -ENOMEM;
        }
        if (e == 0 && (e = paths_resolve_trusted(p->exec, exec_real)) < 0)
                what = p->exec;
        if (e < 0) {
                if (e == -ELOOP)
                        snprintf(err, errlen, "bind (a symlink in a directory others may write) %s", what);
                else if (what)
                        snprintf(err, errlen, "resolve %s: %s", what, strerror(-e));
                else
                        snprintf(err, errlen, "out of memory");
                policy_strv_free(v);
                return e;
        }
        *ro_real = v;
        return 0;
}

static ProtobufCBinaryData bpf_bytes(const struct sock_fprog *p)
{
        return (ProtobufCBinaryData){ .len = p->len * sizeof *p->filter, .data = (uint8_t *)p->filter };
}

int spawn_setup_pack(const struct spawn_opts *o, struct wire_writer *w, char *err, size_t errlen)
{
        const struct policy *p = o->policy;
        Sandbox__Setup s = SANDBOX__SETUP__INIT;
        char exec_real[PATH_MAX], **ro_real = NULL;
        size_t n_argv = 0, n_envp = 0;
        char **argv = build_argv(p, o->args, &n_argv), **envp = build_envp(p, &n_envp);
        /* A probe enters a sandbox already built: no path of the host. */
        int e = !argv || !envp ? -ENOMEM : o->enter ? 0 : resolve_paths(p, &ro_real, exec_real, err, errlen);
        if (e == -ENOMEM)
                snprintf(err, errlen, "out of memory");
        if (e < 0)
                goto out;
        s.name = p->name;
        s.exec = p->exec;
        s.exec_real = o->enter ? "" : exec_real;
        s.n_argv = n_argv;
        s.argv = argv;
        s.n_envp = n_envp;
        s.envp = envp;
        s.n_ro_paths = s.n_ro_real = o->enter ? 0 : p->n_ro_paths;
        s.ro_paths = p->ro_paths;
        s.ro_real = ro_real;
        s.system_libraries = p->system_libraries;
        s.tmp_size = p->tmp_size;
        s.limit_nofile = p->limit_nofile;
        s.nproc = o->nproc;
        s.address_space = o->address_space;
        s.filter_list = bpf_bytes(&o->filter->list);
        s.filter_args = bpf_bytes(&o->filter->args);
        s.filter_init = bpf_bytes(&o->filter->init);
        s.prewarm = o->prewarm;
        s.handoff_ms = o->handoff_ms;
        wire_writer_init(w, 0);
        if ((e = wire_writer_put(w, &s.base, WIRE_MAX_FRAME)) < 0) {
                snprintf(err, errlen, "sandbox setup: %s", strerror(-e));
                wire_writer_free(w);
        }
out:
        free(argv);
        policy_strv_free(envp);
        policy_strv_free(ro_real);
        return e;
}
